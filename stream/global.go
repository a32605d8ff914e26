package stream

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// GlobalTable is a table every instance of the application keeps in full, from all
// partitions of its topic (Kafka Streams' GlobalKTable): streams join it by any key
// (GlobalJoin), with no co-partitioning. It is read-only to the topology; its topic
// updates it.
type GlobalTable[K, V any] struct {
	b     *Builder
	store string
	topic string
}

// StoreName is the name of the global table's store, for eddy.Query (any instance
// answers for every key) and processor-API nodes (which read it as a
// statestore.KeyValueStore[K, Timestamped[V]] without attaching it).
func (g GlobalTable[K, V]) StoreName() string { return g.store }

// GlobalTableFrom reads a global table from a topic (builder.globalTable): each record
// puts its value under its key with its timestamp, a tombstone deletes the key, records
// with a null key are dropped. The store is named <topic>-STATE-STORE-000000000N unless
// Materialized. Every instance reads the whole topic into it before its tasks start,
// then keeps reading it (see topology.AddGlobalStore); the topic is its only
// changelog.
func GlobalTableFrom[K, V any](b *Builder, keys serde.Serde[K], values serde.Serde[V], topic string, opts ...Option) GlobalTable[K, V] {
	o := collect(opts)
	store := o.store
	if store == "" {
		store = b.newName(topic + "-STATE-STORE-")
	}
	// Kafka Streams names a source and a KTableSource for it: keep the counter in step.
	b.name(o, "KSTREAM-SOURCE-")
	b.newName("KTABLE-SOURCE-")
	if o.withoutChangelog || o.withoutCaching {
		b.fail("global table of %q: WithoutChangelog and WithoutCaching do not apply (its topic is its changelog; it forwards nothing)", topic)
	}
	g := topology.AddGlobalStoreAs(b.tb, store, topic, keys, values, timestampedSerde(values),
		func(value []byte, ts time.Time) []byte {
			out := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(value)), uint64(ts.UnixMilli()))
			return append(out, value...)
		})
	topology.QueryValuesAs(g.Store(), valueOnlySerde(values))
	return GlobalTable[K, V]{b: b, store: store, topic: topic}
}

// streamGlobalJoin is Kafka Streams' KStreamKTableJoinProcessor with a key mapper: a
// record with a null value, or whose mapped key is null, is dropped (a left join keeps
// a null mapped key with a non-null value and finds nothing for it).
func streamGlobalJoin[K, V, KG, VG, VR any](s Stream[K, V], g GlobalTable[KG, VG], prefix string, left bool, key func(K, V) (KG, bool), joiner func(K, V, *VG) VR, opts []Option) Stream[K, VR] {
	if s.b.foreign("join of stream "+strconv.Quote(s.node), "GlobalTable", g.store, g.b) {
		return unusable[K, VR](s.b, "global table join")
	}
	name := s.b.nodeName(opts, prefix)
	store := g.store
	topology.AddProcessor(s.b.tb, name, supplier(func(ctx processor.Context[K, VR]) (func(processor.Record[K, V]) error, error) {
		kv, err := processor.KeyValueStore[KG, Timestamped[VG]](ctx, store)
		if err != nil {
			return nil, err
		}
		return func(r processor.Record[K, V]) error {
			mapped, ok := key(r.Key, r.Value)
			noKey := !ok || isNull(mapped)
			if isNull(r.Value) || noKey && !left {
				return nil // Kafka Streams: "Skipping record due to null join key or value"
			}
			var other *VG
			if !noKey {
				v, ok, err := kv.Get(mapped)
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
			return ctx.Forward(processor.WithValue(r, joiner(r.Key, r.Value, other)))
		}, nil
	}), s.node)
	// The key may have changed upstream: a global table is complete in every task.
	return Stream[K, VR]{b: s.b, node: name, keyChanged: s.keyChanged, sources: s.sources}
}

// GlobalJoin joins each stream record with the global table's value of key(k, v)
// (KStream.join(GlobalKTable, KeyValueMapper, ValueJoiner)); key returns false (or a
// nil key) where Kafka Streams' mapper returns null. Records whose mapped key the table
// lacks, or is null, are dropped, as are records with a null value; key is called for
// every record, as Kafka Streams calls its mapper, null values included. The
// result keeps the stream record's key and timestamp. No co-partitioning is needed, nor
// a repartition after a key change.
func GlobalJoin[K, V, KG, VG, VR any](s Stream[K, V], g GlobalTable[KG, VG], key func(K, V) (KG, bool), joiner func(K, V, VG) VR, opts ...Option) Stream[K, VR] {
	return streamGlobalJoin(s, g, "KSTREAM-JOIN-", false, key, func(k K, v V, vg *VG) VR { return joiner(k, v, *vg) }, opts)
}

// GlobalLeftJoin is GlobalJoin that keeps the records the table has no value for
// (joiner gets nil), a null mapped key included.
func GlobalLeftJoin[K, V, KG, VG, VR any](s Stream[K, V], g GlobalTable[KG, VG], key func(K, V) (KG, bool), joiner func(K, V, *VG) VR, opts ...Option) Stream[K, VR] {
	return streamGlobalJoin(s, g, "KSTREAM-LEFTJOIN-", true, key, joiner, opts)
}
