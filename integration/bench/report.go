//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// summary is a row's medians over its measured runs.
type summary struct {
	Row, Desc, Unit string
	Runs            int
	Rate, RateMin   float64
	RateMax         float64
	MBps            float64
	CPUPerM         float64
	MaxRSSMB        float64
	PeakAnonMB      float64
	PeakFileMB      float64
	Startup         float64
	Resume          float64
	Restored        float64
	P50, P99, Max   float64
	Twin            string // the Kafka Streams row beside it
	TwinDefaults    bool   // that row runs Kafka Streams with its record cache on (its default)
	Ceiling         string
	Ratio           float64 // rate (latency rows: p50) over the ceiling's, medians
	PairedRatio     float64 // the median of the same ratio taken per round (side by side)
	AltCeiling      string
	AltRatio        float64 // rate over the second ceiling's, medians
	AltPaired       float64
	Target          float64
	RSSTarget       float64
	P99Target       float64 // latency rows: maximum p99 over the ceiling's p99
	P99Ratio        float64 // latency rows: p99 over the ceiling's, medians
	P99Paired       float64 // the same taken per round
	Verdict         string  // "met", "MISSED", or ""

	// Diagnostics, medians.
	Commits, CommitMeanMs, CommitP99Ms, CommitShare float64
	AddPartRetriesPerCommit                         float64
	AddPartBackoffPerCommit                         float64            // ms
	PhaseMeanMs, PhaseP99Ms                         map[string]float64 // commitphases.go
	RecordsPerProduce, ConsumerBatch                float64
	AllocsPerUnit, AllocBytesPerUnit                float64
	GCs                                             float64

	OutPerUnit float64 // word-count rows: committed output records per input word
	Keys       float64 // word-count rows: distinct words in the input

	// PostgreSQL rows, medians: the commit (eddy's, or the COPY pipe's COPY) p50, the
	// target's Prepare and Commit (COMMIT PREPARED) p50 and p99, the server's CPU.
	CommitP50Ms                      float64
	PrepareP50Ms, PrepareP99Ms       float64
	SinkCommitP50Ms, SinkCommitP99Ms float64
	PGCPUPerM                        float64
	PGRows                           float64
	SinkWriteShare, SinkPrepareShare float64 // of the run's time, summed over the tasks' transactions

	// Cost rows, medians.
	Tasks                      int
	Sockets, SocketsPeak, FDs  float64
	Goroutines, GoroutinesPeak float64
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (e *env) summarize() []*summary {
	byRow := map[string]*summary{}
	var out []*summary
	for _, r := range rowTable() {
		if !e.o.selected(r.name) {
			continue
		}
		var runs []*runResult
		for _, res := range e.results {
			if res.Row == r.name && !res.Warmup {
				runs = append(runs, res)
			}
		}
		s := &summary{Row: r.name, Desc: r.desc, Unit: r.unit, Runs: len(runs), Ceiling: r.ceiling, AltCeiling: r.altCeiling, Twin: r.twin, Target: r.target, RSSTarget: r.rssTarget, P99Target: r.p99Target}
		if t := findRow(r.twin); t != nil {
			s.TwinDefaults = t.ksDefaults
		}
		byRow[r.name] = s
		out = append(out, s)
		if len(runs) == 0 {
			continue
		}
		m := func(f func(*runResult) float64) float64 {
			xs := make([]float64, len(runs))
			for i, x := range runs {
				xs[i] = f(x)
			}
			return median(xs)
		}
		s.Rate = m(func(x *runResult) float64 { return x.Rate })
		s.RateMin = slices.MinFunc(runs, func(a, b *runResult) int { return cmpF(a.Rate, b.Rate) }).Rate
		s.RateMax = slices.MaxFunc(runs, func(a, b *runResult) int { return cmpF(a.Rate, b.Rate) }).Rate
		s.MBps = m(func(x *runResult) float64 { return x.MBps })
		s.CPUPerM = m(func(x *runResult) float64 { return x.CPUPerM })
		s.MaxRSSMB = m(func(x *runResult) float64 { return x.MaxRSSMB })
		s.PeakAnonMB = m(func(x *runResult) float64 { return x.PeakAnonMB })
		s.PeakFileMB = m(func(x *runResult) float64 { return x.PeakFileMB })
		s.Startup = m(func(x *runResult) float64 { return x.Startup })
		s.Resume = m(func(x *runResult) float64 { return x.Resume })
		s.Restored = m(func(x *runResult) float64 { return float64(x.Restored) })
		s.P50 = m(func(x *runResult) float64 { return x.P50 })
		s.P99 = m(func(x *runResult) float64 { return x.P99 })
		s.Max = m(func(x *runResult) float64 { return x.Max })
		s.Commits = m(func(x *runResult) float64 { return float64(commits(x)) })
		s.CommitMeanMs = m(func(x *runResult) float64 { return x.Child.CommitMeanMs })
		s.CommitP99Ms = m(func(x *runResult) float64 { return x.Child.CommitP99Ms })
		s.CommitShare = m(func(x *runResult) float64 {
			// Only throughput rows: their Seconds is the time the tasks were busy.
			if x.Seconds == 0 || x.Child.TaskStarts == 0 || x.Resume > 0 || x.P50 > 0 {
				return 0
			}
			return x.Child.CommitTotalSec / (x.Seconds * float64(x.Child.TaskStarts))
		})
		s.AddPartRetriesPerCommit = m(func(x *runResult) float64 {
			if commits(x) == 0 {
				return 0
			}
			return float64(x.Child.AddPartRetries) / float64(commits(x))
		})
		s.AddPartBackoffPerCommit = m(func(x *runResult) float64 {
			if commits(x) == 0 {
				return 0
			}
			return x.Child.AddPartBackoffMs / float64(commits(x))
		})
		for _, p := range append(slices.Clone(eddyPhases), saramaPhases...) {
			if _, ok := runs[0].Child.PhaseMeanMs[p]; !ok {
				continue
			}
			if s.PhaseMeanMs == nil {
				s.PhaseMeanMs, s.PhaseP99Ms = map[string]float64{}, map[string]float64{}
			}
			s.PhaseMeanMs[p] = m(func(x *runResult) float64 { return x.Child.PhaseMeanMs[p] })
			s.PhaseP99Ms[p] = m(func(x *runResult) float64 { return x.Child.PhaseP99Ms[p] })
		}
		s.RecordsPerProduce = m(func(x *runResult) float64 { return x.Child.RecordsPerProduce })
		s.ConsumerBatch = m(func(x *runResult) float64 { return x.Child.ConsumerBatch })
		s.AllocsPerUnit = m(func(x *runResult) float64 { return perUnit(float64(x.Child.Mallocs), x.Units) })
		s.AllocBytesPerUnit = m(func(x *runResult) float64 { return perUnit(float64(x.Child.AllocBytes), x.Units) })
		s.GCs = m(func(x *runResult) float64 { return float64(x.Child.NumGC) })
		s.OutPerUnit = m(func(x *runResult) float64 { return perUnit(float64(x.OutRecords), x.Units) })
		s.Keys = m(func(x *runResult) float64 { return float64(x.Keys) })
		s.CommitP50Ms = m(func(x *runResult) float64 { return x.Child.CommitP50Ms })
		s.PrepareP50Ms = m(func(x *runResult) float64 { return x.Child.SinkPrepareP50Ms })
		s.PrepareP99Ms = m(func(x *runResult) float64 { return x.Child.SinkPrepareP99Ms })
		s.SinkCommitP50Ms = m(func(x *runResult) float64 { return x.Child.SinkCommitP50Ms })
		s.SinkCommitP99Ms = m(func(x *runResult) float64 { return x.Child.SinkCommitP99Ms })
		s.PGCPUPerM = m(func(x *runResult) float64 { return x.PGCPUPerM })
		s.PGRows = m(func(x *runResult) float64 { return float64(x.PGRows) })
		s.SinkWriteShare = m(func(x *runResult) float64 { return perSecond(x.Child.SinkWriteSec, x.Seconds) })
		s.SinkPrepareShare = m(func(x *runResult) float64 { return perSecond(x.Child.SinkPrepareSec, x.Seconds) })
		s.Tasks = runs[0].Tasks
		s.Sockets = m(func(x *runResult) float64 { return float64(x.Child.Sockets) })
		s.SocketsPeak = m(func(x *runResult) float64 { return float64(x.Child.SocketsPeak) })
		s.FDs = m(func(x *runResult) float64 { return float64(x.Child.FDs) })
		s.Goroutines = m(func(x *runResult) float64 { return float64(x.Child.Goroutines) })
		s.GoroutinesPeak = m(func(x *runResult) float64 { return float64(x.Child.GoroutinesPeak) })
	}
	for _, s := range out {
		c := byRow[s.Ceiling]
		switch {
		case c == nil || s.Runs == 0 || c.Runs == 0:
		case s.P50 > 0 && c.P50 > 0:
			s.Ratio = s.P50 / c.P50
			s.PairedRatio = e.pairedRatio(s.Row, s.Ceiling, func(r *runResult) float64 { return r.P50 })
			s.P99Ratio = s.P99 / c.P99
			s.P99Paired = e.pairedRatio(s.Row, s.Ceiling, func(r *runResult) float64 { return r.P99 })
		case c.Rate > 0:
			s.Ratio = s.Rate / c.Rate
			s.PairedRatio = e.pairedRatio(s.Row, s.Ceiling, func(r *runResult) float64 { return r.Rate })
		}
		if a := byRow[s.AltCeiling]; a != nil && a.Rate > 0 && s.Runs > 0 {
			s.AltRatio = s.Rate / a.Rate
			s.AltPaired = e.pairedRatio(s.Row, s.AltCeiling, func(r *runResult) float64 { return r.Rate })
		}
		if s.Runs == 0 {
			continue
		}
		if s.Target > 0 && s.Ratio > 0 {
			s.Verdict = verdict(s.Ratio >= s.Target)
		}
		if s.P99Target > 0 && s.P99Ratio > 0 {
			s.Verdict = verdict(s.P99Ratio <= s.P99Target)
		}
		if s.RSSTarget > 0 {
			if v := verdict(s.MaxRSSMB < s.RSSTarget); s.Verdict == "" || v != "met" {
				s.Verdict = v
			}
		}
	}
	return out
}

// commits counts a run's commits: eddy's (from its log), else the pipe's EndTxn requests.
func commits(x *runResult) int64 {
	if x.Child.Commits > 0 {
		return int64(x.Child.Commits)
	}
	return x.Child.Requests["EndTxn"]
}

// pairedRatio is the median over measured rounds of f(row) / f(ceiling) in that round.
func (e *env) pairedRatio(row, ceiling string, f func(*runResult) float64) float64 {
	return median(e.pairedRatios(row, ceiling, f))
}

// pairedRatios are f(row) / f(ceiling) of each measured round both ran, in the order
// row's runs were recorded (round order).
func (e *env) pairedRatios(row, ceiling string, f func(*runResult) float64) []float64 {
	byRound := map[int]*runResult{}
	for _, r := range e.results {
		if r.Row == ceiling && !r.Warmup {
			byRound[r.Round] = r
		}
	}
	var ratios []float64
	for _, r := range e.results {
		if c := byRound[r.Round]; r.Row == row && !r.Warmup && c != nil && f(c) > 0 {
			ratios = append(ratios, f(r)/f(c))
		}
	}
	return ratios
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func perSecond(x, seconds float64) float64 {
	if seconds == 0 {
		return 0
	}
	return x / seconds
}

func perUnit(x float64, units int64) float64 {
	if units == 0 {
		return 0
	}
	return x / float64(units)
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cells formats a summary's main columns.
func (s *summary) cells() []string {
	dash := func(x float64, format string) string {
		if x == 0 {
			return "—"
		}
		return fmt.Sprintf(format, x)
	}
	rate := "—"
	if s.Rate > 0 && s.P50 == 0 {
		rate = fmt.Sprintf("%s %s/s", thousands(s.Rate), s.Unit)
		if s.Runs > 1 {
			rate += fmt.Sprintf(" (%s–%s)", thousands(s.RateMin), thousands(s.RateMax))
		}
	}
	ratio := "—"
	if s.Ratio > 0 {
		ratio = fmt.Sprintf("%.2f × %s", s.Ratio, s.Ceiling)
		if s.Runs > 1 && s.PairedRatio > 0 {
			ratio += fmt.Sprintf(" (per round %.2f)", s.PairedRatio)
		}
	}
	if s.AltRatio > 0 {
		ratio += fmt.Sprintf("; %.2f × %s", s.AltRatio, s.AltCeiling)
		if s.Runs > 1 && s.AltPaired > 0 {
			ratio += fmt.Sprintf(" (per round %.2f)", s.AltPaired)
		}
	}
	target := ""
	switch {
	case s.Target > 0:
		target = fmt.Sprintf("≥ %.2f", s.Target)
	case s.RSSTarget > 0:
		target = fmt.Sprintf("RSS < %.0f MB", s.RSSTarget)
	case s.P99Target > 0:
		target = fmt.Sprintf("p99 ≤ %.2f×", s.P99Target)
	}
	if s.Verdict != "" {
		target += " " + s.Verdict
	}
	var extra []string
	if s.P50 > 0 {
		extra = append(extra, fmt.Sprintf("p50 %.0f ms, p99 %.0f ms, max %.0f ms", s.P50, s.P99, s.Max))
		if s.P99Ratio > 0 {
			extra = append(extra, fmt.Sprintf("p99 %.2f× %s's (per round, median %.2f×)", s.P99Ratio, s.Ceiling, s.P99Paired))
		}
	}
	if s.Resume > 0 {
		extra = append(extra, fmt.Sprintf("every task processing %.2f s after start; %s records restored", s.Resume, thousands(s.Restored)))
	}
	if s.OutPerUnit > 0 {
		extra = append(extra, fmt.Sprintf("%.3f output records / %s", s.OutPerUnit, strings.TrimSuffix(s.Unit, "s")))
	}
	if s.Keys > 0 {
		extra = append(extra, fmt.Sprintf("%s distinct %s", thousands(s.Keys), s.Unit))
	}
	if s.Tasks > 0 {
		what := "goroutines"
		if costEngine(s.Row) != "eddy" {
			what = "JVM threads"
		}
		extra = append(extra, fmt.Sprintf("%d tasks: %.0f sockets, %.0f %s", s.Tasks, s.Sockets, s.Goroutines, what))
	}
	if s.CommitMeanMs > 0 {
		extra = append(extra, fmt.Sprintf("commit %.0f ms mean, %.0f ms p99", s.CommitMeanMs, s.CommitP99Ms))
	}
	if s.PGCPUPerM > 0 {
		extra = append(extra, fmt.Sprintf("PostgreSQL CPU %.2f s/M", s.PGCPUPerM))
	}
	if s.Runs == 0 {
		extra = append(extra, "no successful run")
	}
	return []string{s.Row, rate, dash(s.MBps, "%.1f"), dash(s.CPUPerM, "%.2f"), dash(s.MaxRSSMB, "%.0f"), ratio, target, strings.Join(extra, "; ")}
}

func thousands(x float64) string {
	s := fmt.Sprintf("%.0f", x)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func tableHeader() []string {
	return []string{"row", "rate (median, min–max)", "MB/s", "CPU s / M", "peak RSS MB", "ratio to ceiling", "target", "notes"}
}

func textTable(e *env, sums []*summary) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(tableHeader(), "\t"))
	for _, s := range sums {
		fmt.Fprintln(tw, strings.Join(s.cells(), "\t"))
	}
	if pg := pgCells(sums); len(pg) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, strings.Join(pgHeader(), "\t"))
		for _, c := range pg {
			fmt.Fprintln(tw, strings.Join(c, "\t"))
		}
	}
	if cost := costSummaries(sums); len(cost) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, strings.Join(costHeader(), "\t"))
		for _, c := range costCells(cost) {
			fmt.Fprintln(tw, strings.Join(c, "\t"))
		}
	}
	if sc := scaleCells(scaleSummaries(e.results)); len(sc) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, strings.Join(scaleHeader(), "\t"))
		for _, c := range sc {
			fmt.Fprintln(tw, strings.Join(c, "\t"))
		}
	}
	if twins := twinCells(e, sums); len(twins) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, strings.Join(twinHeader(), "\t"))
		for _, c := range twins {
			fmt.Fprintln(tw, strings.Join(c, "\t"))
		}
	}
	_ = tw.Flush()
	return b.String()
}

