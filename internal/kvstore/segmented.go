package kvstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"
)

// This file keeps the stores of windows and sessions in time segments, as Kafka Streams'
// segmented stores do (AbstractSegments, KeyValueSegments, 4.1.1): a store's keys are
// spread over segments of SegmentInterval(retention) milliseconds by the time inside each
// key (a window's start, a session's end), each segment one store of the inner backend
// (one bbolt bucket), so expiring a segment is one bucket delete rather than a delete per
// key. Keys stay the changelog's bytes: a Segmented backend routes every written key to
// its segment by its time, the same for a commit's flush and for a restore's batches,
// and restore needs nothing of its own.

// SegmentSpec says how a store is cut into time segments.
type SegmentSpec struct {
	// Retention is how long, in milliseconds, the store keeps data after its observed
	// stream time (the largest time of any key written to it).
	Retention int64
	// Time returns the time of a key (a window's start, a session's end), which decides
	// its segment. An error names what is wrong with the key.
	Time func(key []byte) (int64, error)
	// NoRebuild says that nothing restores the store after it is opened (a store
	// without a changelog, or the test driver's, whose changelogs start empty): a
	// store found cut into segments of another interval is then refused (Open fails
	// with ErrSegmentLayout) instead of being emptied for a rebuild.
	NoRebuild bool
}

// ErrSegmentLayout is wrapped by Open of a store whose segments were cut with another
// interval than its retention gives now, when it cannot be rebuilt (SegmentSpec.NoRebuild).
var ErrSegmentLayout = errors.New("time segments cut for another retention")

// LayoutChange is what Open found of a store whose segments were cut with another
// interval than its retention gives now: the store was emptied, with its checkpoint, so
// that the restore that follows rebuilds it from the start of its changelog.
type LayoutChange struct {
	Store string
	// Recorded is the interval, in milliseconds, the segments were cut with; 0 when it
	// is unknown (a file written before the interval was recorded, with keys outside
	// the segments the present interval gives them).
	Recorded int64
	// Interval and Retention are the store's now, in milliseconds.
	Interval, Retention int64
}

// SegmentInterval is Kafka Streams' default segment interval of a window or session store
// of the given retention (Stores.persistentWindowStore, RocksDbSessionBytesStoreSupplier):
// max(retention/2, 60 s), in milliseconds. A store then has at most three live segments.
func SegmentInterval(retention int64) int64 { return max(retention/2, 60_000) }

// NoObservedTime is the observed stream time of a store that was never written (Kafka
// Streams' ConsumerRecord.NO_TIMESTAMP).
const NoObservedTime = -1

// Segmented is a Backend holding one store in time segments of an inner backend. Its
// store's keys are written to, read from and counted over the segments; its checkpoint
// stays the inner backend's checkpoint of the store. Next to the segments the inner
// backend holds the store's segment list, "<store>/segments": the observed stream time
// (written with the data, in the same write), the segment interval the segments were
// cut with, and one key per live segment, so opening the store finds them without
// reading its data.
//
// A segment id means nothing without its interval: a store's interval follows its
// retention (SegmentInterval), which a windowed aggregation derives from its grace, so
// a restart with another grace reads ids cut with the old interval as ids of the new
// one — live windows look expired and are dropped, or are looked for in the wrong
// segment and counted again from nothing. So the list records the interval, and a store
// opened with another one (or, written before the interval was recorded, with keys
// outside the segments the present interval gives them) is emptied, checkpoint first,
// and rebuilt from its changelog by the restore that follows (Open); nothing is dropped
// or trimmed by a layout that does not match the data.
//
// A write advances the observed stream time to the largest time among its keys (puts and
// deletes, as Kafka Streams' segmented stores do) and drops what falls in an expired
// segment: one whose id is below SegmentID(observed - retention). The expired segments
// themselves are dropped right after the write, each with one Wipe of the inner
// backend; a crash in between leaves them listed, and they are dropped when the store
// is next opened. Expired data is invisible before it is dropped (the window store
// layer filters by time), so dropping is only about space.
//
// Reads may come from other goroutines (interactive queries) while the task writes.
type Segmented struct {
	inner     Backend
	store     string
	spec      SegmentSpec
	interval  int64
	metaStore string

	mu     sync.RWMutex
	loaded bool
	// recorded: the list holds the store's interval (else the next write adds it).
	recorded bool
	// changed is the layout change the load found and emptied the store for (nil: none).
	changed  *LayoutChange
	observed int64
	segments []int64 // live segment ids, ascending
	// first holds, per live segment, a changelog offset at or below every record ever
	// written to the segment: the store's checkpoint when the segment was made (0 when
	// unknown). The changelog below the least of them holds only expired data (TrimOffset).
	first map[int64]int64
	// readOnly: a reader's layer over a snapshot (ViewAt), which repairs nothing on load
	// (the writer does: an expired segment is hidden by the window layer's time filter
	// anyway, and a layout change is wiped by the writer's Open before anything reads).
	readOnly bool
}

