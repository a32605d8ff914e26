package topology_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// identity passes string records on unchanged.
func identity() processor.Supplier[string, string, string, string] {
	return processor.Filter(func(processor.Record[string, string]) bool { return true })
}

// toLength maps a string value to its length: (string, string) → (string, int64).
func toLength() processor.Supplier[string, string, string, int64] {
	return processor.MapValues[string](func(v string) (int64, error) { return int64(len(v)), nil })
}

// buildErr builds b, which must fail, and checks the error wraps ErrInvalid and names
// every one of names (quoted, as Build quotes them).
func buildErr(t *testing.T, b *topology.Builder, names ...string) string {
	t.Helper()
	topo, err := b.Build()
	if err == nil {
		t.Fatalf("Build succeeded:\n%s", topo.Describe())
	}
	if !errors.Is(err, topology.ErrInvalid) {
		t.Errorf("error %v does not wrap ErrInvalid", err)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), `"`+n+`"`) {
			t.Errorf("error %q does not name %q", err, n)
		}
	}
	return err.Error()
}

func TestBuildDuplicateName(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a")
	topology.AddProcessor(b, "in", identity(), "in")
	msg := buildErr(t, b, "in")
	if !strings.Contains(msg, "duplicate") {
		t.Errorf("error %q does not say what is wrong", msg)
	}
}

func TestBuildDuplicateStore(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a")
	topology.AddProcessor(b, "p", identity(), "in")
	topology.AddKeyValueStore(b, "s", serde.String(), serde.Int64(), "p")
	topology.AddKeyValueStore(b, "s", serde.String(), serde.String(), "p")
	if msg := buildErr(t, b, "s"); !strings.Contains(msg, "duplicate store") {
		t.Errorf("error %q does not say what is wrong", msg)
	}
}

func TestBuildUnknownParent(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a")
	topology.AddProcessor(b, "p", identity(), "in", "missing")
	if msg := buildErr(t, b, "p", "missing"); !strings.Contains(msg, "unknown parent") {
		t.Errorf("error %q does not say what is wrong", msg)
	}
}

func TestBuildParentIsSink(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a")
	topology.AddSink(b, "out", "b", serde.String(), serde.String(), "in")
	topology.AddProcessor(b, "p", identity(), "out")
	if msg := buildErr(t, b, "p", "out"); !strings.Contains(msg, "is a sink") {
		t.Errorf("error %q does not say what is wrong", msg)
	}
}

func TestBuildNoParent(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a")
	topology.AddProcessor(b, "orphan", identity())
	topology.AddSink(b, "lost", "b", serde.String(), serde.String())
	msg := buildErr(t, b, "orphan", "lost")
	if strings.Count(msg, "has no parent") != 2 {
		t.Errorf("error %q should report both nodes without a parent", msg)
	}
}

func TestBuildCycle(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a")
	topology.AddProcessor(b, "p1", identity(), "in", "p3")
	topology.AddProcessor(b, "p2", identity(), "p1")
	topology.AddProcessor(b, "p3", identity(), "p2")
	topology.AddSink(b, "out", "b", serde.String(), serde.String(), "p3")
	msg := buildErr(t, b, "p1", "p2", "p3")
	if !strings.Contains(msg, "cycle") || strings.Contains(msg, `"in"`) || strings.Contains(msg, `"out"`) {
		t.Errorf("error %q should name the cycle's nodes and only those", msg)
	}
}

func TestBuildSelfLoop(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a")
	topology.AddProcessor(b, "loop", identity(), "in", "loop")
	if msg := buildErr(t, b, "loop"); !strings.Contains(msg, "cycle") {
		t.Errorf("error %q does not report the cycle", msg)
	}
}

func TestBuildStoreAttachedToNothing(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a")
	topology.AddProcessor(b, "p", identity(), "in")
	topology.AddKeyValueStore(b, "lonely", serde.String(), serde.Int64())
	if msg := buildErr(t, b, "lonely"); !strings.Contains(msg, "attached to no processor") {
		t.Errorf("error %q does not say what is wrong", msg)
	}
}

func TestBuildStoreAttachedToUnknownProcessor(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a")
	topology.AddProcessor(b, "p", identity(), "in")
	topology.AddKeyValueStore(b, "counts", serde.String(), serde.Int64(), "p", "ghost")
	if msg := buildErr(t, b, "counts", "ghost"); !strings.Contains(msg, "unknown processor") {
		t.Errorf("error %q does not say what is wrong", msg)
	}
}

