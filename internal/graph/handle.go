package graph

// Handle carries the checked graph inside the public topology.Topology, which embeds
// it under an unexported alias. Its field and its one method are unexported, so a
// user of package topology can neither see nor reach the graph (an internal type),
// while the module reaches it with Of: the embedded method is promoted to Topology and
// satisfies holder. No exported method or package-level variable exposes it.
type Handle struct{ g *Graph }

// NewHandle wraps a checked graph for topology.Build.
func NewHandle(g *Graph) Handle { return Handle{g: g} }

func (h Handle) checkedGraph() *Graph { return h.g }

// holder is what embeds a Handle: *topology.Topology.
type holder interface{ checkedGraph() *Graph }

// Of returns the checked graph of a topology.Topology.
func Of(t holder) *Graph { return t.checkedGraph() }