// NewSegmented makes the segmented backend of store over inner.
func NewSegmented(inner Backend, store string, spec SegmentSpec) *Segmented {
	return &Segmented{inner: inner, store: store, spec: spec, interval: SegmentInterval(spec.Retention),
		metaStore: store + "/segments", observed: NoObservedTime, first: map[int64]int64{}}
}

// Keys of the segment list.
var (
	observedKey   = []byte("observed")
	intervalKey   = []byte("interval")
	segmentPrefix = []byte("segment/")
)

// Interval is the segment interval in milliseconds.
func (s *Segmented) Interval() int64 { return s.interval }

// SegmentID is the segment of a time: time / interval, as Kafka Streams computes it
// (Java's integer division, which truncates like Go's).
func (s *Segmented) SegmentID(ts int64) int64 { return ts / s.interval }

// SegmentStore is the inner backend's name of a segment: the store's name, a slash (no
// store or topic name has one, so it cannot clash) and the segment id.
func (s *Segmented) SegmentStore(id int64) string {
	return s.store + "/segment-" + strconv.FormatInt(id, 10)
}

// ObservedTime returns the store's committed observed stream time: the largest time of
// a key written to it, or NoObservedTime.
func (s *Segmented) ObservedTime() (int64, error) {
	obs, _, err := s.state()
	return obs, err
}

// Segments returns the ids of the live segments, ascending.
func (s *Segmented) Segments() ([]int64, error) {
	_, segs, err := s.state()
	return segs, err
}

// state returns the observed time and the live segments, loading them on first use.
func (s *Segmented) state() (int64, []int64, error) {
	s.mu.RLock()
	if s.loaded {
		defer s.mu.RUnlock()
		return s.observed, s.segments, nil
	}
	s.mu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(); err != nil {
		return 0, nil, err
	}
	return s.observed, s.segments, nil
}

// Open loads the store's segment list and checks that its segments were cut with the
// interval its retention gives now. If they were not, the store cannot be read: ids cut
// with another interval put its live windows in the wrong segments, or below the oldest
// live one. Open then empties the store — its checkpoint first, so that whatever a crash
// interrupts, the next restore starts from the beginning of the changelog — and returns
// what it found; the caller must restore the store from its changelog before using it.
// With SegmentSpec.NoRebuild it fails with ErrSegmentLayout and changes nothing. A store
// written before the interval was recorded is kept, and its interval recorded, when
// every key lies in the segment the present interval gives it (one read of its keys);
// otherwise it is treated as cut with another interval.
//
// Every read or write of the store opens it first; call Open before anything else
// (before a restore reads the checkpoint) to learn of a change.
func (s *Segmented) Open() (*LayoutChange, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.loadLocked(); err != nil {
		return nil, err
	}
	return s.changed, nil
}

