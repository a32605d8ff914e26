package kvstore

import (
	"bytes"
	"errors"
	"fmt"
	"sort"

	"github.com/eddy-streams/eddy/statestore"
)

// ChangelogWriter takes the changelog records of a commit: one per dirty key, the key's
// last value, nil for a delete. The runtime implements it with the task's transactional
// producer, so the records join the commit's Kafka transaction.
type ChangelogWriter interface {
	WriteChange(store string, key, value []byte) error
}

// Set is the stores of one task over one Backend, and the task's commit protocol:
//
//	LogChanges(w)      before the Kafka transaction commits: dirty keys → changelog
//	Flush(checkpoints) after it committed: dirty keys + checkpoints → backend, atomically
//	Discard()          after it aborted: drop the dirty keys
//
// A Set is used by its task's goroutine only.
type Set struct {
	backend Backend
	buffers map[string]*Buffer
	names   []string
	closed  bool
}

// NewSet makes an empty set of stores over backend.
func NewSet(backend Backend) *Set {
	return &Set{backend: backend, buffers: map[string]*Buffer{}}
}

// Backend returns the set's backend, for restore.
func (s *Set) Backend() Backend { return s.backend }

// Register adds a store kept in the set's backend. A logged store writes its dirty keys
// to the changelog at commit; an unlogged one is only local (and lost with its file).
func (s *Set) Register(name string, logged bool) (*Buffer, error) {
	return s.RegisterIn(name, logged, s.backend)
}

// RegisterIn adds a store kept in another backend than the set's (an in-memory store of
// a task whose other stores live in bbolt). Flush writes each backend atomically, one
// after the other.
func (s *Set) RegisterIn(name string, logged bool, backend Backend) (*Buffer, error) {
	if _, dup := s.buffers[name]; dup {
		return nil, fmt.Errorf("statestore: store %q registered twice", name)
	}
	b := &Buffer{name: name, logged: logged, backend: backend, dirty: map[string]dirtyValue{}, observed: NoObservedTime}
	s.buffers[name] = b
	s.names = append(s.names, name)
	sort.Strings(s.names)
	return b, nil
}

// Buffer returns the caching layer of a registered store, or nil.
func (s *Set) Buffer(name string) *Buffer { return s.buffers[name] }

// Names lists the registered stores, sorted.
func (s *Set) Names() []string { return s.names }

// Dirty returns the number of keys changed since the last Flush or Discard.
func (s *Set) Dirty() int {
	n := 0
	for _, b := range s.buffers {
		n += len(b.dirty)
	}
	return n
}

// LogChanges hands one changelog record per dirty key of every logged store to w, in
// store-name then key order. It does not clear the buffers: Flush or Discard does,
// depending on how the transaction ends.
func (s *Set) LogChanges(w ChangelogWriter) error {
	if s.closed {
		return statestore.ErrClosed
	}
	for _, name := range s.names {
		b := s.buffers[name]
		if !b.logged {
			continue
		}
		for _, e := range b.sortedDirty() {
			if err := w.WriteChange(name, e.Key, e.Value); err != nil {
				return &statestore.StoreError{Store: name, Op: "write changelog", Err: err}
			}
		}
	}
	return nil
}

// Flush writes every dirty key of every store and the given changelog checkpoints to the
// backend in one atomic write, then empties the buffers. Call it only after the
// transaction carrying the changelog records committed.
func (s *Set) Flush(checkpoints map[string]int64) error {
	if s.closed {
		return statestore.ErrClosed
	}
	batches := map[Backend]*Batch{}
	batchOf := func(be Backend) *Batch {
		b := batches[be]
		if b == nil {
			b = &Batch{Writes: map[string][]Entry{}, Checkpoints: map[string]int64{}}
			batches[be] = b
		}
		return b
	}
	var written []func() error // segmented stores: update their state once written
	for _, name := range s.names {
		b := s.buffers[name]
		be := b.backend
		if sg, ok := be.(*Segmented); ok {
			be = sg.inner // one write per real backend
			if len(b.dirty) > 0 || b.observed != NoObservedTime {
				fn, err := sg.join(batchOf(be), b.sortedDirty(), b.observed)
				if err != nil {
					return fmt.Errorf("statestore: flush: %w", err)
				}
				written = append(written, fn)
			}
		} else if len(b.dirty) > 0 {
			batchOf(be).Writes[name] = b.sortedDirty()
		}
		if off, ok := checkpoints[name]; ok {
			batchOf(be).Checkpoints[name] = off
		}
	}
	for be, batch := range batches {
		if err := be.Write(*batch); err != nil {
			return fmt.Errorf("statestore: flush: %w", err)
		}
	}
	for _, fn := range written {
		if err := fn(); err != nil {
			return fmt.Errorf("statestore: flush: %w", err)
		}
	}
	for _, b := range s.buffers {
		b.clear()
		b.ended(true)
	}
	return nil
}

