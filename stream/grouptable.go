package stream

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// GroupedTable is a table re-grouped by a new key, ready to aggregate with an adder for
// new values and a subtractor for old ones (Kafka Streams' KGroupedTable).
type GroupedTable[K, V any] struct {
	b      *Builder
	node   string // forwards (K, Change[V]), old and new value as separate records
	keys   serde.Serde[K]
	values serde.Serde[V]
	name   string // Named: the shared repartition topic
	shared *string
}

// TableGroupBy re-groups t by fn(key, value) → (new key, new value). Every update of t
// becomes a subtraction of the old pair and an addition of the new one (one record when
// both have the same new key), sent through a repartition topic; pairs with a null key
// or value are dropped, as in Kafka Streams.
func TableGroupBy[K, V, K2, V2 any](t Table[K, V], fn func(K, V) (K2, V2), keys serde.Serde[K2], values serde.Serde[V2], opts ...Option) *GroupedTable[K2, V2] {
	b := t.b
	o := collect(opts)
	name := b.newName("KTABLE-SELECT-")
	t.t.enableOld(true)
	parent := t.t
	topology.AddProcessor(b.tb, name, stateless(func(ctx processor.Context[K2, Change[V2]], r processor.Record[K, Change[V]]) error {
		type pair struct {
			k  K2
			v  V2
			ok bool
		}
		mapPair := func(v *V) pair {
			if v == nil {
				return pair{}
			}
			k2, v2 := fn(r.Key, *v)
			return pair{k: k2, v: v2, ok: !isNull(k2) && !isNull(v2)}
		}
		np, op := mapPair(r.Value.New), mapPair(r.Value.Old)
		if np.ok && op.ok && sameKey(keys, np.k, op.k) {
			return ctx.Forward(processor.WithKeyValue(r, np.k, Change[V2]{New: &np.v, Old: &op.v}))
		}
		if op.ok {
			if err := ctx.Forward(processor.WithKeyValue(r, op.k, Change[V2]{Old: &op.v})); err != nil {
				return err
			}
		}
		if np.ok {
			return ctx.Forward(processor.WithKeyValue(r, np.k, Change[V2]{New: &np.v}))
		}
		return nil
	}), parent.node)
	return &GroupedTable[K2, V2]{b: b, node: name, keys: keys, values: values, name: o.name}
}

// sameKey compares keys as Kafka Streams' equals would, by their serialized bytes.
func sameKey[K any](keys serde.Serde[K], a, b K) bool {
	ab, err1 := keys.Serialize("", a)
	bb, err2 := keys.Serialize("", b)
	return err1 == nil && err2 == nil && string(ab) == string(bb)
}

// input returns the repartitioned stream of changes an aggregation reads.
func (g *GroupedTable[K, V]) input(store string) string {
	if g.name != "" && g.shared != nil {
		return *g.shared
	}
	name := store
	if g.name != "" {
		name = g.name
	}
	topology.AddRepartition(g.b.tb, name, g.keys, changeSerde(g.values), g.node)
	if g.name != "" {
		g.shared = &name
	}
	return name
}

// Count counts the values per key: +1 for each new value, -1 for each old one.
func (g *GroupedTable[K, V]) Count(opts ...Option) Table[K, int64] {
	return tableAggregate(g, "KTABLE-AGGREGATE-", opts, serde.Int64(),
		func(_ K, _ V, agg *int64) int64 {
			if agg == nil {
				return 1
			}
			return *agg + 1
		},
		func(_ K, _ V, agg int64) int64 { return agg - 1 }, false)
}

// Reduce keeps per key the reduction of the values: adder(agg, new value) for each new
// value (the first value as it is), subtractor(agg, old value) for each old one.
func (g *GroupedTable[K, V]) Reduce(adder, subtractor func(agg, v V) V, opts ...Option) Table[K, V] {
	return tableAggregate(g, "KTABLE-REDUCE-", opts, g.values,
		func(_ K, v V, agg *V) V {
			if agg == nil {
				return v
			}
			return adder(*agg, v)
		},
		func(_ K, v V, agg V) V { return subtractor(agg, v) }, true)
}

// TableAggregate folds the values per key: adder(key, new value, agg) for each new value
// (agg starts at init()), subtractor(key, old value, agg) for each old one. A null
// aggregate (the nil of VA's type) deletes the key.
func TableAggregate[K, V, VA any](g *GroupedTable[K, V], init func() VA, adder, subtractor func(K, V, VA) VA, values serde.Serde[VA], opts ...Option) Table[K, VA] {
	return tableAggregate(g, "KTABLE-AGGREGATE-", opts, values,
		func(k K, v V, agg *VA) VA {
			if agg == nil {
				return adder(k, v, init())
			}
			return adder(k, v, *agg)
		}, subtractor, false)
}

