// Package windowstore implements statestore.WindowStore and statestore.SessionStore over
// a store's write buffer (the caching layer of the key-value engine), so that they share
// its commit protocol: writes wait in the buffer, become changelog records inside the
// task's transaction and reach the backend after it committed; restore replays the
// changelog into the backend.
//
// Keys are kept in Kafka Streams' changelog layouts (internal/windowkey): a window store
// key is key | start | seqnum, a session key is key | end | start. Store key and
// changelog key are then the same bytes, and restore needs nothing of its own. Within a
// key, windows sort by start and sessions by end then start, so a fetch by key and time
// range is one range of the buffer.
//
// Retention follows Kafka Streams' in-memory stores (InMemoryWindowStore,
// InMemorySessionStore, 4.1.1): the store's observed stream time is the largest window
// start (session end) it was given; a window that starts (a session that ends) at or
// before observed - retention is expired: a put of it is dropped, and reads skip it.
//
// # Segments
//
// The data lives in time segments, as in Kafka Streams' segmented stores (AbstractSegments,
// KeyValueSegments): the store's backend is a kvstore.Segmented (WindowSegments,
// SessionSegments) that keeps each key in the segment of its time (window start, session
// end) divided by the segment interval, max(retention/2, 60 s), one bbolt bucket per
// segment. Keys stay the changelog's bytes, so a flush and a restore route each record to
// its segment by the time inside it and restore needs nothing of its own. When the
// observed time moves segment s out of retention (s < (observed - retention) / interval)
// the segment is dropped whole, one bucket delete after the write that moved it, not a
// delete per key (BenchmarkSegmentExpiry: 0.3 ms for 10k windows, 15 ms for 100k, against
// 7.5 ms and 280 ms to find and delete them key by key). Reads merge the live segments
// (at most three at the default interval) in key order.
//
// The committed observed stream time is kept with the data (the segment list, written in
// the same backend write as the flush or restore batch that advances it), so a store
// opened with data knows it, and its live segments, without reading a segment. The
// list also records the segment interval: a store opened with another (its retention
// changed, as a changed grace changes a windowed aggregation's) is emptied and rebuilt
// from its changelog (kvstore.Segmented.Open), never read by the wrong interval. The store
// adds the times of the puts buffered since the last commit; an aborted transaction
// drops them with the writes, and segments are dropped only after a write committed,
// so the backend never runs ahead of the changelog.
//
// Queries (QueryWindows, QuerySessions) read the committed state through the same code
// as processors, over the backend alone.
package windowstore

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"iter"
	"slices"
	"time"

	"github.com/eddy-streams/eddy/internal/serdes"
	"github.com/eddy-streams/eddy/internal/windowkey"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/window"
)

// Bytes is what the stores need of the key-value engine: a store's write buffer over a
// segmented backend (kvstore.Segmented, made with WindowSegments or SessionSegments).
type Bytes interface {
	Name() string
	Get(key []byte) ([]byte, error)
	Put(key, value []byte)
	Iterate(from, to []byte) (kvstore.BytesIterator, error)
	// OnCommitEnd registers a function the engine calls when the open commit ends:
	// committed (flushed) or discarded (the transaction aborted). After a seal
	// (OnSeal), a flush ends the sealed commit only; a discard ends both.
	OnCommitEnd(fn func(committed bool))
	// OnSeal registers a function the engine calls when the open commit is sealed: it
	// goes on committing while the next one's writes begin (kvstore.Set.Seal).
	OnSeal(fn func())
	// Backend is the backend under the buffer, which keeps the committed observed
	// stream time (kvstore.Segmented).
	Backend() kvstore.Backend
	// ObserveTime makes the next flush advance the committed observed stream time to
	// at least ts, for a put that writes no key (a null into a store of duplicates).
	ObserveTime(ts int64)
}

