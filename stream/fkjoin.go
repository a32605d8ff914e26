package stream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"strconv"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// The foreign-key join is Kafka Streams' subscription/response protocol
// (KTableImpl.doJoinOnForeignKey and kstream/internals/foreignkeyjoin): the left table
// sends a subscription per update to the partition of its foreign key; there a store of
// subscriptions (foreign key, primary key) meets the right table, and responses go back
// to the partition of the primary key, where a response counts only if the left value
// it was computed for (by hash) is still current.

// instruction is Kafka Streams' SubscriptionWrapper.Instruction.
type instruction byte

const (
	deleteKeyNoPropagate instruction = iota
	deleteKeyAndPropagate
	propagateNullIfNoFKValAvailable
	propagateOnlyIfFKValAvailable
)

// subscription is a SubscriptionWrapper: the hash of the left value (nil for a null
// value), the instruction, and the primary key. nullFK marks a subscription of a left
// join whose foreign key is null: Kafka Streams sends it with a null key, which eddy's
// typed keys cannot carry, so it travels with a zero key and this mark.
type subscription[K any] struct {
	hash   []byte
	inst   instruction
	nullFK bool
	pk     K
}

func subscriptionSerde[K any](keys serde.Serde[K]) serde.Serde[subscription[K]] {
	return serde.Funcs("Subscription["+serde.Name(keys)+"]",
		func(topic string, s subscription[K]) ([]byte, error) {
			pk, err := keys.Serialize(topic, s.pk)
			if err != nil {
				return nil, err
			}
			inst := byte(s.inst)
			if s.nullFK {
				inst |= 0x80
			}
			out := []byte{inst, byte(len(s.hash))}
			out = append(out, s.hash...)
			return append(out, pk...), nil
		},
		func(topic string, data []byte) (subscription[K], error) {
			var s subscription[K]
			if len(data) < 2 || len(data) < 2+int(data[1]) {
				return s, errors.New("a subscription is too short")
			}
			s.inst = instruction(data[0] &^ 0x80)
			s.nullFK = data[0]&0x80 != 0
			if n := int(data[1]); n > 0 {
				s.hash = bytes.Clone(data[2 : 2+n])
			}
			pk, err := keys.Deserialize(topic, data[2+int(data[1]):])
			s.pk = pk
			return s, err
		})
}

// response is a SubscriptionResponseWrapper: the hash of the left value the response
// was computed for, and the foreign value (nil for none).
type response[VO any] struct {
	hash    []byte
	foreign *VO
}

func responseSerde[VO any](values serde.Serde[VO]) serde.Serde[response[VO]] {
	return serde.Funcs("Response["+serde.Name(values)+"]",
		func(topic string, r response[VO]) ([]byte, error) {
			out := append([]byte{byte(len(r.hash))}, r.hash...)
			if r.foreign == nil {
				return append(out, 0), nil
			}
			vb, err := values.Serialize(topic, *r.foreign)
			if err != nil {
				return nil, err
			}
			return append(append(out, 1), vb...), nil
		},
		func(topic string, data []byte) (response[VO], error) {
			var r response[VO]
			if len(data) < 1 || len(data) < 2+int(data[0]) {
				return r, errors.New("a response is too short")
			}
			n := int(data[0])
			if n > 0 {
				r.hash = bytes.Clone(data[1 : 1+n])
			}
			if data[1+n] == 1 {
				v, err := values.Deserialize(topic, data[2+n:])
				if err != nil {
					return r, err
				}
				r.foreign = &v
			}
			return r, nil
		})
}

// valueHash hashes a serialized left value (Kafka Streams uses murmur3-128; any good
// 128-bit hash does, as only equality matters); nil for null.
func valueHash(b []byte) []byte {
	if b == nil {
		return nil
	}
	h := fnv.New128a()
	h.Write(b)
	return h.Sum(nil)
}

// combinedKey is Kafka Streams' CombinedKeySchema: the foreign key's length (4 bytes,
// big-endian), its bytes, then the primary key's bytes; a prefix scan by foreign key
// finds its subscribers in primary-key byte order.
func combinedKey(fk, pk []byte) []byte {
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(fk)+len(pk)), uint32(len(fk)))
	return append(append(out, fk...), pk...)
}

