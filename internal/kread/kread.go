// Package kread reads Kafka partitions with read_committed semantics up to a given end
// offset (usually the last stable offset), with plain Fetch requests over a sarama
// client. Unlike sarama's partition consumer it reports the position after transaction
// markers and aborted batches, so a reader knows when it has reached the end even when
// the last offsets before it are markers.
package kread

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/backoff"
)

// Record is a committed data record.
type Record struct {
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []*sarama.RecordHeader
	Timestamp time.Time
}

// EndOffsets returns a partition's log start offset and its last stable offset (the
// read_committed end offset).
func EndOffsets(client sarama.Client, topic string, partition int32) (start, end int64, err error) {
	start, err = ListOffset(client, topic, partition, sarama.OffsetOldest)
	if err != nil {
		return 0, 0, err
	}
	end, err = ListOffset(client, topic, partition, sarama.OffsetNewest)
	return start, end, err
}

// ErrTransactionOpen is wrapped by StableOffsets when a transaction open on the
// partition when it was called had not ended within its bound.
var ErrTransactionOpen = errors.New("a transaction open on the partition holds its last stable offset back")

// BrokerAbortInterval is how often a Kafka broker looks for transactions past their
// timeout and aborts them (transaction.abort.timed.out.transaction.cleanup.interval.ms,
// 10 s by default): a producer that stalled or died in a transaction holds the last
// stable offsets of the partitions it wrote for up to its transaction timeout plus
// this.
const BrokerAbortInterval = 10 * time.Second

// StableBound is the bound of StableOffsets' wait for the partitions that producers with
// transaction timeout txnTimeout write: the timeout, the broker's abort interval, and 5 s
// for the abort markers and slack.
func StableBound(txnTimeout time.Duration) time.Duration {
	return txnTimeout + BrokerAbortInterval + 5*time.Second
}

// StableOffsets returns a partition's log start offset and an end offset below which
// every record committed so far lies: its last stable offset once that has reached the
// high-water mark read first, that is once every transaction open on the partition at
// the call has ended (committed, aborted, or aborted by the broker past its timeout).
//
// The last stable offset alone is not such an end. It stops at the first record of the
// oldest open transaction, and records committed after that record (by other producers)
// lie above it: with a producer per worker, a task's next owner does not abort its
// previous owner's open transaction (another transactional ID), so a previous owner
// that stalled or died in a commit holds the task's changelog and offsets partitions
// back while the next owner commits behind it. A reader that took the last stable
// offset for the end would miss those commits (docs/architecture.md, "Reading to the
// end of a partition"). Transactions begun after the call do not prolong the wait: their
// records lie above the high-water mark read first.
//
// The common case, no transaction open, costs one ListOffsets more than EndOffsets (the
// high-water mark). Otherwise StableOffsets polls the last stable offset with backoff;
// onWait, if not nil, is called once when the wait begins. After bound it returns the
// offsets it has with an error wrapping ErrTransactionOpen that names the partition and
// both offsets; the caller decides whether to retry or to go on with the last stable
// offset.
func StableOffsets(ctx context.Context, client sarama.Client, topic string, partition int32, bound time.Duration, onWait func(lastStable, highWater int64)) (start, end int64, err error) {
	hwm, err := ListOffsetAt(ctx, client, topic, partition, sarama.OffsetNewest, sarama.ReadUncommitted)
	if err != nil {
		return 0, 0, err
	}
	began := time.Now()
	b := backoff.Backoff{Initial: 10 * time.Millisecond, Max: 500 * time.Millisecond}
	for first := true; ; first = false {
		if end, err = ListOffsetAt(ctx, client, topic, partition, sarama.OffsetNewest, sarama.ReadCommitted); err != nil {
			return 0, 0, err
		}
		if end >= hwm {
			break
		}
		waited := time.Since(began)
		if waited >= bound {
			start, _ = ListOffsetAt(ctx, client, topic, partition, sarama.OffsetOldest, sarama.ReadCommitted)
			return start, end, fmt.Errorf("%w: %s/%d: last stable offset %d below the high-water mark %d after %v; "+
				"the transaction ends when its producer commits or aborts it, or when the broker aborts it after the producer's "+
				"transaction timeout (checked every transaction.abort.timed.out.transaction.cleanup.interval.ms); "+
				"kafka-transactions.sh describe-producers names it", ErrTransactionOpen, topic, partition, end, hwm, waited.Round(time.Millisecond))
		}
		if first && onWait != nil {
			onWait(end, hwm)
		}
		if err := backoff.Sleep(ctx, min(b.Next(), bound-waited)); err != nil {
			return 0, 0, err
		}
	}
	start, err = ListOffsetAt(ctx, client, topic, partition, sarama.OffsetOldest, sarama.ReadCommitted)
	return start, end, err
}

// ListOffset runs ListOffsets with read_committed isolation for one partition: with
// sarama.OffsetNewest it returns the last stable offset.
func ListOffset(client sarama.Client, topic string, partition int32, at int64) (int64, error) {
	return ListOffsetAt(context.Background(), client, topic, partition, at, sarama.ReadCommitted)
}

