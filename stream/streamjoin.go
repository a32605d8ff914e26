package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/eddy-streams/eddy/internal/serdes"
	"github.com/eddy-streams/eddy/internal/timestate"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/window"
)

// Joined holds the serdes of a stream–stream join (Kafka Streams' StreamJoined): the
// key's, and the values' of the left and right streams. The join buffers both streams'
// records in window stores with them, and repartitions a side whose key changed with
// them.
type Joined[K, V1, V2 any] struct {
	keys  serde.Serde[K]
	left  serde.Serde[V1]
	right serde.Serde[V2]
}

// JoinedWith makes the serdes of a stream–stream join (StreamJoined.with).
func JoinedWith[K, V1, V2 any](keys serde.Serde[K], left serde.Serde[V1], right serde.Serde[V2]) Joined[K, V1, V2] {
	return Joined[K, V1, V2]{keys: keys, left: left, right: right}
}

// StreamJoin is the inner join of two streams within join windows (Kafka Streams'
// KStream.join(KStream, ValueJoiner, JoinWindows, StreamJoined)): each record of l
// joins every record of r with the same key whose timestamp is in [t - before,
// t + after] of it, and each record of r every record of l in [t - after, t + before],
// whichever arrives second; the result's timestamp is the larger of the two. Records
// with a null key or value join nothing. Both streams must be co-partitioned; a side
// whose key may have changed is repartitioned first with j's serdes.
//
// Options: Named (the nodes are <name>-this-windowed, <name>-other-windowed,
// <name>-this-join, <name>-other-join and <name>-merge), Materialized (the stores are
// <store>-this-join and <store>-other-join instead of KSTREAM-JOINTHIS-…-store and
// KSTREAM-JOINOTHER-…-store), InMemory and WithoutChangelog.
func StreamJoin[K, V1, V2, VR any](l Stream[K, V1], r Stream[K, V2], joiner func(V1, V2) VR, w window.JoinWindows, j Joined[K, V1, V2], opts ...Option) Stream[K, VR] {
	return streamStreamJoin(l, r, func(a *V1, b *V2) VR { return joiner(*a, *b) }, w, j, false, false, opts)
}

// StreamLeftJoin is StreamJoin that also emits each record of l that joined nothing,
// with joiner's right value nil, once its window has closed: when stream time (the
// largest timestamp either side of the join has seen) passes its timestamp + after +
// grace (Kafka Streams 3.1+). Until then it waits in the join's shared store
// (KSTREAM-OUTERSHARED-…-store, or <store>-left-shared-join-store with Materialized). A
// record that arrives after its window has already passed is emitted at once; a record
// of l with a null key and a value is emitted at once, unjoined.
func StreamLeftJoin[K, V1, V2, VR any](l Stream[K, V1], r Stream[K, V2], joiner func(V1, *V2) VR, w window.JoinWindows, j Joined[K, V1, V2], opts ...Option) Stream[K, VR] {
	return streamStreamJoin(l, r, func(a *V1, b *V2) VR { return joiner(*a, b) }, w, j, true, false, opts)
}

// StreamOuterJoin is StreamLeftJoin for both sides: a record of either stream that
// joined nothing is emitted with the other side nil once its window has closed (a
// record of r at t: when stream time passes t + before + grace). The shared store is
// <store>-outer-shared-join-store with Materialized.
func StreamOuterJoin[K, V1, V2, VR any](l Stream[K, V1], r Stream[K, V2], joiner func(*V1, *V2) VR, w window.JoinWindows, j Joined[K, V1, V2], opts ...Option) Stream[K, VR] {
	return streamStreamJoin(l, r, joiner, w, j, true, true, opts)
}

// sideKey is Kafka Streams' TimestampedKeyAndJoinSide: an unmatched record's key in the
// shared store, serialized timestamp first so the store iterates by time.
type sideKey[K any] struct {
	ts   int64
	left bool
	key  K
}

// sideValue is Kafka Streams' LeftOrRightValue: the value of an unmatched record, of
// one side or the other.
type sideValue[V1, V2 any] struct {
	left  *V1
	right *V2
}

// sideKeySerde is TimestampedKeyAndJoinSideSerde: timestamp (8 bytes, big-endian), the
// side (1 left, 0 right), the key's bytes.
type sideKeySerde[K any] struct{ keys serde.Serde[K] }

