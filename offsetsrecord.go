package eddy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/IBM/sarama"
)

// committedOffsets is what a task knows of where its committed input ends, per source
// topic: the largest of the claim's start (the group's committed offset, which a
// coordinator can answer stale), the task's own commits, and its offsets record. Records
// below it are committed input: the inbox drops them and a replay skips them. It never
// moves back within the task's life, across sessions too, except for a source topic that
// was deleted and created anew (forget). The task's goroutine and its claims share it.
type committedOffsets struct {
	mu      sync.Mutex
	claimed map[string]int64 // this session's claims
	known   map[string]int64 // the task's commits and its offsets record
}

func newCommittedOffsets() *committedOffsets {
	return &committedOffsets{claimed: map[string]int64{}, known: map[string]int64{}}
}

// newSession drops the previous session's claims; what the task committed stays.
func (c *committedOffsets) newSession() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claimed = map[string]int64{}
}

// claim records the start of this session's claim of topic and returns the offset the
// task itself knows to be committed (negative: none), which is above the claim's start
// when the coordinator answered a stale offset.
func (c *committedOffsets) claim(topic string, offset int64) (known int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claimed[topic] = offset
	if k, ok := c.known[topic]; ok {
		return k
	}
	return -1
}

// advance moves topic's committed offset up to offset (never back): after the task's
// own commit, or from its offsets record.
func (c *committedOffsets) advance(topic string, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := c.known[topic]; !ok || offset > k {
		c.known[topic] = offset
	}
}

// of returns the committed offset of topic (negative: none yet).
func (c *committedOffsets) of(topic string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := int64(-1)
	if v, ok := c.claimed[topic]; ok {
		s = v
	}
	if v, ok := c.known[topic]; ok && v > s {
		s = v
	}
	return s
}

// forget drops what the task knows of topic's committed offset but the claim's start:
// the topic was deleted and created anew, and offsets of the old one mean nothing.
func (c *committedOffsets) forget(topic string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.known, topic)
}

// The offsets record: in every transaction a task also writes the input offsets the
// transaction commits, one record per source topic (key: the topic, value: the offset,
// 8 bytes big-endian, and the topic's 16-byte ID), to partition p of
// <app>-eddy-offsets-<subtopology>-changelog, and one record naming the transaction
// (commitKey). They are the offsets the group coordinator stores, kept a second time
// where the task reads them itself at start: a Kafka group coordinator that answers an
// older committed offset (seen after a kill -9 of a single-node Kafka 4.1 while it
// reloads __consumer_offsets; docs/kafka-notes.md) would otherwise make the task process
// committed input again. Every record of the last transaction is at the end of the
// partition, behind the transactions aborted since (kread.ReadLast widens its window
// until the last commitKey record and the transaction it closes lie inside it: ten
// aborted transactions after the last commit pushed a fixed window of 4*(n+1)+16 offsets
// past it, TestOffsetsRecordAfterManyAbortedTxns).
//
// Only under exactly-once: there the record commits atomically with the output it
// vouches for. An at-least-once producer acknowledges each partition on its own, so a
// record could be written while an output record failed; used as a floor after a crash
// it would skip input whose output was lost. At-least-once may repeat input anyway.
type offsetsRecord struct {
	topic     string
	partition int32
	sources   []string // the task's source topics
	committed *committedOffsets
	logger    *slog.Logger
	// ids are the IDs of the source topics, recorded with their offsets.
	ids map[string]sarama.Uuid
}

// offsetsSource is what reading the offsets record back needs from the cluster.
type offsetsSource interface {
	readLast(ctx context.Context, topic string, partition int32, window int) (map[string][]byte, error)
	highWaterMark(topic string, partition int32) (int64, error)
	topicIDs(topics []string) (map[string]sarama.Uuid, error)
}

// commitKey is the key of the record that names the transaction the offsets record
// belongs to: its value is a random 8-byte nonce drawn for each transaction. A topic name
// cannot contain a NUL byte, so it never meets a topic's record. After a commit whose
// outcome is unknown, the task reads the record back once the transaction is settled: its
// own nonce means the transaction committed.
const commitKey = "\x00commit"

// write sends the record of every source topic — the consumed position where the task
// processed input, else the committed offset — and the record naming the transaction by
// its nonce.
func (r *offsetsRecord) write(consumed map[string]int64, nonce uint64, send func(key, value []byte) error) error {
	for _, topic := range r.sources {
		off, ok := consumed[topic]
		if !ok {
			if off = r.committed.of(topic); off < 0 {
				continue
			}
		}
		if err := send([]byte(topic), encodeOffset(off, r.ids[topic])); err != nil {
			return err
		}
	}
	return send([]byte(commitKey), binary.BigEndian.AppendUint64(nil, nonce))
}

// recordRead says why a task reads its offsets record back.
type recordRead int

const (
	// readAtStart: the task starts (a session's start, or its worker's restart within
	// one); the claim's start is the group coordinator's answer.
	readAtStart recordRead = iota
	// readAtSettle: after a commit whose outcome was unknown; the record may hold that
	// commit's offsets, which the task did not know committed, and the coordinator was
	// not asked.
	readAtSettle
)

