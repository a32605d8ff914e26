package eddy

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/eddy-streams/eddy/processor"
)

// State is the state of an App, as /healthz and /readyz report it.
type State string

// The states of an App.
const (
	StateCreated     State = "created"     // Run not called yet
	StateStarting    State = "starting"    // checking topics, joining the group
	StateRebalancing State = "rebalancing" // between two group generations
	StateRestoring   State = "restoring"   // some assigned task is restoring its stores
	StateRunning     State = "running"     // every assigned task is restored and processing
	StateStopping    State = "stopping"    // Run's context ended: committing and leaving
	StateStopped     State = "stopped"     // Run returned nil
	StateFailed      State = "failed"      // Run returned an error
)

var allStates = []string{
	string(StateCreated), string(StateStarting), string(StateRebalancing), string(StateRestoring),
	string(StateRunning), string(StateStopping), string(StateStopped), string(StateFailed),
}

// taskState is the life of one task on this instance.
type taskState int32

const (
	taskCreated   taskState = iota // assigned, not started
	taskRestoring                  // restoring its stores
	taskRunning                    // processing
	taskSuspended                  // between sessions, still assigned
	taskClosed                     // gone
)

func (s taskState) String() string {
	return [...]string{"created", "restoring", "running", "suspended", "closed"}[s]
}

// next lists the states a task may go to from each state, as Kafka Streams' Task.State
// does: a session restores (or skips restoring) then runs; it ends suspended, from
// restoring when the rebalance came first; the next session restores again (a kept task
// finds its stores current); closing ends every state.
var next = [...][]taskState{
	taskCreated:   {taskRestoring, taskClosed},
	taskRestoring: {taskRunning, taskSuspended, taskClosed},
	taskRunning:   {taskSuspended, taskClosed},
	taskSuspended: {taskRestoring, taskClosed},
	taskClosed:    nil,
}

// errIllegalTransition is a bug in the runtime: a task asked to go to a state it cannot
// reach from its own. The application stops rather than run a task in a state nobody
// planned for.
var errIllegalTransition = errors.New("eddy: illegal task state transition (a bug in eddy; please report it)")

// canBecome reports whether a task in state s may go to state to.
func (s taskState) canBecome(to taskState) bool {
	return slices.Contains(next[s], to)
}

// transition moves a task's state to to, checked against next.
func transition(state *atomic.Int32, task processor.TaskID, to taskState) error {
	for {
		from := taskState(state.Load())
		if !from.canBecome(to) {
			return fmt.Errorf("%w: task %s from %s to %s", errIllegalTransition, task, from, to)
		}
		if state.CompareAndSwap(int32(from), int32(to)) {
			return nil
		}
	}
}

// State returns the application's state.
func (a *App) State() State {
	if s := a.final.Load(); s != nil {
		return *s
	}
	rt := a.rt.Load()
	if rt == nil {
		if a.started.Load() {
			return StateStarting
		}
		return StateCreated
	}
	return rt.state()
}

func (rt *runtime) state() State {
	switch {
	case rt.failed.Load():
		return StateFailed
	case rt.stopping.Load():
		return StateStopping
	case !rt.inSession.Load():
		if rt.sessions.Load() == 0 {
			return StateStarting
		}
		return StateRebalancing
	}
	for _, t := range rt.registry.all() {
		if st := taskState(t.state.Load()); st != taskRunning && st != taskClosed {
			return StateRestoring
		}
	}
	return StateRunning
}
