//go:build unix

package eos

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/eddy-streams/eddy/serde"
)

// The windowed aggregation of the test application: per input key, a tumbling window
// of Windows.SizeMs with Windows.GraceMs of grace, folding the window's records into a
// WinAgg (count, sum of values, last value). Its every update goes to the WinUpdates
// topic; its final results, one per window once the window has closed, to WinFinals.
const (
	// StoreWindow is the window store of the windowed aggregation.
	StoreWindow = "win-agg"
	// OutWinUpdates and OutWinFinals name the windowed output topics in
	// Observed.OutputPartitions.
	OutWinUpdates = "win-updates"
	OutWinFinals  = "win-finals"
	// OperatorStartMsg is the message of the log line an instance writes when a task's
	// windowed operators (re)start: at the first record they process after their Init,
	// with its input partition and offset. Their observed stream time starts over
	// there (Kafka Streams keeps it in memory only: KAFKA-20099's "operator time");
	// the verifier takes each such offset as a point where it may have started over.
	OperatorStartMsg = "eos-operator-start"
)

// WindowParams are the tumbling windows of the windowed aggregation, in milliseconds.
// RetentionMs is its store's retention (stream.Retention); 0 is the DSL's default (size
// plus grace, plus a minute with final results). It decides the store's segment
// interval but no record's lateness, so the verifier does not use it.
type WindowParams struct {
	SizeMs      int64 `json:"size_ms"`
	GraceMs     int64 `json:"grace_ms"`
	RetentionMs int64 `json:"retention_ms,omitempty"`
}

// Size and Grace as durations.
func (w WindowParams) Size() time.Duration  { return time.Duration(w.SizeMs) * time.Millisecond }
func (w WindowParams) Grace() time.Duration { return time.Duration(w.GraceMs) * time.Millisecond }

// Start is the start of the window of a timestamp.
func (w WindowParams) Start(ts int64) int64 { return ts - ts%w.SizeMs }

// EventClock gives each input record its event timestamp, a function of its sequence
// number (the driver's value, 1, 2, 3, ...) and the seed: BaseMs + seq*StepMs, plus a
// jitter below JitterMs (out of order, within grace when JitterMs <= the grace), and
// for LatePermille records in a thousand, set back by up to LateMaxMs (some within
// grace, some late).
type EventClock struct {
	BaseMs       int64  `json:"base_ms"`
	StepMs       int64  `json:"step_ms"`
	JitterMs     int64  `json:"jitter_ms"`
	LatePermille int64  `json:"late_permille"`
	LateMaxMs    int64  `json:"late_max_ms"`
	Seed         uint64 `json:"seed"`
}

