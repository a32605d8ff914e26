package eddy_test

import (
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
)

// TestWarmupBeforeTheMove runs one word-count instance until its counting tasks'
// changelogs are far longer than the acceptable recovery lag (20), then starts a
// second. The balanced plan gives the second a counting task; since its state of it is
// the whole changelog behind and the first instance is caught up, the task stays on
// the first while the second warms it up (role "warm-up" in /tasks,
// eddy_tasks{state="warm-up"}); the second's probing rebalance (every 4 s here) then
// moves the task, whose restore there reads only the tail its warm-up had not read.
// The output stays exactly once.
//
// Under cooperative rebalancing the rebalances happen within both instances'
// sessions: the tasks the first keeps (one per worker) and those the second runs never
// stop, each starting once over the whole test, and each task that moves is released
// once by the first.
func TestWarmupBeforeTheMove(t *testing.T) {
	for _, p := range []eddy.RebalanceProtocol{eddy.EagerRebalancing, eddy.CooperativeRebalancing} {
		t.Run(p.String(), func(t *testing.T) { testWarmupBeforeTheMove(t, p) })
	}
}

func testWarmupBeforeTheMove(t *testing.T, protocol eddy.RebalanceProtocol) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		logFirst, logSecond := newLogCapture(), newLogCapture()
		var mu sync.Mutex
		restored := map[string]int64{} // the second instance's restores, by task
		regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
		cfgs := make([]eddy.Config, 2)
		for i := range cfgs {
			cfgs[i] = e.config(t)
			cfgs[i].Metrics = regs[i]
			cfgs[i].AcceptableRecoveryLag = 20
			cfgs[i].ProbingRebalanceInterval = 4 * time.Second
			cfgs[i].RebalanceProtocol = protocol
			cfgs[i].Workers = 4 // one task per worker on the first instance
			cfgs[i].OnRestore = func(task processor.TaskID, r changelog.Result) {
				mu.Lock()
				defer mu.Unlock()
				if i == 1 && r.Store == wordcount.StoreName {
					restored[task.String()] += r.Records
				}
			}
		}
		cfgs[0].Logger, cfgs[1].Logger = slog.New(logFirst), slog.New(logSecond)
		first := start(t, e.topo, cfgs[0])
		for range 5 { // five batches, each counted (and committed) before the next
			e.produce(t, 100)
			e.waitCountsWhileRunning(t, first, 2*time.Minute, "the counts of a batch")
		}
		second := start(t, e.topo, cfgs[1])

		// The second instance warms a counting task up while the first runs it.
		var warm string
		deadline := time.Now().Add(time.Minute)
		for warm == "" {
			if time.Now().After(deadline) {
				t.Fatalf("no warm-up on the second instance within a minute: %+v", second.app.TasksView().Tasks)
			}
			for _, tv := range second.app.TasksView().Tasks {
				if tv.Role == "warm-up" {
					warm = tv.Task
				}
				if tv.Role == "active" && strings.HasPrefix(tv.Task, "1_") {
					t.Fatalf("counting task %s moved to the second instance before any warm-up: %+v", tv.Task, second.app.TasksView().Tasks)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := gauge(t, regs[1], "eddy_tasks", "state", "warm-up"); got != 1 {
			t.Errorf("second instance: eddy_tasks{state=warm-up} = %v; want 1", got)
		}
		if !active(first, warm) {
			t.Errorf("the first instance does not have %s while the second warms it up: %+v", warm, first.app.TasksView().Tasks)
		}
		e.produce(t, 30) // a tail for the move to restore

		waitFor(t, time.Minute, "the warmed-up task running on the second instance", func() (bool, error) {
			if err, done := second.exited(); done {
				return false, err
			}
			return runs(second, warm), nil
		})
		msgs, err := c.ReadCommitted(ctxT(t), changelog.TopicName(e.appID, wordcount.StoreName))
		if err != nil {
			t.Fatal(err)
		}
		id, _ := processor.ParseTaskID(warm)
		var length int64
		for _, m := range msgs {
			if m.Partition == id.Partition {
				length++
			}
		}
		mu.Lock()
		got := restored[warm]
		mu.Unlock()
		t.Logf("%s moved after its warm-up: restored %d records of a %d-record changelog", warm, got, length)
		if length < 60 {
			t.Fatalf("the changelog of %s has %d records; the test needs far more than the acceptable lag (20)", warm, length)
		}
		// The tail is what the warm-up had not read when the task moved (the 30 lines
		// above, if it had not read them yet): the whole changelog is the move without
		// a warm-up.
		if got > length/2 {
			t.Errorf("the move of %s restored %d records of a %d-record changelog; want only the tail", warm, got, length)
		}
		e.waitCountsWhileRunning(t, second, 2*time.Minute, "the counts after the move")
		if protocol == eddy.CooperativeRebalancing {
			checkStartedOnce(t, first, logFirst, "the first instance")
			checkStartedOnce(t, second, logSecond, "the second instance")
			released := map[string]int{}
			for _, l := range logFirst.grep("task released to its next owner") {
				released[attr(l, "task")]++
			}
			want := map[string]int{}
			for _, tv := range second.app.TasksView().Tasks {
				if tv.Role == "active" {
					want[tv.Task] = 1
				}
			}
			if !maps.Equal(released, want) || released[warm] != 1 {
				t.Errorf("the first instance released %v; want each task the second runs (%v, %s among them) once", released, want, warm)
			}
		}
		for _, in := range []*instance{second, first} {
			if err := in.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
		}
		e.checkExactlyOnce(t)
	})
}

// runs reports whether in runs task as an active, running task.
func runs(in *instance, task string) bool {
	for _, tv := range in.app.TasksView().Tasks {
		if tv.Task == task && tv.Role == "active" && tv.State == "running" {
			return true
		}
	}
	return false
}

// active reports whether in has task as an active task, in any state (between two
// sessions it is suspended, then restoring a moment).
func active(in *instance, task string) bool {
	for _, tv := range in.app.TasksView().Tasks {
		if tv.Task == task && tv.Role == "active" {
			return true
		}
	}
	return false
}

// checkStartedOnce checks that every active task of in started running once over the
// test (log is its captured log): no rebalance stopped it.
func checkStartedOnce(t *testing.T, in *instance, log logCapture, name string) {
	t.Helper()
	for _, tv := range in.app.TasksView().Tasks {
		if id, err := processor.ParseTaskID(tv.Task); err == nil && tv.Role == "active" {
			if n := starts(log, id); n != 1 {
				t.Errorf("task %s started %d times on %s, want 1: a rebalance stopped it", id, n, name)
			}
		}
	}
}
