package eddy

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/eddy-streams/eddy/processor"
)

// Every transition of a task's state is checked against the table of Kafka Streams'
// Task.State; an illegal one is an error naming the task and both states.
func TestTaskStateTransitions(t *testing.T) {
	legal := map[[2]taskState]bool{
		{taskCreated, taskRestoring}: true, {taskCreated, taskClosed}: true,
		{taskRestoring, taskRunning}: true, {taskRestoring, taskSuspended}: true, {taskRestoring, taskClosed}: true,
		{taskRunning, taskSuspended}: true, {taskRunning, taskClosed}: true,
		{taskSuspended, taskRestoring}: true, {taskSuspended, taskClosed}: true,
	}
	id := processor.TaskID{Subtopology: 1, Partition: 3}
	for from := taskCreated; from <= taskClosed; from++ {
		for to := taskCreated; to <= taskClosed; to++ {
			var st atomic.Int32
			st.Store(int32(from))
			err := transition(&st, id, to)
			if legal[[2]taskState{from, to}] {
				if err != nil || taskState(st.Load()) != to {
					t.Errorf("%s → %s: %v, state %s; want legal", from, to, err, taskState(st.Load()))
				}
				continue
			}
			if !errors.Is(err, errIllegalTransition) {
				t.Errorf("%s → %s: %v; want errIllegalTransition", from, to, err)
			}
			if taskState(st.Load()) != from {
				t.Errorf("%s → %s refused but the state changed to %s", from, to, taskState(st.Load()))
			}
			if err != nil && err.Error() != "eddy: illegal task state transition (a bug in eddy; please report it): task 1_3 from "+from.String()+" to "+to.String() {
				t.Errorf("error text: %q", err)
			}
		}
	}
}