func (s sideKeySerde[K]) Serialize(topic string, k sideKey[K]) ([]byte, error) {
	kb, err := s.keys.Serialize(topic, k.key)
	if err != nil {
		return nil, err
	}
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 9+len(kb)), uint64(k.ts))
	side := byte(0)
	if k.left {
		side = 1
	}
	return append(append(b, side), kb...), nil
}

func (s sideKeySerde[K]) Deserialize(topic string, b []byte) (sideKey[K], error) {
	if len(b) < 9 {
		return sideKey[K]{}, fmt.Errorf("timestamped key and join side of %d bytes: want at least 9", len(b))
	}
	k, err := serdes.Deserialize(s.keys, topic, b[9:])
	return sideKey[K]{ts: int64(binary.BigEndian.Uint64(b)), left: b[8] == 1, key: k}, err
}

// sideValuesSerde is the value serde of Kafka Streams' ListValueStore over
// LeftOrRightValueSerde: Serdes.ListSerde's layout (a strategy byte, 1 = variable size;
// the count as int32; each element as int32 length and bytes), each element a side byte
// (1 left, 0 right) and the value's bytes.
type sideValuesSerde[V1, V2 any] struct {
	left  serde.Serde[V1]
	right serde.Serde[V2]
}

func (s sideValuesSerde[V1, V2]) Serialize(topic string, vs []sideValue[V1, V2]) ([]byte, error) {
	if vs == nil {
		return nil, nil
	}
	b := binary.BigEndian.AppendUint32([]byte{1}, uint32(len(vs)))
	for _, v := range vs {
		var raw []byte
		var err error
		side := byte(0)
		if v.left != nil {
			side = 1
			raw, err = s.left.Serialize(topic, *v.left)
		} else {
			raw, err = s.right.Serialize(topic, *v.right)
		}
		if err != nil {
			return nil, err
		}
		b = binary.BigEndian.AppendUint32(b, uint32(1+len(raw)))
		b = append(append(b, side), raw...)
	}
	return b, nil
}

func (s sideValuesSerde[V1, V2]) Deserialize(topic string, b []byte) ([]sideValue[V1, V2], error) {
	if b == nil {
		return nil, nil
	}
	bad := func(what string) error { return fmt.Errorf("list of join-side values: %s", what) }
	if len(b) < 5 || b[0] != 1 {
		return nil, bad("no variable-size list header")
	}
	n := binary.BigEndian.Uint32(b[1:])
	b = b[5:]
	var out []sideValue[V1, V2]
	for range n {
		if len(b) < 4 {
			return nil, bad("truncated")
		}
		l := binary.BigEndian.Uint32(b)
		if l < 1 || uint32(len(b)-4) < l {
			return nil, bad("truncated element")
		}
		el := b[4 : 4+l]
		b = b[4+l:]
		var v sideValue[V1, V2]
		if el[0] == 1 {
			x, err := serdes.Deserialize(s.left, topic, el[1:])
			if err != nil {
				return nil, err
			}
			v.left = &x
		} else {
			x, err := serdes.Deserialize(s.right, topic, el[1:])
			if err != nil {
				return nil, err
			}
			v.right = &x
		}
		out = append(out, v)
	}
	return out, nil
}

// joinTracker is Kafka Streams' KStreamImplJoin.TimeTracker, shared by the two sides of
// one join in one task: the stream time both sides observed, and a lower bound of the
// timestamps in the shared store (math.MaxInt64: none known), which gates the look for
// closed windows. The cells roll back with the task when a transaction aborts.
//
// Kafka Streams' tracker starts afresh when a task starts (stream time -1, minTime
// Long.MAX_VALUE), so a restart can change what a left or outer join emits: the gate
// then opens or stays shut at other records than in a run without the restart. eddy
// keeps the tracker of a left or outer join in a small store of its own (the shared
// store's name + "-time", changelogged like it) and reads it back before the first
// record, so a join's output is the same with or without crashes — what exactly-once
// needs — and equals Kafka Streams' output of a run without restarts.
type joinTracker struct {
	streamTime, minTime, loaded *timestate.Cell
}

