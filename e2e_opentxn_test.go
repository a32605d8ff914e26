package eddy_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
)

// Readers of a changelog or offsets partition behind another producer's open
// transaction (issue 22; docs/architecture.md, "Reading to the end of a partition").
// With a producer per worker, the next owner of a task does not abort its previous
// owner's open transaction (another transactional ID): a previous owner that stalled or
// died in a commit holds the partition's last stable offset at its first record until
// the transaction ends, while records committed behind it lie above that offset.

// openTxn begins a transaction of a producer of its own (a previous owner stalled in a
// commit), writes one record to partition of topic in it and leaves it open; the broker
// aborts it after timeout, the test may end it earlier.
func openTxn(t *testing.T, c *kafkatest.Cluster, topic string, partition int32, key, value []byte, timeout time.Duration) *producer.Producer {
	t.Helper()
	ctx := ctxT(t)
	p, err := producer.New(ctx, producer.Config{Brokers: c.Addrs(), Sarama: kafkatest.NewSaramaConfig(), TransactionalID: c.Unique("previous-owner"), TransactionTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if err := p.Send(ctx, topic, partition, key, value, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

// behindOpenTxn fails the test unless records lie above partition 0's last stable
// offset of topic (a transaction is open with commits behind it), and returns both
// offsets.
func behindOpenTxn(t *testing.T, c *kafkatest.Cluster, topic string) (lso, hwm int64) {
	t.Helper()
	l, err := c.EndOffsets(ctxT(t), topic, sarama.ReadCommitted)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.EndOffsets(ctxT(t), topic, sarama.ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	if h[0] <= l[0]+1 { // the open transaction's record at l, commits after it
		t.Fatalf("scene: %s/0 last stable offset %d, high-water mark %d: want commits behind an open transaction", topic, l[0], h[0])
	}
	return l[0], h[0]
}

// A task that moves twice while a previous owner's transaction is open on its
// changelog: B commits behind it, then C must restore B's commits, not stop at the
// open transaction's first record (it reads the input from B's committed offsets, so
// B's updates would be lost: counts start over).
func TestRestoreWaitsForAnotherProducersOpenTxn(t *testing.T) {
	// No transaction open: the wait costs nothing.
	t.Run("control", func(t *testing.T) {
		kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) { testRestoreBehindOpenTxn(t, c, noOpenTxn) })
	})
	// The previous owner A stalled in a commit before B took the task (the order of
	// issue 22): B waits until the broker aborts A's transaction past its timeout, then
	// restores and commits; C then finds no transaction open.
	t.Run("open-before-B", func(t *testing.T) {
		kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) { testRestoreBehindOpenTxn(t, c, openBeforeB) })
	})
	// A transaction opened while B runs (a zombie's), and B commits behind it: C must
	// hold the task in its restore until the transaction ends (the test aborts it two
	// seconds after C owns the task), then restore B's commits.
	t.Run("open-while-B-runs", func(t *testing.T) {
		kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) { testRestoreBehindOpenTxn(t, c, openWhileBRuns) })
	})
}

type openTxnScene int

const (
	noOpenTxn openTxnScene = iota
	openBeforeB
	openWhileBRuns
)

