//go:build linux

// Command failover measures eddy's availability (issue 24 items 5 and 6): what a
// standby replica saves when an instance is killed, and what static membership saves in
// a rolling restart.
//
// The application (child.go; the Kafka Streams version under kstreams/ must keep it
// comparable): every input record is put in the logged, persistent key-value store "kv"
// (exactly-once, eddy's defaults: session timeout 10 s, transaction timeout 10 s,
// commit interval 100 ms). The input topic "<app>-input" has -partitions partitions (8:
// 8 tasks); the changelog is "<app>-kv-changelog". Keys are "key-<n>", n in [0, -keys);
// values are -value-bytes zero bytes (100). The store is loaded with every key once, in
// order, before the instances start; then, from before the kill or the first restart to
// the end, 200 updates of random keys every 100 ms (2,000 a second, about 250 a task).
//
//   - "Processes again": a task's processor reports its first record on an instance (a
//     task opened anew makes new processors) and then one record at most every 50 ms.
//     After a kill, a moved task's resume time is from the SIGKILL to its first record
//     on a survivor; a pause is the longest time between two consecutive records of a
//     task on any instance (to within 50 ms).
//   - "Restored": the changelog records of store "kv" the instances report through
//     Config.OnRestore (changelog.Result.Records), against the changelog partition's end
//     offset (records and transaction markers) for the percentage.
//   - Rebalances: generations, the highest App.TasksView().Generation any instance
//     reports, end minus start.
//
// -scenario failover (the default) starts -instances instances (3) with
// NumStandbyReplicas from -standbys (0,1: one run each), waits until every task runs,
// every record is processed and every standby runs within 1,000 records of the end,
// lets input flow 3 s, SIGKILLs the first instance (no commit, no LeaveGroup: the
// survivors get its tasks once the group's session timeout has passed and the broker
// has aborted its open transaction) and reports per moved task the resume time and the
// records restored:
//
//	go run ./integration/failover -brokers 127.0.0.1:19092 -keys 1000000 -standbys 0,1
//
// -scenario rolling stops each instance in turn with SIGTERM and starts it again on its
// kept state dir, with and without static membership (-static false,true;
// Config.InstanceID "inst-<i>"), optionally staying down -down long (longer than the
// session timeout: the group notices), then one more instance joins (-scaleup)
// (rolling.go):
//
//	go run ./integration/failover -scenario rolling -keys 1000000 -static false,true
//	go run ./integration/failover -scenario rolling -keys 1000000 -static true -standbys 1 -down 30s -scaleup=false
//
// -restarts=false runs the scale-up alone. For eddy's instances -heartbeat, -probing,
// -warmups and -cooperative set the group heartbeat interval,
// Config.ProbingRebalanceInterval, Config.MaxWarmupReplicas and
// Config.RebalanceProtocol (cooperative rebalancing). Beside the ticks' pauses, the rolling scenario reports per
// rebalance the pause of the tasks that did not move as eddy's workers log it
// (keptpause.go): the longest and the median over those tasks.
//
// The instances are child processes (the same binary with -child; the test binary in
// failover_test.go, whose TestAvailability is the short form CI runs), killed with the
// command however it ends.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/eddy-streams/eddy/processor"
)

