package eddy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/names"
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
	if rt.cfg.OnBadRecord == DeadLetterBadRecord {
		roles[rt.cfg.DeadLetterTopic] = append(roles[rt.cfg.DeadLetterTopic], "dead-letter topic")
	}
	counts, err := rt.describe(ctx, keys(roles))
	if err != nil {
		return err
	}
	var missing []string
	for _, t := range keys(roles) {
		if _, ok := counts[t]; !ok {
			missing = append(missing, fmt.Sprintf("%q (%s)", t, strings.Join(roles[t], ", ")))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s; eddy does not create user topics", ErrMissingTopic, strings.Join(missing, "; "))
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
	rt.partsMu.Unlock()
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

// createdTopicsTimeout bounds refreshCreated.
const createdTopicsTimeout = 30 * time.Second

// topicAccess is an operation the application's principal needs on a topic, and why.
type topicAccess struct {
	op  sarama.AclOperation
	why string
}

// topicAccessNeeded lists, per topic, the operations an application needs: READ on its
// source topics, WRITE on its sinks and dead-letter topic, READ and WRITE on its
// internal topics (DESCRIBE on all of them is checked by describe).
func topicAccessNeeded(g *graph.Graph, cfg Config, internal []changelog.TopicSpec) map[string][]topicAccess {
	need := map[string][]topicAccess{}
	add := func(topic string, op sarama.AclOperation, why string) {
		if !slices.ContainsFunc(need[topic], func(a topicAccess) bool { return a.op == op }) {
			need[topic] = append(need[topic], topicAccess{op, why})
		}
	}
	for _, s := range g.Subtopologies {
		for _, t := range s.SourceTopics {
			add(t, sarama.AclOperationRead, fmt.Sprintf("source of sub-topology %d", s.ID))
		}
		for _, n := range s.Nodes {
			if n.Kind == graph.Sink && !n.Internal {
				add(n.Topics[0], sarama.AclOperationWrite, fmt.Sprintf("sink %q", n.Name))
			}
		}
	}
	if cfg.OnBadRecord == DeadLetterBadRecord {
		add(cfg.DeadLetterTopic, sarama.AclOperationWrite, "dead-letter topic")
	}
	for _, s := range internal {
		add(s.Name, sarama.AclOperationRead, "internal topic")
		add(s.Name, sarama.AclOperationWrite, "internal topic")
	}
	return need
}

// authorizedOpsUnknown is what a broker answers for a topic's authorized operations when
// it does not report them (KIP-430: INT32_MIN).
const authorizedOpsUnknown = math.MinInt32

// checkTopicAccess refuses to start, naming the topic and the operation, when the
// brokers say the application's principal lacks an operation it needs on a topic
// (Metadata v8+ reports a topic's authorized operations, KIP-430). Without this check a
// missing WRITE shows only when a task's transaction first adds a partition, seconds
// later, and on that path sarama 1.61.1 has a data race inside its transaction manager
// (docs/kafka-notes.md). A broker without an authorizer reports every operation; one
// that does not report them is not checked.
func (rt *runtime) checkTopicAccess(need map[string][]topicAccess) error {
	topics := keys(need)
	if len(topics) == 0 || !rt.sc.Version.IsAtLeast(sarama.V2_3_0_0) {
		return nil
	}
	req := sarama.NewMetadataRequest(rt.sc.Version, topics)
	req.IncludeTopicAuthorizedOperations = true
	b := rt.client.LeastLoadedBroker()
	if b == nil {
		return nil // the consumer group's connection reports the cluster being away
	}
	if ok, _ := b.Connected(); !ok {
		if err := b.Open(rt.sc); err != nil && !errors.Is(err, sarama.ErrAlreadyConnected) {
			return nil
		}
	}
	resp, err := b.GetMetadata(req)
	if err != nil {
		// Not a refusal: the operations' own requests meet whatever this was.
		rt.logger.Debug("checking the topics' authorized operations", "error", err)
		return nil
	}
	for _, t := range resp.Topics {
		if !errors.Is(t.Err, sarama.ErrNoError) || t.TopicAuthorizedOperations == authorizedOpsUnknown {
			continue
		}
		for _, a := range need[t.Name] {
			if t.TopicAuthorizedOperations&(1<<int32(a.op)) == 0 {
				return fmt.Errorf("eddy: topic %q (%s): the broker does not authorize %s on it: %w",
					t.Name, a.why, strings.ToUpper(a.op.String()), sarama.ErrTopicAuthorizationFailed)
			}
		}
	}
	return nil
}

// planInternalTopics checks the partition counts of a topology's user topics (counts,
// as the cluster has them) and plans its internal topics, sorted by name: a changelog
// per logged store and the offsets record's topic per sub-topology, one partition per
// task; repartition topics sized as Kafka Streams sizes them (WithPartitions, else the
// count of the sub-topology that reads them beside user topics, else that of the one
// that writes them). It does no I/O.
func planInternalTopics(topo *topology.Topology, appID string, counts map[string]int32) ([]changelog.TopicSpec, error) {
	g := topo.Graph()
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
	// Task counts from user source topics.
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
	// Repartition topics: explicit counts, else the count of the sub-topology reading
	// them alongside user topics, else that of the sub-topology writing them.
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
				if n, ok := repParts[r]; ok {
					if cur, ok := tasks[s.ID]; !ok {
						tasks[s.ID] = n
					} else if cur != n {
						return nil, fmt.Errorf("%w: sub-topology %d reads repartition topic %q with %d partitions but its other sources have %d",
							ErrPartitionMismatch, s.ID, changelog.RepartitionTopicName(appID, r), n, cur)
					}
				}
			}
		}
	}
	var specs []changelog.TopicSpec
	for _, s := range g.Subtopologies {
		n, ok := tasks[s.ID]
		if !ok {
			return nil, fmt.Errorf("eddy: cannot tell the partition count of sub-topology %d: give its repartition topics WithPartitions", s.ID)
		}
		for _, st := range s.Stores {
			if st.Logged {
				specs = append(specs, changelog.ChangelogSpec(appID, st.Name, n))
			}
		}
		// The tasks' own record of the input offsets each transaction commits.
		specs = append(specs, changelog.ChangelogSpec(appID, names.OffsetsStore(s.ID), n))
	}
	for r, n := range repParts {
		specs = append(specs, changelog.RepartitionSpec(appID, r, n))
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return specs, nil
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
func internalTopicDetail(s changelog.TopicSpec, cfg Config) *sarama.TopicDetail {
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
func (rt *runtime) ensureInternal(ctx context.Context, specs []changelog.TopicSpec) error {
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
	// Wait until the metadata knows them, and check the partition counts of those that
	// another instance created at the same time.
	for attempt := 0; ; attempt++ {
		have, err := rt.describe(ctx, created)
		if err != nil {
			return err
		}
		if len(have) == len(created) {
			for _, s := range specs {
				if n, ok := have[s.Name]; ok && n != s.Partitions {
					return fmt.Errorf("%w: internal topic %q has %d partitions, want %d", ErrPartitionMismatch, s.Name, n, s.Partitions)
				}
			}
			return refreshCreated(ctx, rt.client, created)
		}
		if attempt > 40 {
			return fmt.Errorf("eddy: internal topics %v still not visible after creation", created)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
