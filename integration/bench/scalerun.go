//go:build linux

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// scaleResult is what a scale row measured (runResult.Scale).
type scaleResult struct {
	Tasks     int     // the application's tasks: 2 × partitions
	Running   float64 // s from the first instance's start until it runs every task
	Processed float64 // s from its start until the group committed the input and the repartition topic
	// The first instance with every task, after -cost-settle idle (commits only).
	Goroutines, Sockets int     // Kafka Streams: JVM threads
	RSSMB               float64 // its peak RSS (VmHWM) until the second instance started
	// The second instance: s from its start until both run and share the tasks
	// ("moved": the tasks it runs then), and what the first holds after the move.
	Rebalance                     float64
	Moved                         int
	GoroutinesAfter, SocketsAfter int
	RSSMBSecond                   float64 // the second instance's peak RSS
}

// scaleWordsPerPartition is the words a scale row writes per input partition: a few
// lines each, enough that every count task (the repartition topic's partitions) gets
// some words (16 per partition on average: none for about 1 in 9 million).
const scaleWordsPerPartition = 16

// scaleRow runs the scale measurement for a row named [ks-]scale-p<N>.
func scaleRow(ctx context.Context, e *env, r *rowDef, round int) (*runResult, error) {
	kind, topo := "eddy", "wordcount-dsl" // eddy's DSL word count with its defaults (cache on)
	if strings.HasPrefix(r.name, "ks-") {
		kind, topo = "kstreams", "wordcount" // Kafka Streams' with its defaults (cache on)
		if _, err := e.needKStreams(ctx); err != nil {
			return nil, err
		}
	}
	P := int32(nameSuffixInt(r.name, "-p"))
	if P < 1 {
		return nil, fmt.Errorf("%s: a scale row is named [ks-]scale-p<partitions>", r.name)
	}
	id := e.runID(r.name, round)
	defer e.cleanupRun(id) // the input too: it is named after the run
	in, err := e.scaleInput(ctx, id+"-in", P)
	if err != nil {
		return nil, err
	}
	out := id + "-out"
	if err := e.createTopic(ctx, out, P, nil); err != nil {
		return nil, err
	}
	spec := childSpec{
		Row: r.name, Input: in.Topic, Output: out, Group: id, Partitions: P, CommitInterval: 100 * time.Millisecond,
		Topology: topo, ExactlyOnce: true, SampleCost: true, Status: true, KSCache: kind == "kstreams",
	}
	reps, err := repartitionTopics(&spec)
	if err != nil {
		return nil, err
	}
	sr := &scaleResult{Tasks: 2 * int(P)}
	name := fmt.Sprintf("%s-r%d", r.name, round)
	spec.StateDir = filepath.Join(e.stateDir(id), "a")
	a, err := e.startChild(kind, name+"-a", spec)
	if err != nil {
		return nil, err
	}
	defer a.kill()
	if _, _, err := e.waitStatus(ctx, a, nil, func(sa, _ scaleStatus) bool { return sa.running() && sa.Active == sr.Tasks }); err != nil {
		return nil, fmt.Errorf("first instance, all %d tasks running: %w", sr.Tasks, err)
	}
	sr.Running = time.Since(a.started).Seconds()
	e.logf("  %d tasks running after %.1f s", sr.Tasks, sr.Running)
	if err := e.waitDone(ctx, a, e.committedThrough(ctx, id, in, reps)); err != nil {
		return nil, fmt.Errorf("first instance, input processed: %w", err)
	}
	sr.Processed = time.Since(a.started).Seconds()
	if err := sleepCtx(ctx, e.o.costSettle); err != nil {
		return nil, err
	}
	sa, _, _ := a.stdout.status()
	sr.Goroutines, sr.Sockets, sr.RSSMB = sa.Goroutines, sa.Sockets, a.peakRSS()
	e.logf("  input processed after %.1f s; %d goroutines/threads, %d sockets, %.0f MB", sr.Processed, sr.Goroutines, sr.Sockets, sr.RSSMB)

	spec.StateDir = filepath.Join(e.stateDir(id), "b")
	b, err := e.startChild(kind, name+"-b", spec)
	if err != nil {
		return nil, err
	}
	defer b.kill()
	_, sb, err := e.waitStatus(ctx, a, b, func(sa, sb scaleStatus) bool {
		return sa.running() && sb.running() && sa.Active+sb.Active == sr.Tasks
	})
	if err != nil {
		return nil, fmt.Errorf("second instance, tasks shared and running: %w", err)
	}
	sr.Rebalance, sr.Moved = time.Since(b.started).Seconds(), sb.Active
	e.logf("  rebalance: %d tasks moved and running after %.1f s", sr.Moved, sr.Rebalance)
	if err := sleepCtx(ctx, e.o.costSettle); err != nil {
		return nil, err
	}
	sa, _, _ = a.stdout.status()
	sr.GoroutinesAfter, sr.SocketsAfter = sa.Goroutines, sa.Sockets
	return e.stopScale(a, b, in, sr)
}

