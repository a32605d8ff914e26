package eddy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eddy-streams/eddy/internal/graph"
)

// forwardedHeader marks a query forwarded by another instance (its value is the
// sender's AdvertisedAddr). A query carrying it is answered from the local store or
// not at all, never forwarded again: a query takes at most one hop, so ownership maps
// that disagree (instances in different generations during a rebalance, a member that
// announces another's address) cannot make instances forward to each other in a loop.
const forwardedHeader = "X-Eddy-Forwarded"

// servedByHeader names the instance that answered a forwarded query.
const servedByHeader = "X-Eddy-Served-By"

// ErrUnauthenticated may be wrapped by the error of HandlerOptions.Authorize: the
// request carries no valid credentials, and the answer is 401 instead of 403.
var ErrUnauthenticated = errors.New("eddy: unauthenticated")

// HandlerOptions tunes App.HandlerWith and App.Server. The zero value gives the
// defaults.
type HandlerOptions struct {
	// Timeout bounds each request, a forwarded query included: one that runs longer is
	// answered 503 with Retry-After. Default 10s. App.Server also derives its read and
	// write timeouts from it.
	Timeout time.Duration
	// MaxHeaderBytes bounds a request's URL and headers; a larger request gets 431.
	// Default 16 KiB.
	MaxHeaderBytes int
	// MaxBodyBytes bounds a request's body. The endpoints read none: a request that
	// declares a larger one gets 413. Default 4 KiB.
	MaxBodyBytes int64
	// MaxForwardedBytes bounds the answer of another instance to a forwarded query; a
	// larger one is not relayed (502). Default 16 MiB.
	MaxForwardedBytes int64
	// Authorize, if set, runs before every endpoint except /healthz and /readyz, which
	// probes must reach without credentials. An error denies the request: 401 if it
	// wraps ErrUnauthenticated, else 403. The error is logged, not shown to the
	// client. A forwarded query carries the caller's Authorization header to the
	// owner, whose Authorize sees the same credentials.
	Authorize func(r *http.Request) error
	// Console serves the operations console at /ui/: HTML pages of the topology as a
	// graph, the group's instances and tasks (lag, commits, restores, dropped records)
	// and a store browser over the query routes, each showing the whole application
	// from any instance. Its pages run behind Authorize as the query routes do. Off by
	// default: it shows store contents to whoever may query them, in a browser.
	Console bool
}

func (o HandlerOptions) withDefaults() HandlerOptions {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 16 << 10
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 10
	}
	if o.MaxForwardedBytes <= 0 {
		o.MaxForwardedBytes = 16 << 20
	}
	return o
}

// Handler serves the application's operational endpoints with the default
// HandlerOptions:
//
//	GET /healthz                    200 while the process is alive and not failed
//	GET /readyz                     200 when every assigned task is restored and running
//	GET /tasks                      this instance's tasks: state, store checkpoints, lag (TasksView)
//	GET /topology[?format=dot|mermaid]  the topology description
//	GET /stores/{store}/keys/{key}  an interactive query, JSON; forwarded to the owner
//	GET /stores/{store}/keys/{key}?stale=true   from a standby or restoring copy here if need be (scans too)
//	GET /stores/{store}/keys?from=&to= | ?prefix=   a key scan of the local partitions
//	GET /stores/{store}/windows/{key}?from=&to=[&backward=true]   windows of a key
//	GET /stores/{store}/windows?from=&to=                         windows of every local key
//	GET /stores/{store}/sessions/{key}?from=&to=[&backward=true]  sessions of a key
//	GET /stores/{store}/sessions?from=&to=                        sessions of every local key
//	GET /metrics                    Prometheus, when Config.Metrics is a Gatherer
//	GET /ui/                        the operations console, when HandlerOptions.Console
//
// A query answers 200 {"store", "key", "value"} from the local store, 404 for a missing
// key or store, 400 for a key that does not parse, and 503 with Retry-After while the
// key's partition restores or moves. A key held by another instance is fetched from its
// AdvertisedAddr, once: a query another instance forwarded is never forwarded again.
//
// Errors are JSON {"error": "..."}. A client error (4xx) says what was wrong with the
// request; a server error (5xx) says only what kind of failure it was, and the details
// (file paths, addresses, serde errors) go to Config.Logger.
//
// Serve it with App.Server, or with an http.Server of your own that sets
// ReadHeaderTimeout: the handler bounds the time it takes, not the time a slow client
// takes to send its request.
func (a *App) Handler() http.Handler { return a.HandlerWith(HandlerOptions{}) }

