package eddy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/topicspec"
	"github.com/eddy-streams/eddy/topology"
)

// prepareTopics checks the user topics and creates the internal ones:
//   - every source, sink and dead-letter topic exists (eddy never creates or alters
//     user topics);
//   - the user source topics of one sub-topology have equal partition counts;
//   - repartition topics get the partition count of the sub-topology that writes them
//     (or their WithPartitions), changelogs one partition per task; existing internal
//     topics must have those counts.
func (rt *runtime) prepareTopics(ctx context.Context) error {
	appID := rt.cfg.ApplicationID
	roles := map[string][]string{} // user topic → what uses it
	for _, s := range rt.g.Subtopologies {
		for _, t := range s.SourceTopics {
			roles[t] = append(roles[t], fmt.Sprintf("source of sub-topology %d", s.ID))
		}
		for _, n := range s.Nodes {
			if n.Kind == graph.Sink && !n.Internal {
				roles[n.Topics[0]] = append(roles[n.Topics[0]], fmt.Sprintf("sink %q", n.Name))
			}
		}
	}
	if rt.cfg.deadLettering() {
		roles[rt.cfg.DeadLetterTopic] = append(roles[rt.cfg.DeadLetterTopic], "dead-letter topic")
	}
	// A user topic created a moment before Run may not be in the metadata the broker
	// serves yet (issue 26: reported missing at once): ask again for up to
	// userTopicsWait before calling it missing, as refreshCreated does for eddy's own.
	var counts map[string]int32
	deadline := time.Now().Add(userTopicsWait)
	for {
		var err error
		if counts, err = rt.describe(ctx, keys(roles)); err != nil {
			return err
		}
		var missing []string
		for _, t := range keys(roles) {
			if _, ok := counts[t]; !ok {
				missing = append(missing, fmt.Sprintf("%q (%s)", t, strings.Join(roles[t], ", ")))
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s (still missing after %v); eddy does not create user topics: create them first", ErrMissingTopic, strings.Join(missing, "; "), userTopicsWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}

	specs, err := planInternalTopics(rt.app.topo, appID, counts)
	if err != nil {
		return err
	}
	if err := rt.ensureInternal(ctx, specs); err != nil {
		return err
	}
	if err := rt.checkTopicAccess(topicAccessNeeded(rt.g, rt.cfg, specs)); err != nil {
		return err
	}
	rt.partsMu.Lock()
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
	rt.partsMu.Unlock()
	if rt.app.autoFetch {
		// No consumer has started yet: the group's partition consumers read the size
		// from this config (the client's) when they are made.
		rt.sc.Consumer.Fetch.Default = fetchSize(sources)
		rt.logger.Debug("fetch size per partition", "bytes", rt.sc.Consumer.Fetch.Default, "source_partitions", sources)
	}
	return nil
}

// refreshCreated refreshes the client's metadata of topics just created, waiting (up
// to createdTopicsTimeout) while the broker asked answers that it does not know them:
// on a cluster of several brokers it can learn of a topic after the controller reported
// it created (three-node Kafka 4.1.1, under load: an instance stopped with "<app>-sum-
// changelog: Request was for a topic or partition that does not exist on this broker",
// sarama's own retries, 3 at 250 ms, having passed).
func refreshCreated(ctx context.Context, client sarama.Client, topics []string) error {
	deadline := time.Now().Add(createdTopicsTimeout)
	for {
		err := client.RefreshMetadata(topics...)
		if err == nil || !errors.Is(err, sarama.ErrUnknownTopicOrPartition) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// userTopicsWait bounds the wait for user topics missing from the metadata at the start.
const userTopicsWait = 3 * time.Second

// createdTopicsTimeout bounds refreshCreated.
const createdTopicsTimeout = 30 * time.Second

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
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(250 * time.Millisecond):
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

// internalTopicDetail is how an internal topic is created: its spec's partitions and
// configs, the configured replication factor, and Config.InternalTopicConfigs (which
// cannot name the spec's own configs: withDefaults refuses them).
func internalTopicDetail(s topicspec.Spec, cfg Config) *sarama.TopicDetail {
	entries := map[string]*string{}
	for k, v := range cfg.InternalTopicConfigs {
		entries[k] = &v
	}
	for k, v := range s.Configs {
		entries[k] = &v
	}
	return &sarama.TopicDetail{NumPartitions: s.Partitions, ReplicationFactor: cfg.ReplicationFactor, ConfigEntries: entries}
}

// ensureInternal creates the missing internal topics and checks the existing ones.
func (rt *runtime) ensureInternal(ctx context.Context, specs []topicspec.Spec) error {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	have, err := rt.describe(ctx, names)
	if err != nil {
		return err
	}
	var created []string
	for _, s := range specs {
		if n, ok := have[s.Name]; ok {
			if n != s.Partitions {
				return fmt.Errorf("%w: internal topic %q has %d partitions, but the topology needs %d; the topology or its source topics changed: reset the application (eddy reset)",
					ErrPartitionMismatch, s.Name, n, s.Partitions)
			}
			continue
		}
		err := rt.admin.CreateTopic(s.Name, internalTopicDetail(s, rt.cfg), false)
		if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
			return fmt.Errorf("eddy: create internal topic %q: %w", s.Name, err)
		}
		created = append(created, s.Name)
	}
	if len(created) == 0 {
		return nil
	}
	rt.logger.Info("created internal topics", "topics", created)
	if err := waitVisible(ctx, rt.describe, created, specs, internalTopicsVisibleTimeout, 250*time.Millisecond); err != nil {
		return err
	}
	return refreshCreated(ctx, rt.client, created)
}

// internalTopicsVisibleTimeout bounds the wait for created internal topics to show in
// the metadata. It grows with the partitions created: a word count of 1,000 input
// partitions creates 4 internal topics of 1,000 partitions each, and a single broker
// on a shared 2-core machine showed them only after more than the 10 s that 40
// attempts 250 ms apart allowed (integration/bench -rows scale-p1000, BENCHMARKS.md
// "Scale").
const internalTopicsVisibleTimeout = 2 * time.Minute

// waitVisible waits until describe finds every created topic, asking every interval,
// for at most timeout, and checks the partition counts of those that another instance
// created at the same time.
func waitVisible(ctx context.Context, describe func(context.Context, []string) (map[string]int32, error),
	created []string, specs []topicspec.Spec, timeout, interval time.Duration) error {
	began := time.Now()
	for {
		have, err := describe(ctx, created)
		if err != nil {
			return err
		}
		if len(have) == len(created) {
			for _, s := range specs {
				if n, ok := have[s.Name]; ok && n != s.Partitions {
					return fmt.Errorf("%w: internal topic %q has %d partitions, want %d", ErrPartitionMismatch, s.Name, n, s.Partitions)
				}
			}
			return nil
		}
		if time.Since(began) > timeout {
			return fmt.Errorf("eddy: internal topics %v still not visible %v after their creation (%d of %d visible): is the cluster overloaded?", created, timeout, len(have), len(created))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