// ChangelogTrims returns, for each logged store kept in time segments, the offset below
// which its changelog holds only expired data (Segmented.TrimOffset): the runtime deletes
// the records below it, so the changelog of a window store stays as long as its
// retention, not its history.
func (s *Set) ChangelogTrims() (map[string]int64, error) {
	out := map[string]int64{}
	for _, name := range s.names {
		b := s.buffers[name]
		sg, ok := b.backend.(*Segmented)
		if !ok || !b.logged {
			continue
		}
		off, ok, err := sg.TrimOffset()
		if err != nil {
			return nil, err
		}
		if ok {
			out[name] = off
		}
	}
	return out, nil
}

// Discard drops every buffered change, as after an aborted transaction.
func (s *Set) Discard() {
	for _, b := range s.buffers {
		b.clear()
		b.ended(false)
	}
}

// Close discards the buffers and closes every backend of the set.
func (s *Set) Close() error {
	if s.closed {
		return nil
	}
	s.Discard()
	s.closed = true
	// Several stores may share one extra backend (a task's in-memory stores): close each
	// backend once.
	closed := map[Backend]bool{s.backend: true}
	errs := []error{s.backend.Close()}
	for _, name := range s.names {
		be := s.buffers[name].backend
		if !closed[be] {
			closed[be] = true
			errs = append(errs, be.Close())
		}
	}
	return errors.Join(errs...)
}

// Buffer is the caching layer of one store: the write buffer of the open commit, one
// entry per key (the last write wins), read before the backend (read-your-writes).
type Buffer struct {
	name    string
	logged  bool
	backend Backend
	dirty   map[string]dirtyValue
	sorted  []Entry // cache of sortedDirty, nil when stale
	onEnd   []func(committed bool)
	// observed is a time the store's observed stream time reaches at the next flush
	// though no buffered key carries it (NoObservedTime: none); see ObserveTime.
	observed int64
}

// ObserveTime makes the next flush advance the observed stream time of a store kept in
// time segments (Segmented) to at least ts, though no key written carries it: a null
// put into a store of duplicates writes nothing, yet advances the time of Kafka
// Streams' store (and so expires old windows); without this, the advance would last
// only until the commit. It is dropped with the buffer on abort, as the writes are.
func (b *Buffer) ObserveTime(ts int64) { b.observed = max(b.observed, ts) }

// OnCommitEnd registers fn to run when the open commit ends: after Flush with true,
// after Discard with false. A layer that keeps state derived from the buffered writes
// (a window store's observed stream time) keeps it or returns to its committed value.
func (b *Buffer) OnCommitEnd(fn func(committed bool)) { b.onEnd = append(b.onEnd, fn) }

func (b *Buffer) ended(committed bool) {
	for _, fn := range b.onEnd {
		fn(committed)
	}
}

type dirtyValue struct {
	value []byte // nil: deleted
}

// Name is the store's name.
func (b *Buffer) Name() string { return b.name }

// Backend is the backend the store lives in; restore writes to it directly.
func (b *Buffer) Backend() Backend { return b.backend }

// Logged reports whether the store writes a changelog.
func (b *Buffer) Logged() bool { return b.logged }

// Get returns the value of key, from the buffer if it holds the key, else from the
// backend; nil when absent.
func (b *Buffer) Get(key []byte) ([]byte, error) {
	if d, ok := b.dirty[string(key)]; ok {
		// A copy: a serde may hand the bytes to the caller (Bytes does), who must not be
		// able to change a buffered value behind the store's back.
		return bytes.Clone(d.value), nil
	}
	v, err := b.backend.Get(b.name, key)
	if err != nil {
		return nil, &statestore.StoreError{Store: b.name, Op: "get", Err: err}
	}
	return v, nil
}

