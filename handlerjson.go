package eddy

import (
	"encoding/json"
	"fmt"
	"net/http"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// jsonMuxErrors answers a request no route takes (404) or takes with another method
// (405, with its Allow header) in JSON, as every other error answer, where ServeMux
// writes plain text ("404 page not found") (issue 26; docs/operations.md promises JSON).
func jsonMuxErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(&jsonErrorWriter{ResponseWriter: w, path: r.URL.Path, method: r.Method}, r)
	})
}

// jsonErrorWriter turns ServeMux's plain-text error answer into JSON.
type jsonErrorWriter struct {
	http.ResponseWriter
	path, method string
	wrote        bool
}

func (j *jsonErrorWriter) WriteHeader(status int) {
	if j.wrote {
		return
	}
	j.wrote = true
	msg := fmt.Sprintf("%d %s", status, http.StatusText(status))
	switch status {
	case http.StatusNotFound:
		msg = fmt.Sprintf("no such route: %s; the routes are /healthz, /readyz, /topology, /metrics, /stores/{store}/keys/{key} and the window and session queries (docs/operations.md)", j.path)
	case http.StatusMethodNotAllowed:
		msg = fmt.Sprintf("method %s not allowed on %s; allowed: %s", j.method, j.path, j.Header().Get("Allow"))
	}
	j.Header().Del("Content-Length")
	writeError(j.ResponseWriter, status, msg)
}

// Write drops ServeMux's plain-text body: WriteHeader wrote the JSON one.
func (j *jsonErrorWriter) Write(p []byte) (int, error) {
	if !j.wrote {
		j.WriteHeader(http.StatusOK)
	}
	return len(p), nil
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// notReady answers 503 with Retry-After; detail goes to the log only.
func (h *handler) notReady(w http.ResponseWriter, r *http.Request, detail error) {
	h.log.Debug("query not ready", "path", r.URL.Path, "reason", detail)
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "store not ready (restoring or rebalancing); retry")
}

// internalError answers 500 saying what failed, not how; detail goes to the log.
func (h *handler) internalError(w http.ResponseWriter, r *http.Request, what string, detail error) {
	h.log.Error("query failed", "path", r.URL.Path, "what", what, "error", detail)
	writeError(w, http.StatusInternalServerError, what)
}

// writeAnswer answers 200 with answer in JSON. It encodes the whole answer before
// writing anything, so that a stored value that does not encode is a 500 (what says
// which), not a 200 with half a body.
func (h *handler) writeAnswer(w http.ResponseWriter, r *http.Request, answer any, what string) {
	body, err := json.Marshal(answer)
	if err != nil {
		h.internalError(w, r, what, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}