// loadLocked reads the segment list, checks its interval (checkLayoutLocked), and drops
// the segments it lists as expired (left by a crash between a write and its drops).
func (s *Segmented) loadLocked() error {
	if s.loaded {
		return nil
	}
	it, err := s.inner.Iterate(s.metaStore, nil, nil)
	if err != nil {
		return s.fail("read the segment list", err)
	}
	observed, segs, first, interval := int64(NoObservedTime), []int64(nil), map[int64]int64{}, int64(0)
	for it.Next() {
		k, v := it.Key(), it.Value()
		switch {
		case bytes.Equal(k, observedKey) && len(v) == 8:
			observed = int64(binary.BigEndian.Uint64(v))
		case bytes.Equal(k, intervalKey) && len(v) == 8:
			interval = int64(binary.BigEndian.Uint64(v))
		case bytes.HasPrefix(k, segmentPrefix) && len(k) == len(segmentPrefix)+8:
			id := int64(binary.BigEndian.Uint64(k[len(segmentPrefix):]))
			segs = append(segs, id)
			first[id] = 0 // a list written before first offsets were kept: nothing is trimmed
			if len(v) == 8 {
				first[id] = int64(binary.BigEndian.Uint64(v))
			}
		default:
			it.Close()
			return s.fail("read the segment list", fmt.Errorf("unexpected entry %q = %x in %q", k, v, s.metaStore))
		}
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		return s.fail("read the segment list", err)
	}
	slices.Sort(segs) // big-endian ids of non-negative times sort as the bytes do; be sure
	s.observed, s.segments, s.first = observed, segs, first
	if s.readOnly {
		s.loaded = true
		return nil
	}
	if err := s.checkLayoutLocked(interval); err != nil {
		return err
	}
	s.loaded = true
	// Expiry only now, by the interval the segments were cut with.
	return s.dropExpiredLocked()
}

// checkLayoutLocked compares the interval recorded in the list (0: none) with the
// store's, and empties the store for a rebuild when its segments were cut with another
// (see Open).
func (s *Segmented) checkLayoutLocked(recorded int64) error {
	switch {
	case recorded == s.interval:
		s.recorded = true
		return nil
	case len(s.segments) == 0:
		// Nothing is placed by any interval: the next write records the store's.
		s.recorded = false
		return nil
	case recorded == 0:
		fits, err := s.keysFitLocked()
		if err != nil {
			return err
		}
		if fits {
			entry := Entry{Key: intervalKey, Value: binary.BigEndian.AppendUint64(nil, uint64(s.interval))}
			if err := s.inner.Write(Batch{Writes: map[string][]Entry{s.metaStore: {entry}}}); err != nil {
				return s.fail("record the segment interval", err)
			}
			s.recorded = true
			return nil
		}
	}
	change := &LayoutChange{Store: s.store, Recorded: recorded, Interval: s.interval, Retention: s.spec.Retention}
	if s.spec.NoRebuild {
		return s.fail("open", fmt.Errorf("%w: %s; it cannot be rebuilt (it has no changelog, or, in the test driver, "+
			"its changelog starts empty): start it with the previous retention (a windowed aggregation's store keeps "+
			"its window size plus grace unless stream.Retention sets it), or delete the task's directory in the state "+
			"dir, losing the store's content", ErrSegmentLayout, change.describe()))
	}
	if err := s.wipeLocked(); err != nil {
		return err
	}
	s.changed = change
	return nil
}

// describe says what a layout change is, for errors and logs.
func (c *LayoutChange) describe() string {
	now := fmt.Sprintf("its retention is now %v (segments %v long)", ms(c.Retention), ms(c.Interval))
	if c.Recorded == 0 {
		return "its segments were cut with an interval its file does not record (written before the interval was recorded), " +
			"and some of its keys lie outside the segments of the present one; " + now
	}
	return fmt.Sprintf("its segments are %v long (a retention of %s), but %s", ms(c.Recorded), retentionOf(c.Recorded), now)
}

// String describes the change.
func (c *LayoutChange) String() string { return fmt.Sprintf("store %q: %s", c.Store, c.describe()) }

