package eddy

import (
	"fmt"
	"net/http"

	"github.com/eddy-streams/eddy/internal/graph"
)

// serveKey answers GET /stores/{store}/keys/{key}: the key's value from the local
// store, or from the instance holding the key (answerQueryError forwards it).
func (h *handler) serveKey(w http.ResponseWriter, r *http.Request) {
	storeName, keyText := r.PathValue("store"), r.PathValue("key")
	st, ok := h.queryStore(w, r, graph.KindKeyValue)
	if !ok {
		return
	}
	rt, topic, ok := h.storeRuntime(w, r)
	if !ok {
		return
	}
	key, ok := h.pathKey(w, r, st, topic)
	if !ok {
		return
	}
	stale, ok := staleParam(w, r)
	if !ok {
		return
	}
	var value []byte
	var err error
	var info *staleJSON
	if stale {
		var si StaleInfo
		value, si, err = rt.queryGetStale(st, key)
		info = newStaleJSON(si, st.Global)
	} else {
		value, err = rt.queryGet(st, key)
	}
	if h.answerQueryError(w, r, h.app, err) {
		return
	}
	if value == nil {
		writeJSON(w, http.StatusNotFound, notFoundAnswer{Error: fmt.Sprintf("no key %q in store %q", keyText, storeName), Stale: info})
		return
	}
	v, err := st.ValueToJSON(value, topic)
	if err != nil {
		h.internalError(w, r, "the stored value does not deserialize", err)
		return
	}
	answer := map[string]any{"store": storeName, "key": keyText, "value": v}
	if info != nil {
		answer["stale"] = info
	}
	h.writeAnswer(w, r, answer, "the stored value does not encode as JSON")
}

// queryStore finds the store a query route names and checks it is of the kind the
// route reads; when not, it answers 404 or 400 and reports false.
func (h *handler) queryStore(w http.ResponseWriter, r *http.Request, kind string) (*graph.Store, bool) {
	storeName := r.PathValue("store")
	st, ok := h.app.g.Stores[storeName]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no store %q", storeName))
		return nil, false
	}
	if st.Kind != kind {
		writeError(w, http.StatusBadRequest, kindMessage(st, kind))
		return nil, false
	}
	return st, true
}

// storeRuntime is the runtime that answers queries and the changelog topic of the
// route's store, which its serdes are given; before the runtime runs it answers 503
// and reports false.
func (h *handler) storeRuntime(w http.ResponseWriter, r *http.Request) (*runtime, string, bool) {
	rt, err := h.app.queryRuntime()
	if err != nil {
		h.notReady(w, r, err)
		return nil, "", false
	}
	return rt, rt.changelogTopic(r.PathValue("store")), true
}

// pathKey parses and serializes the route's {key}; when it does not parse it answers
// 400 and reports false. The answer describes the client's key (its text and the
// store's key type) and nothing of the server's; the parse error goes to the log.
func (h *handler) pathKey(w http.ResponseWriter, r *http.Request, st *graph.Store, topic string) ([]byte, bool) {
	keyText := r.PathValue("key")
	key, err := st.KeyFromText(keyText, topic)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("key %q does not parse as a %s key", keyText, st.KeyType))
		h.log.Debug("query key does not parse", "path", r.URL.Path, "error", err)
		return nil, false
	}
	return key, true
}

// decodeStored deserializes a stored key or value for an answer with decode, the
// store's KeyToJSON or ValueToJSON; when it does not deserialize it answers 500 saying
// what failed and reports false.
func (h *handler) decodeStored(w http.ResponseWriter, r *http.Request, decode func([]byte, string) (any, error), b []byte, topic, what string) (any, bool) {
	v, err := decode(b, topic)
	if err != nil {
		h.internalError(w, r, what, err)
		return nil, false
	}
	return v, true
}

// The messages of a stored key or value that does not deserialize.
const (
	storedKeyBroken   = "a stored key does not deserialize"
	storedValueBroken = "a stored value does not deserialize"
)