func testRestoreBehindOpenTxn(t *testing.T, c *kafkatest.Cluster, scene openTxnScene) {
	e := newWordCount(t, c, 1)
	cl := names.ChangelogTopic(e.appID, wordcount.StoreName)
	if err := c.CreateTopic(ctxT(t), cl, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	zombie := []byte("zombie")
	var prev *producer.Producer
	if scene == openBeforeB {
		// The broker ends it: 8 s, longer than B's start and first commits, so that a B
		// that did not wait would commit behind it.
		prev = openTxn(t, c, cl, 0, zombie, make([]byte, 8), 8*time.Second)
	}
	e.produce(t, 300)
	inB := start(t, e.topo, e.config(t))
	e.waitCountsWhileRunning(t, inB, time.Minute, "B's counts")
	if scene == openWhileBRuns {
		prev = openTxn(t, c, cl, 0, zombie, make([]byte, 8), time.Minute)
		e.produce(t, 30)
		e.waitCountsWhileRunning(t, inB, time.Minute, "B's counts behind the open transaction")
		behindOpenTxn(t, c, cl)
	}

	// The task moves to C (a fresh state dir).
	inC := start(t, e.topo, e.config(t))
	if err := inB.stop(); err != nil {
		t.Fatalf("stopping B: %v", err)
	}
	waitFor(t, time.Minute, "C to own every task", func() (bool, error) { return len(inC.app.Tasks()) == 2, nil })
	if scene == openWhileBRuns {
		// C holds the task in its restore while the transaction is open.
		waitFor(t, time.Minute, "C to restore", func() (bool, error) { return inC.app.State() == eddy.StateRestoring, nil })
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if s := inC.app.State(); s != eddy.StateRestoring {
				t.Fatalf("C is %s while a transaction is open in front of B's commits on %s/0: it took the last stable offset for the end of the changelog", s, cl)
			}
		}
		if err := prev.Abort(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	e.produce(t, 20)
	waitProcessed(t, c, e, inC)
	if err := inC.stop(); err != nil {
		t.Fatalf("stopping C: %v", err)
	}
	e.checkExactlyOnce(t)
}

// Settling a commit of unknown outcome reads the task's offsets record back: the
// transaction's own nonce there means it committed. Another producer's transaction open
// on the offsets partition (a previous owner stalled in a commit) holds the last stable
// offset below that record: read only up to it, the committed transaction was taken for
// aborted and its input processed again, counted twice (issue 22, item 3).
func TestSettleFindsItsCommitBehindAnotherProducersOpenTxn(t *testing.T) {
	t.Run("control", func(t *testing.T) {
		kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) { testSettleBehindOpenTxn(t, c, false) })
	})
	// The settle holds until the transaction ends (the test aborts it after 2 s).
	t.Run("open", func(t *testing.T) {
		kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) { testSettleBehindOpenTxn(t, c, true) })
	})
}

