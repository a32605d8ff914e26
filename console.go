package eddy

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/processor"
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

// instanceView is what one instance reports of itself (GET /ui/api/local), and what
// the overview shows of it.
type instanceView struct {
	Addr       string     `json:"addr"`
	State      string     `json:"state"`
	Generation int32      `json:"generation"`
	Tasks      []taskView `json:"tasks"`
	// NodeRecords and NodeRates are the records through each node since its tasks
	// were made here, and per second lately, over the instance's tasks.
	NodeRecords map[string]int64   `json:"nodeRecords"`
	NodeRates   map[string]float64 `json:"nodeRates"`
	// Self, Error and Unreachable are filled by the instance that shows the page.
	Self  bool   `json:"-"`
	Error string `json:"-"`
}

// taskView is one task of an instance.
type taskView struct {
	ID           string        `json:"id"`
	Subtopology  int           `json:"subtopology"`
	Partition    int32         `json:"partition"`
	Instance     string        `json:"instance"`
	State        string        `json:"state"`
	Lag          []lagView     `json:"lag"`
	Processed    int64         `json:"processed"`
	Rate         float64       `json:"rate"` // input records per second, lately
	Commits      int64         `json:"commits"`
	LastCommit   time.Time     `json:"lastCommit"`
	LastCommitMs time.Duration `json:"lastCommitTook"`
	MeanCommit   time.Duration `json:"meanCommitTook"`
	Aborts       int64         `json:"aborts"`
	Restores     []restoreView `json:"restores"`
	Dropped      int64         `json:"dropped"`
	DeadLettered int64         `json:"deadLettered"`
	Skipped      int64         `json:"skipped"`
}

type lagView struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Lag       int64  `json:"lag"`
}

type restoreView struct {
	Store       string  `json:"store"`
	Done        int64   `json:"done"`
	Total       int64   `json:"total"`
	Rate        float64 `json:"rate"`
	LeftSeconds float64 `json:"leftSeconds"` // -1: unknown
}

// LagTotal is the task's records left over all its input partitions.
func (t taskView) LagTotal() int64 {
	var n int64
	for _, l := range t.Lag {
		n += l.Lag
	}
	return n
}

// local reports this instance: its tasks from the registry, each with what its
// metrics keep (metrics.Live, kept with or without Prometheus) and its input lag.
func (c *console) local() instanceView {
	a := c.h.app
	v := instanceView{Addr: a.cfg.AdvertisedAddr, State: string(a.State()), Tasks: []taskView{}}
	rt := a.rt.Load()
	if rt == nil {
		return v
	}
	v.Generation, _ = rt.registry.owners()
	now := time.Now()
	nodes := map[string]int64{}
	for _, t := range rt.registry.all() {
		st := taskState(t.state.Load())
		if t.dead.Load() || st == taskClosed {
			continue
		}
		if m := t.nodeRecords.Load(); m != nil {
			for n, c := range *m {
				nodes[n] += c
			}
		}
		live := t.metrics.Live()
		tv := taskView{
			ID: t.id.String(), Subtopology: t.id.Subtopology, Partition: t.id.Partition, Instance: v.Addr,
			State: st.String(), Processed: live.Processed, Rate: c.rates.rate(t.id.String(), now, live.Processed),
			Commits: live.Commits, LastCommit: live.LastCommit, LastCommitMs: live.LastCommitTook, Aborts: live.Aborts,
			Dropped: live.Dropped, DeadLettered: live.DeadLettered, Skipped: live.Skipped,
			Lag: []lagView{},
		}
		if live.Commits > 0 {
			tv.MeanCommit = live.CommitTime / time.Duration(live.Commits)
		}
		for topic, lag := range t.inbox.lag() {
			tv.Lag = append(tv.Lag, lagView{Topic: topic, Partition: t.id.Partition, Lag: lag})
		}
		slices.SortFunc(tv.Lag, func(x, y lagView) int { return strings.Compare(x.Topic, y.Topic) })
		for _, p := range live.Restores {
			left := -1.0
			if p.Rate > 0 {
				left = float64(p.Total-p.Done) / p.Rate
			}
			if p.Done >= p.Total {
				left = 0
			}
			tv.Restores = append(tv.Restores, restoreView{Store: p.Store, Done: p.Done, Total: p.Total, Rate: p.Rate, LeftSeconds: left})
		}
		v.Tasks = append(v.Tasks, tv)
	}
	sortTaskViews(v.Tasks)
	v.NodeRecords, v.NodeRates = nodes, map[string]float64{}
	for n, count := range nodes {
		v.NodeRates[n] = c.nodeRates.rate(n, now, count)
	}
	return v
}

