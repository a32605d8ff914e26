package eddy

import (
	"slices"

	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
)

// Output records the broker refuses where eddy's check before sending cannot see it
// (compression on, the topic's max.message.bytes unreadable, an invalid record) are
// Config.OnOutputError's too: the refusal fails the whole transaction, so the worker
// aborts it and replays, and the replay finds the refused record again and hands it
// to the policy instead of sending it (issue 26: such a record stopped the
// application whatever the policy said).
//
// The broker refuses a record batch whole: every record of the partition's batch
// comes back with the error. So the first refusal only isolates the partition (its
// records go out one batch each in the replay), and the refusal of a batch of one
// names the record, which is remembered by its input record and output topic and
// partition.

// outputPartition is a partition of an output topic.
type outputPartition struct {
	topic     string
	partition int32
}

// refusedOutput is an output record the broker refused: the input record it came from
// and where it was going.
type refusedOutput struct {
	input     processor.RecordMetadata
	topic     string
	partition int32
}

// isolated reports whether the records to a partition go out one batch each.
func (t *taskRunner) isolated(topic string, partition int32) bool {
	return t.isolate[outputPartition{topic, partition}]
}

// refusal returns the broker's refusal of the output record the input record md sends
// to topic/partition, found in an earlier attempt, or nil.
func (t *taskRunner) refusal(md processor.RecordMetadata, topic string, partition int32) *task.OutputError {
	re, ok := t.refused[refusedOutput{md, topic, partition}]
	if !ok {
		return nil
	}
	in := md
	return &task.OutputError{Input: &in, Topic: topic, Partition: partition, Size: re.Size, Cause: re.Err}
}

// refuseOutputs prepares a replay that hands the output record the broker refused
// (permanently) in cause to Config.OnOutputError: it reports false when there is
// nothing to do (the policy is Fail, the refused record has no input record, or the
// replay would meet the same refusal again).
//
// Only the first permanent refusal, in the order the answers came, is the broker's
// word on its own batch: once a batch failed, sarama fails every record sent after it
// in the transaction with the same error, whatever partition it was for (seen: the
// offsets record and a small output record came back MESSAGE_TOO_LARGE beside the
// 5 KB one). The first refusal's batch may hold several records, all refused with it;
// its partition is isolated for the replay (one record per batch), and the first
// refusal in that partition then names its record.
func (w *worker) refuseOutputs(cause error) bool {
	if w.cfg.outputErrors == task.Fail {
		return false
	}
	var first *producer.RecordError
	walkErrors(cause, func(e error) {
		if re, ok := e.(*producer.RecordError); ok && first == nil && producer.Permanent(re) {
			first = re
		}
	})
	if first == nil || first.Origin == nil {
		return false // none, or a changelog's or a punctuator's record: no input to skip
	}
	md := processor.RecordMetadata{Topic: first.Origin.Topic, Partition: first.Origin.Partition, Offset: first.Origin.Offset}
	t := w.taskOf(md)
	if t == nil {
		return false
	}
	tp := outputPartition{first.Topic, first.Partition}
	if !t.isolated(tp.topic, tp.partition) {
		if t.isolate == nil {
			t.isolate = map[outputPartition]bool{}
		}
		t.isolate[tp] = true
		return true
	}
	key := refusedOutput{md, tp.topic, tp.partition}
	if _, again := t.refused[key]; again {
		return false
	}
	if t.refused == nil {
		t.refused = map[refusedOutput]*producer.RecordError{}
	}
	t.refused[key] = first
	return true
}

// taskOf returns the worker's task that reads the input record md, or nil.
func (w *worker) taskOf(md processor.RecordMetadata) *taskRunner {
	for _, t := range w.tasks {
		if t.id.Partition == md.Partition && slices.Contains(t.topics, md.Topic) {
			return t
		}
	}
	return nil
}

// forgetCommittedRefusals forgets, after a commit, the refusals whose input records the
// commit carried (their replays are over: the policy handled them in it), and their
// partitions go out in batches again. Kept isolated, every record to such a partition
// waited for the one before it to be answered, for as long as the task stayed. A
// partition whose refusal named no record (its batches, not a record, too large for
// the topic: compression on, so no batch limit) stays isolated, as it must.
func (t *taskRunner) forgetCommittedRefusals() {
	for key := range t.refused {
		if key.input.Offset < t.committed.of(key.input.Topic) {
			delete(t.refused, key)
			delete(t.isolate, outputPartition{key.topic, key.partition})
		}
	}
}
