package kafkatest

import (
	"context"
	"errors"
	"fmt"
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
// It returns ctx's error, naming the topic the last check found behind, if that does
// not happen before ctx ends; a topic that does not exist yet counts as not processed.
func (c *Cluster) WaitProcessed(ctx context.Context, appID string, topics ...string) error {
	if len(topics) == 0 {
		return fmt.Errorf("kafkatest: wait until %q has processed its input: no topics given", appID)
	}
	behind := "" // the topic the last check found behind
	err := withClient(ctx, c.endpoint(), func(client sarama.Client) error {
		clean := 0 // checks that found every topic processed
		for {
			b, err := firstBehind(ctx, client, appID, topics)
			if err != nil {
				return err
			}
			behind = b
			if behind == "" {
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
		if behind == "" {
			return fmt.Errorf("kafkatest: wait until %q has processed %v: %w", appID, topics, ctx.Err())
		}
		return fmt.Errorf("kafkatest: %q has not processed all of %q: %w", appID, behind, ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("kafkatest: wait until %q has processed %v: %w", appID, topics, err)
	}
	return nil
}

// errFound stops a read at the first record.
var errFound = errors.New("found a record")

// firstBehind returns the first of topics on which group has not committed every
// committed record, or "" when there is none.
func firstBehind(ctx context.Context, client sarama.Client, group string, topics []string) (string, error) {
	for _, topic := range topics {
		ps, err := partitionsOf(client, topic)
		if err != nil || len(ps) == 0 {
			return topic, nil // not created yet
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
			if err != nil {
				return "", fmt.Errorf("%s/%d: %w", topic, p, err)
			}
		}
	}
	return "", nil
}
