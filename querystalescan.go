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
// /stores/{store}/keys?stale=true): each active task here (its committed state, or its
// store file while it restores or is suspended), then each standby here of another
// task, with a StaleInfo per task read, in task order. A standby that has read nothing
// yet, or whose file a restore rebuilds, is left out (a plain scan would not have its
// partition either); a task of its own here that cannot be read fails the scan with
// ErrNotReady, as a plain scan does. Unlike a plain scan it answers during a rebalance.
func (rt *runtime) queryScanStale(st *graph.Store, from, to []byte) ([]kvstore.Entry, []StaleInfo, error) {
	if st.Global {
		out, err := rt.queryScan(st, from, to)
		return out, []StaleInfo{{Source: SourceActive}}, err
	}
	sub := rt.storeSub(st.Name)
	if sub == nil {
		return nil, nil, fmt.Errorf("eddy: %w: %q", statestore.ErrUnknownStore, st.Name)
	}
	scan := func(b kvstore.Backend, out *[]kvstore.Entry) (kvstore.Snapshot, error) {
		return kvstore.ScanAt(b, st.Name, from, to, out)
	}
	var out []kvstore.Entry
	var infos []StaleInfo
	seen := map[processor.TaskID]bool{}
	for _, t := range rt.registry.all() {
		if t.id.Subtopology != sub.ID || t.dead.Load() {
			continue
		}
		seen[t.id] = true
		var part []kvstore.Entry
		info := StaleInfo{Source: SourceActive, Task: t.id}
		_, err := t.readCommitted(st.Name, func(b kvstore.Backend) ([]byte, error) {
			return nil, scanBackend(b, st.Name, from, to, &part)
		})
		if errors.Is(err, ErrNotReady) {
			part = part[:0]
			info, err = t.readRestoring(st.Name, func(b kvstore.Backend) (kvstore.Snapshot, error) { return scan(b, &part) })
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
		var part []kvstore.Entry
		info, err := sb.readStale(st.Name, func(b kvstore.Backend) (kvstore.Snapshot, error) { return scan(b, &part) })
		switch {
		case errors.Is(err, ErrNotReady):
			continue
		case err != nil:
			return nil, nil, err
		}
		out, infos = append(out, part...), append(infos, info)
	}
	kvstore.SortEntries(out)
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
