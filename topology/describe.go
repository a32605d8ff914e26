package topology

import (
	"fmt"
	"strings"

	"github.com/eddy-streams/eddy/internal/graph"
)

// Describe returns a readable text form of the topology in the form of Kafka Streams'
// TopologyDescription, so its readers' habits carry over: each sub-topology with its
// nodes in the order they were added, their topics and stores, and their edges ("-->"
// to children, "<--" from parents, "none" when there are none). An indented line more
// per node gives the key and value types and serdes, and each store of a sub-topology
// is listed with its processors, changelog and kind. Repartition and changelog topics
// are shown without the application ID prefix the runtime adds.
func (t *Topology) Describe() string {
	var sb strings.Builder
	sb.WriteString("Topologies:\n")
	for i, s := range t.g().Subtopologies {
		if i > 0 {
			sb.WriteString("\n")
		}
		fmt.Fprintf(&sb, "   Sub-topology: %d\n", s.ID)
		for _, n := range s.Nodes {
			switch n.Kind {
			case graph.Source:
				fmt.Fprintf(&sb, "    Source: %s (topics: [%s])\n", n.Name, strings.Join(topicLabels(n), ", "))
				fmt.Fprintf(&sb, "      --> %s\n", nodeList(n.Children))
				fmt.Fprintf(&sb, "      forwards (%s, %s), serdes (%s, %s)\n", typeName(n.OutKey), typeName(n.OutValue), n.KeySerde, n.ValueSerde)
			case graph.Processor:
				fmt.Fprintf(&sb, "    Processor: %s (stores: [%s])\n", n.Name, strings.Join(n.Stores, ", "))
				fmt.Fprintf(&sb, "      --> %s\n", nodeList(n.Children))
				fmt.Fprintf(&sb, "      <-- %s\n", nodeList(n.Parents))
				fmt.Fprintf(&sb, "      takes (%s, %s), forwards (%s, %s)\n", typeName(n.InKey), typeName(n.InValue), typeName(n.OutKey), typeName(n.OutValue))
			case graph.Sink:
				fmt.Fprintf(&sb, "    Sink: %s (topic: %s)\n", n.Name, topicLabels(n)[0])
				fmt.Fprintf(&sb, "      <-- %s\n", nodeList(n.Parents))
				fmt.Fprintf(&sb, "      takes (%s, %s), serdes (%s, %s)\n", typeName(n.InKey), typeName(n.InValue), n.KeySerde, n.ValueSerde)
			}
		}
		for _, st := range s.Stores {
			logged := "changelog: " + st.Name + "-changelog"
			switch {
			case st.SourceTopic != "":
				logged = "changelog: its source topic " + st.SourceTopic
			case !st.Logged:
				logged = "no changelog"
			}
			kind := "bbolt"
			if st.InMemory {
				kind = "in-memory"
			}
			fmt.Fprintf(&sb, "    Store: %s (processors: [%s], %s, %s)\n", st.Name, strings.Join(st.Processors, ", "), logged, kind)
			fmt.Fprintf(&sb, "      keys %s, values %s, serdes (%s, %s)\n", typeName(st.KeyType), typeName(st.ValueType), st.KeySerde, st.ValueSerde)
		}
	}
	// Kafka Streams lists each global store as a sub-topology "for global store (will
	// not generate tasks)"; eddy's have no nodes, so one line each.
	for _, gs := range t.g().GlobalStores {
		st := gs.Store
		fmt.Fprintf(&sb, "\n   Global store: %s (topic: %s, read by every instance; no tasks, no changelog but its topic)\n", st.Name, gs.Topic)
		fmt.Fprintf(&sb, "      keys %s, values %s, serdes (%s, %s)\n", typeName(st.KeyType), typeName(st.ValueType), st.KeySerde, st.ValueSerde)
	}
	return sb.String()
}

func nodeList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func topicLabels(n *graph.Node) []string {
	if !n.Internal {
		return n.Topics
	}
	out := make([]string, len(n.Topics))
	for i, t := range n.Topics {
		out[i] = t + "-repartition"
	}
	return out
}

