// Package processorapi is the word count of package wordcount written with eddy's
// processor API instead of the DSL: lines of text → words → repartition by word → a
// count per word in the store "counts" → the counts topic. It shows what the DSL does
// underneath, and the benchmark runs it beside the DSL version.
package processorapi

import (
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
)

// Topic and store names: those of package wordcount.
const (
	InputTopic  = wordcount.InputTopic
	OutputTopic = wordcount.OutputTopic
	StoreName   = wordcount.StoreName
)

// Words is wordcount.Words.
func Words(line string) []string { return wordcount.Words(line) }

// Topology builds the word-count topology on the demo's topics.
func Topology() (*topology.Topology, error) {
	return TopologyFor(InputTopic, OutputTopic)
}

// TopologyFor builds the word-count topology reading lines from input and writing
// counts to output.
func TopologyFor(input, output string) (*topology.Topology, error) {
	b := topology.NewBuilder()
	topology.AddSource(b, "lines", serde.String(), serde.String(), input)
	topology.AddProcessor(b, "split", processor.FlatMap(splitLine), "lines")
	topology.AddRepartition(b, "words", serde.String(), serde.String(), "split")
	topology.AddProcessor(b, "count", func() processor.Processor[string, string, string, int64] { return &counter{} }, "words")
	topology.AddKeyValueStore(b, StoreName, serde.String(), serde.Int64(), "count")
	topology.AddSink(b, "output", output, serde.String(), serde.Int64(), "count")
	return b.Build()
}

func splitLine(rec processor.Record[string, string]) ([]processor.Record[string, string], error) {
	words := Words(rec.Value)
	out := make([]processor.Record[string, string], len(words))
	for i, w := range words {
		out[i] = processor.WithKeyValue(rec, w, w)
	}
	return out, nil
}

// counter adds one to the word's count and forwards the new count.
type counter struct {
	ctx    processor.Context[string, int64]
	counts statestore.KeyValueStore[string, int64]
}

func (c *counter) Init(ctx processor.Context[string, int64]) error {
	c.ctx = ctx
	var err error
	c.counts, err = processor.KeyValueStore[string, int64](ctx, StoreName)
	return err
}

func (c *counter) Process(rec processor.Record[string, string]) error {
	n, _, err := c.counts.Get(rec.Key)
	if err != nil {
		return err
	}
	n++
	if err := c.counts.Put(rec.Key, n); err != nil {
		return err
	}
	return c.ctx.Forward(processor.WithValue(rec, n))
}

func (c *counter) Close() error { return nil }
