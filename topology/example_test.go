package topology_test

import (
	"fmt"
	"strings"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
)

// counter counts records per key in the store "counts" and forwards the new count.
type counter struct {
	ctx    processor.Context[string, int64]
	counts statestore.KeyValueStore[string, int64]
}

func (c *counter) Init(ctx processor.Context[string, int64]) (err error) {
	c.ctx = ctx
	c.counts, err = processor.KeyValueStore[string, int64](ctx, "counts")
	return err
}

func (c *counter) Process(rec processor.Record[string, string]) error {
	n, _, err := c.counts.Get(rec.Key)
	if err != nil {
		return err
	}
	if err := c.counts.Put(rec.Key, n+1); err != nil {
		return err
	}
	return c.ctx.Forward(processor.WithValue(rec, n+1))
}

func (c *counter) Close() error { return nil }

// A word count: split lines into words, re-key by word through a repartition topic, and
// count each word in a store. The repartition splits it into two sub-topologies.
func ExampleBuilder() {
	split := processor.FlatMap(func(r processor.Record[string, string]) ([]processor.Record[string, string], error) {
		var out []processor.Record[string, string]
		for _, w := range strings.Fields(strings.ToLower(r.Value)) {
			out = append(out, processor.WithKeyValue(r, w, w))
		}
		return out, nil
	})

	b := topology.NewBuilder()
	topology.AddSource(b, "lines", serde.String(), serde.String(), "text")
	topology.AddProcessor(b, "split", split, "lines")
	topology.AddRepartition(b, "words", serde.String(), serde.String(), "split")
	topology.AddProcessor(b, "count", func() processor.Processor[string, string, string, int64] { return &counter{} }, "words")
	topology.AddKeyValueStore(b, "counts", serde.String(), serde.Int64(), "count")
	topology.AddSink(b, "out", "word-counts", serde.String(), serde.Int64(), "count")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(topo.Describe())
	// Output:
	// Topologies:
	//    Sub-topology: 0
	//     Source: lines (topics: [text])
	//       --> split
	//       forwards (string, string), serdes (String, String)
	//     Processor: split (stores: [])
	//       --> words-sink
	//       <-- lines
	//       takes (string, string), forwards (string, string)
	//     Sink: words-sink (topic: words-repartition)
	//       <-- split
	//       takes (string, string), serdes (String, String)
	//
	//    Sub-topology: 1
	//     Source: words (topics: [words-repartition])
	//       --> count
	//       forwards (string, string), serdes (String, String)
	//     Processor: count (stores: [counts])
	//       --> out
	//       <-- words
	//       takes (string, string), forwards (string, int64)
	//     Sink: out (topic: word-counts)
	//       <-- count
	//       takes (string, int64), serdes (String, Int64)
	//     Store: counts (processors: [count], changelog: counts-changelog, bbolt)
	//       keys string, values int64, serdes (String, Int64)
}

// Build checks types along every edge before anything runs.
func ExampleBuilder_Build_typeMismatch() {
	b := topology.NewBuilder()
	topology.AddSource(b, "numbers", serde.String(), serde.Int64(), "numbers")
	topology.AddSink(b, "out", "copies", serde.String(), serde.String(), "numbers")
	_, err := b.Build()
	fmt.Println(err)
	// Output:
	// invalid topology: node "out" takes (string, string) but parent "numbers" forwards (string, int64)
}

func ExampleSubtopology_InternalTopics() {
	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "input")
	topology.AddRepartition(b, "by-user", serde.String(), serde.String(), "in")
	topology.AddProcessor(b, "last", processor.Filter(func(processor.Record[string, string]) bool { return true }), "by-user")
	topology.AddKeyValueStore(b, "latest", serde.String(), serde.String(), "last")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range topo.Subtopologies() {
		changelogs, repartitions := s.InternalTopics("my-app")
		fmt.Println(s.ID, s.SourceTopics, changelogs, repartitions)
	}
	// Output:
	// 0 [input] [] []
	// 1 [] [my-app-latest-changelog] [my-app-by-user-repartition]
}
