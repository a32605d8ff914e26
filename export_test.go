package eddy

import (
	"context"

	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/txproducer"
)

// interpose adds a wrapper around every task's commit step.
func interpose(a *App, wrap func(id processor.TaskID, next commitFunc) commitFunc) {
	prev := a.commitSeam
	a.commitSeam = func(id processor.TaskID, next commitFunc) commitFunc {
		if prev != nil {
			next = prev(id, next)
		}
		return wrap(id, next)
	}
}

// SetBeforeCommitHook makes every task commit call fn first; an error from fn fails
// that commit the way an abortable producer error does. For fault-injection tests.
func SetBeforeCommitHook(a *App, fn func(task processor.TaskID) error) {
	interpose(a, func(id processor.TaskID, next commitFunc) commitFunc {
		return func(ctx context.Context, offsets map[string]map[int32]int64) error {
			if err := fn(id); err != nil {
				return &txproducer.Error{Op: "commit (injected)", Class: txproducer.Abortable, Err: err}
			}
			return next(ctx, offsets)
		}
	})
}

// SetAfterCommitHook makes every task commit call fn once its transaction committed; an
// error from fn makes the commit look as if its EndTxn answer was lost: the outcome is
// unknown to the task. For fault-injection tests.
func SetAfterCommitHook(a *App, fn func(task processor.TaskID) error) {
	interpose(a, func(id processor.TaskID, next commitFunc) commitFunc {
		return func(ctx context.Context, offsets map[string]map[int32]int64) error {
			if err := next(ctx, offsets); err != nil {
				return err
			}
			if err := fn(id); err != nil {
				return &txproducer.Error{Op: "commit (injected: answer lost)", Class: txproducer.Indefinite, Err: err}
			}
			return nil
		}
	})
}