// noTimestamp is Kafka Streams' ConsumerRecord.NO_TIMESTAMP, a store's observed stream
// time before its first put.
const noTimestamp = kvstore.NoObservedTime

// WindowSegments is the segment layout of a window store: segments of
// kvstore.SegmentInterval(retention) by window start.
func WindowSegments(retention time.Duration) kvstore.SegmentSpec {
	return kvstore.SegmentSpec{Retention: retention.Milliseconds(), Time: windowTime}
}

// SessionSegments is the segment layout of a session store: by session end, as Kafka
// Streams' SessionKeySchema.segmentTimestamp.
func SessionSegments(retention time.Duration) kvstore.SegmentSpec {
	return kvstore.SegmentSpec{Retention: retention.Milliseconds(), Time: sessionTime}
}

// NewWindowStore makes the typed window store over buf. size is the windows' size (it
// gives the ends of the windows returned), retention how long windows are kept; topic
// is the name serdes see (the changelog topic).
func NewWindowStore[K, V any](buf Bytes, topic string, keys serde.Serde[K], values serde.Serde[V], size, retention time.Duration, opts ...Option) statestore.WindowStore[K, V] {
	s := &windowStore[K, V]{base: newBase(buf, topic, keys, values, retention), size: size.Milliseconds()}
	for _, o := range opts {
		o(&s.dups)
	}
	buf.OnCommitEnd(s.commitEnded)
	buf.OnSeal(s.sealed)
	return s
}

// Option configures a window store.
type Option func(*duplicates)

// RetainDuplicates makes a window store keep every value put, as Kafka Streams' window
// stores with retainDuplicates (the buffers of stream–stream joins): each put gets the
// next sequence number of the key layout, so puts of one key and time do not replace
// each other and come back in the order they were put. A null value (serialized to nil)
// is not stored, but still advances the store's observed stream time (InMemoryWindowStore.put).
// Fetch of a single window finds nothing in such a store.
func RetainDuplicates() Option { return func(d *duplicates) { d.retain = true } }

// duplicates is the state of a store that retains duplicates: the last sequence number
// used. The first put after the store opens finds the largest in the store (one scan),
// so new puts never reuse a restored entry's number and sort after it; it is not rolled
// back on abort (a gap in the numbers changes no order).
type duplicates struct {
	retain, known bool
	seqnum        int32
}

// next is Kafka Streams' maybeUpdateSeqnumForDups: seqnum = (seqnum + 1) & 0x7FFFFFFF.
func (d *duplicates) next() int32 {
	d.seqnum = (d.seqnum + 1) & 0x7FFFFFFF
	return d.seqnum
}

// NewSessionStore makes the typed session store over buf.
func NewSessionStore[K, V any](buf Bytes, topic string, keys serde.Serde[K], values serde.Serde[V], retention time.Duration) statestore.SessionStore[K, V] {
	s := &sessionStore[K, V]{base: newBase(buf, topic, keys, values, retention)}
	buf.OnCommitEnd(s.commitEnded)
	buf.OnSeal(s.sealed)
	return s
}

// observer is the segmented backend's side of the observed stream time.
type observer interface {
	ObservedTime() (int64, error)
}

func newBase[K, V any](buf Bytes, topic string, keys serde.Serde[K], values serde.Serde[V], retention time.Duration) base[K, V] {
	obs, _ := buf.Backend().(observer)
	return base[K, V]{buf: buf, topic: topic, keys: keys, values: values, retention: retention.Milliseconds(), seg: obs, pending: noTimestamp, sealedPending: noTimestamp}
}

type base[K, V any] struct {
	buf       Bytes
	topic     string
	keys      serde.Serde[K]
	values    serde.Serde[V]
	retention int64
	// seg keeps the committed observed stream time (with the data, so a store opened
	// with data knows it without reading the data); pending is the largest time put
	// since the last commit ended. The store's observed time is the larger: an aborted
	// transaction drops pending with the writes that advanced it. While a sealed commit
	// is under way (sealing), sealedPending is its part: the largest time it put.
	seg                    observer
	pending, sealedPending int64
	sealing                bool
}

