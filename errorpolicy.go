package eddy

import "github.com/eddy-streams/eddy/internal/task"

// BadRecordPolicy says what happens to an input record that cannot be deserialized.
type BadRecordPolicy int

const (
	// FailOnBadRecord stops the application with an error naming the topic, partition
	// and offset (the default). Nothing past the record is committed.
	FailOnBadRecord BadRecordPolicy = iota
	// SkipBadRecord drops the record with a log line and a metric.
	SkipBadRecord
	// DeadLetterBadRecord writes the record as it was read to Config.DeadLetterTopic,
	// with its origin (eddy.dlq.topic, eddy.dlq.partition, eddy.dlq.offset) and the error
	// (eddy.dlq.error) in headers, inside the task's transaction, and goes on.
	DeadLetterBadRecord
)

// checkPolicies checks the bad record policies: each known, and DeadLetterTopic set
// where one writes to it.
func (c *Config) checkPolicies() error {
	for _, p := range []struct {
		name   string
		policy BadRecordPolicy
	}{{"OnBadRecord", c.OnBadRecord}, {"OnOutputError", c.OnOutputError}, {"OnProcessingError", c.OnProcessingError}} {
		switch p.policy {
		case FailOnBadRecord, SkipBadRecord:
		case DeadLetterBadRecord:
			if c.DeadLetterTopic == "" {
				return configErr("DeadLetterTopic", "required with %s: DeadLetterBadRecord", p.name)
			}
		default:
			return configErr(p.name, "unknown value %d", p.policy)
		}
	}
	return nil
}

// deadLettering reports whether a policy writes records to DeadLetterTopic.
func (c *Config) deadLettering() bool {
	return c.OnBadRecord == DeadLetterBadRecord || c.OnOutputError == DeadLetterBadRecord || c.OnProcessingError == DeadLetterBadRecord
}

// taskPolicy is a BadRecordPolicy as the task engine knows it.
func taskPolicy(p BadRecordPolicy) task.ErrorPolicy {
	switch p {
	case SkipBadRecord:
		return task.Skip
	case DeadLetterBadRecord:
		return task.DeadLetter
	}
	return task.Fail
}

// ProcessError is the error Run returns when a processor, a punctuator or a
// deserializer (under FailOnBadRecord) fails: it names the task, the node and the
// record's topic, partition and offset.
type ProcessError = task.ProcessError

// Headers of a dead-lettered record (DeadLetterBadRecord): where it came from and why.
const (
	HeaderDeadLetterTopic     = task.HeaderDLQTopic
	HeaderDeadLetterPartition = task.HeaderDLQPartition
	HeaderDeadLetterOffset    = task.HeaderDLQOffset
	HeaderDeadLetterError     = task.HeaderDLQError
	HeaderDeadLetterNode      = task.HeaderDLQNode
	HeaderDeadLetterTask      = task.HeaderDLQTask
)