func TestBuildStoreAttachedToSourceOrSink(t *testing.T) {
	for _, kind := range []string{"source", "sink"} {
		t.Run(kind, func(t *testing.T) {
			b := topology.NewBuilder()
			topology.AddSource(b, "in", serde.String(), serde.String(), "a")
			topology.AddSink(b, "out", "b", serde.String(), serde.String(), "in")
			node := map[string]string{"source": "in", "sink": "out"}[kind]
			topology.AddKeyValueStore(b, "counts", serde.String(), serde.Int64(), node)
			if msg := buildErr(t, b, "counts", node); !strings.Contains(msg, kind) {
				t.Errorf("error %q should say the node is a %s", msg, kind)
			}
		})
	}
}

func TestBuildTypeMismatch(t *testing.T) {
	t.Run("processor", func(t *testing.T) {
		b := topology.NewBuilder()
		topology.AddSource(b, "in", serde.String(), serde.Int64(), "a")
		topology.AddProcessor(b, "len", toLength(), "in") // takes (string, string)
		msg := buildErr(t, b, "len", "in")
		if !strings.Contains(msg, "takes (string, string)") || !strings.Contains(msg, "forwards (string, int64)") {
			t.Errorf("error %q should give both type pairs", msg)
		}
	})
	t.Run("sink", func(t *testing.T) {
		b := topology.NewBuilder()
		topology.AddSource(b, "in", serde.String(), serde.String(), "a")
		topology.AddProcessor(b, "len", toLength(), "in")
		topology.AddSink(b, "out", "b", serde.String(), serde.String(), "len")
		msg := buildErr(t, b, "out", "len")
		if !strings.Contains(msg, "takes (string, string)") || !strings.Contains(msg, "forwards (string, int64)") {
			t.Errorf("error %q should give both type pairs", msg)
		}
	})
	t.Run("key", func(t *testing.T) {
		b := topology.NewBuilder()
		topology.AddSource(b, "in", serde.Int64(), serde.String(), "a")
		topology.AddRepartition(b, "rekey", serde.String(), serde.String(), "in")
		msg := buildErr(t, b, "rekey-sink", "in")
		if !strings.Contains(msg, "(int64, string)") {
			t.Errorf("error %q should give the parent's types", msg)
		}
	})
}

func TestBuildOtherErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(b *topology.Builder)
		names []string
		what  string
	}{
		{"no nodes", func(*topology.Builder) {}, nil, "no nodes"},
		{"source without topic", func(b *topology.Builder) {
			topology.AddSource(b, "in", serde.String(), serde.String())
		}, []string{"in"}, "reads no topic"},
		{"source with empty topic", func(b *topology.Builder) {
			topology.AddSource(b, "in", serde.String(), serde.String(), "a", "")
		}, []string{"in"}, "empty topic"},
		{"topic read twice", func(b *topology.Builder) {
			topology.AddSource(b, "in1", serde.String(), serde.String(), "a")
			topology.AddSource(b, "in2", serde.String(), serde.String(), "b", "a")
		}, []string{"in1", "in2", "a"}, "both read"},
		{"sink with empty topic", func(b *topology.Builder) {
			topology.AddSource(b, "in", serde.String(), serde.String(), "a")
			topology.AddSink(b, "out", "", serde.String(), serde.String(), "in")
		}, []string{"out"}, "empty topic"},
		{"nil supplier", func(b *topology.Builder) {
			topology.AddSource(b, "in", serde.String(), serde.String(), "a")
			topology.AddProcessor[string, string, string, string](b, "p", nil, "in")
		}, []string{"p"}, "nil supplier"},
		{"parent named twice", func(b *topology.Builder) {
			topology.AddSource(b, "in", serde.String(), serde.String(), "a")
			topology.AddProcessor(b, "p", identity(), "in", "in")
		}, []string{"p", "in"}, "twice"},
		{"empty node name", func(b *topology.Builder) {
			topology.AddSource(b, "", serde.String(), serde.String(), "a")
		}, nil, "empty name"},
		{"store name not a topic name", func(b *topology.Builder) {
			topology.AddSource(b, "in", serde.String(), serde.String(), "a")
			topology.AddProcessor(b, "p", identity(), "in")
			topology.AddKeyValueStore(b, "my counts", serde.String(), serde.Int64(), "p")
		}, []string{"my counts"}, "topic name"},
		{"negative repartition partitions", func(b *topology.Builder) {
			topology.AddSource(b, "in", serde.String(), serde.String(), "a")
			topology.AddRepartition(b, "by-key", serde.String(), serde.String(), "in").WithPartitions(-3)
		}, []string{"by-key"}, "must be positive"},
		{"repartition name not a topic name", func(b *topology.Builder) {
			topology.AddSource(b, "in", serde.String(), serde.String(), "a")
			topology.AddRepartition(b, "by/word", serde.String(), serde.String(), "in")
		}, []string{"by/word"}, "topic name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := topology.NewBuilder()
			c.build(b)
			if msg := buildErr(t, b, c.names...); !strings.Contains(msg, c.what) {
				t.Errorf("error %q does not say %q", msg, c.what)
			}
		})
	}
}

