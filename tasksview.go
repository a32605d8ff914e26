package eddy

import (
	"sort"
	"time"

	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/processor"
)

// TasksView is the answer of GET /tasks (App.Handler): the tasks of this instance and
// where the others run, as this instance last learned it from the group.
type TasksView struct {
	ApplicationID string `json:"application_id"`
	// State is the instance's state, as /readyz reports it.
	State State `json:"state"`
	// Instance names this instance in Tasks: Config.InstanceID if set, else
	// AdvertisedAddr, else the state dir's instance ID.
	Instance string `json:"instance"`
	// GroupInstanceID is Config.InstanceID (static membership; empty: a dynamic
	// member); StateDirInstanceID is the ID kept in the state dir (InstanceIDFile)
	// that names the workers' transactional IDs; AdvertisedAddr is
	// Config.AdvertisedAddr.
	GroupInstanceID    string `json:"group_instance_id,omitempty"`
	StateDirInstanceID string `json:"state_dir_instance_id,omitempty"`
	AdvertisedAddr     string `json:"advertised_addr,omitempty"`
	// Generation is the consumer-group generation of the last assignment (0: none
	// yet). It does not change when a static member restarts within the session
	// timeout: a generation that moves is a rebalance.
	Generation int32 `json:"generation"`
	// Tasks are this instance's tasks, in task order: the active ones, then the
	// standby and warm-up replicas (Config.NumStandbyReplicas, MaxWarmupReplicas).
	Tasks []TaskView `json:"tasks"`
	// Elsewhere are the tasks of the other instances that announced an
	// AdvertisedAddr, by that address (the group's last assignment).
	Elsewhere map[string][]string `json:"elsewhere,omitempty"`
}

// TaskView is one task of TasksView.
type TaskView struct {
	Task string `json:"task"`
	// Role is "active" (the task processes here), "standby" (a standby replica:
	// its stores follow the changelogs here, and the task processes elsewhere) or
	// "warm-up" (a warm-up replica: a standby kept until the task, held on a caught-up
	// instance, can move here without a long restore; Config.AcceptableRecoveryLag).
	Role string `json:"role"`
	// State is the task's state on this instance: created (assigned, not started),
	// restoring, running or suspended (between two group sessions). A standby is
	// restoring until it first reads its changelogs to their end, then running.
	State    string `json:"state"`
	Instance string `json:"instance"`
	// Stores are the task's stores, in name order.
	Stores []StoreView `json:"stores,omitempty"`
	// InputLag is the records left to read per source topic of the task's partition
	// (running tasks; a transactional topic shows about one record, the commit marker).
	InputLag map[string]int64 `json:"input_lag,omitempty"`
	// StandbyRecords counts the changelog records a standby applied since it began
	// here; CaughtUpAt is when its last finished round of reading began: it holds every
	// change committed before then (the lag in time: a standby caught up a second ago
	// restores at most a second of changes when it becomes active); "running" once a
	// first round has finished, "restoring" before; StandbyError is the last read's failure, while
	// it retries.
	StandbyRecords int64      `json:"standby_records,omitempty"`
	CaughtUpAt     *time.Time `json:"caught_up_at,omitempty"`
	StandbyError   string     `json:"standby_error,omitempty"`
}

// StoreView is one store of a task in TaskView.
type StoreView struct {
	Store     string `json:"store"`
	Changelog string `json:"changelog,omitempty"`
	// Checkpoint is the changelog offset the store file holds (the next offset a restore
	// reads): a restart restores from here. It is written with the store's changes at
	// the first commit Config.StoreWriteInterval after the last write, and when the task
	// stops, so a task that commits nothing more may show one behind its last commit.
	// Absent while the task restores, and when none is written yet.
	Checkpoint *int64 `json:"checkpoint,omitempty"`
	// RestoreRemaining is the changelog offsets left to restore, while the task
	// restores the store (0 once restored in this session).
	RestoreRemaining *int64 `json:"restore_remaining,omitempty"`
	// Lag (standbys) is the changelog offsets the standby had left to read at its last
	// read (the last stable offset minus its checkpoint then): what a promotion would
	// restore, give or take the changes since.
	Lag *int64 `json:"lag,omitempty"`
}

