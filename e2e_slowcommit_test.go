package eddy_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
)

// One commit slower than the transaction timeout (it spanned a broker restart, say) does
// not make every later transaction outlive the timeout. A worker waits after a commit as
// long as that commit took (worker.commitGap) — but the next transaction opens at the
// first record after the commit, and the broker aborts it once the timeout passes and
// bumps the producer's epoch: its commit is fenced, the worker drops its tasks and
// rejoins, and, since a failed commit leaves the time of the last good one in place, the
// same again in every session, in the harness to the end of its run (the exactly-once harness,
// seed 1796307357998205083: a fence every ~16 s for the last three minutes of the run).
//
// Here the after-commit hook holds one commit that carried records for 7 s, beyond a
// transaction timeout of 6 s, while lines keep coming; then every word must be counted,
// exactly once, with no transaction aborted or fenced and one generation; the worker
// must have committed again. Uncapped (the mutant), the next transactions were fenced
// three times in a row on kfake.
func TestSlowCommitDoesNotFenceTheNextTransactions(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		t.Parallel() // mostly waiting: the brokers' runs overlap
		// The cap leaves the next transaction half the timeout, 3 s, for its own commit: a
		// loaded CI machine takes under 1 s.
		const txnTimeout, slow = 6 * time.Second, 7 * time.Second
		e := newWordCount(t, c, 1)
		cfg := e.config(t)
		cfg.Workers = 1
		cfg.CommitInterval = 100 * time.Millisecond
		cfg.TransactionTimeout = txnTimeout
		reg := prometheus.NewRegistry()
		cfg.Metrics = reg
		app, err := eddy.New(e.topo, cfg)
		if err != nil {
			t.Fatal(err)
		}
		// One partition, one task: the hook is called once per commit.
		var held, slowDone atomic.Bool
		var afterSlow atomic.Int32
		eddy.SetAfterCommitHook(app, func(processor.TaskID) error {
			if held.CompareAndSwap(false, true) {
				time.Sleep(slow)
				slowDone.Store(true)
			} else if slowDone.Load() {
				afterSlow.Add(1)
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		in := &instance{app: app, cancel: cancel, done: make(chan error, 1)}
		go func() { in.done <- app.Run(ctx) }()
		t.Cleanup(func() { _ = in.stop() })

		// Lines arrive before, during and after the slow commit, for 12 s in all: the
		// transaction after it opens as soon as the worker processes again.
		for i := 0; i < 60; i++ {
			e.produce(t, 20)
			time.Sleep(200 * time.Millisecond)
		}
		e.waitCountsWhileRunning(t, in, time.Minute, "every word counted after a commit slower than the transaction timeout")
		e.checkExactlyOnce(t)
		if !slowDone.Load() {
			t.Fatal("no commit was held: the test did not make a slow commit")
		}
		// The mutant's loop ends on its own at times (one session's transaction commits in
		// time: a recovery that settles an unknown outcome recreates the producer and
		// commits at once), so the counts alone do not tell: no transaction of this run
		// may have been aborted or fenced, and the instance joined one generation.
		if n := counterTotal(t, reg, "eddy_fenced_tasks_total"); n != 0 {
			t.Errorf("%v tasks fenced after a slow commit; want none (its next transaction outlived the timeout)", n)
		}
		if n := counterTotal(t, reg, "eddy_aborted_transactions_total"); n != 0 {
			t.Errorf("%v transactions aborted; want none", n)
		}
		if n := counterTotal(t, reg, "eddy_rebalances_total"); n != 1 {
			t.Errorf("%v generations joined; want 1", n)
		}
		if n := afterSlow.Load(); n < 2 {
			t.Errorf("%d commits after the slow one; want at least 2", n)
		} else {
			t.Logf("%d commits after the slow one", n)
		}
	})
}

// A processor that blocks past the transaction timeout makes the broker abort the
// worker's transaction and fence its producer, which the worker cannot tell from its
// tasks moving: it drops them and rejoins, and gets them back. It must say what
// happened — at Warn, naming Config.TransactionTimeout and how long the transaction was
// open — not "the tasks moved to another instance", which points at the group instead of
// at what stalled. And the output stays exactly once: 50 values, the second one held for 10 s
// (TransactionTimeout 6 s) once, each doubled value in the output once.
func TestStalledTransactionIsReportedAsTimedOut(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		t.Parallel() // mostly waiting: the brokers' runs overlap
		// Real Kafka looks for timed-out transactions every second here
		// (transaction.abort.timed.out.transaction.cleanup.interval.ms, integration/kafka.sh):
		// a stall of 7 s sometimes ended before the abort, and the commit won the race; 10 s
		// leaves 3 s for the transaction's start on the broker to lag its first record.
		const txnTimeout, stall, n = 6 * time.Second, 10 * time.Second, 50
		ctx := ctxT(t)
		in, out := c.Unique("stall-in"), c.Unique("stall-out")
		for _, topic := range []string{in, out} {
			if err := c.CreateTopic(ctx, topic, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
		msgs := make([]*sarama.ProducerMessage, n)
		for i := range msgs {
			msgs[i] = int64Msg(fmt.Sprint(i), int64(i))
		}
		if err := c.ProduceToPartition(ctx, in, 0, msgs...); err != nil {
			t.Fatal(err)
		}
		// The second value: the first one's output opened the transaction, and with a
		// commit interval of 5 s nothing commits it before the stall (at 100 ms the worker
		// committed after the first record and the stall fell between transactions).
		var stalled atomic.Bool
		topo := valueTopology(t, in, out, func(v int64) error {
			if v == 1 && stalled.CompareAndSwap(false, true) {
				time.Sleep(stall)
			}
			return nil
		})
		logs := newLogCapture()
		reg := prometheus.NewRegistry()
		a := start(t, topo, eddy.Config{ApplicationID: c.Unique("stall"), Brokers: c.Addrs(), StateDir: t.TempDir(),
			Logger: slog.New(logs), Metrics: reg, Workers: 1, CommitInterval: 5 * time.Second, TransactionTimeout: txnTimeout})
		var got map[int64]int
		waitFor(t, 2*time.Minute, "every value doubled in the output", func() (bool, error) {
			if err, done := a.exited(); done {
				return false, fmt.Errorf("app stopped: %v", err)
			}
			recs, err := c.ReadCommitted(ctx, out)
			if err != nil {
				return false, err
			}
			got = map[int64]int{}
			for _, m := range recs {
				v, err := serde.Int64().Deserialize(out, m.Value)
				if err != nil {
					return false, err
				}
				got[v]++
			}
			return len(got) == n, nil
		})
		for v, k := range got {
			if k != 1 || v%2 != 0 || v/2 >= n {
				t.Errorf("output value %d appears %d times; want each of 0, 2, ..., %d once", v, k, 2*(n-1))
			}
		}
		if !stalled.Load() {
			t.Fatal("nothing stalled: the test held no record")
		}
		if f := counterTotal(t, reg, "eddy_fenced_tasks_total"); f == 0 {
			t.Error("no task was fenced: the stall did not outlive the transaction timeout")
		}
		if lines := logs.grep("WARN", "open longer than Config.TransactionTimeout", "open_for="); len(lines) == 0 {
			t.Errorf("no warning names the transaction timeout; fenced lines: %q", logs.grep("fenced"))
		} else {
			t.Logf("%s", lines[0])
		}
		if lines := logs.grep("the tasks moved to another instance"); len(lines) > 0 {
			t.Errorf("a fence by the transaction timeout was reported as a move: %q", lines[0])
		}
	})
}
