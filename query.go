package eddy

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/partition"
	"github.com/eddy-streams/eddy/internal/serdes"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
)

// Errors of interactive queries.
var (
	// ErrNotLocal: the key's partition of the store is held by another instance; the
	// error (a *NotLocalError) names its advertised address when known.
	ErrNotLocal = errors.New("eddy: key is held by another instance")
	// ErrNotReady: the store's partition is restoring, or moving in a rebalance; ask
	// again shortly.
	ErrNotReady = errors.New("eddy: store not ready (restoring or rebalancing)")
)

// NotLocalError says which instance holds a key.
type NotLocalError struct {
	Store string
	Task  processor.TaskID
	// Owner is the owner's AdvertisedAddr, or "" when unknown (it announced none, or
	// the group is rebalancing).
	Owner string
}

func (e *NotLocalError) Error() string {
	owner := e.Owner
	if owner == "" {
		owner = "an unknown instance"
	}
	return fmt.Sprintf("eddy: store %q: task %s is held by %s", e.Store, e.Task, owner)
}

// Is makes errors.Is(err, ErrNotLocal) true.
func (e *NotLocalError) Is(target error) bool { return target == ErrNotLocal }

// QueryableStore gives read-only access to the partitions of a store that this
// instance holds, and says which instance holds the others. Reads see committed state:
// the store as of its task's last commit. A task writes its stores just after its
// transaction commits, so for a moment after the consumed offsets are committed (what a
// group's lag shows) a read can still see the commit before. GetStale, RangeStale and
// AllStale also answer from a standby replica or a restoring task here, saying which
// and how far behind (StaleInfo). It is safe for concurrent use.
//
// Routing a key to its partition assumes the store's key is the partitioning key of its
// sub-topology's input (murmur2 of the serialized key, as after AddRepartition), which
// is the usual case for a store keyed like its input.
type QueryableStore[K, V any] struct {
	app    *App
	store  *graph.Store
	keys   serde.Serde[K]
	values serde.Serde[V]
}

// Query returns typed, read-only access to a key-value store of the application. K and
// V must be the store's types. A window or session store gives an error wrapping
// ErrStoreKind (query those with QueryWindows and QuerySessions).
func Query[K, V any](a *App, store string) (*QueryableStore[K, V], error) {
	st, ok := a.g.Stores[store]
	if !ok {
		return nil, fmt.Errorf("eddy: %w: %q", statestore.ErrUnknownStore, store)
	}
	if st.Kind != graph.KindKeyValue {
		return nil, kindError(st, graph.KindKeyValue)
	}
	keys, ok1 := st.Keys.(serde.Serde[K])
	values, ok2 := st.Values.(serde.Serde[V])
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("eddy: store %q holds (%s, %s), not the asked types", store, st.KeyType, st.ValueType)
	}
	return &QueryableStore[K, V]{app: a, store: st, keys: keys, values: values}, nil
}

// Get returns the committed value of key. For a key held by another instance it returns
// an error wrapping ErrNotLocal (a *NotLocalError naming the owner); while the key's
// partition restores or moves, one wrapping ErrNotReady.
func (q *QueryableStore[K, V]) Get(key K) (V, bool, error) {
	var zero V
	rt, err := q.app.queryRuntime()
	if err != nil {
		return zero, false, err
	}
	topic := rt.changelogTopic(q.store.Name)
	kb, err := q.serializeKey(topic, key)
	if err != nil {
		return zero, false, err
	}
	vb, err := rt.queryGet(q.store, kb)
	if err != nil || vb == nil {
		return zero, false, err
	}
	v, err := serdes.Deserialize(q.values, topic, vb)
	if err != nil {
		return zero, false, err
	}
	return v, true, nil
}

// serializeKey serializes a key to query; a null key (a nil pointer with a Nullable
// serde) is an error wrapping statestore.ErrNullKey, as in a store.
func (q *QueryableStore[K, V]) serializeKey(topic string, key K) ([]byte, error) {
	kb, err := q.keys.Serialize(topic, key)
	if err == nil && kb == nil {
		err = fmt.Errorf("eddy: store %q: %w", q.store.Name, statestore.ErrNullKey)
	}
	return kb, err
}

