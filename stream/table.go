package stream

import (
	"fmt"
	"slices"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
)

// Change is what a table's node forwards for an update of a key: the new value and,
// when a downstream operation needs it, the old one (Kafka Streams' Change). nil is
// null: New nil is a deletion, Old nil is "no old value" or "not sent".
type Change[V any] struct {
	New, Old *V
}

// Table is a typed changelog table (Kafka Streams' KTable): the latest value per key.
// Its values are never null: a deletion (a tombstone read from its topic, a filtered-out
// value, an aggregate that became null) removes the key. ToStream shows deletions as nil
// values.
type Table[K, V any] struct {
	b *Builder
	t *tableInfo[K, V]
}

// getterFunc reads a table's current value of a key in a task.
type getterFunc[K, V any] func(K) (Timestamped[V], bool, error)

// tableInfo is what operations downstream of a table need to know of it.
type tableInfo[K, V any] struct {
	node string // forwards (K, Change[V])
	// sendOld: forward old values too. Set while the topology is built, read by the
	// processors at Init (after Build).
	sendOld bool
	// enableOld makes the table (and what it derives from) send old values; false
	// when it cannot without materializing and force is false.
	enableOld func(force bool) bool
	// getter makes a task's reader of the table's current values; it needs the stores
	// of lookupStores attached to the asking processor (connectGetter does it).
	getter func(sp processor.StoreProvider) (getterFunc[K, V], error)
	// derivedFrom are the tables a table without a store of its own reads through.
	derivedFrom []lookupSource
	store       *pendingStore // the table's own store, when materialized
	keyChanged  bool
	sources     []string
	keys        serde.Serde[K] // nil when unknown
	values      serde.Serde[V] // nil when unknown
	// materialize, when set, gives the table a store on demand (a lookup or old values
	// downstream), as Kafka Streams materializes a KTableSource.
	materialize func()
	// windowEnd, set on windowed tables (and tables derived from them), gives a key's
	// window end in ms; closeAfter is how long after its end a window closes (the
	// grace period; for sessions gap plus grace): Suppress(UntilWindowCloses) needs
	// both, as Kafka Streams' GraphGraceSearchUtil finds them.
	windowEnd  func(K) int64
	closeAfter int64
	// extraLookup are stores a lookup reads besides the table's own or its parents'
	// (a suppressed table's buffer).
	extraLookup []*pendingStore
}

// Name is the graph node that forwards the table's changes, as (K, Change[V]) records
// ("" for the zero Table).
func (t Table[K, V]) Name() string {
	if t.t == nil {
		return ""
	}
	return t.t.node
}

// info is t's tableInfo; on the zero Table it panics as every operation on a zero
// handle does (Builder.newName).
func (t Table[K, V]) info() *tableInfo[K, V] {
	if t.t == nil {
		t.b.newName("KTABLE")
	}
	return t.t
}

// unusableTable is the table an operation that failed the Build returns: like
// unusable's stream, what is added after it names a missing parent, which Build
// reports, and nothing panics (its lookups fail at Init, which Build's error prevents).
func unusableTable[K, V any](b *Builder, op string) Table[K, V] {
	return Table[K, V]{b: b, t: &tableInfo[K, V]{node: "<failed " + op + ">",
		enableOld: func(bool) bool { return true },
		getter: func(processor.StoreProvider) (getterFunc[K, V], error) {
			return nil, fmt.Errorf("%w: the table of a failed %s", topology.ErrInvalid, op)
		}}}
}

// StoreName is the name of the table's store, or "" when it has none so far (a Filter
// or MapValues without Materialized reads through its parent; a source table gets one
// when an operation needs it).
func (t Table[K, V]) StoreName() string {
	if t.t.store == nil {
		return ""
	}
	return t.t.store.name
}

// lookupSource is a table (of any types) as the tables derived from it see it.
type lookupSource interface {
	prepareLookup()
	lookupStores() []*pendingStore
}

