package stream

import (
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
	"strconv"
)

// streamTableJoin is Kafka Streams' KStreamKTableJoinProcessor: a stream record with a
// null key or value is dropped (a left join keeps a null key with a non-null value, and
// finds nothing for it); otherwise the table's current value of the key is looked up, and
// the joiner's result keeps the stream record's key and timestamp.
func streamTableJoin[K, V, VT, VR any](s Stream[K, V], t Table[K, VT], prefix string, left bool, joiner func(V, *VT) VR, opts []Option) Stream[K, VR] {
	b := s.b
	if b.foreign("join of stream "+strconv.Quote(s.node), "Table", t.Name(), t.b) {
		return unusable[K, VR](b, "join")
	}
	if s.keyChanged {
		// As Kafka Streams (KStreamImpl.doStreamTableJoin → repartitionForJoin): the
		// stream goes through <app>-<node>-join-repartition first, so its records meet the
		// table's in the task of their new key, with the serdes known upstream.
		keys, _ := serdeOf[K](s.keys).(serde.Serde[K])
		if keys == nil {
			keys = t.t.keys
		}
		values, _ := s.values.(serde.Serde[V])
		if keys == nil || values == nil {
			b.fail("join of stream %q with table %q: the stream's key may have changed upstream (selectKey, map, flatMap or process), so it must be repartitioned by its new key, and no serde of its %s is known upstream: call Repartition(keys, values) on it first", s.node, t.t.node, map[bool]string{true: "values", false: "keys"}[keys != nil])
		} else {
			s = repartition(s, s.node+"-join", keys, values)
		}
	}
	name := b.nodeName(opts, prefix)
	info := t.t
	topology.AddProcessor(b.tb, name, supplier(func(ctx processor.Context[K, VR]) (func(processor.Record[K, V]) error, error) {
		get, err := info.getter(ctx)
		if err != nil {
			return nil, err
		}
		return func(r processor.Record[K, V]) error {
			if isNull(r.Value) || isNull(r.Key) && !left {
				return nil // Kafka Streams: "Skipping record due to null join key or value"
			}
			var other *VT
			if !isNull(r.Key) {
				v, ok, err := get(r.Key)
				if err != nil {
					return err
				}
				if ok {
					other = &v.Value
				}
			}
			if other == nil && !left {
				return nil
			}
			return ctx.Forward(processor.WithValue(r, joiner(r.Value, other)))
		}, nil
	}), s.node)
	info.connectGetter(name)
	b.copartition(s.sources, info.sources)
	return Stream[K, VR]{b: b, node: name, sources: s.sources}
}

// Join joins each stream record with the table's value of its key; records whose key
// the table lacks are dropped. The result has the stream record's key and timestamp.
// The stream and the table must be co-partitioned (Build and the runtime check it).
func Join[K, V, VT, VR any](s Stream[K, V], t Table[K, VT], joiner func(V, VT) VR, opts ...Option) Stream[K, VR] {
	return streamTableJoin(s, t, "KSTREAM-JOIN-", false, func(v V, vt *VT) VR { return joiner(v, *vt) }, opts)
}

// LeftJoin is Join that keeps the records whose key the table lacks: joiner gets nil.
func LeftJoin[K, V, VT, VR any](s Stream[K, V], t Table[K, VT], joiner func(V, *VT) VR, opts ...Option) Stream[K, VR] {
	return streamTableJoin(s, t, "KSTREAM-LEFTJOIN-", true, joiner, opts)
}

// joinMode says what a table-table join processor does with an update of its side
// (Kafka Streams' KTableKTable{Inner,Left,Right,Outer}Join).
type joinMode int

const (
	joinInner joinMode = iota // both sides of an inner join
	joinLeft                  // the left side of a left join
	joinRight                 // the right side of a left join
	joinOuter                 // both sides of an outer join
)

