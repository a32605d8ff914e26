package eddy

import (
	"slices"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/processor"
)

// The leader's half of cooperative rebalancing (KIP-429; issue 24 item 4, designed in
// docs/architecture.md "Rebalancing: eager, and what cooperative would take"). Under
// the eager protocol every member has stopped every task before it joins, so the plan
// may hand any task to anyone. Under the cooperative protocol a member joins while its
// tasks run, and a task that moves must be released by its old owner (its transaction
// committed or aborted, the task closed, its partitions given up) before its new owner
// starts it: two owners of one task in one generation would both process its input, and
// both commit it (TxnOffsetCommit checks the member's generation, not who owns the
// partition). So a move takes two rebalances: in the first the task goes to nobody
// (withheld), its owner sees it revoked, releases it and joins again at once (sarama's
// follow-up rebalance, consumer_group_cooperative.go); in the second no member reports
// it any more and the plan gives it to its new owner.
//
// The leader withholds moves whatever its own protocol: claims come only from members
// of the cooperative protocol (an eager member joins without a generation and holds
// nothing), so in an eager group nothing is withheld, and a group in the middle of a
// switch from one protocol to the other is safe as long as its leader runs this code
// (docs/operations.md, "Cooperative rebalancing"). The runtime's half is
// groupcooperative.go.

// taskClaims returns, for every task that a member reports running (its subscription's
// Owned), the members that report it. Only reports made in the newest generation any
// member reports (sarama's subscription GenerationID, version 1 and up) count: a member
// that missed a generation (it was expelled, say) reports what it ran before, which
// another member may have run since, and sarama ends that member's session when its
// SyncGroup is refused (lostHeldAssignment), so it does not run it now.
func taskClaims(members map[string]sarama.ConsumerGroupMemberMetadata, subs map[string]subscriptionData) map[processor.TaskID][]string {
	newest := int32(-1)
	for _, m := range members {
		newest = max(newest, m.GenerationID)
	}
	claims := map[processor.TaskID][]string{}
	for id, m := range members {
		if m.GenerationID != newest || m.GenerationID < 0 {
			// A member joining without a generation holds nothing: an eager
			// member (its Owned are what it ran before it stopped them) or the
			// first join of a cooperative session.
			continue
		}
		for _, s := range subs[id].Owned {
			t, err := processor.ParseTaskID(s)
			if err != nil {
				continue
			}
			claims[t] = append(claims[t], id)
		}
	}
	for _, ids := range claims {
		slices.Sort(ids)
	}
	return claims
}

// withholdMoves takes out of assignment (member → tasks) every task assigned to a
// member other than one still running it (claims, from taskClaims), and returns those
// tasks with the members that run them. A task that two members claim (which a plan
// never gives, but a report can be stale) goes to nobody until one claim is left, so
// that no generation has it running twice.
func withholdMoves(assignment map[string][]processor.TaskID, claims map[processor.TaskID][]string) map[processor.TaskID][]string {
	withheld := map[processor.TaskID][]string{}
	for member, tasks := range assignment {
		kept := tasks[:0]
		for _, t := range tasks {
			owners := claims[t]
			if len(owners) == 0 || (len(owners) == 1 && owners[0] == member) {
				kept = append(kept, t)
				continue
			}
			withheld[t] = owners
		}
		assignment[member] = kept
	}
	return withheld
}

// dropStandbysOnReleasing removes the standby replicas that the plan puts on a member
// still running the same task as active (a withheld task's old owner): its active task
// holds the store file until it is released, after this generation's assignment has
// been applied, so a standby there could not open it. The follow-up rebalance places it
// again.
func dropStandbysOnReleasing(standby map[string][]processor.TaskID, withheld map[processor.TaskID][]string) {
	for member, tasks := range standby {
		standby[member] = slices.DeleteFunc(tasks, func(t processor.TaskID) bool {
			return slices.Contains(withheld[t], member)
		})
	}
}

// pinReleased gives each task that the last plan withheld on its way to a member
// (pending: task → that member) to that member, when no member runs it any more and
// the member is still in the group (ids). Without it the follow-up plan placed the task
// afresh: a task nobody runs counts as one whose instance is gone, and goes to the
// member whose state of it is freshest — its old owner, which had just released it
// (TestCooperativeRebalanceStopsOnlyWhatMoves: two of the four tasks withheld for the
// newcomer went back to the first instance, which restarted them).
func pinReleased(assignment map[string][]processor.TaskID, pending map[processor.TaskID]string, claims map[processor.TaskID][]string, ids []string) {
	for t, to := range pending {
		if len(claims[t]) > 0 || !slices.Contains(ids, to) {
			continue
		}
		for member, tasks := range assignment {
			if member != to {
				assignment[member] = slices.DeleteFunc(tasks, func(x processor.TaskID) bool { return x == t })
			}
		}
		if !slices.Contains(assignment[to], t) {
			assignment[to] = append(assignment[to], t)
		}
	}
}
