//go:build linux

package main

import (
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
	if err := ro.waitRunning(cfg.instances, 3*time.Minute); err != nil {
		return err
	}
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
	log.Printf("static=%v: scale-up: tasks not moved %v, moved %v", cfg.static, res.upStill, res.upMoved)
	return nil
}