// trackerKey is the one key of a join's time store.
const trackerKey = "tracker"

// trackers hands out one joinTracker per task (the registry of its time cells) to the
// two sides of a join, as Kafka Streams' TimeTrackerSupplier does per task id.
type trackers struct {
	mu sync.Mutex
	m  map[*timestate.Registry]*joinTracker
}

func (t *trackers) get(ctx context.Context) *joinTracker {
	reg := timestate.From(ctx)
	if reg == nil {
		// A processor run outside a task: nothing to share a tracker with safely.
		return &joinTracker{streamTime: reg.New(-1), minTime: reg.New(math.MaxInt64), loaded: reg.New(0)}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if tr, ok := t.m[reg]; ok {
		return tr
	}
	if t.m == nil {
		t.m = map[*timestate.Registry]*joinTracker{}
	}
	tr := &joinTracker{streamTime: reg.New(-1), minTime: reg.New(math.MaxInt64), loaded: reg.New(0)}
	t.m[reg] = tr
	context.AfterFunc(ctx, func() {
		t.mu.Lock()
		delete(t.m, reg)
		t.mu.Unlock()
	})
	return tr
}

// joinParams is what both sides' processors of a stream–stream join share.
type joinParams[K, V1, V2, VR any] struct {
	w window.JoinWindows
	// outerStore is the shared store's name, "" for an inner join.
	outerStore string
	trackers   *trackers
	// unmatched is the result of an unmatched record: the joiner with one side nil.
	unmatched func(*V1, *V2) VR
}

// joinSide is Kafka Streams' KStreamKStreamJoin processor of one side: VT is this
// side's value type, VO the other's.
type joinSide[K, VT, VO, V1, V2, VR any] struct {
	p        *joinParams[K, V1, V2, VR]
	ctx      processor.Context[K, VR]
	other    statestore.WindowStore[K, VO]
	outer    statestore.KeyValueStore[sideKey[K], []sideValue[V1, V2]]
	times    statestore.KeyValueStore[string, []byte] // the tracker, with outer
	t        *joinTracker
	left     bool  // this is the left side
	emitsOwn bool  // Kafka Streams' outer: this side's unmatched records are emitted
	before   int64 // joinBeforeMs: how far back the other side is looked up
	after    int64 // joinAfterMs: how far ahead
	join     func(this *VT, other *VO) VR
	mkValue  func(VT) sideValue[V1, V2]
}

func (s *joinSide[K, VT, VO, V1, V2, VR]) init(ctx processor.Context[K, VR], otherStore string) error {
	s.ctx = ctx
	var err error
	if s.other, err = processor.WindowStore[K, VO](ctx, otherStore); err != nil {
		return err
	}
	if s.p.outerStore != "" {
		if s.outer, err = processor.KeyValueStore[sideKey[K], []sideValue[V1, V2]](ctx, s.p.outerStore); err != nil {
			return err
		}
		if s.times, err = processor.KeyValueStore[string, []byte](ctx, s.p.outerStore+"-time"); err != nil {
			return err
		}
	}
	s.t = s.p.trackers.get(ctx.Context())
	return nil
}

// processSaved is process with the tracker read from the time store before the task's
// first record, and written to it when the record changed it.
func (s *joinSide[K, VT, VO, V1, V2, VR]) processSaved(r processor.Record[K, VT]) error {
	if s.times == nil {
		return s.process(r)
	}
	if s.t.loaded.Get() == 0 {
		b, ok, err := s.times.Get(trackerKey)
		if err != nil {
			return err
		}
		if ok && len(b) == 16 {
			s.t.streamTime.Set(int64(binary.BigEndian.Uint64(b)))
			s.t.minTime.Set(int64(binary.BigEndian.Uint64(b[8:])))
		}
		s.t.loaded.Set(1)
	}
	st, mt := s.t.streamTime.Get(), s.t.minTime.Get()
	if err := s.process(r); err != nil {
		return err
	}
	if st == s.t.streamTime.Get() && mt == s.t.minTime.Get() {
		return nil
	}
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(s.t.streamTime.Get()))
	return s.times.Put(trackerKey, binary.BigEndian.AppendUint64(b, uint64(s.t.minTime.Get())))
}

