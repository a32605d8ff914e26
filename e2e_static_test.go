package eddy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
)

// restartResult is what one restart of one instance of three did to the group.
type restartResult struct {
	// rebalances are the generations the two instances that stayed up joined during
	// the restart (eddy_rebalances_total: one per generation an instance joins).
	rebalances [2]float64
	// generations are the group generations the two instances that stayed up showed
	// on /tasks (App.TasksView) before and after the restart.
	generations [2][2]int32
	// pause is the longest time a task that stayed on the same instance processed
	// nothing while input flowed (sampled every 25 ms), and pausedTask names it.
	pause      time.Duration
	pausedTask string
	// baseline is the same longest pause over as long a time before the restart,
	// with nothing happening to the group: the noise of a loaded machine.
	baseline time.Duration
	// lull is the longest time the test's producer took to write one batch of input.
	lull time.Duration
	// restored counts the changelog records every instance read during the restart;
	// restarted those the restarted instance read.
	restored, restarted int64
	// changelog is the changelog's length (read_committed) before the restart.
	changelog int64
	// down is the time from the stop until the restarted instance processes again
	// (the test waits 500 ms between the stop and the start).
	down time.Duration
}

// TestStaticMemberRestartsWithoutRebalance restarts one of three word-count instances
// with input flowing, with Config.InstanceID (static members) and without (the
// contrast). With it, the two instances that stay up join no new generation, the
// restarted one restores only its stores' tails, and the output is exactly once;
// without it, the same restart rebalances the group (the leave and the join).
func TestStaticMemberRestartsWithoutRebalance(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		static := restartOneOfThree(t, c, true)
		dynamic := restartOneOfThree(t, c, false)
		for _, r := range []struct {
			name string
			r    restartResult
		}{{"static", static}, {"dynamic", dynamic}} {
			t.Logf("%s: rebalances of the instances that stayed up %v (generations %v → %v); longest pause of a task that did not move %v (%s; %v before the restart; longest produce %v); records restored %d (the restarted instance %d) of a %d-record changelog; down %v",
				r.name, r.r.rebalances, r.r.generations[0], r.r.generations[1], r.r.pause.Round(time.Millisecond), r.r.pausedTask, r.r.baseline.Round(time.Millisecond), r.r.lull.Round(time.Millisecond), r.r.restored, r.r.restarted, r.r.changelog, r.r.down.Round(time.Millisecond))
		}
		if static.generations[0] != static.generations[1] || static.generations[0][0] <= 0 {
			t.Errorf("with InstanceID, the instances that stayed up went from generations %v to %v during the restart; want them unchanged", static.generations[0], static.generations[1])
		}
		if dynamic.generations[0] == dynamic.generations[1] {
			t.Errorf("without InstanceID, the instances that stayed up stayed in generations %v during the restart; want new ones", dynamic.generations[0])
		}
		if static.rebalances != [2]float64{} {
			t.Errorf("with InstanceID, the instances that stayed up joined %v new generations during the restart; want none", static.rebalances)
		}
		if static.restarted > static.changelog/10 {
			t.Errorf("with InstanceID, the restarted instance restored %d records of a %d-record changelog; want only the tails", static.restarted, static.changelog)
		}
		// The contrast shows that the rebalance count sees rebalances at all.
		if dynamic.rebalances[0] == 0 || dynamic.rebalances[1] == 0 {
			t.Errorf("without InstanceID, the instances that stayed up joined %v new generations during the restart; want at least one each (the leave)", dynamic.rebalances)
		}
	})
}