// tableJoinSide adds the processor joining the updates of this with the current values
// of other. j gets this side's value first.
func tableJoinSide[K, VA, VB, VR any](b *Builder, name string, mode joinMode, this *tableInfo[K, VA], other *tableInfo[K, VB], result *tableInfo[K, VR], j func(a *VA, o *VB) *VR) {
	topology.AddProcessor(b.tb, name, supplier(func(ctx processor.Context[K, Change[VR]]) (func(processor.Record[K, Change[VA]]) error, error) {
		get, err := other.getter(ctx)
		if err != nil {
			return nil, err
		}
		sendOld := result.sendOld
		return func(r processor.Record[K, Change[VA]]) error {
			if isNull(r.Key) {
				return nil
			}
			ov, ok, err := get(r.Key)
			if err != nil {
				return err
			}
			var o *VB
			ts := r.Timestamp
			if ok {
				o = &ov.Value
				if ov.Timestamp.After(ts) {
					ts = ov.Timestamp
				}
			} else if mode == joinInner || mode == joinRight || r.Value.New == nil && r.Value.Old == nil {
				return nil
			}
			var c Change[VR]
			switch mode {
			case joinInner, joinLeft:
				if r.Value.New != nil {
					c.New = j(r.Value.New, o)
				}
				if sendOld && r.Value.Old != nil {
					c.Old = j(r.Value.Old, o)
				}
			case joinRight:
				c.New = j(r.Value.New, o)
				if sendOld {
					c.Old = j(r.Value.Old, o)
				}
			case joinOuter:
				if o != nil || r.Value.New != nil {
					c.New = j(r.Value.New, o)
				}
				if sendOld && (o != nil || r.Value.Old != nil) {
					c.Old = j(r.Value.Old, o)
				}
			}
			return ctx.Forward(processor.Record[K, Change[VR]]{Key: r.Key, Value: c, Timestamp: ts, Headers: r.Headers})
		}, nil
	}), this.node)
	other.connectGetter(name)
}

// nullable turns a joiner's result into a pointer, nil for null.
func nullable[V any](v V) *V {
	if isNull(v) {
		return nil
	}
	return &v
}

func tableTableJoin[K, VL, VR, VO any](l Table[K, VL], r Table[K, VR], kind string, modeL, modeR joinMode, j func(*VL, *VR) *VO, values serde.Serde[VO], opts []Option) Table[K, VO] {
	b := l.b
	if b.foreign("join of table "+strconv.Quote(l.Name()), "Table", r.Name(), r.b) {
		return unusableTable[K, VO](b, "join")
	}
	o := collect(opts)
	if kind == "" {
		kind = "JOIN"
	}
	thisName := b.newName("KTABLE-" + kind + "THIS-")
	otherName := b.newName("KTABLE-" + kind + "OTHER-")
	merge := b.name(o, "KTABLE-MERGE-")
	if modeL == joinLeft || modeL == joinOuter {
		l.t.enableOld(true)
	}
	if modeL == joinOuter {
		r.t.enableOld(true)
	}
	res := &tableInfo[K, VO]{node: merge, keys: l.t.keys, values: values, sources: append(append([]string(nil), l.t.sources...), r.t.sources...)}
	var store string
	if o.store != "" {
		store = o.store
	}
	res.enableOld = func(force bool) bool {
		res.sendOld = true
		l.t.enableOld(true)
		r.t.enableOld(true)
		return true
	}
	tableJoinSide(b, thisName, modeL, l.t, r.t, res, j)
	tableJoinSide(b, otherName, modeR, r.t, l.t, res, func(rv *VR, lv *VL) *VO { return j(lv, rv) })
	topology.AddProcessor(b.tb, merge, materializer(b, store, b.cached(o), l.t.keys, values), thisName, otherName)
	b.copartition(l.t.sources, r.t.sources)
	if store != "" {
		if l.t.keys == nil || values == nil {
			b.fail("%s: Materialized(%q) needs the key and value serdes: pass the value serde", merge, store)
		}
		res.store = addStore(b, store, l.t.keys, values, o, merge)
		res.getter = storeGetter[K, VO](store)
		return Table[K, VO]{b: b, t: res}
	}
	// Not materialized: read both sides and join on the fly, as Kafka Streams' join
	// value getters do.
	res.derivedFrom = []lookupSource{l.t, r.t}
	res.getter = func(sp processor.StoreProvider) (getterFunc[K, VO], error) {
		gl, err := l.t.getter(sp)
		if err != nil {
			return nil, err
		}
		gr, err := r.t.getter(sp)
		if err != nil {
			return nil, err
		}
		return func(k K) (Timestamped[VO], bool, error) {
			lv, lok, err := gl(k)
			if err != nil {
				return Timestamped[VO]{}, false, err
			}
			rv, rok, err := gr(k)
			if err != nil {
				return Timestamped[VO]{}, false, err
			}
			var lp *VL
			var rp *VR
			ts := lv.Timestamp
			if lok {
				lp = &lv.Value
			}
			if rok {
				rp = &rv.Value
				if !lok || rv.Timestamp.After(ts) {
					ts = rv.Timestamp
				}
			}
			if !lok && (modeL != joinOuter || !rok) || !rok && modeL == joinInner {
				return Timestamped[VO]{}, false, nil
			}
			out := j(lp, rp)
			if out == nil {
				return Timestamped[VO]{}, false, nil
			}
			return Timestamped[VO]{Value: *out, Timestamp: ts}, true, nil
		}, nil
	}
	return Table[K, VO]{b: b, t: res}
}

