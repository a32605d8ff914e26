package eddytopo_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/integration/kstreams"
	"github.com/eddy-streams/eddy/integration/kstreams/eddytopo"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// kstreamsSeedCount is how many seeded inputs each topology gets: 5, or $EDDY_KSTREAMS_SEEDS for a
// longer search.
func kstreamsSeedCount(t *testing.T) uint64 {
	s := os.Getenv("EDDY_KSTREAMS_SEEDS")
	if s == "" {
		return 5
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("EDDY_KSTREAMS_SEEDS=%q: want a positive number of seeds", s)
	}
	return n
}

// kstreamsNoCache turns Kafka Streams' record caches off.
var kstreamsNoCache = map[string]string{"statestore.cache.max.bytes": "0"}

// The differential suite: each topology of eddy's DSL gives, on seeded random input
// (colliding keys, tombstones, out-of-order timestamps), the records Kafka Streams 4.1.1
// gives in its TopologyTestDriver: per output topic the same records in the same order,
// key and value bytes and timestamps. A difference is reported with the input shrunk to
// a few records that still differ.
//
// Each case runs twice on the Kafka Streams side: with default configs (record caching on,
// committed after every record) and with caching off. They differ where a cached table
// drops an update that changes nothing: a tombstone for a key the table does not hold is
// neither stored nor forwarded (CachingKeyValueStore.putAndMaybeForward, kafka-streams
// 4.1.1 lines 214-216); without caching the join below sees it. eddy's side runs with
// its defaults (caching on) and with stream.NoCaching() respectively.
func TestDifferentialAgainstKafkaStreams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	oracle, err := kstreams.Start(ctx, kstreams.Options{})
	if err != nil {
		t.Fatalf("the Kafka Streams oracle is needed and did not start: %v", err)
	}
	defer oracle.Close()
	t.Logf("oracle built (if needed) and started in %v", time.Since(start).Round(time.Millisecond))

	for _, name := range slices.Concat(kstreams.Topologies, kstreams.WindowTopologies) {
		t.Run(name, func(t *testing.T) {
			// Kafka Streams' default configs run against eddy's defaults; with Kafka
			// Streams' caching off, against eddy's tables with caching off.
			cached, err := eddytopo.Build(name)
			if err != nil {
				t.Fatal(err)
			}
			uncached, err := eddytopo.Build(name, stream.NoCaching())
			if err != nil {
				t.Fatal(err)
			}
			configs := []struct {
				kafka map[string]string
				eddy  *topology.Topology
			}{{nil, cached}, {kstreamsNoCache, uncached}}
			if why, ok := kstreams.UncachedOnly[name]; ok {
				t.Logf("%s: compared with caching off only: %s", name, why)
				configs = configs[1:]
			}
			shrink := []int{0, 0} // per config: the first difference is shrunk, later ones only reported
			for seed := uint64(1); seed <= kstreamsSeedCount(t); seed++ {
				input, err := kstreams.Inputs(name, seed, 300)
				if err != nil {
					t.Fatal(err)
				}
				for i, c := range configs {
					report, err := oracle.Compare(ctx, kstreams.Case{Topology: name, Input: input, Config: c.kafka, ShrinkBudget: shrink[i]}, c.eddy)
					if err != nil {
						t.Fatal(err)
					}
					if report != "" {
						t.Errorf("seed %d: %s", seed, report)
						shrink[i] = -1
					}
				}
			}
		})
	}
}
