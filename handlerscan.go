package eddy

import (
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
	storeName := r.PathValue("store")
	st, ok := h.queryStore(w, r, graph.KindKeyValue)
	if !ok {
		return
	}
	limit, ok := scanLimit(w, r)
	if !ok {
		return
	}
	rt, topic, ok := h.storeRuntime(w, r)
	if !ok {
		return
	}
	from, to, ok := scanBounds(w, r, st, topic)
	if !ok {
		return
	}
	stale, ok := staleParam(w, r)
	if !ok {
		return
	}
	var entries []kvstore.Entry
	var err error
	var copies []*staleJSON
	if stale {
		entries, copies, err = scanStale(rt, st, from, to)
	} else {
		entries, err = rt.queryScan(st, from, to)
	}
	if h.answerQueryError(w, r, h.app, err) {
		return
	}
	answer := scanAnswer{Store: storeName, Entries: []scanEntry{}, Truncated: len(entries) > limit, Stale: copies}
	for _, e := range entries[:min(limit, len(entries))] {
		k, ok := h.decodeStored(w, r, st.KeyToJSON, e.Key, topic, storedKeyBroken)
		if !ok {
			return
		}
		v, ok := h.decodeStored(w, r, st.ValueToJSON, e.Value, topic, storedValueBroken)
		if !ok {
			return
		}
		answer.Entries = append(answer.Entries, scanEntry{Key: k, Value: v})
	}
	h.writeAnswer(w, r, answer, "the stored values do not encode as JSON")
}

// scanAnswer is a key scan's answer.
type scanAnswer struct {
	Store     string       `json:"store"`
	Entries   []scanEntry  `json:"entries"`
	Truncated bool         `json:"truncated"`
	Stale     []*staleJSON `json:"stale,omitempty"`
}

type scanEntry struct {
	Key   any `json:"key"`
	Value any `json:"value"`
}

// scanLimit reads the limit parameter (default defaultScanLimit); out of range, it
// answers 400 and reports false.
func scanLimit(w http.ResponseWriter, r *http.Request) (int, bool) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return defaultScanLimit, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > maxScanLimit {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("limit: %q is not a number from 1 to %d", s, maxScanLimit))
		return 0, false
	}
	return n, true
}

// scanBounds reads the serialized range [from, to) of a scan from its from and to
// parameters, or from prefix; nil bounds are open. A key that does not parse, or a
// prefix beside from or to, answers 400 and reports false.
func scanBounds(w http.ResponseWriter, r *http.Request, st *graph.Store, topic string) (from, to []byte, ok bool) {
	q := r.URL.Query()
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
		return nil, nil, false
	}
	if prefix != nil {
		if from != nil || to != nil {
			writeError(w, http.StatusBadRequest, "prefix: give either prefix or from and to, not both")
			return nil, nil, false
		}
		from, to = prefix, prefixEnd(prefix)
	}
	return from, to, true
}

// scanStale scans the local copies of st, standby and restoring ones too, and
// describes each copy it read, in task order.
func scanStale(rt *runtime, st *graph.Store, from, to []byte) ([]kvstore.Entry, []*staleJSON, error) {
	entries, infos, err := rt.queryScanStale(st, from, to)
	slices.SortFunc(infos, func(x, y StaleInfo) int { return compareTasks(x.Task, y.Task) })
	copies := make([]*staleJSON, 0, len(infos))
	for _, si := range infos {
		copies = append(copies, newStaleJSON(si, st.Global))
	}
	return entries, copies, err
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
