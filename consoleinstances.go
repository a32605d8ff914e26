package eddy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/eddy-streams/eddy/processor"
)

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

// otherInstances are the addresses of the group's instances but this one, sorted;
// hosts maps each instance the last assignment names to its tasks.
func (c *console) otherInstances(hosts map[string][]string) []string {
	var others []string
	for host := range hosts {
		if host != c.h.app.cfg.AdvertisedAddr {
			others = append(others, host)
		}
	}
	sort.Strings(others)
	return others
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
	others := c.otherInstances(hosts)
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