func fkJoin[K, V, KO, VO, VR any](l Table[K, V], r Table[KO, VO], fk func(V) KO, left bool, joiner func(V, *VO) VR, values serde.Serde[VR], opts []Option) Table[K, VR] {
	b := l.b
	l.info() // the zero Table's panic
	if b.foreign("foreign-key join of table "+strconv.Quote(l.Name()), "Table", r.Name(), r.b) {
		return unusableTable[K, VR](b, "foreign-key join")
	}
	o := collect(opts)
	if l.t.keys == nil || l.t.values == nil || r.t.keys == nil {
		b.fail("foreign-key join of %q with %q: the tables' key and value serdes are not known (the left table's and the right table's key serde are needed)", l.t.node, r.t.node)
		return Table[K, VR]{b: b, t: &tableInfo[K, VR]{}}
	}
	pkSerde, lvSerde, fkSerde := l.t.keys, l.t.values, r.t.keys
	l.t.enableOld(true)
	r.t.enableOld(true)

	// Left side: subscriptions, keyed by foreign key, to the right side's partitions.
	send := b.newName("KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-")
	topology.AddProcessor(b.tb, send, stateless(func(ctx processor.Context[KO, subscription[K]], rec processor.Record[K, Change[V]]) error {
		var hash []byte
		hashed := false
		fwd := func(foreign KO, nullFK bool, inst instruction) error {
			nullFK = nullFK || isNull(foreign)
			if !hashed {
				hashed = true
				if rec.Value.New != nil {
					vb, err := lvSerde.Serialize("", *rec.Value.New)
					if err != nil {
						return err
					}
					hash = valueHash(vb)
				}
			}
			return ctx.Forward(processor.WithKeyValue(rec, foreign, subscription[K]{hash: hash, inst: inst, nullFK: nullFK, pk: rec.Key}))
		}
		newV, oldV := rec.Value.New, rec.Value.Old
		var newFK, oldFK KO
		newNull, oldNull := true, true
		if newV != nil {
			newFK = fk(*newV)
			newNull = isNull(newFK)
		}
		if oldV != nil {
			oldFK = fk(*oldV)
			oldNull = isNull(oldFK)
		}
		changed := newNull != oldNull || !newNull && !sameKey(fkSerde, newFK, oldFK)
		// Kafka Streams 4.1's SubscriptionSendProcessorSupplier, instruction for
		// instruction.
		if left {
			if oldV != nil {
				if !oldNull && changed {
					if err := fwd(oldFK, false, deleteKeyNoPropagate); err != nil {
						return err
					}
				}
				// also for a deletion, whose foreign key is null: it answers with a tombstone
				return fwd(newFK, newNull, propagateNullIfNoFKValAvailable)
			}
			if newV != nil {
				return fwd(newFK, newNull, propagateNullIfNoFKValAvailable)
			}
			return nil
		}
		switch {
		case oldV != nil && oldNull && newNull:
			return nil // skipped: null foreign key
		case oldV != nil && oldNull:
			return fwd(newFK, false, propagateOnlyIfFKValAvailable)
		case oldV != nil && newNull:
			return fwd(oldFK, false, deleteKeyAndPropagate)
		case oldV != nil && changed:
			if err := fwd(oldFK, false, deleteKeyNoPropagate); err != nil {
				return err
			}
			// "unset" the result of the old foreign key if the new one has no value
			return fwd(newFK, false, propagateNullIfNoFKValAvailable)
		case oldV != nil: // unchanged foreign key
			return fwd(newFK, false, propagateOnlyIfFKValAvailable)
		case newV != nil && !newNull:
			return fwd(newFK, false, propagateOnlyIfFKValAvailable)
		}
		return nil
	}), l.t.node)
	topology.AddRepartition(b.tb, send+"-topic", fkSerde, subscriptionSerde(pkSerde), send)

	// Right side: the subscription store, joined with the right table's values.
	store := b.newName("KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-")
	recv := b.newName("KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-")
	respTopic := b.newName("KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-")
	subSerde := subscriptionSerde(pkSerde)
	topology.AddProcessor(b.tb, recv, supplier(func(ctx processor.Context[K, response[VO]]) (func(processor.Record[KO, subscription[K]]) error, error) {
		subs, err := processor.KeyValueStore[[]byte, Timestamped[subscription[K]]](ctx, store)
		if err != nil {
			return nil, err
		}
		get, err := r.t.getter(ctx)
		if err != nil {
			return nil, err
		}
		return func(rec processor.Record[KO, subscription[K]]) error {
			s := rec.Value
			if s.nullFK {
				// Kafka Streams: a null foreign key keeps no subscription and finds no
				// foreign value
				if s.inst != propagateNullIfNoFKValAvailable {
					return nil
				}
				return ctx.Forward(processor.Record[K, response[VO]]{Key: s.pk, Value: response[VO]{hash: s.hash}, Timestamp: rec.Timestamp, Headers: rec.Headers})
			}
			fb, err := fkSerde.Serialize("", rec.Key)
			if err != nil {
				return err
			}
			pb, err := pkSerde.Serialize("", s.pk)
			if err != nil {
				return err
			}
			ck := combinedKey(fb, pb)
			if s.inst == deleteKeyAndPropagate || s.inst == deleteKeyNoPropagate {
				err = subs.Delete(ck)
			} else {
				err = subs.Put(ck, Timestamped[subscription[K]]{Value: s, Timestamp: rec.Timestamp})
			}
			if err != nil {
				return err
			}
			fv, ok, err := get(rec.Key)
			if err != nil {
				return err
			}
			ts := rec.Timestamp
			var foreign *VO
			if ok {
				foreign = &fv.Value
				if fv.Timestamp.After(ts) {
					ts = fv.Timestamp
				}
			}
			out := processor.Record[K, response[VO]]{Key: s.pk, Timestamp: ts, Headers: rec.Headers}
			switch s.inst {
			case deleteKeyAndPropagate:
				out.Value = response[VO]{hash: s.hash}
			case propagateNullIfNoFKValAvailable:
				out.Value = response[VO]{hash: s.hash, foreign: foreign}
			case propagateOnlyIfFKValAvailable:
				if foreign == nil {
					return nil
				}
				out.Value = response[VO]{hash: s.hash, foreign: foreign}
			default:
				return nil
			}
			return ctx.Forward(out)
		}, nil
	}), send+"-topic")
	r.t.connectGetter(recv)

	// Right table updates: a response to every subscriber of the foreign key.
	fwdRight := b.newName("KTABLE-FK-JOIN-SUBSCRIPTION-FOREIGN-")
	topology.AddProcessor(b.tb, fwdRight, supplier(func(ctx processor.Context[K, response[VO]]) (func(processor.Record[KO, Change[VO]]) error, error) {
		subs, err := processor.KeyValueStore[[]byte, Timestamped[subscription[K]]](ctx, store)
		if err != nil {
			return nil, err
		}
		return func(rec processor.Record[KO, Change[VO]]) error {
			if isNull(rec.Key) {
				return nil
			}
			fb, err := fkSerde.Serialize("", rec.Key)
			if err != nil {
				return err
			}
			prefix := combinedKey(fb, nil)
			it, err := subs.Prefix(prefix)
			if err != nil {
				return err
			}
			var outs []processor.Record[K, response[VO]]
			for it.Next() {
				s := it.Value().Value
				outs = append(outs, processor.Record[K, response[VO]]{Key: s.pk, Value: response[VO]{hash: s.hash, foreign: rec.Value.New}, Timestamp: rec.Timestamp, Headers: rec.Headers})
			}
			if err := errors.Join(it.Err(), it.Close()); err != nil {
				return err
			}
			for _, out := range outs {
				if err := ctx.Forward(out); err != nil {
					return err
				}
			}
			return nil
		}, nil
	}), r.t.node)
	subStore := &pendingStore{name: store, processors: []string{recv, fwdRight}}
	subStore.add = func(procs []string) {
		topology.AddKeyValueStore(b.tb, store, serde.Bytes(), timestampedSerde(subSerde), procs...)
	}
	b.stores = append(b.stores, subStore)
	topology.AddRepartition(b.tb, respTopic+"-topic", pkSerde, responseSerde(r.t.valuesOrFail(b)), recv, fwdRight)

	// Left side again: a response counts if the left value it answers is still current.
	respJoin := b.newName("KTABLE-FK-JOIN-OUTPUT-")
	result := b.name(o, "KTABLE-FK-JOIN-RESULT-")
	res := &tableInfo[K, VR]{node: result, keys: pkSerde, values: values, sources: l.t.sources}
	topology.AddProcessor(b.tb, respJoin, supplier(func(ctx processor.Context[K, Change[VR]]) (func(processor.Record[K, response[VO]]) error, error) {
		get, err := l.t.getter(ctx)
		if err != nil {
			return nil, err
		}
		return func(rec processor.Record[K, response[VO]]) error {
			cur, ok, err := get(rec.Key)
			if err != nil {
				return err
			}
			var curHash []byte
			if ok {
				vb, err := lvSerde.Serialize("", cur.Value)
				if err != nil {
					return err
				}
				curHash = valueHash(vb)
			}
			if !bytes.Equal(curHash, rec.Value.hash) || (curHash == nil) != (rec.Value.hash == nil) {
				return nil // stale: the left value changed since
			}
			var c Change[VR] // Kafka Streams: a tombstone unless there is something to join
			if ok && (rec.Value.foreign != nil || left) {
				c.New = nullable(joiner(cur.Value, rec.Value.foreign))
			}
			return ctx.Forward(processor.WithValue(rec, c))
		}, nil
	}), respTopic+"-topic")
	l.t.connectGetter(respJoin)
	// The result node is Kafka Streams' KTableSource: materialized when asked, or when
	// a downstream operation needs old values or lookups.
	resStore := o.store
	res.materialize = func() {
		if resStore != "" && res.store != nil {
			return
		}
		if values == nil {
			b.fail("%s: an operation downstream reads the foreign-key join's results, so they must be kept in a store: pass the value serde", result)
			return
		}
		if resStore == "" {
			resStore = b.newName("KTABLE-FK-JOIN-OUTPUT-STATE-STORE-")
		}
		res.store = addStore(b, resStore, pkSerde, values, o, result)
		res.getter = storeGetter[K, VR](resStore)
	}
	res.enableOld = func(bool) bool {
		res.materialize()
		res.sendOld = true
		return true
	}
	topology.AddProcessor(b.tb, result, supplier(func(ctx processor.Context[K, Change[VR]]) (func(processor.Record[K, Change[VR]]) error, error) {
		if resStore == "" {
			return func(r processor.Record[K, Change[VR]]) error { return ctx.Forward(r) }, nil
		}
		kv, err := processor.KeyValueStore[K, Timestamped[VR]](ctx, resStore)
		if err != nil {
			return nil, err
		}
		sendOld, cached := res.sendOld, b.cached(o)
		fw := newTableForwarder(ctx, b, cached, resStore, pkSerde, values)
		return func(r processor.Record[K, Change[VR]]) error {
			old, had, err := kv.Get(r.Key)
			if err != nil {
				return err
			}
			if cached && r.Value.New == nil && !had {
				return nil // a cached store drops the deletion of a key it does not hold
			}
			if err := putOrDelete(kv, r.Key, r.Value.New, r.Timestamp); err != nil {
				return err
			}
			c := Change[VR]{New: r.Value.New}
			if sendOld && had {
				c.Old = &old.Value
			}
			return fw.forward(processor.WithValue(r, c), had)
		}, nil
	}), respJoin)
	// eddy sizes repartition topics by their writer, not by the right table, so both
	// tables must have equal partition counts.
	b.copartition(l.t.sources, r.t.sources)
	if resStore != "" {
		res.materialize()
	}
	return Table[K, VR]{b: b, t: res}
}

