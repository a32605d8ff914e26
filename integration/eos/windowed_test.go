//go:build unix

package eos

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// winCase is a synthetic run of the windowed aggregation: input partition 0 only.
type winCase struct {
	in      []InRecord
	updates []WinRecord
	finals  []WinRecord
}

func (c winCase) observed(starts ...int64) *Observed {
	o := &Observed{
		Partitions: 1,
		Input:      map[int32][]InRecord{0: slices.Clone(c.in)},
		Windows:    WindowParams{SizeMs: 10, GraceMs: 5},
		WinUpdates: map[int32][]WinRecord{0: slices.Clone(c.updates)},
		WinFinals:  map[int32][]WinRecord{0: slices.Clone(c.finals)},
	}
	if len(starts) > 0 {
		o.OperatorStarts = map[int32][]int64{0: starts}
	}
	return o
}

type winCounts struct{ dup, lost, mismatched int }

func checkWin(t *testing.T, o *Observed, want winCounts) *Report {
	t.Helper()
	r := &Report{}
	e := expect(o, r)
	we := expectWindows(o, r)
	checkWinUpdates(o, e, we, r)
	checkWinFinals(o, we, r)
	if got := (winCounts{r.Duplicates, r.Lost, r.Mismatched}); got != want {
		t.Errorf("got %+v, want %+v; problems:\n%s", got, want, strings.Join(r.Problems, "\n"))
	}
	return r
}

// Tumbling windows of 10 ms with 5 ms grace, key a. Stream time 22 after v2, so v3
// (window [0,10), closes at 15) is late; v4 (window [10,20), closes at 25) is on time;
// after v5 stream time is 25, so v6 (window [10,20) again) is late: a window whose end
// plus grace equals the stream time has closed. The final stream time 25 closes [0,10)
// and [10,20), not [20,30).
func boundaryCase() winCase {
	rec := func(off, v, ts int64) InRecord { return InRecord{Offset: off, Key: "a", Value: v, Timestamp: ts} }
	up := func(off, start, count, sum, last, ts int64) WinRecord {
		return WinRecord{Offset: off, Key: "a", Start: start, Agg: WinAgg{count, sum, last}, Timestamp: ts}
	}
	return winCase{
		in: []InRecord{rec(0, 1, 0), rec(1, 2, 22), rec(2, 3, 5), rec(3, 4, 12), rec(4, 5, 25), rec(5, 6, 14)},
		updates: []WinRecord{
			up(0, 0, 1, 1, 1, 0), up(1, 20, 1, 2, 2, 22), up(2, 10, 1, 4, 4, 12), up(3, 20, 2, 7, 5, 25),
		},
		finals: []WinRecord{up(0, 0, 1, 1, 1, 0), up(1, 10, 1, 4, 4, 12)},
	}
}

func TestWindowedLateRule(t *testing.T) {
	c := boundaryCase()
	r := checkWin(t, c.observed(), winCounts{})
	if r.LateDropped != 2 || r.MaybeLate != 0 || r.FinalWindows != 2 {
		t.Errorf("late %d, maybe late %d, final windows %d; want 2, 0, 2", r.LateDropped, r.MaybeLate, r.FinalWindows)
	}
	t.Run("duplicated final result", func(t *testing.T) {
		c := boundaryCase()
		c.finals = append(c.finals, c.finals[1])
		checkWin(t, c.observed(), winCounts{dup: 1})
	})
	t.Run("missing final result", func(t *testing.T) {
		c := boundaryCase()
		c.finals = c.finals[1:]
		checkWin(t, c.observed(), winCounts{lost: 1})
	})
	t.Run("final result counting a late record", func(t *testing.T) {
		c := boundaryCase()
		c.finals[1].Agg, c.finals[1].Timestamp = WinAgg{2, 10, 6}, 14
		checkWin(t, c.observed(), winCounts{mismatched: 1})
	})
	t.Run("final result of an open window", func(t *testing.T) {
		c := boundaryCase()
		c.finals = append(c.finals, WinRecord{Offset: 2, Key: "a", Start: 20, Agg: WinAgg{2, 7, 5}, Timestamp: 25})
		checkWin(t, c.observed(), winCounts{mismatched: 1})
	})
	t.Run("final result with a wrong timestamp", func(t *testing.T) {
		c := boundaryCase()
		c.finals[0].Timestamp++
		checkWin(t, c.observed(), winCounts{mismatched: 1})
	})
	t.Run("final result of a window without records", func(t *testing.T) {
		c := boundaryCase()
		c.finals = append(c.finals, WinRecord{Offset: 2, Key: "b", Start: 0, Agg: WinAgg{1, 9, 9}})
		checkWin(t, c.observed(), winCounts{mismatched: 1})
	})
	t.Run("update of a late record", func(t *testing.T) {
		c := boundaryCase()
		c.updates = append(c.updates, WinRecord{Offset: 4, Key: "a", Start: 10, Agg: WinAgg{2, 10, 6}, Timestamp: 14})
		checkWin(t, c.observed(), winCounts{mismatched: 1})
	})
	t.Run("duplicated update", func(t *testing.T) {
		c := boundaryCase()
		c.updates = slices.Insert(c.updates, 2, c.updates[1])
		checkWin(t, c.observed(), winCounts{dup: 1})
	})
	t.Run("lost update", func(t *testing.T) {
		c := boundaryCase()
		// v2's update missing: v5's still counts it (the store did).
		c.updates = slices.Delete(c.updates, 1, 2)
		checkWin(t, c.observed(), winCounts{lost: 1})
	})
	t.Run("update with a wrong count", func(t *testing.T) {
		c := boundaryCase()
		c.updates[3].Agg.Count = 3
		checkWin(t, c.observed(), winCounts{mismatched: 1})
	})
	t.Run("update with a wrong sum", func(t *testing.T) {
		c := boundaryCase()
		c.updates[3].Agg.Sum--
		checkWin(t, c.observed(), winCounts{mismatched: 1})
	})
	t.Run("update with a wrong timestamp", func(t *testing.T) {
		c := boundaryCase()
		c.updates[3].Timestamp = 22 // the window's first record's, not the largest
		checkWin(t, c.observed(), winCounts{mismatched: 1})
	})
	t.Run("updates out of order", func(t *testing.T) {
		c := boundaryCase()
		c.updates[1], c.updates[3] = c.updates[3], c.updates[1]
		// Out of order, and each count off for the order the window saw.
		checkWin(t, c.observed(), winCounts{mismatched: 1})
	})
}

