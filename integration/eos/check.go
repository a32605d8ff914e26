//go:build unix

package eos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/internal/partition"
)

// InRecord is a record of the input topic.
type InRecord struct {
	Offset int64
	Key    string
	Value  int64
	// Timestamp is the record's timestamp, ms since the epoch.
	Timestamp int64
}

// OutRecord is a record of an output topic. For the echo topic Input and Value are both
// the record's value; for an aggregate, the Update it carries. Bad says why the record
// could not be decoded ("" when it could).
type OutRecord struct {
	Offset int64
	Key    string
	Input  int64
	Value  int64
	Bad    string
}

// ChangeRecord is a changelog record: a store's new value of a key, or a tombstone.
type ChangeRecord struct {
	Offset    int64
	Key       string
	Value     int64
	Tombstone bool
	Bad       string
}

// PartitionEnd is where a partition ends: its log start offset, last stable offset
// (the end for read_committed readers) and high-water mark.
type PartitionEnd struct {
	Topic     string
	Partition int32
	Start     int64
	Stable    int64
	High      int64
}

// RestoreCheck pairs a store restore an instance reported right after it was restarted
// from a SIGKILL with the checkpoint its state dir held when it was killed.
type RestoreCheck struct {
	Instance   string
	Checkpoint int64
	Event      RestoreEvent
	// Standby: the restarted process was assigned the task as a standby replica
	// before the restore (NumStandbyReplicas, or a warm-up replica, which eddy assigns
	// whenever a task's freshest copy is elsewhere).
	Standby bool
}

// Observed is everything the verifier looks at, read back after a run.
type Observed struct {
	// Standbys is the instances' NumStandbyReplicas: with standbys, a killed
	// instance's state dir may be read on by a standby before its restarted process
	// runs the task (checkRestores).
	Standbys int
	// Partitions of the input topic; Buckets of the repartition hop.
	Partitions int32
	Buckets    int
	// Input is the input topic, per partition, in offset order; Acked what the driver
	// was told was written.
	Input map[int32][]InRecord
	Acked []Acked
	// Echo is the echo topic, per partition, in offset order (read_committed).
	Echo map[int32][]OutRecord
	// Outputs are the aggregate topics by store name (StoreSum, ..., StoreBucketCount),
	// per partition, in offset order (read_committed).
	Outputs map[string]map[int32][]OutRecord
	// OutputPartitions are the partition counts of the echo topic ("echo") and of the
	// aggregate topics (by store name); ChangelogPartitions of the changelogs (by
	// store), which is also the task count of the store's sub-topology.
	OutputPartitions    map[string]int32
	ChangelogPartitions map[string]int32
	// Changelogs are the changelog topics by store, per partition (read_committed).
	Changelogs map[string]map[int32][]ChangeRecord
	// Ends of every output, repartition and changelog partition.
	Ends []PartitionEnd
	// Snapshots are the stores in the instances' state dirs after they stopped.
	Snapshots []StoreSnapshot
	// Restores are the restores to check for "only the tail".
	Restores []RestoreCheck
	// OffsetCommits are the group's committed offsets of the input and repartition
	// topics, in the order of the __consumer_offsets log.
	OffsetCommits []OffsetCommit
	// Windows are the windowed aggregation's windows; WinUpdates its every update and
	// WinFinals its final results, per partition, in offset order (read_committed);
	// nil when the application has no such output.
	Windows    WindowParams
	WinUpdates map[int32][]WinRecord
	WinFinals  map[int32][]WinRecord
	// OperatorStarts are, per input partition, the offsets at which the instances
	// logged that a task's windowed operators started (OperatorStartMsg).
	OperatorStarts map[int32][]int64
	// Right is the join's right topic, per partition, in offset order, and AckedRight
	// what the driver was told was written to it; Joins the join's output (nil when
	// the application has no join) and Join its windows.
	Right      map[int32][]InRecord
	AckedRight []Acked
	Joins      map[int32][]JoinRecord
	Join       JoinParams
	// Postgres is what the PostgreSQL target's tables hold (nil: no such target).
	Postgres *PGObserved
}

