package stream

import (
	"fmt"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/sink"
	"github.com/eddy-streams/eddy/topology"
)

// Stream is a typed record stream (Kafka Streams' KStream). It is a handle on the graph
// node its records leave: a value, cheap to copy; operations add nodes and return new
// handles. Null values are the nil of V's type when V has one (a pointer, slice, map or
// interface; read a topic with serde.Nullable to see tombstones as nil pointers).
type Stream[K, V any] struct {
	b    *Builder
	node string
	// keyChanged: an operation that may change the key ran since the last
	// (re)partitioning, so grouping and joins must repartition first, as Kafka Streams'
	// repartitionRequired.
	keyChanged bool
	// sources are the source topics (user topics) the stream's records come from, for
	// the co-partitioning check of joins.
	sources []string
	// keys and values are serdes of K and V the stream was read or written with
	// upstream (a serde.Serde[K], serde.Serde[V]; nil when none is known): a join after
	// a key change repartitions with them, as Kafka Streams does with its serdes.
	keys, values any
}

// serdeOf returns known if it is a serde of T (a serde serves every value of its type,
// whatever operation made it), else nil.
func serdeOf[T any](known any) any {
	if _, ok := known.(serde.Serde[T]); ok {
		return known
	}
	return nil
}

// Name is the graph node the stream's records leave, for processor-API nodes to read.
func (s Stream[K, V]) Name() string { return s.node }

func (s Stream[K, V]) with(node string) Stream[K, V] {
	return Stream[K, V]{b: s.b, node: node, keyChanged: s.keyChanged, sources: s.sources, keys: s.keys, values: s.values}
}

// FromNode makes a Stream of the records a processor-API node (added on b.Topology())
// forwards. Kafka Streams treats such a node as possibly changing keys, and so does this.
func FromNode[K, V any](b *Builder, node string) Stream[K, V] {
	return Stream[K, V]{b: b, node: node, keyChanged: true}
}

// From reads a stream from topics (KStreamBuilder.stream). The source node is named
// KSTREAM-SOURCE-000000000N unless Named.
// FromConsumed also sets the records' timestamps and the offset reset.
func From[K, V any](b *Builder, keys serde.Serde[K], values serde.Serde[V], topics []string, opts ...Option) Stream[K, V] {
	return FromConsumed(b, Consume(keys, values), topics, opts...)
}

// addNode adds a processor after the stream and returns the stream of its output.
func addNode[K, V, K2, V2 any](s Stream[K, V], prefix string, opts []Option, sup processor.Supplier[K, V, K2, V2], keyChanging bool) Stream[K2, V2] {
	name := s.b.nodeName(opts, prefix)
	topology.AddProcessor(s.b.tb, name, sup, s.node)
	return Stream[K2, V2]{b: s.b, node: name, keyChanged: s.keyChanged || keyChanging, sources: s.sources, keys: serdeOf[K2](s.keys), values: serdeOf[V2](s.values)}
}

// Filter keeps the records for which keep returns true.
func (s Stream[K, V]) Filter(keep func(K, V) bool, opts ...Option) Stream[K, V] {
	return addNode(s, "KSTREAM-FILTER-", opts, stateless(func(ctx processor.Context[K, V], r processor.Record[K, V]) error {
		if !keep(r.Key, r.Value) {
			return nil
		}
		return ctx.Forward(r)
	}), false)
}

// FilterNot drops the records for which drop returns true.
func (s Stream[K, V]) FilterNot(drop func(K, V) bool, opts ...Option) Stream[K, V] {
	return s.Filter(func(k K, v V) bool { return !drop(k, v) }, opts...)
}

// Peek calls fn for every record and passes the record on.
func (s Stream[K, V]) Peek(fn func(K, V), opts ...Option) Stream[K, V] {
	return addNode(s, "KSTREAM-PEEK-", opts, stateless(func(ctx processor.Context[K, V], r processor.Record[K, V]) error {
		fn(r.Key, r.Value)
		return ctx.Forward(r)
	}), false)
}

// ForEach calls fn for every record; it ends the stream.
func (s Stream[K, V]) ForEach(fn func(K, V), opts ...Option) {
	addNode(s, "KSTREAM-FOREACH-", opts, stateless(func(_ processor.Context[K, V], r processor.Record[K, V]) error {
		fn(r.Key, r.Value)
		return nil
	}), false)
}

