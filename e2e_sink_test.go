package eddy_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/internal/boltsink"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/sink"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
)

// sinkEnv counts words read from a topic and delivers each (word, count) into a
// two-phase-commit target outside Kafka (boltsink, a bbolt file): exactly-once holds
// when the target ends with the rows word/1 … word/n for every word, each written once,
// and nothing left prepared.
type sinkEnv struct {
	c      *kafkatest.Cluster
	appID  string
	input  string
	target *boltsink.Target[string, int64]
	topo   *topology.Topology
	want   map[string]int64
	n      int
	// perTask: Config.ProducerPerTask.
	perTask bool
}

func newSinkEnv(t *testing.T, c *kafkatest.Cluster) *sinkEnv {
	t.Helper()
	e := &sinkEnv{c: c, appID: c.Unique("sink"), input: c.Unique("words"), want: map[string]int64{}}
	if err := c.CreateTopic(ctxT(t), e.input, 2, nil); err != nil {
		t.Fatal(err)
	}
	target, err := boltsink.Open(filepath.Join(t.TempDir(), "target.db"), func(r sink.Record[string, int64]) ([]byte, []byte) {
		return fmt.Appendf(nil, "%s/%08d", r.Key, r.Value), fmt.Appendf(nil, "%s/%d/%d", r.Topic, r.Partition, r.Offset)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = target.Close() })
	e.target = target
	b := topology.NewBuilder()
	topology.AddSource(b, "words", serde.String(), serde.String(), e.input)
	topology.AddProcessor(b, "count", func() processor.Processor[string, string, string, int64] { return &sinkCounter{} }, "words")
	topology.AddKeyValueStore(b, "counts", serde.String(), serde.Int64(), "count")
	topology.AddSinkTo(b, "db", sink.Target[string, int64](target), "count")
	if e.topo, err = b.Build(); err != nil {
		t.Fatal(err)
	}
	return e
}

type sinkCounter struct {
	ctx    processor.Context[string, int64]
	counts statestore.KeyValueStore[string, int64]
}

func (p *sinkCounter) Init(ctx processor.Context[string, int64]) (err error) {
	p.ctx = ctx
	p.counts, err = processor.KeyValueStore[string, int64](ctx, "counts")
	return err
}

func (p *sinkCounter) Process(r processor.Record[string, string]) error {
	n, _, err := p.counts.Get(r.Key)
	if err != nil {
		return err
	}
	if err := p.counts.Put(r.Key, n+1); err != nil {
		return err
	}
	return p.ctx.Forward(processor.Record[string, int64]{Key: r.Key, Value: n + 1, Timestamp: r.Timestamp})
}

func (p *sinkCounter) Close() error { return nil }

func (e *sinkEnv) config(t *testing.T, stateDir string) eddy.Config {
	return eddy.Config{ApplicationID: e.appID, Brokers: e.c.Addrs(), StateDir: stateDir, Logger: testLogger(t), CommitInterval: 100 * time.Millisecond, ProducerPerTask: e.perTask}
}

// produce writes n words (40 distinct) and counts them.
func (e *sinkEnv) produce(t *testing.T, n int) {
	t.Helper()
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		w := fmt.Sprintf("w%02d", (e.n+i)%40)
		e.want[w]++
		msgs[i] = &sarama.ProducerMessage{Key: sarama.StringEncoder(w), Value: sarama.StringEncoder("x")}
	}
	e.n += n
	if err := e.c.Produce(ctxT(t), e.input, msgs...); err != nil {
		t.Fatal(err)
	}
}

// check compares the target's rows with the counts: missing rows are lost, rows
// written twice are duplicates, rows past a word's count are extra.
func (e *sinkEnv) check() (lost, dups, extra int, err error) {
	rows, err := e.target.Rows()
	if err != nil {
		return 0, 0, 0, err
	}
	d, err := e.target.Duplicates()
	if err != nil {
		return 0, 0, 0, err
	}
	for w, n := range e.want {
		for i := int64(1); i <= n; i++ {
			if _, ok := rows[fmt.Sprintf("%s/%08d", w, i)]; !ok {
				lost++
			}
		}
	}
	for k := range rows {
		w, num, _ := strings.Cut(k, "/")
		var i int64
		fmt.Sscan(strings.TrimLeft(num, "0"), &i)
		if i > e.want[w] {
			extra++
		}
	}
	return lost, len(d), extra, nil
}

func (e *sinkEnv) waitDelivered(t *testing.T, in *instance, what string) {
	t.Helper()
	waitFor(t, 90*time.Second, what, func() (bool, error) {
		if err, done := in.exited(); done {
			return false, fmt.Errorf("app stopped: %v", err)
		}
		lost, _, _, err := e.check()
		return lost == 0, err
	})
}

