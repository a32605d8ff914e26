package eddy

import (
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/windowstore"
)

// queryWindowsMaybeStale runs a window or session query of the HTTP routes: with stale
// (?stale=true), from the local copies (queryWindowsStale), with the answer's "stale"
// value: one object for a query of one key, a list of every copy read for a query of
// every key; without, as before, and no "stale" value.
func queryWindowsMaybeStale(rt *runtime, st *graph.Store, q windowstore.Range, stale bool) ([]windowstore.Raw, any, error) {
	if !stale {
		raws, err := rt.queryWindows(st, q)
		return raws, nil, err
	}
	raws, infos, err := rt.queryWindowsStale(st, q)
	if err != nil {
		return nil, nil, err
	}
	if q.Key != nil {
		return raws, newStaleJSON(infos[0], false), nil
	}
	copies := make([]*staleJSON, 0, len(infos))
	for _, si := range infos {
		copies = append(copies, newStaleJSON(si, false))
	}
	return raws, copies, nil
}
