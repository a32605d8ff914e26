package eddy

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

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
	h.client = newForwardClient(opts)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", h.serveHealthz)
	mux.HandleFunc("GET /readyz", h.serveReadyz)
	mux.Handle("GET /tasks", h.authorized(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.TasksView())
	}))
	mux.Handle("GET /topology", h.authorized(h.serveTopology))
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

// newForwardClient is the client that forwards a query to the instance holding its
// key, bounded by the handler's timeout and header limit.
func newForwardClient(opts HandlerOptions) *http.Client {
	return &http.Client{
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
