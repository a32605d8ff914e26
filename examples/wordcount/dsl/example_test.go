package dsl_test

import (
	"fmt"

	"github.com/eddy-streams/eddy/examples/wordcount/dsl"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topologytest"
)

// Count words with the test driver: each word's output record carries its new count.
func ExampleTopology() {
	topo, err := dsl.Topology()
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
	in := topologytest.NewInputTopic(d, dsl.InputTopic, serde.String(), serde.String())
	out := topologytest.NewOutputTopic(d, dsl.OutputTopic, serde.String(), serde.Int64())

	_ = in.PipeValues("Hello, Straße!", "hello STRASSE straße")
	recs, _ := out.ReadRecords()
	for _, r := range recs {
		fmt.Println(r.Key, r.Value)
	}
	// Output:
	// hello 1
	// straße 1
	// hello 2
	// strasse 1
	// straße 2
}