func sortTaskViews(ts []taskView) {
	slices.SortFunc(ts, func(x, y taskView) int {
		if x.Subtopology != y.Subtopology {
			return x.Subtopology - y.Subtopology
		}
		if x.Partition != y.Partition {
			return int(x.Partition - y.Partition)
		}
		return strings.Compare(x.Instance, y.Instance)
	})
}

func (c *console) serveLocal(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.local())
}

// instances reports every instance of the group: this one, and each other one that the
// group's last assignment names (its AdvertisedAddr), asked in parallel for its own
// report. An instance that does not answer is shown with the tasks the assignment gave
// it, in state "unreachable". Instances that announce no AdvertisedAddr are not known
// to the others and are not shown.
func (c *console) instances(r *http.Request) []instanceView {
	self := c.local()
	self.Self = true
	out := []instanceView{self}
	rt := c.h.app.rt.Load()
	if rt == nil || r.Header.Get(forwardedHeader) != "" {
		return out
	}
	_, hosts := rt.registry.owners()
	var others []string
	for host := range hosts {
		if host != c.h.app.cfg.AdvertisedAddr {
			others = append(others, host)
		}
	}
	sort.Strings(others)
	views := make([]instanceView, len(others))
	var wg sync.WaitGroup
	for i, host := range others {
		wg.Go(func() {
			v, err := c.remote(r, host)
			if err != nil {
				c.h.log.Warn("console: an instance did not report", "instance", host, "error", err)
				v = instanceView{Addr: host, State: "unreachable", Error: "did not answer", Tasks: []taskView{}}
				for _, id := range hosts[host] {
					tid, perr := processor.ParseTaskID(id)
					if perr != nil {
						continue
					}
					v.Tasks = append(v.Tasks, taskView{ID: id, Subtopology: tid.Subtopology, Partition: tid.Partition, Instance: host, State: "unreachable", Lag: []lagView{}})
				}
			}
			v.Addr = host
			for j := range v.Tasks {
				v.Tasks[j].Instance = host
			}
			views[i] = v
		})
	}
	wg.Wait()
	return append(out, views...)
}

// remote asks another instance for its report, with the caller's credentials, as a
// forwarded query is.
func (c *console) remote(r *http.Request, host string) (instanceView, error) {
	var v instanceView
	if !validOwner(host) {
		return v, fmt.Errorf("instance address %q is not host:port", host)
	}
	body, err := c.fetch(r, host, "/ui/api/local", nil)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("instance %s: its report does not decode: %w", host, err)
	}
	return v, nil
}

// fetch GETs path from another instance, marked forwarded so it answers from its own
// state, and returns the body of a 200 answer.
func (c *console) fetch(r *http.Request, host, path string, query url.Values) ([]byte, error) {
	ctx, cancel := context.WithTimeout(r.Context(), c.h.opts.Timeout/2)
	defer cancel()
	u := url.URL{Scheme: "http", Host: host, Path: path, RawQuery: query.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(forwardedHeader, c.h.app.cfg.AdvertisedAddr)
	if auth := r.Header.Get("Authorization"); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.h.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.h.opts.MaxForwardedBytes+1))
	switch {
	case err != nil:
		return nil, err
	case int64(len(body)) > c.h.opts.MaxForwardedBytes:
		return nil, fmt.Errorf("instance %s: answer of %s exceeds %d bytes", host, path, c.h.opts.MaxForwardedBytes)
	case resp.StatusCode != http.StatusOK:
		return body, &remoteStatus{host: host, code: resp.StatusCode, body: body}
	}
	return body, nil
}

// remoteStatus is a non-200 answer of another instance.
type remoteStatus struct {
	host string
	code int
	body []byte
}

func (e *remoteStatus) Error() string {
	return fmt.Sprintf("instance %s answered %d: %s", e.host, e.code, bytes.TrimSpace(e.body))
}

// rateTracker turns record counters (of a task, of a node) into rates, from the last
// sample at least a second old.
type rateTracker struct {
	mu      sync.Mutex
	samples map[string]rateSample
}

type rateSample struct {
	at        time.Time
	processed int64
	rate      float64
}

