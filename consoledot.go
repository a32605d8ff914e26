package eddy

import (
	"fmt"
	"strings"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/names"
)

// consoleDOT draws g for the console, with rates if not nil. Node IDs are "node:NAME",
// "store:NAME" and "topic:NAME", which Graphviz writes as each SVG node's title.
func consoleDOT(g *graph.Graph, appID string, rates *graphRates) string {
	d := &dotWriter{appID: appID, rates: rates, topics: map[string]bool{}}
	d.sb.WriteString("digraph topology {\n  rankdir=LR; bgcolor=\"transparent\"; nodesep=0.3; ranksep=0.45;\n")
	d.sb.WriteString("  node [fontname=\"Helvetica,Arial,sans-serif\", fontsize=11, style=filled, fillcolor=\"#ffffff\", color=\"#55606e\"];\n")
	d.sb.WriteString("  edge [color=\"#55606e\", arrowsize=0.7];\n")
	for _, s := range g.Subtopologies {
		d.cluster(s)
		d.nodeEdges(s)
		d.storeTopics(s)
	}
	for _, gs := range g.GlobalStores {
		d.topic(gs.Topic, "input")
		fmt.Fprintf(&d.sb, "  %q [shape=cylinder, fillcolor=\"#f3eafc\", label=%q];\n", "store:"+gs.Store.Name, "global store\n"+gs.Store.Name)
		fmt.Fprintf(&d.sb, "  %q -> %q;\n", "topic:"+gs.Topic, "store:"+gs.Store.Name)
	}
	d.sb.WriteString("}\n")
	return d.sb.String()
}

// dotWriter writes consoleDOT's graph.
type dotWriter struct {
	sb     strings.Builder
	appID  string
	rates  *graphRates
	topics map[string]bool // the topics drawn: a topic is drawn once, however many nodes use it
}

// topic draws a topic node, coloured by its kind (input, output, repartition or
// changelog), unless it is drawn already.
func (d *dotWriter) topic(name, kind string) {
	if d.topics[name] {
		return
	}
	d.topics[name] = true
	fill := "#e8f1fb"
	switch kind {
	case "repartition":
		fill = "#fdf1dc"
	case "changelog":
		fill = "#eeeeee"
	}
	fmt.Fprintf(&d.sb, "  %q [shape=ellipse, fillcolor=%q, label=%q, tooltip=%q];\n", "topic:"+name, fill, name, kind+" topic "+name)
}

// cluster draws a sub-topology's processor and store nodes in a box labelled with its
// input rate.
func (d *dotWriter) cluster(s *graph.Subtopology) {
	label := fmt.Sprintf("Sub-topology %d", s.ID)
	if d.rates != nil {
		label += fmt.Sprintf(" · %s rec/s in", formatRate(d.rates.subs[s.ID]))
	}
	fmt.Fprintf(&d.sb, "  subgraph cluster_%d {\n    label=%q; labeljust=l; fontname=\"Helvetica,Arial,sans-serif\"; fontsize=12; style=\"rounded\"; color=\"#9aa5b1\";\n", s.ID, label)
	for _, n := range s.Nodes {
		shape, fill := "box", "#ffffff"
		switch n.Kind {
		case graph.Source:
			shape, fill = "invhouse", "#dff3e4"
		case graph.Sink:
			shape, fill = "house", "#fbe3e3"
		}
		label := n.Kind.String() + "\n" + n.Name
		if d.rates != nil {
			label += "\n" + formatRate(d.rates.nodes[n.Name]) + "/s"
		}
		fmt.Fprintf(&d.sb, "    %q [shape=%s, fillcolor=%q, label=%q];\n", "node:"+n.Name, shape, fill, label)
	}
	for _, st := range s.Stores {
		fmt.Fprintf(&d.sb, "    %q [shape=cylinder, fillcolor=\"#f3eafc\", label=%q];\n", "store:"+st.Name, "store\n"+st.Name)
	}
	d.sb.WriteString("  }\n")
}

// nodeEdges draws a sub-topology's edges: node to child, node to the stores it uses,
// and the topics its sources read and its sinks write.
func (d *dotWriter) nodeEdges(s *graph.Subtopology) {
	for _, n := range s.Nodes {
		for _, ch := range n.Children {
			fmt.Fprintf(&d.sb, "  %q -> %q;\n", "node:"+n.Name, "node:"+ch)
		}
		for _, st := range n.Stores {
			fmt.Fprintf(&d.sb, "  %q -> %q [dir=both, style=dashed];\n", "node:"+n.Name, "store:"+st)
		}
		kind := "input"
		if n.Internal {
			kind = "repartition"
		} else if n.Kind == graph.Sink {
			kind = "output"
		}
		for _, tp := range n.TopicNames(d.appID) {
			d.topic(tp, kind)
			if n.Kind == graph.Source {
				fmt.Fprintf(&d.sb, "  %q -> %q;\n", "topic:"+tp, "node:"+n.Name)
			} else {
				fmt.Fprintf(&d.sb, "  %q -> %q;\n", "node:"+n.Name, "topic:"+tp)
			}
		}
	}
}

// storeTopics links each store of a sub-topology to the topic that backs it: its
// source topic, or its changelog when logged.
func (d *dotWriter) storeTopics(s *graph.Subtopology) {
	for _, st := range s.Stores {
		switch {
		case st.SourceTopic != "":
			d.topic(st.SourceTopic, "input")
			fmt.Fprintf(&d.sb, "  %q -> %q [style=dotted, arrowhead=none, tooltip=\"its changelog is its source topic\"];\n", "store:"+st.Name, "topic:"+st.SourceTopic)
		case st.Logged:
			cl := names.ChangelogTopic(d.appID, st.Name)
			d.topic(cl, "changelog")
			fmt.Fprintf(&d.sb, "  %q -> %q [style=dotted];\n", "store:"+st.Name, "topic:"+cl)
		}
	}
}