// At is the event timestamp (ms) of the record with sequence number seq.
func (c EventClock) At(seq int64) int64 {
	h := splitmix(c.Seed ^ splitmix(uint64(seq)))
	ts := c.BaseMs + seq*c.StepMs
	if c.JitterMs > 0 {
		ts += int64(h % uint64(c.JitterMs))
	}
	h = splitmix(h)
	if c.LatePermille > 0 && int64(h%1000) < c.LatePermille {
		ts -= int64(splitmix(h) % uint64(c.LateMaxMs+1))
	}
	return max(ts, 0)
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// TimeFor derives the event clock and windows of a run of records over keys, written
// now: one record per StepMs of event time (10 ms), windows of about four records per
// key (4*keys*step), a quarter of that as grace, jitter within half the grace, 2% of
// the records set back by up to the size plus twice the grace. The timestamps end
// ten minutes before now: in the past (brokers may refuse future timestamps) and well
// within the topics' retention.
func TimeFor(records, keys int, seed uint64, now time.Time) (EventClock, WindowParams) {
	const step = 10
	size := max(4*int64(keys)*step, 100)
	w := WindowParams{SizeMs: size, GraceMs: size / 4}
	end := now.Add(-10 * time.Minute).UnixMilli()
	c := EventClock{
		BaseMs: end - int64(records+1)*step, StepMs: step, JitterMs: w.GraceMs / 2,
		LatePermille: 20, LateMaxMs: size + 2*w.GraceMs, Seed: seed,
	}
	return c, w
}

// WinAgg is the windowed aggregate: how many records the window holds, the sum of
// their values and the value of the last one. Values are unique, so Last names the
// record of an update and Sum tells which records a final result counted.
type WinAgg struct {
	Count, Sum, Last int64
}

// WinAggSerde writes a WinAgg as 24 bytes: three big-endian int64s.
func WinAggSerde() serde.Serde[WinAgg] {
	return serde.Funcs("eos.WinAgg",
		func(_ string, a WinAgg) ([]byte, error) {
			b := make([]byte, 24)
			binary.BigEndian.PutUint64(b, uint64(a.Count))
			binary.BigEndian.PutUint64(b[8:], uint64(a.Sum))
			binary.BigEndian.PutUint64(b[16:], uint64(a.Last))
			return b, nil
		},
		func(_ string, b []byte) (WinAgg, error) { return DecodeWinAgg(b) })
}

// DecodeWinAgg reads a WinAgg written by WinAggSerde.
func DecodeWinAgg(b []byte) (WinAgg, error) {
	if len(b) != 24 {
		return WinAgg{}, fmt.Errorf("eos: windowed aggregate of %d bytes, want 24", len(b))
	}
	return WinAgg{
		Count: int64(binary.BigEndian.Uint64(b)),
		Sum:   int64(binary.BigEndian.Uint64(b[8:])),
		Last:  int64(binary.BigEndian.Uint64(b[16:])),
	}, nil
}

// WinRecord is a record of a windowed output topic: the key and window start of its
// TimeWindowedSerde key, its aggregate and its timestamp (ms).
type WinRecord struct {
	Offset    int64
	Key       string
	Start     int64
	Agg       WinAgg
	Timestamp int64
	Bad       string
}

// WindowSummary says what the verifier found of the windowed aggregation (none of it is
// an anomaly): the updates and final results it checked, the input records dropped as
// late, those it takes as maybe late (see OperatorStartMsg) and the extra final results
// these made.
func (r *Report) WindowSummary() string {
	return fmt.Sprintf("windows: updates=%d final-results=%d late=%d operator-starts=%d maybe-late=%d maybe-late-results=%d join-results=%d",
		r.WindowUpdates, r.FinalWindows, r.LateDropped, r.OperatorStarts, r.MaybeLate, r.MaybeLateResults, r.JoinResults)
}

// lateness is what the verifier knows of whether the windowed aggregation accepted an
// input record.
type lateness int8

const (
	onTime lateness = iota
	late
	// maybeLate: late for the operator's stream time since the partition's start, on
	// time for its stream time since a restart the instances logged; the output says
	// which happened.
	maybeLate
)

// winKey is a key's window.
type winKey struct {
	key   string
	start int64
}

type winMember struct {
	value, ts int64
	index     int
	class     lateness
}

// winExpect is the recomputation of the windowed aggregation.
type winExpect struct {
	windows map[winKey][]winMember // in input order
	part    map[winKey]int32
	class   map[int64]lateness
	// closedBy is the least stream time the final results' operator certainly
	// reached on each input partition (a window closed by it must have its final
	// result); reached the most it can have reached (a window not closed by it must
	// not).
	closedBy, reached map[int32]int64
}

// expectWindows recomputes the windowed aggregation from the input: a record is late
// (dropped) when its window's end plus the grace is at most the operator's observed
// stream time, the largest timestamp before it in its partition (Kafka Streams'
// KStreamWindowAggregate: closeTime = observed - grace; dropped if end <= closeTime).
// The operator's stream time starts over where a task restarted (Observed.
// OperatorStarts): a record late for the stream time since the partition's start but
// on time for the one since the latest such restart at or before it may be either.
func expectWindows(o *Observed, r *Report) *winExpect {
	w := o.Windows
	we := &winExpect{
		windows: map[winKey][]winMember{}, part: map[winKey]int32{}, class: map[int64]lateness{},
		closedBy: map[int32]int64{}, reached: map[int32]int64{},
	}
	if w.SizeMs <= 0 {
		return we
	}
	for _, p := range sortedPartitions(o.Input) {
		recs := o.Input[p]
		restart := map[int]bool{0: true}
		for _, off := range o.OperatorStarts[p] {
			if i, _ := slices.BinarySearchFunc(recs, off, func(r InRecord, off int64) int { return compareInt64(r.Offset, off) }); i < len(recs) {
				restart[i] = true
				r.OperatorStarts++
			}
		}
		observed, sinceRestart := int64(-1), int64(-1)
		lastRestart := 0
		for i, rec := range recs {
			if restart[i] {
				sinceRestart, lastRestart = -1, i
			}
			start := w.Start(rec.Timestamp)
			end := start + w.SizeMs
			c := onTime
			switch {
			case end+w.GraceMs > observed:
			case end+w.GraceMs > sinceRestart:
				c = maybeLate
				r.MaybeLate++
			default:
				c = late
				r.LateDropped++
			}
			observed, sinceRestart = max(observed, rec.Timestamp), max(sinceRestart, rec.Timestamp)
			we.class[rec.Value] = c
			k := winKey{rec.Key, start}
			we.windows[k] = append(we.windows[k], winMember{value: rec.Value, ts: rec.Timestamp, index: i, class: c})
			we.part[k] = p
		}
		// The operator processed the partition's last record in an incarnation that
		// started at a restart at or before it: its stream time reached at least the
		// largest timestamp of the certainly accepted records since the latest restart.
		closed := int64(-1)
		for _, rec := range recs[lastRestart:] {
			if we.class[rec.Value] == onTime {
				closed = max(closed, rec.Timestamp)
			}
		}
		we.closedBy[p], we.reached[p] = closed, observed
	}
	return we
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func sortedWindows[V any](m map[winKey]V) []winKey {
	return slices.SortedFunc(maps.Keys(m), func(a, b winKey) int {
		if a.key != b.key {
			if a.key < b.key {
				return -1
			}
			return 1
		}
		return compareInt64(a.start, b.start)
	})
}

// winRef finds the input record an update names (by Last) and checks that it is of the
// update's key and window.
func (we *winExpect) winRef(e *expectations, o *Observed, rec WinRecord) (inRef, int64, bool) {
	ref, ok := e.byValue[rec.Agg.Last]
	if !ok || ref.key != rec.Key {
		return ref, 0, false
	}
	ts := o.Input[ref.partition][ref.index].Timestamp
	return ref, ts, o.Windows.Start(ts) == rec.Start
}

// checkWinUpdates checks the windowed aggregation's every update: one per accepted input
// record (none for a late one), in input order per window, each with the count, sum and
// timestamp (the largest of the window's records so far) of the window's accepted
// records up to it.
func checkWinUpdates(o *Observed, e *expectations, we *winExpect, r *Report) {
	const what = OutWinUpdates
	seen := map[int64]WinRecord{}
	order := map[winKey][]int{}
	where := map[winKey]int32{}
	outs := o.WinUpdates
	for _, q := range sortedPartitions(outs) {
		for _, rec := range outs[q] {
			if rec.Bad != "" {
				r.Mismatched++
				r.problem(what, "%d/%d: %s", q, rec.Offset, rec.Bad)
				continue
			}
			ref, _, ok := we.winRef(e, o, rec)
			if !ok {
				r.Mismatched++
				r.problem(what, "%d/%d key %s window %d: input value %d is not an input record of that key and window", q, rec.Offset, rec.Key, rec.Start, rec.Agg.Last)
				continue
			}
			k := winKey{rec.Key, rec.Start}
			if p, ok := where[k]; ok && p != q {
				r.Mismatched++
				r.problem(what, "%d/%d key %s window %d: updates of the window in partitions %d and %d", q, rec.Offset, rec.Key, rec.Start, p, q)
				continue
			}
			where[k] = q
			if _, dup := seen[rec.Agg.Last]; dup {
				r.Duplicates++
				r.problem("duplicate", "%s %d/%d key %s window %d: input value %d again", what, q, rec.Offset, rec.Key, rec.Start, rec.Agg.Last)
				continue
			}
			seen[rec.Agg.Last] = rec
			r.WindowUpdates++
			if we.class[rec.Agg.Last] == late {
				r.Mismatched++
				r.problem(what, "%d/%d key %s window %d: input value %d is late (its window closed before it) but was counted", q, rec.Offset, rec.Key, rec.Start, rec.Agg.Last)
				continue
			}
			order[k] = append(order[k], ref.index)
		}
	}
	for _, k := range sortedWindows(we.windows) {
		var count, sum int64
		maxTs := int64(-1)
		for _, m := range we.windows[k] {
			out, ok := seen[m.value]
			if m.class == late || (m.class == maybeLate && !ok) {
				continue
			}
			count, sum, maxTs = count+1, sum+m.value, max(maxTs, m.ts)
			if !ok {
				r.Lost++
				r.problem("lost", "%s: no update for input value %d (partition %d, key %s, window %d)", what, m.value, we.part[k], k.key, k.start)
				continue
			}
			if out.Agg.Count != count || out.Agg.Sum != sum || out.Timestamp != maxTs {
				r.Mismatched++
				r.problem(what, "%d key %s window %d after input %d: count %d sum %d timestamp %d, recomputed %d %d %d",
					out.Offset, k.key, k.start, m.value, out.Agg.Count, out.Agg.Sum, out.Timestamp, count, sum, maxTs)
			}
		}
	}
	for _, k := range sortedWindows(order) {
		if n := outOfOrder(order[k]); n > 0 {
			r.Mismatched += n
			r.problem(what+"-order", "key %s window %d: %d updates out of input order", k.key, k.start, n)
		}
	}
}

// maxAmbiguous bounds the maybe-late records of one window whose subsets a final result
// is matched against.
const maxAmbiguous = 12

// checkWinFinals checks the final results (suppressed until the window closes): for
// every window whose end plus grace the operator's stream time certainly reached,
// exactly one result, with the count, sum, last value and timestamp of the window's
// accepted records; none for a window it cannot have reached; at most one for a window
// in between. A window with maybe-late records may show any subset of them, and as many
// distinct results as it has such records plus one (a restarted operator accepting one
// of them after the window's result went out, as Kafka Streams would).
func checkWinFinals(o *Observed, we *winExpect, r *Report) {
	const what = OutWinFinals
	emitted := map[winKey][]WinRecord{}
	where := map[winKey]int32{}
	for _, q := range sortedPartitions(o.WinFinals) {
		for _, rec := range o.WinFinals[q] {
			if rec.Bad != "" {
				r.Mismatched++
				r.problem(what, "%d/%d: %s", q, rec.Offset, rec.Bad)
				continue
			}
			k := winKey{rec.Key, rec.Start}
			if p, ok := where[k]; ok && p != q {
				r.Mismatched++
				r.problem(what, "%d/%d key %s window %d: results of the window in partitions %d and %d", q, rec.Offset, rec.Key, rec.Start, p, q)
				continue
			}
			where[k] = q
			emitted[k] = append(emitted[k], rec)
		}
	}
	keys := map[winKey]bool{}
	for k := range we.windows {
		keys[k] = true
	}
	for k := range emitted {
		keys[k] = true
	}
	for _, k := range sortedWindows(keys) {
		outs := emitted[k]
		members := we.windows[k]
		var sure []winMember
		var maybe []winMember
		for _, m := range members {
			switch m.class {
			case onTime:
				sure = append(sure, m)
			case maybeLate:
				maybe = append(maybe, m)
			}
		}
		if len(sure) == 0 && len(maybe) == 0 {
			for _, out := range outs {
				r.Mismatched++
				r.problem(what, "%d key %s window %d: a result (count %d) for a window no accepted input record is in", out.Offset, k.key, k.start, out.Agg.Count)
			}
			continue
		}
		p := we.part[k]
		closeAt := k.start + o.Windows.SizeMs + o.Windows.GraceMs
		mustEmit := closeAt <= we.closedBy[p] && len(sure) > 0
		if mustEmit {
			r.FinalWindows++
		}
		if closeAt > we.reached[p] {
			for _, out := range outs {
				r.Mismatched++
				r.problem(what, "%d key %s window %d: a result before the window closed (it closes at %d, the partition's stream time ended at %d)", out.Offset, k.key, k.start, closeAt, we.reached[p])
			}
			continue
		}
		if len(outs) == 0 {
			if mustEmit {
				r.Lost++
				r.problem("lost", "%s: no final result for key %s window %d (%d records, closed at %d, stream time reached at least %d)", what, k.key, k.start, len(sure), closeAt, we.closedBy[p])
			}
			continue
		}
		if len(maybe) > maxAmbiguous {
			maybe = maybe[:maxAmbiguous]
		}
		distinct := map[WinAgg]bool{}
		for i, out := range outs {
			if distinct[out.Agg] {
				r.Duplicates++
				r.problem("duplicate", "%s %d key %s window %d: the result (count %d) again", what, out.Offset, k.key, k.start, out.Agg.Count)
				continue
			}
			if i > len(maybe) {
				r.Duplicates++
				r.problem("duplicate", "%s %d key %s window %d: result %d of the window (count %d)", what, out.Offset, k.key, k.start, i+1, out.Agg.Count)
				continue
			}
			distinct[out.Agg] = true
			if i > 0 {
				r.MaybeLateResults++
			}
			if !matchesSubset(sure, maybe, out) {
				want := aggregate(sure, nil, 0)
				r.Mismatched++
				r.problem(what, "%d key %s window %d: count %d sum %d last %d timestamp %d, recomputed %d %d %d %d (%d maybe-late records)",
					out.Offset, k.key, k.start, out.Agg.Count, out.Agg.Sum, out.Agg.Last, out.Timestamp, want.agg.Count, want.agg.Sum, want.agg.Last, want.ts, len(maybe))
			}
		}
	}
}

type winResult struct {
	agg WinAgg
	ts  int64
}

// aggregate is the result of the records sure plus those of maybe selected by the bits
// of mask, in input order.
func aggregate(sure, maybe []winMember, mask uint) winResult {
	all := slices.Clone(sure)
	for i, m := range maybe {
		if mask&(1<<i) != 0 {
			all = append(all, m)
		}
	}
	slices.SortFunc(all, func(a, b winMember) int { return a.index - b.index })
	res := winResult{ts: -1}
	for _, m := range all {
		res.agg.Count++
		res.agg.Sum += m.value
		res.agg.Last = m.value
		res.ts = max(res.ts, m.ts)
	}
	return res
}

func matchesSubset(sure, maybe []winMember, out WinRecord) bool {
	for mask := uint(0); mask < 1<<len(maybe); mask++ {
		if res := aggregate(sure, maybe, mask); res.agg == out.Agg && res.ts == out.Timestamp && res.agg.Count > 0 {
			return true
		}
	}
	return false
}
