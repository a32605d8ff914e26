package stream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/eddy-streams/eddy/internal/cache"
	"github.com/eddy-streams/eddy/internal/timestate"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
)

// ErrBufferFull is wrapped by the error that stops a task whose suppression buffer
// outgrew its BufferConfig with the shut-down policy (ShutDownWhenFull).
var ErrBufferFull = errors.New("suppression buffer full")

// Suppressed says how Table.Suppress holds a table's updates back (Kafka Streams'
// Suppressed): UntilWindowCloses or UntilTimeLimit.
type Suppressed struct {
	untilClose bool
	limit      time.Duration
	buf        BufferConfig
}

// UntilWindowCloses emits only the final result of each window of a windowed table:
// its last value, once the window has closed — when the suppression's own observed
// stream time (the largest timestamp of the updates that reached it) is at least the
// window's end plus the grace period of the windowed aggregation above (for sessions:
// gap plus grace). Updates that delete a window are not emitted. It applies to windowed
// tables only (and tables derived from one); the buffer must not emit early
// (EmitEarlyWhenFull is a Build error), as with Kafka Streams' StrictBufferConfig.
func UntilWindowCloses(buf BufferConfig) Suppressed {
	return Suppressed{untilClose: true, buf: buf}
}

// UntilTimeLimit holds each key's updates back until d of stream time has passed
// since the first update buffered for the key (the suppression's observed stream time
// at least the update's timestamp plus d), then emits the key's latest value, or its
// deletion. Stream time only advances with records: no wall-clock time is involved,
// as in Kafka Streams.
func UntilTimeLimit(d time.Duration, buf BufferConfig) Suppressed {
	return Suppressed{limit: d, buf: buf}
}

// BufferConfig bounds a suppression buffer and says what happens when it is full.
type BufferConfig struct {
	maxRecords int64
	maxBytes   int64
	emitEarly  bool
	set        bool
}

// Unbounded is a buffer without bounds: it holds what it must (Kafka Streams'
// BufferConfig.unbounded). It is kept in a store, so it is bounded by the disk, not by
// memory (unless the operation is InMemory).
func Unbounded() BufferConfig {
	return BufferConfig{maxRecords: math.MaxInt64, maxBytes: math.MaxInt64, set: true}
}

// MaxRecords bounds the buffer to n keys. When it is full the task stops with an error
// (ShutDownWhenFull) unless EmitEarlyWhenFull is chosen. Kafka Streams' maxRecords
// defaults to emitting early; eddy defaults to the policy that never changes the
// results, and says so when it stops.
func MaxRecords(n int) BufferConfig {
	return BufferConfig{maxRecords: int64(n), maxBytes: math.MaxInt64, set: true}
}

// MaxBytes bounds the buffer to n bytes (keys, values, old and prior values and the
// record context, estimated as Kafka Streams does); see MaxRecords for the full policy.
func MaxBytes(n int64) BufferConfig {
	return BufferConfig{maxRecords: math.MaxInt64, maxBytes: n, set: true}
}

// ShutDownWhenFull makes a full buffer stop its task with an error (wrapping
// ErrBufferFull) that names the store and its bound: the default.
func (b BufferConfig) ShutDownWhenFull() BufferConfig { b.emitEarly = false; return b }

// EmitEarlyWhenFull makes a full buffer emit its oldest entries until it is within its
// bounds again: results are emitted before their time. Only with UntilTimeLimit.
func (b BufferConfig) EmitEarlyWhenFull() BufferConfig { b.emitEarly = true; return b }

// describe is the bound for messages.
func (b BufferConfig) describe() string {
	switch {
	case b.maxRecords != math.MaxInt64 && b.maxBytes != math.MaxInt64:
		return fmt.Sprintf("MaxRecords(%d) and MaxBytes(%d)", b.maxRecords, b.maxBytes)
	case b.maxRecords != math.MaxInt64:
		return fmt.Sprintf("MaxRecords(%d)", b.maxRecords)
	case b.maxBytes != math.MaxInt64:
		return fmt.Sprintf("MaxBytes(%d)", b.maxBytes)
	}
	return "Unbounded()"
}