// stopScale stops both instances (together: a JVM with thousands of tasks can take
// long to close) and makes the run's result of the first one's.
func (e *env) stopScale(a, b *child, in *dataset, sr *scaleResult) (*runResult, error) {
	stopped := make(chan struct{})
	go func() { // owned by stopScale: it waits for the end below
		defer close(stopped)
		b.stop(2 * time.Minute)
	}()
	a.stop(2 * time.Minute)
	<-stopped
	res, u, err := a.result()
	if err != nil {
		return nil, err
	}
	_, ub, err := b.result()
	if err != nil {
		return nil, err
	}
	sr.RSSMBSecond = ub.MaxRSSMB
	return &runResult{
		Units: in.Units, Bytes: in.Bytes, Seconds: sr.Processed, Rate: float64(in.Units) / sr.Processed,
		CPU: u.CPU, CPUPerM: u.CPU / float64(in.Units) * 1e6, MaxRSSMB: u.MaxRSSMB, PeakAnonMB: u.PeakAnonMB, PeakFileMB: u.PeakFileMB,
		Startup: sr.Running, Scale: sr, Child: res,
	}, nil
}

// scaleInput writes a scale row's input: lines of at most 40 bytes holding
// scaleWordsPerPartition words per partition, drawn from -vocab words.
func (e *env) scaleInput(ctx context.Context, topic string, P int32) (*dataset, error) {
	if err := e.createTopic(ctx, topic, P, nil); err != nil {
		return nil, err
	}
	recs, words, distinct := lines(e.rng, vocabulary(e.rng, e.o.vocab), scaleWordsPerPartition*int(P), 40, P)
	ds, err := e.produce(ctx, topic, P, len(recs), func(i int) record { return recs[i] }, "", 0)
	if err != nil {
		return nil, err
	}
	ds.Units, ds.Keys = words, distinct
	e.logf("  wrote %d lines with %d words (%d distinct) to %s (%d partitions)", ds.Records, words, distinct, topic, P)
	return ds, nil
}

// waitStatus waits until ok holds for the last status lines of a and b (b nil: a's
// alone, b's status zero), for at most -run-timeout.
func (e *env) waitStatus(ctx context.Context, a, b *child, ok func(sa, sb scaleStatus) bool) (scaleStatus, scaleStatus, error) {
	deadline := time.Now().Add(e.o.runTimeout)
	for {
		var sa, sb scaleStatus
		var err error
		for i, c := range []*child{a, b} {
			if c == nil {
				continue
			}
			if c.exited() {
				_, _, rerr := c.result()
				return sa, sb, fmt.Errorf("child %s exited: %v (log: %s)%s", c.name, rerr, c.logPath, logTail(c.logPath))
			}
			s, _, serr := c.stdout.status()
			if serr != nil {
				err = serr
			}
			if i == 0 {
				sa = s
			} else {
				sb = s
			}
		}
		if err != nil {
			return sa, sb, err
		}
		if ok(sa, sb) {
			return sa, sb, nil
		}
		if time.Now().After(deadline) {
			return sa, sb, fmt.Errorf("not within -run-timeout %v: last status %+v and %+v", e.o.runTimeout, sa, sb)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return sa, sb, err
		}
	}
}

