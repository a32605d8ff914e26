package eddy

import "github.com/eddy-streams/eddy/processor"

// SetBeforeCommitHook makes every task commit call fn first; an error from fn fails
// that commit the way an abortable producer error does. For fault-injection tests.
func SetBeforeCommitHook(a *App, fn func(task processor.TaskID) error) {
	a.hooks.beforeCommit = fn
}
