package eddy

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/kafkatest"
)

// countingDeleter counts the DeleteRecords calls that reach a real cluster admin.
type countingDeleter struct {
	sarama.ClusterAdmin
	calls atomic.Int32
}

func (d *countingDeleter) DeleteRecords(topic string, below map[int32]int64) error {
	d.calls.Add(1)
	return d.ClusterAdmin.DeleteRecords(topic, below)
}

// TestPurgerDropsAnOffsetPastTheEnd: a request to delete below an offset past a
// partition's high-water mark (asked for a topic since deleted and created anew) can
// never succeed. The purger used to keep it as the partition's largest offset and retry
// it for ever, and every later request for the partition merged into it: a valid one
// was never sent. Now it is dropped, and the valid requests of the same topic are
// carried out.
func TestPurgerDropsAnOffsetPastTheEnd(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		topic := c.Unique("rep")
		if err := c.CreateTopic(ctx, topic, 2, map[string]string{"cleanup.policy": "delete", "retention.ms": "-1"}); err != nil {
			t.Fatal(err)
		}
		for p := range int32(2) {
			for i := range 5 {
				if err := c.ProduceToPartition(ctx, topic, p, &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprint(i))}); err != nil {
					t.Fatal(err)
				}
			}
		}
		client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		admin, err := sarama.NewClusterAdminFromClient(client)
		if err != nil {
			t.Fatal(err)
		}
		del := &countingDeleter{ClusterAdmin: admin}
		var logs strings.Builder
		var logMu sync.Mutex
		logger := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
			logMu.Lock()
			defer logMu.Unlock()
			return logs.Write(b)
		}), nil))
		p := newPurger(func() (recordDeleter, error) { return del, nil }, 50*time.Millisecond, logger)
		runCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { p.run(runCtx) })
		defer func() { stop(); wg.Wait() }()

		logStart := func(part int32) int64 {
			start, _, err := kread.EndOffsets(client, topic, part)
			if err != nil {
				t.Fatal(err)
			}
			return start
		}
		waitStart := func(part int32, want int64) {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for logStart(part) != want {
				if time.Now().After(deadline) {
					logMu.Lock()
					defer logMu.Unlock()
					t.Fatalf("partition %d: log start %d after 10 s, want %d (%d DeleteRecords calls)\n%s", part, logStart(part), want, del.calls.Load(), logs.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		// Partition 0's offset is past its end (5): the old topic's.
		p.purge(topic, 0, 40, "")
		p.purge(topic, 1, 3, "")
		waitStart(1, 3)
		// A valid request for partition 0, and one more for partition 1.
		p.purge(topic, 0, 4, "")
		p.purge(topic, 1, 4, "")
		waitStart(0, 4)
		waitStart(1, 4)
		// And nothing is retried after that.
		time.Sleep(300 * time.Millisecond)
		n := del.calls.Load()
		time.Sleep(500 * time.Millisecond)
		if more := del.calls.Load() - n; more > 0 {
			t.Errorf("%d DeleteRecords calls with nothing asked", more)
		}
		logMu.Lock()
		defer logMu.Unlock()
		if !strings.Contains(logs.String(), "past the partition's end") || !strings.Contains(logs.String(), "partition=0") {
			t.Errorf("no warning names the partition whose offset was past its end:\n%s", logs.String())
		}
	})
}
