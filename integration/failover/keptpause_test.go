//go:build linux

package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// captured is a line an eddy child wrote on its stderr in a scale-up 3 -> 4 on Kafka
// 4.1.1 (2026-12-02).
const captured = `time=2026-12-02T16:41:48.490Z level=INFO msg="tasks running again after a rebalance" app=rolling-false-811c9dc5-c6a7e1-1 worker=0 paused=825.616838ms kept=1 tasks=1 generation=3`

// The driver reads eddy's pause reports from a child's stderr: the captured line
// parses to its pause, kept tasks and generation, across writes that split it; other
// lines are not reports; a report without its fields is an error, not a zero.
func TestParseResumed(t *testing.T) {
	p, ok, err := parseResumed(captured)
	if !ok || err != nil {
		t.Fatalf("parseResumed(captured) = ok %v, err %v; want a report", ok, err)
	}
	if want := 825616838 * time.Nanosecond; p.paused != want || p.kept != 1 || p.gen != 3 {
		t.Errorf("parsed paused=%v kept=%d generation=%d; want %v, 1, 3", p.paused, p.kept, p.gen, want)
	}
	if _, ok, _ := parseResumed(`time=2026-12-02T16:41:48.490Z level=WARN msg="creating the worker's producer failed; retrying" worker=0`); ok {
		t.Error("another message parsed as a pause report")
	}
	if _, ok, err := parseResumed(strings.Replace(captured, " generation=3", "", 1)); !ok || err == nil {
		t.Errorf("a report without generation=: ok %v, err %v; want an error", ok, err)
	}

	var r pauseReader
	half := len(captured) / 2
	for _, w := range []string{"WARNING: something else\n", captured[:half], captured[half:] + "\n", "tail without newline"} {
		if _, err := r.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.pauses) != 1 || r.pauses[0].paused != p.paused || r.pauses[0].gen != 3 || len(r.bad) != 0 {
		t.Errorf("pauseReader read %+v (bad %v); want the one captured report", r.pauses, r.bad)
	}
}

// A child's logger passes warnings and eddy's pause report (at Info) and drops the
// rest of Info; what it writes parses back.
func TestKeptPauseLogs(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(keptPauseLogs{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})}).With("worker", 2)
	l.Info("task running")
	l.Warn("output failed")
	l.Info(resumedMsg, "paused", 312*time.Millisecond, "kept", 3, "tasks", 4, "generation", int32(9))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "output failed") {
		t.Fatalf("logged %q; want the warning and the report", lines)
	}
	p, ok, err := parseResumed(lines[1])
	if !ok || err != nil || p.paused != 312*time.Millisecond || p.kept != 3 || p.gen != 9 {
		t.Errorf("report %q parsed to %+v ok %v err %v", lines[1], p, ok, err)
	}
}

// keptPauses groups reports in the window by generation and weighs each by the tasks
// its worker kept.
func TestKeptPausesPerRebalance(t *testing.T) {
	from := time.Now()
	at := from.Add(time.Second)
	a := &proc{pauses: &pauseReader{pauses: []keptPause{
		{at: at, paused: 100 * time.Millisecond, kept: 1, gen: 3},
		{at: at, paused: 300 * time.Millisecond, kept: 2, gen: 3},
		{at: from.Add(-time.Second), paused: 5 * time.Second, kept: 1, gen: 2}, // before the window
	}}}
	b := &proc{pauses: &pauseReader{pauses: []keptPause{
		{at: at, paused: 200 * time.Millisecond, kept: 1, gen: 3},
		{at: at, paused: 50 * time.Millisecond, kept: 1, gen: 4},
	}}}
	got, bad := keptPauses([]*proc{b, a}, from, from.Add(time.Minute))
	want := "gen3:4_tasks/max=300ms/median=250ms,gen4:1_tasks/max=50ms/median=50ms"
	if s := pausesString(got); s != want || len(bad) != 0 {
		t.Errorf("keptPauses = %s (bad %v); want %s", s, bad, want)
	}
}
