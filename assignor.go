package eddy

import (
	"fmt"
	"sync"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/processor"
)

// assignorName is the group protocol name; every instance of an application uses it.
const assignorName = "eddy-v1"

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
	standbys     int
	stateful     map[int]bool
	mu           sync.Mutex
	owned        []processor.TaskID
	standby      []processor.TaskID // the standby replicas this member kept in the last generation
	epoch        int
	lastHosts    map[string][]string           // leader: hosts of the plan being synced
	lastMembers  map[string]string             // leader: member → host
	lastStandby  map[string][]processor.TaskID // leader: member → its standby tasks in the plan
	lastWithheld []processor.TaskID            // leader: the tasks the plan withheld (moving)
	warm         warmupPolicy                  // warm-ups and rack (assignwarmup.go, assignrack.go)
	// cooperative makes the group run the cooperative protocol (SupportedProtocols) and
	// the plan move a task in two rebalances (assigncooperative.go):
	// Config.RebalanceProtocol.
	cooperative bool
	// pending: the leader's last plan withheld these tasks on their way to these
	// members (pinReleased).
	pending map[processor.TaskID]string
	// onWithheld, if set, learns the tasks the generation's plan withheld (on a
	// member, from its assignment): the runtime watches that a follow-up rebalance
	// hands them out (followup.go).
	onWithheld func(generation int32, tasks []processor.TaskID)
	// beforeJoin, if set, runs at the start of every join (SubscriptionUserData): the
	// runtime's commit gate (commitgate.go).
	beforeJoin func()
}

func newAssignor(g *graph.Graph, appID string) *assignor {
	a := &assignor{graph: g, appID: appID, topicToSub: map[string]int{}, stateful: map[int]bool{}}
	a.warm.acceptableLag = defaultAcceptableRecoveryLag // the runtime sets Config's
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

// Plan implements sarama.BalanceStrategy; it runs on the group leader.
func (a *assignor) Plan(members map[string]sarama.ConsumerGroupMemberMetadata, topics map[string][]int32) (sarama.BalanceStrategyPlan, error) {
	tasks := a.tasks(topics)
	ids, subs := a.subscriptions(members)
	a.readLags(tasks, ids, subs)
	assignment := assignTasks(tasks, ids, subs, a.warm.acceptableLag)
	moves := a.holdBack(tasks, ids, subs, assignment)
	var withheld map[processor.TaskID][]string
	{
		claims := taskClaims(members, subs)
		a.mu.Lock()
		pending := a.pending
		a.mu.Unlock()
		pinReleased(assignment, pending, claims, ids)
		target := runningMember(assignment)
		withheld = withholdMoves(assignment, claims)
		if len(withheld) > 0 && a.logf != nil {
			a.logf("moving tasks in two rebalances: their owners release them first", "tasks", len(withheld))
		}
		pending = map[processor.TaskID]string{}
		moving := map[processor.TaskID]bool{}
		for t := range withheld {
			pending[t] = target[t]
			moving[t] = true
		}
		a.mu.Lock()
		a.pending = pending
		a.lastWithheld = sortedTasks(moving)
		a.mu.Unlock()
	}
	var standby map[string][]processor.TaskID
	if a.standbys > 0 {
		standby = a.planStandbys(tasks, ids, subs, assignment)
		dropStandbysOnReleasing(standby, withheld)
	}

	a.planWarmups(moves, subs, standby)

	plan, hosts, memberHosts := a.partitionPlan(ids, subs, assignment, topics)
	a.mu.Lock()
	a.lastHosts, a.lastMembers, a.lastStandby = hosts, memberHosts, standby
	a.mu.Unlock()
	return plan, nil
}

// planStandbys places the standby replicas of the stateful tasks, and logs when there
// are too few members for them all or their racks could not be spread.
func (a *assignor) planStandbys(tasks []processor.TaskID, ids []string, subs map[string]subscriptionData, assignment map[string][]processor.TaskID) map[string][]processor.TaskID {
	standby, short := assignStandbys(a.statefulTasks(tasks), a.standbys, ids, subs, assignment)
	if len(short) > 0 && a.logf != nil {
		a.logf("fewer standby replicas than Config.NumStandbyReplicas: a task's standbys go to other instances than its active one, one per instance, and there are not enough of them; start more instances to have them all",
			"num_standby_replicas", a.standbys, "instances", len(ids), "tasks_short", len(short), "first", short[0].String())
	}
	a.logRackFallbacks(subs, assignment, standby)
	return standby
}

// partitionPlan turns the tasks' assignment into sarama's plan (each task's partition
// of its sub-topology's source topics), the hosts map (host → the tasks its member
// runs) and each member's host.
func (a *assignor) partitionPlan(ids []string, subs map[string]subscriptionData, assignment map[string][]processor.TaskID, topics map[string][]int32) (sarama.BalanceStrategyPlan, map[string][]string, map[string]string) {
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
	return plan, hosts, memberHosts
}

// SupportedProtocols implements sarama.RebalanceProtocolBalanceStrategy: the group's
// protocol is eager unless the assignor is cooperative.
func (a *assignor) SupportedProtocols() []sarama.RebalanceProtocol {
	if a.cooperative {
		return []sarama.RebalanceProtocol{sarama.RebalanceProtocolCooperative}
	}
	return []sarama.RebalanceProtocol{sarama.RebalanceProtocolEager}
}

var _ sarama.OnAssignmentBalanceStrategy = (*assignor)(nil)
var _ sarama.RebalanceProtocolBalanceStrategy = (*assignor)(nil)
var _ sarama.SubscriptionUserDataBalanceStrategy = (*assignor)(nil)

// bumpEpoch changes the member's subscription, so its next join starts a rebalance.
func (a *assignor) bumpEpoch() {
	a.mu.Lock()
	a.epoch++
	a.mu.Unlock()
}

func (a *assignor) String() string { return fmt.Sprintf("assignor(%s)", a.appID) }
