// Package stream is eddy's streams DSL, Kafka Streams' StreamsBuilder/KStream/KTable in
// Go: typed streams and tables, grouping, aggregation and joins, built on the processor
// API of packages topology and processor. A DSL topology runs in the runtime and in
// topologytest like any other, and mixes with processor-API nodes (Builder.Topology,
// Stream.Name, FromNode, Process).
//
//	b := stream.NewBuilder()
//	lines := stream.From(b, serde.String(), serde.String(), []string{"lines"})
//	words := stream.FlatMapValues(lines, func(_, l string) []string { return strings.Fields(l) })
//	counts := stream.GroupBy(words, func(_, w string) string { return w }, serde.String(), serde.String()).
//		Count(stream.Materialized("counts"))
//	stream.ToStream(counts).To("counts", serde.String(), serde.Nullable(serde.Int64()))
//	topo, err := b.Build()
//
// # Types
//
// Stream[K, V] and Table[K, V] are handles, cheap to copy. Operations that keep the types
// are methods (Filter, Peek, Merge, To, GroupByKey, ...); those that change them are
// functions, because Go methods cannot take type parameters (Map, MapValues, SelectKey,
// FlatMap, GroupBy, Aggregate, ToStream, the joins, ...). Every edge is typed and checked
// when the program compiles; Build checks the graph once more.
//
// # Null values and tombstones
//
// Kafka's null is the nil of V's type: a stream that must see tombstones reads its topic
// with serde.Nullable, so its values are pointers and a tombstone is nil. Operators treat
// nil as Kafka Streams treats null: aggregations skip null values, stream-table joins
// drop records with a null value (and, except a left join, a null key). A table's values
// are never null: a tombstone deletes its key, so Table[K, V] holds plain V, and
// ToStream shows each deletion as a nil *V. Joiners get a nil pointer for a missing
// side (LeftJoin, TableLeftJoin, TableOuterJoin, ForeignKeyLeftJoin).
//
// # Semantics
//
// Each operator follows Kafka Streams 4.1: the old/new value (Change) propagation of
// tables, sent only when a downstream operator needs old values; a repartition topic for
// grouping only when an operator upstream may have changed the key (SelectKey, Map,
// FlatMap, Process, FromNode); aggregates carry the largest timestamp of their inputs;
// table-table joins the larger of both sides'; stream-table joins the stream record's.
// DSL stores keep each value with its timestamp (Timestamped); eddy.Query reads the
// plain values. Names of generated nodes and stores follow Kafka Streams'
// (KSTREAM-FILTER-0000000003), so Describe reads the same.
//
// # Stream–stream joins
//
// StreamJoin, StreamLeftJoin and StreamOuterJoin join two streams within
// window.JoinWindows, as Kafka Streams 4.1's KStream.join/leftJoin/outerJoin with
// JoinWindows.ofTimeDifferenceAndGrace (window.JoinTimeDifference, Before, After):
//
//   - A left record at t meets the right records of its key in [t - before, t + after]
//     (a right record at t the left ones in [t - after, t + before]) that are buffered in
//     the other side's window store (KSTREAM-JOINTHIS-…-store, KSTREAM-JOINOTHER-…-store
//     or OUTER…; retention before + after + grace, duplicates kept, changelogged). Each
//     pair is joined when its second record arrives; the result's timestamp is the
//     larger of the two. Records with a null key or value join nothing.
//   - Left and outer joins keep a record that found no partner in a shared store
//     (KSTREAM-OUTERSHARED-…-store, keys timestamp | side | key as Kafka Streams'
//     TimestampedKeyAndJoinSide) and emit it, with the missing side nil and its own
//     timestamp, once its window has closed: once the stream time of the join (the
//     largest timestamp either side has seen) passes t + after + grace for a left record,
//     t + before + grace for a right one. Kafka Streams checks for closed windows only
//     when a record arrives at the current stream time and its side's look-ahead says
//     the store's earliest record may have closed; eddy copies that check, so results
//     come out at the same records. A record whose window has passed already when it
//     arrives is emitted at once, and so is a record with a null key and a value on an
//     outer side.
//   - Kafka Streams throttles the check by wall-clock time (its internal
//     emit.interval.ms.kstreams.outer.join.spurious.results.fix, 1 s): eddy does not
//     throttle, which equals Kafka Streams with that interval at 0. Kafka Streams keeps
//     the join's stream time and earliest-record bound in memory, so they start afresh
//     after a restart and a crash can change what it emits; eddy keeps them in one more
//     small store (the shared store's name + "-time"), so the output does not depend on
//     restarts. Both roll back with an aborted transaction.
//   - A side whose key may have changed is repartitioned first (<node>-repartition, or
//     <name>-left/-right-repartition with Named), with the Joined serdes.
//
// # Windows and final results
//
// GroupedStream.WindowedBy, WindowedBySliding and WindowedBySession aggregate per key
// and window (package window defines the windows), emitting every update. For final
// results only, Table.Suppress(UntilWindowCloses(buf)) buffers a windowed table's
// updates until each window closes, and Emit(OnWindowClose) makes the aggregation
// forward each window once, when it closes; UntilTimeLimit holds any table's updates
// back for a span of stream time. The suppression buffer and the last emit time live in
// changelogged stores written in the task's transaction, so results are exactly once
// across crashes and aborts. docs/dsl.md ("Final results") has the details.
//
// Where eddy differs: a table read from a topic restores from that topic, without a
// changelog of its own (Kafka Streams' reuse.ktable.source.topics; WithOwnChangelog
// gives it one); the record caches' byte budget is per task, not per instance (see
// NoCaching and CacheMaxBytes). Global tables are there (GlobalTableFrom), standby
// replicas too (eddy.Config.NumStandbyReplicas). Missing: warm-up replicas with probing
// rebalances, and versioned stores. docs/dsl.md ("Where eddy differs from Kafka
// Streams", "What eddy does not have") has the details.
package stream
