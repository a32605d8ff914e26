package kafkatest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestReadCommitted interleaves two transactions, one committed and one
// aborted, with non-transactional records on one partition, and checks that
// readCommitted returns what sarama's read_committed consumer returns,
// whether it fetches everything at once or one batch per fetch.
func TestReadCommitted(t *testing.T) {
	ForEachCluster(t, func(t *testing.T, c *Cluster) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		topic := c.Unique("mixed")
		if err := c.CreateTopic(ctx, topic, 2, nil); err != nil {
			t.Fatal(err)
		}
		newTxn := func() sarama.SyncProducer {
			cfg := NewSaramaConfig()
			cfg.Producer.Idempotent = true
			cfg.Producer.Transaction.ID = c.Unique("txn")
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Return.Successes = true
			cfg.Net.MaxOpenRequests = 1
			cfg.Producer.Partitioner = sarama.NewManualPartitioner
			p, err := sarama.NewSyncProducer(c.Addrs(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			if err := p.BeginTxn(); err != nil {
				t.Fatal(err)
			}
			return p
		}
		send := func(p sarama.SyncProducer, v string) {
			t.Helper()
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(v)}); err != nil {
				t.Fatalf("send %q: %v", v, err)
			}
		}
		plain := func(v string) {
			t.Helper()
			if err := c.ProduceToPartition(ctx, topic, 0, &sarama.ProducerMessage{Value: sarama.StringEncoder(v)}); err != nil {
				t.Fatal(err)
			}
		}
		var want []string
		for round := range 3 {
			committer, aborter := newTxn(), newTxn()
			for i := range 3 {
				plain(fmt.Sprintf("plain-%d-%d", round, i))
				want = append(want, fmt.Sprintf("plain-%d-%d", round, i))
				send(committer, fmt.Sprintf("committed-%d-%d", round, i))
				want = append(want, fmt.Sprintf("committed-%d-%d", round, i))
				send(aborter, fmt.Sprintf("aborted-%d-%d", round, i))
			}
			if err := aborter.AbortTxn(); err != nil {
				t.Fatal(err)
			}
			if err := committer.CommitTxn(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.WaitStable(ctx, topic); err != nil {
			t.Fatal(err)
		}

		got, err := c.ReadCommitted(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range got {
			if m.Partition != 0 || m.Topic != topic {
				t.Errorf("record from %s/%d, want %s/0", m.Topic, m.Partition, topic)
			}
		}
		if vals := valuesOf(got); !slices.Equal(vals, want) {
			t.Errorf("ReadCommitted = %q\nwant %q", vals, want)
		}

		// One batch per fetch.
		err = withClient(ctx, c.endpoint(), func(client sarama.Client) error {
			end, err := listOffsets(client, topic, sarama.OffsetNewest, sarama.ReadCommitted)
			if err != nil {
				return err
			}
			msgs, err := readCommittedPartition(ctx, client, topic, 0, 0, end[0], 1)
			if err != nil {
				return err
			}
			if vals := valuesOf(msgs); !slices.Equal(vals, want) {
				t.Errorf("one batch per fetch = %q\nwant %q", vals, want)
			}
			for i := 1; i < len(msgs); i++ {
				if msgs[i].Offset <= msgs[i-1].Offset {
					t.Errorf("offsets not increasing: %d after %d", msgs[i].Offset, msgs[i-1].Offset)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}

		// sarama's read_committed consumer agrees.
		cfg := NewSaramaConfig()
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
		consumer, err := sarama.NewConsumer(c.Addrs(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer consumer.Close()
		pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		var viaConsumer []string
		for len(viaConsumer) < len(want) {
			select {
			case m := <-pc.Messages():
				viaConsumer = append(viaConsumer, string(m.Value))
			case err := <-pc.Errors():
				t.Fatal(err)
			case <-ctx.Done():
				t.Fatalf("sarama consumer: got %d of %d records", len(viaConsumer), len(want))
			}
		}
		if !slices.Equal(viaConsumer, want) {
			t.Errorf("sarama read_committed consumer = %q\nwant %q", viaConsumer, want)
		}
	})
}

// TestReadCommittedStopsAtOpenTransaction: records of an open transaction,
// and everything after its first record, are beyond the last stable offset.
func TestReadCommittedStopsAtOpenTransaction(t *testing.T) {
	ForEachCluster(t, func(t *testing.T, c *Cluster) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		topic := c.Unique("open")
		if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Produce(ctx, topic, &sarama.ProducerMessage{Value: sarama.StringEncoder("before")}); err != nil {
			t.Fatal(err)
		}
		cfg := NewSaramaConfig()
		cfg.Producer.Idempotent = true
		cfg.Producer.Transaction.ID = c.Unique("txn")
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Net.MaxOpenRequests = 1
		p, err := sarama.NewSyncProducer(c.Addrs(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("open")}); err != nil {
			t.Fatal(err)
		}
		if err := c.Produce(ctx, topic, &sarama.ProducerMessage{Value: sarama.StringEncoder("after")}); err != nil {
			t.Fatal(err)
		}
		got, err := c.ReadCommitted(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if vals := valuesOf(got); !slices.Equal(vals, []string{"before"}) {
			t.Errorf("ReadCommitted with a transaction open = %q, want [before]", vals)
		}
		short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancelShort()
		if err := c.WaitStable(short, topic); err == nil {
			t.Errorf("WaitStable returned nil with a transaction open")
		}
		if err := p.CommitTxn(); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitStable(ctx, topic); err != nil {
			t.Fatal(err)
		}
		got, err = c.ReadCommitted(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if vals := valuesOf(got); !slices.Equal(vals, []string{"before", "open", "after"}) {
			t.Errorf("ReadCommitted after the commit = %q, want [before open after]", vals)
		}
	})
}

func valuesOf(msgs []*sarama.ConsumerMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Value)
	}
	return out
}

// TestReadCommittedSmallResponseLimit: a read_committed sarama consumer whose
// fetch responses are cut by the response-level byte limit still skips
// aborted records. kfake needs the workaround in NewBroker for this (see
// liftReadCommittedFetchLimit).
func TestReadCommittedSmallResponseLimit(t *testing.T) {
	ForEachCluster(t, func(t *testing.T, c *Cluster) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		topic := c.Unique("limit")
		if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
		cfg := NewSaramaConfig()
		cfg.Producer.Idempotent = true
		cfg.Producer.Transaction.ID = c.Unique("txn")
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Net.MaxOpenRequests = 1
		p, err := sarama.NewSyncProducer(c.Addrs(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if err := p.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("aborted")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.AbortTxn(); err != nil {
			t.Fatal(err)
		}
		if err := c.Produce(ctx, topic, &sarama.ProducerMessage{Value: sarama.StringEncoder("plain")}); err != nil {
			t.Fatal(err)
		}
		ccfg := NewSaramaConfig()
		ccfg.Consumer.IsolationLevel = sarama.ReadCommitted
		ccfg.Consumer.Fetch.MaxBytes = 1 // every response is cut after one batch
		consumer, err := sarama.NewConsumer(c.Addrs(), ccfg)
		if err != nil {
			t.Fatal(err)
		}
		defer consumer.Close()
		pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		select {
		case m := <-pc.Messages():
			// "plain" is at 4 after the abort marker (3), or at 3 when the broker wrote the
			// marker after it: EndTxn returns before Kafka writes its markers.
			if string(m.Value) != "plain" || m.Offset < 3 {
				t.Errorf("first record a read_committed consumer sees: %q at offset %d, want \"plain\" at 3 or 4", m.Value, m.Offset)
			}
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("no record before the timeout")
		}
	})
}
