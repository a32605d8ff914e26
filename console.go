package eddy

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"time"
)

// The operations console (HandlerOptions.Console) is server-rendered HTML: every table
// is complete without JavaScript. A little script (consoleui/static/console.js) polls
// the page's live part every few seconds and swaps it in; the topology graph is laid
// out in the browser by Graphviz compiled to WebAssembly (consoleui/static/vendor,
// fetched from npm by consoleui/vendor.sh and embedded here), the one part that needs
// script. Polling rather than server-sent events: the handler runs every request under
// http.TimeoutHandler, which buffers a response until it ends, so a stream would never
// reach the browser.

//go:embed consoleui
var consoleFiles embed.FS

// consolePoll is how often the pages refresh their live part.
const consolePoll = 2 * time.Second

// consoleCSP lets the pages load only their own files: scripts from /ui/static (the
// Graphviz module compiles its WebAssembly, hence wasm-unsafe-eval), no inline script
// or style, no framing, forms only to the console.
const consoleCSP = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// console serves /ui/.
type console struct {
	h         *handler
	pages     map[string]*template.Template
	rates     rateTracker // per task
	nodeRates rateTracker // per node, over this instance's tasks
}

func (h *handler) routeConsole(mux *http.ServeMux) {
	c := &console{h: h, pages: parseConsolePages()}
	static, err := fs.Sub(consoleFiles, "consoleui/static")
	if err != nil {
		panic(err) // the embedded tree is part of the build
	}
	files := http.StripPrefix("/ui/static/", http.FileServerFS(static))
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	mux.Handle("GET /ui/{$}", h.authorized(c.serveOverview))
	mux.Handle("GET /ui/topology", h.authorized(c.serveTopology))
	mux.Handle("GET /ui/topology.dot", h.authorized(c.serveDOT))
	mux.Handle("GET /ui/stores", h.authorized(c.serveStores))
	mux.Handle("GET /ui/api/local", h.authorized(c.serveLocal))
	mux.Handle("GET /ui/static/", h.authorized(func(w http.ResponseWriter, r *http.Request) {
		// The files change only with the binary; an hour's caching spares the 800 KB
		// Graphviz module on every page while a new release is seen soon enough.
		w.Header().Set("Cache-Control", "private, max-age=3600")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	}))
}

var consoleFuncs = template.FuncMap{
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return humanDuration(time.Since(t)) + " ago"
	},
	"ms": func(d time.Duration) string {
		if d <= 0 {
			return "–"
		}
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
	},
	"rate": formatRate,
	"secs": func(s float64) string {
		if s < 0 {
			return "?"
		}
		return humanDuration(time.Duration(s * float64(time.Second)))
	},
	"pct": func(done, total int64) int64 {
		if total <= 0 {
			return 100
		}
		return min(100, done*100/total)
	},
}

// formatRate shows a rate with one decimal below 10, none above.
func formatRate(r float64) string {
	if r < 10 {
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return strconv.FormatFloat(r, 'f', 0, 64)
}

func parseConsolePages() map[string]*template.Template {
	pages := map[string]*template.Template{}
	for _, p := range []string{"overview", "topology", "stores"} {
		pages[p] = template.Must(template.New("layout.html").Funcs(consoleFuncs).ParseFS(consoleFiles,
			"consoleui/layout.html", "consoleui/"+p+".html"))
	}
	return pages
}

func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return "<1s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// render writes a page, or with fragment the live part alone, which console.js swaps
// in.
func (c *console) render(w http.ResponseWriter, r *http.Request, page string, data any) {
	var buf bytes.Buffer
	name := "layout.html"
	if r.URL.Query().Get("fragment") != "" {
		name = "live"
	}
	if err := c.pages[page].ExecuteTemplate(&buf, name, data); err != nil {
		c.h.internalError(w, r, "rendering the console page failed", err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// page is what every page shows in its header.
type page struct {
	App, Self, State, Nav string
	Now                   time.Time
	PollMs                int64
}

func (c *console) page(nav string) page {
	a := c.h.app
	self := a.cfg.AdvertisedAddr
	if self == "" {
		self = "this instance"
	}
	return page{App: a.cfg.ApplicationID, Self: self, State: string(a.State()), Nav: nav, Now: time.Now(), PollMs: consolePoll.Milliseconds()}
}