// OffsetCommit is one committed offset as the __consumer_offsets log holds it.
type OffsetCommit struct {
	LogPartition int32
	LogOffset    int64
	Topic        string
	Partition    int32
	Offset       int64
	Time         time.Time
}

// Report is the verifier's finding.
type Report struct {
	Records int
	// Duplicates counts output records that repeat an input record's effect already
	// seen in the same output (the echo topic and each aggregate topic count apart).
	Duplicates int
	// Lost counts input records missing from an output (per output), and acknowledged
	// records missing from the input topic.
	Lost int
	// Hanging counts output, repartition and changelog partitions whose last stable
	// offset is below their high-water mark: a transaction left open.
	Hanging int
	// Mismatched counts records whose value differs from its recomputation from the
	// input, echo records out of order, records no input explains, store keys that
	// differ from their changelog or from the recomputation, and restores after a
	// SIGKILL that did not start at the state dir's checkpoint.
	Mismatched int
	// TailRestores is the number of restores checked for "only the tail".
	TailRestores int
	// TrimmedRestores counts restores after SIGKILL of window stores whose changelog had
	// been trimmed past the state dir's checkpoint (restored from the log start).
	TrimmedRestores int
	// OffsetRegressions counts committed offsets below the one committed before them
	// for the same partition: the group resumed below what it had committed. Not an
	// output anomaly by itself (the duplicates it causes are counted as such), but
	// the cause to look at: a broker that answered OffsetFetch with stale offsets, or
	// a runtime that committed an old position.
	OffsetRegressions int
	// WindowUpdates counts the windowed aggregation's updates checked; LateDropped
	// the input records the windowed aggregation must drop as late;
	// MaybeLate those it may drop or not, depending on where an operator restarted;
	// FinalWindows the windows that must have a final result; MaybeLateResults the
	// extra final results of windows with maybe-late records (a restarted operator
	// accepting such a record after the window's result went out, as Kafka Streams'
	// would). None of these is an anomaly.
	WindowUpdates    int
	OperatorStarts   int
	JoinResults      int
	LateDropped      int
	MaybeLate        int
	FinalWindows     int
	MaybeLateResults int
	// PGRows counts the PostgreSQL target's rows checked; PGPrepared the prepared
	// transactions of the application left behind (pg_prepared_xacts), an anomaly.
	PGRows     int
	PGPrepared int
	// Problems describe the first anomalies of each kind.
	Problems []string
	counts   map[string]int
}

// maxProblemsPerKind bounds the problems kept per kind.
const maxProblemsPerKind = 10

func (r *Report) problem(kind, format string, args ...any) {
	if r.counts == nil {
		r.counts = map[string]int{}
	}
	r.counts[kind]++
	if r.counts[kind] <= maxProblemsPerKind {
		r.Problems = append(r.Problems, kind+": "+fmt.Sprintf(format, args...))
	} else if r.counts[kind] == maxProblemsPerKind+1 {
		r.Problems = append(r.Problems, kind+": (more of this kind not shown)")
	}
}

// OK reports whether nothing was duplicated, lost, left hanging or mismatched.
func (r *Report) OK() bool {
	return r.Duplicates == 0 && r.Lost == 0 && r.Hanging == 0 && r.Mismatched == 0 && r.PGPrepared == 0
}

// inRef locates an input value.
type inRef struct {
	partition int32
	index     int // position among the records of its partition
	key       string
}

// expectations are what the verifier recomputes from the input.
type expectations struct {
	byValue map[int64]inRef
	// after[store][v] is the aggregate of v's key right after v (sum, count, max).
	after map[string]map[int64]int64
	// final[store][task partition][key] is the store's final content.
	final map[string]map[int32]map[string]int64
}

