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
	p := &standbyPlacement{n: n, ids: ids, subs: subs, active: active, runs: runningMember(active),
		has: map[processor.TaskID]map[string]bool{}, out: out}
	prev := keptStandbys(ids, subs)
	_, holders := claims(ids, subs)
	// Every task has min(n, members-1) standbys to place, spread evenly.
	total := len(tasks) * min(n, len(ids)-1)
	capacity := (total + len(ids) - 1) / len(ids)
	// The first pass places only on members on a rack the task uses nowhere yet
	// (rackFree); the second places what the first could not, anywhere.
	for _, spread := range []bool{true, false} {
		p.spread = spread
		p.giveEach(tasks, prev, capacity)
		p.giveEach(tasks, holders, capacity)
		for _, limit := range []int{capacity, len(tasks)} {
			for _, t := range tasks {
				p.fillLeastLoaded(t, limit)
			}
		}
	}
	for _, t := range tasks {
		if len(p.has[t]) < n {
			short = append(short, t)
		}
	}
	for id := range out {
		slices.SortFunc(out[id], compareTasks)
	}
	return out, short
}

// standbyPlacement is the state of assignStandbys.
type standbyPlacement struct {
	n      int // standbys wanted per task
	ids    []string
	subs   map[string]subscriptionData
	active map[string][]processor.TaskID        // member → its active tasks
	runs   map[processor.TaskID]string          // task → the member running it
	has    map[processor.TaskID]map[string]bool // task → the members given a standby of it
	out    map[string][]processor.TaskID        // member → its standbys
	spread bool                                 // only on racks the task uses nowhere yet
}

// runningMember maps each task to the member the actives' plan runs it on.
func runningMember(active map[string][]processor.TaskID) map[processor.TaskID]string {
	runs := map[processor.TaskID]string{}
	for id, ts := range active {
		for _, t := range ts {
			runs[t] = id
		}
	}
	return runs
}

// fits reports whether member id may keep a standby of t: it does not run t, has none
// of it yet, and, in the spreading pass, is on a rack free of t.
func (p *standbyPlacement) fits(id string, t processor.TaskID) bool {
	return id != p.runs[t] && !p.has[t][id] && (!p.spread || rackFree(p.subs, id, p.runs[t], p.has[t]))
}

// give places a standby of t on member id if it fits, t still wants one, and id has
// fewer than limit; it reports whether it did.
func (p *standbyPlacement) give(id string, t processor.TaskID, limit int) bool {
	if !p.fits(id, t) || len(p.has[t]) >= p.n || len(p.out[id]) >= limit {
		return false
	}
	if p.has[t] == nil {
		p.has[t] = map[string]bool{}
	}
	p.has[t][id] = true
	p.out[id] = append(p.out[id], t)
	return true
}

// giveEach offers each task's standbys to the members candidates lists for it, in
// their order.
func (p *standbyPlacement) giveEach(tasks []processor.TaskID, candidates map[processor.TaskID][]string, capacity int) {
	for _, t := range tasks {
		for _, id := range candidates[t] {
			p.give(id, t, capacity)
		}
	}
}

// fillLeastLoaded gives t's missing standbys, one at a time, to the fitting member
// below limit with the fewest tasks, standbys and actives together.
func (p *standbyPlacement) fillLeastLoaded(t processor.TaskID, limit int) {
	load := func(id string) int { return len(p.out[id]) + len(p.active[id]) }
	for len(p.has[t]) < p.n {
		best := ""
		for _, id := range p.ids {
			if p.fits(id, t) && len(p.out[id]) < limit && (best == "" || load(id) < load(best)) {
				best = id
			}
		}
		if best == "" || !p.give(best, t, limit) {
			break
		}
	}
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
