package eddy

import (
	"slices"
	"sync"
	"time"

	"github.com/eddy-streams/eddy/processor"
)

// Warm-up replicas and probing rebalances (Kafka Streams' KIP-441). When the balanced
// plan gives a stateful task to a member whose state of it is more than
// Config.AcceptableRecoveryLag behind its changelogs (an instance that just joined, a
// state dir left from long ago) while another member is caught up (the one running
// it), the task stays on the caught-up member and the target gets a warm-up replica: a
// standby replica by another name (standbyTask), reported as role "warm-up". At most
// Config.MaxWarmupReplicas exist at a time in the group. A member with warm-ups asks
// for a new generation (a probing rebalance) every Config.ProbingRebalanceInterval
// once one of them is within the acceptable lag, and the plan that follows moves the
// task, which then restores only the tail its warm-up had not read.

// Kafka Streams' defaults: acceptable.recovery.lag, max.warmup.replicas,
// probing.rebalance.interval.ms.
const (
	defaultAcceptableRecoveryLag    = 10000
	defaultMaxWarmupReplicas        = 2
	defaultProbingRebalanceInterval = 10 * time.Minute
	// Every probing rebalance stops each task of the group for a moment (the protocol
	// is eager); Kafka Streams refuses intervals under a minute.
	minProbingRebalanceInterval = time.Second
)

// subscriptionVersion is the version a member puts in its subscription: 2 runs the
// warm-ups its assignment lists (assignmentData.Warmup). The leader gives a warm-up
// only to a member of version 2 or above; a task whose target is an older member moves
// there at once, as before.
const subscriptionVersion = 2

// warmupSubscription is the part of a member's subscription about warm-ups (embedded:
// the same JSON object).
type warmupSubscription struct {
	// Warmup are the tasks it kept a warm-up replica of in the last generation: the
	// leader gives those first when the warm-ups are fewer than the tasks to move.
	Warmup []string `json:"warmup,omitempty"`
}

// warmupAssignment is the part of a member's assignment about warm-ups (embedded).
type warmupAssignment struct {
	// Warmup are the tasks the receiving member keeps a warm-up replica of. A member
	// of an older eddy ignores it (and the leader gives it none).
	Warmup []string `json:"warmup,omitempty"`
}

// warmupPolicy is the assignor's part about warm-ups: the settings (from Config) and
// the warm-ups of this member (its assignment) and of the plan (leader).
type warmupPolicy struct {
	// acceptableLag is Config.AcceptableRecoveryLag: for holdBack, and for
	// assignTasks, which gives an orphaned task to a full holder within it.
	acceptableLag int64
	max           int // MaxWarmupReplicas; 0 or below: no warm-ups
	rack          string

	mu      sync.Mutex
	mine    []processor.TaskID            // this member's warm-ups, from its last assignment
	planned map[string][]processor.TaskID // leader: member → its warm-ups in the plan
}

// checkWarmups checks the warm-up settings and fills in their defaults.
func (c *Config) checkWarmups() error {
	if c.AcceptableRecoveryLag < 0 {
		return configErr("AcceptableRecoveryLag", "%d is negative: want the changelog records an instance's state of a task may be behind and still take it over at once (0: the default, 10000, as Kafka Streams' acceptable.recovery.lag)", c.AcceptableRecoveryLag)
	}
	if c.AcceptableRecoveryLag == 0 {
		c.AcceptableRecoveryLag = defaultAcceptableRecoveryLag
	}
	switch {
	case c.MaxWarmupReplicas < -1:
		return configErr("MaxWarmupReplicas", "%d: want -1 (no warm-up replicas: a task moves at once and restores where it goes), 0 (the default, 2, as Kafka Streams' max.warmup.replicas) or a positive count", c.MaxWarmupReplicas)
	case c.MaxWarmupReplicas == 0:
		c.MaxWarmupReplicas = defaultMaxWarmupReplicas
	}
	if c.ProbingRebalanceInterval < 0 {
		return configErr("ProbingRebalanceInterval", "%v is negative", c.ProbingRebalanceInterval)
	}
	if c.ProbingRebalanceInterval == 0 {
		c.ProbingRebalanceInterval = defaultProbingRebalanceInterval
	}
	if c.ProbingRebalanceInterval < minProbingRebalanceInterval {
		return configErr("ProbingRebalanceInterval", "%v is below %v: every probing rebalance stops each task of the group for a moment; use seconds to minutes (default 10 min, as Kafka Streams' probing.rebalance.interval.ms)", c.ProbingRebalanceInterval, minProbingRebalanceInterval)
	}
	return nil
}