func (e *sinkEnv) pending(t *testing.T) []string {
	t.Helper()
	ids, err := e.target.Pending(context.Background(), "eddy:"+e.appID+":")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, id := range ids {
		out = append(out, id.String())
	}
	sort.Strings(out)
	return out
}

// A two-phase-commit sink under every fault of its protocol: Kafka commits rejected
// after the sink transactions were prepared (rolled back, replayed), commits of unknown
// outcome before and after the Kafka commit (settled by the offsets record's nonce),
// a pre-commit that fails (the Kafka transaction aborted too), a post-commit that keeps
// failing until the instance stops (left prepared, committed by the next instance's
// recovery), and a leftover of a transaction that never committed (rolled back). Every
// count reaches the target once: none lost, none twice, nothing left prepared.
func TestTwoPhaseSinkIsExactlyOnceUnderFaults(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		forEachProducerModel(t, func(t *testing.T, perTask bool) { testTwoPhaseSinkUnderFaults(t, c, perTask) })
	})
}

func testTwoPhaseSinkUnderFaults(t *testing.T, c *kafkatest.Cluster, perTask bool) {
	{
		e := newSinkEnv(t, c)
		e.perTask = perTask
		stateDir := t.TempDir()
		app, err := eddy.New(e.topo, e.config(t, stateDir))
		if err != nil {
			t.Fatal(err)
		}
		var commits, aborted, unknownBefore, unknownAfter, prepares, failedPrepares atomic.Int32
		eddy.SetBeforeCommitHook(app, func(processor.TaskID) error {
			if n := commits.Add(1); n%7 == 3 {
				aborted.Add(1)
				return errors.New("injected: the Kafka commit is rejected after the sink transactions were prepared")
			}
			return nil
		})
		eddy.SetBeforeCommitUnknownHook(app, func(processor.TaskID) error {
			if commits.Load()%11 == 5 && unknownBefore.Load() < 3 {
				unknownBefore.Add(1)
				return errors.New("injected: the commit's outcome is unknown (not sent)")
			}
			return nil
		})
		eddy.SetAfterCommitHook(app, func(processor.TaskID) error {
			if commits.Load()%13 == 8 && unknownAfter.Load() < 3 {
				unknownAfter.Add(1)
				return errors.New("injected: the commit's answer was lost (it committed)")
			}
			return nil
		})
		var commitFails atomic.Bool
		e.target.SetHooks(boltsink.Hooks{
			BeforePrepare: func(sink.TxnID) error {
				if prepares.Add(1)%9 == 4 {
					failedPrepares.Add(1)
					return errors.New("injected: the sink's pre-commit fails")
				}
				return nil
			},
			BeforeCommit: func(sink.TxnID) error {
				if commitFails.Load() {
					return errors.New("injected: the sink is down after the Kafka commit")
				}
				return nil
			},
		})
		in := run(t, app)
		for range 12 {
			e.produce(t, 60)
			time.Sleep(150 * time.Millisecond)
		}
		e.waitDelivered(t, in, "every count delivered under injected faults")
		// Idle, nothing may stay prepared: an aborted unit of work's prepared
		// transactions are rolled back at once, not left to the next start (a
		// PostgreSQL prepared transaction holds its locks until then).
		waitFor(t, 30*time.Second, "no sink transaction left prepared while idle", func() (bool, error) {
			return len(e.pending(t)) == 0, nil
		})
		if aborted.Load() == 0 || unknownBefore.Load() == 0 || unknownAfter.Load() == 0 || failedPrepares.Load() == 0 {
			t.Fatalf("faults not injected: %d aborted, %d unknown before, %d unknown after, %d failed prepares over %d commits",
				aborted.Load(), unknownBefore.Load(), unknownAfter.Load(), failedPrepares.Load(), commits.Load())
		}

		// The sink goes down after a Kafka commit; the instance stops meanwhile.
		commitFails.Store(true)
		e.produce(t, 80)
		waitFor(t, time.Minute, "a committed transaction's sink transaction left prepared", func() (bool, error) {
			return len(e.pending(t)) > 0, nil
		})
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
		left := e.pending(t)
		if lost, _, _, _ := e.check(); lost == 0 {
			t.Fatalf("the stopped instance left %v prepared but nothing is missing: the fault did not hold back a commit", left)
		}
		// A zombie's leftover whose Kafka transaction never committed.
		zombie := sink.TxnID{App: e.appID, Task: "0_0", Node: "db", Nonce: 0x5eed}
		if err := e.target.PrepareLeftover(zombie, sink.Record[string, int64]{Key: "zombie", Value: 1}); err != nil {
			t.Fatal(err)
		}
		commitFails.Store(false)
		e.target.SetHooks(boltsink.Hooks{})

		in2 := start(t, e.topo, e.config(t, stateDir))
		e.produce(t, 100)
		e.waitDelivered(t, in2, "every count delivered after the restart")
		if err := in2.stop(); err != nil {
			t.Fatal(err)
		}
		lost, dups, extra, err := e.check()
		if err != nil {
			t.Fatal(err)
		}
		rows, _ := e.target.Rows()
		if _, ok := rows["zombie/00000001"]; ok {
			t.Error("the leftover of a transaction that never committed was committed")
		}
		if p := e.pending(t); len(p) > 0 {
			t.Errorf("left prepared after a clean stop: %v", p)
		}
		if lost+dups+extra > 0 {
			t.Fatalf("lost=%d duplicates=%d extra=%d (left prepared at the stop: %v)", lost, dups, extra, left)
		}
		t.Logf("commits=%d aborted=%d unknown-before=%d unknown-after=%d failed-prepares=%d left-prepared-at-stop=%d",
			commits.Load(), aborted.Load(), unknownBefore.Load(), unknownAfter.Load(), failedPrepares.Load(), len(left))
	}
}

