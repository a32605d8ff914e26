package kstreams_test

import (
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/integration/kstreams"
)

// T1's word rule, as Kafka Streams' Java runs it: only [a-zA-Z0-9_] make words.
func ExampleWords() {
	fmt.Printf("%q\n", kstreams.Words("Don't stop: state_store, Straße, KİK!"))
	// Output: ["don" "t" "stop" "state_store" "stra" "e" "ki" "k"]
}

// Diff names the topic, the first differing record and its neighbours.
func ExampleDiff() {
	ts := time.UnixMilli(1000)
	want := map[string][]kstreams.Record{"out": {
		{Topic: "out", Key: []byte("k"), Value: []byte("a"), Timestamp: ts},
		{Topic: "out", Key: []byte("k"), Value: nil, Timestamp: ts},
	}}
	got := map[string][]kstreams.Record{"out": {
		{Topic: "out", Key: []byte("k"), Value: []byte("a"), Timestamp: ts},
		{Topic: "out", Key: []byte("k"), Value: []byte{}, Timestamp: ts},
	}}
	fmt.Print(kstreams.Diff(want, got))
	// Output:
	// topic out: Kafka Streams wrote 2 records, eddy 2; first difference at record 1:
	//      #0 kafka streams: key="k" value="a" ts=1000
	//      #0 eddy:          key="k" value="a" ts=1000
	//   -> #1 kafka streams: key="k" value=null ts=1000
	//   -> #1 eddy:          key="k" value="" ts=1000
}