// prepareLookup makes sure lookups of the table can be served: a table that can be
// materialized on demand is; one that reads through its parents has them prepared.
func (t *tableInfo[K, V]) prepareLookup() {
	switch {
	case t.materialize != nil:
		t.materialize()
	case t.store == nil:
		for _, p := range t.derivedFrom {
			p.prepareLookup()
		}
	}
}

// lookupStores are the stores a lookup reads: the table's own, or those of the tables
// it reads through.
func (t *tableInfo[K, V]) lookupStores() []*pendingStore {
	if t.store != nil {
		return []*pendingStore{t.store}
	}
	out := slices.Clone(t.extraLookup)
	for _, p := range t.derivedFrom {
		out = append(out, p.lookupStores()...)
	}
	return out
}

func (t *tableInfo[K, V]) connectGetter(nodes ...string) {
	t.prepareLookup()
	for _, st := range t.lookupStores() {
		st.connect(nodes...)
	}
}

// storeGetter reads a table's values from its store.
func storeGetter[K, V any](store string) func(sp processor.StoreProvider) (getterFunc[K, V], error) {
	return func(sp processor.StoreProvider) (getterFunc[K, V], error) {
		kv, err := processor.KeyValueStore[K, Timestamped[V]](sp, store)
		if err != nil {
			return nil, err
		}
		return kv.Get, nil
	}
}

// TableFrom reads a table from a topic (KStreamBuilder.table): a tombstone deletes its
// key; records with a null key are dropped. The table is kept in a store named
// KSTREAM-SOURCE-…-STORE unless Materialized.
//
// Unlike Kafka Streams, the store has a changelog topic of its own (a second copy of
// the topic): eddy's runtime restores stores from their changelogs only.
//
// TableFromConsumed also sets the records' timestamps and the offset reset.
func TableFrom[K, V any](b *Builder, keys serde.Serde[K], values serde.Serde[V], topic string, opts ...Option) Table[K, V] {
	return TableFromConsumed(b, Consume(keys, values), topic, opts...)
}

// TableFromConsumed reads a table from a topic as c says (builder.table(topic,
// consumed)); see TableFrom. c's timestamp extractor is not called for a tombstone,
// whose value it cannot be given (V has no null): a deletion keeps the timestamp Kafka
// has for it, where Kafka Streams calls the extractor with a null value.
func TableFromConsumed[K, V any](b *Builder, c Consumed[K, V], topic string, opts ...Option) Table[K, V] {
	o := collect(opts)
	o.sourceTopic = topic
	source := b.name(o, "KSTREAM-SOURCE-")
	n := topology.AddSource(b.tb, source, c.keys, serde.Nullable(c.values), topic)
	configureSource(n, nullableExtractor(c.timestamps), c.reset)
	return tableSource(b, source, []string{topic}, topic, c.keys, c.values, o)
}

// ToTable turns a stream into a table of its latest value per key (KStream.toTable): a
// nil value deletes its key, and records with a null key are dropped. When the key may
// have changed upstream, the stream goes through a repartition topic first, as in
// Kafka Streams. The table's store is named …-STATE-STORE-000000000N unless
// Materialized.
func ToTable[K, V any](s Stream[K, *V], keys serde.Serde[K], values serde.Serde[V], opts ...Option) Table[K, V] {
	o := collect(opts)
	o.name = ""
	if s.keyChanged {
		s = repartition(s, s.b.newName("KSTREAM-TOTABLE-REPARTITION-"), keys, serde.Nullable(values))
	}
	return tableSource(s.b, s.node, s.sources, "KSTREAM-TOTABLE", keys, values, o)
}