// Owner returns the advertised address of the instance holding key, and whether it is
// this one.
func (q *QueryableStore[K, V]) Owner(key K) (owner string, local bool, err error) {
	rt, err := q.app.queryRuntime()
	if err != nil {
		return "", false, err
	}
	kb, err := q.serializeKey(rt.changelogTopic(q.store.Name), key)
	if err != nil {
		return "", false, err
	}
	if q.store.Global {
		return rt.cfg.AdvertisedAddr, true, nil // every instance holds every key
	}
	if _, _, err := rt.locate(q.store, kb); err != nil {
		var nl *NotLocalError
		if errors.As(err, &nl) {
			return nl.Owner, false, nil
		}
		return "", false, err
	}
	return rt.cfg.AdvertisedAddr, true, nil
}

// Range returns the committed key-value pairs of the local partitions whose serialized
// keys lie in [from, to), in key byte order. Partitions held elsewhere are not included;
// a local partition that is not ready makes it fail with ErrNotReady.
func (q *QueryableStore[K, V]) Range(from, to K) ([]statestore.KeyValue[K, V], error) {
	rt, err := q.app.queryRuntime()
	if err != nil {
		return nil, err
	}
	topic := rt.changelogTopic(q.store.Name)
	fb, err := q.keys.Serialize(topic, from)
	if err != nil {
		return nil, err
	}
	tb, err := q.keys.Serialize(topic, to)
	if err != nil {
		return nil, err
	}
	return q.scan(rt, fb, tb)
}

// All returns every committed key-value pair of the local partitions, in key byte order.
func (q *QueryableStore[K, V]) All() ([]statestore.KeyValue[K, V], error) {
	rt, err := q.app.queryRuntime()
	if err != nil {
		return nil, err
	}
	return q.scan(rt, nil, nil)
}

func (q *QueryableStore[K, V]) scan(rt *runtime, from, to []byte) ([]statestore.KeyValue[K, V], error) {
	entries, err := rt.queryScan(q.store, from, to)
	if err != nil {
		return nil, err
	}
	return q.decode(rt, entries)
}

// decode deserializes a scan's entries.
func (q *QueryableStore[K, V]) decode(rt *runtime, entries []kvstore.Entry) ([]statestore.KeyValue[K, V], error) {
	topic := rt.changelogTopic(q.store.Name)
	out := make([]statestore.KeyValue[K, V], 0, len(entries))
	for _, e := range entries {
		k, err := serdes.Deserialize(q.keys, topic, e.Key)
		if err != nil {
			return nil, err
		}
		v, err := serdes.Deserialize(q.values, topic, e.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, statestore.KeyValue[K, V]{Key: k, Value: v})
	}
	return out, nil
}

// queryRuntime returns the running runtime, or ErrNotReady.
func (a *App) queryRuntime() (*runtime, error) {
	rt := a.rt.Load()
	if rt == nil || a.final.Load() != nil {
		return nil, fmt.Errorf("%w: the application is not running", ErrNotReady)
	}
	return rt, nil
}

func (rt *runtime) changelogTopic(store string) string {
	return names.ChangelogTopic(rt.cfg.ApplicationID, store)
}

// storeSub returns the sub-topology holding a store.
func (rt *runtime) storeSub(store string) *graph.Subtopology {
	for _, s := range rt.g.Subtopologies {
		for _, st := range s.Stores {
			if st.Name == store {
				return s
			}
		}
	}
	return nil
}

// locate finds the task holding a serialized key of a store: a running local task, or
// a *NotLocalError naming the owner, or ErrNotReady.
func (rt *runtime) locate(st *graph.Store, key []byte) (*taskRunner, string, error) {
	id, err := rt.keyTask(st, key)
	if err != nil {
		return nil, "", err
	}
	t, hosts := rt.registry.lookup(id)
	if t != nil && !t.dead.Load() {
		return t, rt.cfg.AdvertisedAddr, nil
	}
	if !rt.inSession.Load() {
		return nil, "", fmt.Errorf("%w: store %q: the group is rebalancing", ErrNotReady, st.Name)
	}
	owner := ""
	for host, tasks := range hosts {
		if slices.Contains(tasks, id.String()) {
			owner = host
		}
	}
	return nil, owner, &NotLocalError{Store: st.Name, Task: id, Owner: owner}
}

