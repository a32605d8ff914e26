package task

import (
	"fmt"

	"github.com/eddy-streams/eddy/processor"
)

// OutputError is an output record that can never be written: the broker refuses it,
// or would (larger than the topic's max.message.bytes), however often the transaction
// is aborted and its input replayed. It names the input record that caused it (nil
// when none: a punctuator's output, a changelog record), the output topic and
// partition, the record's size and the topic's limit (0: not known), and says the way
// out.
type OutputError struct {
	Input     *processor.RecordMetadata
	Topic     string
	Partition int32
	// Size is the size of a record batch holding the record alone, uncompressed: what
	// the broker measures against Limit.
	Size int
	// Limit is the topic's max.message.bytes; 0 when not known.
	Limit int
	// Cause is the broker's answer; nil when eddy refused the record before sending it.
	Cause error
	// Err is the whole error the record's refusal came in (the chain errors.Is and
	// errors.As see); Cause when nil.
	Err error
}

func (e *OutputError) Error() string {
	from := "from no input record (a punctuator's or a cache flush's output)"
	if e.Input != nil {
		from = fmt.Sprintf("from input record %s/%d offset %d", e.Input.Topic, e.Input.Partition, e.Input.Offset)
	}
	what := fmt.Sprintf("output record to topic %q partition %d %s", e.Topic, e.Partition, from)
	var why string
	switch {
	case e.Limit > 0 && e.Size > e.Limit:
		why = fmt.Sprintf("is %d bytes, over the topic's max.message.bytes (%d): the broker can never take it", e.Size, e.Limit)
	case e.Limit > 0:
		// eddy keeps uncompressed batches within the limit (producer.SendWithin); with
		// compression on it does not check, and a batch can still exceed it.
		why = fmt.Sprintf("is %d bytes, within the topic's max.message.bytes (%d), yet the broker refused it: with Producer.Compression on (Config.Sarama) "+
			"the producer batches records up to Producer.MaxMessageBytes, which must then not exceed the topic's limit", e.Size, e.Limit)
	default:
		why = fmt.Sprintf("(%d bytes) was refused by the broker, and would be again on every retry", e.Size)
	}
	out := what + " " + why
	if e.Cause != nil {
		out += fmt.Sprintf(" (%v)", e.Cause)
	}
	fix := "fix the record or the topic's settings (max.message.bytes, message.timestamp.*, a compacted topic's records need keys)"
	if e.Limit > 0 && e.Size > e.Limit {
		fix = "raise the topic's max.message.bytes or make the record smaller"
	}
	if e.Cause == nil {
		return out + "; " + fix + ", or set Config.OnOutputError to SkipBadRecord (drop the record) or DeadLetterBadRecord " +
			"(write its input record to Config.DeadLetterTopic) to go on without it"
	}
	return out + "; " + fix + ", or, under exactly-once, set Config.OnOutputError to SkipBadRecord or DeadLetterBadRecord to go on without it " +
		"(under at-least-once they apply only to records eddy finds too large before sending them: with Producer.Compression off and the DescribeConfigs ACL on the topic)"
}

func (e *OutputError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return e.Cause
}
