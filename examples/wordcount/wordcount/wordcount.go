// Package wordcount is the topology of Kafka Streams' WordCountDemo, written with eddy's
// processor API: lines of text → words → repartition by word → a count per word in the
// store "counts" → the counts topic. Topics and formats are the demo's own, so the two
// can run side by side on one cluster.
//
// The demo counts with the DSL, whose count store is cached by default, so this one's
// store has caching on too (topology's WithCaching): each word's count goes out once per
// commit, the latest, through processor.ForwardThroughCache. NoCaching forwards every
// count at once, as the demo with statestore.cache.max.bytes=0. (Kafka Streams'
// processor-API WordCountProcessorDemo builds its store without caching and forwards
// every count from a punctuator; its processor API has no public forward-on-flush.)
package wordcount

import (
	"strings"
	"unicode"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
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

// Option changes the topology.
type Option func(*options)

type options struct{ noCaching bool }

// NoCaching turns the count store's caching off: every count is forwarded at once.
func NoCaching() Option { return func(o *options) { o.noCaching = true } }

// TopologyFor builds the word-count topology reading lines from input and writing
// counts to output.
func TopologyFor(input, output string, opts ...Option) (*topology.Topology, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	b := topology.NewBuilder()
	topology.AddSource(b, "lines", serde.String(), serde.String(), input)
	topology.AddProcessor(b, "split", processor.FlatMap(splitLine), "lines")
	topology.AddRepartition(b, "words", serde.String(), serde.String(), "split")
	topology.AddProcessor(b, "count", func() processor.Processor[string, string, string, int64] { return &counter{} }, "words")
	counts := topology.AddKeyValueStore(b, StoreName, serde.String(), serde.Int64(), "count")
	if !o.noCaching {
		counts.WithCaching()
	}
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

// counter adds one to the word's count and forwards the new count through the store's
// record cache.
type counter struct {
	out    processor.Forwarder[string, int64]
	counts statestore.KeyValueStore[string, int64]
}

func (c *counter) Init(ctx processor.Context[string, int64]) error {
	var err error
	if c.counts, err = processor.KeyValueStore[string, int64](ctx, StoreName); err != nil {
		return err
	}
	c.out, err = processor.ForwardThroughCache(ctx, StoreName)
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
	return c.out.Forward(processor.WithValue(rec, n))
}

func (c *counter) Close() error { return nil }