// warmupMove is a stateful task kept on a caught-up member while the member the
// balanced plan gives it to (to) catches up.
type warmupMove struct {
	task processor.TaskID
	to   string
}

// holdBack keeps on a caught-up member each stateful task whose balanced target (in
// active, changed in place) is a member of subscriptionVersion or above whose state of
// it is more than the acceptable lag behind, when a member within it exists (the one
// running it, reporting caughtUp, else the holder with the least lag); the task goes
// there even past the balance bound. It returns the moves held back, in task order: the
// targets get the warm-ups (placeWarmups). A member that reported no state of a task
// is behind by the sum of its changelogs' end offsets (Kafka Streams counts a missing
// offset sum as 0); one whose lag is unknown (a sum above the end, ends not read) is
// not caught up. Without a caught-up member the task moves and restores, as before.
func (a *assignor) holdBack(tasks []processor.TaskID, ids []string, subs map[string]subscriptionData, active map[string][]processor.TaskID) []warmupMove {
	if a.warm.max <= 0 {
		return nil
	}
	runs := map[processor.TaskID]string{}
	for id, ts := range active {
		for _, t := range ts {
			runs[t] = id
		}
	}
	acceptable := a.warm.acceptableLag
	var candidates []processor.TaskID
	for _, t := range tasks {
		to, ok := runs[t]
		if !ok || !a.stateful[t.Subtopology] || subs[to].Version < subscriptionVersion {
			continue
		}
		if lag, ok := subs[to].lag[t]; ok && lag <= acceptable {
			continue
		}
		candidates = append(candidates, t)
	}
	if len(candidates) == 0 {
		return nil
	}
	var ends map[processor.TaskID]int64
	if a.endOffsets != nil {
		ends = a.endOffsets(candidates)
	}
	lagOf := func(id string, t processor.TaskID) (int64, bool) {
		if lag, ok := subs[id].lag[t]; ok {
			return lag, true
		}
		if _, reported := subs[id].Offsets[t.String()]; reported {
			return 0, false
		}
		end, ok := ends[t]
		return end, ok
	}
	var moves []warmupMove
	for _, t := range candidates {
		to := runs[t]
		if lag, ok := lagOf(to, t); ok && lag <= acceptable {
			continue
		}
		best, bestLag := "", int64(0)
		for _, id := range ids {
			if lag, ok := lagOf(id, t); ok && lag <= acceptable && (best == "" || lag < bestLag) {
				best, bestLag = id, lag
			}
		}
		if best == "" {
			continue
		}
		active[to] = slices.DeleteFunc(active[to], func(x processor.TaskID) bool { return x == t })
		active[best] = append(active[best], t)
		slices.SortFunc(active[best], compareTasks)
		moves = append(moves, warmupMove{task: t, to: to})
	}
	return moves
}

