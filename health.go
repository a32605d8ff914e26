package eddy

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