// materializer is a table node that passes changes on and, when store is not "",
// keeps the new values in it (Kafka Streams' KTableKTableJoinMerger and the source of
// a foreign-key join's result).
func materializer[K, V any](b *Builder, store string, cached bool, keys serde.Serde[K], values serde.Serde[V]) processor.Supplier[K, Change[V], K, Change[V]] {
	return supplier(func(ctx processor.Context[K, Change[V]]) (func(processor.Record[K, Change[V]]) error, error) {
		if store == "" {
			return func(r processor.Record[K, Change[V]]) error { return ctx.Forward(r) }, nil
		}
		kv, err := processor.KeyValueStore[K, Timestamped[V]](ctx, store)
		if err != nil {
			return nil, err
		}
		fw := newTableForwarder(ctx, b, cached, store, keys, values)
		return func(r processor.Record[K, Change[V]]) error {
			had := true
			if cached {
				var err error
				if _, had, err = kv.Get(r.Key); err != nil || r.Value.New == nil && !had {
					return err // a cached store drops the deletion of a key it does not hold
				}
			}
			if err := putOrDelete(kv, r.Key, r.Value.New, r.Timestamp); err != nil {
				return err
			}
			return fw.forward(r, had)
		}, nil
	})
}

// TableJoin is the inner join of two tables on their key: a key has a result while both
// tables have it. The result's timestamp is the larger of the two sides'. values is
// needed only with Materialized.
func TableJoin[K, VL, VR, VO any](l Table[K, VL], r Table[K, VR], joiner func(VL, VR) VO, values serde.Serde[VO], opts ...Option) Table[K, VO] {
	return tableTableJoin(l, r, "", joinInner, joinInner, func(a *VL, b *VR) *VO { return nullable(joiner(*a, *b)) }, values, opts)
}

// TableLeftJoin is the left join of two tables: a key has a result while l has it;
// joiner gets nil for a key r lacks.
func TableLeftJoin[K, VL, VR, VO any](l Table[K, VL], r Table[K, VR], joiner func(VL, *VR) VO, values serde.Serde[VO], opts ...Option) Table[K, VO] {
	return tableTableJoin(l, r, "", joinLeft, joinRight, func(a *VL, b *VR) *VO { return nullable(joiner(*a, b)) }, values, opts)
}

// TableOuterJoin is the outer join of two tables: a key has a result while either
// table has it; joiner gets nil for the side that lacks it.
func TableOuterJoin[K, VL, VR, VO any](l Table[K, VL], r Table[K, VR], joiner func(*VL, *VR) VO, values serde.Serde[VO], opts ...Option) Table[K, VO] {
	return tableTableJoin(l, r, "OUTER", joinOuter, joinOuter, func(a *VL, b *VR) *VO { return nullable(joiner(a, b)) }, values, opts)
}
