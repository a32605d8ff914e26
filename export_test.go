package eddy

import "github.com/eddy-streams/eddy/processor"

// SetBeforeCommitHook makes every task commit call fn first; an error from fn fails
// that commit the way an abortable producer error does. For fault-injection tests.
func SetBeforeCommitHook(a *App, fn func(task processor.TaskID) error) {
	a.hooks.beforeCommit = fn
}

// SetAfterCommitHook makes every task commit call fn once its transaction committed; an
// error from fn makes the commit look as if its EndTxn answer was lost: the outcome is
// unknown to the task. For fault-injection tests.
func SetAfterCommitHook(a *App, fn func(task processor.TaskID) error) {
	a.hooks.afterCommit = fn
}