// placeWarmups gives the targets of the moves held back their warm-ups, at most
// a.warm.max in all: first those the target kept in the last generation (the furthest
// along), then in task order; a move beyond the budget stays where it is without one
// until a later plan has one free. A target already given a standby of the task keeps
// that replica as the task's warm-up (it leaves standby, changed in place, and counts
// for nothing: it runs anyway).
func (a *assignor) placeWarmups(moves []warmupMove, subs map[string]subscriptionData, standby map[string][]processor.TaskID) map[string][]processor.TaskID {
	out := map[string][]processor.TaskID{}
	kept := func(m warmupMove) bool { return slices.Contains(subs[m.to].Warmup, m.task.String()) }
	slices.SortStableFunc(moves, func(x, y warmupMove) int {
		switch kx, ky := kept(x), kept(y); {
		case kx && !ky:
			return -1
		case !kx && ky:
			return 1
		}
		return 0
	})
	budget := a.warm.max
	for _, m := range moves {
		if slices.Contains(standby[m.to], m.task) {
			standby[m.to] = slices.DeleteFunc(standby[m.to], func(x processor.TaskID) bool { return x == m.task })
		} else if budget > 0 {
			budget--
		} else {
			continue
		}
		out[m.to] = append(out[m.to], m.task)
	}
	for id := range out {
		slices.SortFunc(out[id], compareTasks)
	}
	return out
}

// planWarmups is the leader's warm-up step of a plan, after holdBack and the standbys:
// give the targets of the moves held back their warm-ups (a standby there becomes
// one), log them, and keep them for AssignmentData.
func (a *assignor) planWarmups(moves []warmupMove, subs map[string]subscriptionData, standby map[string][]processor.TaskID) {
	planned := a.placeWarmups(moves, subs, standby)
	if len(moves) > 0 && a.logf != nil {
		held := make([]string, 0, len(moves))
		for _, m := range moves {
			held = append(held, m.task.String()+"->"+m.to)
		}
		a.logf("tasks stay on a caught-up instance while their new one warms up (Config.AcceptableRecoveryLag); a probing rebalance moves them once warm",
			"held_back", held, "warmups", len(warmupTasks(planned)), "max_warmup_replicas", a.warm.max)
	}
	a.warm.mu.Lock()
	a.warm.planned = planned
	a.warm.mu.Unlock()
}

func warmupTasks(m map[string][]processor.TaskID) []processor.TaskID {
	var out []processor.TaskID
	for _, ts := range m {
		out = append(out, ts...)
	}
	return out
}

// warmupData is the warm-up part of member's assignment data in the last plan.
func (a *assignor) warmupData(member string) warmupAssignment {
	a.warm.mu.Lock()
	defer a.warm.mu.Unlock()
	var wa warmupAssignment
	for _, t := range a.warm.planned[member] {
		wa.Warmup = append(wa.Warmup, t.String())
	}
	return wa
}

// addWarmups completes a member's subscription: its rack and the warm-ups it kept.
func (a *assignor) addWarmups(sd *subscriptionData) {
	sd.Rack = a.warm.rack
	a.warm.mu.Lock()
	defer a.warm.mu.Unlock()
	for _, t := range a.warm.mine {
		sd.Warmup = append(sd.Warmup, t.String())
	}
}

// takeWarmups reads a member's warm-ups from its assignment data: the stateful tasks it
// neither runs (tasks) nor keeps a standby of (standby); they become this member's.
func (a *assignor) takeWarmups(ad assignmentData, tasks []processor.TaskID, standby map[processor.TaskID]bool) []processor.TaskID {
	set := map[processor.TaskID]bool{}
	for _, s := range ad.Warmup {
		if t, err := processor.ParseTaskID(s); err == nil && a.stateful[t.Subtopology] && !standby[t] && !slices.Contains(tasks, t) {
			set[t] = true
		}
	}
	mine := sortedTasks(set)
	a.warm.mu.Lock()
	a.warm.mine = slices.Clone(mine)
	a.warm.mu.Unlock()
	return mine
}

// warmups returns this member's warm-ups as a set.
func (a *assignor) warmups() map[processor.TaskID]bool {
	a.warm.mu.Lock()
	defer a.warm.mu.Unlock()
	out := make(map[processor.TaskID]bool, len(a.warm.mine))
	for _, t := range a.warm.mine {
		out[t] = true
	}
	return out
}
