package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/topology"
)

// InputTopics returns the topics an application of topo with the given application ID
// reads, the ones to pass to [Cluster.WaitProcessed]: the source topics of every
// sub-topology (a topic is the source of one sub-topology only) and the repartition
// topics the application writes for itself.
func InputTopics(topo *topology.Topology, appID string) []string {
	var out []string
	for _, s := range topo.Subtopologies() {
		out = append(out, s.SourceTopics...)
		for _, r := range s.Repartitions {
			out = append(out, names.RepartitionTopic(appID, r))
		}
	}
	return out
}

// WaitProcessed waits until the consumer group appID (an eddy application's group is
// its application ID) has processed and committed every committed record of topics:
// on every partition, no committed record lies between the group's committed offset
// and the last stable offset. Produce the input first, then call it with all the
// topics the application reads, repartition topics included ([InputTopics] lists
// them).
//
// The topics may be given in any order: a record processed from one topic may write
// to another (a repartition topic), so WaitProcessed returns only when len(topics)
// checks have found every topic processed. Why that is enough: once a check has found
// the topics a topic's writers read processed, nothing more is written to it (by
// exactly-once, records written while processing commit with the offsets), so the
// next check that finds it processed finds it final; a chain of n topics is final
// after n such checks.
//
// It returns ctx's error, naming every topic the last complete check found behind, if
// that does not happen before ctx ends; a topic that does not exist yet counts as not
// processed, and the error says it does not exist.
func (c *Cluster) WaitProcessed(ctx context.Context, appID string, topics ...string) error {
	if len(topics) == 0 {
		return fmt.Errorf("kafkatest: wait until %q has processed its input: no topics given", appID)
	}
	var behind []string // the topics the last complete check found behind
	checked := false    // whether a check has completed
	err := withClient(ctx, c.endpoint(), func(client sarama.Client) error {
		clean := 0 // checks that found every topic processed
		for {
			b, err := topicsBehind(ctx, client, appID, topics)
			if ctx.Err() != nil {
				// withClient closes the client when ctx ends: the check was cut short.
				return ctx.Err()
			}
			if err != nil {
				return err
			}
			behind, checked = b, true
			if len(behind) == 0 {
				clean++
				if clean >= len(topics) {
					return nil
				}
				continue
			}
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
	})
	if ctx.Err() != nil {
		if !checked {
			return fmt.Errorf("kafkatest: wait until %q has processed %v: no check completed: %w", appID, topics, ctx.Err())
		}
		if len(behind) == 0 {
			return fmt.Errorf("kafkatest: wait until %q has processed %v: the last check found them all processed, but %d such checks are needed: %w", appID, topics, len(topics), ctx.Err())
		}
		return fmt.Errorf("kafkatest: %q has not processed all of %s: %w", appID, strings.Join(behind, ", "), ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("kafkatest: wait until %q has processed %v: %w", appID, topics, err)
	}
	return nil
}

// errFound stops a read at the first record.
var errFound = errors.New("found a record")

// topicsBehind returns the topics on which group has not committed every committed
// record, a topic that does not exist as "<topic> (does not exist)". It checks every
// topic, not just up to the first behind, so that a caller whose wait ends sees all
// that is missing.
func topicsBehind(ctx context.Context, client sarama.Client, group string, topics []string) ([]string, error) {
	var behind []string
	for _, topic := range topics {
		b, err := topicBehind(ctx, client, group, topic)
		if err != nil {
			return nil, err
		}
		if b != "" {
			behind = append(behind, b)
		}
	}
	return behind, nil
}

// topicBehind returns topic, annotated when it does not exist, if group has not
// committed every committed record of it, or "" when it has.
func topicBehind(ctx context.Context, client sarama.Client, group string, topic string) (string, error) {
	ps, err := partitionsOf(client, topic)
	if errors.Is(err, sarama.ErrUnknownTopicOrPartition) || err == nil && len(ps) == 0 {
		return topic + " (does not exist)", nil
	}
	if err != nil {
		return topic, nil // metadata not available yet: look again
	}
	committed, retry, err := fetchStableOffsets(client, group, topic, ps)
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		return topic, nil // the embedded broker's answer before the group's first commit
	}
	if err != nil {
		return "", err
	}
	if retry != nil {
		return topic, nil
	}
	for _, p := range ps {
		start, end, err := kread.EndOffsets(client, topic, p)
		if err != nil {
			return "", fmt.Errorf("%s/%d: %w", topic, p, err)
		}
		from := max(committed[p], start) // -1: nothing committed, read from the log start
		if from >= end {
			continue
		}
		// Transaction markers may follow the committed offset: behind means a
		// committed record lies between it and the last stable offset.
		err = kread.ReadRange(ctx, client, topic, p, from, end, func(kread.Record) error { return errFound })
		if errors.Is(err, errFound) {
			return topic, nil
		}
		if errors.Is(err, sarama.ErrOffsetOutOfRange) {
			// The log start moved past from after it was read: an eddy application
			// deletes the repartition records it has committed (a fresh-clone CI run
			// failed so at offset 0). Look again, from the new start.
			return topic, nil
		}
		if err != nil {
			return "", fmt.Errorf("%s/%d: %w", topic, p, err)
		}
	}
	return "", nil
}
