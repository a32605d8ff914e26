package kvstore

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

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
// A commit whose Kafka transaction is still under way while the task processes on
// (an overlapped commit, docs/architecture.md) seals its keys first:
//
//	LogChanges(w); Seal()  the dirty keys become the sealed layer, read-only, and the
//	                       next commit's writes fill a new write buffer above it
//	Flush(checkpoints)     the transaction committed: the sealed layer → backend; the
//	                       open write buffer stays
//	Discard()              it aborted: both layers dropped (the runtime replays the
//	                       input of both commits)
//
// With WriteBehind, Flush holds the committed changes in memory (the buffers' held
// layer, read between the write buffer and the backend) and writes them, with the
// latest checkpoints, once enough are held or enough time passed: a store file
// transaction and its fsync per write interval instead of per commit. The file stays
// what a flush would have left some commits earlier — its data and checkpoints
// match — so a crash costs a longer changelog tail to restore, never a wrong store.
// An unlogged store has no tail to restore: a crash loses the changes held (up to
// maxAge of them; Config.StoreWriteInterval documents it).
//
// A Set is used by its task's goroutine only, but for ReadCommitted.
type Set struct {
	backend Backend
	buffers map[string]*Buffer
	names   []string
	closed  bool

	// Write-behind (WriteBehind); holdKeys 0: every Flush writes.
	holdKeys  int
	holdFor   time.Duration
	clock     func() time.Time
	lastWrite time.Time
	heldKeys  int // keys held across the buffers (each Buffer holds its own, and their checkpoint)

	// sealed: Seal made every buffer's dirty keys its sealed layer, and the next Flush
	// or Discard ends it.
	sealed bool
}