// retentionOf is the retention that gives a segment interval (SegmentInterval).
func retentionOf(interval int64) string {
	if interval <= 60_000 {
		return "2 minutes or less"
	}
	return "about " + ms(2*interval).String()
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// keysFitLocked reports whether every key of the listed segments lies in the segment
// the store's interval gives its time: then the segments are the ones this interval
// cuts, whatever interval wrote them. A key whose time cannot be read does not fit.
func (s *Segmented) keysFitLocked() (bool, error) {
	for _, id := range s.segments {
		it, err := s.inner.Iterate(s.SegmentStore(id), nil, nil)
		if err != nil {
			return false, s.fail("read the segments", err)
		}
		fits := true
		for fits && it.Next() {
			ts, err := s.spec.Time(it.Key())
			fits = err == nil && s.SegmentID(ts) == id
		}
		if err := errors.Join(it.Err(), it.Close()); err != nil {
			return false, s.fail("read the segments", err)
		}
		if !fits {
			return false, nil
		}
	}
	return true, nil
}

func (s *Segmented) fail(op string, err error) error {
	return fmt.Errorf("statestore: store %q: %s: %w", s.store, op, err)
}

// minLive is the id of the oldest live segment for an observed time (Kafka Streams'
// AbstractSegments.cleanupExpiredSegments).
func (s *Segmented) minLive(observed int64) int64 { return s.SegmentID(observed - s.spec.Retention) }

// dropExpiredLocked drops the segments below the oldest live one: a Wipe of each (one
// bucket delete in bbolt), then one write removing them from the list. A crash between
// the two leaves listed segments that are gone, which the next drop wipes again
// harmlessly.
func (s *Segmented) dropExpiredLocked() error {
	if s.observed == NoObservedTime {
		return nil
	}
	live := s.minLive(s.observed)
	n := 0
	for n < len(s.segments) && s.segments[n] < live {
		n++
	}
	if n == 0 {
		return nil
	}
	var unlist []Entry
	for _, id := range s.segments[:n] {
		if err := s.inner.Wipe(s.SegmentStore(id)); err != nil {
			return s.fail("drop expired segment", err)
		}
		unlist = append(unlist, Entry{Key: segmentKey(id)})
	}
	if err := s.inner.Write(Batch{Writes: map[string][]Entry{s.metaStore: unlist}}); err != nil {
		return s.fail("drop expired segment", err)
	}
	for _, id := range s.segments[:n] {
		delete(s.first, id)
	}
	s.segments = slices.Clone(s.segments[n:])
	return nil
}

func segmentKey(id int64) []byte {
	return binary.BigEndian.AppendUint64(slices.Clone(segmentPrefix), uint64(id))
}

// pendingWrite is what a translated write changes in the store's state once written.
type pendingWrite struct {
	observed int64
	segments []int64
	first    map[int64]int64 // of the segments it makes
}

// translate turns the entries of the store into writes of its segments and of its
// segment list, added to into; keys of expired segments are left out, and deletes of
// keys in segments that do not exist. The observed stream time advances to the largest
// time of the keys, and to atLeast (Buffer.ObserveTime; NoObservedTime for none).
func (s *Segmented) translate(into *Batch, entries []Entry, atLeast int64) (pendingWrite, error) {
	observed, segs, err := s.state()
	if err != nil {
		return pendingWrite{}, err
	}
	before := observed
	observed = max(observed, atLeast)
	times := make([]int64, len(entries))
	for i, e := range entries {
		ts, err := s.spec.Time(e.Key)
		if err != nil {
			return pendingWrite{}, s.fail("write", fmt.Errorf("key %x: %w", e.Key, err))
		}
		times[i], observed = ts, max(observed, ts)
	}
	s.mu.RLock()
	recorded := s.recorded
	s.mu.RUnlock()
	p := pendingWrite{observed: observed, segments: slices.Clone(segs), first: map[int64]int64{}}
	// Every record of this write comes after the store's checkpoint in its changelog (the
	// changelog's end when the store was last written), so a segment made now has its
	// records at or above it.
	from, ok, err := s.inner.Checkpoint(s.store)
	if err != nil {
		return pendingWrite{}, s.fail("write", err)
	}
	if !ok {
		from = 0
	}
	live := s.minLive(observed)
	var list []Entry
	for i, e := range entries {
		id := s.SegmentID(times[i])
		if id < live {
			continue // Kafka Streams: "Skipping record for expired segment."
		}
		if _, found := slices.BinarySearch(p.segments, id); !found {
			if e.Value == nil {
				continue // nothing to delete: the segment does not exist
			}
			p.segments = append(p.segments, id)
			slices.Sort(p.segments)
			p.first[id] = from
			list = append(list, Entry{Key: segmentKey(id), Value: binary.BigEndian.AppendUint64(nil, uint64(from))})
		}
		name := s.SegmentStore(id)
		into.Writes[name] = append(into.Writes[name], e)
	}
	if observed != before {
		list = append(list, Entry{Key: observedKey, Value: binary.BigEndian.AppendUint64(nil, uint64(observed))})
	}
	if !recorded {
		// The interval goes with the first write that may make a segment: ids are
		// never on disk without it.
		list = append(list, Entry{Key: intervalKey, Value: binary.BigEndian.AppendUint64(nil, uint64(s.interval))})
	}
	if len(list) > 0 {
		SortEntries(list)
		into.Writes[s.metaStore] = append(into.Writes[s.metaStore], list...)
	}
	return p, nil
}

// apply makes a written translation the store's state and drops the segments it expired.
func (s *Segmented) apply(p pendingWrite) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observed, s.segments, s.recorded = p.observed, p.segments, true
	maps.Copy(s.first, p.first)
	return s.dropExpiredLocked()
}

