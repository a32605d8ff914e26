package eddy

import (
	"errors"
	"fmt"

	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/txproducer"
)

// recovery is what the runtime does about a task's failure. classify decides it, in one
// place, from where the failure came: the producer (txproducer's classes), the runtime's
// own steps (taskError), the Kafka error codes inside it. Kafka Streams keeps the same
// apart: TaskMigratedException and TaskCorruptedException are the runtime's, not the
// producer's.
type recovery int

const (
	// abortTxn: the open transaction can be aborted: discard the store buffers, roll the
	// engine's time state back, replay the kept input.
	abortTxn recovery = iota
	// settleTxn: the outcome is unknown (a timeout, a lost answer): recreate the
	// producer, which settles the transaction; the offsets record says how; restore
	// the stores' tails and replay what was not committed.
	settleTxn
	// taskMigrated: another instance owns the task now: drop it without committing.
	taskMigrated
	// fatalFailure: the application cannot go on (authorization, an unsupported version,
	// a processor's error): stop it, naming the cause.
	fatalFailure
	// otherFailure: not the producer's nor a step of the transaction's: a processor's
	// error during processing stops the application; while a task is prepared (its
	// producer, restore, offsets record) the same kinds of failure are retried.
	otherFailure
)

func (r recovery) String() string {
	return [...]string{"abort", "settle", "migrated", "fatal", "other"}[r]
}

// taskError is a failure of one of the runtime's own steps around a transaction (the
// ownership check, reading the offsets record back, a restore after a rollback), with
// the recovery it calls for.
type taskError struct {
	task processor.TaskID
	op   string
	rec  recovery
	err  error
}

func (e *taskError) Error() string {
	return fmt.Sprintf("task %s: %s (%s): %v", e.task, e.op, e.rec, e.err)
}

func (e *taskError) Unwrap() error { return e.err }

// classify maps a failure to its recovery.
func classify(err error) recovery {
	var te *taskError
	if errors.As(err, &te) {
		return te.rec
	}
	var pe *txproducer.Error
	if errors.As(err, &pe) {
		return fromProducer(pe.Class)
	}
	switch producer.Classify(err, 0) {
	case txproducer.Fenced:
		return taskMigrated
	case txproducer.Fatal:
		return fatalFailure
	}
	return otherFailure
}

func fromProducer(c txproducer.Class) recovery {
	switch c {
	case txproducer.Abortable:
		return abortTxn
	case txproducer.Indefinite:
		return settleTxn
	case txproducer.Fenced:
		return taskMigrated
	}
	return fatalFailure
}

// recoverable reports whether a transaction's failure is one the task recovers from
// itself (abort or settle, then replay).
func recoverable(err error) bool {
	r := classify(err)
	return r == abortTxn || r == settleTxn
}

// isFenced reports whether err means another instance owns the task now.
func isFenced(err error) bool { return classify(err) == taskMigrated }