// restartOneOfThree runs three word-count instances with kept state dirs (with fixed
// InstanceIDs when static), input flowing, stops the first and starts it again at once,
// and measures what that did.
func restartOneOfThree(t *testing.T, c *kafkatest.Cluster, static bool) restartResult {
	t.Helper()
	e := newWordCount(t, c, 6)
	var mu sync.Mutex
	restoring := false
	var res restartResult
	cfgs := make([]eddy.Config, 3)
	regs := make([]*prometheus.Registry, 3)
	for i := range cfgs {
		cfgs[i] = e.config(t)
		if static {
			cfgs[i].InstanceID = fmt.Sprintf("%s-%d", e.appID, i)
		}
		regs[i] = prometheus.NewRegistry()
		cfgs[i].Metrics = regs[i]
		cfgs[i].OnRestore = func(task processor.TaskID, r changelog.Result) {
			mu.Lock()
			defer mu.Unlock()
			if restoring {
				res.restored += r.Records
				if i == 0 {
					res.restarted += r.Records
				}
			}
		}
	}
	e.produce(t, 600)
	ins := make([]*instance, 3)
	for i := range ins {
		ins[i] = start(t, e.topo, cfgs[i])
	}
	e.waitCounts(t, 2*time.Minute, "the counts of the first lines")

	// Input flows from here on: 12 lines every 50 ms, so that every task has records to
	// process all the time (a gap of a task's processing is a pause, not a lull).
	produceCtx, stopProducing := context.WithCancel(context.Background())
	produced := make(chan error, 1)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-produceCtx.Done():
				produced <- nil
				return
			case <-tick.C:
			}
			began := time.Now()
			if err := e.produceErr(12); err != nil {
				produced <- err
				return
			}
			mu.Lock()
			res.lull = max(res.lull, time.Since(began))
			mu.Unlock()
		}
	}()
	defer stopProducing()
	// Every task processing: 12 tasks (2 sub-topologies × 6 partitions) advance.
	waitFor(t, time.Minute, "every task processing", func() (bool, error) {
		return len(advancing(t, regs, time.Second)) == 12, nil
	})
	msgs, err := c.ReadCommitted(ctxT(t), changelog.TopicName(e.appID, wordcount.StoreName))
	if err != nil {
		t.Fatal(err)
	}
	res.changelog = int64(len(msgs))

	early := advancing(t, regs[1:], time.Second)
	sampler := startPauseSampler(t, regs[1:])
	time.Sleep(3 * time.Second)
	gaps := sampler.stop()
	before := [2]float64{counter(t, regs[1], "eddy_rebalances_total", ""), counter(t, regs[2], "eddy_rebalances_total", "")}
	res.generations[0] = [2]int32{ins[1].app.TasksView().Generation, ins[2].app.TasksView().Generation}
	kept := advancing(t, regs[1:], time.Second) // tasks of the instances that stay up
	for task := range kept {
		if early[task] {
			res.baseline = max(res.baseline, gaps[task])
		}
	}
	sampler = startPauseSampler(t, regs[1:])
	mu.Lock()
	restoring = true
	mu.Unlock()

	stopped := time.Now()
	if err := ins[0].stop(); err != nil {
		t.Fatalf("stopping the first instance: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	regs[0] = prometheus.NewRegistry()
	cfgs[0].Metrics = regs[0]
	ins[0] = start(t, e.topo, cfgs[0])
	for deadline := time.Now().Add(time.Minute); !anyProcessed(t, regs[0]); time.Sleep(10 * time.Millisecond) {
		if err, done := ins[0].exited(); done {
			t.Fatalf("the restarted instance stopped: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the restarted instance processed nothing within a minute")
		}
	}
	res.down = time.Since(stopped)
	waitFor(t, time.Minute, "every task processing after the restart", func() (bool, error) {
		return len(advancing(t, regs, time.Second)) == 12, nil
	})
	time.Sleep(1500 * time.Millisecond) // the group settles, if it rebalances late

	gaps = sampler.stop()
	stillKept := advancing(t, regs[1:], time.Second)
	for task := range kept {
		if stillKept[task] && gaps[task] > res.pause {
			res.pause, res.pausedTask = gaps[task], task
		}
	}
	res.generations[1] = [2]int32{ins[1].app.TasksView().Generation, ins[2].app.TasksView().Generation}
	res.rebalances = [2]float64{
		counter(t, regs[1], "eddy_rebalances_total", "") - before[0],
		counter(t, regs[2], "eddy_rebalances_total", "") - before[1],
	}
	stopProducing()
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	e.waitCounts(t, 2*time.Minute, "the counts of every line")
	for _, in := range ins {
		if err := in.stop(); err != nil {
			t.Fatal(err)
		}
	}
	e.checkExactlyOnce(t)
	mu.Lock()
	defer mu.Unlock()
	return res
}

// counter sums the metric name (with label task=task, if task is not empty) in reg.
func counter(t *testing.T, reg *prometheus.Registry, name, task string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if task != "" && !hasLabel(m.GetLabel(), "task", task) {
				continue
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// processed reads eddy_records_processed_total per "<instance>/<task>" from regs.
func processed(t *testing.T, regs []*prometheus.Registry) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for i, reg := range regs {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "eddy_records_processed_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "task" {
						out[fmt.Sprintf("%d/%s", i, l.GetValue())] = m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return out
}

// anyProcessed reports whether an instance processed a record.
func anyProcessed(t *testing.T, reg *prometheus.Registry) bool {
	return counter(t, reg, "eddy_records_processed_total", "") > 0
}

// advancing returns the "<instance>/<task>" whose processed count grows within d.
func advancing(t *testing.T, regs []*prometheus.Registry, d time.Duration) map[string]bool {
	t.Helper()
	first := processed(t, regs)
	time.Sleep(d)
	out := map[string]bool{}
	for k, v := range processed(t, regs) {
		if v > first[k] {
			out[k] = true
		}
	}
	return out
}

// pauseSampler records, per "<instance>/<task>", the longest time its processed count
// did not grow.
type pauseSampler struct {
	stopC chan struct{}
	done  chan map[string]time.Duration
}

func startPauseSampler(t *testing.T, regs []*prometheus.Registry) *pauseSampler {
	s := &pauseSampler{stopC: make(chan struct{}), done: make(chan map[string]time.Duration, 1)}
	go func() {
		last := map[string]float64{}
		since := map[string]time.Time{}
		gaps := map[string]time.Duration{}
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			now := time.Now()
			for k, v := range processed(t, regs) {
				if _, ok := since[k]; !ok || v > last[k] {
					last[k], since[k] = v, now
				}
				gaps[k] = max(gaps[k], now.Sub(since[k]))
			}
			select {
			case <-s.stopC:
				s.done <- gaps
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *pauseSampler) stop() map[string]time.Duration {
	close(s.stopC)
	return <-s.done
}

func hasLabel(labels []*dto.LabelPair, name, value string) bool {
	for _, l := range labels {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// TestDuplicateInstanceIDStops: a second instance joining with the InstanceID of a
// running one replaces it in the group (KIP-345); the replaced one is fenced and stops
// with an error naming the setting, rather than rejoining and fencing the other in turn
// for ever.
func TestDuplicateInstanceIDStops(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		first := e.config(t)
		first.InstanceID = e.appID + "-0"
		second := e.config(t) // its own state dir, the same InstanceID
		second.InstanceID = first.InstanceID
		e.produce(t, 50)
		a := start(t, e.topo, first)
		e.waitCountsWhileRunning(t, a, time.Minute, "the first instance's counts")
		b := start(t, e.topo, second)
		var err error
		waitFor(t, time.Minute, "the replaced instance to stop", func() (bool, error) {
			var done bool
			err, done = a.exited()
			if err, bdone := b.exited(); bdone {
				return false, fmt.Errorf("the instance that joined last stopped: %v", err)
			}
			return done, nil
		})
		if !errors.Is(err, sarama.ErrFencedInstancedId) || !strings.Contains(err.Error(), "InstanceID") {
			t.Fatalf("the replaced instance stopped with %v; want the fenced instance error naming InstanceID", err)
		}
		t.Logf("the replaced instance stopped with: %v", err)
		e.produce(t, 50)
		e.waitCountsWhileRunning(t, b, time.Minute, "the counts, from the instance that joined last")
		if err := b.stop(); err != nil {
			t.Fatal(err)
		}
		e.checkExactlyOnce(t)
	})
}

// TestStaticRollingRestartKeepsTheGeneration restarts each of three static instances in
// turn (so the group's leader too, whichever it is; sarama's JoinGroup v8 has no
// SkipAssignment, so a restarted leader runs the assignor, and the coordinator of a
// stable group keeps the assignment it has): every instance, the restarted ones
// included, stays in the generation it had, and the restarts restore nothing, the
// stores being written when each instance stops.
func TestStaticRollingRestartKeepsTheGeneration(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 6)
		var mu sync.Mutex
		var restored int64
		cfgs := make([]eddy.Config, 3)
		ins := make([]*instance, 3)
		for i := range cfgs {
			cfgs[i] = e.config(t)
			cfgs[i].InstanceID = fmt.Sprintf("%s-%d", e.appID, i)
			cfgs[i].OnRestore = func(_ processor.TaskID, r changelog.Result) {
				mu.Lock()
				restored += r.Records
				mu.Unlock()
			}
			ins[i] = start(t, e.topo, cfgs[i])
		}
		generations := func() [3]int32 {
			var g [3]int32
			for i, in := range ins {
				g[i] = in.app.TasksView().Generation
			}
			return g
		}
		e.produce(t, 300)
		e.waitCounts(t, time.Minute, "the counts")
		var before [3]int32
		// Every task restored (running) in one generation: the restores of the start's
		// own rebalances are over (one of them, late, once counted 38 records here).
		waitFor(t, time.Minute, "one generation for all, every task running", func() (bool, error) {
			before = generations()
			for _, in := range ins {
				if in.app.State() != eddy.StateRunning {
					return false, nil
				}
			}
			return before[0] > 0 && before[0] == before[1] && before[1] == before[2] && generations() == before, nil
		})
		mu.Lock()
		restored = 0
		mu.Unlock()
		for i := range ins {
			if err := ins[i].stop(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			ins[i] = start(t, e.topo, cfgs[i])
			e.produce(t, 50)
			e.waitCountsWhileRunning(t, ins[i], time.Minute, fmt.Sprintf("the counts after restarting instance %d", i))
			if g := generations(); g != before {
				t.Fatalf("after restarting instance %d the generations are %v; want %v throughout", i, g, before)
			}
		}
		e.checkExactlyOnce(t)
		mu.Lock()
		defer mu.Unlock()
		t.Logf("generations %v throughout; %d changelog records restored by the three restarts", before, restored)
		if restored != 0 {
			t.Errorf("the restarts restored %d changelog records; want none (each instance wrote its stores when it stopped)", restored)
		}
	})
}
