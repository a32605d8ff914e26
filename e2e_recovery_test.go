package eddy_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// logCapture is a slog handler that keeps every message with its attributes, for tests
// that check what the runtime warns about.
type logCapture struct {
	mu    *sync.Mutex
	lines *[]string
	attrs []slog.Attr
}

func newLogCapture() logCapture { return logCapture{mu: &sync.Mutex{}, lines: &[]string{}} }

func (c logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range c.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	c.mu.Lock()
	*c.lines = append(*c.lines, b.String())
	c.mu.Unlock()
	return nil
}
func (c logCapture) WithAttrs(as []slog.Attr) slog.Handler {
	c.attrs = append(append([]slog.Attr{}, c.attrs...), as...)
	return c
}
func (c logCapture) WithGroup(string) slog.Handler { return c }

// grep returns the captured lines that contain every one of parts.
func (c logCapture) grep(parts ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, l := range *c.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}

type ticker struct{}

func (ticker) Process(processor.Record[string, int64]) error { return nil }
func (ticker) Close() error                                  { return nil }
func (ticker) Init(ctx processor.Context[string, int64]) error {
	_, err := ctx.Schedule(time.Second, processor.StreamTime, func(now time.Time) error {
		return ctx.Forward(processor.Record[string, int64]{Key: "tick", Value: now.UnixMilli(), Timestamp: now})
	})
	return err
}

