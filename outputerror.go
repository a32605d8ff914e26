package eddy

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
)

// OutputRecordError is the error Run returns for an output record that can never be
// written (larger than its topic's max.message.bytes, refused as invalid): it names the
// input record that caused it, the output topic and partition, the record's size and
// the topic's limit.
type OutputRecordError = task.OutputError

// explainOutput returns err as an *OutputRecordError when it holds the broker's
// permanent refusal of an output record (producer.Permanent): of the refused records
// (a batch is refused whole) the largest, with its topic's max.message.bytes. Any other
// error is returned as it is.
func (rt *runtime) explainOutput(err error) error {
	var worst *producer.RecordError
	walkErrors(err, func(e error) {
		if re, ok := e.(*producer.RecordError); ok && producer.Permanent(re) && (worst == nil || re.Size > worst.Size) {
			worst = re
		}
	})
	if worst == nil {
		return err
	}
	oe := &task.OutputError{Topic: worst.Topic, Partition: worst.Partition, Size: worst.Size, Cause: worst.Err, Err: err}
	if o := worst.Origin; o != nil {
		oe.Input = &processor.RecordMetadata{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset}
	}
	if errors.Is(worst, sarama.ErrMessageSizeTooLarge) || errors.Is(worst, sarama.ErrMessageSetSizeTooLarge) {
		limit, lerr := rt.maxMessageBytes(worst.Topic)
		if lerr != nil {
			rt.logger.Warn("cannot read the output topic's max.message.bytes, to name it in the error", "topic", worst.Topic, "error", lerr)
		}
		oe.Limit = limit
	}
	return oe
}

// outputLimit implements taskHost: the topic's max.message.bytes, or 0 when it cannot
// be read (the DescribeConfigs ACL missing, say): the check before sending is then
// skipped, with a warning once per topic, and a record too large is the broker's to
// refuse (explainOutput).
func (rt *runtime) outputLimit(topic string) int {
	n, err := rt.maxMessageBytes(topic)
	if err != nil {
		rt.partsMu.Lock()
		if rt.msgLimits == nil {
			rt.msgLimits = map[string]int{}
		}
		rt.msgLimits[topic] = 0
		rt.partsMu.Unlock()
		rt.logger.Warn("cannot read an output topic's max.message.bytes: a record too large for it is found only by the broker's refusal, which costs rollbacks "+
			"(and stops an at-least-once application whatever Config.OnOutputError says); grant the application DescribeConfigs on the topic", "topic", topic, "error", err)
	}
	return n
}

// walkErrors calls fn on err and every error it wraps, joined ones included.
func walkErrors(err error, fn func(error)) {
	if err == nil {
		return
	}
	fn(err)
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walkErrors(e, fn)
		}
	case interface{ Unwrap() error }:
		walkErrors(u.Unwrap(), fn)
	}
}

// maxMessageBytes returns (and caches) a topic's max.message.bytes, the largest record
// batch its partitions take: the topic's own setting or the broker's message.max.bytes.
func (rt *runtime) maxMessageBytes(topic string) (int, error) {
	rt.partsMu.Lock()
	n, ok := rt.msgLimits[topic]
	rt.partsMu.Unlock()
	if ok {
		return n, nil
	}
	entries, err := rt.admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"max.message.bytes"}})
	if err != nil {
		return 0, fmt.Errorf("describe the configs of topic %q: %w", topic, err)
	}
	for _, e := range entries {
		if e.Name == "max.message.bytes" {
			if n, err = strconv.Atoi(e.Value); err != nil {
				return 0, fmt.Errorf("topic %q: max.message.bytes %q: %w", topic, e.Value, err)
			}
			rt.partsMu.Lock()
			if rt.msgLimits == nil {
				rt.msgLimits = map[string]int{}
			}
			rt.msgLimits[topic] = n
			rt.partsMu.Unlock()
			return n, nil
		}
	}
	return 0, fmt.Errorf("topic %q: the broker gave no max.message.bytes", topic)
}
