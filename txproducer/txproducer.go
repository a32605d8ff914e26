// Package txproducer is what a user or an operator reads of a task's producer: the
// errors it fails with. Under exactly-once each task has a transactional producer with
// the transactional ID <applicationID>-<taskID>, under at-least-once an idempotent one
// (the producer itself is internal to the module).
//
// A producer error is an *Error with a Class saying what it meant for the task: abort
// the transaction and reprocess, recreate the producer, drop the task because another
// instance owns it (ErrFenced), or stop the application (Fatal). The runtime recovers
// from the first three itself; an error of class Fatal (bad configuration,
// authorization, an unsupported broker version) stops the application and is returned
// by its Run, where errors.As finds the *Error and its operation.
package txproducer

import (
	"errors"
	"fmt"
)

// Class says what a producer error means for the task.
type Class int

const (
	// Abortable: abort the transaction, discard the store buffers, reprocess the batch.
	Abortable Class = iota
	// Indefinite: the outcome is unknown (a timeout, a broken connection): close the
	// producer, create a new one (which settles the open transaction), re-read the
	// committed offset and restore the stores' tail before going on.
	Indefinite
	// Fenced: another producer of the same task exists, so another instance owns the
	// task now: drop it quietly.
	Fenced
	// Fatal: the producer cannot go on and the error is not one of the above (bad
	// configuration, authorization): stop the application.
	Fatal
)

func (c Class) String() string {
	return [...]string{"abortable", "indefinite", "fenced", "fatal"}[c]
}

// Error is a producer error with its class.
type Error struct {
	Op    string
	Class Class
	Err   error
}

func (e *Error) Error() string { return fmt.Sprintf("producer: %s (%s): %v", e.Op, e.Class, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrFenced) true for errors of class Fenced.
func (e *Error) Is(target error) bool { return target == ErrFenced && e.Class == Fenced }

// ErrFenced is wrapped by errors of class Fenced.
var ErrFenced = errors.New("producer fenced: another instance owns the task")