// keyTask returns the task whose partition of a store holds a serialized key.
func (rt *runtime) keyTask(st *graph.Store, key []byte) (processor.TaskID, error) {
	sub := rt.storeSub(st.Name)
	if sub == nil {
		return processor.TaskID{}, fmt.Errorf("eddy: %w: %q", statestore.ErrUnknownStore, st.Name)
	}
	n, err := rt.partitionCount(sub.AllSourceTopics(rt.cfg.ApplicationID)[0])
	if err != nil {
		return processor.TaskID{}, err
	}
	return processor.TaskID{Subtopology: sub.ID, Partition: partition.ForKey(key, n)}, nil
}

// queryGet reads a committed value of a local task's store.
func (rt *runtime) queryGet(st *graph.Store, key []byte) ([]byte, error) {
	if st.Global {
		return rt.queryGlobal(st, func(b kvstore.Backend) ([]byte, error) { return b.Get(st.Name, key) })
	}
	t, _, err := rt.locate(st, key)
	if err != nil {
		return nil, err
	}
	return t.readCommitted(st.Name, func(b kvstore.Backend) ([]byte, error) { return b.Get(st.Name, key) })
}

// readCommitted runs a read on a running task's committed state: its store's
// committed changes held in memory (kvstore.Set.WriteBehind) over its backend.
func (t *taskRunner) readCommitted(store string, read func(kvstore.Backend) ([]byte, error)) ([]byte, error) {
	t.queryMu.RLock()
	defer t.queryMu.RUnlock()
	if taskState(t.state.Load()) != taskRunning || t.set == nil {
		return nil, fmt.Errorf("%w: store %q of task %s is %s", ErrNotReady, store, t.id, taskState(t.state.Load()))
	}
	buf := t.set.Buffer(store)
	if buf == nil {
		return nil, fmt.Errorf("eddy: %w: %q in task %s", statestore.ErrUnknownStore, store, t.id)
	}
	var out []byte
	err := buf.ReadCommitted(func(b kvstore.Backend) error {
		var err error
		out, err = read(b)
		return err
	})
	return out, err
}

// queryScan collects [from, to) of the store from every local task holding it, merged
// in key order.
func (rt *runtime) queryScan(st *graph.Store, from, to []byte) ([]kvstore.Entry, error) {
	if st.Global {
		var out []kvstore.Entry
		_, err := rt.queryGlobal(st, func(b kvstore.Backend) ([]byte, error) {
			return nil, scanBackend(b, st.Name, from, to, &out)
		})
		return out, err
	}
	sub := rt.storeSub(st.Name)
	if sub == nil {
		return nil, fmt.Errorf("eddy: %w: %q", statestore.ErrUnknownStore, st.Name)
	}
	if !rt.inSession.Load() {
		return nil, fmt.Errorf("%w: store %q: the group is rebalancing", ErrNotReady, st.Name)
	}
	var tasks []*taskRunner
	for _, t := range rt.registry.all() {
		if t.id.Subtopology == sub.ID && !t.dead.Load() {
			tasks = append(tasks, t)
		}
	}
	var out []kvstore.Entry
	for _, t := range tasks {
		_, err := t.readCommitted(st.Name, func(b kvstore.Backend) ([]byte, error) {
			return nil, scanBackend(b, st.Name, from, to, &out)
		})
		if err != nil {
			return nil, err
		}
	}
	kvstore.SortEntries(out)
	return out, nil
}

// scanBackend appends [from, to) of a store in b to out.
func scanBackend(b kvstore.Backend, store string, from, to []byte, out *[]kvstore.Entry) error {
	it, err := b.Iterate(store, from, to)
	if err != nil {
		return err
	}
	defer it.Close()
	for it.Next() {
		*out = append(*out, kvstore.Entry{Key: bytes.Clone(it.Key()), Value: bytes.Clone(it.Value())})
	}
	return it.Err()
}