// Build reports every problem at once, not only the first.
func TestBuildJoinsAllErrors(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a")
	topology.AddProcessor(b, "p", identity(), "nowhere")
	topology.AddKeyValueStore(b, "s", serde.String(), serde.Int64())
	topology.AddSink(b, "out", "b", serde.String(), serde.Int64(), "in")
	msg := buildErr(t, b, "p", "nowhere", "s", "out")
	if n := strings.Count(msg, "\n") + 1; n != 3 {
		t.Errorf("want 3 errors, one per line, got %d:\n%s", n, msg)
	}
}

func TestBuildTwice(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a")
	topology.AddSink(b, "out", "b", serde.String(), serde.String(), "in")
	if _, err := b.Build(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Build(); !errors.Is(err, topology.ErrInvalid) {
		t.Fatalf("second Build = %v, want ErrInvalid", err)
	}
}

func TestWordcountSubtopologies(t *testing.T) {
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	subs := topo.Subtopologies()
	if len(subs) != 2 {
		t.Fatalf("got %d sub-topologies, want 2:\n%s", len(subs), topo.Describe())
	}
	want := []topology.Subtopology{
		{
			ID:               0,
			Nodes:            []string{"lines", "split", "words-sink"},
			SourceTopics:     []string{wordcount.InputTopic},
			RepartitionSinks: []string{"words"},
		},
		{
			ID:           1,
			Nodes:        []string{"words", "count", "output"},
			Repartitions: []string{"words"},
			Stores:       []string{wordcount.StoreName},
			LoggedStores: []string{wordcount.StoreName},
			SinkTopics:   []string{wordcount.OutputTopic},
		},
	}
	for i, w := range want {
		checkSub(t, subs[i], w)
	}

	cl, rp := subs[0].InternalTopics("wc")
	if len(cl) != 0 || len(rp) != 0 {
		t.Errorf("sub-topology 0 internal topics = %v, %v; want none (it writes the repartition topic, sub-topology 1 reads it)", cl, rp)
	}
	cl, rp = subs[1].InternalTopics("wc")
	if !slices.Equal(cl, []string{"wc-counts-changelog"}) || !slices.Equal(rp, []string{"wc-words-repartition"}) {
		t.Errorf("sub-topology 1 internal topics = %v, %v", cl, rp)
	}
}

func checkSub(t *testing.T, got, want topology.Subtopology) {
	t.Helper()
	eq := func(field string, g, w []string) {
		if !slices.Equal(g, w) {
			t.Errorf("sub-topology %d %s = %q, want %q", want.ID, field, g, w)
		}
	}
	if got.ID != want.ID {
		t.Errorf("ID = %d, want %d", got.ID, want.ID)
	}
	eq("Nodes", got.Nodes, want.Nodes)
	eq("SourceTopics", got.SourceTopics, want.SourceTopics)
	eq("Repartitions", got.Repartitions, want.Repartitions)
	eq("Stores", got.Stores, want.Stores)
	eq("LoggedStores", got.LoggedStores, want.LoggedStores)
	eq("RepartitionSinks", got.RepartitionSinks, want.RepartitionSinks)
	eq("SinkTopics", got.SinkTopics, want.SinkTopics)
}

// twoStreams builds two unconnected streams a → pa → outa and b → pb → outb; with
// shared, one store is attached to both processors.
func twoStreams(t *testing.T, shared bool) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder()
	topology.AddSource(b, "a", serde.String(), serde.String(), "topic-a")
	topology.AddSource(b, "b", serde.String(), serde.String(), "topic-b")
	topology.AddProcessor(b, "pa", identity(), "a")
	topology.AddProcessor(b, "pb", identity(), "b")
	topology.AddSink(b, "outa", "out-a", serde.String(), serde.String(), "pa")
	topology.AddSink(b, "outb", "out-b", serde.String(), serde.String(), "pb")
	if shared {
		topology.AddKeyValueStore(b, "shared", serde.String(), serde.String(), "pa", "pb")
	} else {
		topology.AddKeyValueStore(b, "only-b", serde.String(), serde.String(), "pb")
	}
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestUnconnectedStreamsAreSeparateSubtopologies(t *testing.T) {
	subs := twoStreams(t, false).Subtopologies()
	if len(subs) != 2 {
		t.Fatalf("got %d sub-topologies, want 2", len(subs))
	}
	checkSub(t, subs[0], topology.Subtopology{ID: 0, Nodes: []string{"a", "pa", "outa"}, SourceTopics: []string{"topic-a"}, SinkTopics: []string{"out-a"}})
	checkSub(t, subs[1], topology.Subtopology{ID: 1, Nodes: []string{"b", "pb", "outb"}, SourceTopics: []string{"topic-b"},
		Stores: []string{"only-b"}, LoggedStores: []string{"only-b"}, SinkTopics: []string{"out-b"}})
}

// A store shared by two processors must live in one task, so it joins their
// sub-topologies.
func TestSharedStoreMergesSubtopologies(t *testing.T) {
	subs := twoStreams(t, true).Subtopologies()
	if len(subs) != 1 {
		t.Fatalf("got %d sub-topologies, want 1", len(subs))
	}
	checkSub(t, subs[0], topology.Subtopology{ID: 0, Nodes: []string{"a", "b", "pa", "pb", "outa", "outb"},
		SourceTopics: []string{"topic-a", "topic-b"}, Stores: []string{"shared"}, LoggedStores: []string{"shared"},
		SinkTopics: []string{"out-a", "out-b"}})
}

func TestInternalTopicsSkipStoresWithoutChangelog(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "a", "b")
	topology.AddRepartition(b, "r1", serde.String(), serde.String(), "in")
	topology.AddRepartition(b, "r2", serde.String(), serde.String(), "in")
	topology.AddProcessor(b, "p", identity(), "r1", "r2")
	topology.AddKeyValueStore(b, "logged", serde.String(), serde.String(), "p")
	topology.AddKeyValueStore(b, "local", serde.String(), serde.String(), "p").WithoutChangelog()
	topology.AddKeyValueStore(b, "mem", serde.String(), serde.String(), "p").InMemory()
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	subs := topo.Subtopologies()
	if len(subs) != 2 {
		t.Fatalf("got %d sub-topologies, want 2", len(subs))
	}
	checkSub(t, subs[0], topology.Subtopology{ID: 0, Nodes: []string{"in", "r1-sink", "r2-sink"},
		SourceTopics: []string{"a", "b"}, RepartitionSinks: []string{"r1", "r2"}})
	checkSub(t, subs[1], topology.Subtopology{ID: 1, Nodes: []string{"r1", "r2", "p"}, Repartitions: []string{"r1", "r2"},
		Stores: []string{"logged", "local", "mem"}, LoggedStores: []string{"logged", "mem"}})
	cl, rp := subs[1].InternalTopics("app")
	if !slices.Equal(cl, []string{"app-logged-changelog", "app-mem-changelog"}) {
		t.Errorf("changelogs = %v; a store WithoutChangelog has none", cl)
	}
	if !slices.Equal(rp, []string{"app-r1-repartition", "app-r2-repartition"}) {
		t.Errorf("repartitions = %v", rp)
	}
}

// Sub-topology IDs follow the order of each part's first node, whatever the order of
// the edges.
func TestSubtopologyNumberingFollowsInsertionOrder(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, "first", serde.String(), serde.String(), "t1")
	topology.AddSource(b, "second", serde.String(), serde.String(), "t2")
	topology.AddSink(b, "second-out", "o2", serde.String(), serde.String(), "second")
	topology.AddSink(b, "first-out", "o1", serde.String(), serde.String(), "first")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	subs := topo.Subtopologies()
	if len(subs) != 2 || subs[0].Nodes[0] != "first" || subs[1].Nodes[0] != "second" {
		t.Fatalf("sub-topologies %+v: want \"first\" in 0 and \"second\" in 1", subs)
	}
}