// TasksView returns what GET /tasks shows: this instance's tasks (Tasks lists their
// IDs alone), their states, store checkpoints and lags, and where the others run.
func (a *App) TasksView() TasksView {
	v := TasksView{ApplicationID: a.cfg.ApplicationID, State: a.State(), GroupInstanceID: a.cfg.InstanceID, AdvertisedAddr: a.cfg.AdvertisedAddr, Tasks: []TaskView{}}
	rt := a.rt.Load()
	if rt != nil {
		v.StateDirInstanceID = rt.instance
	}
	v.Instance = v.GroupInstanceID
	if v.Instance == "" {
		v.Instance = v.AdvertisedAddr
	}
	if v.Instance == "" {
		v.Instance = v.StateDirInstanceID
	}
	if rt == nil {
		return v
	}
	var hosts map[string][]string
	v.Generation, hosts = rt.registry.assignment()
	for host, tasks := range hosts {
		if host == "" || host == a.cfg.AdvertisedAddr {
			continue
		}
		if v.Elsewhere == nil {
			v.Elsewhere = map[string][]string{}
		}
		v.Elsewhere[host] = tasks
	}
	tasks := rt.registry.all()
	sort.Slice(tasks, func(i, j int) bool { return taskLess(tasks[i].id, tasks[j].id) })
	for _, t := range tasks {
		if tv, ok := t.view(); ok {
			tv.Instance = v.Instance
			v.Tasks = append(v.Tasks, tv)
		}
	}
	for _, sb := range rt.standbyInfos() {
		tv := sb.view(rt)
		tv.Instance = v.Instance
		v.Tasks = append(v.Tasks, tv)
	}
	return v
}

// view describes a standby for /tasks.
func (sb standbyInfo) view(rt *runtime) TaskView {
	v := TaskView{Task: sb.ID.String(), Role: "standby", State: taskRestoring.String(), StandbyRecords: sb.Restored}
	if rt.assignor.warmups()[sb.ID] {
		v.Role = "warm-up"
	}
	if !sb.CaughtUp.IsZero() {
		v.State = taskRunning.String()
		at := sb.CaughtUp
		v.CaughtUpAt = &at
	}
	if sb.Err != nil {
		v.StandbyError = sb.Err.Error()
	}
	stores := make([]string, 0, len(sb.Checkpoints))
	for name := range sb.Checkpoints {
		stores = append(stores, name)
	}
	sort.Strings(stores)
	for _, name := range stores {
		cp, lag := sb.Checkpoints[name], sb.Lag[name]
		v.Stores = append(v.Stores, StoreView{Store: name, Changelog: names.ChangelogTopic(rt.cfg.ApplicationID, name), Checkpoint: &cp, Lag: &lag})
	}
	return v
}

func taskLess(a, b processor.TaskID) bool {
	if a.Subtopology != b.Subtopology {
		return a.Subtopology < b.Subtopology
	}
	return a.Partition < b.Partition
}

// view describes the task for /tasks; false once it is closed.
func (t *taskRunner) view() (TaskView, bool) {
	st := taskState(t.state.Load())
	if st == taskClosed {
		return TaskView{}, false
	}
	v := TaskView{Task: t.id.String(), Role: "active", State: st.String()}
	if st == taskRunning {
		if lag := t.inbox.lag(); len(lag) > 0 {
			v.InputLag = lag
		}
	}
	t.restoreMu.Lock()
	left := make(map[string]int64, len(t.restoreLeft))
	for k, n := range t.restoreLeft {
		left[k] = n
	}
	t.restoreMu.Unlock()
	names := make([]string, 0, len(t.sub.Stores))
	for _, s := range t.sub.Stores {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	t.queryMu.RLock()
	defer t.queryMu.RUnlock()
	for _, name := range names {
		sv := StoreView{Store: name, Changelog: t.changelogs[name]}
		if n, ok := left[name]; ok && st != taskRunning {
			sv.RestoreRemaining = &n
		}
		// The store file's checkpoint is read only while no restore writes it (a
		// restore from empty may replace the whole file).
		if t.set != nil && (st == taskRunning || st == taskSuspended) {
			if buf := t.set.Buffer(name); buf != nil {
				if off, ok, err := buf.Backend().Checkpoint(name); err == nil && ok {
					sv.Checkpoint = &off
				}
			}
		}
		v.Stores = append(v.Stores, sv)
	}
	return v, true
}
