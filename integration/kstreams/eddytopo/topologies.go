package eddytopo

import (
	"fmt"
	"strings"

	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
)

// The topologies as Kafka Streams runs them with its default configuration: record
// caching on (see stream.NoCaching). Build makes them with other builder options.

// WordCount is T1; see wordCount.
func WordCount() (*topology.Topology, error) { return wordCount() }

// RekeyAgg is T2; see rekeyAgg.
func RekeyAgg() (*topology.Topology, error) { return rekeyAgg() }

// StreamTable is T3; see streamTable.
func StreamTable() (*topology.Topology, error) { return streamTable() }

// TableTable is T4; see tableTable.
func TableTable() (*topology.Topology, error) { return tableTable() }

// FKJoin is T5; see fkJoin.
func FKJoin() (*topology.Topology, error) { return fkJoin() }

// TableGroupBy is T6; see tableGroupBy.
func TableGroupBy() (*topology.Topology, error) { return tableGroupBy() }

// SplitMerge is T7; see splitMerge.
func SplitMerge() (*topology.Topology, error) { return splitMerge() }

// TimeWindows is W1; see timeWindows.
func TimeWindows() (*topology.Topology, error) { return timeWindows() }

// SlidingWindows is W2; see slidingWindows.
func SlidingWindows() (*topology.Topology, error) { return slidingWindows() }

// SessionWindows is W3; see sessionWindows.
func SessionWindows() (*topology.Topology, error) { return sessionWindows() }

// SessionsRetained is W4; see sessionsRetained.
func SessionsRetained() (*topology.Topology, error) { return sessionsRetained() }

// Build makes topology name ("T1" … "T10", "W1" … "W8") with the given builder options: with
// stream.NoCaching() it is the topology as Kafka Streams runs it with
// statestore.cache.max.bytes=0.
func Build(name string, opts ...stream.BuilderOption) (*topology.Topology, error) {
	if strings.HasPrefix(name, "J") {
		return joins(name, opts...) // J1 … J4: see joins
	}
	builds := map[string]func(...stream.BuilderOption) (*topology.Topology, error){
		"T1": wordCount, "T2": rekeyAgg, "T3": streamTable, "T4": tableTable,
		"T5": fkJoin, "T6": tableGroupBy, "T7": splitMerge, "T8": timestamps, "T9": globalJoin, "T10": rekeyJoin,
		"W1": timeWindows, "W2": slidingWindows, "W3": sessionWindows, "W4": sessionsRetained,
		"W5": finalResults, "W6": finalSessions, "W7": emitOnClose, "W8": timeLimited,
	}
	build, ok := builds[name]
	if !ok {
		return nil, fmt.Errorf("eddytopo: no topology %q: the names are T1 to T10 and W1 to W8", name)
	}
	return build(opts...)
}
