package processor_test

import (
	"fmt"
	"strings"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
)

// A stateless step needs no struct: Map builds the processor from a function.
func ExampleMap() {
	shout := processor.Map(func(r processor.Record[string, string]) (processor.Record[string, int64], error) {
		return processor.WithKeyValue(r, strings.ToUpper(r.Value), int64(len(r.Value))), nil
	})

	b := topology.NewBuilder()
	topology.AddSource(b, "in", serde.String(), serde.String(), "words")
	topology.AddProcessor(b, "shout", shout, "in")
	topology.AddSink(b, "out", "lengths", serde.String(), serde.Int64(), "shout")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}

	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, "words", serde.String(), serde.String())
	out := topologytest.NewOutputTopic(d, "lengths", serde.String(), serde.Int64())
	_ = in.PipeValues("kafka", "eddy")
	recs, _ := out.ReadRecords()
	for _, r := range recs {
		fmt.Println(r.Key, r.Value)
	}
	// Output:
	// KAFKA 5
	// EDDY 4
}
