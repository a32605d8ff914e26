package wordcount_test

import (
	"fmt"

	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topologytest"
)

// Count words with the test driver: each word's output record carries its new count.
func ExampleTopology() {
	topo, err := wordcount.Topology()
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
	in := topologytest.NewInputTopic(d, wordcount.InputTopic, serde.String(), serde.String())
	out := topologytest.NewOutputTopic(d, wordcount.OutputTopic, serde.String(), serde.Int64())

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

func ExampleWords() {
	fmt.Printf("%q\n", wordcount.Words("Don't panic: ÉCOLE-2026, 東京!"))
	// Output: ["don" "t" "panic" "école" "2026" "東京"]
}
