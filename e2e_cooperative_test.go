package eddy_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
)

// Cooperative rebalancing stops only what moves (issue 24 item 4): with lines flowing,
// a second instance joins an instance running all 8 tasks, one per worker. The first
// instance releases the tasks that move — each one's open transaction committed before
// its partitions go — and its other tasks never stop: each of them starts once ("task
// running") over the whole run, where the eager protocol suspends and starts again
// every task of the group at each rebalance. Then the second instance leaves and the
// first takes its tasks back within the same session. Every word is counted exactly
// once throughout.
func TestCooperativeRebalanceStopsOnlyWhatMoves(t *testing.T) {
	forEachProducerModel(t, testCooperativeRebalanceStopsOnlyWhatMoves)
}

func testCooperativeRebalanceStopsOnlyWhatMoves(t *testing.T, perTask bool) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 4)
		e.perTask = perTask
		logA, logB := newLogCapture(), newLogCapture()
		cfgA, cfgB := e.config(t), e.config(t)
		cfgA.Logger, cfgB.Logger = slog.New(logA), slog.New(logB)
		for _, cfg := range []*eddy.Config{&cfgA, &cfgB} {
			cfg.RebalanceProtocol = eddy.CooperativeRebalancing
			cfg.Workers = 8 // one task per worker on a: the workers of the tasks a keeps lose none
		}
		a := start(t, e.topo, cfgA)
		waitFor(t, time.Minute, "a to own every task", func() (bool, error) { return len(a.app.Tasks()) == 8, nil })
		e.produce(t, 100)
		e.waitCountsWhileRunning(t, a, time.Minute, "the counts")

		// Lines keep coming while b joins and while it leaves.
		stopLines := flowLines(e)
		defer stopLines()

		b := start(t, e.topo, cfgB)
		waitFor(t, time.Minute, "both instances to own tasks, none twice", func() (bool, error) {
			ta, tb := a.app.Tasks(), b.app.Tasks()
			return len(ta) > 0 && len(tb) > 0 && len(ta)+len(tb) == 8, nil
		})
		kept, moved := a.app.Tasks(), b.app.Tasks()
		time.Sleep(time.Second) // processing in the new generation, lines still coming

		// a released exactly the tasks b runs, each once.
		released := map[string]int{}
		for _, l := range logA.grep("task released to its next owner") {
			released[attr(l, "task")]++
		}
		for _, id := range moved {
			if released[id.String()] != 1 {
				t.Errorf("task %s moved to b; a released it %d times, want 1 (released: %v)", id, released[id.String()], released)
			}
		}
		if len(released) != len(moved) {
			t.Errorf("a released %v; b runs %v", released, moved)
		}
		// The tasks a kept never stopped.
		for _, id := range kept {
			if n := starts(logA, id); n != 1 {
				t.Errorf("task %s stayed on a and started %d times, want 1: it was stopped by the rebalance", id, n)
			}
		}
		if got := logA.grep("consumer group session ended"); len(got) > 0 {
			t.Errorf("a's session ended: %q", got)
		}

		// b leaves; a takes its tasks back within its session.
		if err := b.stop(); err != nil {
			t.Fatalf("stopping b: %v", err)
		}
		waitFor(t, time.Minute, "a to own every task again", func() (bool, error) { return len(a.app.Tasks()) == 8, nil })
		time.Sleep(time.Second)
		if err := stopLines(); err != nil {
			t.Fatal(err)
		}
		e.waitCountsWhileRunning(t, a, time.Minute, "the counts after b left")
		for _, id := range kept {
			if n := starts(logA, id); n != 1 {
				t.Errorf("task %s stayed on a throughout and started %d times, want 1", id, n)
			}
		}
		if err := a.stop(); err != nil {
			t.Fatalf("stopping a: %v", err)
		}
		e.checkExactlyOnce(t)
		t.Logf("kept on a: %v; moved to b and back: %v; %d lines", kept, moved, e.linesWritten)
	})
}

// flowLines writes 10 lines every 20 ms, until the stop it returns is called; stop
// waits for the writer and returns its error, if a write failed. The expected counts
// (e.want) are read once it has stopped.
func flowLines(e *wcEnv) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	var lines sync.WaitGroup
	var err error
	lines.Go(func() {
		for ctx.Err() == nil {
			if err = e.produceErr(10); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	var once sync.Once
	return func() error {
		once.Do(func() { cancel(); lines.Wait() })
		return err
	}
}

// attr returns the value of key=value in a captured log line.
func attr(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// starts counts the times task id started running in log.
func starts(log logCapture, id processor.TaskID) int {
	n := 0
	for _, l := range log.grep("task running") {
		if attr(l, "task") == id.String() {
			n++
		}
	}
	return n
}

// A worker that releases a task under cooperative rebalancing commits and starts again
// on the tasks it keeps; those are carried over (taskRunner.ready): they run again at
// once, without reading back the offsets record the worker's commit has just written
// (on real Kafka that read was 100-140 ms of their pause, BENCHMARKS.md "Availability").
// Here the first instance runs all 4 tasks on one worker, so each release, and each
// task taken back when the second instance leaves, restarts that worker with kept
// tasks: every restart reports them all carried, and every word is counted exactly
// once, with lines flowing throughout.
func TestCooperativeReleaseCarriesTheKeptTasks(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		logA := newLogCapture()
		cfgA, cfgB := e.config(t), e.config(t)
		cfgA.Logger = slog.New(logA)
		cfgA.Workers = 1
		cfgA.RebalanceProtocol, cfgB.RebalanceProtocol = eddy.CooperativeRebalancing, eddy.CooperativeRebalancing
		a := start(t, e.topo, cfgA)
		waitFor(t, time.Minute, "a to own every task", func() (bool, error) { return len(a.app.Tasks()) == 4, nil })
		e.produce(t, 100)
		e.waitCountsWhileRunning(t, a, time.Minute, "the counts")

		stopLines := flowLines(e)
		defer stopLines()

		b := start(t, e.topo, cfgB)
		waitFor(t, time.Minute, "both instances to own tasks, none twice", func() (bool, error) {
			ta, tb := a.app.Tasks(), b.app.Tasks()
			return len(ta) > 0 && len(tb) > 0 && len(ta)+len(tb) == 4, nil
		})
		time.Sleep(time.Second)
		if err := b.stop(); err != nil {
			t.Fatalf("stopping b: %v", err)
		}
		waitFor(t, time.Minute, "a to own every task again", func() (bool, error) { return len(a.app.Tasks()) == 4, nil })
		time.Sleep(time.Second)
		if err := stopLines(); err != nil {
			t.Fatal(err)
		}
		e.waitCountsWhileRunning(t, a, time.Minute, "the counts after b left")
		if err := a.stop(); err != nil {
			t.Fatalf("stopping a: %v", err)
		}

		restarts := logA.grep("tasks running again after a rebalance")
		if len(restarts) < 2 { // a release with a task kept, and a task taken back
			t.Fatalf("a's worker started again with kept tasks %d times, want at least 2: %q", len(restarts), restarts)
		}
		for _, l := range restarts {
			if attr(l, "carried") != attr(l, "kept") {
				t.Errorf("a restart of a's worker carried over %s of its %s kept tasks, want all: %q", attr(l, "carried"), attr(l, "kept"), l)
			}
		}
		if got := logA.grep("consumer group session ended"); len(got) > 0 {
			t.Errorf("a's session ended: %q", got)
		}
		e.checkExactlyOnce(t)
		t.Logf("%d restarts of a's worker, all kept tasks carried; %d lines", len(restarts), e.linesWritten)
	})
}
