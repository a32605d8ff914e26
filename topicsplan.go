package eddy

import (
	"errors"
	"fmt"
	"sort"

	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/topicspec"
	"github.com/eddy-streams/eddy/topology"
)

// planInternalTopics checks the partition counts of a topology's user topics (counts,
// as the cluster has them) and plans its internal topics, sorted by name: a changelog
// per logged store and the offsets record's topic per sub-topology, one partition per
// task; repartition topics sized as Kafka Streams sizes them (WithPartitions, else the
// count of the sub-topology that reads them beside user topics, else that of the one
// that writes them). It does no I/O.
func planInternalTopics(topo *topology.Topology, appID string, counts map[string]int32) ([]topicspec.Spec, error) {
	g := graph.Of(topo)
	// Topics joined by key (the DSL declares them) must be co-partitioned; the error
	// names both topics. Internal topics of a group are sized below, so only the user
	// topics are compared here.
	err := topo.CheckCopartitioning(func(topic string) (int32, error) {
		if n, ok := counts[topic]; ok {
			return n, nil
		}
		return 0, ErrMissingTopic
	})
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if errors.Is(e, topology.ErrNotCopartitioned) {
				return nil, fmt.Errorf("%w: %w", ErrPartitionMismatch, e)
			}
		}
	}
	tasks, err := userTaskCounts(g, counts)
	if err != nil {
		return nil, err
	}
	repParts, err := sizeRepartitions(g, appID, tasks)
	if err != nil {
		return nil, err
	}
	var specs []topicspec.Spec
	for _, s := range g.Subtopologies {
		n, ok := tasks[s.ID]
		if !ok {
			return nil, fmt.Errorf("eddy: cannot tell the partition count of sub-topology %d: give its repartition topics WithPartitions", s.ID)
		}
		for _, st := range s.Stores {
			switch {
			case st.Logged && st.Segments != nil: // its changelog is trimmed by offset
				specs = append(specs, topicspec.WindowChangelog(appID, st.Name, n))
			case st.Logged:
				specs = append(specs, topicspec.Changelog(appID, st.Name, n))
			}
		}
		// The tasks' own record of the input offsets each transaction commits.
		specs = append(specs, topicspec.Changelog(appID, names.OffsetsStore(s.ID), n))
	}
	for r, n := range repParts {
		specs = append(specs, topicspec.Repartition(appID, r, n))
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return specs, nil
}

// userTaskCounts returns the task count of every sub-topology that reads user topics:
// their partition count, which must be the same for all of them.
func userTaskCounts(g *graph.Graph, counts map[string]int32) (map[int]int32, error) {
	tasks := map[int]int32{}
	for _, s := range g.Subtopologies {
		var first string
		for _, t := range s.SourceTopics {
			if first == "" {
				first, tasks[s.ID] = t, counts[t]
				continue
			}
			if counts[t] != tasks[s.ID] {
				return nil, fmt.Errorf("%w: sub-topology %d reads %q (%d partitions) and %q (%d partitions); its source topics must be co-partitioned",
					ErrPartitionMismatch, s.ID, first, tasks[s.ID], t, counts[t])
			}
		}
	}
	return tasks, nil
}

// sizeRepartitions sizes the repartition topics as Kafka Streams' RepartitionTopics
// does: explicit counts, else the count of the sub-topology reading them alongside user
// topics, else that of the sub-topology writing them; it completes tasks with the
// counts of sub-topologies that read only repartition topics, repeating until every
// chain of repartitions is sized.
func sizeRepartitions(g *graph.Graph, appID string, tasks map[int]int32) (map[string]int32, error) {
	repParts := map[string]int32{}
	writer := map[string]*graph.Subtopology{}
	for _, s := range g.Subtopologies {
		for _, n := range s.Nodes {
			if n.Kind == graph.Sink && n.Internal {
				writer[n.Topics[0]] = s
				if n.RepartitionPartitions > 0 {
					repParts[n.Topics[0]] = n.RepartitionPartitions
				}
			}
		}
	}
	for range len(g.Subtopologies) + 1 {
		for _, s := range g.Subtopologies {
			for _, r := range s.RepartitionSources {
				if _, ok := repParts[r]; !ok {
					if n, ok := tasks[s.ID]; ok && len(s.SourceTopics) > 0 {
						repParts[r] = n
					} else if w := writer[r]; w != nil {
						if n, ok := tasks[w.ID]; ok {
							repParts[r] = n
						}
					}
				}
				n, ok := repParts[r]
				if !ok {
					continue
				}
				if cur, ok := tasks[s.ID]; !ok {
					tasks[s.ID] = n
				} else if cur != n {
					return nil, fmt.Errorf("%w: sub-topology %d reads repartition topic %q with %d partitions but its other sources have %d",
						ErrPartitionMismatch, s.ID, changelog.RepartitionTopicName(appID, r), n, cur)
				}
			}
		}
	}
	return repParts, nil
}
