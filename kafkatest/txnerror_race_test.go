package kafkatest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// TestFencedProducerFailsItsBatchesWithoutARace drives sarama's transaction manager
// into its error state from several broker producers at once: a fenced producer sends
// to partitions on three brokers, some already in its transaction (their batches fail
// and move it to an error state) and some new (their broker producers publish them to
// the transaction and read its last error). sarama 1.61.1 read that error outside the
// lock it is written under, and go test -race failed on it (third_party/sarama/README.md).
// The test also wants what a fenced producer must see: its sends fail, it is in an error
// state, and nothing it sent is read by a read_committed reader.
func TestFencedProducerFailsItsBatchesWithoutARace(t *testing.T) {
	c := kafkatest.Embedded(t, kafkatest.NumBrokers(3))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const partitions = 12
	var outs []string
	for round := range 10 {
		// A topic per round, so each begins with partitions no fenced producer wrote.
		out := c.Unique("out")
		if err := c.CreateTopic(ctx, out, partitions, nil); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
		id := c.Unique("txn")
		p, err := sarama.NewAsyncProducer(c.Addrs(), txnConfig(id))
		if err != nil {
			t.Fatal(err)
		}
		zombie := &txnProducer{p} // closed below, before its successor's transaction
		if err := zombie.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		var first []*sarama.ProducerMessage
		for p := range int32(partitions / 2) {
			first = append(first, msg(out, p, fmt.Sprintf("zombie-%d-before-%d", round, p)))
		}
		if err := zombie.send(ctx, first...); err != nil {
			t.Fatal(err)
		}
		successor := newTxnProducer(t, c, txnConfig(id))
		var burst []*sarama.ProducerMessage
		for i := range 4 {
			for p := range int32(partitions) {
				burst = append(burst, msg(out, p, fmt.Sprintf("zombie-%d-after-%d-%d", round, p, i)))
			}
		}
		if err := zombie.send(ctx, burst...); err == nil {
			t.Fatalf("round %d: a fenced producer's %d sends all succeeded", round, len(burst))
		}
		if st := zombie.TxnStatus(); st&sarama.ProducerTxnFlagInError == 0 {
			t.Fatalf("round %d: a fenced producer whose sends failed is in state %s, want an error state", round, st)
		}
		_ = zombie.Close() // its errors are the failed sends'
		_ = successor      // it fenced the zombie; its own transactions are TestFencing's
	}
	for _, out := range outs {
		got, err := consumeFor(c, out, 0, sarama.ReadCommitted, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 0 {
			t.Fatalf("%s/0 holds %d committed records of fenced producers: %q", out, len(got), got)
		}
	}
}