// The targets against Kafka Streams 4.1.1 on the same topology and input. Like for
// like, both caches off (issue 13): throughput ≥ 1.5×, CPU per record ≤ 0.5×, peak RSS
// ≤ 0.4×. As users run them, both with their default record caches (issue 25 item 5):
// the same, with peak RSS ≤ 0.3×.
type twinTargets struct{ rate, cpu, rss float64 }

var (
	likeForLikeTargets = twinTargets{rate: 1.5, cpu: 0.5, rss: 0.4}
	defaultsTargets    = twinTargets{rate: 1.5, cpu: 0.5, rss: 0.3}
)

// The two comparisons, as the twin table names them.
const (
	compareDefaults    = "as users run it (defaults: record caches on)"
	compareLikeForLike = "like-for-like (Kafka Streams' cache off)"
)

func twinHeader() []string {
	return []string{"eddy row", "Kafka Streams row", "comparison", "throughput eddy / KS", "CPU per record eddy / KS", "peak RSS eddy / KS", "open sockets at stop (peak): eddy / KS", "output records per unit: eddy / KS"}
}

// twinCells compares each eddy row with its Kafka Streams twin: the ratio of the
// medians, the ratios taken per round (runs side by side) and their median, and the
// verdict on the comparison's targets. A twin run with Kafka Streams' default record
// cache is the comparison as users run it; one with its cache off, like for like.
func twinCells(e *env, sums []*summary) [][]string {
	byRow := map[string]*summary{}
	for _, s := range sums {
		byRow[s.Row] = s
	}
	var out [][]string
	for _, s := range sums {
		k := byRow[s.Twin]
		if k == nil || s.Runs == 0 || k.Runs == 0 {
			continue
		}
		t, what := likeForLikeTargets, compareLikeForLike
		if s.TwinDefaults {
			t, what = defaultsTargets, compareDefaults
		}
		ratio := func(a, b float64, f func(*runResult) float64, target float64, higher bool, unit string) string {
			if a == 0 || b == 0 {
				return "—"
			}
			cell := fmt.Sprintf("%.2f× (%s vs %s", a/b, fmtVal(a, unit), fmtVal(b, unit))
			if ps := e.pairedRatios(s.Row, k.Row, f); len(ps) > 1 {
				rounds := make([]string, len(ps))
				for i, p := range ps {
					rounds[i] = fmt.Sprintf("%.2f", p)
				}
				cell += fmt.Sprintf("; per round %s: median %.2f×", strings.Join(rounds, ", "), median(ps))
			}
			ok, sign := a/b <= target, "≤"
			if higher {
				ok, sign = a/b >= target, "≥"
			}
			return cell + fmt.Sprintf("), target %s %.1f× %s", sign, target, verdict(ok))
		}
		out = append(out, []string{
			s.Row, k.Row, what,
			ratio(s.Rate, k.Rate, func(r *runResult) float64 { return r.Rate }, t.rate, true, "rate"),
			ratio(s.CPUPerM, k.CPUPerM, func(r *runResult) float64 { return r.CPUPerM }, t.cpu, false, "cpu"),
			ratio(s.MaxRSSMB, k.MaxRSSMB, func(r *runResult) float64 { return r.MaxRSSMB }, t.rss, false, "rss"),
			fmt.Sprintf("%.0f (%.0f) / %.0f (%.0f)", s.Sockets, s.SocketsPeak, k.Sockets, k.SocketsPeak),
			fmt.Sprintf("%.3f / %.3f", s.OutPerUnit, k.OutPerUnit),
		})
	}
	return out
}

