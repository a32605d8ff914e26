package eddy

import (
	"errors"
	"fmt"
	"slices"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/statestore"
)

// queryScanStale is queryScan over every local copy of the store's partitions (GET
// /stores/{store}/keys?stale=true, RangeStale), with a StaleInfo per task read, in task
// order (staleCopies).
func (rt *runtime) queryScanStale(st *graph.Store, from, to []byte) ([]kvstore.Entry, []StaleInfo, error) {
	if st.Global {
		out, err := rt.queryScan(st, from, to)
		return out, []StaleInfo{{Source: SourceActive}}, err
	}
	out, infos, err := staleCopies(rt, st,
		func(b kvstore.Backend, out *[]kvstore.Entry) error { return scanBackend(b, st.Name, from, to, out) },
		func(b kvstore.Backend, out *[]kvstore.Entry) (kvstore.Snapshot, error) {
			return kvstore.ScanAt(b, st.Name, from, to, out)
		})
	if err != nil {
		return nil, nil, err
	}
	kvstore.SortEntries(out)
	return out, infos, nil
}

// staleCopies reads every local copy of a store's partitions: each active task here
// (its committed state with committed, or its store file with snapshot while it
// restores or is suspended), then each standby here of another task (its store file
// with snapshot), and returns what they appended and a StaleInfo per task read, in task
// order. A standby that has read nothing yet, or whose file a restore rebuilds, is left
// out (a plain query would not have its partition either); a task of its own here that
// cannot be read fails the query with ErrNotReady, as a plain query does. Unlike a
// plain query it answers during a rebalance.
func staleCopies[T any](rt *runtime, st *graph.Store, committed func(kvstore.Backend, *[]T) error,
	snapshot func(kvstore.Backend, *[]T) (kvstore.Snapshot, error)) ([]T, []StaleInfo, error) {
	sub := rt.storeSub(st.Name)
	if sub == nil {
		return nil, nil, fmt.Errorf("eddy: %w: %q", statestore.ErrUnknownStore, st.Name)
	}
	var out []T
	var infos []StaleInfo
	seen := map[processor.TaskID]bool{}
	for _, t := range rt.registry.all() {
		if t.id.Subtopology != sub.ID || t.dead.Load() {
			continue
		}
		seen[t.id] = true
		var part []T
		info := StaleInfo{Source: SourceActive, Task: t.id}
		_, err := t.readCommitted(st.Name, func(b kvstore.Backend) ([]byte, error) { return nil, committed(b, &part) })
		if errors.Is(err, ErrNotReady) {
			part = part[:0]
			info, err = t.readRestoring(st.Name, func(b kvstore.Backend) (kvstore.Snapshot, error) { return snapshot(b, &part) })
		}
		if err != nil {
			return nil, nil, err
		}
		out, infos = append(out, part...), append(infos, info)
	}
	for _, sb := range rt.standbysOf(sub.ID) {
		if seen[sb.id] {
			continue
		}
		var part []T
		info, err := sb.readStale(st.Name, func(b kvstore.Backend) (kvstore.Snapshot, error) { return snapshot(b, &part) })
		switch {
		case errors.Is(err, ErrNotReady):
			continue
		case err != nil:
			return nil, nil, err
		}
		out, infos = append(out, part...), append(infos, info)
	}
	slices.SortFunc(infos, func(x, y StaleInfo) int { return compareTasks(x.Task, y.Task) })
	return out, infos, nil
}

// standbysOf returns the standby replicas here of sub-topology sub's tasks.
func (rt *runtime) standbysOf(sub int) []*standbyTask {
	rt.standbys.mu.Lock()
	defer rt.standbys.mu.Unlock()
	var out []*standbyTask
	for id, s := range rt.standbys.tasks {
		if id.Subtopology == sub {
			out = append(out, s)
		}
	}
	return out
}
