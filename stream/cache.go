package stream

import (
	"container/list"

	"github.com/eddy-streams/eddy/internal/cache"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
)

// CacheMaxBytes sets the byte budget of the record caches of each task's tables
// (Kafka Streams' statestore.cache.max.bytes; default 10 MiB). The budget is per task,
// not per instance: an instance holds at most its task count times n. When a table's
// update takes a task's caches over it, that table's cache is flushed. n <= 0 turns
// caching off, as NoCaching.
func CacheMaxBytes(n int64) BuilderOption {
	return func(b *Builder) {
		// Processor-API stores with caching in the same topology share the task's budget
		// (and, as statestore.cache.max.bytes=0, n <= 0 turns their caching off too).
		b.tb.SetCacheMaxBytes(n)
		if n <= 0 {
			b.caching = false
			return
		}
		b.cacheMaxBytes = n
	}
}

// entryOverhead is what an entry costs besides its key, value and headers: the
// entry, its list element and map slot, the record and its timestamp. Kafka Streams
// counts its own objects' fields likewise (LRUNode.size, LRUCacheEntry's estimate).
const entryOverhead = 160

// tableForwarder forwards a table's updates: at once without caching; with it, into
// the task's record cache, which forwards each key's latest update once, at the next
// commit or when the task's caches outgrow their budget (Kafka Streams'
// CachingKeyValueStore with its flush listener).
type tableForwarder[K, V any] struct {
	ctx    processor.Context[K, Change[V]]
	cache  *recordCache[K, V] // nil: not cached
	name   string
	keys   serde.Serde[K]
	values serde.Serde[V]
}

// newTableForwarder makes the forwarder of the table whose store is store. keys and
// values serialize the cache's keys (its index) and measure its values; values may be
// nil (then only keys count toward the budget).
func newTableForwarder[K, V any](ctx processor.Context[K, Change[V]], b *Builder, cached bool, store string, keys serde.Serde[K], values serde.Serde[V]) *tableForwarder[K, V] {
	f := &tableForwarder[K, V]{ctx: ctx, name: store, keys: keys, values: values}
	reg := cache.From(ctx.Context())
	if !cached || reg == nil || keys == nil {
		return f
	}
	f.cache = &recordCache[K, V]{f: f, reg: reg, entries: map[string]*list.Element{}}
	f.cache.stats = reg.Register(store, f.cache, b.cacheMaxBytes)
	return f
}

// forward passes on the update rec of key rec.Key; had says whether the store held the
// key before it. Uncached, the update goes on at once. Cached, it replaces the key's
// pending update, keeping the old value of the first (the value as of the last flush).
func (f *tableForwarder[K, V]) forward(rec processor.Record[K, Change[V]], had bool) error {
	if f.cache == nil {
		return f.ctx.Forward(rec)
	}
	return f.cache.put(rec, had)
}

// recordCache is one table's cache: Kafka Streams' NamedCache, holding dirty entries
// only. Kafka Streams also keeps flushed (clean) entries for reads, which take part in
// its LRU order and budget; eddy's stores buffer their reads themselves, so the cache
// holds only what is still to be forwarded.
type recordCache[K, V any] struct {
	f       *tableForwarder[K, V]
	reg     *cache.Registry
	entries map[string]*list.Element // by serialized key
	// order lists the entries by their last update, least recent first: Kafka Streams'
	// dirtyKeys, whose order is the flush order, and its LRU list, whose least recent
	// dirty entry eviction takes (and with it every dirty entry).
	order list.List
	bytes int64
	stats *cache.Stats
}

type cacheEntry[K, V any] struct {
	key  string
	rec  processor.Record[K, Change[V]] // the latest update, with its timestamp and headers
	old  *V                             // the old value of the first update since the last flush
	had  bool                           // whether the store held the key at the last flush
	md   *processor.RecordMetadata      // the record of the latest update; nil in a punctuator
	size int64
}

func (c *recordCache[K, V]) put(rec processor.Record[K, Change[V]], had bool) error {
	kb, err := c.f.keys.Serialize(c.f.name, rec.Key)
	if err != nil {
		return err
	}
	size := int64(len(kb)) + entryOverhead
	if c.f.values != nil && rec.Value.New != nil {
		if vb, err := c.f.values.Serialize(c.f.name, *rec.Value.New); err == nil {
			size += int64(len(vb))
		}
	}
	for _, h := range rec.Headers {
		size += int64(len(h.Key) + len(h.Value))
	}
	var md *processor.RecordMetadata
	if m, ok := c.f.ctx.RecordMetadata(); ok {
		md = &m
	}
	var delta int64
	if el, ok := c.entries[string(kb)]; ok {
		c.stats.Hits++
		e := el.Value.(*cacheEntry[K, V])
		e.rec, e.md = rec, md
		delta = size - e.size
		e.size = size
		c.order.MoveToBack(el)
	} else {
		c.stats.Misses++
		e := &cacheEntry[K, V]{key: string(kb), rec: rec, old: rec.Value.Old, had: had, md: md, size: size}
		c.entries[e.key] = c.order.PushBack(e)
		delta = size
	}
	c.bytes += delta
	return c.reg.Grew(c, delta)
}

// Flush empties the cache and forwards its entries, least recently updated first, as
// Kafka Streams' NamedCache.flush: each with its latest value, the old value as of the
// last flush and the timestamp and headers of its latest update, as from the record of
// that update (RecordMetadata downstream: its topic, partition and offset). An entry that deletes
// a key the store did not hold at the last flush is dropped (CachingKeyValueStore's
// putAndMaybeForward: "this key did not exist in underlying store and also not in the
// cache").
func (c *recordCache[K, V]) Flush() error {
	if c.order.Len() == 0 {
		return nil
	}
	var pending list.List
	pending.PushBackList(&c.order)
	c.order.Init()
	clear(c.entries)
	c.reg.Shrank(c.bytes)
	c.bytes = 0
	for el := pending.Front(); el != nil; el = el.Next() {
		e := el.Value.(*cacheEntry[K, V])
		if e.rec.Value.New == nil && !e.had {
			continue
		}
		rec := e.rec
		rec.Value.Old = e.old
		if err := c.reg.AsRecord(e.md, func() error { return c.f.ctx.Forward(rec) }); err != nil {
			return err
		}
	}
	return nil
}

// Drop forgets the entries of an aborted transaction.
func (c *recordCache[K, V]) Drop() {
	c.order.Init()
	clear(c.entries)
	c.bytes = 0
}

// Len is the number of pending entries.
func (c *recordCache[K, V]) Len() int { return c.order.Len() }