func (rt *rateTracker) rate(id string, now time.Time, processed int64) float64 {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.samples == nil {
		rt.samples = map[string]rateSample{}
	}
	s, ok := rt.samples[id]
	switch {
	case !ok || processed < s.processed: // new, or counting again (a task made afresh)
		rt.samples[id] = rateSample{at: now, processed: processed}
		return 0
	case now.Sub(s.at) < time.Second:
		return s.rate
	}
	r := float64(processed-s.processed) / now.Sub(s.at).Seconds()
	rt.samples[id] = rateSample{at: now, processed: processed, rate: r}
	return r
}

// overview is the data of the overview page.
type overview struct {
	page
	Instances                      []instanceView
	Tasks, Running, Restoring      int
	Lag                            int64
	Rate                           float64
	Dropped, DeadLettered, Skipped int64
	Q, StateFilter, Group          string
	Size, PageNo, Pages, Matched   int
	States                         []string
	Groups                         []taskGroup
	Prev, Next                     string
}

// taskGroup is the tasks of one instance or sub-topology, on the page shown.
type taskGroup struct {
	Name    string
	Matched int // tasks of the group that match, on every page
	Lag     int64
	Rate    float64
	Rows    []taskView
}

const (
	defaultPageSize = 100
	maxPageSize     = 2000
)

func (c *console) serveOverview(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "overview", buildOverview(c.page("overview"), c.instances(r), r.URL.Query()))
}

// buildOverview filters, groups and pages the tasks of instances as the query q says
// (q: search text, state, group, size, page).
func buildOverview(pg page, instances []instanceView, q url.Values) overview {
	o := overview{page: pg, Q: strings.TrimSpace(q.Get("q")), StateFilter: q.Get("state"), Group: q.Get("group")}
	if o.Group != "subtopology" && o.Group != "none" {
		o.Group = "instance"
	}
	o.Size, _ = strconv.Atoi(q.Get("size"))
	if o.Size <= 0 {
		o.Size = defaultPageSize
	}
	o.Size = min(o.Size, maxPageSize)
	o.PageNo, _ = strconv.Atoi(q.Get("page"))
	o.PageNo = max(o.PageNo, 1)
	o.Instances = instances

	var all []taskView
	states := map[string]bool{}
	for _, in := range o.Instances {
		for _, t := range in.Tasks {
			o.Tasks++
			states[t.State] = true
			switch t.State {
			case "running":
				o.Running++
			case "restoring":
				o.Restoring++
			}
			o.Lag += t.LagTotal()
			o.Rate += t.Rate
			o.Dropped += t.Dropped
			o.DeadLettered += t.DeadLettered
			o.Skipped += t.Skipped
			if matches(t, o.Q, o.StateFilter) {
				all = append(all, t)
			}
		}
	}
	o.States = slices.Sorted(func(yield func(string) bool) {
		for s := range states {
			if !yield(s) {
				return
			}
		}
	})
	groupOf := func(t taskView) string {
		switch o.Group {
		case "subtopology":
			return "sub-topology " + strconv.Itoa(t.Subtopology)
		case "none":
			return ""
		}
		return t.Instance
	}
	slices.SortStableFunc(all, func(x, y taskView) int {
		if gx, gy := groupOf(x), groupOf(y); gx != gy {
			if o.Group == "subtopology" {
				return x.Subtopology - y.Subtopology
			}
			return strings.Compare(gx, gy)
		}
		if x.Subtopology != y.Subtopology {
			return x.Subtopology - y.Subtopology
		}
		return int(x.Partition - y.Partition)
	})
	o.Matched = len(all)
	o.Pages = max(1, (len(all)+o.Size-1)/o.Size)
	o.PageNo = min(o.PageNo, o.Pages)
	from, to := (o.PageNo-1)*o.Size, min(o.PageNo*o.Size, len(all))
	byName := map[string]*taskGroup{}
	for i, t := range all {
		name := groupOf(t)
		g := byName[name]
		if g == nil {
			g = &taskGroup{Name: name}
			byName[name] = g
		}
		g.Matched++
		g.Lag += t.LagTotal()
		g.Rate += t.Rate
		if i >= from && i < to {
			if len(g.Rows) == 0 {
				o.Groups = append(o.Groups, taskGroup{Name: name})
			}
			g.Rows = append(g.Rows, t)
		}
	}
	for i := range o.Groups {
		o.Groups[i] = *byName[o.Groups[i].Name]
	}
	link := func(p int) string {
		v := url.Values{}
		for k, s := range map[string]string{"q": o.Q, "state": o.StateFilter} {
			if s != "" {
				v.Set(k, s)
			}
		}
		if o.Group != "instance" {
			v.Set("group", o.Group)
		}
		if o.Size != defaultPageSize {
			v.Set("size", strconv.Itoa(o.Size))
		}
		v.Set("page", strconv.Itoa(p))
		return "?" + v.Encode()
	}
	if o.PageNo > 1 {
		o.Prev = link(o.PageNo - 1)
	}
	if o.PageNo < o.Pages {
		o.Next = link(o.PageNo + 1)
	}
	return o
}

