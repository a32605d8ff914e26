//go:build unix

package eos

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/window"
)

// Store names of the test application. sum, count and max belong to sub-topology 0
// (tasks 0_p, keyed like the input); bucket-count to sub-topology 1 (tasks 1_p, keyed by
// value bucket after the repartition).
const (
	StoreSum         = "sum"
	StoreCount       = "count"
	StoreMax         = "max"
	StoreBucketCount = "bucket-count"
	// RepartitionName names the repartition hop: <app>-by-bucket-repartition.
	RepartitionName = "by-bucket"
)

// Names are the application ID and the topics of one run.
type Names struct {
	App          string
	Input        string
	Echo         string
	Sums         string
	Counts       string
	Maxes        string
	BucketCounts string
	// WinUpdates gets the windowed aggregation's every update, WinFinals its final
	// results (suppressed until each window closes).
	WinUpdates string
	WinFinals  string
	// Right is the join's second input topic; Joins its output.
	Right string
	Joins string
}

// NamesFor derives every name of a run from one prefix.
func NamesFor(prefix string) Names {
	return Names{
		App:          prefix + "-app",
		Input:        prefix + "-input",
		Echo:         prefix + "-echo",
		Sums:         prefix + "-sums",
		Counts:       prefix + "-counts",
		Maxes:        prefix + "-maxes",
		BucketCounts: prefix + "-bucket-counts",
		WinUpdates:   prefix + "-win-updates",
		WinFinals:    prefix + "-win-finals",
		Right:        prefix + "-right",
		Joins:        prefix + "-joins",
	}
}

// OutputTopics are the sink topics of the application.
func (n Names) OutputTopics() []string {
	return []string{n.Echo, n.Sums, n.Counts, n.Maxes, n.BucketCounts, n.WinUpdates, n.WinFinals, n.Joins}
}

// WindowStores are the window stores of the application (their changelogs hold
// windowed keys; the verifier checks them for open transactions only).
func WindowStores() []string { return []string{StoreWindow} }

// Repartition is the repartition topic the runtime creates.
func (n Names) Repartition() string { return changelog.RepartitionTopicName(n.App, RepartitionName) }

// Changelog is the changelog topic of a store.
func (n Names) Changelog(store string) string { return changelog.TopicName(n.App, store) }

// Stores lists the stores of the application, sub-topology 0 first.
func Stores() []string { return []string{StoreSum, StoreCount, StoreMax, StoreBucketCount} }

// StoreSubtopology is the sub-topology whose tasks own a store.
func StoreSubtopology(store string) int {
	if store == StoreBucketCount {
		return 1
	}
	return 0
}

// Update is an aggregate's output record: the input value that caused the update and
// the aggregate after it. Carrying the input value lets the verifier tell a duplicate
// from a loss from a wrong value, record by record.
type Update struct {
	Input int64
	Value int64
}

// UpdateSerde writes an Update as 16 bytes: two big-endian int64s.
func UpdateSerde() serde.Serde[Update] {
	return serde.Funcs("eos.Update",
		func(_ string, u Update) ([]byte, error) {
			b := make([]byte, 16)
			binary.BigEndian.PutUint64(b, uint64(u.Input))
			binary.BigEndian.PutUint64(b[8:], uint64(u.Value))
			return b, nil
		},
		func(topic string, b []byte) (Update, error) { return DecodeUpdate(b) })
}

// DecodeUpdate reads an Update written by UpdateSerde.
func DecodeUpdate(b []byte) (Update, error) {
	if len(b) != 16 {
		return Update{}, fmt.Errorf("eos: update of %d bytes, want 16", len(b))
	}
	return Update{Input: int64(binary.BigEndian.Uint64(b)), Value: int64(binary.BigEndian.Uint64(b[8:]))}, nil
}

