package eddy

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/processor"
)

// assignorName is the group protocol name; every instance of an application uses it.
const assignorName = "eddy-v1"

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
	warmupAssignment
}

// assignor is the group's balance strategy. It gives partition p of every source topic
// of a sub-topology to one member (the task <subtopology>_p), keeps tasks where they
// were, prefers members holding a task's local state, and balances task counts.
//
// It also carries the runtime's hooks: OnAssignment runs synchronously right after
// SyncGroup, before sarama fetches the committed offsets, which is where the producers
// of new tasks must be created (they fence older producers and settle their
// transactions, so the offsets read next are stable).
type assignor struct {
	graph      *graph.Graph
	appID      string
	topicToSub map[string]int // resolved source topic → sub-topology ID
	host       string
	localState func() []processor.TaskID
	// taskOffsets (member) reports Offsets; endOffsets (leader) sums the end offsets of
	// the kept stores' changelogs of each task. Either may be nil.
	taskOffsets func() map[processor.TaskID]int64
	endOffsets  func(tasks []processor.TaskID) map[processor.TaskID]int64
	onAssign    func(tasks, standby []processor.TaskID, generation int32, hosts map[string][]string)
	logf        func(msg string, args ...any)
	// standbys is Config.NumStandbyReplicas, as the leader places them; stateful
	// holds the sub-topologies whose tasks have stores a standby keeps.
	standbys    int
	stateful    map[int]bool
	mu          sync.Mutex
	owned       []processor.TaskID
	standby     []processor.TaskID // the standby replicas this member kept in the last generation
	epoch       int
	lastHosts   map[string][]string           // leader: hosts of the plan being synced
	lastMembers map[string]string             // leader: member → host
	lastStandby map[string][]processor.TaskID // leader: member → its standby tasks in the plan
	warm        warmupPolicy                  // warm-ups and rack (assignwarmup.go, assignrack.go)
}

func newAssignor(g *graph.Graph, appID string) *assignor {
	a := &assignor{graph: g, appID: appID, topicToSub: map[string]int{}, stateful: map[int]bool{}}
	for _, s := range g.Subtopologies {
		for _, t := range s.AllSourceTopics(appID) {
			a.topicToSub[t] = s.ID
		}
		for _, st := range s.Stores {
			if standbyKeeps(st) {
				a.stateful[s.ID] = true
			}
		}
	}
	return a
}

func (a *assignor) Name() string { return assignorName }

// SubscriptionUserData implements sarama.SubscriptionUserDataBalanceStrategy.
func (a *assignor) SubscriptionUserData(topics []string) ([]byte, error) {
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

// tasksOf maps topic partitions to tasks.
func (a *assignor) tasksOf(topics map[string][]int32) []processor.TaskID {
	set := map[processor.TaskID]bool{}
	for topic, parts := range topics {
		sub, ok := a.topicToSub[topic]
		if !ok {
			continue
		}
		for _, p := range parts {
			set[processor.TaskID{Subtopology: sub, Partition: p}] = true
		}
	}
	return sortedTasks(set)
}

func sortedTasks(set map[processor.TaskID]bool) []processor.TaskID {
	out := make([]processor.TaskID, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Subtopology < out[j].Subtopology
	})
	return out
}

// Plan implements sarama.BalanceStrategy; it runs on the group leader.
func (a *assignor) Plan(members map[string]sarama.ConsumerGroupMemberMetadata, topics map[string][]int32) (sarama.BalanceStrategyPlan, error) {
	tasks := a.tasks(topics)
	ids, subs := a.subscriptions(members)
	a.readLags(tasks, ids, subs)
	assignment := assignTasks(tasks, ids, subs)
	moves := a.holdBack(tasks, ids, subs, assignment)
	var standby map[string][]processor.TaskID
	if a.standbys > 0 {
		var short []processor.TaskID
		standby, short = assignStandbys(a.statefulTasks(tasks), a.standbys, ids, subs, assignment)
		if len(short) > 0 && a.logf != nil {
			a.logf("fewer standby replicas than Config.NumStandbyReplicas: a task's standbys go to other instances than its active one, one per instance, and there are not enough of them; start more instances to have them all",
				"num_standby_replicas", a.standbys, "instances", len(ids), "tasks_short", len(short), "first", short[0].String())
		}
		a.logRackFallbacks(subs, assignment, standby)
	}

	a.planWarmups(moves, subs, standby)

	plan := sarama.BalanceStrategyPlan{}
	hosts := map[string][]string{}
	memberHosts := map[string]string{}
	for _, id := range ids {
		memberHosts[id] = subs[id].Host
		// Every member gets an assignment, even an empty one, so it learns the hosts
		// and its OnAssignment runs (it must close the tasks it had).
		plan[id] = map[string][]int32{}
		for _, t := range assignment[id] {
			for _, topic := range a.graph.Subtopologies[t.Subtopology].AllSourceTopics(a.appID) {
				if _, ok := topics[topic]; ok {
					plan.Add(id, topic, t.Partition)
				}
			}
			if h := subs[id].Host; h != "" {
				hosts[h] = append(hosts[h], t.String())
			}
		}
	}
	a.mu.Lock()
	a.lastHosts, a.lastMembers, a.lastStandby = hosts, memberHosts, standby
	a.mu.Unlock()
	return plan, nil
}