// fmtVal formats a compared value: a rate in units/s, CPU in s per M units, RSS in MB.
func fmtVal(x float64, what string) string {
	switch what {
	case "rate":
		return thousands(x) + "/s"
	case "cpu":
		return fmt.Sprintf("%.2f s/M", x)
	}
	return fmt.Sprintf("%.0f MB", x)
}

// costSummaries are the cost rows that ran, by engine (eddy first), fewest tasks first.
func costSummaries(sums []*summary) []*summary {
	var out []*summary
	for _, s := range sums {
		if s.Tasks > 0 {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b *summary) int {
		if ea, eb := costEngine(a.Row), costEngine(b.Row); ea != eb {
			return map[bool]int{true: -1, false: 1}[ea == "eddy"]
		}
		return a.Tasks - b.Tasks
	})
	return out
}

// costEngine is what a cost row runs: "eddy", or "Kafka Streams" for the ks- rows.
func costEngine(row string) string {
	if strings.HasPrefix(row, "ks-") {
		return "Kafka Streams"
	}
	return "eddy"
}

func pgHeader() []string {
	return []string{"row", "rows/s", "ratio to pg-copy", "commit p50 / p99 ms", "Prepare p50 / p99 ms", "COMMIT PREPARED p50 / p99 ms", "Write / Prepare share", "client CPU s / M", "PostgreSQL CPU s / M", "rows at end"}
}