// DecodeInt64 reads a big-endian int64 (serde.Int64's format).
func DecodeInt64(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("eos: int64 of %d bytes, want 8", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// EncodeInt64 writes v as serde.Int64 does.
func EncodeInt64(v int64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(v))
	return b
}

// BucketKey is the key the repartition hop gives an input value.
func BucketKey(v int64, buckets int) string {
	return fmt.Sprintf("b%03d", v%int64(buckets))
}

// Topology builds the test application:
//
//	input ─┬─ echo ─────────────────────────────────────── Echo (unchanged)
//	       ├─ sum-agg   [sum]   ────────────────────────── Sums   (key, {v, sum})
//	       ├─ count-agg [count] ────────────────────────── Counts (key, {v, count})
//	       ├─ max-agg   [max]   ────────────────────────── Maxes  (key, {v, max})
//	       ├─ bucket (re-key by v mod buckets) ─ by-bucket repartition
//	       │    ─ bucket-count-agg [bucket-count] ──────── BucketCounts (bucket, {v, count})
//	       ├─ operator-start (logs OperatorStartMsg at a task's first record)
//	       ├─ tumbling windows w by key [win-agg] ──────── WinUpdates ((key, window), {count, sum, last})
//	       │    └─ (finals) suppress until the window closes ─ WinFinals (the same, once per window)
//	       └─ (j.DiffMs > 0) join with Right within j ──── Joins (key, {left, right})
//
// Input records have String keys and Int64 values; their timestamps are the event
// times the windows go by. The windowed aggregation, the suppression and the join are
// the DSL's (stream package), uncached, so every update reaches its topic.
//
// With pg (the PostgreSQL target, pg.go), the sum, count and max updates and the final
// results also go to its two-phase and upsert targets (finals must be set).
func Topology(n Names, buckets int, w WindowParams, finals bool, j JoinParams, pg *PGTargets) (*topology.Topology, error) {
	if buckets < 1 {
		return nil, fmt.Errorf("eos: buckets %d: want at least 1", buckets)
	}
	if pg != nil && !finals {
		return nil, fmt.Errorf("eos: the PostgreSQL target needs the final results (finals)")
	}
	if w.SizeMs < 1 || w.GraceMs < 0 {
		return nil, fmt.Errorf("eos: windows of %d ms with %d ms grace: want a size of at least 1 ms and no negative grace", w.SizeMs, w.GraceMs)
	}
	str, i64, upd := serde.String(), serde.Int64(), UpdateSerde()
	sb := stream.NewBuilder()
	input := stream.From(sb, str, i64, []string{n.Input}, stream.Named("input"))
	b := sb.Topology()
	topology.AddSink(b, "echo", n.Echo, str, i64, "input")
	for _, a := range []struct {
		store, topic string
		fn           func(prev int64, ok bool, v int64) int64
	}{
		{StoreSum, n.Sums, func(prev int64, _ bool, v int64) int64 { return prev + v }},
		{StoreCount, n.Counts, func(prev int64, _ bool, _ int64) int64 { return prev + 1 }},
		{StoreMax, n.Maxes, func(prev int64, ok bool, v int64) int64 {
			if ok && prev > v {
				return prev
			}
			return v
		}},
	} {
		node := a.store + "-agg"
		topology.AddProcessor(b, node, aggregatorSupplier(a.store, a.fn), "input")
		topology.AddKeyValueStore(b, a.store, str, i64, node)
		topology.AddSink(b, a.store+"-out", a.topic, str, upd, node)
	}
	topology.AddProcessor(b, "bucket", processor.Map(func(r processor.Record[string, int64]) (processor.Record[string, int64], error) {
		return processor.WithKeyValue(r, BucketKey(r.Value, buckets), r.Value), nil
	}), "input")
	topology.AddRepartition(b, RepartitionName, str, i64, "bucket")
	topology.AddProcessor(b, "bucket-count-agg", aggregatorSupplier(StoreBucketCount, func(prev int64, _ bool, _ int64) int64 { return prev + 1 }), RepartitionName)
	topology.AddKeyValueStore(b, StoreBucketCount, str, i64, "bucket-count-agg")
	topology.AddSink(b, "bucket-count-out", n.BucketCounts, str, upd, "bucket-count-agg")

	topology.AddProcessor(b, "operator-start", operatorStartSupplier(), "input")
	windows := input.GroupByKey(str, i64).WindowedBy(window.Tumbling(w.Size(), w.Grace()))
	winOpts := []stream.Option{stream.Materialized(StoreWindow), stream.WithoutCaching()}
	if w.RetentionMs > 0 {
		winOpts = append(winOpts, stream.Retention(time.Duration(w.RetentionMs)*time.Millisecond))
	}
	agg := stream.WindowedAggregate(windows, func() WinAgg { return WinAgg{} },
		func(_ string, v int64, a WinAgg) WinAgg { return WinAgg{Count: a.Count + 1, Sum: a.Sum + v, Last: v} },
		WinAggSerde(), winOpts...)
	winKeys, winValues := window.TimeWindowedSerde(str, w.Size()), serde.Nullable(WinAggSerde())
	stream.ToStream(agg).To(n.WinUpdates, winKeys, winValues)
	if finals {
		// Final results only: one record per window, when it closes (stream time past
		// its end plus grace). The buffer is changelogged, so a crash neither loses
		// nor repeats a final result.
		fs := stream.ToStream(agg.Suppress(stream.UntilWindowCloses(stream.Unbounded()), stream.Named("win-finals")))
		fs.To(n.WinFinals, winKeys, winValues)
		if pg != nil {
			addPGSinks(b, fs, pg)
		}
	}
	if j.DiffMs > 0 {
		right := stream.From(sb, str, i64, []string{n.Right}, stream.Named("right"))
		stream.StreamJoin(input, right, func(l, r int64) Update { return Update{Input: l, Value: r} },
			window.JoinTimeDifference(time.Duration(j.DiffMs)*time.Millisecond, time.Duration(j.GraceMs)*time.Millisecond),
			stream.JoinedWith(str, i64, i64), stream.Named("join")).To(n.Joins, str, upd)
	}
	return sb.Build()
}

// operatorStartSupplier makes the node that logs OperatorStartMsg at the first record
// its task processes after it was made (with the task's other processors, the windowed
// ones among them), and forwards nothing.
func operatorStartSupplier() processor.Supplier[string, int64, string, int64] {
	return func() processor.Processor[string, int64, string, int64] { return &operatorStart{} }
}

type operatorStart struct {
	ctx    processor.Context[string, int64]
	logged bool
}

func (o *operatorStart) Init(ctx processor.Context[string, int64]) error {
	o.ctx = ctx
	return nil
}

func (o *operatorStart) Process(processor.Record[string, int64]) error {
	if o.logged {
		return nil
	}
	o.logged = true
	if md, ok := o.ctx.RecordMetadata(); ok {
		o.ctx.Logger().Info(OperatorStartMsg, "partition", md.Partition, "offset", md.Offset)
	}
	return nil
}

func (o *operatorStart) Close() error { return nil }

func aggregatorSupplier(store string, fn func(prev int64, ok bool, v int64) int64) processor.Supplier[string, int64, string, Update] {
	return func() processor.Processor[string, int64, string, Update] {
		return &aggregator{store: store, fn: fn}
	}
}

// aggregator keeps one int64 per key in its store and forwards every update.
type aggregator struct {
	store string
	fn    func(prev int64, ok bool, v int64) int64
	ctx   processor.Context[string, Update]
	kv    statestore.KeyValueStore[string, int64]
}

func (a *aggregator) Init(ctx processor.Context[string, Update]) error {
	a.ctx = ctx
	kv, err := processor.KeyValueStore[string, int64](ctx, a.store)
	if err != nil {
		return fmt.Errorf("eos: store %q: %w", a.store, err)
	}
	a.kv = kv
	return nil
}

func (a *aggregator) Process(rec processor.Record[string, int64]) error {
	prev, ok, err := a.kv.Get(rec.Key)
	if err != nil {
		return err
	}
	next := a.fn(prev, ok, rec.Value)
	if err := a.kv.Put(rec.Key, next); err != nil {
		return err
	}
	return a.ctx.Forward(processor.WithValue(rec, Update{Input: rec.Value, Value: next}))
}

func (a *aggregator) Close() error { return nil }