// process is KStreamKStreamJoinProcessor.process.
func (s *joinSide[K, VT, VO, V1, V2, VR]) process(r processor.Record[K, VT]) error {
	ts := r.Timestamp.UnixMilli()
	s.t.streamTime.Set(max(s.t.streamTime.Get(), ts))
	if s.emitsOwn && isNull(r.Key) && !isNull(r.Value) {
		return s.ctx.Forward(processor.WithValue(r, s.join(&r.Value, nil)))
	}
	if isNull(r.Key) || isNull(r.Value) {
		// Kafka Streams: "Skipping record due to null key or value"
		s.ctx.Logger().Debug("dropping a record with a null key or value from a stream-stream join", "timestamp", ts)
		return nil
	}
	if ts == s.t.streamTime.Get() && s.outer != nil {
		if err := s.emitClosed(r); err != nil {
			return err
		}
	}
	timeFrom, timeTo := max(0, ts-s.before), max(0, ts+s.after)
	seq, errf := s.other.FetchRange(r.Key, window.Millis(timeFrom), window.Millis(timeTo))
	matched := false
	for w, o := range seq {
		matched = true
		if s.outer != nil {
			// putIfAbsent(otherKey, null): the other side's unmatched records of this key
			// and time have found a partner.
			k := sideKey[K]{ts: w.Window.StartMs(), left: !s.left, key: r.Key}
			if _, ok, err := s.outer.Get(k); err != nil {
				return err
			} else if ok {
				if err := s.outer.Delete(k); err != nil {
					return err
				}
			}
		}
		out := processor.WithValue(r, s.join(&r.Value, &o))
		out.Timestamp = window.Millis(max(ts, w.Window.StartMs()))
		if err := s.ctx.Forward(out); err != nil {
			return err
		}
	}
	if err := errf(); err != nil {
		return err
	}
	if !s.emitsOwn || matched {
		return nil
	}
	// Kafka Streams: a record whose window has already passed in stream time is emitted
	// at once; others wait in the shared store until their window closes.
	if s.outer == nil || timeTo < s.t.streamTime.Get() {
		return s.ctx.Forward(processor.WithValue(r, s.join(&r.Value, nil)))
	}
	s.t.minTime.Set(min(s.t.minTime.Get(), ts))
	k := sideKey[K]{ts: ts, left: s.left, key: r.Key}
	list, _, err := s.outer.Get(k)
	if err != nil {
		return err
	}
	return s.outer.Put(k, append(list, s.mkValue(r.Value)))
}

