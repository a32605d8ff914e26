package eddy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/topicspec"
)

// reservedTopicConfigs are the internal topics' configs eddy sets itself
// (changelog.ChangelogSpec, changelog.RepartitionSpec).
var reservedTopicConfigs = []string{"cleanup.policy", "retention.ms", "retention.bytes"}

// checkInternalTopics checks the settings of the internal topics eddy creates and
// fills in their defaults.
func (c *Config) checkInternalTopics() error {
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = -1
	}
	if c.ReplicationFactor < -1 {
		return configErr("ReplicationFactor", "%d: want -1 (broker default) or a positive count", c.ReplicationFactor)
	}
	for k := range c.InternalTopicConfigs {
		if slices.Contains(reservedTopicConfigs, k) {
			return configErr("InternalTopicConfigs", "%q is eddy's to set (changelogs are compacted and kept, repartition topics purged by eddy); remove it", k)
		}
	}
	return nil
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
		if err := pause(ctx); err != nil {
			return err
		}
	}
}

// createdTopicsTimeout bounds refreshCreated.
const createdTopicsTimeout = 30 * time.Second