func (t *tableInfo[K, V]) valuesOrFail(b *Builder) serde.Serde[V] {
	if t.values == nil {
		b.fail("table %q: its value serde is not known here, and a foreign-key join sends its values through a topic", t.node)
		return serde.Funcs[V]("unknown", func(string, V) ([]byte, error) { return nil, errors.New("unknown serde") }, func(string, []byte) (V, error) {
			var zero V
			return zero, errors.New("unknown serde")
		})
	}
	return t.values
}

// ForeignKeyJoin joins each value of l with the value of r whose key fk(value) gives
// (Kafka Streams' KTable.join(other, foreignKeyExtractor, joiner)): a key of l has a
// result while r has its foreign key. The result is keyed like l. Values with a null
// foreign key are skipped. values is needed only with Materialized.
func ForeignKeyJoin[K, V, KO, VO, VR any](l Table[K, V], r Table[KO, VO], fk func(V) KO, joiner func(V, VO) VR, values serde.Serde[VR], opts ...Option) Table[K, VR] {
	return fkJoin(l, r, fk, false, func(v V, vo *VO) VR { return joiner(v, *vo) }, values, opts)
}

// ForeignKeyLeftJoin is ForeignKeyJoin that keeps the values of l whose foreign key r
// lacks: joiner gets nil.
func ForeignKeyLeftJoin[K, V, KO, VO, VR any](l Table[K, V], r Table[KO, VO], fk func(V) KO, joiner func(V, *VO) VR, values serde.Serde[VR], opts ...Option) Table[K, VR] {
	return fkJoin(l, r, fk, true, joiner, values, opts)
}