// WriteBehind makes Flush hold committed changes until maxKeys are held across the
// stores or maxAge passed since the last write, then write them at once; the first
// write comes after a random part of maxAge, so that the tasks of an instance do not
// all write at the same commit. A set with a store kept in time segments (window and
// session stores) writes at every Flush, as before: their segment bookkeeping is
// written with their data. clock is time.Now when nil.
func (s *Set) WriteBehind(maxKeys int, maxAge time.Duration, clock func() time.Time) {
	for _, b := range s.buffers {
		if _, ok := b.backend.(*Segmented); ok {
			return
		}
	}
	if maxKeys <= 0 || maxAge <= 0 {
		return
	}
	if clock == nil {
		clock = time.Now
	}
	s.holdKeys, s.holdFor, s.clock = maxKeys, maxAge, clock
	s.lastWrite = clock().Add(-rand.N(maxAge))
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

// ErrSealed is returned by Seal while an earlier seal has not ended (Flush or
// Discard): at most one commit is under way while the next one fills.
var ErrSealed = errors.New("statestore: the stores are sealed already (an earlier commit is still under way)")

// Seal makes every store's dirty keys its sealed layer, read-only and read below the
// new (empty) write buffer, which the writes from now on fill: the commit that logged
// the dirty keys (LogChanges) is under way, and the next Flush writes exactly them
// (Discard drops both layers). The stores' OnSeal functions run.
func (s *Set) Seal() error {
	if s.closed {
		return statestore.ErrClosed
	}
	if s.sealed {
		return ErrSealed
	}
	s.sealed = true
	for _, b := range s.buffers {
		b.seal()
	}
	return nil
}

// Sealed reports whether a sealed layer awaits its Flush or Discard.
func (s *Set) Sealed() bool { return s.sealed }

// ToFlush returns the number of keys the next Flush writes: the sealed layer's, else
// the dirty keys.
func (s *Set) ToFlush() int {
	n := 0
	for _, b := range s.buffers {
		n += len(b.flushing())
	}
	return n
}

// Dirty returns the number of keys changed since the last Flush or Discard (since the
// last Seal, while sealed).
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

// Flush writes every dirty key of every store (every sealed one, while sealed) and the
// given changelog checkpoints to the backend in one atomic write, then empties what it
// wrote. Call it only after the transaction carrying the changelog records committed.
func (s *Set) Flush(checkpoints map[string]int64) error {
	if s.closed {
		return statestore.ErrClosed
	}
	if s.holdKeys > 0 {
		return s.hold(checkpoints)
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
			if len(b.flushing()) > 0 || b.flushingObserved() != NoObservedTime {
				fn, err := sg.join(batchOf(be), b.sortedFlushing(), b.flushingObserved())
				if err != nil {
					return fmt.Errorf("statestore: flush: %w", err)
				}
				written = append(written, fn)
			}
		} else if len(b.flushing()) > 0 {
			batchOf(be).Writes[name] = b.sortedFlushing()
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
	s.flushed()
	return nil
}

// flushed empties what Flush wrote (the sealed layers, or the write buffers) and tells
// the stores their commit ended.
func (s *Set) flushed() {
	for _, b := range s.buffers {
		if s.sealed {
			b.unseal()
		} else {
			b.clear()
		}
		b.ended(true)
	}
	s.sealed = false
}

// hold moves the committed write buffers into the held layer, and writes it when due.
func (s *Set) hold(checkpoints map[string]int64) error {
	s.heldKeys = 0
	for name, b := range s.buffers {
		off, hasOff := checkpoints[name]
		if len(b.flushing()) > 0 || hasOff {
			b.heldMu.Lock()
			if len(b.flushing()) > 0 {
				if b.held == nil {
					b.held = map[string]dirtyValue{}
				}
				maps.Copy(b.held, b.flushing())
				b.heldSorted = nil
			}
			if hasOff {
				b.heldCheckpoint, b.hasHeldCheckpoint = off, true
			}
			b.heldMu.Unlock()
		}
		s.heldKeys += len(b.held)
	}
	s.flushed()
	if s.heldKeys >= s.holdKeys || s.clock().Sub(s.lastWrite) >= s.holdFor {
		return s.WriteHeld()
	}
	return nil
}

// WriteHeld writes the held changes and their checkpoints to the backend in one atomic
// write (under WriteBehind; otherwise there are none). Call it before anything writes
// the backend directly (a restore) and before a task stops.
func (s *Set) WriteHeld() error {
	if s.closed {
		return statestore.ErrClosed
	}
	batches := map[Backend]*Batch{}
	for _, name := range s.names {
		b := s.buffers[name]
		if len(b.held) == 0 && !b.hasHeldCheckpoint {
			continue
		}
		batch := batches[b.backend]
		if batch == nil {
			batch = &Batch{Writes: map[string][]Entry{}, Checkpoints: map[string]int64{}}
			batches[b.backend] = batch
		}
		if len(b.held) > 0 {
			batch.Writes[name] = sortedEntries(b.held)
		}
		if b.hasHeldCheckpoint {
			batch.Checkpoints[name] = b.heldCheckpoint
		}
	}
	if len(batches) == 0 {
		return nil
	}
	for be, batch := range batches {
		if err := be.Write(*batch); err != nil {
			return fmt.Errorf("statestore: write held changes: %w", err)
		}
	}
	for _, b := range s.buffers {
		b.heldMu.Lock()
		b.held, b.hasHeldCheckpoint = nil, false
		b.heldMu.Unlock()
		b.heldSorted = nil
	}
	s.heldKeys = 0
	s.lastWrite = s.clock()
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

// Discard drops every buffered change (the sealed layer's too), as after an aborted
// transaction.
func (s *Set) Discard() {
	for _, b := range s.buffers {
		b.unseal()
		b.clear()
		b.ended(false)
	}
	s.sealed = false
}

// Close discards the buffers and closes every backend of the set.
func (s *Set) Close() error {
	if s.closed {
		return nil
	}
	s.Discard()
	// A clean close leaves the file current, so that the next owner restores no tail.
	heldErr := s.WriteHeld()
	s.closed = true
	// Several stores may share one extra backend (a task's in-memory stores): close each
	// backend once.
	closed := map[Backend]bool{s.backend: true}
	errs := []error{heldErr, s.backend.Close()}
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
	onSeal  []func()
	// sealed is the write buffer of the commit under way (Set.Seal; nil: none), read
	// between dirty and held, written by the next Flush; sealedSorted caches it in key
	// order and sealedObserved is its ObserveTime. spare is an emptied map that the next
	// seal reuses as the write buffer.
	sealed         map[string]dirtyValue
	sealedSorted   []Entry
	sealedObserved int64
	spare          map[string]dirtyValue
	// observed is a time the store's observed stream time reaches at the next flush
	// though no buffered key carries it (NoObservedTime: none); see ObserveTime.
	observed int64
	// held is the committed changes not yet written (Set.WriteBehind), read after
	// dirty and before the backend. The task's goroutine alone changes it, under
	// heldMu, which interactive queries hold to read it (ReadCommitted).
	heldMu sync.RWMutex
	held   map[string]dirtyValue
	// heldCheckpoint is the changelog checkpoint of the held changes (hasHeldCheckpoint:
	// the last commit gave one), under heldMu like held: a snapshot read over them
	// reports it (ReadCommittedSnapshot).
	heldCheckpoint    int64
	hasHeldCheckpoint bool
	// heldSorted caches held in key order for Iterate (nil when stale); the task's
	// goroutine alone uses it.
	heldSorted []Entry
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

// OnSeal registers fn to run when the set seals (Set.Seal): a layer that keeps state
// derived from the buffered writes keeps the sealed writes' part apart, for OnCommitEnd
// after the next Flush to end only that part.
func (b *Buffer) OnSeal(fn func()) { b.onSeal = append(b.onSeal, fn) }

func (b *Buffer) seal() {
	next := b.spare
	if next == nil {
		next = map[string]dirtyValue{}
	}
	b.sealed, b.dirty, b.spare = b.dirty, next, nil
	b.sealedSorted, b.sorted = b.sorted, nil
	b.sealedObserved, b.observed = b.observed, NoObservedTime
	for _, fn := range b.onSeal {
		fn()
	}
}

// unseal drops the sealed layer (written or discarded).
func (b *Buffer) unseal() {
	if b.sealed == nil {
		return
	}
	clear(b.sealed)
	b.spare, b.sealed, b.sealedSorted = b.sealed, nil, nil
	b.sealedObserved = NoObservedTime
}

// flushing returns the layer the next Flush writes: the sealed one, else the dirty keys.
func (b *Buffer) flushing() map[string]dirtyValue {
	if b.sealed != nil {
		return b.sealed
	}
	return b.dirty
}

func (b *Buffer) sortedFlushing() []Entry {
	if b.sealed == nil {
		return b.sortedDirty()
	}
	return b.sortedSealed()
}

func (b *Buffer) sortedSealed() []Entry {
	if b.sealedSorted == nil && len(b.sealed) > 0 {
		b.sealedSorted = sortedEntries(b.sealed)
	}
	return b.sealedSorted
}

func (b *Buffer) flushingObserved() int64 {
	if b.sealed != nil {
		return b.sealedObserved
	}
	return b.observed
}

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
	if d, ok := b.sealed[string(key)]; ok {
		return bytes.Clone(d.value), nil
	}
	if d, ok := b.held[string(key)]; ok {
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
	// Each layer over those below it: the held changes over the backend, the sealed
	// layer over both, the write buffer over all.
	layers := []map[string]dirtyValue{b.held, b.sealed, b.dirty}
	for i, layer := range layers {
		for k, d := range layer {
			old, err := b.below(layers[:i], k)
			if err != nil {
				return 0, &statestore.StoreError{Store: b.name, Op: "count", Err: err}
			}
			n += countDelta(old, d.value)
		}
	}
	return n, nil
}

// below returns the value of key in the topmost of layers that holds it, else in the
// backend.
func (b *Buffer) below(layers []map[string]dirtyValue, key string) ([]byte, error) {
	for i := len(layers) - 1; i >= 0; i-- {
		if d, ok := layers[i][key]; ok {
			return d.value, nil
		}
	}
	return b.backend.Get(b.name, []byte(key))
}

// countDelta is what replacing old by new adds to a key count.
func countDelta(old, new []byte) int64 {
	switch {
	case old == nil && new != nil:
		return 1
	case old != nil && new == nil:
		return -1
	}
	return 0
}

// Iterate walks [from, to) (nil bounds are open) in key order, the buffer merged over
// the sealed layer over the held changes over the backend: buffered values replace the
// others, buffered deletes hide them.
func (b *Buffer) Iterate(from, to []byte) (BytesIterator, error) {
	over := inRange(b.sortedDirty(), from, to)
	if len(b.sealed) > 0 {
		over = overlay(over, inRange(b.sortedSealed(), from, to))
	}
	if len(b.held) > 0 {
		if b.heldSorted == nil {
			b.heldSorted = sortedEntries(b.held)
		}
		over = overlay(over, inRange(b.heldSorted, from, to))
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
		b.sorted = sortedEntries(b.dirty)
	}
	return b.sorted
}

// sortedEntries returns the entries of m in key order.
func sortedEntries(m map[string]dirtyValue) []Entry {
	es := make([]Entry, 0, len(m))
	for k, d := range m {
		es = append(es, Entry{Key: []byte(k), Value: d.value})
	}
	SortEntries(es)
	return es
}

// inRange returns the entries of sorted es in [from, to) (nil bounds are open).
func inRange(es []Entry, from, to []byte) []Entry {
	var out []Entry
	for _, e := range es {
		if (from == nil || bytes.Compare(e.Key, from) >= 0) && (to == nil || bytes.Compare(e.Key, to) < 0) {
			out = append(out, e)
		}
	}
	return out
}

// overlay merges two sorted entry lists; on equal keys top wins.
func overlay(top, bottom []Entry) []Entry {
	out := make([]Entry, 0, len(top)+len(bottom))
	i, j := 0, 0
	for i < len(top) || j < len(bottom) {
		switch {
		case j == len(bottom) || (i < len(top) && bytes.Compare(top[i].Key, bottom[j].Key) < 0):
			out = append(out, top[i])
			i++
		case i == len(top) || bytes.Compare(top[i].Key, bottom[j].Key) > 0:
			out = append(out, bottom[j])
			j++
		default:
			out = append(out, top[i])
			i, j = i+1, j+1
		}
	}
	return out
}

// ReadCommitted runs read on the committed state of the store — its held changes over
// its backend — from another goroutine than the task's (an interactive query).
func (b *Buffer) ReadCommitted(read func(Backend) error) error {
	b.heldMu.RLock()
	defer b.heldMu.RUnlock()
	if len(b.held) == 0 {
		return read(b.backend)
	}
	return read(heldView{Backend: b.backend, store: b.name, held: b.held})
}

// ReadCommittedSnapshot runs a snapshot read (GetAt, ScanAt) on the committed state of
// the store — its held changes over its backend — from another goroutine than the
// task's, and returns what the read saw with the checkpoint of that state: the held
// changes' own when the task holds any, the store file's otherwise. A task that does
// not run (suspended between sessions) may hold committed changes not yet in its file,
// or none there at all (a file with no checkpoint yet: its commits all came within
// Config.StoreWriteInterval of its start); reading the file alone answered older
// values, or ErrNotReady for as long as the task did not run.
//
// Why the held checkpoint is that of what the read saw: the held changes are every
// committed change since the file's checkpoint, and while heldMu is held for reading
// the task's goroutine changes neither them nor their checkpoint; the one write it may
// make to the file meanwhile (WriteHeld) writes exactly the held changes, which the
// read sees over the file either way.
func (b *Buffer) ReadCommittedSnapshot(read func(Backend) (Snapshot, error)) (Snapshot, error) {
	b.heldMu.RLock()
	defer b.heldMu.RUnlock()
	if len(b.held) == 0 && !b.hasHeldCheckpoint {
		return read(b.backend)
	}
	v := heldView{Backend: b.backend, store: b.name, held: b.held}
	if b.hasHeldCheckpoint {
		v.checkpoint = &b.heldCheckpoint
	}
	return read(v)
}

// heldView is a backend with one store's held changes over it, for ReadCommitted and
// ReadCommittedSnapshot.
type heldView struct {
	Backend
	store string
	held  map[string]dirtyValue
	// checkpoint, when set, is the held changes' checkpoint: the store's in this view.
	checkpoint *int64
}

func (v heldView) Checkpoint(store string) (int64, bool, error) {
	if store == v.store && v.checkpoint != nil {
		return *v.checkpoint, true, nil
	}
	return v.Backend.Checkpoint(store)
}

func (v heldView) Get(store string, key []byte) ([]byte, error) {
	if d, ok := v.held[string(key)]; ok && store == v.store {
		return bytes.Clone(d.value), nil
	}
	return v.Backend.Get(store, key)
}

func (v heldView) Iterate(store string, from, to []byte) (BytesIterator, error) {
	under, err := v.Backend.Iterate(store, from, to)
	if err != nil || store != v.store {
		return under, err
	}
	return &mergeIterator{over: inRange(sortedEntries(v.held), from, to), under: under, overPos: -1}, nil
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
