//go:build unix

package eos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/eddy-streams/eddy/internal/partition"
)

// The stream–stream join of the test application: the input (left) with the Right
// topic, which the driver writes beside it (RightEvery), an inner join by key within
// Join.DiffMs either way. Each result carries the two values (Update{Input: left,
// Value: right}). The join's grace is longer than the run's event time, so no record
// is ever too late to join and the results are exactly the pairs of same-key records
// at most DiffMs apart, whatever order the task read the two topics in.
const (
	// OutJoins names the join's output topic in Observed.OutputPartitions.
	OutJoins = "joins"
	// RightValueBase is added to a record's sequence number to make the value of the
	// Right record the driver writes after it: unique, and apart from the input's.
	RightValueBase = int64(1) << 40
	// RightEvery: after one input record in RightEvery (chosen by the seed), the
	// driver writes a Right record.
	RightEvery = 4
)

// JoinParams are the join windows of the join, in milliseconds: records join when
// their timestamps are at most DiffMs apart (window.JoinTimeDifference(DiffMs,
// GraceMs)). Zero DiffMs: no join.
type JoinParams struct {
	DiffMs  int64 `json:"diff_ms"`
	GraceMs int64 `json:"grace_ms"`
}

// JoinFor gives the join windows of a run of records over keys with the event clock of
// TimeFor: records of a key join within half the mean gap between them (so a Right
// record joins about one input record), and the grace outlasts the run's event time
// (so none is ever too late).
func JoinFor(records, keys int) JoinParams {
	const step = 10 // TimeFor's
	return JoinParams{DiffMs: max(int64(keys)*step/2, 1), GraceMs: int64(records)*step + time.Hour.Milliseconds()}
}

// WritesRight reports whether the driver writes a Right record after the input record of
// sequence number seq.
func (c EventClock) WritesRight(seq int64) bool {
	return splitmix(c.Seed^splitmix(uint64(seq)^0x726967687421))%RightEvery == 0
}

// JoinRecord is a record of the join's output topic: its key, the two joined values
// and its timestamp (ms).
type JoinRecord struct {
	Offset      int64
	Key         string
	Left, Right int64
	Timestamp   int64
	Bad         string
}

type joinPair struct{ left, right int64 }

// expectJoins recomputes the join: every pair of a left and a right record of the same
// key, in the same partition of the two co-partitioned topics, at most DiffMs apart,
// with the larger of their timestamps.
func expectJoins(o *Observed) map[joinPair]int64 {
	want := map[joinPair]int64{}
	d := o.Join.DiffMs
	for _, p := range sortedPartitions(o.Right) {
		lefts := map[string][]InRecord{}
		for _, l := range o.Input[p] {
			lefts[l.Key] = append(lefts[l.Key], l)
		}
		for _, ls := range lefts {
			sort.SliceStable(ls, func(i, j int) bool { return ls[i].Timestamp < ls[j].Timestamp })
		}
		for _, r := range o.Right[p] {
			ls := lefts[r.Key]
			i := sort.Search(len(ls), func(i int) bool { return ls[i].Timestamp >= r.Timestamp-d })
			for ; i < len(ls) && ls[i].Timestamp <= r.Timestamp+d; i++ {
				want[joinPair{ls[i].Value, r.Value}] = max(ls[i].Timestamp, r.Timestamp)
			}
		}
	}
	return want
}

// checkJoins checks the join's output against its recomputation: each pair once, with
// its key and timestamp, in the partition of its key; no pair that is not one.
func checkJoins(o *Observed, e *expectations, r *Report) {
	const what = OutJoins
	want := expectJoins(o)
	rights := map[int64]InRecord{}
	for _, recs := range o.Right {
		for _, rec := range recs {
			rights[rec.Value] = rec
		}
	}
	parts := o.OutputPartitions[OutJoins]
	seen := map[joinPair]bool{}
	for _, q := range sortedPartitions(o.Joins) {
		for _, rec := range o.Joins[q] {
			if rec.Bad != "" {
				r.Mismatched++
				r.problem(what, "%d/%d: %s", q, rec.Offset, rec.Bad)
				continue
			}
			pair := joinPair{rec.Left, rec.Right}
			ts, ok := want[pair]
			if !ok {
				r.Mismatched++
				l, lok := e.byValue[rec.Left]
				rr, rok := rights[rec.Right]
				why := "no such records"
				switch {
				case lok && rok && (l.key != rr.Key || l.key != rec.Key):
					why = fmt.Sprintf("keys %s and %s", l.key, rr.Key)
				case lok && rok:
					why = fmt.Sprintf("timestamps %d and %d more than %d ms apart", o.Input[l.partition][l.index].Timestamp, rr.Timestamp, o.Join.DiffMs)
				}
				r.problem(what, "%d/%d key %s: %d joined with %d, which do not join (%s)", q, rec.Offset, rec.Key, rec.Left, rec.Right, why)
				continue
			}
			if seen[pair] {
				r.Duplicates++
				r.problem("duplicate", "%s %d/%d key %s: %d joined with %d again", what, q, rec.Offset, rec.Key, rec.Left, rec.Right)
				continue
			}
			seen[pair] = true
			r.JoinResults++
			if l := e.byValue[rec.Left]; l.key != rec.Key || rec.Timestamp != ts || partition.ForKey([]byte(rec.Key), parts) != q {
				r.Mismatched++
				r.problem(what, "%d/%d: %d joined with %d: key %s, timestamp %d; want key %s, timestamp %d, partition %d",
					q, rec.Offset, rec.Left, rec.Right, rec.Key, rec.Timestamp, l.key, ts, partition.ForKey([]byte(l.key), parts))
			}
		}
	}
	for _, pair := range slices.SortedFunc(maps.Keys(want), func(a, b joinPair) int {
		return cmpPair(a, b)
	}) {
		if seen[pair] {
			continue
		}
		r.Lost++
		r.problem("lost", "%s: no result of %d joined with %d (key %s)", what, pair.left, pair.right, e.byValue[pair.left].key)
	}
}

func cmpPair(a, b joinPair) int {
	if c := compareInt64(a.left, b.left); c != 0 {
		return c
	}
	return compareInt64(a.right, b.right)
}

// checkRightAcked checks that every acknowledged Right record is in the Right topic.
func checkRightAcked(o *Observed, r *Report) {
	in := map[int64]InRecord{}
	part := map[int64]int32{}
	for p, recs := range o.Right {
		for _, rec := range recs {
			in[rec.Value], part[rec.Value] = rec, p
		}
	}
	for _, a := range o.AckedRight {
		rec, ok := in[a.Value]
		if !ok || part[a.Value] != a.Partition || rec.Offset != a.Offset || rec.Key != a.Key {
			r.Lost++
			r.problem("lost", "acknowledged right record %d/%d key %s value %d is not in the right topic", a.Partition, a.Offset, a.Key, a.Value)
		}
	}
}