// An operator that restarted at v6 saw no stream time before it: v6 may be counted or
// not, and the window's result may come once without it and once more with it; three
// results, or a result with a record that is late either way, are still wrong.
func TestWindowedRestartMakesLateRecordsAmbiguous(t *testing.T) {
	c := boundaryCase()
	r := checkWin(t, c.observed(5), winCounts{})
	if r.LateDropped != 1 || r.MaybeLate != 1 {
		t.Errorf("late %d, maybe late %d; want 1, 1", r.LateDropped, r.MaybeLate)
	}
	with := WinRecord{Offset: 2, Key: "a", Start: 10, Agg: WinAgg{2, 10, 6}, Timestamp: 14}
	t.Run("counted", func(t *testing.T) {
		c := boundaryCase()
		c.finals[1] = with
		c.updates = append(c.updates, with)
		checkWin(t, c.observed(5), winCounts{})
	})
	t.Run("result without, then with it", func(t *testing.T) {
		c := boundaryCase()
		c.finals = append(c.finals, with)
		if r := checkWin(t, c.observed(5), winCounts{}); r.MaybeLateResults != 1 {
			t.Errorf("maybe-late results %d, want 1", r.MaybeLateResults)
		}
	})
	t.Run("the same result twice", func(t *testing.T) {
		c := boundaryCase()
		c.finals = append(c.finals, with, with)
		checkWin(t, c.observed(5), winCounts{dup: 1})
	})
	t.Run("three results", func(t *testing.T) {
		c := boundaryCase()
		third := with
		third.Agg.Count = 7
		c.finals = append(c.finals, with, third)
		checkWin(t, c.observed(5), winCounts{dup: 1})
	})
	t.Run("a record late either way counted", func(t *testing.T) {
		c := boundaryCase()
		// v3 (window [0,10)) is late since the start and since the restart at offset 5
		// does not reach back to it.
		c.finals[0].Agg, c.finals[0].Timestamp = WinAgg{2, 4, 3}, 5
		checkWin(t, c.observed(5), winCounts{mismatched: 1})
	})
	t.Run("restart at v3", func(t *testing.T) {
		c := boundaryCase()
		// Stream time since the restart at v3: nothing before it, so v3 may count;
		// v6 comes after v5 (25) and is late either way.
		c.finals[0].Agg, c.finals[0].Timestamp = WinAgg{2, 4, 3}, 5
		r := checkWin(t, c.observed(2), winCounts{})
		if r.MaybeLate != 1 || r.LateDropped != 1 {
			t.Errorf("late %d, maybe late %d; want 1, 1", r.LateDropped, r.MaybeLate)
		}
	})
}

