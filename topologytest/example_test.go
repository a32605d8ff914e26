package topologytest_test

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/topologytest"
)

// Pipe records into an input topic, read what the sink wrote, and look into a store.
func Example() {
	b := topology.NewBuilder()
	topology.AddSource(b, "amounts", serde.String(), serde.Int64(), "amounts")
	topology.AddProcessor(b, "sum", func() processor.Processor[string, int64, string, int64] { return &summer{} }, "amounts")
	topology.AddKeyValueStore(b, "totals", serde.String(), serde.Int64(), "sum")
	topology.AddSink(b, "out", "totals", serde.String(), serde.Int64(), "sum")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}

	d, err := topologytest.New(topo, topologytest.Config{AutoAdvance: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, "amounts", serde.String(), serde.Int64())
	out := topologytest.NewOutputTopic(d, "totals", serde.String(), serde.Int64())

	_ = in.Pipe("alice", 10)
	_ = in.Pipe("bob", 5)
	_ = in.Pipe("alice", 7)
	recs, _ := out.ReadRecords()
	for _, r := range recs {
		fmt.Println(r.Timestamp.Format(time.TimeOnly), r.Key, r.Value)
	}

	totals, _ := topologytest.KeyValueStore[string, int64](d, "totals")
	n, _, _ := totals.Get("alice")
	fmt.Println("alice's total in the store:", n)
	// Output:
	// 00:00:00 alice 10
	// 00:00:01 bob 5
	// 00:00:02 alice 17
	// alice's total in the store: 17
}

// A processor error comes back from the pipe, naming task, node and record.
func ExampleProcessError() {
	b := topology.NewBuilder()
	topology.AddSource(b, "amounts", serde.String(), serde.Int64(), "amounts")
	topology.AddProcessor(b, "sum", func() processor.Processor[string, int64, string, int64] { return &summer{} }, "amounts")
	topology.AddKeyValueStore(b, "totals", serde.String(), serde.Int64(), "sum")
	topo, _ := b.Build()
	d, _ := topologytest.New(topo, topologytest.Config{})
	defer d.Close()

	err := topologytest.NewInputTopic(d, "amounts", serde.String(), serde.Int64()).Pipe("alice", -1)
	fmt.Println(err)
	// Output:
	// task 0_0, node "sum" at amounts/0 offset 0: negative amount -1
}
