package eddy

import (
	"slices"

	"github.com/eddy-streams/eddy/processor"
)

// assignTasks spreads tasks over members (sorted IDs): at most ceil(tasks/members)
// each; first to the previous owner, then to a member holding the task's local state
// (the freshest first), then to the least loaded member. A task whose previous owner
// is gone goes to a holder whose state is within acceptable records of its changelogs
// (Config.AcceptableRecoveryLag) even when that holder is full: a killed instance's
// tasks go to their standbys, not to a member with room and no state. Without it, a
// survivor full with its own tasks left a killed instance's task to a member with room
// and no state: on 3 instances with 1 standby, 2 of the 3 moved tasks restored their
// whole changelogs (integration/failover, TestKilledInstanceTasksResumeFromStandby:
// 5,097 of 9,191 records). The imbalance lasts until the next rebalance.
func assignTasks(tasks []processor.TaskID, ids []string, subs map[string]subscriptionData, acceptable int64) map[string][]processor.TaskID {
	out := map[string][]processor.TaskID{}
	if len(ids) == 0 {
		return out
	}
	capacity := (len(tasks) + len(ids) - 1) / len(ids)
	owner, holders := claims(ids, subs)
	assigned := map[processor.TaskID]bool{}
	give := func(id string, t processor.TaskID, limit int) bool {
		if assigned[t] || len(out[id]) >= limit {
			return false
		}
		out[id] = append(out[id], t)
		assigned[t] = true
		return true
	}
	for _, t := range tasks {
		if id, ok := owner[t]; ok {
			give(id, t, capacity)
		}
	}
	for _, t := range tasks {
		// holders[t] is sorted freshest first: the caught-up holders are its first warm.
		hs, warm := holders[t], 0
		for warm < len(hs) {
			if lag, ok := subs[hs[warm]].lag[t]; !ok || lag > acceptable {
				break
			}
			warm++
		}
		for _, id := range hs[:warm] {
			if give(id, t, capacity) {
				break
			}
		}
		if _, owned := owner[t]; !owned && warm > 0 {
			give(hs[0], t, len(tasks))
		}
		for _, id := range hs[warm:] {
			if give(id, t, capacity) {
				break
			}
		}
	}
	for _, t := range tasks {
		if !assigned[t] {
			give(leastLoaded(out, ids, capacity, t.Subtopology), t, capacity)
		}
	}
	return out
}

// caughtUp is what a member reports in Offsets for a task it runs (Kafka Streams'
// LATEST_OFFSET): its state is the changelog's end.
const caughtUp = -2

// readLags fills each member's lag per task from the Offsets it reported and the
// changelogs' end offsets (one ListOffsets per changelog partition of the tasks some
// member reported state of). A sum above the end (a changelog recreated since) or a
// task without end offsets gives no lag: such a holder comes after those with one.
func (a *assignor) readLags(tasks []processor.TaskID, ids []string, subs map[string]subscriptionData) {
	wanted := map[processor.TaskID]bool{}
	reported := map[string]map[processor.TaskID]int64{}
	for _, id := range ids {
		for s, off := range subs[id].Offsets {
			t, err := processor.ParseTaskID(s)
			if err != nil || !a.stateful[t.Subtopology] {
				continue
			}
			if reported[id] == nil {
				reported[id] = map[processor.TaskID]int64{}
			}
			reported[id][t] = off
			if off != caughtUp {
				wanted[t] = true
			}
		}
	}
	var ends map[processor.TaskID]int64
	if len(wanted) > 0 && a.endOffsets != nil {
		ends = a.endOffsets(sortedTasks(wanted))
	}
	for _, id := range ids {
		sd := subs[id]
		sd.lag = map[processor.TaskID]int64{}
		for t, off := range reported[id] {
			end, ok := ends[t]
			switch {
			case off == caughtUp:
				sd.lag[t] = 0
			case ok && off >= 0 && off <= end:
				sd.lag[t] = end - off
			}
		}
		subs[id] = sd
	}
}

// claims reads the members' subscriptions: the previous owner of each task (the first
// member, in ID order, to claim it) and the members holding its local state, the
// freshest first (the least lag readLags found).
func claims(ids []string, subs map[string]subscriptionData) (owner map[processor.TaskID]string, holders map[processor.TaskID][]string) {
	owner = map[processor.TaskID]string{}
	holders = map[processor.TaskID][]string{}
	for _, id := range ids {
		for _, s := range subs[id].Owned {
			if t, err := processor.ParseTaskID(s); err == nil {
				if _, taken := owner[t]; !taken {
					owner[t] = id
				}
			}
		}
		for _, s := range subs[id].State {
			if t, err := processor.ParseTaskID(s); err == nil {
				holders[t] = append(holders[t], id)
			}
		}
	}
	// The freshest state first: a known lag before none, the least lag first, then in
	// member order (a stable sort of the sorted IDs).
	for t, hs := range holders {
		slices.SortStableFunc(hs, func(x, y string) int {
			lx, okx := subs[x].lag[t]
			ly, oky := subs[y].lag[t]
			switch {
			case okx && !oky:
				return -1
			case !okx && oky:
				return 1
			case okx && oky && lx != ly:
				if lx < ly {
					return -1
				}
				return 1
			}
			return 0
		})
	}
	return owner, holders
}

// leastLoaded picks, among the members below capacity, the one with the fewest tasks of
// sub-topology sub, then the fewest in all: each sub-topology's tasks (and their state
// and load) spread out.
func leastLoaded(out map[string][]processor.TaskID, ids []string, capacity, sub int) string {
	perSub := func(id string) int {
		n := 0
		for _, t := range out[id] {
			if t.Subtopology == sub {
				n++
			}
		}
		return n
	}
	best := ""
	for _, id := range ids {
		if len(out[id]) >= capacity {
			continue
		}
		if best == "" {
			best = id
			continue
		}
		ns, bs := perSub(id), perSub(best)
		if ns < bs || (ns == bs && len(out[id]) < len(out[best])) {
			best = id
		}
	}
	return best
}
