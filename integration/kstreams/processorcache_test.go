package kstreams

import (
	"testing"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
)

// p1Topology is P1 in eddy's processor API: the words of each line counted in the store
// "pc-counts" with caching (WithCaching), the counts forwarded through its cache
// (processor.ForwardThroughCache); a line keyed "del" deletes its words.
func p1Topology(t *testing.T, cached bool) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder()
	topology.AddSource(b, "lines", serde.String(), serde.Nullable(serde.String()), "pc-in")
	topology.AddProcessor(b, "count", func() processor.Processor[string, *string, string, *int64] { return &lineCounter{} }, "lines")
	st := topology.AddKeyValueStore(b, "pc-counts", serde.String(), serde.Int64(), "count")
	if cached {
		st.WithCaching()
	}
	topology.AddSink(b, "out", "pc-out", serde.String(), serde.Nullable(serde.Int64()), "count")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

type lineCounter struct {
	counts statestore.KeyValueStore[string, int64]
	out    processor.Forwarder[string, *int64]
}

func (c *lineCounter) Init(ctx processor.Context[string, *int64]) (err error) {
	if c.counts, err = processor.KeyValueStore[string, int64](ctx, "pc-counts"); err != nil {
		return err
	}
	c.out, err = processor.ForwardThroughCache(ctx, "pc-counts")
	return err
}

func (c *lineCounter) Process(r processor.Record[string, *string]) error {
	if r.Value == nil {
		return nil
	}
	for _, w := range Words(*r.Value) {
		n, found, err := c.counts.Get(w)
		if err != nil {
			return err
		}
		var v *int64
		switch {
		case r.Key != "del":
			n++
			v = &n
			err = c.counts.Put(w, n)
		case found:
			err = c.counts.Delete(w)
		default:
			continue
		}
		if err != nil {
			return err
		}
		if err := c.out.Forward(processor.Record[string, *int64]{Key: w, Value: v, Timestamp: r.Timestamp}); err != nil {
			return err
		}
	}
	return nil
}

func (c *lineCounter) Close() error { return nil }

// A processor-API store with caching gives Kafka Streams' output and changelog: P1 on
// generated lines (repeated words, deletions), Kafka Streams' store withCachingEnabled()
// forwarding through its flush listener. Both drivers commit after every input record
// (Kafka Streams' TopologyTestDriver cannot do otherwise, and topologytest does the same
// by default), so a flush merges the updates one line makes to one word: a word twice
// in a line is forwarded and logged once, with its count after the line, in the order of
// the words' last updates.
func TestProcessorAPICachingEqualsKafkaStreams(t *testing.T) {
	topo := p1Topology(t, true)
	for seed := uint64(1); seed <= 5; seed++ {
		input, err := Inputs("P1", seed, 300)
		if err != nil {
			t.Fatal(err)
		}
		differential(t, "P1", topo, input)
	}
}