// Put buffers a new value for key; a nil value is a delete. The buffer keeps its own
// copies of key and value.
func (b *Buffer) Put(key, value []byte) {
	if value != nil {
		value = bytes.Clone(value)
	}
	b.dirty[string(key)] = dirtyValue{value: value}
	b.sorted = nil
}

// Count estimates the keys: the backend's count plus buffered keys the backend lacks,
// minus buffered deletes of keys the backend has.
func (b *Buffer) Count() (int64, error) {
	n, err := b.backend.Count(b.name)
	if err != nil {
		return 0, &statestore.StoreError{Store: b.name, Op: "count", Err: err}
	}
	for k, d := range b.dirty {
		old, err := b.backend.Get(b.name, []byte(k))
		if err != nil {
			return 0, &statestore.StoreError{Store: b.name, Op: "count", Err: err}
		}
		switch {
		case old == nil && d.value != nil:
			n++
		case old != nil && d.value == nil:
			n--
		}
	}
	return n, nil
}

// Iterate walks [from, to) (nil bounds are open) in key order, the buffer merged over
// the backend: buffered values replace backend values, buffered deletes hide them.
func (b *Buffer) Iterate(from, to []byte) (BytesIterator, error) {
	var over []Entry
	for _, e := range b.sortedDirty() {
		if (from == nil || bytes.Compare(e.Key, from) >= 0) && (to == nil || bytes.Compare(e.Key, to) < 0) {
			over = append(over, e)
		}
	}
	under, err := b.backend.Iterate(b.name, from, to)
	if err != nil {
		return nil, &statestore.StoreError{Store: b.name, Op: "iterate", Err: err}
	}
	if len(over) == 0 {
		return under, nil
	}
	return &mergeIterator{over: over, under: under, overPos: -1}, nil
}

func (b *Buffer) sortedDirty() []Entry {
	if b.sorted == nil && len(b.dirty) > 0 {
		b.sorted = make([]Entry, 0, len(b.dirty))
		for k, d := range b.dirty {
			b.sorted = append(b.sorted, Entry{Key: []byte(k), Value: d.value})
		}
		SortEntries(b.sorted)
	}
	return b.sorted
}

func (b *Buffer) clear() {
	clear(b.dirty)
	b.sorted = nil
	b.observed = NoObservedTime
}

// mergeIterator merges a snapshot of buffered entries (over) with a backend iterator
// (under). Both are in key order; on equal keys over wins, and an over entry with a
// nil value hides the key.
type mergeIterator struct {
	over    []Entry
	overPos int
	under   BytesIterator
	// state of under
	underOK   bool
	underInit bool
	key, val  []byte
	advUnder  bool // under must advance before the next comparison
	advOver   bool
	err       error
}

func (m *mergeIterator) Next() bool {
	if !m.underInit {
		m.underInit = true
		m.underOK = m.under.Next()
		m.overPos = 0
	} else {
		if m.advUnder {
			m.underOK = m.under.Next()
		}
		if m.advOver {
			m.overPos++
		}
	}
	for {
		m.advUnder, m.advOver = false, false
		haveOver := m.overPos < len(m.over)
		if !m.underOK {
			if err := m.under.Err(); err != nil {
				m.err = err
				return false
			}
		}
		switch {
		case !haveOver && !m.underOK:
			return false
		case haveOver && (!m.underOK || bytes.Compare(m.over[m.overPos].Key, m.under.Key()) <= 0):
			e := m.over[m.overPos]
			sameKey := m.underOK && bytes.Equal(e.Key, m.under.Key())
			if e.Value == nil { // a buffered delete hides the key
				m.overPos++
				if sameKey {
					m.underOK = m.under.Next()
				}
				continue
			}
			m.key, m.val = e.Key, e.Value
			m.advOver, m.advUnder = true, sameKey
			return true
		default:
			// Valid until under's next step, which is all BytesIterator promises.
			m.key, m.val = m.under.Key(), m.under.Value()
			m.advUnder = true
			return true
		}
	}
}

func (m *mergeIterator) Key() []byte   { return m.key }
func (m *mergeIterator) Value() []byte { return m.val }
func (m *mergeIterator) Err() error    { return m.err }
func (m *mergeIterator) Close() error  { return m.under.Close() }

// Dirty returns the number of keys changed in this store since the last Flush or
// Discard.
func (b *Buffer) Dirty() int { return len(b.dirty) }
