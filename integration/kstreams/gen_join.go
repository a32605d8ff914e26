package kstreams

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// JoinTopologies are the stream–stream join topologies: J1 inner, J2 left, J3 outer
// join of "jl-in" and "jr-in" within 5 s and 2 s of grace; J4 an outer join with
// asymmetric windows (2 s before, 6 s after, 1 s of grace). The left and outer joins'
// outputs include their shared store's changelog, compared compacted. Compare them with
// JoinConfig.
var JoinTopologies = []string{"J1", "J2", "J3", "J4"}

// JoinConfig is the Kafka Streams configuration the join topologies run with: the
// spurious-result fix's emit interval at 0. Kafka Streams looks for closed windows of a
// left or outer join at most once per that interval of wall-clock time (default 1 s, a
// throttle its code calls "a non-functional performance optimization"), so what its
// driver emits, and when, would depend on the wall clock (with 100 s, a case emitted no
// unmatched record at all). eddy does not throttle: it emits closed windows as soon as
// the check finds them, which is Kafka Streams with the interval at 0.
var JoinConfig = map[string]string{"__emit.interval.ms.kstreams.outer.join.spurious.results.fix__": "0"}

// joinShared is the changelog of the join's shared store (KSTREAM-OUTERSHARED-…).
func joinShared(topology string) string {
	return ChangelogTopic(topology, "KSTREAM-OUTERSHARED-0000000004-store")
}

func init() {
	Outputs["J1"] = []string{"j-inner"}
	Outputs["J2"] = []string{"j-left", joinShared("J2")}
	Outputs["J3"] = []string{"j-outer", joinShared("J3")}
	Outputs["J4"] = []string{"j-asym", joinShared("J4")}
}

// JoinInputs makes n seeded random input records for a join topology (JoinTopologies):
// both topics, three keys, values "l<n>"/"r<n>" (one in ten null), and event time that
// mostly moves forward by 0-2 s a record, with records now and then behind it by up to
// 12 s (out of order: some within the windows and grace, some after), a few 40 s
// behind (late for every window), now and then a jump of 30 s (windows close), and
// bursts of one key at one time on one side (duplicates). Times are multiples of 250 ms,
// so records often fall exactly on a window's bounds and on the stream time at which
// a window closes.
func JoinInputs(topology string, seed uint64, n int) ([]Record, error) {
	if !strings.HasPrefix(topology, "J") || Outputs[topology] == nil {
		return nil, fmt.Errorf("kstreams: %q is not a join topology (%s)", topology, strings.Join(JoinTopologies, ", "))
	}
	g := gen{rng: rand.New(rand.NewPCG(seed, 0x6a6f696e73))}
	out := make([]Record, 0, n)
	cursor := Base.Add(time.Duration(g.rng.IntN(30)) * time.Second)
	for len(out) < n {
		switch r := g.rng.IntN(40); {
		case r == 0:
			cursor = cursor.Add(30 * time.Second)
		case r < 25:
			cursor = cursor.Add(time.Duration(g.rng.IntN(9)) * 250 * time.Millisecond)
		}
		ts := cursor
		switch r := g.rng.IntN(10); {
		case r < 2:
			ts = cursor.Add(-time.Duration(g.rng.IntN(48)) * 250 * time.Millisecond)
		case r == 2 && g.rng.IntN(3) == 0:
			ts = cursor.Add(-40 * time.Second)
		}
		topic, side := "jl-in", "l"
		if g.rng.IntN(2) == 0 {
			topic, side = "jr-in", "r"
		}
		key := g.pick("k1", "k2", "k3")
		burst := 1
		if g.rng.IntN(12) == 0 {
			burst = 2 + g.rng.IntN(3)
		}
		for range burst {
			var v *string
			if g.rng.IntN(10) != 0 {
				v = ptr(side + strconv.Itoa(len(out)))
			}
			rec := g.rec(topic, key, v)
			rec.Timestamp = ts
			out = append(out, rec)
		}
	}
	return out[:n], nil
}
