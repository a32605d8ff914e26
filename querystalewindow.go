package eddy

import (
	"errors"
	"math"
	"time"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/windowstore"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/window"
)

// Stale window and session queries (issue 24 item 7; Kafka Streams' enableStaleStores
// applies to every store query): a query of one key answers from the key's task
// running here, else a standby replica of it here, else the task restoring (or
// suspended between sessions) here, as GetStale; a query of every key reads every
// local copy of the store's partitions, as AllStale. A standby's or restoring task's
// windows, its segment list and its checkpoint come from one bbolt read transaction
// (kvstore.ViewAt): the answer is the store exactly as of StaleInfo.Checkpoint.

// FetchStale is Fetch for a caller that accepts a stale answer (see GetStale): the
// windows of key from the freshest local copy of its task's store, and which copy it
// read and how far behind its changelog it was.
func (s *QueryableWindowStore[K, V]) FetchStale(key K, from, to time.Time) ([]statestore.KeyValue[window.Windowed[K], V], StaleInfo, error) {
	return s.q.runStaleKey(key, from, to, false)
}

// BackwardFetchStale is FetchStale, newest first.
func (s *QueryableWindowStore[K, V]) BackwardFetchStale(key K, from, to time.Time) ([]statestore.KeyValue[window.Windowed[K], V], StaleInfo, error) {
	return s.q.runStaleKey(key, from, to, true)
}

// FetchAllStale is FetchAll over every local copy of the store's partitions (see
// AllStale), with a StaleInfo per task read, in task order.
func (s *QueryableWindowStore[K, V]) FetchAllStale(from, to time.Time) ([]statestore.KeyValue[window.Windowed[K], V], []StaleInfo, error) {
	var zero K
	return s.q.runStale(zero, true, from, to, false)
}

// FetchStale is Fetch for a caller that accepts a stale answer (see GetStale).
func (s *QueryableSessionStore[K, V]) FetchStale(key K) ([]statestore.KeyValue[window.Windowed[K], V], StaleInfo, error) {
	return s.q.runStaleKey(key, time.UnixMilli(0), time.UnixMilli(math.MaxInt64), false)
}

// FindSessionsStale is FindSessions for a caller that accepts a stale answer.
func (s *QueryableSessionStore[K, V]) FindSessionsStale(key K, earliestEnd, latestStart time.Time) ([]statestore.KeyValue[window.Windowed[K], V], StaleInfo, error) {
	return s.q.runStaleKey(key, earliestEnd, latestStart, false)
}

// BackwardFindSessionsStale is FindSessionsStale, newest first.
func (s *QueryableSessionStore[K, V]) BackwardFindSessionsStale(key K, earliestEnd, latestStart time.Time) ([]statestore.KeyValue[window.Windowed[K], V], StaleInfo, error) {
	return s.q.runStaleKey(key, earliestEnd, latestStart, true)
}

// FindAllStale is FindAll over every local copy of the store's partitions, with a
// StaleInfo per task read, in task order.
func (s *QueryableSessionStore[K, V]) FindAllStale(earliestEnd, latestStart time.Time) ([]statestore.KeyValue[window.Windowed[K], V], []StaleInfo, error) {
	var zero K
	return s.q.runStale(zero, true, earliestEnd, latestStart, false)
}

func (q timeQuery[K, V]) runStaleKey(key K, from, to time.Time, backward bool) ([]statestore.KeyValue[window.Windowed[K], V], StaleInfo, error) {
	out, infos, err := q.runStale(key, false, from, to, backward)
	var info StaleInfo
	if len(infos) > 0 {
		info = infos[0]
	}
	return out, info, err
}

func (q timeQuery[K, V]) runStale(key K, all bool, from, to time.Time, backward bool) ([]statestore.KeyValue[window.Windowed[K], V], []StaleInfo, error) {
	rt, err := q.app.queryRuntime()
	if err != nil {
		return nil, nil, err
	}
	topic := rt.changelogTopic(q.store.Name)
	r, err := q.queryRange(topic, key, all, from, to, backward)
	if err != nil {
		return nil, nil, err
	}
	raws, infos, err := rt.queryWindowsStale(q.store, r)
	if err != nil {
		return nil, infos, err
	}
	out, err := q.decode(topic, raws)
	return out, infos, err
}

// queryWindowsStale answers a window or session query from the local copies: of one
// key, from the freshest copy of its task (one StaleInfo); of every key, from every
// copy (a StaleInfo per task, in task order).
func (rt *runtime) queryWindowsStale(st *graph.Store, r windowstore.Range) ([]windowstore.Raw, []StaleInfo, error) {
	topic := rt.changelogTopic(st.Name)
	committed := func(b kvstore.Backend, out *[]windowstore.Raw) error {
		ws, err := st.Windows(b, topic, r)
		*out = append(*out, ws...)
		return err
	}
	snapshot := func(b kvstore.Backend, out *[]windowstore.Raw) (kvstore.Snapshot, error) {
		return kvstore.ViewAt(b, st.Name, st.Segments, func(v kvstore.Backend) error { return committed(v, out) })
	}
	if r.Key != nil {
		out, info, err := staleKey(rt, st, r.Key, committed, snapshot)
		return out, []StaleInfo{info}, err
	}
	out, infos, err := staleCopies(rt, st, committed, snapshot)
	if err != nil {
		return nil, nil, err
	}
	sortWindows(out, r.Backward)
	return out, infos, nil
}

// staleKey reads what a query of key appends from the freshest local copy of its
// task's store: the running active task (committed), else a standby replica here, else
// the task restoring or suspended here (snapshot), as queryGetStale. With no copy here,
// the error is a plain query's (ErrNotLocal naming the owner, ErrNotReady).
func staleKey[T any](rt *runtime, st *graph.Store, key []byte, committed func(kvstore.Backend, *[]T) error,
	snapshot func(kvstore.Backend, *[]T) (kvstore.Snapshot, error)) ([]T, StaleInfo, error) {
	id, err := rt.keyTask(st, key)
	if err != nil {
		return nil, StaleInfo{}, err
	}
	var out []T
	t, _, locErr := rt.locate(st, key)
	if t != nil {
		_, err := t.readCommitted(st.Name, func(b kvstore.Backend) ([]byte, error) { return nil, committed(b, &out) })
		if err == nil || !errors.Is(err, ErrNotReady) {
			return out, StaleInfo{Source: SourceActive, Task: id}, err
		}
		out = out[:0]
	}
	read := func(b kvstore.Backend) (kvstore.Snapshot, error) { return snapshot(b, &out) }
	if sb := rt.standbyOf(id); sb != nil {
		info, err := sb.readStale(st.Name, read)
		return out, info, err
	}
	if t != nil {
		info, err := t.readRestoring(st.Name, read)
		return out, info, err
	}
	return nil, StaleInfo{}, locErr
}
