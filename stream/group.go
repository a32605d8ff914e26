package stream

import (
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// GroupedStream is a stream grouped by key, ready to aggregate (Kafka Streams'
// KGroupedStream).
type GroupedStream[K, V any] struct {
	s      Stream[K, V]
	keys   serde.Serde[K]
	values serde.Serde[V]
	// repartition: the key changed upstream, so the aggregation reads the stream
	// through a repartition topic; repartitioned is that stream once made, when the
	// grouping is Named (only then do its aggregations share it, as in Kafka Streams).
	repartition   bool
	repartitioned *Stream[K, V]
	name          string // Named, for the repartition topic
}

// GroupByKey groups the stream by its key. The serdes are those of the repartition
// topic, which it gets only when an operation upstream may have changed the key (as
// Kafka Streams tracks it), and of the aggregations' stores.
func (s Stream[K, V]) GroupByKey(keys serde.Serde[K], values serde.Serde[V], opts ...Option) *GroupedStream[K, V] {
	return &GroupedStream[K, V]{s: s, keys: keys, values: values, repartition: s.keyChanged, name: collect(opts).name}
}

// GroupBy groups the stream by a new key, fn(key, value); a repartition topic follows.
func GroupBy[K, V, K2 any](s Stream[K, V], fn func(K, V) K2, keys serde.Serde[K2], values serde.Serde[V], opts ...Option) *GroupedStream[K2, V] {
	return SelectKey(s, fn).GroupByKey(keys, values, opts...)
}

// input returns the stream an aggregation reads: the grouped stream, repartitioned if
// needed through <application>-<store>-repartition, as Kafka Streams names it. As in
// Kafka Streams, each aggregation has a repartition topic of its own, unless the
// grouping is Named: then they share the one named.
func (g *GroupedStream[K, V]) input(store string) Stream[K, V] {
	if !g.repartition {
		return g.s
	}
	if g.name == "" {
		return repartition(g.s, store, g.keys, g.values)
	}
	if g.repartitioned == nil {
		r := repartition(g.s, g.name, g.keys, g.values)
		g.repartitioned = &r
	}
	return *g.repartitioned
}

// Count counts the records per key into a table of int64; records with a null key or
// value are skipped, as in Kafka Streams.
func (g *GroupedStream[K, V]) Count(opts ...Option) Table[K, int64] {
	return aggregate(g, "KSTREAM-AGGREGATE-", opts, serde.Int64(),
		func(_ K, _ V, agg *int64) int64 {
			if agg == nil {
				return 1
			}
			return *agg + 1
		})
}

// Reduce combines the values per key with fn, starting from the first value.
func (g *GroupedStream[K, V]) Reduce(fn func(agg, v V) V, opts ...Option) Table[K, V] {
	return aggregate(g, "KSTREAM-REDUCE-", opts, g.values, func(_ K, v V, agg *V) V {
		if agg == nil {
			return v
		}
		return fn(*agg, v)
	})
}

// Aggregate folds the values per key into an aggregate: init() is the aggregate before
// the first value, and fn(key, value, aggregate) the next one. values serializes the
// aggregate in its store. A null aggregate (the nil of VA's type) deletes the key.
func Aggregate[K, V, VA any](g *GroupedStream[K, V], init func() VA, fn func(K, V, VA) VA, values serde.Serde[VA], opts ...Option) Table[K, VA] {
	return aggregate(g, "KSTREAM-AGGREGATE-", opts, values, func(k K, v V, agg *VA) VA {
		if agg == nil {
			return fn(k, v, init())
		}
		return fn(k, v, *agg)
	})
}

// aggregate is Kafka Streams' KStreamAggregate and KStreamReduce: add(key, value,
// old) with old nil for a new key; the result carries the max of the record's and the
// old aggregate's timestamps.
func aggregate[K, V, VA any](g *GroupedStream[K, V], prefix string, opts []Option, values serde.Serde[VA], add func(K, V, *VA) VA) Table[K, VA] {
	o := collect(opts)
	b := g.s.b
	name := b.newName(prefix)
	store := o.store
	if store == "" {
		store = b.newName(prefix + "STATE-STORE-")
	}
	in := g.input(store)
	info := &tableInfo[K, VA]{node: name, keys: g.keys, values: values}
	info.enableOld = func(bool) bool { info.sendOld = true; return true }
	topology.AddProcessor(b.tb, name, supplier(func(ctx processor.Context[K, Change[VA]]) (func(processor.Record[K, V]) error, error) {
		kv, err := processor.KeyValueStore[K, Timestamped[VA]](ctx, store)
		if err != nil {
			return nil, err
		}
		sendOld, cached := info.sendOld, b.cached(o)
		fw := newTableForwarder(ctx, b, cached, store, g.keys, values)
		return func(r processor.Record[K, V]) error {
			if isNull(r.Key) || isNull(r.Value) {
				return nil // Kafka Streams: "Skipping record due to null key or value"
			}
			old, had, err := kv.Get(r.Key)
			if err != nil {
				return err
			}
			ts := r.Timestamp
			var oldAgg *VA
			if had {
				oldAgg = &old.Value
				if old.Timestamp.After(ts) {
					ts = old.Timestamp
				}
			}
			agg := add(r.Key, r.Value, oldAgg)
			c := Change[VA]{New: nullable(agg)}
			if cached && c.New == nil && !had {
				return nil // a cached store drops the deletion of a key it does not hold
			}
			if err := putOrDelete(kv, r.Key, c.New, ts); err != nil {
				return err
			}
			if sendOld {
				c.Old = oldAgg
			}
			return fw.forward(processor.Record[K, Change[VA]]{Key: r.Key, Value: c, Timestamp: ts, Headers: r.Headers}, had)
		}, nil
	}), in.node)
	info.store = addStore(b, store, g.keys, values, o, name)
	info.getter = storeGetter[K, VA](store)
	info.sources = in.sources
	return Table[K, VA]{b: b, t: info}
}
