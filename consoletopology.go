package eddy

import (
	"io"
	"net/http"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/names"
)

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
