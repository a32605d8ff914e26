package eddy

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/serdes"
	"github.com/eddy-streams/eddy/internal/windowstore"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/window"
)

// ErrStoreKind is wrapped by the error of a query that does not suit the kind of the
// store: a key-value query (Query, /stores/{store}/keys/...) of a window or session
// store, or the other way round. The error names the store's kind and the query to use.
var ErrStoreKind = errors.New("eddy: the query does not suit the kind of store")

// kindName is a store kind as the errors say it.
func kindName(kind string) string {
	if kind == graph.KindKeyValue {
		return "key-value"
	}
	return kind
}

// kindError says that store is of another kind than the query wants, and how to query it.
func kindError(st *graph.Store, want string) error {
	return fmt.Errorf("%w: %s", ErrStoreKind, kindMessage(st, want))
}

func kindMessage(st *graph.Store, want string) string {
	how := map[string]string{
		graph.KindKeyValue: "eddy.Query or /stores/%s/keys/{key}",
		graph.KindWindow:   "eddy.QueryWindows or /stores/%s/windows/{key}",
		graph.KindSession:  "eddy.QuerySessions or /stores/%s/sessions/{key}",
	}[st.Kind]
	return fmt.Sprintf("store %q is a %s store, not a %s store; query it with "+how,
		st.Name, kindName(st.Kind), kindName(want), st.Name)
}

// timeQuery is what the typed window and session queries share.
type timeQuery[K, V any] struct {
	app    *App
	store  *graph.Store
	keys   serde.Serde[K]
	values serde.Serde[V]
}

func newTimeQuery[K, V any](a *App, store, kind string) (timeQuery[K, V], error) {
	st, ok := a.g.Stores[store]
	if !ok {
		return timeQuery[K, V]{}, fmt.Errorf("eddy: %w: %q", statestore.ErrUnknownStore, store)
	}
	if st.Kind != kind {
		return timeQuery[K, V]{}, kindError(st, kind)
	}
	keys, ok1 := st.Keys.(serde.Serde[K])
	values, ok2 := st.Values.(serde.Serde[V])
	if !ok1 || !ok2 {
		return timeQuery[K, V]{}, fmt.Errorf("eddy: store %q holds (%s, %s), not the asked types", store, st.KeyType, st.ValueType)
	}
	return timeQuery[K, V]{app: a, store: st, keys: keys, values: values}, nil
}

// queryRange is the range a query reads: of key's serialized bytes, or of every key.
func (q timeQuery[K, V]) queryRange(topic string, key K, all bool, from, to time.Time, backward bool) (windowstore.Range, error) {
	r := windowstore.Range{From: from.UnixMilli(), To: to.UnixMilli(), Backward: backward}
	if !all {
		kb, err := q.keys.Serialize(topic, key)
		if err == nil && kb == nil {
			err = fmt.Errorf("eddy: store %q: %w", q.store.Name, statestore.ErrNullKey)
		}
		if err != nil {
			return r, err
		}
		r.Key = kb
	}
	return r, nil
}

// run answers a query of one key (from the instance holding it) or, with all, of every
// key of the local partitions, and deserializes the answer.
func (q timeQuery[K, V]) run(key K, all bool, from, to time.Time, backward bool) ([]statestore.KeyValue[window.Windowed[K], V], error) {
	rt, err := q.app.queryRuntime()
	if err != nil {
		return nil, err
	}
	topic := rt.changelogTopic(q.store.Name)
	r, err := q.queryRange(topic, key, all, from, to, backward)
	if err != nil {
		return nil, err
	}
	raws, err := rt.queryWindows(q.store, r)
	if err != nil {
		return nil, err
	}
	return q.decode(topic, raws)
}

// decode deserializes the windows a query read.
func (q timeQuery[K, V]) decode(topic string, raws []windowstore.Raw) ([]statestore.KeyValue[window.Windowed[K], V], error) {
	out := make([]statestore.KeyValue[window.Windowed[K], V], 0, len(raws))
	for _, w := range raws {
		k, err := serdes.Deserialize(q.keys, topic, w.Key)
		if err != nil {
			return nil, err
		}
		v, err := serdes.Deserialize(q.values, topic, w.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, statestore.KeyValue[window.Windowed[K], V]{Key: window.Windowed[K]{Key: k, Window: window.At(w.Start, w.End)}, Value: v})
	}
	return out, nil
}

// QueryableWindowStore gives read-only access to the committed windows of a window
// store (topology.AddWindowStore, the stores of the DSL's windowed aggregations). Like
// QueryableStore it reads the partitions this instance holds; a key held by another
// instance gives an error wrapping ErrNotLocal that names the owner. Windows past the
// store's retention are not returned, as in a processor's reads. Safe for concurrent
// use.
type QueryableWindowStore[K, V any] struct{ q timeQuery[K, V] }

// QueryWindows returns typed, read-only access to a window store of the application. K
// and V must be the store's key and value types (for a DSL windowed aggregation, its
// key and aggregate types). A store of another kind gives an error wrapping
// ErrStoreKind.
func QueryWindows[K, V any](a *App, store string) (*QueryableWindowStore[K, V], error) {
	q, err := newTimeQuery[K, V](a, store, graph.KindWindow)
	if err != nil {
		return nil, err
	}
	return &QueryableWindowStore[K, V]{q}, nil
}