// HandlerWith is Handler with options: timeouts, limits and an authorization hook.
func (a *App) HandlerWith(opts HandlerOptions) http.Handler {
	opts = opts.withDefaults()
	h := &handler{app: a, opts: opts, log: a.cfg.Logger.With("component", "http")}
	h.client = &http.Client{
		// An owner's redirect is not an answer: relay nothing, follow nothing.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			Proxy:                  nil, // instance to instance, never through a proxy
			DialContext:            (&net.Dialer{Timeout: opts.Timeout, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost:    4,
			IdleConnTimeout:        90 * time.Second,
			ResponseHeaderTimeout:  opts.Timeout,
			MaxResponseHeaderBytes: int64(opts.MaxHeaderBytes),
		},
	}
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
	mux.Handle("GET /tasks", h.authorized(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.TasksView())
	}))
	mux.Handle("GET /topology", h.authorized(func(w http.ResponseWriter, r *http.Request) {
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
			writeError(w, http.StatusBadRequest, "format: want text, dot or mermaid")
		}
	}))
	mux.Handle("GET /stores/{store}/keys/{key}", h.authorized(h.serveKey))
	mux.Handle("GET /stores/{store}/keys", h.authorized(h.serveScan))
	h.routeWindows(mux)
	if g, ok := a.cfg.Metrics.(prometheus.Gatherer); ok {
		mux.Handle("GET /metrics", h.authorized(promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP))
	}
	if opts.Console {
		h.routeConsole(mux)
	}
	h.mux = mux
	timeoutBody, _ := json.Marshal(map[string]string{"error": "request timed out; retry"})
	return h.limited(http.TimeoutHandler(h.recovered(jsonMuxErrors(mux)), opts.Timeout, string(timeoutBody)))
}

// Server returns an http.Server for the handler (HandlerWith(opts)) at addr, with the
// timeouts and limits an exposed server needs: a client must send its request headers
// within the Timeout (no slowloris) and its whole request within it too; the header
// limit applies while reading. Start it with ListenAndServe; stop it with Shutdown.
func (a *App) Server(addr string, opts HandlerOptions) *http.Server {
	opts = opts.withDefaults()
	return &http.Server{
		Addr:              addr,
		Handler:           a.HandlerWith(opts),
		ReadHeaderTimeout: opts.Timeout,
		ReadTimeout:       opts.Timeout,
		// Past the handler's own timeout, so its 503 still reaches the client.
		WriteTimeout:   opts.Timeout + 5*time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: opts.MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(a.cfg.Logger.With("component", "http").Handler(), slog.LevelWarn),
	}
}

// handler holds the state of App.HandlerWith.
type handler struct {
	app    *App
	opts   HandlerOptions
	log    *slog.Logger
	client *http.Client
	mux    *http.ServeMux // the routes, which the console asks too
	// fwdFailures rate-limits the warnings of forwards that failed: one line per query
	// made 20 lines in 10 s while an instance was down (issue 26).
	fwdFailures rateLimitedLog
}

// rateLimitedLog logs at most one warning per key every forwardWarnEvery, counting
// the ones it held back.
type rateLimitedLog struct {
	mu   sync.Mutex
	keys map[string]*limitedKey
}

type limitedKey struct {
	last time.Time
	held int
}

const forwardWarnEvery = 10 * time.Second

func (l *rateLimitedLog) warn(log *slog.Logger, key, msg string, args ...any) {
	l.mu.Lock()
	if l.keys == nil {
		l.keys = map[string]*limitedKey{}
	}
	k := l.keys[key]
	if k == nil {
		k = &limitedKey{}
		l.keys[key] = k
	}
	now := time.Now()
	if !k.last.IsZero() && now.Sub(k.last) < forwardWarnEvery {
		k.held++
		l.mu.Unlock()
		return
	}
	held := k.held
	k.last, k.held = now, 0
	l.mu.Unlock()
	log.Warn(msg, append(args, "held_back_since_last_warning", held)...)
}

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

