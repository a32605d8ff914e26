package wordcount_test

import (
	"testing"

	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topologytest"
)

func TestSmoke(t *testing.T) {
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	d, err := topologytest.New(topo, topologytest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, wordcount.InputTopic, serde.String(), serde.String())
	out := topologytest.NewOutputTopic(d, wordcount.OutputTopic, serde.String(), serde.Int64())
	if err := in.PipeValues("Hello, hello World!", "", "world ÄÖ äö"); err != nil {
		t.Fatal(err)
	}
	got, err := out.ReadKeyValueMap()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"hello": 2, "world": 2, "äö": 2}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	t.Log(topo.Describe())
}
