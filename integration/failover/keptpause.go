//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The pause of a task that does not move (issue 24 item 4), as eddy's workers report
// it: after a rebalance, each worker that kept tasks logs at Info
//
//	msg="tasks running again after a rebalance" worker=0 paused=212.5ms kept=3 tasks=3 generation=7
//
// paused is from the end of its last session (where every task stops under eager
// rebalancing) until its kept tasks run again (eddy's worker.resumed). An eddy child
// logs those lines (keptPauseLogs) on its stderr; the driver reads them (pauseReader)
// and reports, per rebalance, the longest and the median over the kept tasks. Only
// eddy's children report them.

// resumedMsg is eddy's message (worker.go's resumedMsg; TestKeptTasksReportTheirPause
// guards its fields there, TestParseResumed the parse here).
const resumedMsg = "tasks running again after a rebalance"

// keptPauseLogs passes a child's warnings and errors, and eddy's pause reports, to h.
type keptPauseLogs struct{ slog.Handler }

func (k keptPauseLogs) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (k keptPauseLogs) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn && r.Message != resumedMsg {
		return nil
	}
	return k.Handler.Handle(ctx, r)
}

func (k keptPauseLogs) WithAttrs(as []slog.Attr) slog.Handler {
	return keptPauseLogs{k.Handler.WithAttrs(as)}
}

func (k keptPauseLogs) WithGroup(name string) slog.Handler {
	return keptPauseLogs{k.Handler.WithGroup(name)}
}

// keptPause is one worker's report: its kept tasks paused this long in generation gen.
type keptPause struct {
	at     time.Time // when the driver read it
	paused time.Duration
	kept   int
	gen    int32
}

var (
	pausedRE = regexp.MustCompile(` paused=(\S+)`)
	keptRE   = regexp.MustCompile(` kept=(\d+)`)
	genRE    = regexp.MustCompile(` generation=(\d+)`)
)

// parseResumed parses a pause report from a line of slog's text format; ok is false
// for any other line, err set for a report it cannot read.
func parseResumed(line string) (p keptPause, ok bool, err error) {
	if !strings.Contains(line, `msg="`+resumedMsg+`"`) {
		return p, false, nil
	}
	pm, km, gm := pausedRE.FindStringSubmatch(line), keptRE.FindStringSubmatch(line), genRE.FindStringSubmatch(line)
	if pm == nil || km == nil || gm == nil {
		return p, true, fmt.Errorf("a pause report without paused=, kept= or generation= (has eddy's log line changed?): %q", line)
	}
	if p.paused, err = time.ParseDuration(pm[1]); err != nil {
		return p, true, fmt.Errorf("a pause report's paused=%s: %w", pm[1], err)
	}
	p.kept, _ = strconv.Atoi(km[1])
	g, _ := strconv.ParseInt(gm[1], 10, 32)
	p.gen = int32(g)
	return p, true, nil
}

// pauseReader collects the pause reports in what is written to it (a child's stderr).
type pauseReader struct {
	mu      sync.Mutex
	partial []byte
	pauses  []keptPause
	bad     []error
}

func (r *pauseReader) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partial = splitLines(r.partial, b, func(line []byte) {
		p, ok, err := parseResumed(string(line))
		switch {
		case err != nil:
			r.bad = append(r.bad, err)
		case ok:
			p.at = time.Now()
			r.pauses = append(r.pauses, p)
		}
	})
	return len(b), nil
}

// splitLines calls line with each complete line of partial followed by b, and returns
// what follows the last newline, to be completed by the next write.
func splitLines(partial, b []byte, line func([]byte)) []byte {
	partial = append(partial, b...)
	for {
		i := bytes.IndexByte(partial, '\n')
		if i < 0 {
			return partial
		}
		line(partial[:i])
		partial = partial[i+1:]
	}
}

// rebalancePause is the kept tasks' pause in one rebalance (one generation): over
// every report of it, each counted once per task it kept.
type rebalancePause struct {
	gen         int32
	tasks       int
	max, median time.Duration
}

func (p rebalancePause) String() string {
	return fmt.Sprintf("gen%d:%d_tasks/max=%v/median=%v", p.gen, p.tasks, p.max.Round(time.Millisecond), p.median.Round(time.Millisecond))
}

// keptPauses groups the reports the children read in [from, to] by generation; the
// errors are the reports they could not read.
func keptPauses(procs []*proc, from, to time.Time) ([]rebalancePause, []error) {
	byGen := map[int32][]time.Duration{}
	var bad []error
	for _, p := range procs {
		p.pauses.mu.Lock()
		for _, k := range p.pauses.pauses {
			if !k.at.Before(from) && !k.at.After(to) {
				for range k.kept {
					byGen[k.gen] = append(byGen[k.gen], k.paused)
				}
			}
		}
		bad = append(bad, p.pauses.bad...)
		p.pauses.mu.Unlock()
	}
	var out []rebalancePause
	for g, ds := range byGen {
		slices.Sort(ds)
		n := len(ds)
		out = append(out, rebalancePause{gen: g, tasks: n, max: ds[n-1], median: (ds[(n-1)/2] + ds[n/2]) / 2})
	}
	slices.SortFunc(out, func(a, b rebalancePause) int { return int(a.gen - b.gen) })
	return out, bad
}

// pausesString formats keptPauses' result for a report line.
func pausesString(ps []rebalancePause) string {
	if len(ps) == 0 {
		return "none"
	}
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return strings.Join(s, ",")
}
