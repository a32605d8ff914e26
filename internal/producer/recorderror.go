package producer

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// Origin is the input record whose processing produced an output record: what an error
// about the output record names, so the operator finds the record that caused it.
type Origin struct {
	Topic     string
	Partition int32
	Offset    int64
}

// sent is what the producer keeps with a record it sent (sarama's Metadata): the input
// record it came from, and the bytes it counts against its partition's batch limit
// (SendWithin; 0 when sent without one).
type sent struct {
	origin *Origin
	bytes  int
}

// recordDeltasMax is what a record in a batch of several can take beyond its size
// alone (RecordBatchSize counts a timestamp delta and an offset delta of 0): a
// timestamp delta of up to 10 bytes of varint, an offset delta of up to 5.
const recordDeltasMax = 9 + 4

// RecordError is the broker's (or sarama's) refusal of one output record: the topic and
// partition it was for, the size of a record batch holding it alone (what the broker
// measures against the topic's max.message.bytes, uncompressed), and the input record
// it came from (nil: none known, a punctuator's or a changelog's record).
type RecordError struct {
	Topic     string
	Partition int32
	Size      int
	Origin    *Origin
	Err       error
}

func (e *RecordError) Error() string {
	from := ""
	if e.Origin != nil {
		from = fmt.Sprintf(" from input record %s/%d offset %d", e.Origin.Topic, e.Origin.Partition, e.Origin.Offset)
	}
	return fmt.Sprintf("record to %s/%d (%d bytes)%s: %v", e.Topic, e.Partition, e.Size, from, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// Permanent reports whether err holds a refusal of a record that the same record meets
// again on every retry, in a transaction aborted and replayed as in a new one: too large
// for the topic (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, or sarama's own check against
// Producer.MaxMessageBytes), invalid (INVALID_RECORD: a compacted topic given a record
// without a key, say), or with a timestamp the topic's
// message.timestamp.{before,after}.max.ms refuses (INVALID_TIMESTAMP). Kafka Streams gives
// the same ones to its ProductionExceptionHandler rather than retrying them.
func Permanent(err error) bool {
	return errors.Is(err, sarama.ErrMessageSizeTooLarge) || errors.Is(err, sarama.ErrMessageSetSizeTooLarge) ||
		errors.Is(err, sarama.ErrInvalidRecord) || errors.Is(err, sarama.ErrInvalidTimestamp)
}

// RecordBatchSize is the size of a record batch (format v2, uncompressed) that holds
// one record with this key, value and headers: the 61 bytes of the batch header, then
// the record, its fields' lengths as zigzag varints. A broker refuses a batch larger
// than the topic's max.message.bytes (Kafka's LogValidator; kfake alike), so a record of
// a larger size can never be written, alone or not.
func RecordBatchSize(key, value []byte, headers []sarama.RecordHeader) int {
	body := 1 + 1 + 1 // attributes, timestamp delta 0, offset delta 0
	body += bytesSize(key) + bytesSize(value)
	body += varintSize(int64(len(headers)))
	for _, h := range headers {
		body += bytesSize(h.Key) + bytesSize(h.Value)
	}
	return recordBatchOverhead + varintSize(int64(body)) + body
}

// recordBatchOverhead is a v2 record batch's header: base offset, length, leader epoch,
// magic, CRC, attributes, last offset delta, first and max timestamps, producer ID and
// epoch, base sequence, record count.
const recordBatchOverhead = 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4

// bytesSize is a length-prefixed field: -1 for nil.
func bytesSize(b []byte) int {
	if b == nil {
		return varintSize(-1)
	}
	return varintSize(int64(len(b))) + len(b)
}

// varintSize is the length of v as a zigzag varint.
func varintSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// recordError describes a failed message of sarama's.
func recordError(m *sarama.ProducerMessage, err error) *RecordError {
	enc := func(e sarama.Encoder) []byte {
		if e == nil {
			return nil
		}
		b, _ := e.Encode()
		if b == nil {
			b = []byte{}
		}
		return b
	}
	re := &RecordError{Topic: m.Topic, Partition: m.Partition, Size: RecordBatchSize(enc(m.Key), enc(m.Value), m.Headers), Err: err}
	if s, ok := m.Metadata.(*sent); ok {
		re.Origin = s.origin
	}
	return re
}
