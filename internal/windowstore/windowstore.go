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
// Not done yet (issue #15, item 2): expired windows stay in the backend (they are
// invisible, not deleted), and the observed stream time of a store opened with data is
// found by one scan of the store on first use. Both go with time segments (a bucket per
// segment, dropped whole), which need the engine to map keys between changelog and
// backend.
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

// Bytes is what the stores need of the key-value engine: a store's write buffer.
type Bytes interface {
	Name() string
	Get(key []byte) ([]byte, error)
	Put(key, value []byte)
	Iterate(from, to []byte) (kvstore.BytesIterator, error)
	// OnCommitEnd registers a function the engine calls when the open commit ends:
	// committed (flushed) or discarded (the transaction aborted).
	OnCommitEnd(fn func(committed bool))
}

// noTimestamp is Kafka Streams' ConsumerRecord.NO_TIMESTAMP, a store's observed stream
// time before its first put.
const noTimestamp = -1

// NewWindowStore makes the typed window store over buf. size is the windows' size (it
// gives the ends of the windows returned), retention how long windows are kept; topic
// is the name serdes see (the changelog topic).
func NewWindowStore[K, V any](buf Bytes, topic string, keys serde.Serde[K], values serde.Serde[V], size, retention time.Duration, opts ...Option) statestore.WindowStore[K, V] {
	s := &windowStore[K, V]{base: base[K, V]{buf: buf, topic: topic, keys: keys, values: values, retention: retention.Milliseconds()}, size: size.Milliseconds()}
	for _, o := range opts {
		o(&s.dups)
	}
	buf.OnCommitEnd(s.commitEnded)
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
	s := &sessionStore[K, V]{base: base[K, V]{buf: buf, topic: topic, keys: keys, values: values, retention: retention.Milliseconds()}}
	buf.OnCommitEnd(s.commitEnded)
	return s
}

type base[K, V any] struct {
	buf       Bytes
	topic     string
	keys      serde.Serde[K]
	values    serde.Serde[V]
	retention int64
	// observed is the store's observed stream time, known once read from the store;
	// committed holds both as of the last commit, to return to when a transaction aborts
	// (its writes are discarded, and so is the time they advanced).
	observed  int64
	known     bool
	committed struct {
		observed int64
		known    bool
	}
}

func (s *base[K, V]) commitEnded(committed bool) {
	if committed {
		s.committed.observed, s.committed.known = s.observed, s.known
	} else {
		s.observed, s.known = s.committed.observed, s.committed.known
	}
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

// observedTime returns the store's observed stream time, finding it with one scan the
// first time (split gives an entry's time from its key).
func (s *base[K, V]) observedTime(split func([]byte) (int64, error)) (int64, error) {
	if s.known {
		return s.observed, nil
	}
	s.observed = noTimestamp
	it, err := s.buf.Iterate(nil, nil)
	if err != nil {
		return 0, err
	}
	for it.Next() {
		ts, err := split(it.Key())
		if err != nil {
			it.Close()
			return 0, s.fail("read observed stream time", err)
		}
		s.observed = max(s.observed, ts)
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		return 0, err
	}
	s.known = true
	return s.observed, nil
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
	for it.Next() {
		kb, a, b, err := decode(it.Key())
		if err != nil {
			it.Close()
			return nil, s.fail(op, err)
		}
		if !keep(kb, a, b) {
			continue
		}
		k, err := serdes.Deserialize(s.keys, s.topic, kb)
		if err != nil {
			it.Close()
			return nil, s.fail(op+": deserialize key", err)
		}
		v, err := s.value(it.Value(), op)
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
	obs, err := s.observedTime(windowTime)
	if err != nil {
		return err
	}
	ts := start.UnixMilli()
	s.observed = max(obs, ts)
	if ts <= s.observed-s.retention {
		return nil // Kafka Streams: "Skipping record for expired segment."
	}
	var seq int32
	if s.dups.retain {
		if vb == nil {
			return nil // a delete is a no-op in a store of duplicates
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
	obs, err := s.observedTime(windowTime)
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
	obs, err := s.observedTime(windowTime)
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
	obs, err := s.observedTime(sessionTime)
	if err != nil {
		return err
	}
	end := w.Window.EndMs()
	s.observed = max(obs, end)
	if end <= s.observed-s.retention {
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
	s.buf.Put(sk, nil)
	return nil
}

func (s *sessionStore[K, V]) Fetch(k K, start, end time.Time) (V, bool, error) {
	var zero V
	sk, err := s.sessionKey(window.Windowed[K]{Key: k, Window: window.Window{Start: start, End: end}}, "fetch")
	if err != nil {
		return zero, false, err
	}
	obs, err := s.observedTime(sessionTime)
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
	obs, err := s.observedTime(sessionTime)
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