// HighWaterMark returns a partition's high-water mark: the end offset with
// read_uncommitted isolation, past every record and transaction marker written so far.
func HighWaterMark(client sarama.Client, topic string, partition int32) (int64, error) {
	return ListOffsetAt(context.Background(), client, topic, partition, sarama.OffsetNewest, sarama.ReadUncommitted)
}

// ListOffsetAt runs ListOffsets for one partition at the partition's leader, retrying
// (with fresh metadata, up to 10 times, until ctx ends) on errors such as a leader that
// moved: at is sarama.OffsetOldest, sarama.OffsetNewest or a time in Unix milliseconds,
// for which it returns the first offset at or after that time, or -1 when every record
// is older.
func ListOffsetAt(ctx context.Context, client sarama.Client, topic string, partition int32, at int64, isolation sarama.IsolationLevel) (int64, error) {
	var lastErr error
	b := backoff.Backoff{Max: time.Second}
	for attempt := 0; attempt < 10; attempt++ {
		if attempt > 0 {
			if err := b.Wait(ctx); err != nil {
				return 0, fmt.Errorf("list offsets of %s/%d: %w (last error: %w)", topic, partition, err, lastErr)
			}
			_ = client.RefreshMetadata(topic)
		}
		broker, err := client.Leader(topic, partition)
		if err != nil {
			lastErr = err
			continue
		}
		req := sarama.NewOffsetRequest(client.Config().Version)
		req.IsolationLevel = isolation
		req.AddBlock(topic, partition, at, 1)
		resp, err := broker.GetAvailableOffsets(req)
		if err != nil {
			lastErr = err
			continue
		}
		block := resp.GetBlock(topic, partition)
		switch {
		case block == nil:
			lastErr = sarama.ErrIncompleteResponse
			continue
		case !errors.Is(block.Err, sarama.ErrNoError):
			lastErr = block.Err
			continue
		case req.Version >= 1:
			return block.Offset, nil
		case len(block.Offsets) > 0:
			return block.Offsets[0], nil
		default:
			return -1, nil
		}
	}
	return 0, fmt.Errorf("list offsets of %s/%d: %w", topic, partition, lastErr)
}

// Fetch reads the committed records of [next, end) that one Fetch returns, in offset
// order, and the offset to fetch next (markers and aborted batches advance it too). An
// error wrapping sarama.ErrOffsetOutOfRange means next is below the log start.
func Fetch(client sarama.Client, topic string, partition int32, next, end int64, maxBytes int32) ([]Record, int64, error) {
	for {
		block, err := FetchBlock(client, topic, partition, next, maxBytes, sarama.ReadCommitted)
		if err != nil {
			return nil, next, err
		}
		recs, newNext := parseBlock(block, next, end)
		if newNext == next && block.Partial && maxBytes < 256<<20 {
			// The first batch is larger than maxBytes (a broker may return it cut):
			// ask for more.
			maxBytes *= 2
			continue
		}
		return recs, newNext, nil
	}
}

// FetchBlock sends one Fetch for partition at next with the given isolation to the
// partition's leader, retrying what a leader change or a lost connection fails (up to
// ten times, with backoff), and returns the partition's block of the response. An
// error wrapping sarama.ErrOffsetOutOfRange means next is below the log start.
func FetchBlock(client sarama.Client, topic string, partition int32, next int64, maxBytes int32, isolation sarama.IsolationLevel) (*sarama.FetchResponseBlock, error) {
	var lastErr error
	b := backoff.Backoff{Max: time.Second}
	for attempt := 0; attempt < 10; attempt++ {
		if attempt > 0 {
			_ = b.Wait(context.Background())
			_ = client.RefreshMetadata(topic)
		}
		broker, err := client.Leader(topic, partition)
		if err != nil {
			lastErr = err
			continue
		}
		req := &sarama.FetchRequest{
			Version:      fetchVersion(client.Config().Version),
			MaxWaitTime:  250,
			MinBytes:     1,
			MaxBytes:     maxBytes,
			Isolation:    isolation,
			SessionID:    0,
			SessionEpoch: -1,
		}
		req.AddBlock(topic, partition, next, maxBytes, -1)
		resp, err := broker.Fetch(req)
		if err != nil {
			lastErr = err
			_ = broker.Close()
			continue
		}
		block := resp.GetBlock(topic, partition)
		if block == nil {
			lastErr = sarama.ErrIncompleteResponse
			continue
		}
		switch {
		case errors.Is(block.Err, sarama.ErrNoError):
			return block, nil
		case errors.Is(block.Err, sarama.ErrOffsetOutOfRange):
			return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, next, block.Err)
		default:
			lastErr = block.Err
		}
	}
	return nil, fmt.Errorf("fetch %s/%d at %d: %w", topic, partition, next, lastErr)
}

// ReadRange calls fn for every committed record in [from, end), in offset order.
func ReadRange(ctx context.Context, client sarama.Client, topic string, partition int32, from, end int64, fn func(Record) error) error {
	return ReadRangeSized(ctx, client, topic, partition, from, end, 16<<20, fn)
}