// waitDone polls done every 200 ms until it holds, for at most -run-timeout, failing
// when c exits first.
func (e *env) waitDone(ctx context.Context, c *child, done doneFunc) error {
	deadline := time.Now().Add(e.o.runTimeout)
	for {
		if ok, err := done(); ok {
			return nil
		} else if err != nil && time.Now().After(deadline) {
			return err
		}
		if c.exited() {
			return fmt.Errorf("child %s exited (log: %s)%s", c.name, c.logPath, logTail(c.logPath))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within -run-timeout %v", e.o.runTimeout)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// peakRSS is the child's VmHWM so far, in MB.
func (c *child) peakRSS() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hwmMB
}

// scaleRows are the scale group: eddy at 100 to 1,000 partitions (200 to 2,000 tasks),
// Kafka Streams at the same counts. Not in "all": the group takes minutes a row.
func scaleRows() []*rowDef {
	var out []*rowDef
	for _, n := range []int{100, 250, 500, 1000} {
		out = append(out, &rowDef{name: fmt.Sprintf("scale-p%d", n), group: "scale", unit: "words",
			desc: fmt.Sprintf("scale: eddy's DSL word count (two sub-topologies, cache on), exactly-once, 100 ms, input of %d partitions (%d tasks) with %d words a partition; a second instance then takes half the tasks", n, 2*n, scaleWordsPerPartition),
			run:  scaleRow})
	}
	for _, n := range []int{100, 250, 500, 1000} {
		out = append(out, &rowDef{name: fmt.Sprintf("ks-scale-p%d", n), group: "scale", unit: "words",
			desc: fmt.Sprintf("scale: the same in Kafka Streams 4.1.1 with its defaults (cache on, one stream thread), %d tasks", 2*n),
			run:  scaleRow})
	}
	return out
}

// scaleSummary is a scale row's medians over its measured runs.
type scaleSummary struct {
	Row string
	scaleResult
	Runs int
}

// scaleSummaries are the medians of the scale rows that ran, by engine (eddy first),
// fewest tasks first.
func scaleSummaries(results []*runResult) []scaleSummary {
	byRow := map[string][]*scaleResult{}
	var rows []string
	for _, r := range results {
		if r.Scale == nil || r.Warmup {
			continue
		}
		if byRow[r.Row] == nil {
			rows = append(rows, r.Row)
		}
		byRow[r.Row] = append(byRow[r.Row], r.Scale)
	}
	var out []scaleSummary
	for _, row := range rows {
		rs := byRow[row]
		m := func(f func(*scaleResult) float64) float64 {
			xs := make([]float64, len(rs))
			for i, x := range rs {
				xs[i] = f(x)
			}
			return median(xs)
		}
		out = append(out, scaleSummary{Row: row, Runs: len(rs), scaleResult: scaleResult{
			Tasks: rs[0].Tasks, Running: m(func(x *scaleResult) float64 { return x.Running }),
			Processed:       m(func(x *scaleResult) float64 { return x.Processed }),
			Goroutines:      int(m(func(x *scaleResult) float64 { return float64(x.Goroutines) })),
			Sockets:         int(m(func(x *scaleResult) float64 { return float64(x.Sockets) })),
			RSSMB:           m(func(x *scaleResult) float64 { return x.RSSMB }),
			Rebalance:       m(func(x *scaleResult) float64 { return x.Rebalance }),
			Moved:           int(m(func(x *scaleResult) float64 { return float64(x.Moved) })),
			GoroutinesAfter: int(m(func(x *scaleResult) float64 { return float64(x.GoroutinesAfter) })),
			SocketsAfter:    int(m(func(x *scaleResult) float64 { return float64(x.SocketsAfter) })),
			RSSMBSecond:     m(func(x *scaleResult) float64 { return x.RSSMBSecond }),
		}})
	}
	slices.SortStableFunc(out, func(a, b scaleSummary) int {
		if ea, eb := costEngine(a.Row), costEngine(b.Row); ea != eb {
			return map[bool]int{true: -1, false: 1}[ea == "eddy"]
		}
		return a.Tasks - b.Tasks
	})
	return out
}

func scaleHeader() []string {
	return []string{"row", "tasks", "all running s", "input processed s", "per added task ms", "goroutines / JVM threads", "per added task",
		"sockets", "peak RSS MB", "per added task MB", "rebalance s", "moved", "goroutines / threads after", "sockets after", "second's peak RSS MB"}
}

// scaleCells formats the scale rows; "per added task" is the growth over the same
// engine's row with the fewest tasks, divided by the tasks added (start-up: to all
// running, in ms).
func scaleCells(sums []scaleSummary) [][]string {
	var out [][]string
	var base scaleSummary
	for i, s := range sums {
		if i == 0 || costEngine(base.Row) != costEngine(s.Row) {
			base = s
		}
		per := func(x, x0, scale float64, format string) string {
			if s.Tasks == base.Tasks {
				return "—"
			}
			return fmt.Sprintf(format, scale*(x-x0)/float64(s.Tasks-base.Tasks))
		}
		out = append(out, []string{
			s.Row, thousands(float64(s.Tasks)), fmt.Sprintf("%.1f", s.Running), fmt.Sprintf("%.1f", s.Processed),
			per(s.Running, base.Running, 1000, "%.1f"),
			thousands(float64(s.Goroutines)), per(float64(s.Goroutines), float64(base.Goroutines), 1, "%.2f"),
			fmt.Sprint(s.Sockets), fmt.Sprintf("%.0f", s.RSSMB), per(s.RSSMB, base.RSSMB, 1, "%.2f"),
			fmt.Sprintf("%.1f", s.Rebalance), thousands(float64(s.Moved)),
			thousands(float64(s.GoroutinesAfter)), fmt.Sprint(s.SocketsAfter), fmt.Sprintf("%.0f", s.RSSMBSecond),
		})
	}
	return out
}