// SelectKey sets each record's key to fn(key, value).
func SelectKey[K, V, K2 any](s Stream[K, V], fn func(K, V) K2, opts ...Option) Stream[K2, V] {
	return addNode(s, "KSTREAM-KEY-SELECT-", opts, stateless(func(ctx processor.Context[K2, V], r processor.Record[K, V]) error {
		return ctx.Forward(processor.WithKeyValue(r, fn(r.Key, r.Value), r.Value))
	}), true)
}

// Map replaces each record's key and value with fn(key, value).
func Map[K, V, K2, V2 any](s Stream[K, V], fn func(K, V) (K2, V2), opts ...Option) Stream[K2, V2] {
	return addNode(s, "KSTREAM-MAP-", opts, stateless(func(ctx processor.Context[K2, V2], r processor.Record[K, V]) error {
		k, v := fn(r.Key, r.Value)
		return ctx.Forward(processor.WithKeyValue(r, k, v))
	}), true)
}

// MapValues replaces each record's value with fn(key, value); keys stay, so no
// repartitioning follows.
func MapValues[K, V, V2 any](s Stream[K, V], fn func(K, V) V2, opts ...Option) Stream[K, V2] {
	return addNode(s, "KSTREAM-MAPVALUES-", opts, stateless(func(ctx processor.Context[K, V2], r processor.Record[K, V]) error {
		return ctx.Forward(processor.WithValue(r, fn(r.Key, r.Value)))
	}), false)
}

// KeyValue is a key and a value, as FlatMap returns them.
type KeyValue[K, V any] struct {
	Key   K
	Value V
}

// Pair makes a KeyValue.
func Pair[K, V any](k K, v V) KeyValue[K, V] { return KeyValue[K, V]{Key: k, Value: v} }

// FlatMap replaces each record with the records fn returns, in order.
func FlatMap[K, V, K2, V2 any](s Stream[K, V], fn func(K, V) []KeyValue[K2, V2], opts ...Option) Stream[K2, V2] {
	return addNode(s, "KSTREAM-FLATMAP-", opts, stateless(func(ctx processor.Context[K2, V2], r processor.Record[K, V]) error {
		for _, kv := range fn(r.Key, r.Value) {
			if err := ctx.Forward(processor.WithKeyValue(r, kv.Key, kv.Value)); err != nil {
				return err
			}
		}
		return nil
	}), true)
}

// FlatMapValues replaces each record with one record per value fn returns, with its key.
func FlatMapValues[K, V, V2 any](s Stream[K, V], fn func(K, V) []V2, opts ...Option) Stream[K, V2] {
	return addNode(s, "KSTREAM-FLATMAPVALUES-", opts, stateless(func(ctx processor.Context[K, V2], r processor.Record[K, V]) error {
		for _, v := range fn(r.Key, r.Value) {
			if err := ctx.Forward(processor.WithValue(r, v)); err != nil {
				return err
			}
		}
		return nil
	}), false)
}

// Process runs a processor-API processor inside the chain, with the stores named (added
// on b.Topology() with topology.AddKeyValueStore and no processors, or attached to
// other processors too). Like Kafka Streams' process(), it may change keys.
func Process[K, V, K2, V2 any](s Stream[K, V], sup processor.Supplier[K, V, K2, V2], stores []string, opts ...Option) Stream[K2, V2] {
	out := addNode(s, "KSTREAM-PROCESSOR-", opts, sup, true)
	for _, st := range stores {
		s.b.connectStore(st, out.node)
	}
	return out
}

// Merge returns the records of s and others as one stream.
func (s Stream[K, V]) Merge(others []Stream[K, V], opts ...Option) Stream[K, V] {
	name := s.b.nodeName(opts, "KSTREAM-MERGE-")
	parents := []string{s.node}
	out := Stream[K, V]{b: s.b, node: name, keyChanged: s.keyChanged, sources: s.sources, keys: s.keys, values: s.values}
	for _, o := range others {
		if s.b.foreign("Merge", "Stream", o.node, o.b) {
			continue
		}
		parents = append(parents, o.node)
		out.keyChanged = out.keyChanged || o.keyChanged
		out.sources = append(append([]string(nil), out.sources...), o.sources...)
	}
	topology.AddProcessor(s.b.tb, name, stateless(func(ctx processor.Context[K, V], r processor.Record[K, V]) error {
		return ctx.Forward(r)
	}), parents...)
	return out
}

