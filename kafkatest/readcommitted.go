package kafkatest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"
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
func readCommitted(ctx context.Context, addrs []string, topic string) ([]*sarama.ConsumerMessage, error) {
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

// Control record types (the key of a control record is version int16, type int16).
const (
	controlAbort  = 0
	controlCommit = 1
)

// readCommittedPartition reads the committed records of [from, to),
// fetching up to maxBytes at a time (brokers return at least one whole
// batch, however large).
func readCommittedPartition(ctx context.Context, client sarama.Client, topic string, partition int32, from, to int64, maxBytes int32) ([]*sarama.ConsumerMessage, error) {
	var out []*sarama.ConsumerMessage
	next := from
	for next < to {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		broker, err := client.Leader(topic, partition)
		if err != nil {
			if err := client.RefreshMetadata(topic); err != nil {
				return nil, err
			}
			if err := sleep(ctx, 20*time.Millisecond); err != nil {
				return nil, err
			}
			continue
		}
		req := &sarama.FetchRequest{
			Version:      11,
			MaxWaitTime:  100,
			MinBytes:     1,
			MaxBytes:     100 << 20, // the partition limit below is the one that matters
			Isolation:    sarama.ReadCommitted,
			SessionID:    0,
			SessionEpoch: -1,
		}
		req.AddBlock(topic, partition, next, maxBytes, -1)
		resp, err := broker.Fetch(req)
		if err != nil {
			return nil, fmt.Errorf("fetch at offset %d: %w", next, err)
		}
		block := resp.GetBlock(topic, partition)
		if block == nil {
			return nil, fmt.Errorf("fetch at offset %d: no block for the partition in the response", next)
		}
		switch {
		case errors.Is(block.Err, sarama.ErrNoError):
		case errors.Is(block.Err, sarama.ErrNotLeaderForPartition), errors.Is(block.Err, sarama.ErrLeaderNotAvailable),
			errors.Is(block.Err, sarama.ErrUnknownTopicOrPartition), errors.Is(block.Err, sarama.ErrFencedLeaderEpoch),
			errors.Is(block.Err, sarama.ErrUnknownLeaderEpoch):
			if err := client.RefreshMetadata(topic); err != nil {
				return nil, err
			}
			if err := sleep(ctx, 20*time.Millisecond); err != nil {
				return nil, err
			}
			continue
		default:
			return nil, fmt.Errorf("fetch at offset %d: %w", next, block.Err)
		}

		aborted := make(map[int64]bool)
		txns := slices.Clone(block.AbortedTransactions)
		slices.SortFunc(txns, func(a, b *sarama.AbortedTransaction) int {
			switch {
			case a.FirstOffset < b.FirstOffset:
				return -1
			case a.FirstOffset > b.FirstOffset:
				return 1
			}
			return 0
		})
		progressed := false
		for _, rs := range block.RecordsSet {
			b := rs.RecordBatch
			if b == nil {
				return nil, fmt.Errorf("fetch at offset %d: legacy (pre-0.11) message set; transactions need record batches", next)
			}
			if b.PartialTrailingRecord {
				break
			}
			last := b.FirstOffset + int64(b.LastOffsetDelta)
			for len(txns) > 0 && txns[0].FirstOffset <= last {
				aborted[txns[0].ProducerID] = true
				txns = txns[1:]
			}
			if last < next {
				continue // a batch we already passed; brokers return whole batches
			}
			if b.Control {
				if len(b.Records) > 0 && len(b.Records[0].Key) >= 4 &&
					binary.BigEndian.Uint16(b.Records[0].Key[2:4]) == controlAbort {
					delete(aborted, b.ProducerID)
				}
			} else if !(b.IsTransactional && aborted[b.ProducerID]) {
				for _, r := range b.Records {
					off := b.FirstOffset + r.OffsetDelta
					if off < next || off >= to {
						continue
					}
					out = append(out, toConsumerMessage(topic, partition, b, r, off))
				}
			}
			next = last + 1
			progressed = true
			if next >= to {
				break
			}
		}
		if !progressed {
			if block.Partial && maxBytes < 256<<20 {
				maxBytes *= 2
				continue
			}
			if err := sleep(ctx, 20*time.Millisecond); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func toConsumerMessage(topic string, partition int32, b *sarama.RecordBatch, r *sarama.Record, offset int64) *sarama.ConsumerMessage {
	ts := b.FirstTimestamp.Add(r.TimestampDelta)
	if b.LogAppendTime {
		ts = b.MaxTimestamp
	}
	return &sarama.ConsumerMessage{
		Headers:        r.Headers,
		Timestamp:      ts,
		BlockTimestamp: b.MaxTimestamp,
		Key:            r.Key,
		Value:          r.Value,
		Topic:          topic,
		Partition:      partition,
		Offset:         offset,
	}
}