func testSettleBehindOpenTxn(t *testing.T, c *kafkatest.Cluster, open bool) {
	e := newWordCount(t, c, 1)
	e.produce(t, 300)
	app, err := eddy.New(e.topo, e.config(t))
	if err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	var injected atomic.Int32
	eddy.SetAfterCommitHook(app, func(task processor.TaskID) error {
		if task.Subtopology != 1 || !armed.Load() || injected.Add(1) != 1 {
			return nil
		}
		return errors.New("injected: the EndTxn answer was lost")
	})
	in := run(t, app)
	e.waitCountsWhileRunning(t, in, time.Minute, "the counts")

	var prev *producer.Producer
	if open {
		// The previous owner's transaction, stalled in its commit: it wrote task 1_0's
		// offsets record (a nonce of its own) and never ended.
		offsets := names.ChangelogTopic(e.appID, names.OffsetsStore(1))
		prev = openTxn(t, c, offsets, 0, []byte("\x00commit"), binary.BigEndian.AppendUint64(nil, 12345), time.Minute)
	}
	// The worker's next commit of task 1_0 commits, but its answer is lost.
	armed.Store(true)
	e.produce(t, 20)
	waitFor(t, time.Minute, "the commit made unknown", func() (bool, error) { return injected.Load() > 0, nil })
	if open {
		time.Sleep(2 * time.Second)
		if err := prev.Abort(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	waitProcessed(t, c, e, in)
	if err := in.stop(); err != nil {
		t.Fatal(err)
	}
	e.checkExactlyOnce(t)
}

// A settle must not wait for its own worker's transaction: recreating the producer
// aborts it before the offsets records are read. The commit fails before it is sent,
// with an unknown outcome, so the worker's transaction is open when the settle begins;
// waiting for it would take until the broker aborts it (the transaction timeout, 30 s
// here).
func TestSettleDoesNotWaitForItsOwnTransaction(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 1)
		e.produce(t, 300)
		cfg := e.config(t)
		cfg.TransactionTimeout = 30 * time.Second
		app, err := eddy.New(e.topo, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var armed atomic.Bool
		var injectedAt atomic.Int64
		offsets := names.ChangelogTopic(e.appID, names.OffsetsStore(1))
		eddy.SetBeforeCommitUnknownHook(app, func(task processor.TaskID) error {
			if task.Subtopology != 1 || !armed.Load() || injectedAt.Load() != 0 {
				return nil
			}
			// The transaction's records are sent but maybe not yet written: fail the
			// commit once its offsets record holds the partition's last stable offset.
			for range 100 {
				lso, err1 := c.EndOffsets(ctxT(t), offsets, sarama.ReadCommitted)
				hwm, err2 := c.EndOffsets(ctxT(t), offsets, sarama.ReadUncommitted)
				if err1 == nil && err2 == nil && lso[0] < hwm[0] {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			injectedAt.Store(time.Now().UnixNano())
			return errors.New("injected: the commit timed out")
		})
		in := run(t, app)
		e.waitCountsWhileRunning(t, in, time.Minute, "the counts")
		armed.Store(true)
		e.produce(t, 20)
		waitFor(t, time.Minute, "the commit made unknown", func() (bool, error) { return injectedAt.Load() != 0, nil })
		waitProcessed(t, c, e, in)
		if took := time.Since(time.Unix(0, injectedAt.Load())); took > 15*time.Second {
			t.Errorf("the settle and replay took %v: the settle waited for its own transaction", took)
		}
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
		e.checkExactlyOnce(t)
	})
}

// run runs app in a goroutine, as start does for a topology.
func run(t *testing.T, app *eddy.App) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{app: app, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- app.Run(ctx) }()
	t.Cleanup(func() { _ = in.stop() })
	return in
}

// waitProcessed waits until the word count has processed its input and its repartition
// topic, while in runs.
func waitProcessed(t *testing.T, c *kafkatest.Cluster, e *wcEnv, in *instance) {
	t.Helper()
	waitFor(t, time.Minute, "the input processed", func() (bool, error) {
		if err, done := in.exited(); done {
			return false, fmt.Errorf("app stopped: %v", err)
		}
		return c.WaitProcessed(ctxT(t), e.appID, e.input, names.RepartitionTopic(e.appID, "words")) == nil, nil
	})
}

// The global stores' bootstrap reads every partition of their topics before any task
// starts; a transaction open on a global topic (its producer stalled) holds the last
// stable offset below records committed after it. The bootstrap must wait for it (the
// test aborts it after 2 s), or the tasks start without those records: a click waiting
// for a user committed behind the open transaction would not join.
func TestGlobalBootstrapWaitsForAnotherProducersOpenTxn(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := ctxT(t)
		users, clicks, out := c.Unique("g-users"), c.Unique("g-clicks"), c.Unique("g-out")
		for _, topic := range []string{users, clicks, out} {
			if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
		str := serde.String()
		user := func(k, v string) {
			if err := kafkatest.ProduceTyped(ctx, c, users, str, str, processor.Record[string, string]{Key: k, Value: v}); err != nil {
				t.Fatal(err)
			}
		}
		user("u0", "name0")
		prev := openTxn(t, c, users, 0, []byte("u9"), []byte("zombie"), time.Minute)
		user("u1", "name1")
		behindOpenTxn(t, c, users)
		if err := kafkatest.ProduceTyped(ctx, c, clicks, str, str,
			processor.Record[string, string]{Key: "c0", Value: "u0"}, processor.Record[string, string]{Key: "c1", Value: "u1"}); err != nil {
			t.Fatal(err)
		}

		const store = "users-global"
		b := stream.NewBuilder()
		g := stream.GlobalTableFrom(b, str, str, users, stream.Materialized(store))
		cs := stream.From(b, str, str, []string{clicks})
		stream.GlobalJoin(cs, g, func(_, user string) (string, bool) { return user, true },
			func(_, user, name string) string { return user + "=" + name }).To(out, str, str)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		in := start(t, topo, eddy.Config{ApplicationID: c.Unique("global"), Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t)})
		q, err := eddy.Query[string, string](in.app, store)
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if v, ok, err := q.Get("u0"); !errors.Is(err, eddy.ErrNotReady) {
				t.Fatalf("the global store answered u0 = %q (%v, %v) while a transaction was open in front of committed records of its topic: the bootstrap took the last stable offset for the end", v, ok, err)
			}
		}
		if err := prev.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{"c0:u0=name0": true, "c1:u1=name1": true}
		got := map[string]bool{}
		waitFor(t, time.Minute, "the joined clicks", func() (bool, error) {
			if err, done := in.exited(); done {
				return false, fmt.Errorf("app stopped: %v", err)
			}
			recs, err := kafkatest.ReadCommittedTyped(ctx, c, out, str, str)
			if err != nil {
				return false, err
			}
			clear(got)
			for _, r := range recs {
				got[r.Key+":"+r.Value] = true
			}
			return len(got) >= len(want), nil
		})
		if !maps.Equal(got, want) {
			t.Errorf("joined clicks %v, want %v", got, want)
		}
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
	})
}
