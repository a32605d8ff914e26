// Package wordcount is the topology of Kafka Streams' WordCountDemo, written with eddy's
// stream DSL: lines of text → words → grouped by word (through the repartition topic
// "words") → a count per word in the store "counts" → the counts topic. Topics and
// formats are the demo's own, so the two can run side by side on one cluster. Package
// processorapi is the same topology written with the processor API.
package wordcount

import (
	"strings"
	"unicode"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// Topic and store names.
const (
	InputTopic  = "streams-plaintext-input"  // String keys (usually none), String lines
	OutputTopic = "streams-wordcount-output" // String words, Int64 counts
	StoreName   = "counts"
)

// Words splits a line into lower-cased words: runs of letters and digits (any script);
// everything else separates them.
func Words(line string) []string {
	return strings.FieldsFunc(strings.ToLower(line), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// Topology builds the word-count topology on the demo's topics.
func Topology() (*topology.Topology, error) {
	return TopologyFor(InputTopic, OutputTopic)
}

// TopologyFor builds the word-count topology reading lines from input and writing
// counts to output.
func TopologyFor(input, output string) (*topology.Topology, error) {
	b := stream.NewBuilder()
	lines := stream.From(b, serde.String(), serde.String(), []string{input})
	words := stream.FlatMapValues(lines, func(_, line string) []string { return Words(line) })
	counts := stream.GroupBy(words, func(_, word string) string { return word },
		serde.String(), serde.String(), stream.Named("words")).
		Count(stream.Materialized(StoreName))
	stream.ToStream(counts).To(output, serde.String(), serde.Nullable(serde.Int64()))
	return b.Build()
}
