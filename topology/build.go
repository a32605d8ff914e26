package topology

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/eddy-streams/eddy/internal/cache"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/names"
)

// Topology is a checked topology, ready to run. It is immutable.
//
// Its representation, the checked graph, is internal to the module (the runtime and
// the test driver reach it through the internal package graph).
type Topology struct {
	handle
}

// handle names the embedded graph.Handle with an unexported field name.
type handle = graph.Handle

// g returns the checked graph the topology wraps.
func (t *Topology) g() *graph.Graph { return graph.Of(t) }

// Subtopology lists what one sub-topology reads, keeps and writes.
type Subtopology struct {
	ID int
	// Nodes are the node names, in the order they were added.
	Nodes []string
	// SourceTopics are the user topics it reads.
	SourceTopics []string
	// Repartitions are the names of the repartition topics it reads; the topic of name
	// n is <applicationID>-<n>-repartition.
	Repartitions []string
	// Stores are the stores of its processors.
	Stores []string
	// LoggedStores are the stores of Stores that have a changelog topic,
	// <applicationID>-<store>-changelog (all but those made WithoutChangelog).
	LoggedStores []string
	// RepartitionSinks are the names of the repartition topics it writes.
	RepartitionSinks []string
	// SinkTopics are the user topics it writes.
	SinkTopics []string
}

// InternalTopics returns the changelog and repartition topics of the sub-topology for an
// application: the topics the runtime creates.
func (s Subtopology) InternalTopics(appID string) (changelogs, repartitions []string) {
	for _, st := range s.LoggedStores {
		changelogs = append(changelogs, names.ChangelogTopic(appID, st))
	}
	for _, r := range s.Repartitions {
		repartitions = append(repartitions, names.RepartitionTopic(appID, r))
	}
	return changelogs, repartitions
}

// Subtopologies lists the sub-topologies in ID order.
func (t *Topology) Subtopologies() []Subtopology {
	var out []Subtopology
	for _, s := range t.g().Subtopologies {
		st := Subtopology{ID: s.ID, SourceTopics: s.SourceTopics, Repartitions: s.RepartitionSources, RepartitionSinks: s.RepartitionSinks}
		for _, n := range s.Nodes {
			st.Nodes = append(st.Nodes, n.Name)
			if n.Kind == graph.Sink && !n.Internal {
				st.SinkTopics = append(st.SinkTopics, n.Topics[0])
			}
		}
		for _, store := range s.Stores {
			st.Stores = append(st.Stores, store.Name)
			if store.Logged {
				st.LoggedStores = append(st.LoggedStores, store.Name)
			}
		}
		out = append(out, st)
	}
	return out
}

