package eddy

import (
	"context"
	"time"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/txproducer"
)

// interpose adds a wrapper around every transaction's commit step.
func interpose(a *App, wrap func(tasks func() []processor.TaskID, next commitFunc) commitFunc) {
	prev := a.commitSeam
	a.commitSeam = func(tasks func() []processor.TaskID, next commitFunc) commitFunc {
		if prev != nil {
			next = prev(tasks, next)
		}
		return wrap(tasks, next)
	}
}

// SetBeforeCommitHook makes every commit call fn first for each task whose work the
// transaction carries; an error from fn fails that commit the way an abortable producer
// error does. For fault-injection tests.
func SetBeforeCommitHook(a *App, fn func(task processor.TaskID) error) {
	interpose(a, func(tasks func() []processor.TaskID, next commitFunc) commitFunc {
		return func(ctx context.Context, offsets map[string]map[int32]int64) error {
			for _, id := range tasks() {
				if err := fn(id); err != nil {
					return &txproducer.Error{Op: "commit (injected)", Class: txproducer.Abortable, Err: err}
				}
			}
			return next(ctx, offsets)
		}
	})
}

// SetBeforeCommitUnknownHook makes every commit call fn first for each task whose work
// the transaction carries; an error from fn fails that commit before it is sent, the way
// an error of unknown outcome does (a timeout): the transaction stays open and the worker
// settles it by recreating its producer. For fault-injection tests.
func SetBeforeCommitUnknownHook(a *App, fn func(task processor.TaskID) error) {
	interpose(a, func(tasks func() []processor.TaskID, next commitFunc) commitFunc {
		return func(ctx context.Context, offsets map[string]map[int32]int64) error {
			for _, id := range tasks() {
				if err := fn(id); err != nil {
					return &txproducer.Error{Op: "commit (injected: outcome unknown)", Class: txproducer.Indefinite, Err: err}
				}
			}
			return next(ctx, offsets)
		}
	})
}

// SetAfterCommitHook makes every commit call fn, for each task whose work the
// transaction carries, once the transaction committed; an error from fn makes the commit
// look as if its EndTxn answer was lost: the outcome is unknown. For fault-injection
// tests.
func SetAfterCommitHook(a *App, fn func(task processor.TaskID) error) {
	interpose(a, func(tasks func() []processor.TaskID, next commitFunc) commitFunc {
		return func(ctx context.Context, offsets map[string]map[int32]int64) error {
			if err := next(ctx, offsets); err != nil {
				return err
			}
			for _, id := range tasks() {
				if err := fn(id); err != nil {
					return &txproducer.Error{Op: "commit (injected: answer lost)", Class: txproducer.Indefinite, Err: err}
				}
			}
			return nil
		}
	})
}

// SetBeforeJoinHook makes fn run at the start of every join of the application's
// member, after the commit gate shut, on sarama's goroutine. For fault-injection tests.
func SetBeforeJoinHook(a *App, fn func()) { a.joinSeam = fn }

// EndCooperativeSession asks the runtime to end its live cooperative session, as a
// worker that was fenced or dropped its transaction does (runtime.requestRejoin); it
// reports whether there was one.
func EndCooperativeSession(a *App) bool {
	rt := a.rt.Load()
	if rt == nil {
		return false
	}
	c := rt.liveCrew()
	if c == nil {
		return false
	}
	rt.requestRejoin(c.sess)
	return true
}

// ConsoleNodeIDs lists the graph node IDs the console draws for the application's
// topology ("node:NAME", "store:NAME", "topic:NAME").
func ConsoleNodeIDs(a *App) []string { return consoleNodeIDs(a.g, a.cfg.ApplicationID) }

// SetUnstableAfter sets how long group sessions may end on unstable offsets before the
// runtime reports it as an error (runtime.unstableAfter).
func SetUnstableAfter(a *App, d time.Duration) { a.unstableAfter = d }
