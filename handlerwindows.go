package eddy

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/windowstore"
)

// routeWindows adds the query routes of window and session stores:
//
//	GET /stores/{store}/windows/{key}?from=&to=[&backward=true]   the windows of key that start in [from, to]
//	GET /stores/{store}/windows?from=&to=[&backward=true]         the windows of every local key that start in [from, to]
//	GET /stores/{store}/sessions/{key}?from=&to=[&backward=true]  the sessions of key that end at or after from and start at or before to
//	GET /stores/{store}/sessions?from=&to=[&backward=true]        the same, of every local key
//
// from and to are milliseconds since the epoch or RFC 3339 times (2024-05-01T12:00:00Z);
// both are optional (the epoch, and no upper bound). A query of one key is answered by
// the instance holding it (forwarded once, as /keys/ queries); a query of every key
// answers from the partitions this instance holds. The answer is 200
//
//	{"store": "...", "key": "..." (a query of one key), "from": ms, "to": ms,
//	 "windows" (or "sessions"): [{"key": ..., "start": ms, "end": ms,
//	   "startTime": "RFC 3339", "endTime": "RFC 3339", "value": ...}, ...]}
//
// with an empty list when nothing matches (with stale=true, read from a standby or a
// restoring copy here too, and "stale" says which: queryWindowsMaybeStale); windows of one key oldest first (newest first
// with backward=true), sessions by end then start, and a query of every key by start,
// then key bytes. Errors: 404 for an unknown store; 400 naming the parameter for a bad
// time, a bad backward flag, or from after to; 400 for a key that does not parse; 400
// saying the store's kind when it is not a window (session) store; 503 while the
// partition is not ready.
func (h *handler) routeWindows(mux *http.ServeMux) {
	for _, kind := range []string{graph.KindWindow, graph.KindSession} {
		serve := func(w http.ResponseWriter, r *http.Request) { h.serveWindows(w, r, kind) }
		mux.Handle("GET /stores/{store}/"+kind+"s/{key}", h.authorized(serve))
		mux.Handle("GET /stores/{store}/"+kind+"s", h.authorized(serve))
	}
}

// errBadParam is a query parameter that does not parse; its message is for the client.
type errBadParam struct{ msg string }

func (e *errBadParam) Error() string { return e.msg }

// parseTimeParam reads a time parameter: milliseconds since the epoch, or RFC 3339.
func parseTimeParam(r *http.Request, name string, def int64) (int64, error) {
	text := r.URL.Query().Get(name)
	if text == "" {
		return def, nil
	}
	ms, err := strconv.ParseInt(text, 10, 64)
	if err == nil {
		return ms, nil
	}
	if errors.Is(err, strconv.ErrRange) {
		return 0, &errBadParam{fmt.Sprintf("%s: %s milliseconds is out of range (a signed 64-bit count of milliseconds since the epoch)", name, text)}
	}
	t, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return 0, &errBadParam{fmt.Sprintf("%s: %q is neither milliseconds since the epoch nor an RFC 3339 time (2024-05-01T12:00:00Z)", name, text)}
	}
	return t.UnixMilli(), nil
}

// windowRange reads from, to and backward.
func windowRange(r *http.Request) (windowstore.Range, error) {
	var q windowstore.Range
	var err error
	if q.From, err = parseTimeParam(r, "from", 0); err != nil {
		return q, err
	}
	if q.To, err = parseTimeParam(r, "to", math.MaxInt64); err != nil {
		return q, err
	}
	if q.From > q.To {
		return q, &errBadParam{fmt.Sprintf("from (%d) is after to (%d): the time range is empty", q.From, q.To)}
	}
	if b := r.URL.Query().Get("backward"); b != "" {
		if q.Backward, err = strconv.ParseBool(b); err != nil {
			return q, &errBadParam{fmt.Sprintf("backward: %q is not true or false", b)}
		}
	}
	return q, nil
}

// windowJSON is one window (session) of an answer.
type windowJSON struct {
	Key       any    `json:"key"`
	Start     int64  `json:"start"`
	End       int64  `json:"end"`
	StartTime string `json:"startTime"`
	EndTime   string `json:"endTime"`
	Value     any    `json:"value"`
}

// rfc3339Ms formats a window bound in UTC with milliseconds.
func rfc3339Ms(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// serveWindows answers the window (kind KindWindow) and session (KindSession) routes
// of routeWindows.
func (h *handler) serveWindows(w http.ResponseWriter, r *http.Request, kind string) {
	storeName, keyText := r.PathValue("store"), r.PathValue("key")
	byKey := strings.Contains(r.Pattern, "{key}")
	st, ok := h.queryStore(w, r, kind)
	if !ok {
		return
	}
	q, err := windowRange(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	stale, ok := staleParam(w, r)
	if !ok {
		return
	}
	rt, topic, ok := h.storeRuntime(w, r)
	if !ok {
		return
	}
	if byKey {
		if q.Key, ok = h.pathKey(w, r, st, topic); !ok {
			return
		}
	}
	raws, copies, err := queryWindowsMaybeStale(rt, st, q, stale)
	if h.answerQueryError(w, r, h.app, err) {
		return
	}
	list, ok := h.windowList(w, r, st, topic, raws, byKey)
	if !ok {
		return
	}
	answer := map[string]any{"store": storeName, "from": q.From, "to": q.To, kind + "s": list}
	if byKey {
		answer["key"] = keyText
	}
	if stale {
		answer["stale"] = copies
	}
	h.writeAnswer(w, r, answer, "the stored values do not encode as JSON")
}

// windowList describes the windows (sessions) read; a query of one key shows the
// key's text as given, any other deserializes each stored key. When a stored key or
// value does not deserialize it answers 500 and reports false.
func (h *handler) windowList(w http.ResponseWriter, r *http.Request, st *graph.Store, topic string, raws []windowstore.Raw, byKey bool) ([]windowJSON, bool) {
	list := make([]windowJSON, 0, len(raws))
	for _, raw := range raws {
		wj := windowJSON{Start: raw.Start, End: raw.End, StartTime: rfc3339Ms(raw.Start), EndTime: rfc3339Ms(raw.End)}
		var ok bool
		if byKey {
			wj.Key = r.PathValue("key")
		} else if wj.Key, ok = h.decodeStored(w, r, st.KeyToJSON, raw.Key, topic, storedKeyBroken); !ok {
			return nil, false
		}
		if wj.Value, ok = h.decodeStored(w, r, st.ValueToJSON, raw.Value, topic, storedValueBroken); !ok {
			return nil, false
		}
		list = append(list, wj)
	}
	return list, true
}
