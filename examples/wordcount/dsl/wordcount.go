// Package dsl is the topology of Kafka Streams' WordCountDemo written with eddy's stream
// DSL: lines of text → words → grouped by word (through the repartition topic "words")
// → a count per word in the store "counts" → the counts topic. Package wordcount is the
// same topology written with the processor API; both use the demo's topics and formats,
// and write the same output.
package dsl

import (
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// Topic and store names: the processor-API version's.
const (
	InputTopic  = wordcount.InputTopic
	OutputTopic = wordcount.OutputTopic
	StoreName   = wordcount.StoreName
)

// Words is wordcount.Words: lower-cased runs of letters and digits.
func Words(line string) []string { return wordcount.Words(line) }

// Topology builds the word-count topology on the demo's topics.
func Topology() (*topology.Topology, error) {
	return TopologyFor(InputTopic, OutputTopic)
}

// TopologyFor builds the word-count topology reading lines from input and writing
// counts to output; opts set what holds for the whole topology (stream.NoCaching: one
// output record per word, as the processor-API version writes).
func TopologyFor(input, output string, opts ...stream.BuilderOption) (*topology.Topology, error) {
	b := stream.NewBuilder(opts...)
	lines := stream.From(b, serde.String(), serde.String(), []string{input})
	words := stream.FlatMapValues(lines, func(_, line string) []string { return Words(line) })
	counts := stream.GroupBy(words, func(_, word string) string { return word },
		serde.String(), serde.String(), stream.Named("words")).
		Count(stream.Materialized(StoreName))
	stream.ToStream(counts).To(output, serde.String(), serde.Nullable(serde.Int64()))
	return b.Build()
}
