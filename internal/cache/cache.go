// Package cache is the record cache of a task's DSL tables, Kafka Streams' ThreadCache
// and NamedCache: a table's updates are held back and deduplicated per key until the
// task commits (Flush, run at the start of every commit so the forwards join its
// transaction) or until the task's byte budget is exceeded (eviction). An aborted
// transaction drops them (Drop): the replay of its input makes them again.
//
// One Registry per task: the budget is per task, not per instance as Kafka Streams'
// statestore.cache.max.bytes (whose instances split it among their threads), because
// eddy's tasks run on goroutines of their own and a shared budget would need a lock on
// every update and evictions across tasks. An instance's caches hold at most its task
// count times the budget.
package cache

import (
	"context"
	"fmt"

	"github.com/eddy-streams/eddy/processor"
)

// DefaultMaxBytes is the default budget of a task's caches, Kafka Streams' default
// statestore.cache.max.bytes (10 MiB).
const DefaultMaxBytes = 10 << 20

// Named is the cache of one table (one store): what the Registry needs of it.
type Named interface {
	// Flush empties the cache (telling the Registry with Shrank) and then forwards every
	// entry, in the order of their last updates.
	Flush() error
	// Drop forgets every entry without forwarding it.
	Drop()
	// Len is the number of entries held.
	Len() int
}

// Registry holds the caches of one task. It is not safe for concurrent use: the task's
// goroutine owns it.
type Registry struct {
	caches []Named
	names  []string
	stats  []*Stats // per cache, since the last TakeStats
	bytes  int64    // the sum of the caches' Bytes, kept up to date by Grew
	max    int64
	set    bool
	// evictions counts the flushes forced by the budget (for tests and metrics).
	evictions int
	// setRecord makes md the task's current record (nil: none) and returns the one it
	// replaces; see SetRecordFunc.
	setRecord func(md *processor.RecordMetadata) *processor.RecordMetadata
}

// SetRecordFunc gives the registry the task's way to set its current record, so that
// a cache forwards each entry as from the record of its latest update: processors
// downstream read that record's topic, partition and offset (RecordMetadata), as in
// Kafka Streams, whose flush restores each entry's record context.
func (r *Registry) SetRecordFunc(f func(md *processor.RecordMetadata) *processor.RecordMetadata) {
	r.setRecord = f
}

// AsRecord runs fn with md (nil: no record) as the task's current record.
func (r *Registry) AsRecord(md *processor.RecordMetadata, fn func() error) error {
	if r.setRecord == nil {
		return fn()
	}
	prev := r.setRecord(md)
	defer r.setRecord(prev)
	return fn()
}

// NewRegistry returns an empty registry; the first Register sets its budget.
func NewRegistry() *Registry { return &Registry{max: DefaultMaxBytes} }

// Register adds the cache of a table named name, with the budget maxBytes of the
// topology (every DSL table of a topology has the same). Caches flush in the order they
// were registered: the order the task initialises its processors, parents first, as
// Kafka Streams flushes its stores in the order the topology registered them, so an
// upstream table's flush reaches a downstream table's cache before that one flushes.
//
// It returns the cache's counters: the cache counts its hits and misses there.
func (r *Registry) Register(name string, c Named, maxBytes int64) *Stats {
	if !r.set {
		r.max, r.set = maxBytes, true
	}
	r.caches = append(r.caches, c)
	r.names = append(r.names, name)
	st := &Stats{}
	r.stats = append(r.stats, st)
	return st
}

// Stats counts what one table's cache did.
type Stats struct {
	// Hits are updates of a key the cache held: merged into its pending update, one
	// forward saved. Misses are updates of a key it did not hold.
	Hits, Misses int64
	// Evictions are flushes the byte budget forced; Flushes those of commits (of a
	// cache holding entries).
	Evictions, Flushes int64
}

// TakeStats calls fn with each cache's counters since the last call, and zeroes them.
func (r *Registry) TakeStats(fn func(store string, s Stats)) {
	if r == nil {
		return
	}
	for i, st := range r.stats {
		if *st != (Stats{}) {
			fn(r.names[i], *st)
			*st = Stats{}
		}
	}
}

func (r *Registry) statsOf(c Named) *Stats {
	for i, x := range r.caches {
		if x == c {
			return r.stats[i]
		}
	}
	return &Stats{}
}

// Shrank records that a cache gave up delta bytes (its Flush does, as it empties).
func (r *Registry) Shrank(delta int64) { r.bytes -= delta }

// Grew records that cache c changed size by delta bytes and, when the task's caches
// exceed the budget, evicts c: as Kafka Streams' ThreadCache.maybeEvict, only the cache
// being written is evicted, and evicting its least recently used dirty entry flushes
// all of its dirty entries (NamedCache.evict → flush), the least recent first.
func (r *Registry) Grew(c Named, delta int64) error {
	r.bytes += delta
	if r.bytes <= r.max || c.Len() == 0 {
		return nil
	}
	r.evictions++
	r.statsOf(c).Evictions++
	if err := c.Flush(); err != nil {
		return fmt.Errorf("evict the record cache of %s: %w", r.nameOf(c), err)
	}
	return nil
}

func (r *Registry) nameOf(c Named) string {
	for i, x := range r.caches {
		if x == c {
			return r.names[i]
		}
	}
	return "?"
}

// Flush flushes every cache, in registration order, until none holds an entry: a
// flush forwards to downstream tables of the same task, whose caches then flush too.
func (r *Registry) Flush() error {
	if r == nil {
		return nil
	}
	// Each pass empties the caches in order; entries made by a later cache's forwards in
	// an earlier one (a cycle through a processor-API node) take another pass. A bound
	// keeps a topology whose flushes feed each other forever from hanging the commit.
	for pass := 0; ; pass++ {
		dirty := false
		for i, c := range r.caches {
			if c.Len() == 0 {
				continue
			}
			if pass == 100 {
				return fmt.Errorf("record cache of %s: still updated after 100 flushes in one commit: do the table's forwards feed back into it?", r.names[i])
			}
			dirty = true
			r.stats[i].Flushes++
			if err := c.Flush(); err != nil {
				return fmt.Errorf("flush the record cache of %s: %w", r.names[i], err)
			}
		}
		if !dirty {
			return nil
		}
	}
}

// Drop forgets every cache's entries: they belong to an aborted transaction.
func (r *Registry) Drop() {
	if r == nil {
		return
	}
	for _, c := range r.caches {
		c.Drop()
	}
	r.bytes = 0
}

// Bytes is the size estimate of every entry held.
func (r *Registry) Bytes() int64 { return r.bytes }

// MaxBytes is the budget.
func (r *Registry) MaxBytes() int64 { return r.max }

// Evictions counts the flushes the budget forced.
func (r *Registry) Evictions() int { return r.evictions }

type registryKey struct{}

// WithRegistry returns ctx carrying r: the task's context, which its processors reach
// through processor.Context.Context.
func WithRegistry(ctx context.Context, r *Registry) context.Context {
	return context.WithValue(ctx, registryKey{}, r)
}

// From returns the registry ctx carries, or nil.
func From(ctx context.Context) *Registry {
	r, _ := ctx.Value(registryKey{}).(*Registry)
	return r
}
