package producer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/txproducer"
)

// TestRecordBatchSizeIsWhatTheBrokerMeasures: a record whose RecordBatchSize equals the
// topic's max.message.bytes is taken and one a byte larger is refused with
// MESSAGE_TOO_LARGE, by kfake and by Kafka, with a key or without, with headers or
// without: the size eddy checks an output record against before sending it is the
// broker's. The refusal comes back as a RecordError naming the record's topic,
// partition, size and the input record it came from, classified Fatal (the same record
// fails again after every abort and replay). Kills the mutants "no batch header", "the
// record's length prefix left out", "a nil key's length left out", "a header value's
// length left out" and "a byte too many".
func TestRecordBatchSizeIsWhatTheBrokerMeasures(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const limit = 2000
		topic := c.Unique("limited")
		if err := c.CreateTopic(ctx, topic, 1, map[string]string{"max.message.bytes": fmt.Sprint(limit)}); err != nil {
			t.Fatal(err)
		}
		p, err := producer.New(ctx, producer.Config{Brokers: c.Addrs(), Sarama: kafkatest.NewSaramaConfig(), TransactionalID: c.Unique("txn")})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		cases := []struct {
			name    string
			key     []byte
			headers []sarama.RecordHeader
		}{
			{"key", []byte("some key"), nil},
			{"nil key", nil, nil},
			{"headers", []byte("k"), []sarama.RecordHeader{{Key: []byte("h1"), Value: []byte("v1")}, {Key: []byte("h2"), Value: nil}}},
		}
		origin := &producer.Origin{Topic: "in", Partition: 3, Offset: 42}
		for _, cs := range cases {
			// The value that makes the batch exactly limit bytes (the sizes of the
			// varints change with it, so search).
			n := 0
			for producer.RecordBatchSize(cs.key, make([]byte, n+1), cs.headers) <= limit {
				n++
			}
			at, over := make([]byte, n), make([]byte, n+1)
			if got := producer.RecordBatchSize(cs.key, at, cs.headers); got != limit {
				t.Fatalf("%s: no value length gives exactly %d bytes (got %d)", cs.name, limit, got)
			}
			if err := p.SendFrom(ctx, origin, topic, 0, cs.key, at, cs.headers, time.Now()); err != nil {
				t.Fatal(err)
			}
			if err := p.Commit(ctx, nil, nil); err != nil {
				t.Fatalf("%s: a record of exactly max.message.bytes (%d) was refused: %v", cs.name, limit, err)
			}
			if err := p.SendFrom(ctx, origin, topic, 0, cs.key, over, cs.headers, time.Now()); err != nil {
				t.Fatal(err)
			}
			err := p.Flush(ctx)
			var re *producer.RecordError
			if !errors.As(err, &re) || !errors.Is(err, sarama.ErrMessageSizeTooLarge) {
				t.Fatalf("%s: a record of %d bytes (max.message.bytes %d): %v, want a RecordError for MESSAGE_TOO_LARGE", cs.name, limit+1, limit, err)
			}
			if re.Topic != topic || re.Partition != 0 || re.Size != limit+1 || re.Origin == nil || *re.Origin != *origin {
				t.Errorf("%s: RecordError %+v, want topic %s/0, size %d, origin %+v", cs.name, re, topic, limit+1, origin)
			}
			if got := producer.Classify(err, 0); got != txproducer.Fatal {
				t.Errorf("%s: Classify = %v, want fatal", cs.name, got)
			}
			for _, want := range []string{topic + "/0", fmt.Sprintf("(%d bytes)", limit+1), "from input record in/3 offset 42"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: the error does not name %q: %v", cs.name, want, err)
				}
			}
			if err := p.Abort(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestPermanentRecordErrors(t *testing.T) {
	for _, err := range []error{sarama.ErrMessageSizeTooLarge, sarama.ErrMessageSetSizeTooLarge, sarama.ErrInvalidRecord, sarama.ErrInvalidTimestamp} {
		wrapped := fmt.Errorf("send: %w", err)
		if !producer.Permanent(wrapped) {
			t.Errorf("%v is not permanent", err)
		}
		if got := producer.Classify(wrapped, sarama.ProducerTxnFlagAbortableError); got != txproducer.Fatal {
			t.Errorf("Classify(%v) = %v, want fatal: an abort and a replay meet it again", err, got)
		}
	}
	for _, err := range []error{sarama.ErrNotEnoughReplicas, sarama.ErrNotLeaderForPartition, sarama.ErrInvalidMessage, sarama.ErrRequestTimedOut} {
		if producer.Permanent(err) {
			t.Errorf("%v is permanent; it can pass", err)
		}
	}
}

// TestSendWithinKeepsBatchesUnderTheLimit: records that each fit a topic's
// max.message.bytes, sent as fast as they come with timestamps years apart (the widest
// timestamp deltas a batch can hold), all go through SendWithin and commit: no batch
// sarama makes exceeds the limit. Sent with SendFrom they go out in batches the
// broker refuses. Kills the mutants "no wait" and "the timestamp delta not counted"
// (recordDeltasMax 0: a batch over the limit).
func TestSendWithinKeepsBatchesUnderTheLimit(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const limit = 2000
		topic := c.Unique("limited")
		if err := c.CreateTopic(ctx, topic, 1, map[string]string{"max.message.bytes": fmt.Sprint(limit)}); err != nil {
			t.Fatal(err)
		}
		p, err := producer.New(ctx, producer.Config{Brokers: c.Addrs(), Sarama: kafkatest.NewSaramaConfig(), TransactionalID: c.Unique("txn")})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		send := func(within bool) error {
			for i := range 300 {
				ts := time.UnixMilli(int64(i%2) * 40 * 365 * 24 * time.Hour.Milliseconds()) // 1970 and 2010
				value := make([]byte, 40+i%7)
				var err error
				if within {
					err = p.SendWithin(ctx, limit, nil, topic, 0, []byte(fmt.Sprint(i)), value, nil, ts)
				} else {
					err = p.SendFrom(ctx, nil, topic, 0, []byte(fmt.Sprint(i)), value, nil, ts)
				}
				if err != nil {
					return err
				}
			}
			return p.Commit(ctx, nil, nil)
		}
		if err := send(true); err != nil {
			t.Fatalf("SendWithin: %v", err)
		}
		// The control: without the limit the same records make a batch the broker
		// refuses, so the test sees what it guards against. sarama flags the
		// transaction failed before it hands the refused record's error over, so a
		// send that begins the next transaction in between fails with "invalid
		// transition attempted" alone (a fresh-clone CI run, on kfake); the refusal
		// then comes with the flush.
		err = send(false)
		if errors.Is(err, sarama.ErrTransitionNotAllowed) && !errors.Is(err, sarama.ErrMessageSizeTooLarge) {
			err = errors.Join(err, p.Flush(ctx))
		}
		if !errors.Is(err, sarama.ErrMessageSizeTooLarge) {
			t.Fatalf("SendFrom of the same records: %v, want MESSAGE_TOO_LARGE (else the test shows nothing)", err)
		}
	})
}