// Two-phase commit needs the Kafka transaction that names its transactions: under
// at-least-once the application refuses to start, naming the node and the choices.
func TestTwoPhaseSinkRefusedUnderAtLeastOnce(t *testing.T) {
	b := kafkatest.Start(t)
	c := kafkatest.Connect(t, "embedded", b.Addrs())
	e := newSinkEnv(t, c)
	cfg := e.config(t, t.TempDir())
	cfg.Guarantee = eddy.AtLeastOnce
	_, err := eddy.New(e.topo, cfg)
	if !errors.Is(err, eddy.ErrConfig) || !strings.Contains(err.Error(), `sink node "db"`) || !strings.Contains(err.Error(), "ExactlyOnce") {
		t.Fatalf("New under at-least-once with a two-phase sink: %v, want an ErrConfig naming the node and ExactlyOnce", err)
	}
	cfg.Guarantee = eddy.ExactlyOnce
	cfg.ApplicationID = strings.Repeat("a", 160)
	if _, err := eddy.New(e.topo, cfg); !errors.Is(err, eddy.ErrConfig) || !strings.Contains(err.Error(), "200") {
		t.Fatalf("New with transaction IDs over 200 bytes: %v, want an ErrConfig", err)
	}
}

// A prepared transaction rolled back by hand after its Kafka transaction committed
// cannot be committed any more: the application stops and says so (a retry would
// loop for ever, and its rows are not in the target).
func TestSinkTransactionRolledBackOutsideStopsTheApp(t *testing.T) {
	b := kafkatest.Start(t)
	c := kafkatest.Connect(t, "embedded", b.Addrs())
	e := newSinkEnv(t, c)
	var once atomic.Bool
	e.target.SetHooks(boltsink.Hooks{BeforeCommit: func(id sink.TxnID) error {
		if once.CompareAndSwap(false, true) {
			return e.target.Rollback(context.Background(), id) // an operator's ROLLBACK PREPARED
		}
		return nil
	}})
	in := start(t, e.topo, e.config(t, t.TempDir()))
	e.produce(t, 40)
	var err error
	waitFor(t, time.Minute, "the application to stop", func() (bool, error) {
		var done bool
		err, done = in.exited()
		return done, nil
	})
	if err == nil || !strings.Contains(err.Error(), "rolled back outside eddy's protocol") || !errors.Is(err, sink.ErrNotPrepared) {
		t.Fatalf("Run: %v; want an error saying the committed transaction was rolled back outside eddy", err)
	}
}

// A clean stop commits the open unit of work and then its sink transactions: nothing is
// left prepared for the next start (the commit at the end of a session used to leave
// its sink transactions prepared until the tasks started again).
func TestCleanStopLeavesNoSinkTransactionPrepared(t *testing.T) {
	b := kafkatest.Start(t)
	c := kafkatest.Connect(t, "embedded", b.Addrs())
	e := newSinkEnv(t, c)
	cfg := e.config(t, t.TempDir())
	cfg.TransactionTimeout, cfg.CommitInterval = 2*time.Minute, time.Minute // only the stop commits
	in := start(t, e.topo, cfg)
	e.produce(t, 40)
	time.Sleep(8 * time.Second) // processed, not committed
	if err := in.stop(); err != nil {
		t.Fatal(err)
	}
	if p := e.pending(t); len(p) > 0 {
		t.Fatalf("left prepared by a clean stop: %v", p)
	}
	if lost, dups, extra, err := e.check(); err != nil || lost+dups+extra > 0 {
		t.Fatalf("lost=%d duplicates=%d extra=%d %v", lost, dups, extra, err)
	}
}
