//go:build linux

package main

import (
	"cmp"
	"log"
	"sort"
	"time"
)

// scaleUp starts one more instance (an empty state dir), waits until it runs tasks
// and every task runs somewhere, lets it run rollingConfig.gap, and measures the
// scale-up into res: generations, which tasks stayed where they ran and which moved,
// the longest pause of each, and the records restored.
func (ro *rollingRun) scaleUp(res *rollingResult) error {
	cfg, r := ro.cfg, ro.r
	before, _ := ro.owners()
	gen1 := ro.generation()
	upFrom := time.Now()
	if err := ro.start(cfg.instances); err != nil {
		return err
	}
	// With warm-up replicas the new instance runs tasks only after a probing rebalance.
	if err := ro.waitRunning(cfg.instances, 3*time.Minute+cmp.Or(cfg.tuning.Probing, 10*time.Minute)); err != nil {
		return err
	}
	res.upRunning = time.Since(upFrom)
	time.Sleep(cfg.gap)
	upTo := time.Now()
	after, _ := ro.owners()
	res.upRebalances = ro.generation() - gen1
	for t, i := range before {
		if after[t] == i {
			res.upStill = append(res.upStill, t)
		} else {
			res.upMoved = append(res.upMoved, t)
		}
	}
	sort.Strings(res.upStill)
	sort.Strings(res.upMoved)
	res.upStillPause, _ = longestPause(r.all, upFrom, upTo, res.upStill)
	res.upMovedPause, _ = longestPause(r.all, upFrom, upTo, res.upMoved)
	res.upRestored = restoredIn(r.all, upFrom, upTo)
	res.upKept = ro.keptPauses(upFrom, upTo)
	p := ro.children[cfg.instances]
	p.mu.Lock()
	res.upWarmups, res.upWarmupRecords = p.peakWarmup, p.peakWarmupRec
	p.mu.Unlock()
	if len(res.upKept) == 0 && len(res.upStill) > 0 && cfg.impl.Classpath == "" {
		log.Printf("static=%v: scale-up: %d tasks did not move but no worker reported their pause (%q on the children's stderr)", cfg.static, len(res.upStill), resumedMsg)
	}
	log.Printf("static=%v: scale-up: tasks not moved %v, moved %v", cfg.static, res.upStill, res.upMoved)
	return nil
}

// keptPauses is the kept tasks' pause per rebalance in [from, to], from the reports
// of eddy's workers; a report it cannot read is logged.
func (ro *rollingRun) keptPauses(from, to time.Time) []rebalancePause {
	ps, bad := keptPauses(ro.r.all, from, to)
	for _, err := range bad {
		log.Print(err)
	}
	return ps
}
