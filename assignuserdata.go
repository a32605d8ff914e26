package eddy

import (
	"encoding/json"
	"slices"
	"sort"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/processor"
)

// The group protocol's user data: what a member tells the leader when it joins
// (subscriptionData) and what the leader tells each member back (assignmentData), with
// the member's side of the exchange.

// subscriptionData is what a member tells the leader when it joins.
type subscriptionData struct {
	Version int      `json:"v"`
	Owned   []string `json:"owned,omitempty"` // tasks assigned to it in the last generation
	State   []string `json:"state,omitempty"` // tasks it has a local store file of
	Host    string   `json:"host,omitempty"`  // advertised host:port for interactive queries
	// Standby are the tasks it kept a standby replica of in the last generation
	// (Config.NumStandbyReplicas): the leader leaves them there, so a standby's state
	// stays warm across rebalances.
	Standby []string `json:"standby,omitempty"`
	// Offsets reports the state it holds of each task it has a store file of (its
	// actives, its standbys, and task dirs left from earlier): the sum of the
	// checkpoints of the task's stores a standby keeps, or caughtUp for a task it runs.
	// The leader subtracts it from the sum of their changelogs' end offsets: the
	// task's lag on that member (Kafka Streams' task offset sums, KIP-441), and an
	// active task with no previous owner goes to the holder with the least lag.
	Offsets map[string]int64 `json:"offsets,omitempty"`
	// lag is the leader's reading of Offsets: task → changelog offsets the member's
	// state is behind (not sent).
	lag map[processor.TaskID]int64
	// Epoch changes when the member asks for a new generation (after a task of its was
	// fenced): different metadata makes the coordinator rebalance.
	Epoch int `json:"epoch,omitempty"`
	warmupSubscription
	rackSubscription
}

// assignmentData is what the leader tells every member: who owns which task.
type assignmentData struct {
	Version int                 `json:"v"`
	Hosts   map[string][]string `json:"hosts,omitempty"` // host → tasks
	// Standby are the tasks the receiving member keeps a standby replica of (this
	// member's alone: AssignmentData is made per member). A member of an older eddy
	// ignores the field and keeps no standby.
	Standby []string `json:"standby,omitempty"`
	// Withheld are the tasks the plan gives to nobody this generation, on their way
	// from their owner to another member (cooperative rebalancing): every member
	// learns them, to ask for the follow-up rebalance if their owner does not
	// (followup.go). A member of an older eddy ignores the field.
	Withheld []string `json:"withheld,omitempty"`
	warmupAssignment
}

// SubscriptionUserData implements sarama.SubscriptionUserDataBalanceStrategy.
func (a *assignor) SubscriptionUserData(topics []string) ([]byte, error) {
	if a.beforeJoin != nil {
		a.beforeJoin()
	}
	a.mu.Lock()
	sd := subscriptionData{Version: subscriptionVersion, Host: a.host, Epoch: a.epoch}
	for _, t := range a.owned {
		sd.Owned = append(sd.Owned, t.String())
	}
	for _, t := range a.standby {
		sd.Standby = append(sd.Standby, t.String())
	}
	a.mu.Unlock()
	a.addWarmups(&sd)
	if a.localState != nil {
		for _, t := range a.localState() {
			sd.State = append(sd.State, t.String())
		}
	}
	if a.taskOffsets != nil {
		for t, off := range a.taskOffsets() {
			if sd.Offsets == nil {
				sd.Offsets = map[string]int64{}
			}
			sd.Offsets[t.String()] = off
		}
	}
	return json.Marshal(sd)
}

// subscriptions returns the members' IDs, sorted, and their subscription data; an
// unreadable one counts as empty.
func (a *assignor) subscriptions(members map[string]sarama.ConsumerGroupMemberMetadata) ([]string, map[string]subscriptionData) {
	ids := make([]string, 0, len(members))
	subs := map[string]subscriptionData{}
	for id, m := range members {
		ids = append(ids, id)
		var sd subscriptionData
		if len(m.UserData) > 0 {
			if err := json.Unmarshal(m.UserData, &sd); err != nil {
				// encoding/json fills what it could before the error: drop all of it,
				// or a member's half-read claims would steer the plan.
				sd = subscriptionData{}
				if a.logf != nil {
					a.logf("ignoring unreadable subscription data", "member", id, "error", err)
				}
			}
		}
		subs[id] = sd
	}
	sort.Strings(ids)
	return ids, subs
}

// AssignmentData implements sarama.BalanceStrategy: every member learns who owns which
// task (for interactive queries).
func (a *assignor) AssignmentData(memberID string, topics map[string][]int32, generationID int32) ([]byte, error) {
	a.mu.Lock()
	hosts := a.lastHosts
	standby := a.lastStandby[memberID]
	withheld := a.lastWithheld
	a.mu.Unlock()
	ad := assignmentData{Version: 1, Hosts: hosts, warmupAssignment: a.warmupData(memberID)}
	for _, t := range standby {
		ad.Standby = append(ad.Standby, t.String())
	}
	for _, t := range withheld {
		ad.Withheld = append(ad.Withheld, t.String())
	}
	return json.Marshal(ad)
}

// OnAssignment implements sarama.OnAssignmentBalanceStrategy. It runs synchronously on
// sarama's rebalance path after SyncGroup and before the committed offsets are fetched.
func (a *assignor) OnAssignment(assignment *sarama.ConsumerGroupMemberAssignment, generationID int32) {
	tasks := a.tasksOf(assignment.Topics)
	var ad assignmentData
	if len(assignment.UserData) > 0 {
		if err := json.Unmarshal(assignment.UserData, &ad); err != nil {
			ad = assignmentData{} // not half of it (see Plan)
			if a.logf != nil {
				a.logf("ignoring unreadable assignment data", "error", err)
			}
		}
	}
	standby := map[processor.TaskID]bool{}
	for _, s := range ad.Standby {
		if t, err := processor.ParseTaskID(s); err == nil && a.stateful[t.Subtopology] {
			standby[t] = true
		}
	}
	for _, t := range tasks {
		delete(standby, t) // never a standby of a task it runs (the leader never plans one)
	}
	standbyTasks := sortedTasks(standby)
	warmups := a.takeWarmups(ad, tasks, standby)
	a.mu.Lock()
	a.owned = slices.Clone(tasks)
	a.standby = slices.Clone(standbyTasks)
	a.mu.Unlock()
	if a.onAssign != nil {
		// A warm-up runs as a standby does (standby.go); warmups() tells them apart.
		a.onAssign(tasks, append(standbyTasks, warmups...), generationID, ad.Hosts)
	}
	if a.onWithheld != nil && len(ad.Withheld) > 0 {
		var withheld []processor.TaskID
		for _, s := range ad.Withheld {
			if t, err := processor.ParseTaskID(s); err == nil {
				withheld = append(withheld, t)
			}
		}
		a.onWithheld(generationID, withheld)
	}
}
