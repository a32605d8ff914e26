package kvstore

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/statestore"
)

// Backend is the byte-level, durable layer holding every store of one task: one bbolt
// file with a bucket per store, or memory. Keys and values are opaque bytes. A Backend
// is used by one task at a time; Write is atomic: all of a Batch or none of it.
type Backend interface {
	// Get returns a copy of the value of key in store, or nil if absent.
	Get(store string, key []byte) ([]byte, error)
	// Iterate walks the keys of store in [from, to) in byte order; a nil bound is open.
	// The iterator must be closed before the next Write on the same goroutine.
	Iterate(store string, from, to []byte) (BytesIterator, error)
	// Count returns the number of keys in store.
	Count(store string) (int64, error)
	// Write applies every entry of the batch and records its checkpoints, atomically.
	Write(b Batch) error
	// Checkpoint returns the changelog offset store reflects (the next offset to read),
	// and false when the store has none.
	Checkpoint(store string) (offset int64, ok bool, err error)
	// Wipe empties store and forgets every checkpoint that describes its data: its own
	// and those of its partitions (names.GlobalCheckpoint: a global store keeps one per
	// partition of its topic), atomically with the data. A checkpoint that outlived its
	// data would make the next read start past records the store no longer holds.
	Wipe(store string) error
	// ChangelogID returns the ID of the changelog topic whose offsets the store's
	// checkpoint counts, and false when none is recorded (a store written before eddy
	// recorded them, or wiped since).
	ChangelogID(store string) (id [16]byte, ok bool, err error)
	// SetChangelogID records the ID of the changelog topic the store's data and
	// checkpoint come from. Wipe forgets it.
	SetChangelogID(store string, id [16]byte) error
	// Close releases the backend (and its file lock).
	Close() error
}

// Batch is one atomic write to a Backend.
type Batch struct {
	// Writes holds, per store, the entries to apply. A nil Value deletes the key.
	Writes map[string][]Entry
	// Checkpoints holds, per store, the changelog offset the store reflects after the
	// batch (the offset of the next record to restore).
	Checkpoints map[string]int64
}

// Entry is a key and its new value; a nil Value is a delete (a tombstone).
type Entry struct {
	Key   []byte
	Value []byte
}

// SortEntries sorts entries by key, in place. Backends insert sorted batches faster
// (B+tree appends), and sorting makes the order of changelog records deterministic.
func SortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return bytes.Compare(a.Key, b.Key) })
}

// BytesIterator walks raw key-value pairs in key order. The slices Key and Value return
// are valid only until the next call of Next or Close: copy what must outlive them.
type BytesIterator interface {
	Next() bool
	Key() []byte
	Value() []byte
	Err() error
	Close() error
}

// NewMemoryBackend returns a Backend that keeps everything in memory. It has the same
// semantics as the bbolt backend (atomic batches, checkpoints) but nothing survives the
// process, so a task using it restores its stores from the changelogs on every start.
// It serves tests and small, rebuildable state.
func NewMemoryBackend() Backend {
	return &memoryBackend{stores: map[string]*memStore{}, checkpoints: map[string]int64{}, changelogIDs: map[string][16]byte{}}
}

type memoryBackend struct {
	mu           sync.RWMutex
	closed       bool
	stores       map[string]*memStore
	checkpoints  map[string]int64
	changelogIDs map[string][16]byte
}

type memStore struct {
	m      map[string][]byte
	sorted []string // sorted keys; nil when stale
}

func (s *memStore) keys() []string {
	if s.sorted == nil {
		s.sorted = make([]string, 0, len(s.m))
		for k := range s.m {
			s.sorted = append(s.sorted, k)
		}
		sort.Strings(s.sorted)
	}
	return s.sorted
}

func (b *memoryBackend) Get(store string, key []byte) ([]byte, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, statestore.ErrClosed
	}
	s := b.stores[store]
	if s == nil {
		return nil, nil
	}
	v, ok := s.m[string(key)]
	if !ok {
		return nil, nil
	}
	return bytes.Clone(v), nil
}

func (b *memoryBackend) Iterate(store string, from, to []byte) (BytesIterator, error) {
	b.mu.Lock() // keys() may build the sorted index
	defer b.mu.Unlock()
	if b.closed {
		return nil, statestore.ErrClosed
	}
	s := b.stores[store]
	if s == nil {
		return &sliceIterator{}, nil
	}
	keys := s.keys()
	lo := 0
	if from != nil {
		lo = sort.SearchStrings(keys, string(from))
	}
	hi := len(keys)
	if to != nil {
		hi = sort.SearchStrings(keys, string(to))
	}
	it := &sliceIterator{}
	for _, k := range keys[lo:max(lo, hi)] {
		it.entries = append(it.entries, Entry{Key: []byte(k), Value: bytes.Clone(s.m[k])})
	}
	return it, nil
}

func (b *memoryBackend) Count(store string) (int64, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return 0, statestore.ErrClosed
	}
	if s := b.stores[store]; s != nil {
		return int64(len(s.m)), nil
	}
	return 0, nil
}

// checkKeys refuses a batch with a key longer than statestore.MaxKeySize, which bbolt cannot
// store: typed stores refuse such keys before they reach a changelog, so one can come
// only from a changelog written by something else, and restoring it must fail the same
// way (and with a short message) in every backend.
func (batch Batch) checkKeys() error {
	for store, entries := range batch.Writes {
		for _, e := range entries {
			if len(e.Key) > statestore.MaxKeySize {
				return fmt.Errorf("store %q: %w: a key of %d bytes (starting %x)", store, statestore.ErrKeyTooLarge, len(e.Key), e.Key[:16])
			}
		}
	}
	return nil
}

func (b *memoryBackend) Write(batch Batch) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return statestore.ErrClosed
	}
	if err := batch.checkKeys(); err != nil {
		return err
	}
	for name, entries := range batch.Writes {
		s := b.stores[name]
		if s == nil {
			s = &memStore{m: map[string][]byte{}}
			b.stores[name] = s
		}
		for _, e := range entries {
			_, existed := s.m[string(e.Key)]
			if e.Value == nil {
				if existed {
					delete(s.m, string(e.Key))
					s.sorted = nil
				}
				continue
			}
			s.m[string(e.Key)] = bytes.Clone(e.Value)
			if !existed {
				s.sorted = nil
			}
		}
	}
	for name, off := range batch.Checkpoints {
		b.checkpoints[name] = off
	}
	return nil
}

func (b *memoryBackend) Checkpoint(store string) (int64, bool, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return 0, false, statestore.ErrClosed
	}
	off, ok := b.checkpoints[store]
	return off, ok, nil
}

func (b *memoryBackend) Wipe(store string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return statestore.ErrClosed
	}
	delete(b.stores, store)
	delete(b.checkpoints, store)
	delete(b.changelogIDs, store)
	prefix := names.GlobalCheckpointPrefix(store)
	for name := range b.checkpoints {
		if strings.HasPrefix(name, prefix) {
			delete(b.checkpoints, name)
		}
	}
	return nil
}

func (b *memoryBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

// sliceIterator iterates a snapshot of entries.
type sliceIterator struct {
	entries []Entry
	pos     int
	started bool
}

func (it *sliceIterator) Next() bool {
	if it.started {
		it.pos++
	}
	it.started = true
	return it.pos < len(it.entries)
}

func (it *sliceIterator) Key() []byte   { return it.entries[it.pos].Key }
func (it *sliceIterator) Value() []byte { return it.entries[it.pos].Value }
func (it *sliceIterator) Err() error    { return nil }
func (it *sliceIterator) Close() error  { return nil }
