package eddy

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/processor"
)

func tid(sub, p int) processor.TaskID {
	return processor.TaskID{Subtopology: sub, Partition: int32(p)}
}

// Claims count only from the newest generation any member reports: a member that
// missed one reports tasks another member has run since.
func TestTaskClaimsTakeTheNewestGeneration(t *testing.T) {
	subs := map[string]subscriptionData{
		"a":     {Owned: []string{"0_0", "0_1", "not-a-task"}},
		"b":     {Owned: []string{"0_2"}},
		"stale": {Owned: []string{"0_1", "0_3"}},
	}
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"a": {GenerationID: 7}, "b": {GenerationID: 7}, "stale": {GenerationID: 5},
	}
	got := taskClaims(members, subs)
	want := map[processor.TaskID][]string{tid(0, 0): {"a"}, tid(0, 1): {"a"}, tid(0, 2): {"b"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("claims %v, want %v", got, want)
	}
}

// A task the plan moves goes to nobody while its old owner still runs it; a task that
// stays, or that nobody runs, is assigned at once.
func TestWithholdMovesKeepsAMovedTaskFromItsNewOwner(t *testing.T) {
	claims := map[processor.TaskID][]string{
		tid(0, 0): {"a"}, tid(0, 1): {"a"}, tid(0, 2): {"b"},
		tid(0, 4): {"a", "b"}, // a stale double claim: nobody gets it
	}
	assignment := map[string][]processor.TaskID{
		"a": {tid(0, 0), tid(0, 4)},
		"b": {tid(0, 1), tid(0, 2)},
		"c": {tid(0, 3)},
	}
	withheld := withholdMoves(assignment, claims)
	wantAssign := map[string][]processor.TaskID{"a": {tid(0, 0)}, "b": {tid(0, 2)}, "c": {tid(0, 3)}}
	if !reflect.DeepEqual(assignment, wantAssign) {
		t.Errorf("assignment %v, want %v", assignment, wantAssign)
	}
	wantHeld := map[processor.TaskID][]string{tid(0, 1): {"a"}, tid(0, 4): {"a", "b"}}
	if !reflect.DeepEqual(withheld, wantHeld) {
		t.Errorf("withheld %v, want %v", withheld, wantHeld)
	}

	standby := map[string][]processor.TaskID{"a": {tid(0, 1), tid(0, 2)}, "c": {tid(0, 1)}}
	dropStandbysOnReleasing(standby, withheld)
	wantStandby := map[string][]processor.TaskID{"a": {tid(0, 2)}, "c": {tid(0, 1)}}
	if !reflect.DeepEqual(standby, wantStandby) {
		t.Errorf("standbys %v, want %v", standby, wantStandby)
	}
}

