package topology

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/serdes"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
)

// ErrReadOnlyStore is returned by a write to a global store from a processor: only its
// topic updates it.
var ErrReadOnlyStore = errors.New("global stores are read-only: write to their topic instead")

// GlobalStoreNode configures a global store after AddGlobalStore.
type GlobalStoreNode struct {
	gs *graph.GlobalStore
	sn *StoreNode
}

// Store is the global store as a store: for QueryValuesAs. Its InMemory and
// WithoutChangelog do not apply: global stores live in the instance's global state
// (a bbolt file, or memory when no task keeps a file) and have no changelog but
// their topic.
func (g *GlobalStoreNode) Store() *StoreNode { return g.sn }

// AddGlobalStore adds a store of (K, V) that every instance of the application keeps in
// full from all partitions of topic (Kafka Streams' global store, the store of a
// GlobalKTable): a record puts its value under its key, a tombstone deletes the key, a
// record with a null key is dropped. Each instance reads the topic up to its end into
// the store before its tasks start, then keeps reading it while it runs; a record
// that does not deserialize stops the application with an error naming it.
//
// The topic is the store's changelog: there is no other copy, and restarts read the
// topic from the offsets the store last reflected. Make it compacted (or keep every
// record), as the store is rebuilt from it when its file is lost.
//
// Every processor of the topology reads it, with processor.KeyValueStore[K, V](ctx,
// name), without attaching it; writes fail with ErrReadOnlyStore. Reads see the store as
// the instance last read it: joins with a global table need no co-partitioning, but
// see updates only as soon as the instance reads them. eddy.Query reads it on any
// instance.
func AddGlobalStore[K, V any](b *Builder, name, topic string, keys serde.Serde[K], values serde.Serde[V]) *GlobalStoreNode {
	return addGlobalStore(b, name, topic, keys, values, values, nil)
}

// AddGlobalStoreAs is AddGlobalStore for a store that keeps values in a form of its own
// (S, with serde stored), made from the bytes of each record's value and its timestamp
// by encode; a layer above (the stream DSL) keeps values with their timestamps. values
// checks that each record's value deserializes; queries read the stored form unless
// QueryValuesAs says otherwise.
func AddGlobalStoreAs[K, V, S any](b *Builder, name, topic string, keys serde.Serde[K], values serde.Serde[V], stored serde.Serde[S], encode func(value []byte, ts time.Time) []byte) *GlobalStoreNode {
	return addGlobalStore(b, name, topic, keys, stored, values, encode)
}

func addGlobalStore[K, V, Q any](b *Builder, name, topic string, keys serde.Serde[K], stored serde.Serde[V], topicValues serde.Serde[Q], encode func([]byte, time.Time) []byte) *GlobalStoreNode {
	sn := AddKeyValueStore(b, name, keys, stored)
	st := sn.store
	if topic == "" {
		b.fail("global store %q reads an empty topic name", name)
	}
	st.Logged = false
	st.Global = true
	st.NewTyped = func(buf *kvstore.Buffer, topic string, m kvstore.Metrics) any {
		return readOnly[K, V]{kvstore.NewKeyValueStore(buf, topic, keys, stored, m)}
	}
	gs := &graph.GlobalStore{Store: st, Topic: topic}
	gs.Entry = func(rec graph.RawRecord) ([]byte, []byte, bool, error) {
		if rec.Key == nil {
			return nil, nil, true, nil
		}
		if _, err := serdes.Deserialize(keys, rec.Topic, rec.Key); err != nil {
			return nil, nil, false, fmt.Errorf("global store %q: key: %w", name, err)
		}
		if rec.Value == nil {
			return rec.Key, nil, false, nil
		}
		if _, err := serdes.Deserialize(topicValues, rec.Topic, rec.Value); err != nil {
			return nil, nil, false, fmt.Errorf("global store %q: value: %w", name, err)
		}
		if encode != nil {
			return rec.Key, encode(rec.Value, rec.Timestamp), false, nil
		}
		return rec.Key, rec.Value, false, nil
	}
	b.globals = append(b.globals, gs)
	return &GlobalStoreNode{gs: gs, sn: sn}
}

// readOnly is a global store as processors see it.
type readOnly[K, V any] struct{ statestore.KeyValueStore[K, V] }

func (r readOnly[K, V]) Put(K, V) error {
	return fmt.Errorf("store %q: %w", r.Name(), ErrReadOnlyStore)
}

func (r readOnly[K, V]) PutIfAbsent(K, V) (V, bool, error) {
	var zero V
	return zero, false, fmt.Errorf("store %q: %w", r.Name(), ErrReadOnlyStore)
}

func (r readOnly[K, V]) Delete(K) error {
	return fmt.Errorf("store %q: %w", r.Name(), ErrReadOnlyStore)
}

// check reports what is wrong with the global stores at Build.
func checkGlobals(globals []*graph.GlobalStore, nodes []*graph.Node, fail func(string, ...any)) {
	seen := map[string]string{}
	for _, gs := range globals {
		if len(gs.Store.Processors) > 0 {
			fail("global store %q is attached to processors %v: every processor reads a global store without attaching it", gs.Store.Name, gs.Store.Processors)
		}
		if other, dup := seen[gs.Topic]; dup {
			fail("global stores %q and %q both read topic %q", other, gs.Store.Name, gs.Topic)
		}
		seen[gs.Topic] = gs.Store.Name
		for _, n := range nodes {
			if n.Kind == graph.Source && !n.Internal && slices.Contains(n.Topics, gs.Topic) {
				fail("source %q and global store %q both read topic %q", n.Name, gs.Store.Name, gs.Topic)
			}
		}
	}
}