// pgCells formats the PostgreSQL rows' commit latencies and costs.
func pgCells(sums []*summary) [][]string {
	var out [][]string
	for _, s := range sums {
		if !strings.HasPrefix(s.Row, "pg-") || s.Runs == 0 {
			continue
		}
		pair := func(a, b float64) string {
			if a == 0 && b == 0 {
				return "—"
			}
			return fmt.Sprintf("%.1f / %.1f", a, b)
		}
		ratio := "—"
		if s.Ceiling == "pg-copy" && s.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f (per round %.2f)", s.Ratio, s.PairedRatio)
			if s.Verdict != "" {
				ratio += fmt.Sprintf(", target ≥ %.1f %s", s.Target, s.Verdict)
			}
		}
		share := "—"
		if s.SinkWriteShare > 0 || s.SinkPrepareShare > 0 {
			share = fmt.Sprintf("%.0f%% / %.0f%%", 100*s.SinkWriteShare, 100*s.SinkPrepareShare)
		}
		rows := "—"
		if s.PGRows > 0 {
			rows = thousands(s.PGRows)
		}
		pgcpu := "—"
		if s.PGCPUPerM > 0 {
			pgcpu = fmt.Sprintf("%.2f", s.PGCPUPerM)
		}
		out = append(out, []string{
			s.Row, thousands(s.Rate), ratio, pair(s.CommitP50Ms, s.CommitP99Ms),
			pair(s.PrepareP50Ms, s.PrepareP99Ms), pair(s.SinkCommitP50Ms, s.SinkCommitP99Ms), share,
			fmt.Sprintf("%.2f", s.CPUPerM), pgcpu, rows,
		})
	}
	return out
}

