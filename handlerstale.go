package eddy

import (
	"fmt"
	"net/http"
	"time"
)

// staleParam reads a query's stale parameter: true lets it answer from a standby
// replica or a restoring task here (QueryableStore.GetStale), with where it read and
// the lag in the answer's "stale" object; absent or false, the query answers as
// without it. Anything else is a 400.
func staleParam(w http.ResponseWriter, r *http.Request) (stale, ok bool) {
	switch v := r.URL.Query().Get("stale"); v {
	case "", "false":
		return false, true
	case "true":
		return true, true
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("stale: %q is neither true nor false", v))
		return false, false
	}
}

// staleJSON is StaleInfo in a query's answer: "source" (active, standby, restoring),
// "task", and for a standby or restoring copy "checkpoint", "lag_records" (-1:
// unknown) and, when known, "current_as_of" and "lag_seconds" (StaleInfo.Lag).
type staleJSON struct {
	Source      Source     `json:"source"`
	Task        string     `json:"task,omitempty"`
	Checkpoint  *int64     `json:"checkpoint,omitempty"`
	LagRecords  int64      `json:"lag_records"`
	CurrentAsOf *time.Time `json:"current_as_of,omitempty"`
	LagSeconds  *float64   `json:"lag_seconds,omitempty"`
}

// newStaleJSON describes si; a global store's answer names no task.
func newStaleJSON(si StaleInfo, global bool) *staleJSON {
	j := &staleJSON{Source: si.Source, LagRecords: si.LagRecords}
	if !global {
		j.Task = si.Task.String()
	}
	if si.Source == SourceActive {
		return j
	}
	cp := si.Checkpoint
	j.Checkpoint = &cp
	if lag, ok := si.Lag(); ok {
		at, secs := si.CurrentAsOf, lag.Seconds()
		j.CurrentAsOf, j.LagSeconds = &at, &secs
	}
	return j
}

// notFoundAnswer is a key query's 404; a stale query's says which copy lacked the key
// (a standby's lacks a key its active task wrote since its checkpoint).
type notFoundAnswer struct {
	Error string     `json:"error"`
	Stale *staleJSON `json:"stale,omitempty"`
}
