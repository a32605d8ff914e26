package eddytopo_test

import (
	"context"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/integration/kstreams"
	"github.com/eddy-streams/eddy/integration/kstreams/eddytopo"
	"github.com/eddy-streams/eddy/stream"
)

// monotoneAfter keeps input[:at] and, of the records after it, those not older than
// every record before them: no record after the restart is out of order.
func monotoneAfter(input []kstreams.Record, at int) []kstreams.Record {
	out := append([]kstreams.Record(nil), input[:at]...)
	var latest time.Time
	for _, r := range input[:at] {
		if r.Timestamp.After(latest) {
			latest = r.Timestamp
		}
	}
	for _, r := range input[at:] {
		if !r.Timestamp.Before(latest) {
			out = append(out, r)
			latest = r.Timestamp
		}
	}
	return out
}

// A restart in the middle of the windows (eddy's stores restored from their changelogs,
// Kafka Streams running through) gives Kafka Streams' output: the windows and sessions
// open at the restart continue from the restored state, the changelogs compact to the
// same state, and the store's own expiry (its observed stream time, found in the
// restored data) drops what Kafka Streams' drops.
//
// Before the restart the input has out-of-order and late records; after it, records
// come in timestamp order. That is the property's scope: a windowed processor's observed
// stream time (which makes records late) lives outside its stores and starts afresh
// after a restart, in Kafka Streams as in eddy, so a record late before a restart may be
// accepted after one. Kafka Streams' driver cannot restart, so that case has no oracle.
func TestWindowsRestartMidWindow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	oracle, err := kstreams.Start(ctx, kstreams.Options{})
	if err != nil {
		t.Fatalf("the Kafka Streams oracle is needed and did not start: %v", err)
	}
	defer oracle.Close()
	for _, name := range kstreams.WindowTopologies {
		t.Run(name, func(t *testing.T) {
			topo, err := eddytopo.Build(name, stream.NoCaching())
			if err != nil {
				t.Fatal(err)
			}
			for seed := uint64(1); seed <= kstreamsSeedCount(t); seed++ {
				raw, err := kstreams.Inputs(name, seed, 300)
				if err != nil {
					t.Fatal(err)
				}
				input := monotoneAfter(raw, 150)
				report, err := oracle.Compare(ctx, kstreams.Case{Topology: name, Input: input, Config: kstreamsNoCache, RestartAt: 150}, topo)
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

// Near the epoch: sliding windows put records before the first time difference into
// [0, difference] (Kafka Streams' processEarly), and time windows never start before 0.
// Both configurations, as in TestDifferentialAgainstKafkaStreams.
func TestWindowsNearTheEpoch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	oracle, err := kstreams.Start(ctx, kstreams.Options{})
	if err != nil {
		t.Fatalf("the Kafka Streams oracle is needed and did not start: %v", err)
	}
	defer oracle.Close()
	for _, name := range []string{"W1", "W2"} {
		t.Run(name, func(t *testing.T) {
			cached, err := eddytopo.Build(name)
			if err != nil {
				t.Fatal(err)
			}
			uncached, err := eddytopo.Build(name, stream.NoCaching())
			if err != nil {
				t.Fatal(err)
			}
			for seed := uint64(1); seed <= kstreamsSeedCount(t); seed++ {
				input, err := kstreams.EarlyInputs(name, seed, 120)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range []kstreams.Case{{Topology: name, Input: input}, {Topology: name, Input: input, Config: kstreamsNoCache}} {
					topo := cached
					if c.Config != nil {
						topo = uncached
					}
					report, err := oracle.Compare(ctx, c, topo)
					if err != nil {
						t.Fatal(err)
					}
					if report != "" {
						t.Fatalf("seed %d: %s", seed, report)
					}
				}
			}
		})
	}
}