func costHeader() []string {
	return []string{"row", "tasks", "open sockets (peak)", "per added task", "open fds", "goroutines / JVM threads (peak)", "per added task", "peak RSS MB (VmHWM)", "peak anon / file MB", "per added task MB", "startup s", "records/s", "CPU s / M"}
}

// costCells formats the cost rows; "per added task" is the growth over the same
// engine's row with the fewest tasks, divided by the tasks added.
func costCells(cost []*summary) [][]string {
	var out [][]string
	var base *summary
	for _, s := range cost {
		if base == nil || costEngine(base.Row) != costEngine(s.Row) {
			base = s
		}
		per := func(x, x0 float64) string {
			if s.Tasks == base.Tasks {
				return "—"
			}
			return fmt.Sprintf("%.2f", (x-x0)/float64(s.Tasks-base.Tasks))
		}
		out = append(out, []string{
			s.Row, fmt.Sprint(s.Tasks),
			fmt.Sprintf("%.0f (%.0f)", s.Sockets, s.SocketsPeak), per(s.Sockets, base.Sockets),
			fmt.Sprintf("%.0f", s.FDs),
			fmt.Sprintf("%.0f (%.0f)", s.Goroutines, s.GoroutinesPeak), per(s.Goroutines, base.Goroutines),
			fmt.Sprintf("%.0f", s.MaxRSSMB), fmt.Sprintf("%.0f / %.0f", s.PeakAnonMB, s.PeakFileMB), per(s.MaxRSSMB, base.MaxRSSMB),
			fmt.Sprintf("%.2f", s.Startup), thousands(s.Rate), fmt.Sprintf("%.2f", s.CPUPerM),
		})
	}
	return out
}