// ReadRangeSized is ReadRange fetching up to maxBytes at a time (more when one batch is
// larger).
func ReadRangeSized(ctx context.Context, client sarama.Client, topic string, partition int32, from, end int64, maxBytes int32, fn func(Record) error) error {
	next := from
	empty := 0
	for next < end {
		if err := ctx.Err(); err != nil {
			return err
		}
		recs, n, err := Fetch(client, topic, partition, next, end, maxBytes)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		if n == next {
			if empty++; empty > 40 {
				return fmt.Errorf("read %s/%d: no progress at offset %d below end %d", topic, partition, next, end)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		empty = 0
		next = n
	}
	return nil
}

// parseBlock applies read_committed filtering as the Java consumer does: a batch of a
// producer whose aborted transaction started at or before the batch is skipped until
// that producer's abort marker.
func parseBlock(block *sarama.FetchResponseBlock, next, end int64) ([]Record, int64) {
	aborted := slices.Clone(block.AbortedTransactions)
	slices.SortFunc(aborted, func(a, b *sarama.AbortedTransaction) int {
		switch {
		case a.FirstOffset < b.FirstOffset:
			return -1
		case a.FirstOffset > b.FirstOffset:
			return 1
		}
		return 0
	})
	abortedPIDs := map[int64]bool{}
	n := 0
	for _, recs := range block.RecordsSet {
		if recs.RecordBatch != nil {
			n += len(recs.RecordBatch.Records)
		}
	}
	out := make([]Record, 0, n)
	for _, recs := range block.RecordsSet {
		b := recs.RecordBatch
		if b == nil || b.PartialTrailingRecord {
			break
		}
		last := b.FirstOffset + int64(b.LastOffsetDelta)
		for len(aborted) > 0 && aborted[0].FirstOffset <= last {
			abortedPIDs[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		if last < next {
			continue
		}
		switch {
		case b.Control:
			if len(b.Records) > 0 && isAbortMarker(b.Records[0].Key) {
				delete(abortedPIDs, b.ProducerID)
			}
		case b.IsTransactional && abortedPIDs[b.ProducerID]:
			// records of an aborted transaction
		default:
			for _, rec := range b.Records {
				off := b.FirstOffset + rec.OffsetDelta
				if off < next || off >= end {
					continue
				}
				ts := b.FirstTimestamp.Add(rec.TimestampDelta)
				if b.LogAppendTime {
					ts = b.MaxTimestamp
				}
				out = append(out, Record{Offset: off, Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Timestamp: ts})
			}
		}
		next = min(last+1, end)
		if next >= end {
			break
		}
	}
	return out, next
}

// isAbortMarker reads a control record key: int16 version, int16 type (0 abort, 1 commit).
func isAbortMarker(key []byte) bool {
	return len(key) >= 4 && binary.BigEndian.Uint16(key[2:4]) == 0
}

func fetchVersion(v sarama.KafkaVersion) int16 {
	switch {
	case v.IsAtLeast(sarama.V2_7_0_0):
		return 12
	case v.IsAtLeast(sarama.V2_3_0_0):
		return 11
	case v.IsAtLeast(sarama.V2_1_0_0):
		return 10
	default:
		return 4
	}
}

// ReadLast reads the committed records at the end of a partition and returns the last
// value of each key. It serves records that are rewritten in full by every transaction
// and closed by a record with key closeKey, such as a task's offsets record: the newest
// committed transaction's records are the last committed ones.
//
// It reads the last window offsets first, and doubles the window (never below the log
// start) until the last closeKey record read lies at least window/2 offsets above the
// window's start: then the transaction it closes lies whole in the window, as long as a
// transaction's records (with those of other producers' transactions interleaved)
// span at most window/2 offsets, which the caller's first window must ensure. A fixed
// window is not enough: transactions aborted after the last committed one (an owner
// crashing again and again inside its commits) take offsets too, and the committed
// transaction falls out of the window, or the window cuts through it and returns its
// closing record without the others. The common case reads the first window once.
//
// The end is StableOffsets' (bounded by stableWait, onWait called when the wait begins):
// below the last stable offset alone, the newest committed transaction's records can lie
// behind another producer's open transaction, and the last ones read would be an older
// transaction's.
func ReadLast(ctx context.Context, client sarama.Client, topic string, partition int32, window int, closeKey []byte, stableWait time.Duration, onWait func(lastStable, highWater int64)) (map[string][]byte, error) {
	start, end, err := StableOffsets(ctx, client, topic, partition, stableWait, onWait)
	if err != nil {
		return nil, err
	}
	w := int64(max(window, 2))
	for {
		from := max(start, end-w)
		last := map[string][]byte{}
		closedAt := int64(-1)
		err = ReadRange(ctx, client, topic, partition, from, end, func(r Record) error {
			last[string(r.Key)] = r.Value
			if bytes.Equal(r.Key, closeKey) {
				closedAt = r.Offset
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if from <= start || closedAt-from >= w/2 {
			return last, nil
		}
		w *= 2
	}
}