// A scale-up from two members to three, as the cooperative protocol runs it: in the
// first rebalance the tasks bound for the newcomer are taken from their owners and
// given to nobody; their owners release them and join again; in the follow-up the
// newcomer gets them. At no generation does a task have two members running it (a
// member runs what it ran and was not revoked, plus what it is assigned), every task is
// assigned after the follow-up, and tasks that stay never stop.
func TestCooperativeScaleUpMovesEachTaskOnce(t *testing.T) {
	var tasks []processor.TaskID
	for s := 0; s < 2; s++ {
		for p := 0; p < 6; p++ {
			tasks = append(tasks, tid(s, p))
		}
	}
	running := map[string][]processor.TaskID{}
	for i, task := range tasks {
		m := []string{"a", "b"}[i%2]
		running[m] = append(running[m], task)
	}
	running["c"] = nil
	stopped := map[processor.TaskID]int{} // how often a task was revoked
	gen := int32(1)
	plan := func() map[string][]processor.TaskID {
		members := map[string]sarama.ConsumerGroupMemberMetadata{}
		subs := map[string]subscriptionData{}
		for m, ts := range running {
			members[m] = sarama.ConsumerGroupMemberMetadata{GenerationID: gen}
			sd := subscriptionData{Version: subscriptionVersion}
			for _, task := range ts {
				sd.Owned = append(sd.Owned, task.String())
			}
			subs[m] = sd
		}
		ids := slices.Sorted(maps.Keys(running))
		assignment := assignTasks(tasks, ids, subs, 0)
		withholdMoves(assignment, taskClaims(members, subs))
		gen++
		return assignment
	}
	for round := 1; round <= 3; round++ {
		assignment := plan()
		// A member starts what it is assigned and did not run while the other members
		// still run what they ran: a task's new owner must find no one else running it.
		// Then each member applies its assignment: what it ran and is no longer assigned
		// is revoked (released before the member joins again); the rest runs on.
		ranBy := map[processor.TaskID]string{}
		for m, ts := range running {
			for _, task := range ts {
				ranBy[task] = m
			}
		}
		owner := map[processor.TaskID]string{}
		for _, m := range slices.Sorted(maps.Keys(running)) {
			for _, task := range assignment[m] {
				if o, dup := owner[task]; dup {
					t.Fatalf("round %d: task %s assigned to %s and %s", round, task, o, m)
				}
				owner[task] = m
				if was, ok := ranBy[task]; ok && was != m {
					t.Fatalf("round %d: task %s assigned to %s while %s still runs it", round, task, m, was)
				}
			}
		}
		for _, m := range slices.Sorted(maps.Keys(running)) {
			for _, task := range running[m] {
				if !slices.Contains(assignment[m], task) {
					stopped[task]++
				}
			}
			running[m] = assignment[m]
		}
		t.Logf("round %d: a %v, b %v, c %v", round, running["a"], running["b"], running["c"])
		if round >= 2 && len(owner) != len(tasks) {
			t.Errorf("round %d: %d of %d tasks assigned; want all after the follow-up", round, len(owner), len(tasks))
		}
	}
	for _, m := range []string{"a", "b", "c"} {
		if n := len(running[m]); n != 4 {
			t.Errorf("member %s runs %d tasks; want 4 of 12 each", m, n)
		}
	}
	moved := 0
	for _, task := range tasks {
		if n := stopped[task]; n > 1 {
			t.Errorf("task %s stopped %d times; want at most once", task, n)
		}
		moved += stopped[task]
	}
	if moved != 4 {
		t.Errorf("%d tasks stopped; want the 4 that move to c", moved)
	}
}

// Whatever the claims and the plan, no member is assigned a task that another member
// still runs.
func TestWithholdMovesNeverAssignsARunningTaskElsewhere(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	members := []string{"a", "b", "c", "d"}
	for i := 0; i < 2000; i++ {
		claims := map[processor.TaskID][]string{}
		assignment := map[string][]processor.TaskID{}
		for p := 0; p < 8; p++ {
			task := tid(0, p)
			for _, m := range members {
				if r.IntN(4) == 0 {
					claims[task] = append(claims[task], m)
				}
			}
			if r.IntN(5) > 0 {
				m := members[r.IntN(len(members))]
				assignment[m] = append(assignment[m], task)
			}
		}
		before := fmt.Sprint(assignment)
		withholdMoves(assignment, claims)
		for m, ts := range assignment {
			for _, task := range ts {
				for _, o := range claims[task] {
					if o != m {
						t.Fatalf("case %d: %s assigned %s, which %s runs (claims %v, plan %s)", i, m, task, o, claims, before)
					}
				}
			}
		}
	}
}

