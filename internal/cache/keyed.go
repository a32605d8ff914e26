package cache

import (
	"container/list"

	"github.com/eddy-streams/eddy/processor"
)

// EntryOverhead is what an entry costs besides its key, value and headers: the entry,
// its list element and map slot, the record and its timestamp. Kafka Streams counts its
// own objects' fields likewise (LRUNode.size, LRUCacheEntry's estimate).
const EntryOverhead = 160

// Keyed is the record cache of a processor-API store with caching
// (processor.ForwardThroughCache): Kafka Streams' NamedCache with the store's flush
// listener, holding for each key only the latest record to forward, as a closure that
// forwards it. Like the DSL's table caches it holds dirty entries only: the store's own
// write buffer serves reads.
type Keyed struct {
	reg     *Registry
	entries map[string]*list.Element // by serialized key
	// order lists the entries by their last update, least recent first: the flush order
	// (Kafka Streams' dirtyKeys) and the eviction order.
	order list.List
	bytes int64
	stats *Stats
}

type keyedEntry struct {
	key  string
	send func() error              // forwards the latest record of the key
	md   *processor.RecordMetadata // the record being processed at the update; nil in a punctuator
	size int64
}

// NewKeyed makes the cache of store and registers it in reg with the budget maxBytes.
func NewKeyed(reg *Registry, store string, maxBytes int64) *Keyed {
	c := &Keyed{reg: reg, entries: map[string]*list.Element{}}
	c.stats = reg.Register(store, c, maxBytes)
	return c
}

// Put makes send the pending forward of key, replacing the key's earlier one; md is the
// record being processed (nil: none), size the entry's bytes besides EntryOverhead. It
// evicts (flushes) the cache when the task's caches outgrow their budget.
func (c *Keyed) Put(key []byte, size int64, md *processor.RecordMetadata, send func() error) error {
	size += EntryOverhead
	var delta int64
	if el, ok := c.entries[string(key)]; ok {
		c.stats.Hits++
		e := el.Value.(*keyedEntry)
		delta = size - e.size
		e.send, e.md, e.size = send, md, size
		c.order.MoveToBack(el)
	} else {
		c.stats.Misses++
		e := &keyedEntry{key: string(key), send: send, md: md, size: size}
		c.entries[e.key] = c.order.PushBack(e)
		delta = size
	}
	c.bytes += delta
	return c.reg.Grew(c, delta)
}

// Flush empties the cache and forwards its entries, least recently updated first, each
// as from the record that was being processed at its last update (downstream
// RecordMetadata), as Kafka Streams' flush restores each entry's record context.
func (c *Keyed) Flush() error {
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
		e := el.Value.(*keyedEntry)
		if err := c.reg.AsRecord(e.md, e.send); err != nil {
			return err
		}
	}
	return nil
}

// Drop forgets the entries of an aborted transaction.
func (c *Keyed) Drop() {
	c.order.Init()
	clear(c.entries)
	c.bytes = 0
}

// Len is the number of pending entries.
func (c *Keyed) Len() int { return c.order.Len() }