// Check verifies an observed run and reports every anomaly it finds.
func Check(o *Observed) *Report {
	r := &Report{}
	e := expect(o, r)
	checkAcked(o, e, r)
	checkEcho(o, e, r)
	for _, s := range []string{StoreSum, StoreCount, StoreMax} {
		checkAggregate(o, e, r, s)
	}
	checkBuckets(o, e, r)
	we := expectWindows(o, r)
	if o.WinUpdates != nil {
		checkWinUpdates(o, e, we, r)
	}
	if o.WinFinals != nil {
		checkWinFinals(o, we, r)
	}
	if o.Right != nil {
		checkRightAcked(o, r)
	}
	if o.Joins != nil {
		checkJoins(o, e, r)
	}
	if o.Postgres != nil {
		checkPostgres(o, e, we, r)
	}
	checkStores(o, e, r)
	checkRestores(o, r)
	checkEnds(o, r)
	checkOffsetCommits(o, r)
	return r
}

func checkOffsetCommits(o *Observed, r *Report) {
	type tp struct {
		topic string
		p     int32
	}
	last := map[tp]OffsetCommit{}
	for _, c := range o.OffsetCommits {
		k := tp{c.Topic, c.Partition}
		if prev, ok := last[k]; ok && c.Offset < prev.Offset {
			r.OffsetRegressions++
			r.problem("offset-regression", "committed offset of %s/%d went back from %d (%s, %s-%d@%d) to %d (%s, %s-%d@%d)",
				c.Topic, c.Partition, prev.Offset, prev.Time.Format("15:04:05.000"), offsetsTopic, prev.LogPartition, prev.LogOffset,
				c.Offset, c.Time.Format("15:04:05.000"), offsetsTopic, c.LogPartition, c.LogOffset)
		}
		last[k] = c
	}
}

func sortedPartitions[T any](m map[int32][]T) []int32 {
	return slices.Sorted(maps.Keys(m))
}

func expect(o *Observed, r *Report) *expectations {
	e := &expectations{
		byValue: map[int64]inRef{},
		after:   map[string]map[int64]int64{StoreSum: {}, StoreCount: {}, StoreMax: {}},
		final:   map[string]map[int32]map[string]int64{},
	}
	for _, s := range Stores() {
		e.final[s] = map[int32]map[string]int64{}
	}
	set := func(store string, p int32, key string, v int64) {
		m := e.final[store][p]
		if m == nil {
			m = map[string]int64{}
			e.final[store][p] = m
		}
		m[key] = v
	}
	repParts := o.ChangelogPartitions[StoreBucketCount]
	if repParts == 0 {
		repParts = o.Partitions
	}
	for _, p := range sortedPartitions(o.Input) {
		for i, rec := range o.Input[p] {
			if prev, dup := e.byValue[rec.Value]; dup {
				r.problem("input", "value %d is in the input twice (partition %d and %d): values must be unique", rec.Value, prev.partition, p)
				r.Mismatched++
				continue
			}
			e.byValue[rec.Value] = inRef{partition: p, index: i, key: rec.Key}
			sum := e.final[StoreSum][p][rec.Key] + rec.Value
			count := e.final[StoreCount][p][rec.Key] + 1
			mx, seen := e.final[StoreMax][p][rec.Key]
			if !seen || rec.Value > mx {
				mx = rec.Value
			}
			set(StoreSum, p, rec.Key, sum)
			set(StoreCount, p, rec.Key, count)
			set(StoreMax, p, rec.Key, mx)
			e.after[StoreSum][rec.Value] = sum
			e.after[StoreCount][rec.Value] = count
			e.after[StoreMax][rec.Value] = mx
			if o.Buckets > 0 {
				b := BucketKey(rec.Value, o.Buckets)
				bp := partition.ForKey([]byte(b), repParts)
				set(StoreBucketCount, bp, b, e.final[StoreBucketCount][bp][b]+1)
			}
		}
	}
	r.Records = len(e.byValue)
	return e
}

func checkAcked(o *Observed, e *expectations, r *Report) {
	for _, a := range o.Acked {
		ref, ok := e.byValue[a.Value]
		if !ok || ref.partition != a.Partition || ref.key != a.Key || o.Input[a.Partition][ref.index].Offset != a.Offset {
			r.Lost++
			r.problem("lost", "acknowledged input record %d/%d key %s value %d is not in the input topic", a.Partition, a.Offset, a.Key, a.Value)
		}
	}
}