// Suppress holds the table's updates back as s says and emits them later (Kafka
// Streams' KTable.suppress): with UntilWindowCloses, a windowed table's final results.
//
// The buffer is a key-value store, named <Named>-store when the operation is Named and
// KTABLE-SUPPRESS-STATE-STORE-000000000N otherwise (Kafka Streams' names), changelogged
// (<application>-<store>-changelog) and written in the task's transaction like every
// other store, so a crash or an aborted transaction neither loses nor repeats a result.
// Its changelog is eddy's own layout, not Kafka Streams' (see suppressBuffer). InMemory
// and WithoutChangelog apply to it.
//
// The records emitted carry the timestamp, headers and record metadata of the latest
// update of their key, as Kafka Streams' do. Keys are emitted in the order of their
// buffer time (the window end, or the first buffered update's timestamp), then of
// their serialized key bytes.
func (t Table[K, V]) Suppress(s Suppressed, opts ...Option) Table[K, V] {
	b := t.b
	o := collect(opts)
	var name, store string
	if o.name != "" {
		name = b.name(o, "")
		store = o.name + "-store"
	} else {
		name = b.newName("KTABLE-SUPPRESS-")
		store = b.newName("KTABLE-SUPPRESS-STATE-STORE-")
	}
	if o.store != "" || o.withoutCaching || o.retention != 0 {
		b.fail("%s: Materialized, WithoutCaching and Retention do not apply to Suppress (its buffer is named after Named: <name>-store)", name)
	}
	parent := t.t
	buf := s.buf
	if !buf.set {
		b.fail("%s: Suppress needs a BufferConfig: Unbounded(), MaxRecords(n) or MaxBytes(n)", name)
	}
	if buf.maxRecords < 0 || buf.maxBytes < 0 {
		b.fail("%s: the suppression buffer's bound must not be negative (%s)", name, buf.describe())
	}
	var wait int64
	safeToDropTombstones := false
	if s.untilClose {
		if parent.windowEnd == nil {
			b.fail("%s: UntilWindowCloses applies to windowed tables only (a windowed aggregation, or a table derived from one); the table of %s is not windowed: use UntilTimeLimit", name, parent.node)
		}
		if buf.emitEarly {
			b.fail("%s: UntilWindowCloses cannot emit early when its buffer is full (final results would not be final, Kafka Streams refuses it too): use ShutDownWhenFull or a larger bound", name)
		}
		wait = parent.closeAfter
		safeToDropTombstones = true
	} else if s.limit < 0 {
		b.fail("%s: UntilTimeLimit(%v): the time limit must not be negative", name, s.limit)
	} else {
		wait = s.limit.Milliseconds()
	}
	if parent.keys == nil || parent.values == nil {
		b.fail("%s: Suppress keeps the table's keys and values in its buffer and needs their serdes, which are not known here: pass the value serde to the operation above", name)
	}
	// Kafka Streams' KTableSuppressProcessorSupplier: the buffer needs the old values to
	// answer lookups with the value before the buffered updates.
	parent.enableOld(true)
	info := &tableInfo[K, V]{node: name, keyChanged: parent.keyChanged, sources: parent.sources, keys: parent.keys, values: parent.values,
		windowEnd: parent.windowEnd, closeAfter: parent.closeAfter, derivedFrom: []lookupSource{parent}}
	info.enableOld = func(force bool) bool { info.sendOld = true; return true }
	windowEnd := parent.windowEnd
	topology.AddProcessor(b.tb, name, supplier(func(ctx processor.Context[K, Change[V]]) (func(processor.Record[K, Change[V]]) error, error) {
		kv, err := processor.KeyValueStore[[]byte, []byte](ctx, store)
		if err != nil {
			return nil, err
		}
		p := &suppressProc[K, V]{
			ctx: ctx, buf: &suppressBuffer{kv: kv, store: store}, keys: parent.keys, values: parent.values,
			wait: wait, cfg: buf, dropTombstones: safeToDropTombstones, store: store,
			observed: timestate.From(ctx.Context()).New(-1), reg: cache.From(ctx.Context()),
		}
		if s.untilClose {
			p.bufferTime = func(k K, _ int64) int64 { return windowEnd(k) }
		} else {
			p.bufferTime = func(_ K, ts int64) int64 { return ts }
		}
		return p.process, nil
	}), parent.node)
	ps := &pendingStore{name: store, processors: []string{name}}
	ps.add = func(procs []string) {
		sn := topology.AddKeyValueStore(b.tb, store, serde.Bytes(), serde.Bytes(), procs...)
		if o.inMemory {
			sn.InMemory()
		}
		if o.withoutChangelog {
			sn.WithoutChangelog()
		}
	}
	b.stores = append(b.stores, ps)
	info.extraLookup = []*pendingStore{ps}
	// Kafka Streams' view of a suppressed table: a buffered key reads as its value
	// before the buffered updates (the prior value), any other key as the parent's.
	info.getter = func(sp processor.StoreProvider) (getterFunc[K, V], error) {
		get, err := parent.getter(sp)
		if err != nil {
			return nil, err
		}
		kv, err := processor.KeyValueStore[[]byte, []byte](sp, store)
		if err != nil {
			return nil, err
		}
		sb := &suppressBuffer{kv: kv, store: store}
		return func(k K) (Timestamped[V], bool, error) {
			kb, err := parent.keys.Serialize(store, k)
			if err != nil {
				return Timestamped[V]{}, false, err
			}
			e, ok, err := sb.lookup(kb)
			if err != nil || !ok {
				if err != nil {
					return Timestamped[V]{}, false, err
				}
				return get(k)
			}
			if e.prior == nil {
				return Timestamped[V]{}, false, nil
			}
			v, err := parent.values.Deserialize(store, e.prior)
			if err != nil {
				return Timestamped[V]{}, false, err
			}
			// Kafka Streams: the prior value's timestamp is unknown (-1).
			return Timestamped[V]{Value: v, Timestamp: time.UnixMilli(-1).UTC()}, true, nil
		}, nil
	}
	return Table[K, V]{b: b, t: info}
}

