//go:build linux

package main

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// The phase clock reads sarama's own debug lines: two transactions of a real sarama
// producer on the embedded broker give two of each request of a commit, and the second
// transaction's AddPartitionsToTxn closes the wait after the first one's EndTxn. A
// sarama whose lines changed leaves these empty.
func TestPhaseClockTimesSaramaTransactions(t *testing.T) {
	// sarama's debug logger is a package variable its goroutines read: set before any
	// client of this test runs, and left set (a bench child sets it once, at its start).
	clock := newPhaseClock()
	sarama.DebugLogger = debugLogger{clock}
	c := kafkatest.Embedded(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := c.Unique("phases")
	if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
		t.Fatal(err)
	}

	cfg := kafkatest.NewSaramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Transaction.ID = topic + "-txn"
	prod, err := sarama.NewAsyncProducer(c.Addrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := range 2 {
		if err := prod.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		prod.Input() <- &sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("x")}
		select {
		case <-prod.Successes():
		case err := <-prod.Errors():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		offsets := map[string][]*sarama.PartitionOffsetMetadata{topic: {{Partition: 0, Offset: int64(i + 1), LeaderEpoch: -1}}}
		if err := prod.AddOffsetsToTxn(offsets, topic+"-group"); err != nil {
			t.Fatal(err)
		}
		if err := prod.CommitTxn(); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]int{"AddOffsetsToTxn": 2, "TxnOffsetCommit": 2, "EndTxn": 2, "EndTxn→AddPartitionsToTxn": 1}
	clock.mu.Lock()
	for phase, n := range want {
		if got := len(clock.ds[phase]); got != n {
			t.Errorf("%s timed %d times, want %d", phase, got, n)
		}
	}
	clock.mu.Unlock()
	var r childResult
	clock.fill(&r)
	for phase := range want {
		if _, ok := r.PhaseMeanMs[phase]; !ok {
			t.Errorf("no mean for %s in %v", phase, r.PhaseMeanMs)
		}
	}
}
