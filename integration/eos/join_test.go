//go:build unix

package eos

import (
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/partition"
)

// Join windows of 5 ms either way. Right r1 (a, 15) joins v1 (a, 10) and v2 (a, 20);
// r2 (a, 25) joins v2, exactly 5 ms before it, not v4 (a, 31), 6 ms after; r3 (b, 30)
// joins nothing (v3 of b is at 12).
func joinCase() *Observed {
	in := func(off int64, key string, v, ts int64) InRecord {
		return InRecord{Offset: off, Key: key, Value: v, Timestamp: ts}
	}
	r1, r2, r3 := RightValueBase+1, RightValueBase+2, RightValueBase+3
	out := func(off, l, r, ts int64) JoinRecord {
		return JoinRecord{Offset: off, Key: "a", Left: l, Right: r, Timestamp: ts}
	}
	q := partition.ForKey([]byte("a"), 1)
	return &Observed{
		Partitions:       1,
		Input:            map[int32][]InRecord{0: {in(0, "a", 1, 10), in(1, "a", 2, 20), in(2, "b", 3, 12), in(3, "a", 4, 31)}},
		Right:            map[int32][]InRecord{0: {in(0, "a", r1, 15), in(1, "a", r2, 25), in(2, "b", r3, 30)}},
		AckedRight:       []Acked{{0, 0, "a", r1}, {0, 1, "a", r2}, {0, 2, "b", r3}},
		Join:             JoinParams{DiffMs: 5, GraceMs: 1000},
		Joins:            map[int32][]JoinRecord{q: {out(0, 1, r1, 15), out(1, 2, r1, 20), out(2, 2, r2, 25)}},
		OutputPartitions: map[string]int32{OutJoins: 1},
	}
}

func checkJoin(t *testing.T, o *Observed, want winCounts) *Report {
	t.Helper()
	r := &Report{}
	e := expect(o, r)
	checkRightAcked(o, r)
	checkJoins(o, e, r)
	if got := (winCounts{r.Duplicates, r.Lost, r.Mismatched}); got != want {
		t.Errorf("got %+v, want %+v; problems:\n%s", got, want, strings.Join(r.Problems, "\n"))
	}
	return r
}

func TestJoinRecomputation(t *testing.T) {
	if r := checkJoin(t, joinCase(), winCounts{}); r.JoinResults != 3 {
		t.Errorf("join results %d, want 3", r.JoinResults)
	}
	doctor := func(name string, want winCounts, fn func(o *Observed)) {
		t.Run(name, func(t *testing.T) {
			o := joinCase()
			fn(o)
			checkJoin(t, o, want)
		})
	}
	doctor("duplicate result", winCounts{dup: 1}, func(o *Observed) { o.Joins[0] = append(o.Joins[0], o.Joins[0][1]) })
	doctor("lost result at the window's edge", winCounts{lost: 1}, func(o *Observed) { o.Joins[0] = o.Joins[0][:2] })
	doctor("records too far apart joined", winCounts{mismatched: 1}, func(o *Observed) {
		o.Joins[0] = append(o.Joins[0], JoinRecord{Offset: 3, Key: "a", Left: 4, Right: RightValueBase + 2, Timestamp: 31})
	})
	doctor("records of two keys joined", winCounts{mismatched: 1}, func(o *Observed) {
		o.Joins[0] = append(o.Joins[0], JoinRecord{Offset: 3, Key: "b", Left: 3, Right: RightValueBase + 1, Timestamp: 15})
	})
	doctor("wrong timestamp", winCounts{mismatched: 1}, func(o *Observed) { o.Joins[0][1].Timestamp = 15 })
	doctor("acknowledged right record missing", winCounts{lost: 1}, func(o *Observed) {
		// r1 is not in the topic (nor its results): the driver's acknowledgement of it
		// is reported.
		o.Right[0] = slices.Delete(o.Right[0], 0, 1)
		o.Joins[0] = o.Joins[0][2:]
	})
}