// To writes the stream to topic.
func (s Stream[K, V]) To(topic string, keys serde.Serde[K], values serde.Serde[V], opts ...Option) {
	name := s.b.nodeName(opts, "KSTREAM-SINK-")
	topology.AddSink(s.b.tb, name, topic, keys, values, s.node)
}

// ToSink writes the stream into target, a store outside Kafka, in one transaction per
// task and commit, joined to the application's commit (package sink: two-phase commit
// under exactly-once, or idempotent writes). The node is EDDY-SINKTO-000000000N unless
// Named; the name is part of its transactions' IDs.
func (s Stream[K, V]) ToSink(target sink.Target[K, V], opts ...Option) {
	name := s.b.nodeName(opts, "EDDY-SINKTO-")
	topology.AddSinkTo(s.b.tb, name, target, s.node)
}

// Repartition writes the stream through a repartition topic
// (<application>-<name>-repartition) and reads it back, so records are partitioned by
// their current key. name is KSTREAM-REPARTITION-000000000N unless Named.
func (s Stream[K, V]) Repartition(keys serde.Serde[K], values serde.Serde[V], opts ...Option) Stream[K, V] {
	name := s.b.nodeName(opts, "KSTREAM-REPARTITION-")
	return repartition(s, name, keys, values)
}

func repartition[K, V any](s Stream[K, V], name string, keys serde.Serde[K], values serde.Serde[V]) Stream[K, V] {
	topology.AddRepartition(s.b.tb, name, keys, values, s.node)
	return Stream[K, V]{b: s.b, node: name, sources: []string{"repartition:" + name}, keys: keys, values: values}
}

// Branches are the streams a Split made, by branch name: Get looks one up. Not a map,
// as Kafka Streams' Map<String, KStream> is: a map's lookup of a mistyped name (the name
// given to Branch, without the split's prefix) gave the zero Stream, whose first
// operation was a nil-pointer panic (issue 26); Get makes it a Build error.
type Branches[K, V any] struct {
	b       *Builder
	prefix  string
	streams map[string]Stream[K, V]
	names   []string // full names, in the order of the branches
}

// Get returns the branch named name: the split's prefix + the name given to Branch or
// DefaultBranch (as Kafka Streams keys its map), or that name alone. An unknown name is
// a Build error naming the branches; the stream returned then adds nodes that Build
// reports as well, and never panics.
func (br Branches[K, V]) Get(name string) Stream[K, V] {
	if s, ok := br.streams[name]; ok {
		return s
	}
	if s, ok := br.streams[br.prefix+name]; ok {
		return s
	}
	if br.b == nil {
		return Stream[K, V]{}
	}
	br.b.fail("Split: no branch %q; the branches are %q (a branch's name is the split's prefix %q + the name given to Branch)", name, br.names, br.prefix)
	return Stream[K, V]{b: br.b, node: fmt.Sprintf("<no branch %q>", name)}
}

// Names lists the branches' full names, in the order they were added.
func (br Branches[K, V]) Names() []string { return append([]string(nil), br.names...) }

// Splitter adds branches to a Split; each record goes to the first branch whose
// predicate it passes (Kafka Streams' BranchedKStream).
type Splitter[K, V any] struct {
	s        Stream[K, V]
	node     string
	prefix   string
	branches []branch[K, V]
	out      Branches[K, V]
	done     bool
}

type branch[K, V any] struct {
	name string
	keep func(K, V) bool
}

// Split starts a split of the stream into branches. Branch names are prefix + the name
// given to Branch (Kafka Streams' split(Named.as(prefix))); the prefix is the split
// node's name, KSTREAM-BRANCH-000000000N, unless Named.
func (s Stream[K, V]) Split(opts ...Option) *Splitter[K, V] {
	o := collect(opts)
	node := s.b.name(o, "KSTREAM-BRANCH-")
	prefix := o.name
	if prefix == "" {
		prefix = node + "-"
	}
	return &Splitter[K, V]{s: s, node: node, prefix: prefix, out: Branches[K, V]{b: s.b, prefix: prefix, streams: map[string]Stream[K, V]{}}}
}