// markdown renders the results for BENCHMARKS.md.
func markdown(e *env, sums []*summary) string {
	var b strings.Builder
	o := e.o
	fmt.Fprintf(&b, "Machine: %s.\n", e.machine.summary())
	fmt.Fprintf(&b, "Load average before / after: %s / %s. Run took %v (%s to %s).\n\n",
		e.startLoad, e.endLoad, e.finishedAt.Sub(e.startedAt).Round(time.Second), e.startedAt.Format(time.RFC3339), e.finishedAt.Format("15:04:05"))
	fmt.Fprintf(&b, "Command:\n\n```\n%s\n```\n\n", o.commandLine)
	fmt.Fprintf(&b, "Input: %d records of %d-byte values and 16-byte keys over %d partitions; word count: %d words (vocabulary %d) "+
		"in lines of at most %d bytes; changelogs of %d keys; memory rows: %d keys over %d tasks; cost rows: %d records of %d keys. %d warm-up and %d measured runs per row, "+
		"rounds interleaved; medians. Client settings: %s.",
		o.records, o.valueSize, o.partitions, o.words, o.vocab, o.valueSize, o.clKeys, o.memKeys, o.memParts, o.costRecords, o.vocab, o.warmup, o.runs, o.tune)
	if e.latencyRate > 0 {
		fmt.Fprintf(&b, " Latency rows: %d records/s (%s) for %v.", e.latencyRate, e.latencyRateDerivedFrom, o.latDuration)
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(tableHeader(), " | "), strings.Repeat("---|", len(tableHeader())))
	for _, s := range sums {
		c := s.cells()
		c[0] = "`" + c[0] + "`"
		fmt.Fprintf(&b, "| %s |\n", strings.Join(c, " | "))
	}
	b.WriteString("\nWhat each row runs:\n\n")
	for _, s := range sums {
		fmt.Fprintf(&b, "- `%s`: %s\n", s.Row, s.Desc)
	}
	if cost := costSummaries(sums); len(cost) > 0 {
		b.WriteString("\nCost per task (medians; sockets, fds and goroutines or JVM threads read in the child after its input was committed and it ran idle for -cost-settle; peaks sampled every 100 ms):\n\n")
		fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(costHeader(), " | "), strings.Repeat("---|", len(costHeader())))
		for _, c := range costCells(cost) {
			c[0] = "`" + c[0] + "`"
			fmt.Fprintf(&b, "| %s |\n", strings.Join(c, " | "))
		}
	}
	if sc := scaleCells(scaleSummaries(e.results)); len(sc) > 0 {
		b.WriteString("\nScale (medians): one instance from its start until every task runs and until the group committed the input and the repartition topic; " +
			"its goroutines (Kafka Streams: JVM threads), sockets after -cost-settle idle and peak RSS (VmHWM) then; a second instance from its start until both run " +
			"and share the tasks (moved: the second's), and the first's goroutines and sockets after the move:\n\n")
		fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(scaleHeader(), " | "), strings.Repeat("---|", len(scaleHeader())))
		for _, c := range sc {
			c[0] = "`" + c[0] + "`"
			fmt.Fprintf(&b, "| %s |\n", strings.Join(c, " | "))
		}
	}
	if pg := pgCells(sums); len(pg) > 0 {
		fmt.Fprintf(&b, "\nPostgreSQL rows (medians): %s. Commit: eddy's commit as its debug log times it (the pre-commit, i.e. the sink's Prepare of every task of the worker, and the Kafka commit; not the COMMIT PREPARED after it), the COPY pipe's COPY of a batch; Prepare and COMMIT PREPARED per task transaction; the shares are the time the tasks spent in the sink's Write and Prepare over the run's time (over 100%%: tasks of both workers at once):\n\n", e.pgSettings)
		fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(pgHeader(), " | "), strings.Repeat("---|", len(pgHeader())))
		for _, c := range pg {
			c[0] = "`" + c[0] + "`"
			fmt.Fprintf(&b, "| %s |\n", strings.Join(c, " | "))
		}
	}
	if twins := twinCells(e, sums); len(twins) > 0 {
		b.WriteString("\neddy beside Kafka Streams 4.1.1 (ratio of the medians, and the ratios taken per round, the two rows run side by side, with their median). " +
			"\"As users run it\": both engines with their defaults, record caches on (eddy's DSL 10 MiB per task, Kafka Streams' statestore.cache.max.bytes 10 MB per instance), issue 25's targets; " +
			"\"like-for-like\": Kafka Streams' cache off (statestore.cache.max.bytes 0) beside eddy's rows that forward every update, issue 13's targets:\n\n")
		fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(twinHeader(), " | "), strings.Repeat("---|", len(twinHeader())))
		for _, c := range twins {
			c[0], c[1] = "`"+c[0]+"`", "`"+c[1]+"`"
			fmt.Fprintf(&b, "| %s |\n", strings.Join(c, " | "))
		}
	}
	if header, rows := phaseCells(sums); len(rows) > 0 {
		b.WriteString("\nCommit phases (medians over the runs of each run's mean and p99, ms; commitphases.go): eddy's steps of a worker's commit, and the transaction's requests timed from sarama's debug log, per commit of each producer:\n\n")
		fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
		for _, r := range rows {
			fmt.Fprintf(&b, "| %s |\n", strings.Join(r, " | "))
		}
	}
	b.WriteString("\nDiagnostics (medians; from the child's sarama metrics, eddy's debug log and the Go runtime):\n\n")
	b.WriteString("| row | startup s | commits | commit mean ms | commit p99 ms | share of task time committing | AddPartitionsToTxn retries / commit | records / produce request | records / partition fetch | allocs / unit | alloc bytes / unit | GCs | peak anon / file MB |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range sums {
		if s.Runs == 0 {
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %.2f | %.0f | %.1f | %.1f | %.0f%% | %.2f | %.1f | %.1f | %.1f | %.0f | %.0f | %.0f / %.0f |\n",
			s.Row, s.Startup, s.Commits, s.CommitMeanMs, s.CommitP99Ms, 100*s.CommitShare, s.AddPartRetriesPerCommit,
			s.RecordsPerProduce, s.ConsumerBatch, s.AllocsPerUnit, s.AllocBytesPerUnit, s.GCs, s.PeakAnonMB, s.PeakFileMB)
	}
	return b.String()
}