func (s *base[K, V]) commitEnded(committed bool) {
	switch {
	case committed && s.sealing:
		s.sealedPending = noTimestamp // in seg now; the open commit's stays pending
	case committed:
		s.pending = noTimestamp
	default:
		s.pending, s.sealedPending = noTimestamp, noTimestamp
	}
	s.sealing = false
}

func (s *base[K, V]) sealed() {
	s.sealedPending, s.pending, s.sealing = s.pending, noTimestamp, true
}

func (s *base[K, V]) Name() string { return s.buf.Name() }

func (s *base[K, V]) Retention() time.Duration { return time.Duration(s.retention) * time.Millisecond }

func (s *base[K, V]) fail(op string, err error) error {
	return &statestore.StoreError{Store: s.buf.Name(), Op: op, Err: err}
}

func (s *base[K, V]) key(k K, op string) ([]byte, error) {
	b, err := s.keys.Serialize(s.topic, k)
	if err != nil {
		return nil, s.fail(op+": serialize key", err)
	}
	if b == nil {
		return nil, s.fail(op, statestore.ErrNullKey)
	}
	if len(b)+windowkey.SessionSuffix > statestore.MaxKeySize {
		return nil, s.fail(op, fmt.Errorf("%w: serialized key of %d bytes and its window", statestore.ErrKeyTooLarge, len(b)))
	}
	return b, nil
}

func (s *base[K, V]) value(b []byte, op string) (V, error) {
	v, err := serdes.Deserialize(s.values, s.topic, b)
	if err != nil {
		return v, s.fail(op+": deserialize value", err)
	}
	return v, nil
}

// observedTime returns the store's observed stream time: the committed one, or the
// largest time put since, if larger.
func (s *base[K, V]) observedTime() (int64, error) {
	if s.seg == nil {
		return 0, s.fail("read observed stream time", fmt.Errorf("the store is not kept in time segments (its backend is a %T, not a kvstore.Segmented)", s.buf.Backend()))
	}
	obs, err := s.seg.ObservedTime()
	if err != nil {
		return 0, s.fail("read observed stream time", err)
	}
	return max(obs, s.pending, s.sealedPending), nil
}

// ObservedTime returns the store's observed stream time (the largest window start or
// session end written to it, committed or pending), or -1 when it was never written. A
// windowed operator starts its own stream time from it after a restart: a window the
// store has expired by this time must not be one the operator still takes records for.
func (s *base[K, V]) ObservedTime() (int64, error) { return s.observedTime() }

// advance records a put at ts and returns the store's observed time after it.
func (s *base[K, V]) advance(ts int64) (int64, error) {
	obs, err := s.observedTime()
	if err != nil {
		return 0, err
	}
	s.pending = max(s.pending, ts)
	return max(obs, ts), nil
}

// entry is a decoded store entry.
type entry[K, V any] struct {
	w window.Windowed[K]
	v V
}

// scan reads [from, to) of the buffer into entries, keeping those keep accepts (it gets
// the inner key's bytes and the two times of the suffix) and decoding them with mk.
func (s *base[K, V]) scan(op string, from, to []byte, decode func(raw []byte) (key []byte, a, b int64, err error), keep func(key []byte, a, b int64) bool, mk func(a, b int64) window.Window) ([]entry[K, V], error) {
	it, err := s.buf.Iterate(from, to)
	if err != nil {
		return nil, s.fail(op, err)
	}
	var out []entry[K, V]
	var arena arena
	for it.Next() {
		kb, a, b, err := decode(it.Key())
		if err != nil {
			it.Close()
			return nil, s.fail(op, err)
		}
		if !keep(kb, a, b) {
			continue
		}
		// Copies: the iterator reuses its memory, and a serde may keep the bytes it is
		// given (serde.Bytes does).
		k, err := serdes.Deserialize(s.keys, s.topic, arena.copy(kb))
		if err != nil {
			it.Close()
			return nil, s.fail(op+": deserialize key", err)
		}
		v, err := s.value(arena.copy(it.Value()), op)
		if err != nil {
			it.Close()
			return nil, err
		}
		out = append(out, entry[K, V]{w: window.Windowed[K]{Key: k, Window: mk(a, b)}, v: v})
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		return nil, s.fail(op, err)
	}
	return out, nil
}