// Build checks the topology and splits it into sub-topologies. Its error joins every
// problem found, each naming the node or store at fault; all wrap ErrInvalid.
func (b *Builder) Build() (*Topology, error) {
	if b.built {
		return nil, fmt.Errorf("%w: Build called twice on one Builder", ErrInvalid)
	}
	errs := slices.Clone(b.errs)
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	if len(b.nodes) == 0 {
		fail("no nodes")
	}

	// Edges, and the types along them.
	for _, n := range b.nodes {
		n.Children = nil
	}
	for _, n := range b.nodes {
		if n.Kind != graph.Source && len(n.Parents) == 0 {
			fail("%s %q has no parent", strings.ToLower(n.Kind.String()), n.Name)
		}
		seen := map[string]bool{}
		for _, pn := range n.Parents {
			if seen[pn] {
				fail("node %q names parent %q twice", n.Name, pn)
				continue
			}
			seen[pn] = true
			p, ok := b.byName[pn]
			switch {
			case !ok:
				fail("node %q: unknown parent %q", n.Name, pn)
				continue
			case p.Kind == graph.Sink:
				fail("node %q: parent %q is a sink, and sinks forward nothing", n.Name, pn)
				continue
			}
			p.Children = append(p.Children, n.Name)
			if p.OutKey != n.InKey || p.OutValue != n.InValue {
				fail("node %q takes (%s, %s) but parent %q forwards (%s, %s)",
					n.Name, typeName(n.InKey), typeName(n.InValue), pn, typeName(p.OutKey), typeName(p.OutValue))
			}
		}
	}
	for _, n := range b.nodes {
		if n.Kind == graph.Source && (n.OffsetReset < graph.ResetDefault || n.OffsetReset > graph.ResetLatest) {
			fail("source %q: unknown offset reset policy %d: use topology.Earliest or topology.Latest", n.Name, n.OffsetReset)
		}
		if n.Kind == graph.Sink && n.Internal && n.RepartitionPartitions < 0 {
			fail("repartition %q: WithPartitions(%d): the partition count must be positive", n.Topics[0], n.RepartitionPartitions)
		}
	}
	if cyc := findCycle(b.nodes, b.byName); cyc != nil {
		fail("cycle through nodes %s", strings.Join(quoteAll(cyc), " -> "))
	}

	// Topics: a topic is read by one source only.
	readers := map[string]string{}
	for _, n := range b.nodes {
		if n.Kind != graph.Source {
			continue
		}
		for _, t := range n.Topics {
			key := t
			if n.Internal {
				key = "repartition:" + t
			}
			if other, dup := readers[key]; dup {
				fail("sources %q and %q both read topic %q", other, n.Name, t)
			}
			readers[key] = n.Name
		}
	}

	// Stores.
	storeByName := map[string]*graph.Store{}
	checkGlobals(b.globals, b.nodes, fail)
	for _, st := range b.stores {
		storeByName[st.Name] = st
		b.resolveCaching(st, fail)
		if st.Global {
			continue
		}
		if len(st.Processors) == 0 {
			fail("store %q is attached to no processor", st.Name)
		}
		for _, pn := range st.Processors {
			p, ok := b.byName[pn]
			switch {
			case !ok:
				fail("store %q is attached to unknown processor %q", st.Name, pn)
			case p.Kind != graph.Processor:
				fail("store %q is attached to %s %q; stores attach to processors", st.Name, strings.ToLower(p.Kind.String()), pn)
			default:
				if !slices.Contains(p.Stores, st.Name) {
					p.Stores = append(p.Stores, st.Name)
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	var local []*graph.Store
	for _, st := range b.stores {
		if !st.Global {
			local = append(local, st)
		}
	}
	g := &graph.Graph{Nodes: b.byName, Order: b.nodes, Stores: storeByName, StoreOrder: local, GlobalStores: b.globals, CopartitionGroups: b.copartition}
	g.Subtopologies = split(b.nodes, b.byName, local)
	// A store restored from its source topic must be in the sub-topology reading it: its
	// checkpoint is that sub-topology's input offset.
	for _, sub := range g.Subtopologies {
		for _, st := range sub.Stores {
			if st.SourceTopic != "" && !slices.Contains(sub.SourceTopics, st.SourceTopic) {
				return nil, fmt.Errorf("%w: store %q: its changelog is topic %q, which no source of its sub-topology reads", ErrInvalid, st.Name, st.SourceTopic)
			}
		}
	}
	b.built = true
	return &Topology{handle: graph.NewHandle(g)}, nil
}

func typeName(t reflect.Type) string {
	if t == nil {
		return "nothing"
	}
	// reflect spells []byte as []uint8; write it as users do.
	return strings.ReplaceAll(t.String(), "[]uint8", "[]byte")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// findCycle returns the nodes of one cycle (first node repeated at the end), or nil.
func findCycle(nodes []*graph.Node, byName map[string]*graph.Node) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var cycle []string
	var visit func(n *graph.Node) bool
	visit = func(n *graph.Node) bool {
		color[n.Name] = grey
		stack = append(stack, n.Name)
		for _, cn := range n.Children {
			switch color[cn] {
			case grey:
				i := slices.Index(stack, cn)
				cycle = append(slices.Clone(stack[i:]), cn)
				return true
			case white:
				if visit(byName[cn]) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n.Name] = black
		return false
	}
	for _, n := range nodes {
		if color[n.Name] == white && visit(n) {
			return cycle
		}
	}
	return nil
}

// split finds the connected parts of the graph (edges parent-child, and processors that
// share a store), numbered in the order of their first node.
func split(nodes []*graph.Node, byName map[string]*graph.Node, stores []*graph.Store) []*graph.Subtopology {
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		if parent[x] == "" || parent[x] == x {
			return x
		}
		r := find(parent[x])
		parent[x] = r
		return r
	}
	union := func(a, b string) {
		ra, rb := find(a), find(b)
		if ra == rb {
			return
		}
		// the root is the node added first, so numbering by root index is stable
		if byName[ra].Index < byName[rb].Index {
			parent[rb] = ra
		} else {
			parent[ra] = rb
		}
	}
	for _, n := range nodes {
		for _, p := range n.Parents {
			union(n.Name, p)
		}
	}
	for _, st := range stores {
		for _, p := range st.Processors[1:] {
			union(st.Processors[0], p)
		}
	}

	groups := map[string]*graph.Subtopology{}
	var order []string
	for _, n := range nodes {
		r := find(n.Name)
		s, ok := groups[r]
		if !ok {
			s = &graph.Subtopology{}
			groups[r] = s
			order = append(order, r)
		}
		s.Nodes = append(s.Nodes, n)
	}
	sort.SliceStable(order, func(i, j int) bool { return byName[order[i]].Index < byName[order[j]].Index })

	var out []*graph.Subtopology
	for id, r := range order {
		s := groups[r]
		s.ID = id
		storeSet := map[string]bool{}
		for _, n := range s.Nodes {
			switch n.Kind {
			case graph.Source:
				for _, t := range n.Topics {
					if n.Internal {
						s.RepartitionSources = append(s.RepartitionSources, t)
					} else {
						s.SourceTopics = append(s.SourceTopics, t)
					}
				}
			case graph.Sink:
				if n.Internal {
					s.RepartitionSinks = append(s.RepartitionSinks, n.Topics[0])
				}
			}
			for _, st := range n.Stores {
				storeSet[st] = true
			}
		}
		for _, st := range stores {
			if storeSet[st.Name] {
				s.Stores = append(s.Stores, st)
			}
		}
		out = append(out, s)
	}
	return out
}

// ErrNotCopartitioned is wrapped by CheckCopartitioning's error.
var ErrNotCopartitioned = errors.New("topics joined by key have different partition counts")

// CopartitionGroups returns the groups of topics declared with Builder.Copartition.
func (t *Topology) CopartitionGroups() [][]string { return slices.Clone(t.g().CopartitionGroups) }

// CheckCopartitioning checks that the topics of each co-partitioning group have equal
// partition counts, as partitions tells them (the runtime asks the cluster at start).
// Its error names both topics and their counts.
func (t *Topology) CheckCopartitioning(partitions func(topic string) (int32, error)) error {
	var errs []error
	for _, group := range t.g().CopartitionGroups {
		first, n0 := "", int32(0)
		for _, topic := range group {
			n, err := partitions(topic)
			if err != nil {
				errs = append(errs, fmt.Errorf("co-partitioning check: topic %q: %w", topic, err))
				continue
			}
			if first == "" {
				first, n0 = topic, n
				continue
			}
			if n != n0 {
				errs = append(errs, fmt.Errorf("%w: topic %q has %d partitions but %q has %d; they are joined by key, so records of one key must be in the same partition of each: give them equal partition counts, or repartition one side", ErrNotCopartitioned, first, n0, topic, n))
			}
		}
	}
	return errors.Join(errs...)
}

// resolveCaching gives a store with WithCaching the builder's cache budget, and refuses
// caching where it has no meaning.
func (b *Builder) resolveCaching(st *graph.Store, fail func(string, ...any)) {
	if st.CacheMaxBytes >= 0 {
		return
	}
	if st.Kind != graph.KindKeyValue || st.Global {
		fail("store %q: WithCaching is for key-value stores of a processor (not window, session or global stores)", st.Name)
		return
	}
	st.CacheMaxBytes = cache.DefaultMaxBytes
	if b.cacheMaxSet {
		st.CacheMaxBytes = max(b.cacheMaxBytes, 0)
	}
}
