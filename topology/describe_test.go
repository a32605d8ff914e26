package topology_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./topology -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test ./topology -update rewrites it)\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// mixed has what wordcount lacks: a source of two topics, a processor with two parents
// and one with no children, in-memory and changelog-less stores, a store shared by two
// processors, and a sink with a partitioner.
func mixed(t *testing.T) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder()
	topology.AddSource(b, "clicks", serde.String(), serde.Int64(), "clicks-eu", "clicks-us")
	topology.AddSource(b, "views", serde.String(), serde.Int64(), "views")
	topology.AddProcessor(b, "merge", processor.Filter(func(processor.Record[string, int64]) bool { return true }), "clicks", "views")
	topology.AddProcessor(b, "audit", processor.ForEach(func(processor.Record[string, int64]) error { return nil }), "merge")
	topology.AddProcessor(b, "score", processor.MapValues[string](func(v int64) (float64, error) { return float64(v) / 2, nil }), "merge")
	topology.AddKeyValueStore(b, "seen", serde.String(), serde.Int64(), "merge", "audit").InMemory()
	topology.AddKeyValueStore(b, "scratch", serde.Bytes(), serde.Nullable(serde.String()), "score").WithoutChangelog()
	topology.AddSink(b, "scores", "scores", serde.String(), serde.Float64(), "score").
		WithPartitioner(func(string, string, float64, int32) int32 { return 0 })
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestDescribeGolden(t *testing.T) {
	wc, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	mx := mixed(t)
	for name, topo := range map[string]*topology.Topology{"wordcount": wc, "mixed": mx} {
		t.Run(name, func(t *testing.T) {
			golden(t, name+".describe.golden", topo.Describe())
			golden(t, name+".dot.golden", topo.DescribeDOT())
			golden(t, name+".mermaid.golden", topo.DescribeMermaid())
		})
	}
}

// The golden files pin the format; these checks say what must hold of it whatever the
// format, so that an -update cannot bless a broken description.
func TestDescribeWordcountContent(t *testing.T) {
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	d := topo.Describe()
	for _, want := range []string{
		"Topologies:\n   Sub-topology: 0\n",
		"\n   Sub-topology: 1\n",
		"    Source: lines (topics: [streams-plaintext-input])\n      --> split\n",
		"    Processor: split (stores: [])\n      --> words-sink\n      <-- lines\n",
		"    Sink: words-sink (topic: words-repartition)\n      <-- split\n",
		"    Source: words (topics: [words-repartition])\n      --> count\n",
		"    Processor: count (stores: [counts])\n      --> output\n      <-- words\n",
		"    Sink: output (topic: streams-wordcount-output)\n      <-- count\n",
		"takes (string, string), forwards (string, int64)",
		"takes (string, int64), serdes (String, Int64)",
		"Store: counts",
		"changelog: counts-changelog",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe lacks %q:\n%s", want, d)
		}
	}
	if strings.Index(d, "Sub-topology: 1") > strings.Index(d, "Source: words") {
		t.Errorf("the repartition source belongs to sub-topology 1:\n%s", d)
	}

	dot := topo.DescribeDOT()
	for _, want := range []string{
		"digraph topology {", "subgraph cluster_0", "subgraph cluster_1",
		`"topic:streams-plaintext-input" -> "node:lines"`,
		`"node:words-sink" -> "topic:words-repartition"`,
		`"topic:words-repartition" -> "node:words"`,
		`"node:count" -> "store:counts"`,
		`"node:output" -> "topic:streams-wordcount-output"`,
	} {
		if !strings.Contains(dot, want) {
			t.Errorf("DOT lacks %q:\n%s", want, dot)
		}
	}
	if strings.Count(dot, "{") != strings.Count(dot, "}") {
		t.Errorf("DOT braces do not balance:\n%s", dot)
	}

	mm := topo.DescribeMermaid()
	if !strings.HasPrefix(mm, "flowchart LR\n") || strings.Count(mm, "subgraph") != 2 || strings.Count(mm, "\n  end\n") != 2 {
		t.Errorf("Mermaid should be a flowchart with two subgraphs:\n%s", mm)
	}
	// Each topic appears once as a node, however many nodes use it.
	if strings.Count(mm, `"topic: words-repartition"`) != 1 {
		t.Errorf("the repartition topic should be one Mermaid node:\n%s", mm)
	}
}

// A name with quotes must not break the DOT or Mermaid syntax.
func TestDescribeEscapesNames(t *testing.T) {
	b := topology.NewBuilder()
	topology.AddSource(b, `say "hi"`, serde.String(), serde.String(), "in")
	topology.AddSink(b, "out", "out", serde.String(), serde.String(), `say "hi"`)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if dot := topo.DescribeDOT(); !strings.Contains(dot, `label="Source: say \"hi\""`) {
		t.Errorf("DOT label not escaped:\n%s", dot)
	}
	if mm := topo.DescribeMermaid(); !strings.Contains(mm, `["Source: say #quot;hi#quot;"]`) {
		t.Errorf("Mermaid label not escaped:\n%s", mm)
	}
}