// DescribeDOT returns the topology as a Graphviz DOT digraph: one cluster per
// sub-topology, topics as ellipses, stores as cylinders.
func (t *Topology) DescribeDOT() string {
	var sb strings.Builder
	sb.WriteString("digraph topology {\n  rankdir=LR;\n  node [fontname=\"Helvetica\"];\n")
	topics := map[string]bool{}
	for _, s := range t.g().Subtopologies {
		fmt.Fprintf(&sb, "  subgraph cluster_%d {\n    label=\"Sub-topology %d\";\n", s.ID, s.ID)
		for _, n := range s.Nodes {
			shape := "box"
			switch n.Kind {
			case graph.Source:
				shape = "invhouse"
			case graph.Sink:
				shape = "house"
			}
			fmt.Fprintf(&sb, "    %q [shape=%s, label=%q];\n", "node:"+n.Name, shape, n.Kind.String()+": "+n.Name)
		}
		for _, st := range s.Stores {
			fmt.Fprintf(&sb, "    %q [shape=cylinder, label=%q];\n", "store:"+st.Name, "store: "+st.Name)
		}
		sb.WriteString("  }\n")
		for _, n := range s.Nodes {
			for _, c := range n.Children {
				fmt.Fprintf(&sb, "  %q -> %q;\n", "node:"+n.Name, "node:"+c)
			}
			for _, st := range n.Stores {
				fmt.Fprintf(&sb, "  %q -> %q [dir=both, style=dashed];\n", "node:"+n.Name, "store:"+st)
			}
			for _, tp := range topicLabels(n) {
				if !topics[tp] {
					topics[tp] = true
					fmt.Fprintf(&sb, "  %q [shape=ellipse, label=%q];\n", "topic:"+tp, tp)
				}
				if n.Kind == graph.Source {
					fmt.Fprintf(&sb, "  %q -> %q;\n", "topic:"+tp, "node:"+n.Name)
				} else {
					fmt.Fprintf(&sb, "  %q -> %q;\n", "node:"+n.Name, "topic:"+tp)
				}
			}
		}
	}
	sb.WriteString("}\n")
	return sb.String()
}

// DescribeMermaid returns the topology as a Mermaid flowchart, which GitHub renders in
// Markdown.
func (t *Topology) DescribeMermaid() string {
	var sb strings.Builder
	sb.WriteString("flowchart LR\n")
	ids := map[string]string{}
	id := func(key string) string {
		if v, ok := ids[key]; ok {
			return v
		}
		v := fmt.Sprintf("n%d", len(ids))
		ids[key] = v
		return v
	}
	topics := map[string]bool{}
	for _, s := range t.g().Subtopologies {
		fmt.Fprintf(&sb, "  subgraph sub%d[\"Sub-topology %d\"]\n", s.ID, s.ID)
		for _, n := range s.Nodes {
			fmt.Fprintf(&sb, "    %s[\"%s: %s\"]\n", id("node:"+n.Name), n.Kind, mermaidText(n.Name))
		}
		for _, st := range s.Stores {
			fmt.Fprintf(&sb, "    %s[(\"store: %s\")]\n", id("store:"+st.Name), mermaidText(st.Name))
		}
		sb.WriteString("  end\n")
	}
	for _, s := range t.g().Subtopologies {
		for _, n := range s.Nodes {
			for _, tp := range topicLabels(n) {
				if !topics[tp] {
					topics[tp] = true
					fmt.Fprintf(&sb, "  %s([\"topic: %s\"])\n", id("topic:"+tp), mermaidText(tp))
				}
				if n.Kind == graph.Source {
					fmt.Fprintf(&sb, "  %s --> %s\n", id("topic:"+tp), id("node:"+n.Name))
				} else {
					fmt.Fprintf(&sb, "  %s --> %s\n", id("node:"+n.Name), id("topic:"+tp))
				}
			}
			for _, c := range n.Children {
				fmt.Fprintf(&sb, "  %s --> %s\n", id("node:"+n.Name), id("node:"+c))
			}
			for _, st := range n.Stores {
				fmt.Fprintf(&sb, "  %s -.- %s\n", id("node:"+n.Name), id("store:"+st))
			}
		}
	}
	return sb.String()
}

// mermaidText escapes a name for a quoted Mermaid label, where a double quote would end
// the label; Mermaid reads entity codes there.
func mermaidText(s string) string {
	return strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;").Replace(s)
}
