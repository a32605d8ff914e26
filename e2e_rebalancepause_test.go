package eddy_test

import (
	"log/slog"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/kafkatest"
)

// A worker whose tasks stay on their instance across a rebalance reports how long
// they processed nothing (issue 24 item 4, the pause of a task that does not move;
// integration/failover reads the report): when a second instance joins, the first
// instance's workers log it with the count of tasks they kept; the joining instance,
// whose tasks are all new, does not.
func TestKeptTasksReportTheirPause(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 4)
		logA, logB := newLogCapture(), newLogCapture()
		cfgA, cfgB := e.config(t), e.config(t)
		cfgA.Logger, cfgB.Logger = slog.New(logA), slog.New(logB)
		a := start(t, e.topo, cfgA)
		waitFor(t, time.Minute, "a to own every task", func() (bool, error) { return len(a.app.Tasks()) == 8, nil })
		e.produce(t, 100)
		e.waitCounts(t, time.Minute, "the counts")
		if got := logA.grep("tasks running again after a rebalance"); len(got) > 0 {
			t.Fatalf("a reported a pause before any rebalance: %q", got)
		}

		b := start(t, e.topo, cfgB)
		waitFor(t, time.Minute, "both instances to own tasks", func() (bool, error) {
			return len(a.app.Tasks()) > 0 && len(b.app.Tasks()) > 0 && len(a.app.Tasks())+len(b.app.Tasks()) == 8, nil
		})
		var lines []string
		waitFor(t, time.Minute, "a's workers to report the pause of the tasks they kept", func() (bool, error) {
			lines = logA.grep("tasks running again after a rebalance")
			return len(lines) > 0, nil
		})
		pausedRE, keptRE, genRE := regexp.MustCompile(` paused=(\S+)`), regexp.MustCompile(` kept=(\d+)`), regexp.MustCompile(` generation=(\d+)`)
		for _, l := range lines {
			pm, km := pausedRE.FindStringSubmatch(l), keptRE.FindStringSubmatch(l)
			if pm == nil || km == nil {
				t.Fatalf("report without paused= or kept=: %q", l)
			}
			paused, err := time.ParseDuration(pm[1])
			if err != nil || paused <= 0 {
				t.Errorf("paused %q: want a positive duration (%v): %q", pm[1], err, l)
			}
			if gm := genRE.FindStringSubmatch(l); gm == nil || gm[1] == "0" {
				t.Errorf("report without the rebalance's generation (integration/failover groups the reports by it): %q", l)
			}
			if kept, _ := strconv.Atoi(km[1]); kept < 1 || kept > 8 {
				t.Errorf("kept %d: want 1-8 (a ran all 8 tasks and keeps some): %q", kept, l)
			}
		}
		if got := logB.grep("tasks running again after a rebalance"); len(got) > 0 {
			t.Errorf("b reported a pause for tasks it never ran before: %q", got)
		}
		e.produce(t, 100)
		e.waitCounts(t, time.Minute, "the counts after the rebalance")
		if err := b.stop(); err != nil {
			t.Fatalf("stopping b: %v", err)
		}
		if err := a.stop(); err != nil {
			t.Fatalf("stopping a: %v", err)
		}
		e.checkExactlyOnce(t)
	})
}