// join adds the store's dirty entries (and its checkpoint) to the batch of the inner
// backend, so that a flush writes every store of a task in one transaction; the
// returned function, called once that batch is written, updates the store's state.
func (s *Segmented) join(into *Batch, entries []Entry, atLeast int64) (func() error, error) {
	p, err := s.translate(into, entries, atLeast)
	if err != nil {
		return nil, err
	}
	return func() error { return s.apply(p) }, nil
}

// Write writes the batch: entries of the store go to their segments, with its segment
// list, in one write of the inner backend; entries of other stores pass through.
func (s *Segmented) Write(b Batch) error {
	in := Batch{Writes: map[string][]Entry{}, Checkpoints: b.Checkpoints}
	var p pendingWrite
	joined := false
	for store, entries := range b.Writes {
		if store != s.store {
			in.Writes[store] = entries
			continue
		}
		var err error
		if p, err = s.translate(&in, entries, NoObservedTime); err != nil {
			return err
		}
		joined = true
	}
	if err := s.inner.Write(in); err != nil {
		return err
	}
	if !joined {
		return nil
	}
	return s.apply(p)
}

// Get reads key from its segment; a key of a segment that is not live is absent.
func (s *Segmented) Get(store string, key []byte) ([]byte, error) {
	if store != s.store {
		return s.inner.Get(store, key)
	}
	_, segs, err := s.state()
	if err != nil {
		return nil, err
	}
	ts, err := s.spec.Time(key)
	if err != nil {
		return nil, s.fail("get", fmt.Errorf("key %x: %w", key, err))
	}
	id := s.SegmentID(ts)
	if _, ok := slices.BinarySearch(segs, id); !ok {
		return nil, nil
	}
	return s.inner.Get(s.SegmentStore(id), key)
}

// Iterate walks [from, to) of every live segment, merged in key order: the order of the
// store's keys, as the write buffer above expects.
func (s *Segmented) Iterate(store string, from, to []byte) (BytesIterator, error) {
	if store != s.store {
		return s.inner.Iterate(store, from, to)
	}
	_, segs, err := s.state()
	if err != nil {
		return nil, err
	}
	its := make([]BytesIterator, 0, len(segs))
	for _, id := range segs {
		it, err := s.inner.Iterate(s.SegmentStore(id), from, to)
		if err != nil {
			for _, it := range its {
				it.Close()
			}
			return nil, err
		}
		its = append(its, it)
	}
	if len(its) == 1 {
		return its[0], nil
	}
	return &unionIterator{its: its}, nil
}