// matches reports whether a task passes the overview's search (case-insensitive, in
// its task ID, instance, state and input topics) and state filter.
func matches(t taskView, q, state string) bool {
	if state != "" && t.State != state {
		return false
	}
	if q == "" {
		return true
	}
	q = strings.ToLower(q)
	for _, f := range []string{t.ID, t.Instance, t.State} {
		if strings.Contains(strings.ToLower(f), q) {
			return true
		}
	}
	for _, l := range t.Lag {
		if strings.Contains(strings.ToLower(l.Topic), q) {
			return true
		}
	}
	return false
}

// subView is one sub-topology on the topology page.
type subView struct {
	ID                int
	Tasks, Running    int
	Lag               int64
	Rate              float64
	Sources, Sinks    []string
	Stores            []string
	DroppedOrDeadLtrd int64
}

type topologyPage struct {
	page
	Subs     []subView
	Describe string
}

// subViews sums the tasks of every instance per sub-topology, and the node rates of
// every instance per node.
func (c *console) subViews(r *http.Request) ([]subView, map[string]float64) {
	a := c.h.app
	subs := make([]subView, len(a.g.Subtopologies))
	for i, s := range a.g.Subtopologies {
		subs[i].ID = s.ID
		subs[i].Sources = s.AllSourceTopics(a.cfg.ApplicationID)
		for _, n := range s.Nodes {
			if n.Kind == graph.Sink {
				subs[i].Sinks = append(subs[i].Sinks, n.TopicNames(a.cfg.ApplicationID)...)
			}
		}
		for _, st := range s.Stores {
			subs[i].Stores = append(subs[i].Stores, st.Name)
		}
	}
	nodeRates := map[string]float64{}
	for _, in := range c.instances(r) {
		for n, rate := range in.NodeRates {
			nodeRates[n] += rate
		}
		for _, t := range in.Tasks {
			if t.Subtopology < 0 || t.Subtopology >= len(subs) {
				continue
			}
			s := &subs[t.Subtopology]
			s.Tasks++
			if t.State == "running" {
				s.Running++
			}
			s.Lag += t.LagTotal()
			s.Rate += t.Rate
			s.DroppedOrDeadLtrd += t.Dropped + t.DeadLettered
		}
	}
	return subs, nodeRates
}

func (c *console) serveTopology(w http.ResponseWriter, r *http.Request) {
	subs, _ := c.subViews(r)
	c.render(w, r, "topology", topologyPage{page: c.page("topology"), Subs: subs, Describe: c.h.app.topo.Describe()})
}