func main() {
	log.SetFlags(0)
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		if err := child(os.Args[2]); err != nil {
			log.Fatal(err)
		}
		return
	}
	brokers := flag.String("brokers", "127.0.0.1:19092", "Kafka bootstrap addresses, comma-separated")
	keys := flag.Int("keys", 1_000_000, "distinct keys in the store")
	partitions := flag.Int("partitions", 8, "input partitions (tasks)")
	valueBytes := flag.Int("value-bytes", 100, "bytes per value")
	instances := flag.Int("instances", 3, "instances (the failover kills the first)")
	standbys := flag.String("standbys", "", "standby counts (Config.NumStandbyReplicas) to run, comma-separated (default 0,1 for failover, 0 for rolling)")
	scenario := flag.String("scenario", "failover", "failover (SIGKILL one of -instances instances) or rolling (a rolling restart of -instances instances, then one more instance joins)")
	static := flag.String("static", "false,true", "-scenario rolling: static membership (Config.InstanceID) settings to run, comma-separated")
	down := flag.Duration("down", 0, "-scenario rolling: how long each stopped instance stays down before it starts again")
	scaleUp := flag.Bool("scaleup", true, "-scenario rolling: after the rolling restart, one more instance joins")
	implNames := flag.String("impl", "eddy", "applications to run, comma-separated, in turn for each setting: eddy, kstreams (Kafka Streams 4.1.1, built with Maven; kstreams.go)")
	ksSession := flag.Int("ks-session-timeout", 0, "-impl kstreams: the consumer's session.timeout.ms (0: Kafka Streams' default, 45 s; eddy's is 10 s)")
	restarts := flag.Bool("restarts", true, "-scenario rolling: the rolling restart (false: the scale-up alone)")
	var tu tuning
	flag.DurationVar(&tu.Heartbeat, "heartbeat", 0, "eddy's instances: the group heartbeat interval (0: eddy's 250 ms)")
	flag.DurationVar(&tu.Probing, "probing", 0, "eddy's instances: Config.ProbingRebalanceInterval (0: eddy's 10 min)")
	flag.IntVar(&tu.MaxWarmups, "warmups", 0, "eddy's instances: Config.MaxWarmupReplicas (0: eddy's 2; -1: no warm-up replicas)")
	flag.BoolVar(&tu.Cooperative, "cooperative", false, "eddy's instances: Config.RebalanceProtocol = CooperativeRebalancing (a rebalance stops only the tasks that move; false: eager, eddy's default)")
	flag.Parse()
	if *scenario != "failover" && *scenario != "rolling" {
		log.Fatalf("-scenario %q: want failover or rolling", *scenario)
	}
	if tu != (tuning{}) && strings.Contains(*implNames, "kstreams") {
		log.Fatal("-heartbeat, -probing, -warmups and -cooperative set eddy's instances only, and -impl runs Kafka Streams: leave them out or run -impl eddy")
	}
	if !*restarts && !*scaleUp {
		log.Fatal("-restarts=false -scaleup=false leaves nothing to run: keep one of them")
	}
	if *instances < 2 {
		log.Fatalf("-instances %d: want at least 2 (one is killed or restarted while the others run)", *instances)
	}
	if *standbys == "" {
		*standbys = map[string]string{"failover": "0,1", "rolling": "0"}[*scenario]
	}
	var counts []int
	for _, s := range strings.Split(*standbys, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			log.Fatalf("-standbys %q: want standby counts like 0,1", *standbys)
		}
		counts = append(counts, n)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	addrs := strings.Split(*brokers, ",")
	work, err := os.MkdirTemp("", "eddy-failover-build-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	var impls []impl
	for _, name := range strings.Split(*implNames, ",") {
		im, err := buildImpl(ctx, name, work, *ksSession)
		if err != nil {
			log.Fatal(err)
		}
		impls = append(impls, im)
	}
	for _, n := range counts {
		for _, im := range impls {
			if *scenario == "failover" {
				r, err := runFailover(ctx, failoverConfig{brokers: addrs, keys: *keys, partitions: int32(*partitions), valueBytes: *valueBytes, instances: *instances, standbys: n, impl: im, tuning: tu})
				if err != nil {
					log.Fatalf("%v standbys=%d: %v", im, n, err)
				}
				fmt.Println(im, r)
				continue
			}
			for _, s := range strings.Split(*static, ",") {
				st, err := strconv.ParseBool(s)
				if err != nil {
					log.Fatalf("-static %q: want true, false or both (false,true)", *static)
				}
				// Kafka Streams gives a joining instance warm-up replicas, not active
				// tasks, until a probing rebalance (10 minutes): its scale-up would
				// wait for nothing.
				up := *scaleUp && im.Classpath == ""
				r, err := runRolling(ctx, rollingConfig{brokers: addrs, keys: *keys, partitions: int32(*partitions), valueBytes: *valueBytes,
					instances: *instances, static: st, standbys: n, down: *down, scaleUp: up, impl: im, tuning: tu, noRestarts: !*restarts})
				if err != nil {
					log.Fatalf("%v static=%v standbys=%d: %v", im, st, n, err)
				}
				fmt.Println(im, r)
			}
		}
	}
}

// failoverConfig is one run of the failover scenario.
type failoverConfig struct {
	brokers    []string
	keys       int
	partitions int32
	valueBytes int
	instances  int // the first is killed
	standbys   int // Config.NumStandbyReplicas
	impl       impl
	tuning     tuning
}

// movedTask is what the failover measures of one task of the killed instance.
type movedTask struct {
	task string
	// resume is the time from the SIGKILL until the task processed a record on a
	// survivor (its processor's first record there).
	resume time.Duration
	// restored is the changelog records the survivors reported restoring for it
	// (OnRestore, store "kv") after the kill; changelog is its changelog
	// partition's end offset when it processed again (records and transaction markers).
	restored, changelog int64
}

// result is one run's measurement.
type result struct {
	failoverConfig
	moved []movedTask
	races int // the race detector's reports in the children's stderr
}

// restored is the records restored over the moved tasks, and their changelogs' size.
func (r result) restored() (restored, changelog int64) {
	for _, m := range r.moved {
		restored += m.restored
		changelog += m.changelog
	}
	return restored, changelog
}

// worst is the longest resume of a moved task.
func (r result) worst() time.Duration {
	var w time.Duration
	for _, m := range r.moved {
		w = max(w, m.resume)
	}
	return w
}