// read reads the record of the last committed transaction, moves the committed offsets
// up to it, and returns the nonce of that transaction. At a start, a record above both
// the group's committed offset and the task's own commits means the coordinator
// answered a stale offset; it is logged. A record for another incarnation of
// a topic (its ID changed, or the offset is above the partition's high-water mark) is
// ignored with a warning: the topic was deleted and created anew, and its new records
// must not be skipped.
func (r *offsetsRecord) read(ctx context.Context, src offsetsSource, why recordRead) (nonce uint64, err error) {
	last, err := src.readLast(ctx, r.topic, r.partition, 4*(len(r.sources)+1)+16)
	if err != nil {
		return 0, fmt.Errorf("read the offsets record %s/%d: %w", r.topic, r.partition, err)
	}
	ids, err := src.topicIDs(r.sources)
	if err != nil {
		r.logger.Warn("could not read the source topics' IDs; a recreated topic is recognised only by its end offset", "error", err)
	}
	r.noteTopicIDs(ids)
	for _, topic := range r.sources {
		v, ok := last[topic]
		if !ok {
			continue
		}
		if err := r.apply(topic, v, ids, src, why); err != nil {
			return 0, err
		}
	}
	if v := last[commitKey]; len(v) == 8 {
		nonce = binary.BigEndian.Uint64(v)
	}
	return nonce, nil
}

// noteTopicIDs records the source topics' current IDs; a topic whose ID changed while
// the task ran was recreated, and what the task knew of its offsets is forgotten.
func (r *offsetsRecord) noteTopicIDs(ids map[string]sarama.Uuid) {
	if r.ids == nil {
		r.ids = map[string]sarama.Uuid{}
	}
	for topic, current := range ids {
		if prev, ok := r.ids[topic]; ok && prev != current {
			r.logger.Warn("source topic was deleted and created anew while the task ran; forgetting its committed offsets",
				"topic", topic, "partition", r.partition, "old_id", prev.String(), "new_id", current.String())
			r.committed.forget(topic)
		}
		r.ids[topic] = current
	}
}

// apply moves topic's committed offset up to its recorded value v, unless v belongs to
// an earlier topic of the same name.
func (r *offsetsRecord) apply(topic string, v []byte, ids map[string]sarama.Uuid, src offsetsSource, why recordRead) error {
	floor, id, err := decodeOffset(v)
	if err != nil {
		r.logger.Warn("ignoring an unreadable offsets record", "topic", topic, "partition", r.partition, "error", err)
		return nil
	}
	if current, known := ids[topic]; known && id != (sarama.Uuid{}) && id != current {
		r.logger.Warn("SOURCE TOPIC RECREATED: the task's offsets record is for an earlier topic of this name; ignoring it and reading the new topic from its committed offset",
			"topic", topic, "partition", r.partition, "recorded_id", id.String(), "current_id", current.String(), "recorded_offset", floor)
		return nil
	}
	if floor > 0 {
		hwm, err := src.highWaterMark(topic, r.partition)
		if err != nil {
			return fmt.Errorf("end offset of %s/%d: %w", topic, r.partition, err)
		}
		if floor > hwm {
			r.logger.Warn("SOURCE TOPIC RECREATED: the task's offsets record is above the partition's end; ignoring it and reading the new topic from its committed offset",
				"topic", topic, "partition", r.partition, "recorded_offset", floor, "end_offset", hwm)
			return nil
		}
	}
	// At a settle the record is the unknown commit's own, above what the task knew
	// committed: no stale answer of the coordinator, which was not asked (the warning
	// appeared after every unknown outcome that committed).
	if claim := r.committed.of(topic); why == readAtStart && claim >= 0 && claim < floor {
		r.logger.Warn("the group coordinator answered a committed offset older than the task's own record; skipping the committed records in between",
			"topic", topic, "partition", r.partition, "coordinator", claim, "recorded", floor, "known_from", "its offsets record, read at this start")
	}
	r.committed.advance(topic, floor)
	return nil
}

// encodeOffset makes the value of a topic's record: the offset, 8 bytes big-endian, and,
// when known, the topic's 16-byte ID. An offset recorded for a topic that was since
// deleted and created anew must not hold for the new one (it would skip its records).
func encodeOffset(offset int64, id sarama.Uuid) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 24), uint64(offset))
	if id != (sarama.Uuid{}) {
		v = append(v, id[:]...)
	}
	return v
}

var errBadOffsetRecord = errors.New("malformed offsets record")

// decodeOffset reads a topic's record. Records written before topic IDs were recorded
// are 8 bytes long and have a zero ID.
func decodeOffset(v []byte) (offset int64, id sarama.Uuid, err error) {
	switch len(v) {
	case 8:
	case 24:
		copy(id[:], v[8:])
	default:
		return 0, id, fmt.Errorf("%w: %d bytes, want 8 or 24", errBadOffsetRecord, len(v))
	}
	offset = int64(binary.BigEndian.Uint64(v))
	if offset < 0 {
		return 0, id, fmt.Errorf("%w: negative offset %d", errBadOffsetRecord, offset)
	}
	return offset, id, nil
}
