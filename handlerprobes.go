package eddy

import (
	"io"
	"net/http"
)

// serveHealthz answers 200 while the process is alive and has neither failed nor
// stopped; it runs without Authorize, which probes cannot pass.
func (h *handler) serveHealthz(w http.ResponseWriter, r *http.Request) {
	st := h.app.State()
	if st == StateFailed || st == StateStopped {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"state": string(st)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"state": string(st)})
}

// serveReadyz answers 200 once every assigned task is restored and running, and 503
// with Retry-After before; it runs without Authorize, as serveHealthz.
func (h *handler) serveReadyz(w http.ResponseWriter, r *http.Request) {
	st := h.app.State()
	if st != StateRunning {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"state": string(st)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"state": string(st)})
}

// serveTopology describes the topology as text (the default), Graphviz DOT or Mermaid.
func (h *handler) serveTopology(w http.ResponseWriter, r *http.Request) {
	topo := h.app.topo
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	switch r.URL.Query().Get("format") {
	case "", "text":
		_, _ = io.WriteString(w, topo.Describe())
	case "dot":
		w.Header().Set("Content-Type", "text/vnd.graphviz; charset=utf-8")
		_, _ = io.WriteString(w, topo.DescribeDOT())
	case "mermaid":
		_, _ = io.WriteString(w, topo.DescribeMermaid())
	default:
		writeError(w, http.StatusBadRequest, "format: want text, dot or mermaid")
	}
}
