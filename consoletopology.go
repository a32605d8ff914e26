package eddy

import (
	"fmt"
	"io"
	"net/http"
	"strings"

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