// Fetch returns the windows of key that start in [from, to], oldest first (Kafka
// Streams' ReadOnlyWindowStore.fetch(key, timeFrom, timeTo)).
func (s *QueryableWindowStore[K, V]) Fetch(key K, from, to time.Time) ([]statestore.KeyValue[window.Windowed[K], V], error) {
	return s.q.run(key, false, from, to, false)
}

// BackwardFetch is Fetch, newest first.
func (s *QueryableWindowStore[K, V]) BackwardFetch(key K, from, to time.Time) ([]statestore.KeyValue[window.Windowed[K], V], error) {
	return s.q.run(key, false, from, to, true)
}

// FetchAll returns the windows of every key of the local partitions that start in
// [from, to], by window start, then key bytes. Partitions held elsewhere are not
// included; a local partition that is not ready makes it fail with ErrNotReady.
func (s *QueryableWindowStore[K, V]) FetchAll(from, to time.Time) ([]statestore.KeyValue[window.Windowed[K], V], error) {
	var zero K
	return s.q.run(zero, true, from, to, false)
}

// QueryableSessionStore gives read-only access to the committed sessions of a session
// store (topology.AddSessionStore, the stores of the DSL's session aggregations), as
// QueryableWindowStore does for windows.
type QueryableSessionStore[K, V any] struct{ q timeQuery[K, V] }

// QuerySessions returns typed, read-only access to a session store of the application.
// A store of another kind gives an error wrapping ErrStoreKind.
func QuerySessions[K, V any](a *App, store string) (*QueryableSessionStore[K, V], error) {
	q, err := newTimeQuery[K, V](a, store, graph.KindSession)
	if err != nil {
		return nil, err
	}
	return &QueryableSessionStore[K, V]{q}, nil
}

// Fetch returns every session of key, by end then start (Kafka Streams'
// ReadOnlySessionStore.fetch(key)).
func (s *QueryableSessionStore[K, V]) Fetch(key K) ([]statestore.KeyValue[window.Windowed[K], V], error) {
	return s.q.run(key, false, time.UnixMilli(0), time.UnixMilli(math.MaxInt64), false)
}

// FindSessions returns the sessions of key that end at or after earliestEnd and start
// at or before latestStart, by end then start (Kafka Streams' findSessions).
func (s *QueryableSessionStore[K, V]) FindSessions(key K, earliestEnd, latestStart time.Time) ([]statestore.KeyValue[window.Windowed[K], V], error) {
	return s.q.run(key, false, earliestEnd, latestStart, false)
}

// BackwardFindSessions is FindSessions, newest first.
func (s *QueryableSessionStore[K, V]) BackwardFindSessions(key K, earliestEnd, latestStart time.Time) ([]statestore.KeyValue[window.Windowed[K], V], error) {
	return s.q.run(key, false, earliestEnd, latestStart, true)
}

// FindAll returns the sessions of every key of the local partitions that end at or
// after earliestEnd and start at or before latestStart, by start, then key bytes.
func (s *QueryableSessionStore[K, V]) FindAll(earliestEnd, latestStart time.Time) ([]statestore.KeyValue[window.Windowed[K], V], error) {
	var zero K
	return s.q.run(zero, true, earliestEnd, latestStart, false)
}

// queryWindows answers a window or session query: of one key from the local task
// holding it (else a *NotLocalError or ErrNotReady), or of all keys from every local
// task of the store, sorted by start, key bytes and end.
func (rt *runtime) queryWindows(st *graph.Store, r windowstore.Range) ([]windowstore.Raw, error) {
	topic := rt.changelogTopic(st.Name)
	read := func(t *taskRunner, out *[]windowstore.Raw) error {
		_, err := t.readCommitted(st.Name, func(b kvstore.Backend) ([]byte, error) {
			ws, err := st.Windows(b, topic, r)
			*out = append(*out, ws...)
			return nil, err
		})
		return err
	}
	var out []windowstore.Raw
	if r.Key != nil {
		t, _, err := rt.locate(st, r.Key)
		if err != nil {
			return nil, err
		}
		return out, read(t, &out)
	}
	sub := rt.storeSub(st.Name)
	if sub == nil {
		return nil, fmt.Errorf("eddy: %w: %q", statestore.ErrUnknownStore, st.Name)
	}
	if !rt.inSession.Load() {
		return nil, fmt.Errorf("%w: store %q: the group is rebalancing", ErrNotReady, st.Name)
	}
	for _, t := range rt.registry.all() {
		if t.id.Subtopology == sub.ID && !t.dead.Load() {
			if err := read(t, &out); err != nil {
				return nil, err
			}
		}
	}
	sortWindows(out, r.Backward)
	return out, nil
}

// sortWindows sorts the windows of a query of every key by start, key bytes and end
// (backward: the other way round).
func sortWindows(out []windowstore.Raw, backward bool) {
	slices.SortFunc(out, func(a, b windowstore.Raw) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), bytes.Compare(a.Key, b.Key), cmp.Compare(a.End, b.End))
	})
	if backward {
		slices.Reverse(out)
	}
}