// lisLen is the length of the longest strictly increasing subsequence of xs.
func lisLen(xs []int) int {
	var tails []int
	for _, x := range xs {
		i := sort.SearchInts(tails, x)
		if i == len(tails) {
			tails = append(tails, x)
		} else {
			tails[i] = x
		}
	}
	return len(tails)
}

// outOfOrder counts the records of a sequence of input positions that are not where
// the input order puts them: those outside a longest increasing subsequence.
func outOfOrder(xs []int) int { return len(xs) - lisLen(xs) }

func checkEcho(o *Observed, e *expectations, r *Report) {
	seen := map[int64]bool{}
	for _, p := range sortedPartitions(o.Echo) {
		var order []int
		for _, rec := range o.Echo[p] {
			if rec.Bad != "" {
				r.Mismatched++
				r.problem("echo", "%d/%d: %s", p, rec.Offset, rec.Bad)
				continue
			}
			ref, ok := e.byValue[rec.Input]
			if !ok || ref.key != rec.Key || ref.partition != p {
				r.Mismatched++
				r.problem("echo", "%d/%d key %s value %d: no such input record in partition %d", p, rec.Offset, rec.Key, rec.Input, p)
				continue
			}
			if seen[rec.Input] {
				r.Duplicates++
				r.problem("duplicate", "echo %d/%d: value %d again", p, rec.Offset, rec.Input)
				continue
			}
			seen[rec.Input] = true
			order = append(order, ref.index)
		}
		if n := outOfOrder(order); n > 0 {
			r.Mismatched += n
			r.problem("echo-order", "partition %d: %d records out of input order", p, n)
		}
	}
	lost(e, seen, r, "echo")
}

// lost counts the input values an output never showed.
func lost(e *expectations, seen map[int64]bool, r *Report, what string) {
	if len(seen) == len(e.byValue) {
		return
	}
	var missing []int64
	for v := range e.byValue {
		if !seen[v] {
			missing = append(missing, v)
		}
	}
	slices.Sort(missing)
	r.Lost += len(missing)
	for _, v := range missing {
		ref := e.byValue[v]
		r.problem("lost", "%s: no record of input value %d (partition %d, key %s)", what, v, ref.partition, ref.key)
	}
}