func (h *handler) serveKey(w http.ResponseWriter, r *http.Request) {
	a := h.app
	storeName, keyText := r.PathValue("store"), r.PathValue("key")
	st, ok := a.g.Stores[storeName]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no store %q", storeName))
		return
	}
	if st.Kind != graph.KindKeyValue {
		writeError(w, http.StatusBadRequest, kindMessage(st, graph.KindKeyValue))
		return
	}
	rt, err := a.queryRuntime()
	if err != nil {
		h.notReady(w, r, err)
		return
	}
	topic := rt.changelogTopic(storeName)
	key, err := st.KeyFromText(keyText, topic)
	if err != nil {
		// The parse error describes the client's key, and nothing of the server's.
		writeError(w, http.StatusBadRequest, fmt.Sprintf("key %q does not parse as a %s key", keyText, st.KeyType))
		h.log.Debug("query key does not parse", "path", r.URL.Path, "error", err)
		return
	}
	stale, ok := staleParam(w, r)
	if !ok {
		return
	}
	var value []byte
	var info *staleJSON
	if stale {
		var si StaleInfo
		value, si, err = rt.queryGetStale(st, key)
		info = newStaleJSON(si, st.Global)
	} else {
		value, err = rt.queryGet(st, key)
	}
	if h.answerQueryError(w, r, a, err) {
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
	body, err := json.Marshal(answer)
	if err != nil {
		h.internalError(w, r, "the stored value does not encode as JSON", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}

// validOwner reports whether an owner address announced through the group is a plain
// host:port, so that it can only name a host, never a path, user or query.
func validOwner(owner string) bool {
	host, port, err := net.SplitHostPort(owner)
	return err == nil && host != "" && port != "" && !strings.ContainsAny(owner, "/?#@\\ \t\r\n%")
}

// forward asks the owner of a key and relays its answer.
// answerQueryError answers a query whose read of a store failed and reports whether it
// did (false for a nil err): a key owned by another instance is forwarded to it (once:
// a forwarded query that is not local either, or one with no known owner, is not
// ready), a store not ready yet is 503, anything else 500.
func (h *handler) answerQueryError(w http.ResponseWriter, r *http.Request, a *App, err error) bool {
	var nl *NotLocalError
	switch {
	case err == nil:
		return false
	case errors.As(err, &nl):
		if nl.Owner == "" || nl.Owner == a.cfg.AdvertisedAddr || r.Header.Get(forwardedHeader) != "" {
			h.notReady(w, r, err)
		} else {
			h.forward(w, r, nl.Owner)
		}
	case errors.Is(err, ErrNotReady):
		h.notReady(w, r, err)
	default:
		h.internalError(w, r, "reading the store failed", err)
	}
	return true
}

func (h *handler) forward(w http.ResponseWriter, r *http.Request, owner string) {
	if !validOwner(owner) {
		h.internalError(w, r, "the key's owner announced an unusable address", fmt.Errorf("owner address %q is not host:port", owner))
		return
	}
	u := url.URL{Scheme: "http", Host: owner, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		h.internalError(w, r, "forwarding the query failed", err)
		return
	}
	req.Header.Set(forwardedHeader, h.app.cfg.AdvertisedAddr)
	if auth := r.Header.Get("Authorization"); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.fwdFailures.warn(h.log, owner, "forwarded query failed", "path", r.URL.Path, "owner", owner, "error", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "the instance holding the key did not answer; retry")
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		h.log.Warn("forwarded query answered with a redirect; not followed", "path", r.URL.Path, "owner", owner, "status", resp.StatusCode, "location", resp.Header.Get("Location"))
		writeError(w, http.StatusBadGateway, "the instance holding the key gave no answer")
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, h.opts.MaxForwardedBytes+1))
	switch {
	case err != nil:
		h.log.Warn("forwarded query: reading the answer failed", "path", r.URL.Path, "owner", owner, "error", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "the instance holding the key did not answer; retry")
		return
	case int64(len(body)) > h.opts.MaxForwardedBytes:
		h.log.Warn("forwarded query: answer too large; not relayed", "path", r.URL.Path, "owner", owner, "limit", h.opts.MaxForwardedBytes)
		writeError(w, http.StatusBadGateway, fmt.Sprintf("the answer exceeds %d bytes", h.opts.MaxForwardedBytes))
		return
	}
	for _, k := range []string{"Content-Type", "Retry-After"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set(servedByHeader, owner)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, bytes.NewReader(body))
}
