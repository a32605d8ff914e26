package topology_test

import (
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
)

func TestWindowStoreBuildErrors(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a")
	topology.AddProcessor(b, "p", identity(), "in")
	topology.AddWindowStore(b, "w", serde.String(), serde.Int64(), 0, time.Minute, "p")
	topology.AddSessionStore(b, "s", serde.String(), serde.Int64(), 0, "p")
	topology.AddKeyValueStore(b, "kv", serde.String(), serde.Int64(), "p")
	topology.AddSessionStore(b, "kv", serde.String(), serde.Int64(), time.Minute, "p")
	msg := buildErr(t, b, "w", "s", "kv")
	for _, want := range []string{"window size (0s) and retention (1m0s) must be at least 1 ms", "session store \"s\": the retention (0s)", "duplicate store name \"kv\""} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
}

// windowUser reads its stores with the given types at Init and reports the error.
type windowUser struct{ err *error }

func (u windowUser) Init(ctx processor.Context[string, string]) error {
	if _, err := processor.WindowStore[string, int64](ctx, "w"); err != nil {
		return err
	}
	_, err := processor.SessionStore[string, string](ctx, "s") // the store holds int64
	*u.err = err
	return nil
}
func (windowUser) Process(processor.Record[string, string]) error { return nil }
func (windowUser) Close() error                                   { return nil }

func TestWindowStoreTypesChecked(t *testing.T) {
	var err error
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a")
	topology.AddProcessor(b, "p", func() processor.Processor[string, string, string, string] { return windowUser{&err} }, "in")
	topology.AddWindowStore(b, "w", serde.String(), serde.Int64(), time.Minute, time.Hour, "p")
	topology.AddSessionStore(b, "s", serde.String(), serde.Int64(), time.Hour, "p")
	topo, berr := b.Build()
	if berr != nil {
		t.Fatal(berr)
	}
	d, nerr := topologytest.New(topo, topologytest.Config{})
	if nerr != nil {
		t.Fatal(nerr)
	}
	defer d.Close()
	if err == nil || !strings.Contains(err.Error(), `state store "s"`) || !strings.Contains(err.Error(), "topology.AddSessionStore") {
		t.Fatalf("a session store read with the wrong value type: %v", err)
	}
}