// tableAggregate is Kafka Streams' KTableAggregate (and, with reduce set, the
// timestamps of KTableReduce).
func tableAggregate[K, V, VA any](g *GroupedTable[K, V], prefix string, opts []Option, values serde.Serde[VA], add func(K, V, *VA) VA, sub func(K, V, VA) VA, reduce bool) Table[K, VA] {
	o := collect(opts)
	b := g.b
	name := b.newName(prefix)
	store := o.store
	if store == "" {
		store = b.newName(prefix + "STATE-STORE-")
	}
	in := g.input(store)
	info := &tableInfo[K, VA]{node: name, keys: g.keys, values: values, sources: []string{"repartition:" + in}}
	info.enableOld = func(bool) bool { info.sendOld = true; return true }
	topology.AddProcessor(b.tb, name, supplier(func(ctx processor.Context[K, Change[VA]]) (func(processor.Record[K, Change[V]]) error, error) {
		kv, err := processor.KeyValueStore[K, Timestamped[VA]](ctx, store)
		if err != nil {
			return nil, err
		}
		sendOld, cached := info.sendOld, b.cached(o)
		fw := newTableForwarder(ctx, b, cached, store, g.keys, values)
		return func(r processor.Record[K, Change[V]]) error {
			if isNull(r.Key) {
				return fmt.Errorf("record key for the table aggregation with store %q is null", store)
			}
			old, had, err := kv.Get(r.Key)
			if err != nil {
				return err
			}
			var oldAgg *VA
			if had {
				oldAgg = &old.Value
			}
			ts := r.Timestamp
			maxTS := func() {
				if had && old.Timestamp.After(r.Timestamp) {
					ts = old.Timestamp
				} else {
					ts = r.Timestamp
				}
			}
			inter := oldAgg
			if r.Value.Old != nil && oldAgg != nil {
				v := sub(r.Key, *r.Value.Old, *oldAgg)
				inter = &v
				if isNull(v) {
					inter = nil
				}
				maxTS()
			}
			newAgg := inter
			if r.Value.New != nil {
				v := add(r.Key, *r.Value.New, inter)
				newAgg = &v
				if isNull(v) {
					newAgg = nil
				}
				if !reduce && had || reduce && inter != nil {
					maxTS()
				}
			}
			if cached && newAgg == nil && !had {
				return nil // a cached store drops the deletion of a key it does not hold
			}
			if err := putOrDelete(kv, r.Key, newAgg, ts); err != nil {
				return err
			}
			c := Change[VA]{New: newAgg}
			if sendOld {
				c.Old = oldAgg
			}
			return fw.forward(processor.Record[K, Change[VA]]{Key: r.Key, Value: c, Timestamp: ts, Headers: r.Headers}, had)
		}, nil
	}), in)
	info.store = addStore(b, store, g.keys, values, o, name)
	info.getter = storeGetter[K, VA](store)
	return Table[K, VA]{b: b, t: info}
}

// changeSerde writes a Change for a repartition topic: a flags byte (1: new value
// present, 2: old value present), the new value's length (4 bytes, big-endian) and
// bytes, then the old value's bytes.
func changeSerde[V any](values serde.Serde[V]) serde.Serde[Change[V]] {
	return serde.Funcs("Change["+serde.Name(values)+"]",
		func(topic string, c Change[V]) ([]byte, error) {
			var flags byte
			var nb, ob []byte
			var err error
			if c.New != nil {
				flags |= 1
				if nb, err = values.Serialize(topic, *c.New); err != nil {
					return nil, err
				}
			}
			if c.Old != nil {
				flags |= 2
				if ob, err = values.Serialize(topic, *c.Old); err != nil {
					return nil, err
				}
			}
			out := append(make([]byte, 0, 5+len(nb)+len(ob)), flags)
			out = binary.BigEndian.AppendUint32(out, uint32(len(nb)))
			return append(append(out, nb...), ob...), nil
		},
		func(topic string, data []byte) (Change[V], error) {
			var c Change[V]
			if len(data) < 5 {
				return c, errors.New("a change needs at least 5 bytes")
			}
			n := int(binary.BigEndian.Uint32(data[1:5]))
			if 5+n > len(data) {
				return c, fmt.Errorf("a change's new value of %d bytes overruns its %d bytes", n, len(data))
			}
			if data[0]&1 != 0 {
				v, err := values.Deserialize(topic, data[5:5+n])
				if err != nil {
					return c, err
				}
				c.New = &v
			}
			if data[0]&2 != 0 {
				v, err := values.Deserialize(topic, data[5+n:])
				if err != nil {
					return c, err
				}
				c.Old = &v
			}
			return c, nil
		})
}