func (r result) String() string {
	var per []string
	for _, m := range r.moved {
		per = append(per, fmt.Sprintf("%s:%v/%d/%d", m.task, m.resume.Round(10*time.Millisecond), m.restored, m.changelog))
	}
	restored, changelog := r.restored()
	return fmt.Sprintf("standbys=%d instances=%d partitions=%d keys=%d moved=%d restored_records=%d of_changelog=%d (%.2f%%) resume_after_kill(max)=%v per_task(resume/restored/changelog)=%v",
		r.standbys, r.instances, r.partitions, r.keys, len(r.moved), restored, changelog, 100*float64(restored)/float64(max(changelog, 1)), r.worst().Round(10*time.Millisecond), per)
}

// runFailover starts cfg.instances instances on a loaded store, waits until every
// task runs, every record is processed and every standby has caught up, lets input
// flow for 3 s, SIGKILLs the first instance and waits until each of its tasks
// processes again on a survivor.
func runFailover(ctx context.Context, cfg failoverConfig) (res result, err error) {
	res = result{failoverConfig: cfg}
	r, err := newRig(ctx, cfg.brokers, fmt.Sprintf("failover-%d", cfg.standbys), cfg.keys, cfg.partitions, cfg.valueBytes)
	if err != nil {
		return res, err
	}
	defer func() {
		r.close()
		res.races = r.races()
	}()
	children := make([]*proc, cfg.instances)
	for i := range children {
		dir, err := r.stateDir()
		if err != nil {
			return res, err
		}
		if children[i], err = r.start(spec{Brokers: cfg.brokers, App: r.app, Input: r.input, StateDir: dir, Standbys: cfg.standbys, Impl: cfg.impl, tuning: cfg.tuning}); err != nil {
			return res, err
		}
	}
	// The keys are loaded once the group has formed (waitFormed says why).
	if err := waitFormed(children, cfg.partitions, 3*time.Minute); err != nil {
		return res, err
	}
	began := time.Now()
	if err := r.produce(cfg.keys, false); err != nil {
		return res, err
	}
	log.Printf("%v standbys=%d: %d keys written in %v", cfg.impl, cfg.standbys, cfg.keys, time.Since(began).Round(time.Millisecond))
	var victim []string
	waitStart := time.Now()
	err = r.settle(10*time.Minute, func() bool {
		victim = children[0].status().Active
		return settled(children, int(cfg.partitions), cfg.standbys)
	})
	if err != nil {
		return res, err
	}
	log.Printf("standbys=%d: settled in %v; the first instance runs %v", cfg.standbys, time.Since(waitStart).Round(time.Millisecond), victim)

	r.startFlow()
	time.Sleep(3 * time.Second)
	killed := time.Now()
	children[0].kill()
	log.Printf("standbys=%d: SIGKILLed the first instance", cfg.standbys)
	survivors := children[1:]
	resumed := map[string]time.Time{}
	for len(resumed) < len(victim) {
		if time.Since(killed) > 5*time.Minute {
			return res, fmt.Errorf("the survivors did not resume %v within 5 minutes (resumed: %v)", victim, resumed)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return res, err
		}
		for _, p := range survivors {
			for t, at := range p.firsts() {
				if slices.Contains(victim, t) && at.After(killed) && resumed[t].IsZero() {
					resumed[t] = at
				}
			}
		}
	}
	ends, err := r.c.EndOffsets(ctx, r.app+"-"+storeName+"-changelog", sarama.ReadCommitted)
	if err != nil {
		return res, err
	}
	for _, t := range victim {
		id, err := processor.ParseTaskID(t)
		if err != nil {
			return res, err
		}
		res.moved = append(res.moved, movedTask{task: t, resume: resumed[t].Sub(killed), restored: restoredSince(survivors, t, killed), changelog: ends[id.Partition]})
	}
	for _, p := range survivors {
		p.term()
	}
	return res, nil
}

// settled reports whether every instance runs tasks, every task runs somewhere, and
// every task has its standbys, running and caught up (in all within 1,000 records).
func settled(children []*proc, partitions, standbys int) bool {
	active := map[string]bool{}
	var want, running, lag int64
	for _, p := range children {
		s := p.status()
		if len(s.Active) == 0 {
			return false
		}
		for _, t := range s.Active {
			active[t] = true
		}
		want += int64(s.Standby)
		running += int64(s.StandbyN)
		lag += s.Lag
	}
	return len(active) == partitions && want == int64(standbys*partitions) && running == want && lag < 1000
}

// restoredSince is the records procs reported restoring for task's store after from.
func restoredSince(procs []*proc, task string, from time.Time) int64 {
	var n int64
	for _, p := range procs {
		p.mu.Lock()
		for _, r := range p.restores {
			if r.e.Task == task && r.at.After(from) {
				n += r.e.Records
			}
		}
		p.mu.Unlock()
	}
	return n
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