// tableSource adds Kafka Streams' KTableSource after parent: it keeps each key's
// latest value in the table's store and forwards the change.
func tableSource[K, V any](b *Builder, parent string, sources []string, storePrefix string, keys serde.Serde[K], values serde.Serde[V], o options) Table[K, V] {
	node := b.newName("KTABLE-SOURCE-")
	store := o.store
	if store == "" {
		store = b.newName(storePrefix + "-STATE-STORE-") // Kafka Streams: <topic>-STATE-STORE-000000000N
	}
	info := &tableInfo[K, V]{node: node, sources: sources, keys: keys, values: values}
	// As Kafka Streams' KTableSource, the table has a store only when Materialized, or
	// when an operation downstream looks values up or needs old values.
	info.materialize = func() {
		if info.store != nil {
			return
		}
		info.store = addStore(b, store, keys, values, o, node)
		info.getter = storeGetter[K, V](store)
	}
	info.enableOld = func(bool) bool {
		info.materialize()
		info.sendOld = true
		return true
	}
	topology.AddProcessor(b.tb, node, supplier(func(ctx processor.Context[K, Change[V]]) (func(processor.Record[K, *V]) error, error) {
		if info.store == nil {
			return func(r processor.Record[K, *V]) error {
				if isNull(r.Key) {
					ctx.Logger().Warn("skipping record due to null key")
					return nil
				}
				return ctx.Forward(processor.WithValue(r, Change[V]{New: r.Value}))
			}, nil
		}
		kv, err := processor.KeyValueStore[K, Timestamped[V]](ctx, store)
		if err != nil {
			return nil, err
		}
		sendOld, cached := info.sendOld, b.cached(o)
		fw := newTableForwarder(ctx, b, cached, store, info.keys, info.values)
		return func(r processor.Record[K, *V]) error {
			if isNull(r.Key) {
				ctx.Logger().Warn("skipping record due to null key")
				return nil
			}
			old, had, err := kv.Get(r.Key)
			if err != nil {
				return err
			}
			if cached && r.Value == nil && !had {
				return nil // a cached store drops the deletion of a key it does not hold
			}
			if err := putOrDelete(kv, r.Key, r.Value, r.Timestamp); err != nil {
				return err
			}
			c := Change[V]{New: r.Value}
			if sendOld && had {
				c.Old = &old.Value
			}
			return fw.forward(processor.WithValue(r, c), had)
		}, nil
	}), parent)
	if o.store != "" {
		info.materialize()
	}
	return Table[K, V]{b: b, t: info}
}

