//go:build linux

package main

import (
	"context"
	"fmt"
	"log"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// -scenario rolling (issue 24, item 5's rolling restart and item 4's pause of a task
// that does not move): -instances instances of the key-value application share a
// store of -keys keys over -partitions partitions with input flowing (2,000 updates
// of random keys a second); each instance in turn is stopped with SIGTERM and started
// again on its state dir, the next once the restarted one runs tasks and every task
// runs somewhere, plus settleGap; then one more instance joins (a scale-up). It runs
// once per -static and -standbys setting: with static, every instance has
// Config.InstanceID "inst-<i>", kept across its restart. With -down, each stopped
// instance stays down that long before it starts again (longer than the session
// timeout, 10 s: the group notices it is gone); -scaleup=false leaves out the scale-up.
//
// A task's pause is the longest time between two consecutive records it processed,
// on any instance (the children report a task's first record on an instance and then
// a record at most every tickEvery, so a pause is measured up to tickEvery long); it
// is processing time, not commit time. Rebalances are the generations the group went
// through (App.TasksView's Generation, the highest any instance reports).

// settleGap is how long the rolling restart waits after an instance is back before it
// stops the next, how long the scale-up runs after the new instance runs tasks, and
// the baseline's length (rollingConfig.gap; the CI test's is shorter).
const settleGap = 5 * time.Second

// rollingConfig is one run of the rolling scenario.
type rollingConfig struct {
	brokers    []string
	keys       int
	partitions int32
	valueBytes int
	instances  int
	static     bool          // Config.InstanceID "inst-<i>"
	standbys   int           // Config.NumStandbyReplicas
	down       time.Duration // how long a stopped instance stays down
	scaleUp    bool          // then one more instance joins
	gap        time.Duration // settleGap if 0
	// sessionTimeout is the instances' session timeout (0: eddy's 10 s): a static
	// member restarted within it causes no rebalance.
	sessionTimeout time.Duration
	impl           impl // the application the instances run: eddy or Kafka Streams
	tuning         tuning
	// noRestarts leaves out the rolling restart: the scale-up alone (-restarts=false).
	noRestarts bool
}

type rollingResult struct {
	rollingConfig
	races      int             // the race detector's reports in the children's stderr
	baseline   time.Duration   // longest pause of any task before the restarts
	restarts   []time.Duration // SIGTERM until the instance runs tasks again
	rebalances int32
	pause      time.Duration // longest pause of any task during the rolling restart
	pauseTask  string
	// The longest pause, over the restarts, of a task of the restarted instance and of
	// a task of another instance (one that does not move).
	pauseOwn, pauseOthers time.Duration
	restored              int64
	// changelog is the changelog's end offsets at the end of the restarts (records and
	// transaction markers), what a full restore of every task would read.
	changelog int64
	// With down: per restart, how long after the SIGTERM every task of the stopped
	// instance ran on another (0: not while it was down), and how many of its tasks it
	// ran again settleGap after it was back.
	movedAfter []time.Duration
	cameBack   []string
	// Per restart, the records restored from its SIGTERM until its start again, and
	// from then until the next (settleGap after it was back).
	restoredDown, restoredBack []int64
	// The same per task (restoredByTask), each restart in brackets.
	restoredDownTasks, restoredBackTasks []string
	// keptRestarts is the kept tasks' pause per rebalance of the restarts, as eddy's
	// workers report it (keptpause.go).
	keptRestarts []rebalancePause
	// The scale-up: generations, and the longest pause of a task that stayed where it
	// was and of one that moved (from the ticks); the kept tasks' pause per rebalance
	// from the workers' reports; the most warm-up replicas the new instance held at
	// once and the changelog records they applied (a warm-up's restore: what the
	// moved tasks need not restore); how long after its start it ran tasks.
	upRebalances               int32
	upStill, upMoved           []string
	upStillPause, upMovedPause time.Duration
	upRestored                 int64
	upKept                     []rebalancePause
	upWarmups                  int
	upWarmupRecords            int64
	upRunning                  time.Duration
}

func (r rollingResult) String() string {
	s := fmt.Sprintf("static=%v standbys=%d down=%v rebalancing=%v instances=%d partitions=%d keys=%d baseline_pause=%v",
		r.static, r.standbys, r.down, r.tuning.protocol(), r.instances, r.partitions, r.keys, r.baseline.Round(10*time.Millisecond))
	if !r.noRestarts {
		var rs []string
		for _, d := range r.restarts {
			rs = append(rs, d.Round(10*time.Millisecond).String())
		}
		s += fmt.Sprintf(" | rolling restart: rebalances=%d longest_pause=%v (task %s) of_restarted_instance=%v of_others=%v restored_records=%d of_changelog=%d back_after=%v kept_tasks_pause(per rebalance)=%s",
			r.rebalances, r.pause.Round(10*time.Millisecond), r.pauseTask, r.pauseOwn.Round(10*time.Millisecond), r.pauseOthers.Round(10*time.Millisecond), r.restored, r.changelog, rs, pausesString(r.keptRestarts))
	}
	if r.down > 0 {
		var ma []string
		for _, d := range r.movedAfter {
			ma = append(ma, d.Round(10*time.Millisecond).String())
		}
		s += fmt.Sprintf(" tasks_elsewhere_after=%v own_tasks_back=%v restored_while_down=%v [%s] restored_after_back=%v [%s]", ma, r.cameBack, r.restoredDown, strings.Join(r.restoredDownTasks, "] ["), r.restoredBack, strings.Join(r.restoredBackTasks, "] ["))
	}
	if r.scaleUp {
		s += fmt.Sprintf(" | scale-up %d->%d: rebalances=%d not_moved=%d longest_pause_not_moved=%v moved=%d longest_pause_moved=%v restored_records=%d new_instance_warmups=%d warmups_applied_records=%d runs_tasks_after=%v kept_tasks_pause(per rebalance)=%s",
			r.instances, r.instances+1, r.upRebalances, len(r.upStill), r.upStillPause.Round(10*time.Millisecond), len(r.upMoved), r.upMovedPause.Round(10*time.Millisecond), r.upRestored, r.upWarmups, r.upWarmupRecords, r.upRunning.Round(10*time.Millisecond), pausesString(r.upKept))
	}
	return s
}

// rollingRun is one run of the rolling scenario: its rig, every instance's spec (the
// last one is the scale-up's) and the live process of each (nil while it is down;
// r.all holds every process ever started).
type rollingRun struct {
	cfg      rollingConfig
	r        *rig
	specs    []spec
	children []*proc
}

func (ro *rollingRun) start(i int) error {
	p, err := ro.r.start(ro.specs[i])
	if err != nil {
		return err
	}
	ro.children[i] = p
	return nil
}

func (ro *rollingRun) live() []*proc {
	var out []*proc
	for _, p := range ro.children {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// owners maps each running task to the instance that runs it; complete when every
// task runs somewhere.
func (ro *rollingRun) owners() (map[string]int, bool) {
	m := map[string]int{}
	for i, p := range ro.children {
		if p == nil {
			continue
		}
		for _, t := range p.status().Active {
			m[t] = i
		}
	}
	return m, len(m) == int(ro.cfg.partitions)
}

// generation is the highest generation a live instance reports.
func (ro *rollingRun) generation() int32 {
	var g int32
	for _, p := range ro.live() {
		g = max(g, p.status().Gen)
	}
	return g
}

// waitRunning waits until instance i runs tasks and every task runs somewhere.
func (ro *rollingRun) waitRunning(i int, limit time.Duration) error {
	began := time.Now()
	for {
		if time.Since(began) > limit {
			m, _ := ro.owners()
			return fmt.Errorf("instance %d did not run tasks within %v (owners %v)", i, limit, m)
		}
		time.Sleep(100 * time.Millisecond)
		if _, ok := ro.owners(); ok && len(ro.children[i].status().Active) > 0 {
			return nil
		}
	}
}

// stopAll stops every live instance with SIGTERM.
func (ro *rollingRun) stopAll() {
	for _, p := range ro.live() {
		p.term()
	}
}

func runRolling(ctx context.Context, cfg rollingConfig) (res rollingResult, err error) {
	if cfg.gap == 0 {
		cfg.gap = settleGap
	}
	res = rollingResult{rollingConfig: cfg}
	r, err := newRig(ctx, cfg.brokers, fmt.Sprintf("rolling-%v", cfg.static), cfg.keys, cfg.partitions, cfg.valueBytes)
	if err != nil {
		return res, err
	}
	defer func() {
		r.close()
		res.races = r.races()
	}()
	ro := &rollingRun{cfg: cfg, r: r, specs: make([]spec, cfg.instances+1), children: make([]*proc, cfg.instances+1)}
	for i := range ro.specs {
		dir, err := r.stateDir()
		if err != nil {
			return res, err
		}
		ro.specs[i] = spec{Brokers: cfg.brokers, App: r.app, Input: r.input, StateDir: dir, Standbys: cfg.standbys, SessionTimeout: cfg.sessionTimeout, Impl: cfg.impl, tuning: cfg.tuning}
		if cfg.static {
			ro.specs[i].InstanceID = fmt.Sprintf("inst-%d", i)
		}
	}
	for i := range cfg.instances {
		if err := ro.start(i); err != nil {
			return res, err
		}
	}
	// The keys are loaded once the group has formed (waitFormed says why).
	if err := waitFormed(ro.children[:cfg.instances], cfg.partitions, 3*time.Minute); err != nil {
		return res, err
	}
	if err := r.produce(cfg.keys, false); err != nil {
		return res, err
	}
	waitStart := time.Now()
	err = r.settle(10*time.Minute, func() bool {
		busy := 0
		for _, p := range ro.live() {
			if len(p.status().Active) > 0 {
				busy++
			}
		}
		_, ok := ro.owners()
		return ok && busy == cfg.instances && settled(ro.live(), int(cfg.partitions), cfg.standbys)
	})
	if err != nil {
		return res, err
	}
	log.Printf("static=%v: %d instances settled in %v", cfg.static, cfg.instances, time.Since(waitStart).Round(time.Millisecond))

	r.startFlow()
	// Baseline: the longest pause with nothing happening but the flow.
	time.Sleep(time.Second)
	baseFrom := time.Now()
	time.Sleep(cfg.gap)
	res.baseline, _ = longestPause(r.all, baseFrom, time.Now(), nil)

	if !cfg.noRestarts {
		if err := ro.restarts(ctx, &res); err != nil {
			return res, err
		}
	}
	if cfg.scaleUp {
		if err := ro.scaleUp(&res); err != nil {
			return res, err
		}
	}
	ro.stopAll()
	return res, nil
}

// restarts stops and starts each instance in turn (rollingConfig.down long) and
// measures the rolling restart into res.
func (ro *rollingRun) restarts(ctx context.Context, res *rollingResult) error {
	cfg, r := ro.cfg, ro.r
	from := time.Now()
	gen0 := ro.generation()
	for i := range cfg.instances {
		var own, others []string
		m, _ := ro.owners()
		for t, j := range m {
			if j == i {
				own = append(own, t)
			} else {
				others = append(others, t)
			}
		}
		stopped := time.Now()
		ro.children[i].term()
		ro.children[i] = nil // its last status is not what runs now
		if cfg.down > 0 {
			res.movedAfter = append(res.movedAfter, waitDown(stopped, cfg.down, own, ro.owners))
			log.Printf("static=%v: instance %d down for %v; its tasks %v ran elsewhere after %v, generation %d", cfg.static, i, cfg.down, own, res.movedAfter[len(res.movedAfter)-1], ro.generation())
		}
		started := time.Now()
		if err := ro.start(i); err != nil {
			return err
		}
		if err := ro.waitRunning(i, 3*time.Minute); err != nil {
			return err
		}
		res.restarts = append(res.restarts, time.Since(stopped))
		log.Printf("static=%v: instance %d back after %v, generation %d", cfg.static, i, time.Since(stopped).Round(time.Millisecond), ro.generation())
		time.Sleep(cfg.gap)
		if cfg.down > 0 {
			back := 0
			for _, t := range ro.children[i].status().Active {
				if slices.Contains(own, t) {
					back++
				}
			}
			res.cameBack = append(res.cameBack, fmt.Sprintf("%d/%d", back, len(own)))
			res.restoredDown = append(res.restoredDown, restoredIn(r.all, stopped, started))
			res.restoredBack = append(res.restoredBack, restoredIn(r.all, started, time.Now()))
			res.restoredDownTasks = append(res.restoredDownTasks, restoredByTask(r.all, stopped, started))
			res.restoredBackTasks = append(res.restoredBackTasks, restoredByTask(r.all, started, time.Now()))
		}
		p, _ := longestPause(r.all, stopped, time.Now(), own)
		res.pauseOwn = max(res.pauseOwn, p)
		p, _ = longestPause(r.all, stopped, time.Now(), others)
		res.pauseOthers = max(res.pauseOthers, p)
	}
	to := time.Now()
	res.rebalances = ro.generation() - gen0
	res.pause, res.pauseTask = longestPause(r.all, from, to, nil)
	res.restored = restoredIn(r.all, from, to)
	res.keptRestarts = ro.keptPauses(from, to)
	ends, err := r.c.EndOffsets(ctx, r.app+"-"+storeName+"-changelog", sarama.ReadCommitted)
	if err != nil {
		return err
	}
	for _, e := range ends {
		res.changelog += e
	}
	return nil
}