// After a restart at v6, the operator's stream time is only certain to reach 24 (v7,
// of key b): window [10,20) of a closes at 25, so its result may be missing (a run whose
// last incarnation started at v6 and saw only v6 and v7 never closed it); [0,10),
// closed at 15, must still have its result.
func TestWindowedRestartNearTheEnd(t *testing.T) {
	c := boundaryCase()
	c.in = append(c.in, InRecord{Offset: 6, Key: "b", Value: 7, Timestamp: 24})
	c.updates = append(c.updates, WinRecord{Offset: 4, Key: "b", Start: 20, Agg: WinAgg{1, 7, 7}, Timestamp: 24})
	checkWin(t, c.observed(5), winCounts{})
	c.finals = c.finals[:1]
	if r := checkWin(t, c.observed(5), winCounts{}); r.FinalWindows != 1 {
		t.Errorf("final windows %d, want 1", r.FinalWindows)
	}
	c.finals = nil
	checkWin(t, c.observed(5), winCounts{lost: 1})
}

// simulateWindows runs the windowed aggregation as Kafka Streams does, without
// restarts, record by record: its every update and the final results once the stream
// time passes a window's end plus grace (suppression until the window closes).
func simulateWindows(in []InRecord, w WindowParams) (updates, finals []WinRecord) {
	type state struct {
		agg WinAgg
		ts  int64
	}
	windows := map[winKey]*state{}
	var open []winKey
	observed := int64(-1)
	for _, rec := range in {
		observed = max(observed, rec.Timestamp)
		start := rec.Timestamp - rec.Timestamp%w.SizeMs
		if start+w.SizeMs <= observed-w.GraceMs {
			continue // late
		}
		k := winKey{rec.Key, start}
		s := windows[k]
		if s == nil {
			s = &state{ts: -1}
			windows[k] = s
			open = append(open, k)
		}
		s.agg = WinAgg{s.agg.Count + 1, s.agg.Sum + rec.Value, rec.Value}
		s.ts = max(s.ts, rec.Timestamp)
		updates = append(updates, WinRecord{Offset: int64(len(updates)), Key: rec.Key, Start: start, Agg: s.agg, Timestamp: s.ts})
		still := open[:0]
		for _, k := range open {
			if k.start+w.SizeMs+w.GraceMs <= observed {
				s := windows[k]
				finals = append(finals, WinRecord{Offset: int64(len(finals)), Key: k.key, Start: k.start, Agg: s.agg, Timestamp: s.ts})
			} else {
				still = append(still, k)
			}
		}
		open = still
	}
	return updates, finals
}

// The event clock and windows of a run make late records and records out of order
// within grace, and a run without restarts checks clean; doctored, it does not.
func TestWindowedSimulatedRun(t *testing.T) {
	clock, w := TimeFor(4000, 20, 99, time.UnixMilli(1_800_000_000_000))
	rng := rand.New(rand.NewPCG(1, 2))
	var in []InRecord
	outOfOrder := 0
	for seq := int64(1); seq <= 4000; seq++ {
		ts := clock.At(seq)
		if len(in) > 0 && ts < in[len(in)-1].Timestamp {
			outOfOrder++
		}
		in = append(in, InRecord{Offset: seq - 1, Key: KeyName(rng.IntN(20)), Value: seq, Timestamp: ts})
	}
	updates, finals := simulateWindows(in, w)
	o := &Observed{
		Partitions: 1, Input: map[int32][]InRecord{0: in}, Windows: w,
		WinUpdates: map[int32][]WinRecord{0: updates}, WinFinals: map[int32][]WinRecord{0: finals},
	}
	r := checkWin(t, o, winCounts{})
	if r.LateDropped < 20 || r.LateDropped != len(in)-len(updates) || outOfOrder < 1000 || r.FinalWindows != len(finals) || len(finals) < 100 {
		t.Fatalf("late %d (%d records, %d updates), out of order %d, final windows %d (%d results)", r.LateDropped, len(in), len(updates), outOfOrder, r.FinalWindows, len(finals))
	}
	// Doctored: a final result dropped, one repeated, one with a count too many.
	o.WinFinals[0] = slices.Delete(slices.Clone(finals), 10, 11)
	o.WinFinals[0] = append(o.WinFinals[0], finals[20])
	o.WinFinals[0][30].Agg.Count++
	checkWin(t, o, winCounts{dup: 1, lost: 1, mismatched: 1})
}

// An operator-start line an instance logs is parsed back; other lines are not.
func TestParseOperatorStartLine(t *testing.T) {
	line := `{"time":"2026-12-01T05:59:00Z","level":"INFO","msg":"eos-operator-start","instance":"i1#2","task":"0_3","node":"operator-start","partition":3,"offset":1234}`
	p, off, ok := parseOperatorStartLine([]byte(line))
	if !ok || p != 3 || off != 1234 {
		t.Fatalf("got %d %d %v", p, off, ok)
	}
	if _, _, ok := parseOperatorStartLine([]byte(`{"msg":"eos-restore","note":"eos-operator-start"}`)); ok {
		t.Fatal("another line taken for an operator-start line")
	}
}
