package topology_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// The hooks a layer above the builder uses: ConnectStore attaches a store after it was
// added, and names the store when it was never added; QueryValuesAs changes what
// queries read.
func TestConnectStoreAndQueryValuesAs(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "in")
	topology.AddProcessor(b, "p", processor.Filter(func(processor.Record[string, string]) bool { return true }), "in")
	st := topology.AddKeyValueStore(b, "s", serde.String(), serde.String())
	b.ConnectStore("s", "p")
	view := serde.Funcs("view", func(string, int64) ([]byte, error) { return nil, nil },
		func(string, []byte) (int64, error) { return 42, nil })
	topology.QueryValuesAs(st, view)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := topo.Subtopologies()[0].Stores; len(got) != 1 || got[0] != "s" {
		t.Errorf("stores %q", got)
	}
	g := graph.Of(topo)
	if v, err := g.Stores["s"].ValueToJSON([]byte("x"), ""); err != nil || v != int64(42) {
		t.Errorf("ValueToJSON = %v, %v; want the view's 42", v, err)
	}
	if _, ok := g.Stores["s"].Values.(serde.Serde[int64]); !ok {
		t.Errorf("queries read values with %T, not the view", g.Stores["s"].Values)
	}

	b = topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "in")
	b.ConnectStore("nope", "in")
	if _, err := b.Build(); !errors.Is(err, topology.ErrInvalid) || !strings.Contains(err.Error(), `store "nope" (to attach to in) was never added`) {
		t.Errorf("err = %v", err)
	}
}
