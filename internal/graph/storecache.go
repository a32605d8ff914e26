package graph

import (
	"fmt"

	"github.com/eddy-streams/eddy/internal/cache"
	"github.com/eddy-streams/eddy/processor"
)

// StoreCache is how processor.ForwardThroughCache reaches the record cache of store
// for this processor: the store's key and value serdes (a serde.Serde[K] and
// serde.Serde[V]) and put, which holds a record's forward (send) under its serialized
// key until the task's next commit. put is nil when the store has no caching or the
// task keeps no caches; the processor then forwards at once. Each call registers a
// cache of its own: call it once, in Init.
func (p *processorInstance[KIn, VIn, KOut, VOut]) StoreCache(store string) (keys, values any, put func(key []byte, size int64, send func() error) error, err error) {
	if _, err := p.StateStore(store); err != nil {
		return nil, nil, nil, err
	}
	spec := p.rt.StoreSpec(store)
	if spec == nil {
		return nil, nil, nil, fmt.Errorf("store %q: not in the topology", store)
	}
	reg := cache.From(p.rt.Context())
	if spec.CacheMaxBytes <= 0 || reg == nil {
		return spec.Keys, spec.Values, nil, nil
	}
	if spec.Kind != KindKeyValue || spec.Global {
		return nil, nil, nil, fmt.Errorf("store %q: only key-value stores of the task have a record cache", store)
	}
	c := cache.NewKeyed(reg, store, spec.CacheMaxBytes)
	put = func(key []byte, size int64, send func() error) error {
		var md *processor.RecordMetadata
		if m, ok := p.rt.RecordMetadata(); ok {
			md = &m
		}
		return c.Put(key, size, md, send)
	}
	return spec.Keys, spec.Values, put, nil
}