// tasks lists the group's tasks, sorted: each sub-topology has as many as its source
// topics have partitions (the fewest, if they differ).
func (a *assignor) tasks(topics map[string][]int32) []processor.TaskID {
	all := map[processor.TaskID]bool{}
	for _, s := range a.graph.Subtopologies {
		n := -1
		for _, t := range s.AllSourceTopics(a.appID) {
			parts, ok := topics[t]
			if !ok {
				continue
			}
			if n < 0 || len(parts) < n {
				n = len(parts)
			}
		}
		for p := 0; p < n; p++ {
			all[processor.TaskID{Subtopology: s.ID, Partition: int32(p)}] = true
		}
	}
	return sortedTasks(all)
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

// assignTasks spreads tasks over members (sorted IDs): at most ceil(tasks/members)
// each; first to the previous owner, then to a member holding the task's local state
// (the freshest first), then to the least loaded member. A task whose previous owner
// is gone goes to a holder whose state is within acceptableRecoveryLag even when that
// holder is full: a killed instance's tasks go to their standbys, not to a member
// with room and no state.
func assignTasks(tasks []processor.TaskID, ids []string, subs map[string]subscriptionData) map[string][]processor.TaskID {
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
			if lag, ok := subs[hs[warm]].lag[t]; !ok || lag > acceptableRecoveryLag {
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

// acceptableRecoveryLag is the changelog records a holder's state may be behind for
// it to take an orphaned task above its share (Kafka Streams'
// acceptable.recovery.lag, 10,000 by default). Without it, a survivor full with its
// own tasks left a killed instance's task to a member with room and no state: on 3
// instances with 1 standby, 2 of the 3 moved tasks restored their whole changelogs
// (integration/failover, TestKilledInstanceTasksResumeFromStandby: 5,097 of 9,191
// records). The imbalance lasts until the next rebalance; Kafka Streams evens it out
// with warm-up replicas and probing rebalances, which eddy does not have yet.
const acceptableRecoveryLag = 10_000

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

// standbyKeeps reports whether a standby replica keeps store st: persistent stores
// with a changelog of their own. An in-memory store is rebuilt at every start anyway,
// and a store whose changelog is its source topic is restored up to the task's
// committed input offset, which only the active task knows.
func standbyKeeps(st *graph.Store) bool {
	return st.Logged && !st.InMemory && st.SourceTopic == ""
}

// statefulTasks returns the tasks that have stores a standby keeps.
func (a *assignor) statefulTasks(tasks []processor.TaskID) []processor.TaskID {
	var out []processor.TaskID
	for _, t := range tasks {
		if a.stateful[t.Subtopology] {
			out = append(out, t)
		}
	}
	return out
}

// compareTasks orders tasks as sortedTasks does: by partition, then sub-topology.
func compareTasks(a, b processor.TaskID) int {
	if a.Partition != b.Partition {
		return int(a.Partition) - int(b.Partition)
	}
	return a.Subtopology - b.Subtopology
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

// AssignmentData implements sarama.BalanceStrategy: every member learns who owns which
// task (for interactive queries).
func (a *assignor) AssignmentData(memberID string, topics map[string][]int32, generationID int32) ([]byte, error) {
	a.mu.Lock()
	hosts := a.lastHosts
	standby := a.lastStandby[memberID]
	a.mu.Unlock()
	ad := assignmentData{Version: 1, Hosts: hosts, warmupAssignment: a.warmupData(memberID)}
	for _, t := range standby {
		ad.Standby = append(ad.Standby, t.String())
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
}

var _ sarama.OnAssignmentBalanceStrategy = (*assignor)(nil)
var _ sarama.SubscriptionUserDataBalanceStrategy = (*assignor)(nil)

// bumpEpoch changes the member's subscription, so its next join starts a rebalance.
func (a *assignor) bumpEpoch() {
	a.mu.Lock()
	a.epoch++
	a.mu.Unlock()
}

func (a *assignor) String() string { return fmt.Sprintf("assignor(%s)", a.appID) }