// The assignor's Plan under the cooperative protocol: a member that joins a member
// running all eight tasks gets none of them in the first rebalance (the old owner still
// runs them) and four in the follow-up, once the old owner reports only the four it
// kept. Eager (the control) hands them over at once.
func TestCooperativePlanMovesInTwoRebalances(t *testing.T) {
	a := newAssignor(graph.Of(joinTopology(t)), "app")
	if got := a.SupportedProtocols(); !reflect.DeepEqual(got, []sarama.RebalanceProtocol{sarama.RebalanceProtocolEager}) {
		t.Fatalf("eager assignor declares %v", got)
	}
	var all []string
	for s := 0; s < 2; s++ {
		for p := 0; p < 4; p++ {
			all = append(all, tid(s, p).String())
		}
	}
	// gen is the generation the members join with: -1 for eager members (sarama's
	// eager join holds nothing), the last one for cooperative members.
	gen := int32(3)
	planOf := func(owned1 []string) map[string][]processor.TaskID {
		members := map[string]sarama.ConsumerGroupMemberMetadata{
			"m1": member(t, subscriptionData{Version: 1, Owned: owned1}),
			"m2": member(t, subscriptionData{Version: 1}),
		}
		for id, m := range members {
			m.GenerationID = gen
			members[id] = m
		}
		plan, err := a.Plan(members, fourPartitions(a))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]processor.TaskID{}
		for m, topics := range plan {
			out[m] = a.tasksOf(topics)
		}
		return out
	}
	gen = -1
	if eager := planOf(all); len(eager["m2"]) != 4 {
		t.Fatalf("eager: the newcomer got %v; want 4 tasks at once", eager["m2"])
	}
	// An eager leader (an instance of the group being switched) withholds the tasks
	// of cooperative members as a cooperative one does.
	gen = 3
	if mixed := planOf(all); len(mixed["m2"]) != 0 || len(mixed["m1"]) != 4 {
		t.Fatalf("eager leader, cooperative members: m1 %v, m2 %v; want m1 to keep 4 and m2 to get none while m1 runs them", mixed["m1"], mixed["m2"])
	}
	a.pending = nil

	a.cooperative = true
	if got := a.SupportedProtocols(); !reflect.DeepEqual(got, []sarama.RebalanceProtocol{sarama.RebalanceProtocolCooperative}) {
		t.Fatalf("cooperative assignor declares %v", got)
	}
	first := planOf(all)
	if len(first["m2"]) != 0 || len(first["m1"]) != 4 {
		t.Fatalf("first rebalance: m1 %v, m2 %v; want m1 to keep 4 and m2 to get none while m1 runs them", first["m1"], first["m2"])
	}
	var kept []string
	for _, task := range first["m1"] {
		kept = append(kept, task.String())
	}
	second := planOf(kept)
	if !reflect.DeepEqual(second["m1"], first["m1"]) || len(second["m2"]) != 4 {
		t.Fatalf("follow-up: m1 %v, m2 %v; want m1 unchanged and m2 the other 4", second["m1"], second["m2"])
	}
	for _, task := range second["m2"] {
		if slices.Contains(first["m1"], task) {
			t.Errorf("task %s given to m2 while m1 keeps it", task)
		}
	}
}

// The follow-up plan gives the withheld tasks to the member they were moving to, even
// when their old owner, which released them, reports their state on disk: without
// pinReleased a task nobody runs counted as one whose instance was gone and went back to
// the member with the freshest state, the old owner (seen in
// TestCooperativeRebalanceStopsOnlyWhatMoves).
func TestCooperativeFollowUpKeepsTheMove(t *testing.T) {
	a, _ := warmupAssignor(t, 0, 2, 100) // the word count's: 1_p are stateful
	a.cooperative = true
	var all []string
	for s := 0; s < 2; s++ {
		for p := 0; p < 4; p++ {
			all = append(all, tid(s, p).String())
		}
	}
	planOf := func(owned1 []string) map[string][]processor.TaskID {
		offsets := map[string]int64{}
		for _, task := range all {
			offsets[task] = 100 // on disk, at the changelogs' end (endOffsets)
			if slices.Contains(owned1, task) {
				offsets[task] = caughtUp
			}
		}
		members := map[string]sarama.ConsumerGroupMemberMetadata{
			"m1": member(t, subscriptionData{Version: 1, Owned: owned1, State: all, Offsets: offsets}),
			"m2": member(t, subscriptionData{Version: 1}),
		}
		for id, m := range members {
			m.GenerationID = 3 // cooperative members in a live session
			members[id] = m
		}
		plan, err := a.Plan(members, fourPartitions(a))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]processor.TaskID{}
		for m, topics := range plan {
			out[m] = a.tasksOf(topics)
		}
		return out
	}
	first := planOf(all)
	if len(first["m2"]) != 0 || len(first["m1"]) == 8 {
		t.Fatalf("first rebalance: m1 %v, m2 %v; want m1 to give up some and m2 to get none yet", first["m1"], first["m2"])
	}
	var kept []string
	for _, task := range first["m1"] {
		kept = append(kept, task.String())
	}
	second := planOf(kept)
	if !reflect.DeepEqual(second["m1"], first["m1"]) || len(second["m2"]) != 8-len(first["m1"]) {
		t.Fatalf("follow-up: m1 %v, m2 %v; want m1 unchanged (%v) and m2 the %d tasks m1 released", second["m1"], second["m2"], first["m1"], 8-len(first["m1"]))
	}
}