// serveDOT answers the graph the topology page draws: DescribeDOT's nodes with the
// application's real topic names, changelog topics and global stores added, and each
// sub-topology labelled with its input rate over every instance.
func (c *console) serveDOT(w http.ResponseWriter, r *http.Request) {
	a := c.h.app
	var rates *graphRates
	if r.URL.Query().Get("rates") != "0" {
		subs, nodes := c.subViews(r)
		rates = &graphRates{subs: map[int]float64{}, nodes: nodes}
		for _, s := range subs {
			rates.subs[s.ID] = s.Rate
		}
	}
	w.Header().Set("Content-Type", "text/vnd.graphviz; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, consoleDOT(a.g, a.cfg.ApplicationID, rates))
}

// graphRates are the records per second the graph shows: per sub-topology (its input)
// and per node.
type graphRates struct {
	subs  map[int]float64
	nodes map[string]float64
}

// consoleDOT draws g for the console, with rates if not nil. Node IDs are "node:NAME",
// "store:NAME" and "topic:NAME", which Graphviz writes as each SVG node's title.
func consoleDOT(g *graph.Graph, appID string, rates *graphRates) string {
	var sb strings.Builder
	sb.WriteString("digraph topology {\n  rankdir=LR; bgcolor=\"transparent\"; nodesep=0.3; ranksep=0.45;\n")
	sb.WriteString("  node [fontname=\"Helvetica,Arial,sans-serif\", fontsize=11, style=filled, fillcolor=\"#ffffff\", color=\"#55606e\"];\n")
	sb.WriteString("  edge [color=\"#55606e\", arrowsize=0.7];\n")
	topics := map[string]bool{}
	topic := func(name, kind string) {
		if topics[name] {
			return
		}
		topics[name] = true
		fill := "#e8f1fb"
		switch kind {
		case "repartition":
			fill = "#fdf1dc"
		case "changelog":
			fill = "#eeeeee"
		}
		fmt.Fprintf(&sb, "  %q [shape=ellipse, fillcolor=%q, label=%q, tooltip=%q];\n", "topic:"+name, fill, name, kind+" topic "+name)
	}
	for _, s := range g.Subtopologies {
		label := fmt.Sprintf("Sub-topology %d", s.ID)
		if rates != nil {
			label += fmt.Sprintf(" · %s rec/s in", formatRate(rates.subs[s.ID]))
		}
		fmt.Fprintf(&sb, "  subgraph cluster_%d {\n    label=%q; labeljust=l; fontname=\"Helvetica,Arial,sans-serif\"; fontsize=12; style=\"rounded\"; color=\"#9aa5b1\";\n", s.ID, label)
		for _, n := range s.Nodes {
			shape, fill := "box", "#ffffff"
			switch n.Kind {
			case graph.Source:
				shape, fill = "invhouse", "#dff3e4"
			case graph.Sink:
				shape, fill = "house", "#fbe3e3"
			}
			label := n.Kind.String() + "\n" + n.Name
			if rates != nil {
				label += "\n" + formatRate(rates.nodes[n.Name]) + "/s"
			}
			fmt.Fprintf(&sb, "    %q [shape=%s, fillcolor=%q, label=%q];\n", "node:"+n.Name, shape, fill, label)
		}
		for _, st := range s.Stores {
			fmt.Fprintf(&sb, "    %q [shape=cylinder, fillcolor=\"#f3eafc\", label=%q];\n", "store:"+st.Name, "store\n"+st.Name)
		}
		sb.WriteString("  }\n")
		for _, n := range s.Nodes {
			for _, ch := range n.Children {
				fmt.Fprintf(&sb, "  %q -> %q;\n", "node:"+n.Name, "node:"+ch)
			}
			for _, st := range n.Stores {
				fmt.Fprintf(&sb, "  %q -> %q [dir=both, style=dashed];\n", "node:"+n.Name, "store:"+st)
			}
			kind := "input"
			if n.Internal {
				kind = "repartition"
			} else if n.Kind == graph.Sink {
				kind = "output"
			}
			for _, tp := range n.TopicNames(appID) {
				topic(tp, kind)
				if n.Kind == graph.Source {
					fmt.Fprintf(&sb, "  %q -> %q;\n", "topic:"+tp, "node:"+n.Name)
				} else {
					fmt.Fprintf(&sb, "  %q -> %q;\n", "node:"+n.Name, "topic:"+tp)
				}
			}
		}
		for _, st := range s.Stores {
			switch {
			case st.SourceTopic != "":
				topic(st.SourceTopic, "input")
				fmt.Fprintf(&sb, "  %q -> %q [style=dotted, arrowhead=none, tooltip=\"its changelog is its source topic\"];\n", "store:"+st.Name, "topic:"+st.SourceTopic)
			case st.Logged:
				cl := names.ChangelogTopic(appID, st.Name)
				topic(cl, "changelog")
				fmt.Fprintf(&sb, "  %q -> %q [style=dotted];\n", "store:"+st.Name, "topic:"+cl)
			}
		}
	}
	for _, gs := range g.GlobalStores {
		topic(gs.Topic, "input")
		fmt.Fprintf(&sb, "  %q [shape=cylinder, fillcolor=\"#f3eafc\", label=%q];\n", "store:"+gs.Store.Name, "global store\n"+gs.Store.Name)
		fmt.Fprintf(&sb, "  %q -> %q;\n", "topic:"+gs.Topic, "store:"+gs.Store.Name)
	}
	sb.WriteString("}\n")
	return sb.String()
}

// consoleNodeIDs lists the graph node IDs of a topology as the console draws it, for
// tests.
func consoleNodeIDs(g *graph.Graph, appID string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, s := range g.Subtopologies {
		for _, n := range s.Nodes {
			add("node:" + n.Name)
			for _, tp := range n.TopicNames(appID) {
				add("topic:" + tp)
			}
		}
		for _, st := range s.Stores {
			add("store:" + st.Name)
			if st.SourceTopic == "" && st.Logged {
				add("topic:" + names.ChangelogTopic(appID, st.Name))
			}
		}
	}
	for _, gs := range g.GlobalStores {
		add("store:" + gs.Store.Name)
		add("topic:" + gs.Topic)
	}
	return out
}
