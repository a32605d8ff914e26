//go:build linux

package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// longestPause is the longest time between two consecutive records any of tasks (all
// tasks if nil) processed, on any of procs, over the pauses that overlap [from, to];
// a task that has processed nothing since its last record counts up to to.
func longestPause(procs []*proc, from, to time.Time, tasks []string) (time.Duration, string) {
	byTask := map[string][]time.Time{}
	for _, p := range procs {
		p.mu.Lock()
		for t, ts := range p.ticks {
			byTask[t] = append(byTask[t], ts...)
		}
		p.mu.Unlock()
	}
	if tasks == nil {
		for t := range byTask {
			tasks = append(tasks, t)
		}
		sort.Strings(tasks)
	}
	var worst time.Duration
	var worstTask string
	for _, t := range tasks {
		ts := byTask[t]
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		prev := time.Time{}
		for _, at := range append(ts, to) {
			if at.After(to) {
				at = to
			}
			if !prev.IsZero() && at.After(from) && prev.Before(to) && at.Sub(prev) > worst {
				worst, worstTask = at.Sub(prev), t
			}
			prev = at
		}
	}
	return worst, worstTask
}

// restoredIn is the changelog records the children reported restored in [from, to]
// (the store "kv" of active tasks; standbys are not run here).
func restoredIn(procs []*proc, from, to time.Time) int64 {
	var n int64
	for _, p := range procs {
		p.mu.Lock()
		for _, r := range p.restores {
			if !r.at.Before(from) && !r.at.After(to) {
				n += r.e.Records
			}
		}
		p.mu.Unlock()
	}
	return n
}

// restoredByTask formats restoredIn's records per task ("0_3:6543 0_5:812"; "-" for
// none), for where a restart's restores went.
func restoredByTask(procs []*proc, from, to time.Time) string {
	per := map[string]int64{}
	for _, p := range procs {
		p.mu.Lock()
		for _, r := range p.restores {
			if !r.at.Before(from) && !r.at.After(to) && r.e.Records > 0 {
				per[r.e.Task] += r.e.Records
			}
		}
		p.mu.Unlock()
	}
	if len(per) == 0 {
		return "-"
	}
	var out []string
	for t, n := range per {
		out = append(out, fmt.Sprintf("%s:%d", t, n))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// waitDown waits until down has passed since stopped and returns how long after
// stopped every task of own ran on another instance (0 if not by then).
func waitDown(stopped time.Time, down time.Duration, own []string, owners func() (map[string]int, bool)) time.Duration {
	var elsewhere time.Duration
	for time.Since(stopped) < down {
		time.Sleep(100 * time.Millisecond)
		if elsewhere > 0 {
			continue
		}
		m, _ := owners()
		n := 0
		for _, t := range own {
			if _, ok := m[t]; ok {
				n++
			}
		}
		if n == len(own) {
			elsewhere = time.Since(stopped)
		}
	}
	return elsewhere
}
