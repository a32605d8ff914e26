package processor

import (
	"fmt"
	"reflect"

	"github.com/eddy-streams/eddy/serde"
)

// Forwarder forwards a processor's records to its children.
type Forwarder[K, V any] interface {
	Forward(rec Record[K, V]) error
}

// storeCacher is what the runtime's processor contexts offer ForwardThroughCache.
type storeCacher interface {
	StoreCache(store string) (keys, values any, put func(key []byte, size int64, send func() error) error, err error)
}

// ForwardThroughCache returns the forwarder of a processor that forwards the updates of
// store, a key-value store attached to it: records keyed as the store, typically each
// key's new value after a Put. With the store's caching on (topology's
// StoreNode.WithCaching, Kafka Streams' withCachingEnabled), a record goes into the
// task's record cache instead of downstream, replacing the pending record of its key,
// and the cache forwards each key's latest record once, at the task's next commit —
// or earlier, all of this cache's records, when an update takes the task's caches over
// their budget — in the order of the keys' latest updates and as from the record being
// processed when each was given (RecordMetadata downstream). These are the DSL tables'
// caching rules; what is forwarded is the processor's own record, timestamp and headers
// included. With caching off the records go downstream at once, as ctx.Forward.
//
// Call it once, in Init. Records forwarded through the cache reach every child.
// Kafka Streams' processor API has no public equivalent: its caching store forwards on
// flush only to the DSL's internal flush listener (CachedStateStore.setFlushListener),
// so a Kafka Streams processor forwarding deduplicated updates does it from a
// punctuator; the store's reads and changelog are the same with or without eddy's
// caching (see topology's WithCaching).
func ForwardThroughCache[K, V any](ctx Context[K, V], store string) (Forwarder[K, V], error) {
	sc, ok := ctx.(storeCacher)
	if !ok { // a context of the caller's own (a test's): no task, no cache
		return ctxForwarder[K, V]{ctx}, nil
	}
	ks, vs, put, err := sc.StoreCache(store)
	if err != nil {
		return nil, fmt.Errorf("processor: ForwardThroughCache: %w", err)
	}
	if put == nil {
		return ctxForwarder[K, V]{ctx}, nil
	}
	keys, ok := ks.(serde.Serde[K])
	if !ok {
		return nil, fmt.Errorf("processor: ForwardThroughCache: the records of store %q's cache are keyed as the store, and %v is not its key type: forward %T keys", store, reflect.TypeFor[K](), ks)
	}
	values, _ := vs.(serde.Serde[V]) // nil when the processor forwards other values: then only keys count toward the budget
	return &cachedForwarder[K, V]{ctx: ctx, store: store, keys: keys, values: values, put: put}, nil
}

type ctxForwarder[K, V any] struct{ ctx Context[K, V] }

func (f ctxForwarder[K, V]) Forward(rec Record[K, V]) error { return f.ctx.Forward(rec) }

type cachedForwarder[K, V any] struct {
	ctx    Context[K, V]
	store  string
	keys   serde.Serde[K]
	values serde.Serde[V]
	put    func(key []byte, size int64, send func() error) error
}

func (f *cachedForwarder[K, V]) Forward(rec Record[K, V]) error {
	kb, err := f.keys.Serialize(f.store, rec.Key)
	if err != nil {
		return fmt.Errorf("processor: the record cache of store %q: key: %w", f.store, err)
	}
	size := int64(len(kb))
	if f.values != nil {
		if vb, err := f.values.Serialize(f.store, rec.Value); err == nil {
			size += int64(len(vb))
		}
	}
	for _, h := range rec.Headers {
		size += int64(len(h.Key) + len(h.Value))
	}
	return f.put(kb, size, func() error { return f.ctx.Forward(rec) })
}