// emitClosed is emitNonJoinedOuterRecords, without Kafka Streams' wall-clock throttle
// (see doc.go): the shared store's records whose windows have closed are emitted in
// the store's order (timestamp, then right before left, then key bytes) and deleted.
func (s *joinSide[K, VT, VO, V1, V2, VR]) emitClosed(r processor.Record[K, VT]) error {
	grace, streamTime := s.p.w.GraceMs(), s.t.streamTime.Get()
	if s.t.minTime.Get()+s.after+grace >= streamTime {
		return nil // nothing in the store can have closed yet
	}
	s.t.minTime.Set(math.MaxInt64)
	it, err := s.outer.All()
	if err != nil {
		return err
	}
	var emitted []sideKey[K]
	leftOpen, rightOpen := false, false
	// Kafka Streams' ListValueStore iterates the values of a key one by one, and the
	// loop sets minTime and checks for the end at each value, not each key: with
	// duplicates the loop stops, and minTime ends, at another value than per key.
scan:
	for it.Next() {
		k := it.Key()
		keyEmitted := false
		for _, v := range it.Value() {
			s.t.minTime.Set(k.ts)
			if leftOpen && rightOpen {
				break scan // no more candidates on either side
			}
			// A left record waits for right records up to after its time, a right
			// record for left records up to before it.
			lookBack := s.p.w.BeforeMs()
			if k.left {
				lookBack = s.p.w.AfterMs()
			}
			if k.ts+lookBack+grace >= streamTime {
				if k.left {
					leftOpen = true
				} else {
					rightOpen = true
				}
				continue
			}
			out := processor.Record[K, VR]{Key: k.key, Value: s.p.unmatched(v.left, v.right), Timestamp: window.Millis(k.ts), Headers: r.Headers}
			if err := s.ctx.Forward(out); err != nil {
				it.Close()
				return err
			}
			if !keyEmitted {
				emitted, keyEmitted = append(emitted, k), true
			}
		}
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		return err
	}
	for _, k := range emitted {
		if err := s.outer.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// joinWindowProc is KStreamJoinWindow: it forwards each record and buffers those with a
// key in its side's store (a null value is not kept, but advances the store's time).
func joinWindowProc[K, V any](store string) processor.Supplier[K, V, K, V] {
	return supplier(func(ctx processor.Context[K, V]) (func(processor.Record[K, V]) error, error) {
		ws, err := processor.WindowStore[K, V](ctx, store)
		if err != nil {
			return nil, err
		}
		return func(r processor.Record[K, V]) error {
			if err := ctx.Forward(r); err != nil {
				return err
			}
			if isNull(r.Key) {
				return nil
			}
			return ws.Put(r.Key, r.Value, r.Timestamp)
		}, nil
	})
}

// streamStreamJoin is KStreamImpl.doJoin and KStreamImplJoin.join: leftOuter emits l's
// unmatched records, rightOuter r's.
func streamStreamJoin[K, V1, V2, VR any](l Stream[K, V1], r Stream[K, V2], j func(*V1, *V2) VR, w window.JoinWindows, joined Joined[K, V1, V2], leftOuter, rightOuter bool, opts []Option) Stream[K, VR] {
	b := l.b
	if b.foreign("stream-stream join of "+strconv.Quote(l.node), "Stream", r.node, r.b) {
		return unusable[K, VR](b, "stream-stream join")
	}
	o := collect(opts)
	if err := w.Validate(); err != nil {
		b.fail("stream-stream join: %v", err)
	}
	if joined.keys == nil || joined.left == nil || joined.right == nil {
		b.fail("stream-stream join of %q and %q: JoinedWith needs the key serde and both value serdes (the join buffers both streams in window stores)", l.node, r.node)
		return Stream[K, VR]{b: b, node: l.node}
	}
	if o.retention != 0 {
		b.fail("stream-stream join of %q and %q: Retention does not apply; the join's stores keep records for before + after + grace", l.node, r.node)
	}
	// As KStreamImpl.doJoin: a side whose key may have changed goes through a
	// repartition topic first, <name>-left-repartition (-right-) with Named. Kafka Streams
	// names it after the upstream node otherwise, a name eddy's repartition source would
	// share with that node: here it is <node>-left-repartition (-right-).
	if l.keyChanged {
		name := l.node + "-left"
		if o.name != "" {
			name = o.name + "-left"
		}
		l = repartition(l, name, joined.keys, joined.left)
	}
	if r.keyChanged {
		name := r.node + "-right"
		if o.name != "" {
			name = o.name + "-right"
		}
		r = repartition(r, name, joined.keys, joined.right)
	}
	b.copartition(l.sources, r.sources)

	// Names as KStreamImplJoin.join gives them, in the same order.
	thisSuffix, otherSuffix := "-this-join", "-other-join"
	thisPrefix, otherPrefix := "KSTREAM-JOINTHIS-", "KSTREAM-JOINOTHER-"
	if rightOuter {
		thisSuffix, thisPrefix = "-outer-this-join", "KSTREAM-OUTERTHIS-"
	}
	if leftOuter {
		otherSuffix, otherPrefix = "-outer-other-join", "KSTREAM-OUTEROTHER-"
	}
	named := func(suffix, prefix string) string {
		if o.name != "" {
			return o.name + suffix
		}
		return b.newName(prefix)
	}
	thisWindowed := named("-this-windowed", "KSTREAM-WINDOWED-")
	otherWindowed := named("-other-windowed", "KSTREAM-WINDOWED-")
	thisGenerated, otherGenerated := b.newName(thisPrefix), b.newName(otherPrefix)
	thisJoin, otherJoin := thisGenerated, otherGenerated
	if o.name != "" {
		thisJoin, otherJoin = o.name+thisSuffix, o.name+otherSuffix
	}
	merge := named("-merge", "KSTREAM-MERGE-")
	thisStore, otherStore := thisGenerated+"-store", otherGenerated+"-store"
	if o.store != "" {
		thisStore, otherStore = o.store+thisSuffix, o.store+otherSuffix
	}
	outerStore := ""
	if leftOuter {
		switch {
		case o.store != "" && rightOuter:
			outerStore = o.store + "-outer-shared-join-store"
		case o.store != "":
			outerStore = o.store + "-left-shared-join-store"
		default:
			outerStore = "KSTREAM-OUTERSHARED-" + thisGenerated[len(thisPrefix):] + "-store"
		}
	}

	p := &joinParams[K, V1, V2, VR]{w: w, outerStore: outerStore, trackers: &trackers{}, unmatched: j}
	topology.AddProcessor(b.tb, thisWindowed, joinWindowProc[K, V1](thisStore), l.node)
	topology.AddProcessor(b.tb, otherWindowed, joinWindowProc[K, V2](otherStore), r.node)
	topology.AddProcessor(b.tb, thisJoin, supplier(func(ctx processor.Context[K, VR]) (func(processor.Record[K, V1]) error, error) {
		s := &joinSide[K, V1, V2, V1, V2, VR]{
			p: p, left: true, emitsOwn: leftOuter, before: w.BeforeMs(), after: w.AfterMs(), join: j,
			mkValue: func(v V1) sideValue[V1, V2] { return sideValue[V1, V2]{left: &v} },
		}
		return s.processSaved, s.init(ctx, otherStore)
	}), thisWindowed)
	topology.AddProcessor(b.tb, otherJoin, supplier(func(ctx processor.Context[K, VR]) (func(processor.Record[K, V2]) error, error) {
		s := &joinSide[K, V2, V1, V1, V2, VR]{
			p: p, left: false, emitsOwn: rightOuter, before: w.AfterMs(), after: w.BeforeMs(),
			join:    func(this *V2, other *V1) VR { return j(other, this) },
			mkValue: func(v V2) sideValue[V1, V2] { return sideValue[V1, V2]{right: &v} },
		}
		return s.processSaved, s.init(ctx, thisStore)
	}), otherWindowed)
	topology.AddProcessor(b.tb, merge, stateless(func(ctx processor.Context[K, VR], r processor.Record[K, VR]) error {
		return ctx.Forward(r)
	}), thisJoin, otherJoin)

	// The stores keep a side's records for size + grace after its latest one
	// (StreamJoinedStoreFactory.retentionPeriod), retaining duplicates. A window store
	// here needs at least 1 ms of size and retention.
	size := time.Duration(max(w.SizeMs(), 1)) * time.Millisecond
	retention := time.Duration(max(w.SizeMs()+w.GraceMs(), 1)) * time.Millisecond
	addJoinStore := func(name string, add func(procs []string) *topology.StoreNode, procs ...string) {
		ps := &pendingStore{name: name, processors: procs}
		ps.add = func(procs []string) { configure(add(procs), o) }
		b.stores = append(b.stores, ps)
	}
	addJoinStore(thisStore, func(procs []string) *topology.StoreNode {
		return topology.AddWindowStore(b.tb, thisStore, joined.keys, joined.left, size, retention, procs...).RetainDuplicates()
	}, thisWindowed, otherJoin)
	addJoinStore(otherStore, func(procs []string) *topology.StoreNode {
		return topology.AddWindowStore(b.tb, otherStore, joined.keys, joined.right, size, retention, procs...).RetainDuplicates()
	}, otherWindowed, thisJoin)
	if outerStore != "" {
		addJoinStore(outerStore, func(procs []string) *topology.StoreNode {
			return topology.AddKeyValueStore(b.tb, outerStore, serde.Serde[sideKey[K]](sideKeySerde[K]{joined.keys}),
				serde.Serde[[]sideValue[V1, V2]](sideValuesSerde[V1, V2]{joined.left, joined.right}), procs...)
		}, thisJoin, otherJoin)
		addJoinStore(outerStore+"-time", func(procs []string) *topology.StoreNode {
			return topology.AddKeyValueStore(b.tb, outerStore+"-time", serde.String(), serde.Bytes(), procs...)
		}, thisJoin, otherJoin)
	}
	sources := append(append([]string(nil), l.sources...), r.sources...)
	return Stream[K, VR]{b: b, node: merge, sources: sources, keys: joined.keys}
}