// Count adds up the keys of the live segments.
func (s *Segmented) Count(store string) (int64, error) {
	if store != s.store {
		return s.inner.Count(store)
	}
	_, segs, err := s.state()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, id := range segs {
		c, err := s.inner.Count(s.SegmentStore(id))
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// TrimOffset returns the offset below which the store's changelog holds only records of
// expired segments, which no restore needs: the least first offset of the live
// segments, or the store's checkpoint when none is live. ok is false when nothing can
// be trimmed (no checkpoint, or a live segment of unknown first offset).
//
// Kafka Streams bounds its window changelogs by time instead (compact,delete with the
// store's retention plus a day, against the records' timestamps), which deletes windows
// still live when stream time stands still for longer, or lags the wall clock (input
// reprocessed from the past). Deleting below this offset removes expired data only.
func (s *Segmented) TrimOffset() (int64, bool, error) {
	_, segs, err := s.state()
	if err != nil {
		return 0, false, err
	}
	if len(segs) == 0 {
		return s.inner.Checkpoint(s.store)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	least := int64(-1)
	for _, id := range s.segments {
		if f := s.first[id]; least == -1 || f < least {
			least = f
		}
	}
	return least, least > 0, nil
}

// Checkpoint is the inner backend's checkpoint of the store, read after the store is
// opened: a store emptied by Open for a rebuild has none, so a restore reads its
// changelog from the start, never only the tail after a checkpoint of the old layout.
func (s *Segmented) Checkpoint(store string) (int64, bool, error) {
	if store == s.store {
		if _, _, err := s.state(); err != nil {
			return 0, false, err
		}
	}
	return s.inner.Checkpoint(store)
}

// Wipe empties the store: its checkpoint, every listed segment, and the list.
func (s *Segmented) Wipe(store string) error {
	if store != s.store {
		return s.inner.Wipe(store)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loaded = false // until the wipe is done: a failed one leaves the list to be read again
	if err := s.wipeLocked(); err != nil {
		return err
	}
	s.loaded = true
	return nil
}

// wipeLocked empties the store, in an order that a crash anywhere leaves a store that
// is restored from the changelog's start: the checkpoint first (without it the next
// restore wipes the store again), then the segments the list names, then the list, so
// no segment outlives its entry in the list.
func (s *Segmented) wipeLocked() error {
	if err := s.inner.Wipe(s.store); err != nil {
		return s.fail("wipe", err)
	}
	// The list as it is on disk, read without dropping anything: every segment it names
	// is wiped.
	it, err := s.inner.Iterate(s.metaStore, segmentPrefix, nil)
	if err != nil {
		return s.fail("wipe", err)
	}
	var segs []int64
	for it.Next() {
		if k := it.Key(); bytes.HasPrefix(k, segmentPrefix) && len(k) == len(segmentPrefix)+8 {
			segs = append(segs, int64(binary.BigEndian.Uint64(k[len(segmentPrefix):])))
		}
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		return s.fail("wipe", err)
	}
	for _, id := range segs {
		if err := s.inner.Wipe(s.SegmentStore(id)); err != nil {
			return s.fail("wipe", err)
		}
	}
	if err := s.inner.Wipe(s.metaStore); err != nil {
		return s.fail("wipe", err)
	}
	s.observed, s.segments, s.first, s.recorded = NoObservedTime, nil, map[int64]int64{}, false
	return nil
}

// Close closes the inner backend (closing a backend twice is harmless).
func (s *Segmented) Close() error { return s.inner.Close() }

// Inner is the backend holding the segments.
func (s *Segmented) Inner() Backend { return s.inner }

// beginUnsynced and endUnsynced pass a Restorer's fsync switch to the inner backend.
func (s *Segmented) beginUnsynced() error {
	if u, ok := s.inner.(unsyncedWriter); ok {
		return u.beginUnsynced()
	}
	return nil
}

func (s *Segmented) endUnsynced() error {
	if u, ok := s.inner.(unsyncedWriter); ok {
		return u.endUnsynced()
	}
	return nil
}

// unionIterator merges iterators over disjoint key sets in key order.
type unionIterator struct {
	its     []BytesIterator
	ok      []bool
	started bool
	cur     int
	err     error
}

func (u *unionIterator) Next() bool {
	if u.err != nil {
		return false
	}
	if !u.started {
		u.started = true
		u.ok = make([]bool, len(u.its))
		for i, it := range u.its {
			u.ok[i] = it.Next()
		}
	} else if u.cur >= 0 {
		u.ok[u.cur] = u.its[u.cur].Next()
	}
	u.cur = -1
	for i, it := range u.its {
		if !u.ok[i] {
			if err := it.Err(); err != nil {
				u.err = err
				return false
			}
			continue
		}
		if u.cur < 0 || bytes.Compare(it.Key(), u.its[u.cur].Key()) < 0 {
			u.cur = i
		}
	}
	return u.cur >= 0
}

func (u *unionIterator) Key() []byte   { return u.its[u.cur].Key() }
func (u *unionIterator) Value() []byte { return u.its[u.cur].Value() }
func (u *unionIterator) Err() error    { return u.err }

func (u *unionIterator) Close() error {
	var errs []error
	for _, it := range u.its {
		errs = append(errs, it.Close())
	}
	return errors.Join(errs...)
}
