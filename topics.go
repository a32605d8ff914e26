package eddy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/topicspec"
)

// prepareTopics checks the user topics and creates the internal ones:
//   - every source, sink and dead-letter topic exists (eddy never creates or alters
//     user topics);
//   - the user source topics of one sub-topology have equal partition counts;
//   - repartition topics get the partition count of the sub-topology that writes them
//     (or their WithPartitions), changelogs one partition per task; existing internal
//     topics must have those counts.
func (rt *runtime) prepareTopics(ctx context.Context) error {
	counts, err := rt.waitUserTopics(ctx, userTopicRoles(rt.g, rt.cfg))
	if err != nil {
		return err
	}
	specs, err := planInternalTopics(rt.app.topo, rt.cfg.ApplicationID, counts)
	if err != nil {
		return err
	}
	if err := rt.ensureInternal(ctx, specs); err != nil {
		return err
	}
	if err := rt.checkTopicAccess(topicAccessNeeded(rt.g, rt.cfg, specs)); err != nil {
		return err
	}
	sources := rt.recordPartitions(counts, specs)
	if rt.app.autoFetch {
		// No consumer has started yet: the group's partition consumers read the size
		// from this config (the client's) when they are made.
		rt.sc.Consumer.Fetch.Default = fetchSize(sources)
		rt.logger.Debug("fetch size per partition", "bytes", rt.sc.Consumer.Fetch.Default, "source_partitions", sources)
	}
	return nil
}

// userTopicRoles maps each user topic the application uses (sources, sinks, the
// dead-letter topic) to what uses it, for the error that names a missing one.
func userTopicRoles(g *graph.Graph, cfg Config) map[string][]string {
	roles := map[string][]string{}
	for _, s := range g.Subtopologies {
		for _, t := range s.SourceTopics {
			roles[t] = append(roles[t], fmt.Sprintf("source of sub-topology %d", s.ID))
		}
		for _, n := range s.Nodes {
			if n.Kind == graph.Sink && !n.Internal {
				roles[n.Topics[0]] = append(roles[n.Topics[0]], fmt.Sprintf("sink %q", n.Name))
			}
		}
	}
	if cfg.deadLettering() {
		roles[cfg.DeadLetterTopic] = append(roles[cfg.DeadLetterTopic], "dead-letter topic")
	}
	return roles
}

// waitUserTopics returns the partition counts of the user topics (roles' keys). A user
// topic created a moment before Run may not be in the metadata the broker serves yet
// (issue 26: reported missing at once): it asks again for up to userTopicsWait before
// calling it missing, as refreshCreated does for eddy's own.
func (rt *runtime) waitUserTopics(ctx context.Context, roles map[string][]string) (map[string]int32, error) {
	deadline := time.Now().Add(userTopicsWait)
	for {
		counts, err := rt.describe(ctx, keys(roles))
		if err != nil {
			return nil, err
		}
		var missing []string
		for _, t := range keys(roles) {
			if _, ok := counts[t]; !ok {
				missing = append(missing, fmt.Sprintf("%q (%s)", t, strings.Join(roles[t], ", ")))
			}
		}
		if len(missing) == 0 {
			return counts, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: %s (still missing after %v); eddy does not create user topics: create them first", ErrMissingTopic, strings.Join(missing, "; "), userTopicsWait)
		}
		if err := pause(ctx); err != nil {
			return nil, err
		}
	}
}

// recordPartitions keeps the partition counts of the user and internal topics, and
// returns the number of source partitions.
func (rt *runtime) recordPartitions(counts map[string]int32, specs []topicspec.Spec) int {
	rt.partsMu.Lock()
	defer rt.partsMu.Unlock()
	for t, n := range counts {
		rt.partitions[t] = n
	}
	for _, s := range specs {
		rt.partitions[s.Name] = s.Partitions
	}
	sources := 0
	for _, t := range rt.topics {
		sources += int(rt.partitions[t])
	}
	return sources
}

// topicsPoll is how often the topic checks ask the cluster again.
const topicsPoll = 250 * time.Millisecond

// pause waits topicsPoll, or returns ctx's error when it ends first.
func pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(topicsPoll):
		return nil
	}
}

// userTopicsWait bounds the wait for user topics missing from the metadata at the start.
const userTopicsWait = 3 * time.Second

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// describe returns the partition counts of the topics that exist.
func (rt *runtime) describe(ctx context.Context, topics []string) (map[string]int32, error) {
	out := map[string]int32{}
	if len(topics) == 0 {
		return out, nil
	}
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		if attempt > 0 {
			if err := pause(ctx); err != nil {
				return nil, err
			}
		}
		meta, err := rt.admin.DescribeTopics(topics)
		if err != nil {
			lastErr = err
			continue
		}
		retry := false
		for _, m := range meta {
			switch {
			case errors.Is(m.Err, sarama.ErrNoError):
				out[m.Name] = int32(len(m.Partitions))
			case errors.Is(m.Err, sarama.ErrUnknownTopicOrPartition):
			case errors.Is(m.Err, sarama.ErrLeaderNotAvailable):
				retry, lastErr = true, m.Err
			default:
				return nil, fmt.Errorf("eddy: describe topic %q: %w", m.Name, m.Err)
			}
		}
		if !retry {
			return out, nil
		}
	}
	return nil, fmt.Errorf("eddy: describe topics %v: %w", topics, lastErr)
}
