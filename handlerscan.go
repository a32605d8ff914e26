package eddy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
)

// Bounds of a key scan's answer (GET /stores/{store}/keys): scans read whole ranges
// into memory (queryScan), so an answer lists at most this many entries.
const (
	defaultScanLimit = 100
	maxScanLimit     = 10000
)

// serveScan answers a key scan of a key-value store over the partitions this instance
// holds:
//
//	GET /stores/{store}/keys?from=&to=[&limit=]   keys in [from, to) (key texts, as /keys/{key})
//	GET /stores/{store}/keys?prefix=[&limit=]     keys whose serialized form starts with prefix's
//
// Without from, to or prefix it lists every key. Entries come in serialized key order,
// at most limit of them (default 100, at most 10,000), "truncated" saying whether more
// matched: 200 {"store", "entries": [{"key", "value"}, ...], "truncated"}. With
// stale=true it also reads the standby replicas here and the tasks restoring here, and
// "stale" lists each copy read (queryScanStale). Like a
// window query of every key, it answers from the local partitions only; the console's
// store browser asks every instance and merges.
func (h *handler) serveScan(w http.ResponseWriter, r *http.Request) {
	a := h.app
	storeName := r.PathValue("store")
	st, ok := a.g.Stores[storeName]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no store %q", storeName))
		return
	}
	if st.Kind != graph.KindKeyValue {
		writeError(w, http.StatusBadRequest, kindMessage(st, graph.KindKeyValue))
		return
	}
	q := r.URL.Query()
	limit := defaultScanLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > maxScanLimit {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit: %q is not a number from 1 to %d", s, maxScanLimit))
			return
		}
		limit = n
	}
	rt, err := a.queryRuntime()
	if err != nil {
		h.notReady(w, r, err)
		return
	}
	topic := rt.changelogTopic(storeName)
	parse := func(name string) ([]byte, bool) {
		text := q.Get(name)
		if text == "" {
			return nil, true
		}
		b, err := st.KeyFromText(text, topic)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("%s: %q does not parse as a %s key", name, text, st.KeyType))
			return nil, false
		}
		return b, true
	}
	from, ok1 := parse("from")
	to, ok2 := parse("to")
	prefix, ok3 := parse("prefix")
	if !ok1 || !ok2 || !ok3 {
		return
	}
	if prefix != nil {
		if from != nil || to != nil {
			writeError(w, http.StatusBadRequest, "prefix: give either prefix or from and to, not both")
			return
		}
		from, to = prefix, prefixEnd(prefix)
	}
	stale, ok := staleParam(w, r)
	if !ok {
		return
	}
	var entries []kvstore.Entry
	var copies []*staleJSON
	if stale {
		var infos []StaleInfo
		entries, infos, err = rt.queryScanStale(st, from, to)
		slices.SortFunc(infos, func(x, y StaleInfo) int { return compareTasks(x.Task, y.Task) })
		copies = make([]*staleJSON, 0, len(infos))
		for _, si := range infos {
			copies = append(copies, newStaleJSON(si, st.Global))
		}
	} else {
		entries, err = rt.queryScan(st, from, to)
	}
	if h.answerQueryError(w, r, a, err) {
		return
	}
	type entry struct {
		Key   any `json:"key"`
		Value any `json:"value"`
	}
	answer := struct {
		Store     string       `json:"store"`
		Entries   []entry      `json:"entries"`
		Truncated bool         `json:"truncated"`
		Stale     []*staleJSON `json:"stale,omitempty"`
	}{Store: storeName, Entries: []entry{}, Truncated: len(entries) > limit, Stale: copies}
	for _, e := range entries[:min(limit, len(entries))] {
		k, err := st.KeyToJSON(e.Key, topic)
		if err != nil {
			h.internalError(w, r, "a stored key does not deserialize", err)
			return
		}
		v, err := st.ValueToJSON(e.Value, topic)
		if err != nil {
			h.internalError(w, r, "a stored value does not deserialize", err)
			return
		}
		answer.Entries = append(answer.Entries, entry{Key: k, Value: v})
	}
	body, err := json.Marshal(answer)
	if err != nil {
		h.internalError(w, r, "the stored values do not encode as JSON", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}

// prefixEnd is the least key above every key starting with p, nil for none (p is all
// 0xff bytes).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
