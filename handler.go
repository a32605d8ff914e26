package eddy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// forwardedHeader marks a query forwarded by another instance, so it is never
// forwarded twice (a stale ownership map must not make requests loop).
const forwardedHeader = "X-Eddy-Forwarded"

// Handler serves the application's operational endpoints:
//
//	GET /healthz                    200 while the process is alive and not failed
//	GET /readyz                     200 when every assigned task is restored and running
//	GET /topology[?format=dot|mermaid]  the topology description
//	GET /stores/{store}/keys/{key}  an interactive query, JSON; forwarded to the owner
//	GET /metrics                    Prometheus, when Config.Metrics is a Gatherer
//
// A query answers 200 {"store", "key", "value"} from the local store, 404 for a missing
// key or store, 400 for a key that does not parse, and 503 with Retry-After while the
// key's partition restores or moves. A key held by another instance is fetched from its
// AdvertisedAddr.
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		st := a.State()
		if st == StateFailed || st == StateStopped {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"state": string(st)})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"state": string(st)})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		st := a.State()
		if st != StateRunning {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"state": string(st)})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"state": string(st)})
	})
	mux.HandleFunc("GET /topology", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		switch r.URL.Query().Get("format") {
		case "", "text":
			_, _ = io.WriteString(w, a.topo.Describe())
		case "dot":
			w.Header().Set("Content-Type", "text/vnd.graphviz; charset=utf-8")
			_, _ = io.WriteString(w, a.topo.DescribeDOT())
		case "mermaid":
			_, _ = io.WriteString(w, a.topo.DescribeMermaid())
		default:
			http.Error(w, "format: want text, dot or mermaid", http.StatusBadRequest)
		}
	})
	mux.HandleFunc("GET /stores/{store}/keys/{key}", a.serveKey)
	if g, ok := a.cfg.Metrics.(prometheus.Gatherer); ok {
		mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	}
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *App) serveKey(w http.ResponseWriter, r *http.Request) {
	storeName, keyText := r.PathValue("store"), r.PathValue("key")
	st, ok := a.g.Stores[storeName]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no store %q", storeName)})
		return
	}
	notReady := func(err error) {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
	}
	rt, err := a.queryRuntime()
	if err != nil {
		notReady(err)
		return
	}
	topic := rt.changelogTopic(storeName)
	key, err := st.KeyFromText(keyText, topic)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	value, err := rt.queryGet(st, key)
	var nl *NotLocalError
	switch {
	case errors.As(err, &nl):
		if nl.Owner == "" || nl.Owner == a.cfg.AdvertisedAddr || r.Header.Get(forwardedHeader) != "" {
			notReady(fmt.Errorf("%w: %v", ErrNotReady, nl))
			return
		}
		a.forward(w, r, nl.Owner)
		return
	case errors.Is(err, ErrNotReady):
		notReady(err)
		return
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	case value == nil:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no key %q in store %q", keyText, storeName)})
		return
	}
	v, err := st.ValueToJSON(value, topic)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"store": storeName, "key": keyText, "value": v})
}

// forward asks the owner of a key and relays its answer.
func (a *App) forward(w http.ResponseWriter, r *http.Request, owner string) {
	u := url.URL{Scheme: "http", Host: owner, Path: r.URL.Path, RawPath: r.URL.RawPath}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	req.Header.Set(forwardedHeader, a.cfg.AdvertisedAddr)
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": fmt.Sprintf("owner %s: %v", owner, err)})
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.Header().Set("X-Eddy-Served-By", owner)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