// arena copies byte slices into shared blocks: one allocation per 4 KiB rather than
// one per slice. A full block is left to the slices that point into it.
type arena []byte

func (a *arena) copy(p []byte) []byte {
	if cap(*a)-len(*a) < len(p) {
		*a = make([]byte, 0, max(4096, len(p)))
	}
	start := len(*a)
	*a = append(*a, p...)
	return (*a)[start:len(*a):len(*a)]
}

// seq turns a read into a sequence and its error function, newest first if backward.
func seq[K, V any](read func() ([]entry[K, V], error), backward bool) (iter.Seq2[window.Windowed[K], V], func() error) {
	var err error
	return func(yield func(window.Windowed[K], V) bool) {
		var es []entry[K, V]
		es, err = read()
		if err != nil {
			return
		}
		if backward {
			slices.Reverse(es)
		}
		for _, e := range es {
			if !yield(e.w, e.v) {
				return
			}
		}
	}, func() error { return err }
}

// after is an exclusive upper bound above p followed by any suffix of this package's
// layouts: p then nine 0xff bytes sorts after p | seqnum (4 bytes) and after p | time
// (8 bytes) for times that are not negative (window starts and session ends never are).
func after(p []byte) []byte {
	return append(bytes.Clone(p), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
}

type windowStore[K, V any] struct {
	base[K, V]
	size int64
	dups duplicates
}

func windowTime(b []byte) (int64, error) {
	_, ts, _, err := windowkey.SplitWindowStore(b)
	return ts, err
}

// nextSeq is the sequence number of the next put into a store of duplicates.
func (s *windowStore[K, V]) nextSeq() (int32, error) {
	if !s.dups.known {
		it, err := s.buf.Iterate(nil, nil)
		if err != nil {
			return 0, s.fail("put: find the last sequence number", err)
		}
		for it.Next() {
			_, _, seq, err := windowkey.SplitWindowStore(it.Key())
			if err != nil {
				it.Close()
				return 0, s.fail("put: find the last sequence number", err)
			}
			s.dups.seqnum = max(s.dups.seqnum, seq)
		}
		if err := errors.Join(it.Err(), it.Close()); err != nil {
			return 0, s.fail("put: find the last sequence number", err)
		}
		s.dups.known = true
	}
	return s.dups.next(), nil
}

func (s *windowStore[K, V]) Put(k K, v V, start time.Time) error {
	kb, err := s.key(k, "put")
	if err != nil {
		return err
	}
	vb, err := s.values.Serialize(s.topic, v)
	if err != nil {
		return s.fail("put: serialize value", err)
	}
	ts := start.UnixMilli()
	obs, err := s.advance(ts)
	if err != nil {
		return err
	}
	if ts <= obs-s.retention {
		return nil // Kafka Streams: "Skipping record for expired segment."
	}
	var seq int32
	if s.dups.retain {
		if vb == nil {
			// A delete is a no-op in a store of duplicates, but its time is observed:
			// it expires old windows after the commit too (found by J4 seed 27).
			s.buf.ObserveTime(ts)
			return nil
		}
		if seq, err = s.nextSeq(); err != nil {
			return err
		}
	}
	s.buf.Put(windowkey.AppendWindowStore(nil, kb, ts, seq), vb)
	return nil
}

func (s *windowStore[K, V]) Fetch(k K, start time.Time) (V, bool, error) {
	var zero V
	kb, err := s.key(k, "fetch")
	if err != nil {
		return zero, false, err
	}
	obs, err := s.observedTime()
	if err != nil || s.dups.retain {
		return zero, false, err
	}
	ts := start.UnixMilli()
	if ts <= obs-s.retention {
		return zero, false, nil
	}
	vb, err := s.buf.Get(windowkey.AppendWindowStore(nil, kb, ts, 0))
	if err != nil || vb == nil {
		return zero, false, err
	}
	v, err := s.value(vb, "fetch")
	return v, err == nil, err
}

func (s *windowStore[K, V]) window(start, _ int64) window.Window {
	return window.At(start, windowkey.TimeWindowEnd(start, s.size))
}

func splitWindow(raw []byte) ([]byte, int64, int64, error) {
	kb, ts, seq, err := windowkey.SplitWindowStore(raw)
	return kb, ts, int64(seq), err
}

// bounds clamps [from, to] to the live windows, as Kafka Streams' fetch does:
// from = max(from, observed - retention + 1); ok is false for an empty range.
func (s *windowStore[K, V]) bounds(from, to time.Time) (lo, hi int64, ok bool, err error) {
	obs, err := s.observedTime()
	if err != nil {
		return 0, 0, false, err
	}
	lo, hi = max(from.UnixMilli(), obs-s.retention+1, 0), to.UnixMilli()
	return lo, hi, hi >= lo, nil
}

func (s *windowStore[K, V]) fetchRange(k K, from, to time.Time) ([]entry[K, V], error) {
	kb, err := s.key(k, "fetch range")
	if err != nil {
		return nil, err
	}
	lo, hi, ok, err := s.bounds(from, to)
	if err != nil || !ok {
		return nil, err
	}
	return s.scan("fetch range",
		windowkey.AppendWindowStore(nil, kb, lo, 0),
		after(windowkey.AppendWindowStore(nil, kb, hi, 0)[:len(kb)+windowkey.TimestampSize]),
		splitWindow,
		// Another key whose bytes start with kb can sort inside the range.
		func(key []byte, ts, _ int64) bool { return bytes.Equal(key, kb) && ts >= lo && ts <= hi },
		s.window)
}

func (s *windowStore[K, V]) FetchRange(k K, from, to time.Time) (iter.Seq2[window.Windowed[K], V], func() error) {
	return seq(func() ([]entry[K, V], error) { return s.fetchRange(k, from, to) }, false)
}

func (s *windowStore[K, V]) BackwardFetchRange(k K, from, to time.Time) (iter.Seq2[window.Windowed[K], V], func() error) {
	return seq(func() ([]entry[K, V], error) { return s.fetchRange(k, from, to) }, true)
}

func (s *windowStore[K, V]) FetchAll(from, to time.Time) (iter.Seq2[window.Windowed[K], V], func() error) {
	return seq(func() ([]entry[K, V], error) {
		lo, hi, ok, err := s.bounds(from, to)
		if err != nil || !ok {
			return nil, err
		}
		return s.scan("fetch all", nil, nil, splitWindow,
			func(_ []byte, ts, _ int64) bool { return ts >= lo && ts <= hi }, s.window)
	}, false)
}

type sessionStore[K, V any] struct {
	base[K, V]
}

func sessionTime(b []byte) (int64, error) {
	_, _, end, err := windowkey.SplitSession(b)
	return end, err
}

// splitSession gives the session's end, then its start: the order of the layout.
func splitSession(raw []byte) ([]byte, int64, int64, error) {
	kb, start, end, err := windowkey.SplitSession(raw)
	return kb, end, start, err
}

func sessionWindow(end, start int64) window.Window { return window.At(start, end) }

func (s *sessionStore[K, V]) sessionKey(w window.Windowed[K], op string) ([]byte, error) {
	kb, err := s.key(w.Key, op)
	if err != nil {
		return nil, err
	}
	return windowkey.AppendSession(nil, kb, w.Window.StartMs(), w.Window.EndMs()), nil
}

func (s *sessionStore[K, V]) Put(w window.Windowed[K], v V) error {
	sk, err := s.sessionKey(w, "put")
	if err != nil {
		return err
	}
	vb, err := s.values.Serialize(s.topic, v)
	if err != nil {
		return s.fail("put: serialize value", err)
	}
	end := w.Window.EndMs()
	obs, err := s.advance(end)
	if err != nil {
		return err
	}
	if end <= obs-s.retention {
		return nil // Kafka Streams: "Skipping record for expired segment."
	}
	s.buf.Put(sk, vb)
	return nil
}

func (s *sessionStore[K, V]) Remove(w window.Windowed[K]) error {
	sk, err := s.sessionKey(w, "remove")
	if err != nil {
		return err
	}
	// A delete advances the observed time too, as in Kafka Streams' segmented stores
	// (AbstractRocksDBSegmentedBytesStore.remove) and in the backend (kvstore.Segmented).
	if _, err := s.advance(w.Window.EndMs()); err != nil {
		return err
	}
	s.buf.Put(sk, nil)
	return nil
}

func (s *sessionStore[K, V]) Fetch(k K, start, end time.Time) (V, bool, error) {
	var zero V
	sk, err := s.sessionKey(window.Windowed[K]{Key: k, Window: window.Window{Start: start, End: end}}, "fetch")
	if err != nil {
		return zero, false, err
	}
	obs, err := s.observedTime()
	if err != nil {
		return zero, false, err
	}
	if end.UnixMilli() <= obs-s.retention {
		return zero, false, nil
	}
	vb, err := s.buf.Get(sk)
	if err != nil || vb == nil {
		return zero, false, err
	}
	v, err := s.value(vb, "fetch")
	return v, err == nil, err
}

// minLive is the earliest end of a live session: max(0, observed - retention + 1).
func (s *sessionStore[K, V]) minLive() (int64, error) {
	obs, err := s.observedTime()
	if err != nil {
		return 0, err
	}
	return max(0, obs-s.retention+1), nil
}

func (s *sessionStore[K, V]) find(k K, earliestEnd, latestStart time.Time) ([]entry[K, V], error) {
	kb, err := s.key(k, "find sessions")
	if err != nil {
		return nil, err
	}
	live, err := s.minLive()
	if err != nil {
		return nil, err
	}
	lo, latest := max(earliestEnd.UnixMilli(), live), latestStart.UnixMilli()
	return s.scan("find sessions",
		windowkey.AppendSession(nil, kb, 0, lo),
		after(kb),
		splitSession,
		func(key []byte, end, start int64) bool { return bytes.Equal(key, kb) && end >= lo && start <= latest },
		sessionWindow)
}

func (s *sessionStore[K, V]) FindSessions(k K, earliestEnd, latestStart time.Time) (iter.Seq2[window.Windowed[K], V], func() error) {
	return seq(func() ([]entry[K, V], error) { return s.find(k, earliestEnd, latestStart) }, false)
}

func (s *sessionStore[K, V]) BackwardFindSessions(k K, earliestEnd, latestStart time.Time) (iter.Seq2[window.Windowed[K], V], func() error) {
	return seq(func() ([]entry[K, V], error) { return s.find(k, earliestEnd, latestStart) }, true)
}

func (s *sessionStore[K, V]) All() (iter.Seq2[window.Windowed[K], V], func() error) {
	return seq(func() ([]entry[K, V], error) {
		live, err := s.minLive()
		if err != nil {
			return nil, err
		}
		return s.scan("all", nil, nil, splitSession,
			func(_ []byte, end, _ int64) bool { return end >= live }, sessionWindow)
	}, false)
}
