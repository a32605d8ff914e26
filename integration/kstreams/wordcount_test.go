package kstreams

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/examples/wordcount/dsl"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/topology"
)

// wordcountTopology is T1 in eddy's processor API, written to Kafka Streams' rules:
// Java's word split (Words), and a count's timestamp is the largest timestamp of the
// records counted so far (Kafka Streams' KStreamAggregate keeps it beside the count).
func wordcountTopology(t *testing.T) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder()
	topology.AddSource(b, "lines", serde.String(), serde.Nullable(serde.String()), "wc-in")
	topology.AddProcessor(b, "split", processor.FlatMap(func(r processor.Record[string, *string]) ([]processor.Record[string, string], error) {
		if r.Value == nil {
			return nil, nil // a tombstone has no words
		}
		var out []processor.Record[string, string]
		for _, w := range Words(*r.Value) {
			out = append(out, processor.WithKeyValue(r, w, w))
		}
		return out, nil
	}), "lines")
	topology.AddRepartition(b, "words", serde.String(), serde.String(), "split")
	topology.AddProcessor(b, "count", func() processor.Processor[string, string, string, int64] { return &maxTSCounter{} }, "words")
	topology.AddKeyValueStore(b, "counts", serde.String(), serde.Int64(), "count")
	topology.AddKeyValueStore(b, "count-times", serde.String(), serde.Int64(), "count")
	topology.AddSink(b, "out", "wc-out", serde.String(), serde.Int64(), "count")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

type maxTSCounter struct {
	ctx           processor.Context[string, int64]
	counts, times statestore.KeyValueStore[string, int64]
}

func (c *maxTSCounter) Init(ctx processor.Context[string, int64]) (err error) {
	c.ctx = ctx
	if c.counts, err = processor.KeyValueStore[string, int64](ctx, "counts"); err != nil {
		return err
	}
	c.times, err = processor.KeyValueStore[string, int64](ctx, "count-times")
	return err
}

func (c *maxTSCounter) Process(r processor.Record[string, string]) error {
	n, _, err := c.counts.Get(r.Key)
	if err != nil {
		return err
	}
	ts, found, err := c.times.Get(r.Key)
	if err != nil {
		return err
	}
	if !found || r.Timestamp.UnixMilli() > ts {
		ts = r.Timestamp.UnixMilli()
	}
	if err := c.counts.Put(r.Key, n+1); err != nil {
		return err
	}
	if err := c.times.Put(r.Key, ts); err != nil {
		return err
	}
	return c.ctx.Forward(processor.Record[string, int64]{Key: r.Key, Value: n + 1, Timestamp: time.UnixMilli(ts)})
}

func (c *maxTSCounter) Close() error { return nil }

// differential fails the test with Compare's report if eddy's topo and Kafka Streams'
// topology name give different output on input.
func differential(t *testing.T, name string, topo *topology.Topology, input []Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	report, err := startOracle(t).Compare(ctx, Case{Topology: name, Input: input}, topo)
	if err != nil {
		t.Fatal(err)
	}
	if report != "" {
		t.Error(report)
	}
}

// eddy's processor API, running T1 to Kafka Streams' rules, gives Kafka Streams' output
// on generated input: words of many scripts, tombstones, out-of-order timestamps.
func TestWordcountProcessorAPIEqualsKafkaStreams(t *testing.T) {
	topo := wordcountTopology(t)
	for seed := uint64(1); seed <= 5; seed++ {
		input, err := Inputs("T1", seed, 300)
		if err != nil {
			t.Fatal(err)
		}
		differential(t, "T1", topo, input)
	}
}

// The examples' word counts (examples/wordcount: dsl and the processor-API wordcount)
// give Kafka Streams' WordCountDemo output where their rules agree: ASCII words without
// '_' and timestamps that never go back. (Elsewhere they differ on purpose: the
// examples' words are runs of Unicode letters and digits; the processor-API example's
// counts carry the timestamp of the record counted, Kafka Streams' the largest so far.)
func TestExampleWordcountsEqualKafkaStreamsOnASCII(t *testing.T) {
	for name, build := range map[string]func(string, string) (*topology.Topology, error){
		"dsl":          func(in, out string) (*topology.Topology, error) { return dsl.TopologyFor(in, out) },
		"processorapi": func(in, out string) (*topology.Topology, error) { return wordcount.TopologyFor(in, out) },
	} {
		t.Run(name, func(t *testing.T) {
			topo, err := build("wc-in", "wc-out")
			if err != nil {
				t.Fatal(err)
			}
			asciiWordcount(t, topo)
		})
	}
}

func asciiWordcount(t *testing.T, topo *topology.Topology) {
	words := []string{"the", "The", "KAFKA", "kafka", "streams", "x86", "2026", "v2", "don't", "e-mail", "a", "I"}
	seps := []string{" ", "  ", "\t", ", ", ". ", "! ", " - ", "(", ")", "\r\n", "/", "'"}
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		var input []Record
		ts := Base
		for range 200 {
			var sb strings.Builder
			for i := range rng.IntN(8) {
				if i > 0 {
					sb.WriteString(seps[rng.IntN(len(seps))])
				}
				sb.WriteString(words[rng.IntN(len(words))])
			}
			ts = ts.Add(time.Duration(rng.IntN(3)) * time.Second)
			input = append(input, Record{Topic: "wc-in", Key: []byte("k"), Value: []byte(sb.String()), Timestamp: ts})
		}
		differential(t, "T1", topo, input)
	}
}