// suppressProc is Kafka Streams' KTableSuppressProcessor.
type suppressProc[K, V any] struct {
	ctx    processor.Context[K, Change[V]]
	buf    *suppressBuffer
	keys   serde.Serde[K]
	values serde.Serde[V]
	store  string
	wait   int64 // the suppress duration: grace (final results) or the time limit, ms
	cfg    BufferConfig
	// dropTombstones: final results never emit a deletion (safeToDropTombstones).
	dropTombstones bool
	bufferTime     func(k K, ts int64) int64
	// observed is the processor's own stream time (Kafka Streams' observedStreamTime):
	// not kept across restarts, as in Kafka Streams, and rolled back with the task when
	// a transaction aborts, so that the replay evicts what the first pass did.
	observed *timestate.Cell
	reg      *cache.Registry
}

func (p *suppressProc[K, V]) process(r processor.Record[K, Change[V]]) error {
	ts := r.Timestamp.UnixMilli()
	p.observed.Set(max(p.observed.Get(), ts))
	if err := p.put(r); err != nil {
		return err
	}
	return p.enforce()
}

// put buffers the update: a key already buffered keeps its place (its buffer time) and
// its prior value, and takes the new update's values and record context (Kafka
// Streams' non-resetting cleanPut).
func (p *suppressProc[K, V]) put(r processor.Record[K, Change[V]]) error {
	kb, err := p.keys.Serialize(p.store, r.Key)
	if err != nil {
		return fmt.Errorf("suppression buffer %s: serializing a key: %w", p.store, err)
	}
	newB, err := p.serializeValue(r.Value.New)
	if err != nil {
		return err
	}
	oldB, err := p.serializeValue(r.Value.Old)
	if err != nil {
		return err
	}
	e := bufferEntry{ts: r.Timestamp.UnixMilli(), old: oldB, new: newB, headers: r.Headers}
	if md, ok := p.ctx.RecordMetadata(); ok {
		e.md = &md
	}
	return p.buf.put(p.bufferTime(r.Key, r.Timestamp.UnixMilli()), kb, e)
}