func checkAggregate(o *Observed, e *expectations, r *Report, store string) {
	parts := o.OutputPartitions[store]
	seen := map[int64]bool{}
	order := map[string][]int{}
	outs := o.Outputs[store]
	for _, q := range sortedPartitions(outs) {
		for _, rec := range outs[q] {
			if rec.Bad != "" {
				r.Mismatched++
				r.problem(store, "%d/%d: %s", q, rec.Offset, rec.Bad)
				continue
			}
			ref, ok := e.byValue[rec.Input]
			if !ok || ref.key != rec.Key {
				r.Mismatched++
				r.problem(store, "%d/%d key %s: input value %d is not an input record of that key", q, rec.Offset, rec.Key, rec.Input)
				continue
			}
			if want := partition.ForKey([]byte(rec.Key), parts); want != q {
				r.Mismatched++
				r.problem(store, "%d/%d key %s: in partition %d, want %d", q, rec.Offset, rec.Key, q, want)
				continue
			}
			if seen[rec.Input] {
				r.Duplicates++
				r.problem("duplicate", "%s %d/%d key %s: input value %d again", store, q, rec.Offset, rec.Key, rec.Input)
				continue
			}
			seen[rec.Input] = true
			if want := e.after[store][rec.Input]; rec.Value != want {
				r.Mismatched++
				r.problem(store, "%d/%d key %s after input %d: %s %d, recomputed %d", q, rec.Offset, rec.Key, rec.Input, store, rec.Value, want)
			}
			k := fmt.Sprintf("%d/%s", ref.partition, rec.Key)
			order[k] = append(order[k], ref.index)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(order)) {
		if n := outOfOrder(order[k]); n > 0 {
			r.Mismatched += n
			r.problem(store+"-order", "key %s: %d updates out of input order", k, n)
		}
	}
	lost(e, seen, r, store)
}

// checkBuckets checks the counts after the repartition hop. Records of one bucket come
// from several input partitions, interleaved as the upstream tasks committed, so the
// order across input partitions is free; within one input partition it must hold, and
// each bucket's counts must go 1, 2, 3, ... in output order.
func checkBuckets(o *Observed, e *expectations, r *Report) {
	store := StoreBucketCount
	parts := o.OutputPartitions[store]
	seen := map[int64]bool{}
	last := map[string]int64{}
	order := map[string][]int{}
	outs := o.Outputs[store]
	for _, q := range sortedPartitions(outs) {
		for _, rec := range outs[q] {
			if rec.Bad != "" {
				r.Mismatched++
				r.problem(store, "%d/%d: %s", q, rec.Offset, rec.Bad)
				continue
			}
			ref, ok := e.byValue[rec.Input]
			if !ok || o.Buckets < 1 || BucketKey(rec.Input, o.Buckets) != rec.Key {
				r.Mismatched++
				r.problem(store, "%d/%d bucket %s: input value %d is not an input record of that bucket", q, rec.Offset, rec.Key, rec.Input)
				continue
			}
			if want := partition.ForKey([]byte(rec.Key), parts); want != q {
				r.Mismatched++
				r.problem(store, "%d/%d bucket %s: in partition %d, want %d", q, rec.Offset, rec.Key, q, want)
				continue
			}
			if seen[rec.Input] {
				r.Duplicates++
				r.problem("duplicate", "%s %d/%d bucket %s: input value %d again", store, q, rec.Offset, rec.Key, rec.Input)
				continue
			}
			seen[rec.Input] = true
			if rec.Value != last[rec.Key]+1 {
				r.Mismatched++
				r.problem(store, "%d/%d bucket %s after input %d: count %d follows %d", q, rec.Offset, rec.Key, rec.Input, rec.Value, last[rec.Key])
			}
			last[rec.Key] = rec.Value
			k := fmt.Sprintf("%s from input partition %d", rec.Key, ref.partition)
			order[k] = append(order[k], ref.index)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(order)) {
		if n := outOfOrder(order[k]); n > 0 {
			r.Mismatched += n
			r.problem(store+"-order", "bucket %s: %d updates out of input order", k, n)
		}
	}
	lost(e, seen, r, store)
}

// diffMaps counts the keys whose values differ between got and want, describing the
// first few.
func diffMaps(got, want map[string]int64) (n int, sample string) {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s missing (want %d)", k, want[k]))
		} else if g != want[k] {
			diffs = append(diffs, fmt.Sprintf("%s=%d (want %d)", k, g, want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s=%d (want none)", k, got[k]))
		}
	}
	if len(diffs) > 3 {
		diffs = append(diffs[:3], "...")
	}
	return len(diffs), strings.Join(diffs, ", ")
}

// replayer applies a changelog partition's records in order.
type replayer struct {
	recs []ChangeRecord
	pos  int
	m    map[string]int64
}

// upTo applies the records below offset and returns the content (shared: copy it to
// keep it).
func (rp *replayer) upTo(offset int64) map[string]int64 {
	for rp.pos < len(rp.recs) && rp.recs[rp.pos].Offset < offset {
		c := rp.recs[rp.pos]
		rp.pos++
		if c.Bad != "" {
			continue
		}
		if c.Tombstone {
			delete(rp.m, c.Key)
		} else {
			rp.m[c.Key] = c.Value
		}
	}
	return rp.m
}

func checkStores(o *Observed, e *expectations, r *Report) {
	type taskStore struct {
		store string
		part  int32
	}
	snaps := map[taskStore][]StoreSnapshot{}
	for _, s := range o.Snapshots {
		var sub int
		var p int32
		if _, err := fmt.Sscanf(s.Task, "%d_%d", &sub, &p); err != nil {
			r.Mismatched++
			r.problem("store", "snapshot of task %q: bad task ID", s.Task)
			continue
		}
		if !s.HasCheckpoint {
			if len(s.Content) > 0 {
				r.Mismatched++
				r.problem("store", "%s task %s store %s: %d keys but no checkpoint", s.Dir, s.Task, s.Store, len(s.Content))
			}
			continue
		}
		k := taskStore{s.Store, p}
		snaps[k] = append(snaps[k], s)
	}
	for _, store := range Stores() {
		logs := o.Changelogs[store]
		for p := int32(0); p < o.ChangelogPartitions[store]; p++ {
			recs := logs[p]
			for _, c := range recs {
				if c.Bad != "" {
					r.Mismatched++
					r.problem("changelog", "%s %d/%d: %s", store, p, c.Offset, c.Bad)
				}
			}
			k := taskStore{store, p}
			ss := snaps[k]
			sort.Slice(ss, func(i, j int) bool { return ss[i].Checkpoint < ss[j].Checkpoint })
			rp := &replayer{recs: recs, m: map[string]int64{}}
			for _, s := range ss {
				if n, sample := diffMaps(s.Content, rp.upTo(s.Checkpoint)); n > 0 {
					r.Mismatched += n
					r.problem("store", "%s task %s store %s at checkpoint %d: %d keys differ from the changelog's replay: %s", s.Dir, s.Task, s.Store, s.Checkpoint, n, sample)
				}
			}
			final := rp.upTo(1<<62 - 1)
			if n, sample := diffMaps(final, e.final[store][p]); n > 0 {
				r.Mismatched += n
				r.problem("changelog", "%s partition %d: %d keys of its replay differ from the recomputation: %s", store, p, n, sample)
			}
			if len(recs) > 0 && len(o.Snapshots) > 0 {
				end := recs[len(recs)-1].Offset + 1
				if len(ss) == 0 || ss[len(ss)-1].Checkpoint < end {
					r.Mismatched++
					have := "none"
					if len(ss) > 0 {
						have = fmt.Sprint(ss[len(ss)-1].Checkpoint)
					}
					r.problem("store", "store %s task partition %d: no state dir reached the changelog's end %d (highest checkpoint: %s)", store, p, end, have)
				}
			}
		}
	}
}

func checkRestores(o *Observed, r *Report) {
	for _, c := range o.Restores {
		if c.Event.Wiped && c.Event.From > c.Checkpoint && !slices.Contains(Stores(), c.Event.Store) {
			// A window, session or join store's changelog is trimmed below its oldest
			// live segment while another instance owns the task: a checkpoint below the
			// new log start is older than anything live, and the store restores from the
			// log start, as from any truncated changelog. Not a restore that started over.
			r.TrimmedRestores++
			continue
		}
		r.TailRestores++
		if (o.Standbys > 0 || c.Standby) && !c.Event.Wiped && c.Event.From > c.Checkpoint {
			// A standby of the task on the restarted instance read the changelog on
			// from the killed process's checkpoint before the task became active there:
			// the restore starts where the standby stopped (the store's content is
			// checked against the changelog's replay like every state dir's). Without
			// NumStandbyReplicas the standby is a warm-up replica: a long run with
			// overlapped commits, seed 1796396159622433217, restarted i2 after a
			// SIGKILL, took task 0_4 as a warm-up, and its restore as active began at
			// 104143 where the killed process's file said 80052.
			continue
		}
		if c.Event.Wiped || c.Event.From != c.Checkpoint {
			r.Mismatched++
			r.problem("restore", "%s restarted after SIGKILL: task %s store %s restored from %d (wiped %v, %d records); its state dir's checkpoint was %d",
				c.Instance, c.Event.Task, c.Event.Store, c.Event.From, c.Event.Wiped, c.Event.Records, c.Checkpoint)
		}
	}
}

func checkEnds(o *Observed, r *Report) {
	for _, e := range o.Ends {
		if e.Stable != e.High {
			r.Hanging++
			r.problem("hanging", "%s/%d: last stable offset %d, high-water mark %d: a transaction is open", e.Topic, e.Partition, e.Stable, e.High)
		}
	}
}
