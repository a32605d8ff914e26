package eddy

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/kafkatest"
)

// A task's offsets record is read back from the last few offsets of its partition
// (kread.ReadLast). Transactions aborted after the last committed one (an owner that
// crashes again and again inside its commits) take offsets too, n+1 records and a
// marker each: once they fill the first window, the last committed transaction lies
// below it. Partition 0: ten aborted transactions push it out whole (read back, it would
// give no nonce and no offsets: a settle takes a committed transaction for aborted and
// replays its input). Partition 1: seven, one of them short, leave the window cutting
// through it (it would give the nonce without the topics' offsets). The read, through
// the task's own path (offsetsRecord.read over the runtime), must find the committed
// transaction whole in both.
func TestOffsetsRecordAfterManyAbortedTxns(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		offTopic := c.Unique("offsets-changelog")
		sources := []string{c.Unique("src-a"), c.Unique("src-b")}
		for _, topic := range append([]string{offTopic}, sources...) {
			if err := c.CreateTopic(ctx, topic, 2, nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, topic := range sources {
			for p := int32(0); p < 2; p++ {
				for i := 0; i < 10; i++ {
					if err := c.ProduceToPartition(ctx, topic, p, &sarama.ProducerMessage{Value: sarama.StringEncoder("v")}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		p, err := producer.New(ctx, producer.Config{Brokers: c.Addrs(), Sarama: kafkatest.NewSaramaConfig(), TransactionalID: c.Unique("owner"), TransactionTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		write := func(partition int32, consumed map[string]int64, nonce uint64, onlyNonce bool) {
			t.Helper()
			r := &offsetsRecord{topic: offTopic, partition: partition, sources: sources, committed: newCommittedOffsets(), logger: slog.New(slog.DiscardHandler)}
			if onlyNonce {
				r.sources = nil
			}
			err := r.write(consumed, nonce, func(k, v []byte) error {
				return p.Send(ctx, offTopic, partition, k, v, nil, time.Now())
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		const committedNonce = 42
		committed := map[string]int64{sources[0]: 5, sources[1]: 6}
		later := map[string]int64{sources[0]: 9, sources[1]: 9}
		for part, aborts := range map[int32]int{0: 10, 1: 7} {
			write(part, committed, committedNonce, false)
			if err := p.Commit(ctx, nil, nil); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < aborts; i++ {
				write(part, later, 7, part == 1 && i == 0)
				if err := p.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if err := p.Abort(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}

		client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		rt := &runtime{cfg: Config{TransactionTimeout: 10 * time.Second}, logger: slog.New(slog.DiscardHandler), sc: kafkatest.NewSaramaConfig(), client: client, restoreC: client}
		for _, part := range []int32{0, 1} {
			t.Run(fmt.Sprintf("partition%d", part), func(t *testing.T) {
				r := &offsetsRecord{topic: offTopic, partition: part, sources: sources, committed: newCommittedOffsets(), logger: slog.New(slog.DiscardHandler)}
				nonce, err := r.read(ctx, rt, readAtStart)
				if err != nil {
					t.Fatal(err)
				}
				if nonce != committedNonce {
					t.Errorf("nonce %d read back, want %d: the committed transaction would be taken for aborted", nonce, committedNonce)
				}
				for _, topic := range sources {
					if got := r.committed.of(topic); got != committed[topic] {
						t.Errorf("committed offset of %s read back: %d, want %d", topic, got, committed[topic])
					}
				}
			})
		}
	})
}
