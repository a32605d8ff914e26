package eddy_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// passTopology copies string records from in to out.
func passTopology(t *testing.T, in, out string) *topology.Topology {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), in)
	topology.AddSink(b, "out", out, serde.String(), serde.String(), "in")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// outputLimitEnv: an output topic whose max.message.bytes (2000) a 5 KB record
// exceeds; the input holds a small record, the big one (offset 1) and another small one.
type outputLimitEnv struct {
	c            *kafkatest.Cluster
	in, out, dlq string
}

func newOutputLimitEnv(t *testing.T, c *kafkatest.Cluster) *outputLimitEnv {
	ctx := ctxT(t)
	e := &outputLimitEnv{c: c, in: c.Unique("in"), out: c.Unique("out"), dlq: c.Unique("dlq")}
	limit := "2000"
	for topic, cfg := range map[string]map[string]string{e.in: nil, e.dlq: nil, e.out: {"max.message.bytes": limit}} {
		if err := c.CreateTopic(ctx, topic, 1, cfg); err != nil {
			t.Fatal(err)
		}
	}
	big := strings.Repeat("x", 5000)
	msgs := []*sarama.ProducerMessage{
		{Key: sarama.StringEncoder("a"), Value: sarama.StringEncoder("small")},
		{Key: sarama.StringEncoder("big"), Value: sarama.StringEncoder(big)},
		{Key: sarama.StringEncoder("c"), Value: sarama.StringEncoder("small")},
	}
	if err := c.ProduceToPartition(ctx, e.in, 0, msgs...); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestOutputTooLargeFailsNamingTheRecord: a record the output topic can never take
// (5 KB against max.message.bytes=2000) used to be aborted and replayed for ever
// ("attempt=1" at every round, Run never returned, the records ahead of it never got
// out). The broker's refusal (MESSAGE_TOO_LARGE) is permanent (producer.Permanent):
// the application stops at once with an OutputRecordError naming the input record, the
// output topic, the record's size and the topic's limit. Kills the mutants "a permanent
// refusal classified abortable" (the loop: 174 rollbacks in 30 s on kfake, 90 on Kafka)
// and "the error not explained" (no input record, no limit).
func TestOutputTooLargeFailsNamingTheRecord(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newOutputLimitEnv(t, c)
		logs := newLogCapture()
		inst := start(t, passTopology(t, e.in, e.out), eddy.Config{ApplicationID: c.Unique("big"), Brokers: c.Addrs(),
			StateDir: t.TempDir(), Logger: slog.New(logs)})
		err, done := waitExit(inst, 30*time.Second)
		rollbacks := logs.grep("rolling back")
		t.Logf("Run: %v (%d rollbacks)", err, len(rollbacks))
		if !done {
			last := ""
			if len(rollbacks) > 0 {
				last = rollbacks[len(rollbacks)-1]
			}
			t.Fatalf("Run did not return in 30 s: %d rollbacks, the last: %s", len(rollbacks), last)
		}
		if err == nil {
			t.Fatal("Run returned nil")
		}
		for _, want := range []string{"input record " + e.in + "/0 offset 1", `"` + e.out + `"`, "5073 bytes", "max.message.bytes (2000)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not name %q: %v", want, err)
			}
		}
		var oe *eddy.OutputRecordError
		if !errors.As(err, &oe) || oe.Topic != e.out || oe.Input == nil || oe.Input.Offset != 1 || oe.Size != 5073 || oe.Limit != 2000 {
			t.Errorf("Run's error is no OutputRecordError for the big record: %#v", oe)
		}
		if len(rollbacks) > 0 {
			t.Errorf("%d rollbacks: a record that can never be written was retried", len(rollbacks))
		}
		// Nothing of the failed transaction is committed: the small record before the
		// big one went in the same transaction.
		if msgs, err := e.c.ReadCommitted(ctxT(t), e.out); err != nil || len(msgs) != 0 {
			t.Errorf("the output holds %d records (err %v); the failed transaction's must not be committed", len(msgs), err)
		}
	})
}

// waitExit waits up to timeout for Run to return on its own.
func waitExit(in *instance, timeout time.Duration) (error, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err, done := in.exited(); done {
			return err, true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, false
}
