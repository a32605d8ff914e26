package kafkatest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A broker whose metadata lags a new topic answers ListOffsets with
// NOT_LEADER_OR_FOLLOWER for a moment (seen on Kafka 4.1.1 in CI); the offsets
// helpers retry that, and fail at once on an answer no retry cures.
func TestListOffsetsRetriesNotLeader(t *testing.T) {
	b := Start(t)
	c := b.Cluster()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	topic := c.Unique("lagging")
	if err := c.CreateTopic(ctx, topic, 3, nil); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		msgs := make([]*sarama.ProducerMessage, p+1)
		for i := range msgs {
			msgs[i] = &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("v")}
		}
		if err := c.ProduceToPartition(ctx, topic, p, msgs...); err != nil {
			t.Fatal(err)
		}
	}

	// answer sets the error code of partition 2 in the next `times` ListOffsets
	// responses; it counts what it injected.
	answer := func(code int16, times int32) *atomic.Int32 {
		var injected atomic.Int32
		b.Kfake().ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
			if injected.Load() >= times {
				return nil, nil, false
			}
			b.Kfake().KeepControl()
			injected.Add(1)
			r := req.(*kmsg.ListOffsetsRequest)
			resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
			for _, rt := range r.Topics {
				st := kmsg.NewListOffsetsResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					sp := kmsg.NewListOffsetsResponseTopicPartition()
					sp.Partition = rp.Partition
					if rp.Partition == 2 {
						sp.ErrorCode = code
					} else {
						sp.Offset = int64(rp.Partition) + 1
					}
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		})
		return &injected
	}

	injected := answer(kerr.NotLeaderForPartition.Code, 2)
	ends, err := c.EndOffsets(ctx, topic, sarama.ReadUncommitted)
	if err != nil {
		t.Fatalf("after %d NOT_LEADER answers: %v", injected.Load(), err)
	}
	if injected.Load() != 2 {
		t.Fatalf("injected %d NOT_LEADER answers, want 2", injected.Load())
	}
	for p, want := range map[int32]int64{0: 1, 1: 2, 2: 3} {
		if ends[p] != want {
			t.Errorf("partition %d: end offset %d, want %d (all: %v)", p, ends[p], want, ends)
		}
	}

	injected = answer(kerr.TopicAuthorizationFailed.Code, 1)
	began := time.Now()
	_, err = c.EndOffsets(ctx, topic, sarama.ReadUncommitted)
	if !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Fatalf("got %v, want the authorization error", err)
	}
	if n := injected.Load(); n != 1 {
		t.Errorf("an authorization error was asked %d times, want once (no retry)", n)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("a permanent error took %v", d)
	}
}
