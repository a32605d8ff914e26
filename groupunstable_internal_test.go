package eddy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// TestUnstableOffsetsObserve: the runtime reports sessions that end on unstable offsets
// once they have done so for longer than after, then once a minute; a session that ran
// or ended otherwise starts the count again.
func TestUnstableOffsetsObserve(t *testing.T) {
	var u unstableOffsets
	t0 := time.Unix(1000, 0)
	unstable := fmt.Errorf("session setup: %w", sarama.ErrUnstableOffsetCommit)
	after := 40 * time.Second
	steps := []struct {
		at     time.Duration
		err    error
		report bool
	}{
		{0, unstable, false},
		{39 * time.Second, unstable, false},
		{40 * time.Second, unstable, true},
		{70 * time.Second, unstable, false}, // reported 30 s ago
		{100 * time.Second, unstable, true}, // a minute on
		{101 * time.Second, nil, false},     // a session ran
		{102 * time.Second, unstable, false},
		{150 * time.Second, unstable, true},
		{151 * time.Second, errors.New("other"), false},
		{152 * time.Second, unstable, false},
	}
	for i, s := range steps {
		_, report := u.observe(s.err, t0.Add(s.at), after)
		if report != s.report {
			t.Fatalf("step %d (at %v, %v): report %v, want %v", i, s.at, s.err, report, s.report)
		}
	}
}

// TestAbortWithGroupOffsets: the transaction clearPendingOffsets runs for a worker's
// transactional ID (InitProducerId, AddOffsetsToTxn, EndTxn abort) is accepted by both
// brokers, ends aborted (DescribeTransactions: no transaction left open), does not change
// the committed offset, and leaves the transactional ID usable. Kills the mutant "no
// EndTxn" (the transaction stays Ongoing).
func TestAbortWithGroupOffsets(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		topic, group, txnID := c.Unique("in"), c.Unique("group"), c.Unique("txn")
		if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
		commitOffset := func(offset int64) {
			t.Helper()
			cfg := kafkatest.NewSaramaConfig()
			cfg.Producer.Idempotent = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Net.MaxOpenRequests = 1
			cfg.Producer.Return.Successes = true
			cfg.Producer.Transaction.ID = txnID
			p, err := sarama.NewSyncProducer(c.Addrs(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if err := p.BeginTxn(); err != nil {
				t.Fatal(err)
			}
			if err := p.AddOffsetsToTxn(map[string][]*sarama.PartitionOffsetMetadata{topic: {{Partition: 0, Offset: offset}}}, group); err != nil {
				t.Fatal(err)
			}
			if err := p.CommitTxn(); err != nil {
				t.Fatal(err)
			}
		}
		committed := func() int64 {
			t.Helper()
			// Bounded well below the transaction timeout: an open transaction with
			// the group's offsets would keep the read waiting.
			readCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			got, err := c.CommittedOffsets(readCtx, group, topic)
			if err != nil {
				t.Fatal(err)
			}
			return got[0]
		}
		commitOffset(5)
		client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		if err := abortWithGroupOffsets(ctx, client, txnID, group, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		admin, err := sarama.NewClusterAdminFromClient(client)
		if err != nil {
			t.Fatal(err)
		}
		var state string
		for range 50 { // PrepareAbort until the markers are written
			states, err := admin.(sarama.TransactionClusterAdmin).DescribeTransactions([]string{txnID})
			if err != nil {
				t.Fatal(err)
			}
			// Kafka says CompleteAbort; the embedded broker, Empty.
			if state = states[txnID].TransactionState; state == "CompleteAbort" || state == "Empty" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if state != "CompleteAbort" && state != "Empty" {
			t.Fatalf("transactional ID %s is %s after the abort, want it ended (CompleteAbort, or Empty on the embedded broker)", txnID, state)
		}
		if got := committed(); got != 5 {
			t.Fatalf("committed offset %d after the abort, want 5", got)
		}
		commitOffset(6)
		if got := committed(); got != 6 {
			t.Fatalf("committed offset %d after the next transaction, want 6", got)
		}
	})
}
