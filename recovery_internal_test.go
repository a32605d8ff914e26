package eddy

import (
	"errors"
	"fmt"
	"testing"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/txproducer"
)

// classify is the one mapping from a failure to what the runtime does about it.
func TestClassify(t *testing.T) {
	id := processor.TaskID{Subtopology: 1, Partition: 2}
	inProcessing := func(err error) error { return &task.ProcessError{Task: id, Node: "sink", Err: err} }
	for _, tc := range []struct {
		name string
		err  error
		want recovery
	}{
		{"abortable producer error", &txproducer.Error{Op: "send", Class: txproducer.Abortable, Err: errors.New("x")}, abortTxn},
		{"indefinite producer error", &txproducer.Error{Op: "commit", Class: txproducer.Indefinite, Err: errors.New("x")}, settleTxn},
		{"fenced producer", &txproducer.Error{Op: "commit", Class: txproducer.Fenced, Err: sarama.ErrProducerFenced}, taskMigrated},
		{"fatal producer error", &txproducer.Error{Op: "init", Class: txproducer.Fatal, Err: sarama.ErrTransactionalIDAuthorizationFailed}, fatalFailure},
		{"a producer error from a sink, inside a ProcessError", inProcessing(&txproducer.Error{Op: "send", Class: txproducer.Abortable, Err: errors.New("x")}), abortTxn},
		{"a processor's own error", inProcessing(errors.New("bad input")), otherFailure},
		{"the ownership check: not ours", &taskError{task: id, op: "check ownership", rec: taskMigrated, err: errors.New("assigned to another member")}, taskMigrated},
		{"a restore after a rollback", fmt.Errorf("wrapped: %w", &taskError{task: id, op: "restore after rollback", rec: settleTxn, err: errors.New("x")}), settleTxn},
		{"authorization, raw", fmt.Errorf("restore: %w", sarama.ErrTopicAuthorizationFailed), fatalFailure},
		{"a network error, raw", errors.New("connection refused"), otherFailure},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("%s: classify = %s, want %s", tc.name, got, tc.want)
		}
	}
	if !recoverable(&txproducer.Error{Class: txproducer.Indefinite, Err: errors.New("x")}) || recoverable(inProcessing(errors.New("x"))) {
		t.Error("recoverable disagrees with classify")
	}
	if !isFenced(&taskError{task: id, rec: taskMigrated, err: errors.New("x")}) {
		t.Error("isFenced: a migrated task error is not fenced")
	}
}
