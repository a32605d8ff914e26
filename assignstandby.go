package eddy

import (
	"slices"

	"github.com/eddy-streams/eddy/processor"
)

// assignStandbys places n standby replicas of each stateful task (sorted), never on
// the member running the task (active: the actives' plan) nor two on one member, as
// Kafka Streams' assignors do. Each goes first to a member that kept it in the last
// generation (so a standby stays warm across rebalances), then to a member holding the
// task's local state, then to the member with the fewest tasks, standbys and actives
// together; at most ceil(standbys/members) standbys each while another member can take
// it. Where members declare racks, all this is done first among the members on a rack
// that neither the task's active member nor its other standbys are on, then among all
// (assignrack.go). short lists the tasks left with fewer than n (fewer than n+1
// members).
func assignStandbys(tasks []processor.TaskID, n int, ids []string, subs map[string]subscriptionData, active map[string][]processor.TaskID) (out map[string][]processor.TaskID, short []processor.TaskID) {
	out = map[string][]processor.TaskID{}
	if len(ids) == 0 || n <= 0 {
		return out, nil
	}
	runs := map[processor.TaskID]string{}
	for id, ts := range active {
		for _, t := range ts {
			runs[t] = id
		}
	}
	prev := keptStandbys(ids, subs)
	_, holders := claims(ids, subs)
	total := 0
	for range tasks {
		total += min(n, len(ids)-1)
	}
	capacity := (total + len(ids) - 1) / len(ids)
	has := map[processor.TaskID]map[string]bool{}
	// spread: only members on a rack the task uses nowhere yet (rackFree); the second
	// pass places what the first could not, anywhere.
	spread := true
	fits := func(id string, t processor.TaskID) bool {
		return id != runs[t] && !has[t][id] && (!spread || rackFree(subs, id, runs[t], has[t]))
	}
	give := func(id string, t processor.TaskID, limit int) bool {
		if !fits(id, t) || len(has[t]) >= n || len(out[id]) >= limit {
			return false
		}
		if has[t] == nil {
			has[t] = map[string]bool{}
		}
		has[t][id] = true
		out[id] = append(out[id], t)
		return true
	}
	load := func(id string) int { return len(out[id]) + len(active[id]) }
	for _, spread = range []bool{true, false} {
		for _, t := range tasks {
			for _, id := range prev[t] {
				give(id, t, capacity)
			}
		}
		for _, t := range tasks {
			for _, id := range holders[t] {
				give(id, t, capacity)
			}
		}
		for _, limit := range []int{capacity, len(tasks)} {
			for _, t := range tasks {
				for len(has[t]) < n {
					best := ""
					for _, id := range ids {
						if fits(id, t) && len(out[id]) < limit && (best == "" || load(id) < load(best)) {
							best = id
						}
					}
					if best == "" || !give(best, t, limit) {
						break
					}
				}
			}
		}
	}
	for _, t := range tasks {
		if len(has[t]) < n {
			short = append(short, t)
		}
	}
	for id := range out {
		slices.SortFunc(out[id], compareTasks)
	}
	return out, short
}

// keptStandbys maps each task to the members that kept a standby of it in the last
// generation (their subscriptions' Standby).
func keptStandbys(ids []string, subs map[string]subscriptionData) map[processor.TaskID][]string {
	prev := map[processor.TaskID][]string{}
	for _, id := range ids {
		for _, s := range subs[id].Standby {
			if t, err := processor.ParseTaskID(s); err == nil {
				prev[t] = append(prev[t], id)
			}
		}
	}
	return prev
}
