package eddy

import (
	"github.com/eddy-streams/eddy/processor"
)

// Rack-aware standby placement (like Kafka Streams' rack-aware standby assignment,
// KIP-925's spirit, kept simple): a member declares its rack (Config.Rack) in its
// subscription, and assignStandbys places a task's standbys first on members whose
// rack is neither its active member's nor another of its standbys', then, where too
// few such members exist, anywhere as before (logged by rackFallbacks). A member
// without a rack fits anywhere.

// rackSubscription is the rack part of a member's subscription (embedded: the same
// JSON object). An older member sends none: it fits anywhere.
type rackSubscription struct {
	Rack string `json:"rack,omitempty"`
}

// rackFree reports whether member id may take a standby of a task run by member runs
// whose standbys are on the members in has without sharing a rack with any of them.
func rackFree(subs map[string]subscriptionData, id, runs string, has map[string]bool) bool {
	r := subs[id].Rack
	if r == "" {
		return true
	}
	if runs != "" && subs[runs].Rack == r {
		return false
	}
	for other := range has {
		if subs[other].Rack == r {
			return false
		}
	}
	return true
}

// rackFallbacks lists the tasks (sorted) one of whose standbys shares a rack with its
// active member or with another of its standbys, when members declared racks.
func rackFallbacks(subs map[string]subscriptionData, active, standby map[string][]processor.TaskID) []processor.TaskID {
	runs := map[processor.TaskID]string{}
	for id, ts := range active {
		for _, t := range ts {
			runs[t] = id
		}
	}
	has := map[processor.TaskID][]string{}
	for id, ts := range standby {
		for _, t := range ts {
			has[t] = append(has[t], id)
		}
	}
	shared := map[processor.TaskID]bool{}
	for t, ms := range has {
		used := map[string]bool{}
		if r := subs[runs[t]].Rack; r != "" {
			used[r] = true
		}
		for _, m := range ms {
			r := subs[m].Rack
			if r != "" && used[r] {
				shared[t] = true
			}
			if r != "" {
				used[r] = true
			}
		}
	}
	return sortedTasks(shared)
}

// logRackFallbacks says, once per plan, that some standbys share a rack with their
// active task or each other (too few instances on other racks).
func (a *assignor) logRackFallbacks(subs map[string]subscriptionData, active, standby map[string][]processor.TaskID) {
	if shared := rackFallbacks(subs, active, standby); len(shared) > 0 && a.logf != nil {
		a.logf("standby replicas share a rack with their active task or with each other: too few instances on other racks (Config.Rack); start instances on more racks to spread them",
			"tasks", len(shared), "first", shared[0].String())
	}
}