func tickerTopology(t *testing.T, in, out string) *topology.Topology {
	b := topology.NewBuilder()
	topology.AddSource(b, "numbers", serde.String(), serde.Int64(), in)
	topology.AddProcessor(b, "ticker", func() processor.Processor[string, int64, string, int64] { return ticker{} }, "numbers")
	topology.AddSink(b, "out", out, serde.String(), serde.Int64(), "ticker")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// Stream time and the punctuation schedule are part of a task's committed state: a
// stream-time punctuation that fired inside an aborted transaction fires again when the
// kept input is replayed. (They were not rolled back: 5 ticks without an abort, 0 after
// one.)
func TestPunctuationsFireAgainAfterAnAbort(t *testing.T) {
	for _, fail := range []bool{false, true} {
		name := "no-abort"
		if fail {
			name = "first-commit-aborted"
		}
		t.Run(name, func(t *testing.T) {
			c := kafkatest.Embedded(t)
			ctx := ctxT(t)
			in, out := c.Unique("in"), c.Unique("out")
			for _, topic := range []string{in, out} {
				if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
					t.Fatal(err)
				}
			}
			base := time.UnixMilli(1_700_000_000_000)
			var msgs []*sarama.ProducerMessage
			for i := range 5 {
				m := int64Msg("k", int64(i))
				m.Timestamp = base.Add(time.Duration(i) * time.Second)
				msgs = append(msgs, m)
			}
			if err := c.Produce(ctx, in, msgs...); err != nil {
				t.Fatal(err)
			}
			app, err := eddy.New(tickerTopology(t, in, out), eddy.Config{ApplicationID: c.Unique("app"), Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			var commits, aborted atomic.Int32
			eddy.SetBeforeCommitHook(app, func(processor.TaskID) error {
				if commits.Add(1) == 1 && fail {
					aborted.Add(1)
					return errors.New("injected abortable failure")
				}
				return nil
			})
			runCtx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- app.Run(runCtx) }()
			waitFor(t, 30*time.Second, "the input committed", func() (bool, error) {
				got, err := c.CommittedOffsets(ctx, app.Config().ApplicationID, in)
				return err == nil && got[0] >= 5, nil
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			recs, err := c.ReadCommitted(ctx, out)
			if err != nil {
				t.Fatal(err)
			}
			if fail && aborted.Load() != 1 {
				t.Fatalf("aborted %d transactions, want 1", aborted.Load())
			}
			if len(recs) != 5 {
				t.Errorf("%d stream-time punctuations, want 5 (one per second of stream time)", len(recs))
			}
			for i, r := range recs {
				if want := base.Add(time.Duration(i) * time.Second); !r.Timestamp.Equal(want) {
					t.Errorf("tick %d at %v, want %v", i, r.Timestamp, want)
				}
			}
		})
	}
}

// An input topic deleted and created anew (by hand, not with eddy reset) is read from
// its start: the task's offsets record of the old topic must not skip the new records,
// and a warning names the topic and partition. (Before: 10 records processed, the topic
// recreated with 3, 0 outputs and no warning.)
func TestRecreatedInputTopicIsReadAndWarned(t *testing.T) {
	c := kafkatest.Embedded(t)
	ctx := ctxT(t)
	in, out := c.Unique("in"), c.Unique("out")
	for _, topic := range []string{in, out} {
		if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	produceN := func(n int, from int64) {
		var msgs []*sarama.ProducerMessage
		for i := range n {
			msgs = append(msgs, int64Msg("k", from+int64(i)))
		}
		if err := c.Produce(ctx, in, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		recs, err := c.ReadCommitted(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	logs := newLogCapture()
	cfg := eddy.Config{ApplicationID: c.Unique("app"), Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: slog.New(logs)}
	topo := valueTopology(t, in, out, nil)
	produceN(10, 0)
	inst := start(t, topo, cfg)
	waitFor(t, 30*time.Second, "10 outputs", func() (bool, error) { return count() == 10, nil })
	if err := inst.stop(); err != nil {
		t.Fatal(err)
	}
	client, err := sarama.NewClient(c.Addrs(), kafkatest.NewSaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.DeleteTopic(in); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close()
	waitFor(t, 30*time.Second, "the input recreated", func() (bool, error) {
		return c.CreateTopic(ctx, in, 1, nil) == nil, nil
	})
	produceN(3, 100)
	inst = start(t, topo, cfg)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && count() < 13 {
		time.Sleep(200 * time.Millisecond)
	}
	if err := inst.stop(); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 13 {
		t.Errorf("after recreating the input topic with 3 new records, outputs = %d, want 13", n)
	}
	if w := logs.grep("SOURCE TOPIC RECREATED", "topic="+in, "partition=0"); len(w) == 0 {
		t.Errorf("no warning names the recreated topic %s and its partition", in)
	}
}

// A transaction coordinator that answers COORDINATOR_LOAD_IN_PROGRESS for 12 s (a
// coordinator moving) delays the task; it does not stop the application (design.md §7:
// retry with backoff). Before, the producer creation's second failure went to fail().
func TestTransientInitFailureIsRetried(t *testing.T) {
	b := kafkatest.Start(t)
	c := kafkatest.Connect(t, "embedded", b.Addrs())
	ctx := ctxT(t)
	in, out := c.Unique("in"), c.Unique("out")
	for _, topic := range []string{in, out} {
		if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	until := began.Add(12 * time.Second)
	var refused atomic.Int32
	b.Kfake().ControlKey(int16(kmsg.InitProducerID), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.Kfake().KeepControl()
		r := req.(*kmsg.InitProducerIDRequest)
		if time.Now().After(until) || r.TransactionalID == nil {
			return nil, nil, false
		}
		refused.Add(1)
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp, nil, true
	})
	if err := c.Produce(ctx, in, int64Msg("k", 1)); err != nil {
		t.Fatal(err)
	}
	inst := start(t, valueTopology(t, in, out, nil), eddy.Config{ApplicationID: c.Unique("app"), Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t)})
	waitFor(t, 45*time.Second, "the record processed after the outage", func() (bool, error) {
		if err, done := inst.exited(); done {
			return false, fmt.Errorf("the application stopped on a transient coordinator outage after %v: %v", time.Since(began).Round(time.Second), err)
		}
		recs, err := c.ReadCommitted(ctx, out)
		return err == nil && len(recs) == 1, nil
	})
	if refused.Load() == 0 {
		t.Fatal("no InitProducerId was refused: the test injected nothing")
	}
}

// A commit whose outcome is unknown to the task (its EndTxn answer lost) and that did
// commit: the task settles it with a new producer and reads its offsets record, which
// says the transaction committed, so it goes on after it. It must not re-read the group's
// committed offsets (a coordinator can answer stale ones, as this test's does) and
// replay the transaction's input: that counted words twice.
func TestUnknownCommitOutcomeTrustsTheOffsetsRecord(t *testing.T) {
	forEachProducerModel(t, testUnknownCommitOutcomeTrustsTheOffsetsRecord)
}

func testUnknownCommitOutcomeTrustsTheOffsetsRecord(t *testing.T, perTask bool) {
	b := kafkatest.Start(t)
	c := kafkatest.Connect(t, "embedded", b.Addrs())
	e := newWordCount(t, c, 1)
	e.perTask = perTask
	e.produce(t, 300)
	app, err := eddy.New(e.topo, e.config(t))
	if err != nil {
		t.Fatal(err)
	}
	k := b.Kfake()
	var injected, staleAnswers atomic.Int32
	eddy.SetAfterCommitHook(app, func(task processor.TaskID) error {
		if task.Subtopology != 1 || injected.Add(1) != 1 {
			return nil
		}
		// From now on the coordinator answers offset 0 for every committed offset of
		// the group: stale, as Kafka 4.1 can answer after a coordinator move.
		k.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
			k.KeepControl()
			r := req.(*kmsg.OffsetFetchRequest)
			resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
			for _, g := range r.Groups {
				if g.Group != e.appID {
					return nil, nil, false
				}
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group = g.Group
				for _, tp := range g.Topics {
					rt := kmsg.NewOffsetFetchResponseGroupTopic()
					rt.Topic = tp.Topic
					for _, p := range tp.Partitions {
						rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
						rp.Partition, rp.Offset, rp.LeaderEpoch = p, 0, -1
						rt.Partitions = append(rt.Partitions, rp)
					}
					rg.Topics = append(rg.Topics, rt)
				}
				resp.Groups = append(resp.Groups, rg)
			}
			if len(r.Groups) == 0 {
				if r.Group != e.appID {
					return nil, nil, false
				}
				for _, tp := range r.Topics {
					rt := kmsg.NewOffsetFetchResponseTopic()
					rt.Topic = tp.Topic
					for _, p := range tp.Partitions {
						rp := kmsg.NewOffsetFetchResponseTopicPartition()
						rp.Partition, rp.Offset, rp.LeaderEpoch = p, 0, -1
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp.Topics = append(resp.Topics, rt)
				}
			}
			staleAnswers.Add(1)
			return resp, nil, true
		})
		return errors.New("injected: the EndTxn answer was lost")
	})
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	e.waitCounts(t, time.Minute, "the counts")
	time.Sleep(500 * time.Millisecond) // let a wrongly replayed input show
	e.produce(t, 20)                   // and go on after the recovery
	e.waitCounts(t, time.Minute, "the counts after more input")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if injected.Load() == 0 {
		t.Fatal("no commit outcome was made unknown: the test injected nothing")
	}
	t.Logf("stale OffsetFetch answers given: %d", staleAnswers.Load())
	e.checkExactlyOnce(t)
}

// A task kept across a rebalance (the same instance owns it in the next generation, with
// its producer and a store written by its own last commit) is not restored again: its
// store is current. (It was restored on every session, and a restore right after a commit
// could wipe the store: see changelog's TestRestoreWaitsForPendingMarkers.)
func TestKeptTaskIsNotRestoredAgain(t *testing.T) {
	c := kafkatest.Embedded(t)
	e := newWordCount(t, c, 4)
	e.produce(t, 200)
	var mu sync.Mutex
	restores := map[string]int{} // task/store → restores on the first instance
	cfg := e.config(t)
	cfg.OnRestore = func(task processor.TaskID, res changelog.Result) {
		mu.Lock()
		restores[task.String()+"/"+res.Store]++
		mu.Unlock()
	}
	first := start(t, e.topo, cfg)
	e.waitCounts(t, time.Minute, "the counts")
	second := start(t, e.topo, e.config(t)) // a rebalance: the first instance keeps some tasks
	e.produce(t, 100)
	e.waitCounts(t, time.Minute, "the counts with two instances")
	if err := second.stop(); err != nil { // and another rebalance
		t.Fatal(err)
	}
	e.produce(t, 100)
	e.waitCounts(t, time.Minute, "the counts after the second left")
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	e.checkExactlyOnce(t)
	mu.Lock()
	defer mu.Unlock()
	kept := 0
	for ts, n := range restores {
		if n > 1 {
			kept++
		}
		t.Logf("%s restored %d times", ts, n)
	}
	// A task the first instance lost to the second and got back is restored again
	// (correctly: another instance wrote its changelog); one it kept is not.
	if len(restores) == 0 {
		t.Fatal("no restore seen")
	}
	if kept == len(restores) {
		t.Errorf("every store was restored more than once: kept tasks were restored again")
	}
}

// A processor that panics on a record stops the application with an error (wrapping
// processor.ErrPanicked, naming the node and the record's offset) instead of crashing
// the process; nothing past the record is committed.
func TestProcessorPanicStopsTheAppWithAnError(t *testing.T) {
	c := kafkatest.Embedded(t)
	ctx := ctxT(t)
	in, out := c.Unique("in"), c.Unique("out")
	for _, topic := range []string{in, out} {
		if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Produce(ctx, in, int64Msg("k", 1), int64Msg("k", 2), int64Msg("k", 3)); err != nil {
		t.Fatal(err)
	}
	topo := valueTopology(t, in, out, func(v int64) error {
		if v == 3 {
			panic("bug in user code")
		}
		return nil
	})
	inst := start(t, topo, eddy.Config{ApplicationID: c.Unique("app"), Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t)})
	var err error
	waitFor(t, 30*time.Second, "the application to stop", func() (bool, error) {
		var done bool
		err, done = inst.exited()
		return done, nil
	})
	if !errors.Is(err, processor.ErrPanicked) || !strings.Contains(err.Error(), "offset 2") || !strings.Contains(err.Error(), `"double"`) {
		t.Fatalf("Run returned %v; want an error wrapping ErrPanicked naming node \"double\" and offset 2", err)
	}
	recs, rerr := c.ReadCommitted(ctx, out)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if len(recs) > 2 {
		t.Errorf("%d outputs committed, want at most the 2 before the panicking record", len(recs))
	}
}