// Branch adds a branch of the records that pass keep (and no earlier branch). A
// branch added after the split ended (DefaultBranch, NoDefaultBranch) is a Build error:
// it would get no records.
func (sp *Splitter[K, V]) Branch(name string, keep func(K, V) bool) *Splitter[K, V] {
	if sp.done {
		sp.s.b.fail("Split: branch %q added after the split ended (DefaultBranch or NoDefaultBranch): add every branch before", sp.prefix+name)
		return sp
	}
	if keep == nil {
		sp.s.b.fail("Split: branch %q has a nil predicate", sp.prefix+name)
	}
	sp.branches = append(sp.branches, branch[K, V]{name: sp.prefix + name, keep: keep})
	return sp
}

// DefaultBranch adds the branch of the records no other branch took, and ends the split.
func (sp *Splitter[K, V]) DefaultBranch(name string) Branches[K, V] {
	if sp.done {
		sp.s.b.fail("Split: default branch %q added after the split ended", sp.prefix+name)
		return sp.out
	}
	sp.branches = append(sp.branches, branch[K, V]{name: sp.prefix + name, keep: func(K, V) bool { return true }})
	return sp.NoDefaultBranch()
}

// NoDefaultBranch ends the split; records no branch took are dropped.
func (sp *Splitter[K, V]) NoDefaultBranch() Branches[K, V] {
	if sp.done {
		return sp.out
	}
	sp.done = true
	branches := sp.branches
	names := make([]string, len(branches))
	for i, br := range branches {
		names[i] = br.name
	}
	s := sp.s
	topology.AddProcessor(s.b.tb, sp.node, stateless(func(ctx processor.Context[K, V], r processor.Record[K, V]) error {
		for _, br := range branches {
			if br.keep(r.Key, r.Value) {
				return ctx.Forward(r, br.name)
			}
		}
		return nil
	}), s.node)
	for _, name := range names {
		topology.AddProcessor(s.b.tb, name, stateless(func(ctx processor.Context[K, V], r processor.Record[K, V]) error {
			return ctx.Forward(r)
		}), sp.node)
		sp.out.streams[name] = s.with(name)
		sp.out.names = append(sp.out.names, name)
	}
	return sp.out
}

// NonNull drops the records whose value is null and dereferences the others: the step
// from a stream read with serde.Nullable to one of plain values. Aggregations and joins
// skip null values anyway, so NonNull before them changes none of their results.
func NonNull[K, V any](s Stream[K, *V], opts ...Option) Stream[K, V] {
	return addNode(s, "KSTREAM-FILTER-", opts, stateless(func(ctx processor.Context[K, V], r processor.Record[K, *V]) error {
		if r.Value == nil {
			return nil
		}
		return ctx.Forward(processor.WithValue(r, *r.Value))
	}), false)
}

// ToTopics writes each record to the topic choose(key, value) names, one of topics
// (Kafka Streams' To with a TopicNameExtractor). The topics are declared up front so
// that the topology lists every topic it writes, and the runtime can check them before
// it starts; a record for a topic not declared fails with an error naming it.
func (s Stream[K, V]) ToTopics(choose func(K, V) string, topics []string, keys serde.Serde[K], values serde.Serde[V], opts ...Option) {
	router := s.b.nodeName(opts, "KSTREAM-SINK-ROUTER-")
	sinks := map[string]string{}
	for _, t := range topics {
		sinks[t] = s.b.newName("KSTREAM-SINK-")
	}
	topology.AddProcessor(s.b.tb, router, stateless(func(ctx processor.Context[K, V], r processor.Record[K, V]) error {
		t := choose(r.Key, r.Value)
		sink, ok := sinks[t]
		if !ok {
			return fmt.Errorf("ToTopics: the record's topic %q is not one of the declared topics %q: declare it in ToTopics", t, topics)
		}
		return ctx.Forward(r, sink)
	}), s.node)
	if len(topics) == 0 {
		s.b.fail("%s: ToTopics declares no topic", router)
	}
	for _, t := range topics {
		topology.AddSink(s.b.tb, sinks[t], t, keys, values, router)
	}
}
