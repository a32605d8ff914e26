package kafkatest

import (
	"context"
	"fmt"
	"slices"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/kread"
)

// readCommitted returns every committed record of topic from the log start
// up to the last stable offset at the time of the call, ordered by partition
// and offset.
//
// It fetches with the low-level Fetch API instead of a sarama Consumer: a
// consumer skips control records (transaction markers) and aborted records
// without saying where it is, so "everything up to the last stable offset"
// has no reliable end condition with it. Here the position advances over
// every batch, markers included, and aborted transactions are filtered the
// way Kafka's Java consumer does (AbortedTransactions of the response plus
// the abort markers).
func readCommitted(ctx context.Context, addrs endpoint, topic string) ([]*sarama.ConsumerMessage, error) {
	var out []*sarama.ConsumerMessage
	err := withClient(ctx, addrs, func(client sarama.Client) error {
		starts, err := listOffsets(client, topic, sarama.OffsetOldest, sarama.ReadCommitted)
		if err != nil {
			return fmt.Errorf("log start offsets: %w", err)
		}
		ends, err := listOffsets(client, topic, sarama.OffsetNewest, sarama.ReadCommitted)
		if err != nil {
			return fmt.Errorf("last stable offsets: %w", err)
		}
		ps := make([]int32, 0, len(ends))
		for p := range ends {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		for _, p := range ps {
			msgs, err := readCommittedPartition(ctx, client, topic, p, starts[p], ends[p], 8<<20)
			if err != nil {
				return fmt.Errorf("partition %d: %w", p, err)
			}
			out = append(out, msgs...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kafkatest: read committed %q on %v: %w", topic, addrs, err)
	}
	return out, nil
}

// readCommittedPartition reads the committed records of [from, to),
// fetching up to maxBytes at a time (more when one batch is larger).
func readCommittedPartition(ctx context.Context, client sarama.Client, topic string, partition int32, from, to int64, maxBytes int32) ([]*sarama.ConsumerMessage, error) {
	var out []*sarama.ConsumerMessage
	err := kread.ReadRangeSized(ctx, client, topic, partition, from, to, maxBytes, func(r kread.Record) error {
		out = append(out, &sarama.ConsumerMessage{
			Headers: r.Headers, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value,
			Topic: topic, Partition: partition, Offset: r.Offset,
		})
		return nil
	})
	return out, err
}