// tableOp adds a table node computing (new, old) values per change; when materialized,
// it keeps its results in a store of its own.
func tableOp[K, V, V2 any](t Table[K, V], prefix string, opts []Option, values serde.Serde[V2], compute func(K, *V) *V2) Table[K, V2] {
	o := collect(opts)
	b := t.b
	name := b.name(o, prefix)
	parent := t.t
	info := &tableInfo[K, V2]{node: name, keyChanged: parent.keyChanged, sources: parent.sources, keys: parent.keys, values: values,
		windowEnd: parent.windowEnd, closeAfter: parent.closeAfter}
	var store string
	if o.store != "" {
		store = o.store
	}
	info.enableOld = func(force bool) bool {
		if store != "" {
			info.sendOld = true
			return true
		}
		if !parent.enableOld(force) {
			return false
		}
		info.sendOld = true
		return true
	}
	topology.AddProcessor(b.tb, name, supplier(func(ctx processor.Context[K, Change[V2]]) (func(processor.Record[K, Change[V]]) error, error) {
		var kv statestore.KeyValueStore[K, Timestamped[V2]]
		if store != "" {
			var err error
			if kv, err = processor.KeyValueStore[K, Timestamped[V2]](ctx, store); err != nil {
				return nil, err
			}
		}
		sendOld, cached := info.sendOld, b.cached(o)
		fw := newTableForwarder(ctx, b, cached && kv != nil, store, parent.keys, values)
		return func(r processor.Record[K, Change[V]]) error {
			c := Change[V2]{New: compute(r.Key, r.Value.New)}
			if sendOld {
				if kv != nil {
					old, ok, err := kv.Get(r.Key)
					if err != nil {
						return err
					}
					if ok {
						c.Old = &old.Value
					}
				} else {
					c.Old = compute(r.Key, r.Value.Old)
				}
				if c.Old == nil && c.New == nil {
					return nil // Kafka Streams: unnecessary to forward
				}
			}
			had := true
			if kv != nil && cached {
				var err error
				if _, had, err = kv.Get(r.Key); err != nil || c.New == nil && !had {
					return err // a cached store drops the deletion of a key it does not hold
				}
			}
			if kv != nil {
				if err := putOrDelete(kv, r.Key, c.New, r.Timestamp); err != nil {
					return err
				}
			}
			return fw.forward(processor.WithValue(r, c), had)
		}, nil
	}), parent.node)
	if store != "" {
		if parent.keys == nil || values == nil {
			b.fail("%s: Materialized(%q) needs the key and value serdes, and they are not known here: pass the value serde", name, store)
		}
		info.store = addStore(b, store, parent.keys, values, o, name)
		info.getter = storeGetter[K, V2](store)
	} else {
		info.derivedFrom = []lookupSource{parent}
		info.getter = func(sp processor.StoreProvider) (getterFunc[K, V2], error) {
			get, err := parent.getter(sp)
			if err != nil {
				return nil, err
			}
			return func(k K) (Timestamped[V2], bool, error) {
				v, ok, err := get(k)
				if err != nil || !ok {
					return Timestamped[V2]{}, false, err
				}
				nv := compute(k, &v.Value)
				if nv == nil {
					return Timestamped[V2]{}, false, nil
				}
				return Timestamped[V2]{Value: *nv, Timestamp: v.Timestamp}, true, nil
			}, nil
		}
	}
	return Table[K, V2]{b: b, t: info}
}

// Filter keeps the values for which keep returns true; a value it drops deletes its
// key downstream (Kafka Streams forwards a tombstone).
func (t Table[K, V]) Filter(keep func(K, V) bool, opts ...Option) Table[K, V] {
	return tableOp(t, "KTABLE-FILTER-", opts, t.info().values, func(k K, v *V) *V {
		if v == nil || !keep(k, *v) {
			return nil
		}
		return v
	})
}

// FilterNot drops the values for which drop returns true.
func (t Table[K, V]) FilterNot(drop func(K, V) bool, opts ...Option) Table[K, V] {
	return t.Filter(func(k K, v V) bool { return !drop(k, v) }, opts...)
}

// TableMapValues maps every value of t with fn; a null result (the nil of V2's type)
// deletes the key. values is needed only with Materialized, for the table's store; it
// may be nil otherwise.
func TableMapValues[K, V, V2 any](t Table[K, V], fn func(K, V) V2, values serde.Serde[V2], opts ...Option) Table[K, V2] {
	return tableOp(t, "KTABLE-MAPVALUES-", opts, values, func(k K, v *V) *V2 {
		if v == nil {
			return nil
		}
		nv := fn(k, *v)
		if isNull(nv) {
			return nil
		}
		return &nv
	})
}

// ToStream is the stream of the table's updates: each new value, and a nil value for
// each deletion (Kafka Streams' toStream, whose deletions are null values). Write it
// with serde.Nullable around the value serde, so deletions become tombstones.
//
// It is a function, not a method, because Go forbids the cycle Table[K, V] → Stream[K,
// *V] → Table[K, *V] → … among methods of generic types.
func ToStream[K, V any](t Table[K, V], opts ...Option) Stream[K, *V] {
	name := t.b.nodeName(opts, "KTABLE-TOSTREAM-")
	topology.AddProcessor(t.b.tb, name, stateless(func(ctx processor.Context[K, *V], r processor.Record[K, Change[V]]) error {
		return ctx.Forward(processor.WithValue(r, r.Value.New))
	}), t.t.node)
	return Stream[K, *V]{b: t.b, node: name, keyChanged: t.t.keyChanged, sources: t.t.sources}
}
