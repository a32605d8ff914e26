package eddy_test

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
)

// A warm-up replica's task moves at a probing rebalance, within the cooperative
// session (issue 24 items 2 and 4): every task of the topology keeps state (a count per
// key, no repartition), so a second instance joining one that runs them all gets only
// warm-up replicas, and no task moves at the join (no follow-up rebalance either). Its
// probe then finds a warm-up within Config.AcceptableRecoveryLag and joins again inside
// the session (sarama.RequestRejoin): the first instance releases that task, the second
// runs it, and the tasks the first keeps never stop. TestWarmupBeforeTheMove moves its
// warmed-up task at the follow-up rebalance of its stateless tasks' move, so this is
// the test of the probe's own rejoin: without it (probe not rejoining) nothing moves
// and the test times out. A probe that ends its whole session instead, as under eager,
// also passes here: the probing instance runs no active task yet, so its session's end
// stops nothing.
func TestCooperativeProbeMovesAWarmTask(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		const partitions = 4
		input, output := c.Unique("keys"), c.Unique("key-counts")
		for _, topic := range []string{input, output} {
			if err := c.CreateTopic(ctxT(t), topic, partitions, nil); err != nil {
				t.Fatal(err)
			}
		}
		topo := keyCountTopology(t, input, output)
		want := map[string]int64{}
		written := 0
		produce := func(n int) {
			t.Helper()
			msgs := make([]*sarama.ProducerMessage, n)
			for i := range msgs {
				k := fmt.Sprintf("k%d", (written+i)%200)
				want[k]++
				msgs[i] = &sarama.ProducerMessage{Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(fmt.Sprint(written + i))}
			}
			written += n
			if err := c.Produce(ctxT(t), input, msgs...); err != nil {
				t.Fatal(err)
			}
		}
		counted := func() (map[string][]int64, error) {
			msgs, err := c.ReadCommitted(ctxT(t), output)
			if err != nil {
				return nil, err
			}
			seqs := map[string][]int64{}
			for _, m := range msgs {
				seqs[string(m.Key)] = append(seqs[string(m.Key)], int64(binary.BigEndian.Uint64(m.Value)))
			}
			return seqs, nil
		}
		waitCounted := func(what string) {
			t.Helper()
			waitFor(t, 2*time.Minute, what, func() (bool, error) {
				seqs, err := counted()
				if err != nil {
					return false, err
				}
				for k, n := range want {
					if s := seqs[k]; len(s) == 0 || s[len(s)-1] != n {
						return false, nil
					}
				}
				return true, nil
			})
		}

		appID := c.Unique("probe")
		logFirst, logSecond := newLogCapture(), newLogCapture()
		cfgs := make([]eddy.Config, 2)
		for i := range cfgs {
			cfgs[i] = eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: t.TempDir(),
				RebalanceProtocol:        eddy.CooperativeRebalancing,
				AcceptableRecoveryLag:    20,
				ProbingRebalanceInterval: 3 * time.Second,
				Workers:                  partitions, // one task per worker on the first instance
			}
		}
		cfgs[0].Logger, cfgs[1].Logger = slog.New(logFirst), slog.New(logSecond)
		first := start(t, topo, cfgs[0])
		for range 4 { // 800 updates of 200 keys: each changelog far beyond the acceptable lag
			produce(200)
			waitCounted("the counts of a batch")
		}
		second := start(t, topo, cfgs[1])

		// The second instance warms tasks up and runs none until its probe.
		waitFor(t, time.Minute, "a warm-up replica on the second instance", func() (bool, error) {
			if err, done := second.exited(); done {
				return false, err
			}
			return slices.ContainsFunc(second.app.TasksView().Tasks, func(tv eddy.TaskView) bool { return tv.Role == "warm-up" }), nil
		})
		waitFor(t, time.Minute, "a warmed-up task running on the second instance", func() (bool, error) {
			if err, done := second.exited(); done {
				return false, err
			}
			tasks := second.app.Tasks()
			return len(tasks) > 0 && !slices.ContainsFunc(tasks, func(id processor.TaskID) bool { return !runs(second, id.String()) }), nil
		})
		probes := logSecond.grep("probing rebalance: warm-up replicas are within")
		if len(probes) == 0 {
			t.Fatalf("the second instance runs %v without a probing rebalance", second.app.Tasks())
		}
		// The task it runs started there after the probe asked for the move.
		lines := logSecond.grep()
		probeAt := slices.Index(lines, probes[0])
		for _, id := range second.app.Tasks() {
			startAt := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "task running") && attr(l, "task") == id.String() })
			if startAt < probeAt {
				t.Errorf("task %s ran on the second instance (log line %d) before its probe (line %d): it moved at the join", id, startAt, probeAt)
			}
		}
		produce(40) // the moved task counts on
		waitCounted("the counts after the move")

		// The first instance released exactly the tasks the second runs, each once, and
		// its own tasks never stopped; neither session ended.
		released := map[string]int{}
		for _, l := range logFirst.grep("task released to its next owner") {
			released[attr(l, "task")]++
		}
		moved := map[string]int{}
		for _, id := range second.app.Tasks() {
			moved[id.String()] = 1
		}
		if !maps.Equal(released, moved) {
			t.Errorf("the first instance released %v; want each task the second runs once (%v)", released, moved)
		}
		checkStartedOnce(t, first, logFirst, "the first instance")
		checkStartedOnce(t, second, logSecond, "the second instance")
		for name, l := range map[string]logCapture{"first": logFirst, "second": logSecond} {
			if got := l.grep("consumer group session ended"); len(got) > 0 {
				t.Errorf("the %s instance's session ended: %q", name, got)
			}
		}
		for _, in := range []*instance{second, first} {
			if err := in.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
		}
		// Exactly once: each key's counts are 1, 2, ..., n.
		seqs, err := counted()
		if err != nil {
			t.Fatal(err)
		}
		for k, n := range want {
			s := seqs[k]
			ok := int64(len(s)) == n
			for i, v := range s {
				ok = ok && v == int64(i+1)
			}
			if !ok {
				t.Errorf("key %s: counts %v, want 1..%d", k, s, n)
			}
		}
		t.Logf("moved at the probe: %v; %d updates", moved, written)
	})
}

// keyCountTopology counts input's records per key, within each partition, in a logged
// store, and writes each new count to output: every task keeps state.
func keyCountTopology(t *testing.T, input, output string) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), input)
	topology.AddProcessor(b, "count", func() processor.Processor[string, string, string, int64] { return &keyCounter{} }, "in")
	topology.AddKeyValueStore(b, "counts", serde.String(), serde.Int64(), "count")
	topology.AddSink(b, "out", output, serde.String(), serde.Int64(), "count")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

type keyCounter struct {
	ctx    processor.Context[string, int64]
	counts statestore.KeyValueStore[string, int64]
}

func (k *keyCounter) Init(ctx processor.Context[string, int64]) (err error) {
	k.ctx = ctx
	k.counts, err = processor.KeyValueStore[string, int64](ctx, "counts")
	return err
}

func (k *keyCounter) Process(rec processor.Record[string, string]) error {
	n, _, err := k.counts.Get(rec.Key)
	if err != nil {
		return err
	}
	n++
	if err := k.counts.Put(rec.Key, n); err != nil {
		return err
	}
	return k.ctx.Forward(processor.WithValue(rec, n))
}

func (k *keyCounter) Close() error { return nil }