// machineInfo describes where the benchmark ran.
type machineInfo struct {
	NumCPU   int
	CPU      string
	MemGB    float64
	Go       string
	Java     string
	Kafka    string
	Hostname string
	Commit   string // the repository's HEAD, and whether tracked files differ from it
}

func (m machineInfo) summary() string {
	return fmt.Sprintf("nproc %d, %s, %.0f GB RAM, %s, %s, Kafka %s; eddy at %s", m.NumCPU, m.CPU, m.MemGB, m.Go, m.Java, m.Kafka, m.Commit)
}

func readMachine(ctx context.Context) machineInfo {
	m := machineInfo{NumCPU: runtime.NumCPU(), Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, Kafka: "unknown"}
	m.CPU = firstField("/proc/cpuinfo", "model name")
	if kb := firstField("/proc/meminfo", "MemTotal"); kb != "" {
		var n float64
		if _, err := fmt.Sscanf(kb, "%f", &n); err == nil {
			m.MemGB = n / 1024 / 1024
		}
	}
	if out, err := exec.CommandContext(ctx, "java", "-version").CombinedOutput(); err == nil {
		m.Java = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	} else {
		m.Java = "java: not found"
	}
	// The broker's version: integration/kafka.sh runs the jars in .../kafka-<version>/libs.
	if out, err := exec.CommandContext(ctx, "ps", "-eo", "args").Output(); err == nil {
		re := regexp.MustCompile(`kafka-(\d+\.\d+\.\d+)/libs`)
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "kafka.Kafka") {
				if sm := re.FindStringSubmatch(line); sm != nil {
					m.Kafka = sm[1] + " (the kafka.Kafka JVM on this host)"
					break
				}
			}
		}
	}
	m.Hostname, _ = os.Hostname()
	m.Commit = "unknown commit"
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = "commit " + strings.TrimSpace(string(out))
		if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			m.Commit += " with uncommitted changes to tracked files"
		}
	}
	return m
}

// firstField returns the value of the first "key : value" line of a /proc file.
func firstField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