func (p *suppressProc[K, V]) serializeValue(v *V) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	b, err := p.values.Serialize(p.store, *v)
	if err != nil {
		return nil, fmt.Errorf("suppression buffer %s: serializing a value: %w", p.store, err)
	}
	if b == nil {
		b = []byte{} // a value is never null here; keep it apart from "no value"
	}
	return b, nil
}

// enforce is enforceConstraints: emit what is due, then deal with a full buffer.
func (p *suppressProc[K, V]) enforce() error {
	expiry := p.observed.Get() - p.wait
	if err := p.buf.evictWhile(func(minTime int64, _ bufferStats) bool { return minTime <= expiry }, p.emit); err != nil {
		return err
	}
	st, err := p.buf.stats()
	if err != nil {
		return err
	}
	if !p.over(st) {
		return nil
	}
	if p.cfg.emitEarly {
		return p.buf.evictWhile(func(_ int64, st bufferStats) bool { return p.over(st) }, p.emit)
	}
	return fmt.Errorf("%w: %s (node %s) holds %d records (max %d) and %d bytes (max %d), over its bound %s: raise MaxRecords/MaxBytes (or, for UntilTimeLimit, choose EmitEarlyWhenFull)",
		ErrBufferFull, p.store, p.ctx.NodeName(), st.count, p.cfg.maxRecords, st.bytes, p.cfg.maxBytes, p.cfg.describe())
}

func (p *suppressProc[K, V]) over(st bufferStats) bool {
	return st.count > p.cfg.maxRecords || st.bytes > p.cfg.maxBytes
}

// emit forwards an evicted entry as from the record of its latest update (Kafka
// Streams sets the entry's record context), unless it is a deletion final results drop.
func (p *suppressProc[K, V]) emit(kb []byte, e bufferEntry) error {
	if e.new == nil && p.dropTombstones {
		return nil
	}
	k, err := p.keys.Deserialize(p.store, kb)
	if err != nil {
		return fmt.Errorf("suppression buffer %s: reading a key: %w", p.store, err)
	}
	var c Change[V]
	if c.New, err = p.deserializeValue(e.new); err != nil {
		return err
	}
	if c.Old, err = p.deserializeValue(e.old); err != nil {
		return err
	}
	rec := processor.Record[K, Change[V]]{Key: k, Value: c, Timestamp: time.UnixMilli(e.ts).UTC(), Headers: e.headers}
	if p.reg == nil {
		return p.ctx.Forward(rec)
	}
	return p.reg.AsRecord(e.md, func() error { return p.ctx.Forward(rec) })
}

func (p *suppressProc[K, V]) deserializeValue(b []byte) (*V, error) {
	if b == nil {
		return nil, nil
	}
	v, err := p.values.Deserialize(p.store, b)
	if err != nil {
		return nil, fmt.Errorf("suppression buffer %s: reading a value: %w", p.store, err)
	}
	return &v, nil
}

// suppressBuffer is Kafka Streams' InMemoryTimeOrderedKeyValueChangeBuffer kept in a
// key-value store of bytes, so that it is written in the task's transaction, rolled
// back with it when it aborts, changelogged and restored like any store. Its layout
// (also its changelog's, eddy's own, not Kafka Streams' v3 buffer format):
//
//	't' | time (8 bytes, big-endian, sign bit flipped) | key  →  entry (see bufferEntry)
//	'k' | key                                                 →  time (8 bytes, as above)
//	'm'                                                       →  count (8) | bytes (8)
//
// 't' keys iterate in eviction order: buffer time, then key bytes, as Kafka Streams'
// BufferKey orders them. 'k' finds a key's place; 'm' counts the entries and their
// size for the bounds.
type suppressBuffer struct {
	kv    statestore.KeyValueStore[[]byte, []byte]
	store string
}

type bufferStats struct{ count, bytes int64 }

var metaKey = []byte{'m'}

func timeBytes(t int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(t)^(1<<63))
}

