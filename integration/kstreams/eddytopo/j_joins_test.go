package eddytopo_test

import (
	"context"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/integration/kstreams"
	"github.com/eddy-streams/eddy/integration/kstreams/eddytopo"
)

// The stream–stream joins J1–J4 give Kafka Streams' output on seeded random input
// (out-of-order and late records on both sides, bursts of one key at one time, null
// values): the same joined and unmatched records in the same order with the same
// timestamps, and the same shared store once its changelog is compacted. Kafka Streams
// runs with kstreams.JoinConfig (see there). Joins keep no record cache, so one
// configuration covers them.
func TestJoinsDifferential(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	oracle, err := kstreams.Start(ctx, kstreams.Options{})
	if err != nil {
		t.Fatalf("the Kafka Streams oracle is needed and did not start: %v", err)
	}
	defer oracle.Close()
	for _, name := range kstreams.JoinTopologies {
		t.Run(name, func(t *testing.T) {
			topo, err := eddytopo.Build(name)
			if err != nil {
				t.Fatal(err)
			}
			shrink := 0 // the first difference is shrunk, later ones only reported
			for seed := uint64(1); seed <= kstreamsSeedCount(t); seed++ {
				input, err := kstreams.JoinInputs(name, seed, 300)
				if err != nil {
					t.Fatal(err)
				}
				report, err := oracle.Compare(ctx, kstreams.Case{Topology: name, Input: input, Config: kstreams.JoinConfig, ShrinkBudget: shrink}, topo)
				if err != nil {
					t.Fatal(err)
				}
				if report != "" {
					t.Errorf("seed %d: %s", seed, report)
					shrink = -1
				}
			}
		})
	}
}

// A restart in the middle (eddy's join stores, shared store and time tracker restored
// from their changelogs; Kafka Streams running through) gives Kafka Streams' output:
// the buffered records still join, and the unmatched ones are emitted when their
// windows close, at the same records as without the restart. After the restart the
// input comes in timestamp order, as in TestWindowsRestartMidWindow: a window store's
// observed stream time is found in its restored data, which lacks the null values that
// advanced Kafka Streams' (they are not stored), so an out-of-order record right after a
// restart could find a record there that Kafka Streams' store had expired.
func TestJoinsRestartMidWindow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	oracle, err := kstreams.Start(ctx, kstreams.Options{})
	if err != nil {
		t.Fatalf("the Kafka Streams oracle is needed and did not start: %v", err)
	}
	defer oracle.Close()
	for _, name := range kstreams.JoinTopologies {
		t.Run(name, func(t *testing.T) {
			topo, err := eddytopo.Build(name)
			if err != nil {
				t.Fatal(err)
			}
			for seed := uint64(1); seed <= kstreamsSeedCount(t); seed++ {
				raw, err := kstreams.JoinInputs(name, seed, 300)
				if err != nil {
					t.Fatal(err)
				}
				input := monotoneAfter(raw, 150)
				report, err := oracle.Compare(ctx, kstreams.Case{Topology: name, Input: input, Config: kstreams.JoinConfig, RestartAt: 150}, topo)
				if err != nil {
					t.Fatal(err)
				}
				if report != "" {
					t.Fatalf("seed %d, restart before record 150: %s", seed, report)
				}
			}
		})
	}
}