func timeOf(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

func entryKey(t int64, kb []byte) []byte {
	return append(append([]byte{'t'}, timeBytes(t)...), kb...)
}

func indexKey(kb []byte) []byte { return append([]byte{'k'}, kb...) }

func (b *suppressBuffer) stats() (bufferStats, error) {
	v, ok, err := b.kv.Get(metaKey)
	if err != nil || !ok {
		return bufferStats{}, err
	}
	if len(v) != 16 {
		return bufferStats{}, fmt.Errorf("suppression buffer %s: its counts are %d bytes, want 16: the store is damaged", b.store, len(v))
	}
	return bufferStats{count: int64(binary.BigEndian.Uint64(v)), bytes: int64(binary.BigEndian.Uint64(v[8:]))}, nil
}

func (b *suppressBuffer) setStats(st bufferStats) error {
	if st.count == 0 {
		return b.kv.Delete(metaKey)
	}
	v := binary.BigEndian.AppendUint64(nil, uint64(st.count))
	return b.kv.Put(metaKey, binary.BigEndian.AppendUint64(v, uint64(st.bytes)))
}

// lookup returns the entry of key bytes kb, if buffered.
func (b *suppressBuffer) lookup(kb []byte) (bufferEntry, bool, error) {
	tb, ok, err := b.kv.Get(indexKey(kb))
	if err != nil || !ok {
		return bufferEntry{}, false, err
	}
	v, ok, err := b.kv.Get(entryKey(timeOf(tb), kb))
	if err != nil {
		return bufferEntry{}, false, err
	}
	if !ok {
		return bufferEntry{}, false, fmt.Errorf("suppression buffer %s: a key's index names an entry that is missing: the store is damaged", b.store)
	}
	e, err := decodeEntry(v)
	if err != nil {
		return bufferEntry{}, false, fmt.Errorf("suppression buffer %s: %w", b.store, err)
	}
	e.time = timeOf(tb)
	return e, true, nil
}

func (b *suppressBuffer) put(t int64, kb []byte, e bufferEntry) error {
	st, err := b.stats()
	if err != nil {
		return err
	}
	prev, had, err := b.lookup(kb)
	if err != nil {
		return err
	}
	if had {
		t = prev.time
		e.prior = prev.prior
		e.priorSet = true
		st.bytes -= prev.size(kb)
	} else {
		e.prior = e.old
		st.count++
		if err := b.kv.Put(indexKey(kb), timeBytes(t)); err != nil {
			return err
		}
	}
	e.time = t
	st.bytes += e.size(kb)
	if err := b.kv.Put(entryKey(t, kb), e.encode()); err != nil {
		return err
	}
	return b.setStats(st)
}

// evictWhile removes the oldest entries while more(their time, the buffer's stats)
// holds, calling emit for each before it is removed (Kafka Streams' evictWhile).
func (b *suppressBuffer) evictWhile(more func(minTime int64, st bufferStats) bool, emit func(kb []byte, e bufferEntry) error) error {
	st, err := b.stats()
	if err != nil || st.count == 0 {
		return err
	}
	for st.count > 0 {
		// One entry at a time: emit may reach a processor that writes this store's
		// task, and an iterator must not be held across it.
		kb, e, ok, err := b.oldest()
		if err != nil || !ok {
			return err
		}
		if !more(e.time, st) {
			return nil
		}
		if err := emit(kb, e); err != nil {
			return err
		}
		if err := b.kv.Delete(entryKey(e.time, kb)); err != nil {
			return err
		}
		if err := b.kv.Delete(indexKey(kb)); err != nil {
			return err
		}
		st.count--
		st.bytes -= e.size(kb)
		if err := b.setStats(st); err != nil {
			return err
		}
	}
	return nil
}

// oldest returns the first entry in eviction order.
func (b *suppressBuffer) oldest() ([]byte, bufferEntry, bool, error) {
	it, err := b.kv.Range([]byte{'t'}, []byte{'u'})
	if err != nil {
		return nil, bufferEntry{}, false, err
	}
	var (
		kb []byte
		e  bufferEntry
		ok bool
	)
	if it.Next() {
		key := it.Key()
		if len(key) < 9 {
			err = fmt.Errorf("suppression buffer %s: an entry key of %d bytes: the store is damaged", b.store, len(key))
		} else {
			kb = bytes.Clone(key[9:])
			e, err = decodeEntry(it.Value())
			e.time = timeOf(key[1:9])
			ok = err == nil
		}
	}
	return kb, e, ok, errors.Join(err, it.Err(), it.Close())
}

// bufferEntry is a buffered update: Kafka Streams' BufferValue with its record context.
type bufferEntry struct {
	time     int64 // buffer time (from the entry's store key)
	ts       int64 // the latest update's timestamp
	prior    []byte
	priorSet bool // prior came from an earlier update (it is counted apart from old)
	old, new []byte
	headers  []processor.Header
	md       *processor.RecordMetadata
}

// size is Kafka Streams' computeRecordSize: buffer time, key, the values (the prior
// value counted once when it is the old value of the first update) and the record
// context (timestamp, offset, partition, topic, headers).
func (e bufferEntry) size(kb []byte) int64 {
	n := int64(8 + len(kb) + len(e.prior) + len(e.new) + 8 + 8 + 4)
	if e.priorSet {
		n += int64(len(e.old))
	}
	if e.md != nil {
		n += int64(len(e.md.Topic))
	}
	for _, h := range e.headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}

// encode: version 1 | ts (8) | flags (1: priorSet, 2: md) | prior, old, new (each
// int32 length, -1 for null, then bytes) | headers (int32 count, each key and value as
// above) | md (topic as above, partition int32, offset int64).
func (e bufferEntry) encode() []byte {
	out := []byte{1}
	out = binary.BigEndian.AppendUint64(out, uint64(e.ts))
	var flags byte
	if e.priorSet {
		flags |= 1
	}
	if e.md != nil {
		flags |= 2
	}
	out = append(out, flags)
	for _, b := range [][]byte{e.prior, e.old, e.new} {
		out = appendBytes(out, b)
	}
	out = binary.BigEndian.AppendUint32(out, uint32(len(e.headers)))
	for _, h := range e.headers {
		out = appendBytes(out, []byte(h.Key))
		out = appendBytes(out, h.Value)
	}
	if e.md != nil {
		out = appendBytes(out, []byte(e.md.Topic))
		out = binary.BigEndian.AppendUint32(out, uint32(e.md.Partition))
		out = binary.BigEndian.AppendUint64(out, uint64(e.md.Offset))
	}
	return out
}

func appendBytes(out, b []byte) []byte {
	if b == nil {
		return binary.BigEndian.AppendUint32(out, math.MaxUint32)
	}
	out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
	return append(out, b...)
}

var errBadEntry = errors.New("a buffered entry does not decode: the store is damaged")

func decodeEntry(v []byte) (bufferEntry, error) {
	var e bufferEntry
	if len(v) < 10 || v[0] != 1 {
		return e, errBadEntry
	}
	e.ts = int64(binary.BigEndian.Uint64(v[1:]))
	flags := v[9]
	e.priorSet = flags&1 != 0
	r := v[10:]
	next := func() ([]byte, bool) {
		if len(r) < 4 {
			return nil, false
		}
		n := binary.BigEndian.Uint32(r)
		r = r[4:]
		if n == math.MaxUint32 {
			return nil, true
		}
		if uint64(len(r)) < uint64(n) {
			return nil, false
		}
		b := bytes.Clone(r[:n])
		if b == nil {
			b = []byte{}
		}
		r = r[n:]
		return b, true
	}
	var ok bool
	for _, dst := range []*[]byte{&e.prior, &e.old, &e.new} {
		if *dst, ok = next(); !ok {
			return e, errBadEntry
		}
	}
	if len(r) < 4 {
		return e, errBadEntry
	}
	nh := binary.BigEndian.Uint32(r)
	r = r[4:]
	for range nh {
		k, ok1 := next()
		hv, ok2 := next()
		if !ok1 || !ok2 {
			return e, errBadEntry
		}
		e.headers = append(e.headers, processor.Header{Key: string(k), Value: hv})
	}
	if flags&2 != 0 {
		topic, ok := next()
		if !ok || len(r) < 12 {
			return e, errBadEntry
		}
		e.md = &processor.RecordMetadata{Topic: string(topic), Partition: int32(binary.BigEndian.Uint32(r)), Offset: int64(binary.BigEndian.Uint64(r[4:]))}
		r = r[12:]
	}
	if len(r) != 0 {
		return e, errBadEntry
	}
	return e, nil
}
