package eddy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/processor"
)

// standbyAssignor is the word count's assignor (sub-topology 0 splits lines and has no
// store, sub-topology 1 counts into the logged store "counts") with n standbys.
func standbyAssignor(t *testing.T, n int) (*assignor, *[]string) {
	t.Helper()
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	a := newAssignor(graph.Of(topo), "app")
	a.standbys = n
	var logged []string
	a.logf = func(msg string, args ...any) {
		logged = append(logged, msg+" "+strings.TrimSpace(fmt.Sprintln(args...)))
	}
	return a, &logged
}

// planStandbys runs the leader's plan and returns each member's active tasks and the
// standby tasks its assignment data carries.
func planStandbys(t *testing.T, a *assignor, members map[string]sarama.ConsumerGroupMemberMetadata) (active, standby map[string][]string) {
	t.Helper()
	plan, err := a.Plan(members, fourPartitions(a))
	if err != nil {
		t.Fatal(err)
	}
	active, standby = map[string][]string{}, map[string][]string{}
	for m, topics := range plan {
		for _, id := range a.tasksOf(topics) {
			active[m] = append(active[m], id.String())
		}
		data, err := a.AssignmentData(m, topics, 1)
		if err != nil {
			t.Fatal(err)
		}
		var ad assignmentData
		if err := json.Unmarshal(data, &ad); err != nil {
			t.Fatal(err)
		}
		standby[m] = ad.Standby
	}
	return active, standby
}

// checkStandbys checks every stateful task (1_p) has want standbys, none on its active
// member, none twice on a member, and no stateless task (0_p) has any.
func checkStandbys(t *testing.T, active, standby map[string][]string, want int) {
	t.Helper()
	runs := map[string]string{}
	for m, ts := range active {
		for _, id := range ts {
			runs[id] = m
		}
	}
	count := map[string]int{}
	for m, ts := range standby {
		seen := map[string]bool{}
		for _, id := range ts {
			if strings.HasPrefix(id, "0_") {
				t.Errorf("stateless task %s has a standby on %s", id, m)
			}
			if runs[id] == m {
				t.Errorf("standby of %s on %s, which runs it", id, m)
			}
			if seen[id] {
				t.Errorf("two standbys of %s on %s", id, m)
			}
			seen[id] = true
			count[id]++
		}
	}
	for p := 0; p < 4; p++ {
		if id := fmt.Sprintf("1_%d", p); count[id] != want {
			t.Errorf("task %s has %d standbys, want %d (standbys %v, actives %v)", id, count[id], want, standby, active)
		}
	}
}

func TestAssignorPlacesStandbys(t *testing.T) {
	a, logged := standbyAssignor(t, 1)
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"m1": member(t, subscriptionData{Version: 1}),
		"m2": member(t, subscriptionData{Version: 1}),
		"m3": member(t, subscriptionData{Version: 1}),
	}
	active, standby := planStandbys(t, a, members)
	checkStandbys(t, active, standby, 1)
	for m, ts := range standby {
		if len(ts) > 2 {
			t.Errorf("%s keeps %d standbys of 4 over 3 members: %v", m, len(ts), ts)
		}
	}
	if len(*logged) > 0 {
		t.Errorf("warned with enough members: %v", *logged)
	}

	// Stable: the next generation, with each member reporting what it ran and kept,
	// gives the same standbys.
	for m := range members {
		members[m] = member(t, subscriptionData{Version: 1, Owned: active[m], Standby: standby[m]})
	}
	active2, standby2 := planStandbys(t, a, members)
	for m := range members {
		if !slices.Equal(active2[m], active[m]) || !slices.Equal(standby2[m], standby[m]) {
			t.Errorf("%s: actives %v → %v, standbys %v → %v across a rebalance with the same members", m, active[m], active2[m], standby[m], standby2[m])
		}
	}

	// A fourth member joins: each member keeps as many of its standbys as its share
	// (4 standbys over 4 members: 1) allows, unless it now runs the task.
	members["m4"] = member(t, subscriptionData{Version: 1})
	active3, standby3 := planStandbys(t, a, members)
	checkStandbys(t, active3, standby3, 1)
	for m, ts := range standby2 {
		kept, could := 0, 0
		for _, id := range ts {
			if !slices.Contains(active3[m], id) {
				could++
			}
			if slices.Contains(standby3[m], id) {
				kept++
			}
		}
		if kept < min(could, 1) {
			t.Errorf("%s kept %d of its standbys %v when m4 joined (now %v, runs %v)", m, kept, ts, standby3[m], active3[m])
		}
	}
	for m, ts := range standby3 {
		if len(ts) > 2 {
			t.Errorf("%s keeps %d standbys of 4 over 4 members: %v", m, len(ts), ts)
		}
	}
}

func TestAssignorStandbysShortOfMembers(t *testing.T) {
	a, logged := standbyAssignor(t, 2)
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"m1": member(t, subscriptionData{Version: 1}),
		"m2": member(t, subscriptionData{Version: 1}),
	}
	active, standby := planStandbys(t, a, members)
	checkStandbys(t, active, standby, 1)
	if len(*logged) != 1 || !strings.Contains((*logged)[0], "NumStandbyReplicas") || !strings.Contains((*logged)[0], "tasks_short 4") {
		t.Errorf("log lines %q; want one naming NumStandbyReplicas and the 4 tasks short", *logged)
	}

	// One member: no standby anywhere.
	a1, _ := standbyAssignor(t, 1)
	active, standby = planStandbys(t, a1, map[string]sarama.ConsumerGroupMemberMetadata{"m1": member(t, subscriptionData{Version: 1})})
	checkStandbys(t, active, standby, 0)
}

// OnAssignment hands the runtime the standbys of its assignment data, less any of a
// task it runs or of a task without stores a standby keeps, and reports them in its
// next subscription.
func TestOnAssignmentReadsStandbys(t *testing.T) {
	a, _ := standbyAssignor(t, 1)
	var got []processor.TaskID
	a.onAssign = func(_, standby []processor.TaskID, _ int32, _ map[string][]string) { got = standby }
	data, _ := json.Marshal(assignmentData{Version: 1, Standby: []string{"1_2", "1_0", "0_1", "1_3", "9_9", "bad"}})
	topics := map[string][]int32{}
	for topic, sub := range a.topicToSub {
		if sub == 1 {
			topics[topic] = []int32{3}
		}
	}
	a.OnAssignment(&sarama.ConsumerGroupMemberAssignment{Topics: topics, UserData: data}, 3)
	want := []processor.TaskID{{Subtopology: 1, Partition: 0}, {Subtopology: 1, Partition: 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("standbys %v; want %v", got, want)
	}
	sub, err := a.SubscriptionUserData(nil)
	if err != nil {
		t.Fatal(err)
	}
	var sd subscriptionData
	if err := json.Unmarshal(sub, &sd); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sd.Standby, []string{"1_0", "1_2"}) {
		t.Fatalf("subscription standbys %v; want [1_0 1_2]", sd.Standby)
	}
}

// An active task whose previous owner is gone goes to the member whose state of it is
// freshest (the least lag: changelog end minus the checkpoints it reported), not to the
// first member holding a task dir; its standby to the next freshest.
func TestAssignorPrefersFreshestState(t *testing.T) {
	a, _ := standbyAssignor(t, 1)
	var asked []processor.TaskID
	a.endOffsets = func(tasks []processor.TaskID) map[processor.TaskID]int64 {
		asked = tasks
		out := map[processor.TaskID]int64{}
		for _, id := range tasks {
			out[id] = 1000
		}
		return out
	}
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"m1": member(t, subscriptionData{Version: 1, State: []string{"1_0"}}),                                                 // a dir, no checkpoints
		"m2": member(t, subscriptionData{Version: 1, State: []string{"1_0"}, Offsets: map[string]int64{"1_0": 100}}),          // 900 behind
		"m3": member(t, subscriptionData{Version: 1, State: []string{"1_0"}, Offsets: map[string]int64{"1_0": 995}}),          // a warm standby
		"m4": member(t, subscriptionData{Version: 1, State: []string{"1_0"}, Offsets: map[string]int64{"1_0": 5000, "x": 1}}), // above the end: recreated
	}
	active, standby := planStandbys(t, a, members)
	if !slices.Contains(active["m3"], "1_0") {
		t.Errorf("task 1_0 went to %v; want m3, whose state is 5 offsets behind (actives %v)", active, active)
	}
	if !slices.Contains(standby["m2"], "1_0") {
		t.Errorf("the standby of 1_0 went elsewhere than m2, the next freshest: standbys %v", standby)
	}
	if !slices.Equal(asked, []processor.TaskID{{Subtopology: 1, Partition: 0}}) {
		t.Errorf("end offsets asked for %v; want [1_0], the one task reported with offsets", asked)
	}
}

// A killed member's task goes to the member holding its caught-up standby even when
// that member is full with its own tasks (Kafka Streams' acceptable.recovery.lag), not
// to a member with room and no state; a holder further behind than the acceptable
// recovery lag (10,000 by default) gets no more than its share.
func TestAssignorGivesOrphanToFullCaughtUpHolder(t *testing.T) {
	a, _ := standbyAssignor(t, 1)
	ends := map[string]int64{"1_2": 1000, "1_3": 1000 + 2*defaultAcceptableRecoveryLag}
	a.endOffsets = func(tasks []processor.TaskID) map[processor.TaskID]int64 {
		out := map[processor.TaskID]int64{}
		for _, id := range tasks {
			out[id] = ends[id.String()]
		}
		return out
	}
	// m3, which ran 1_2 and 1_3, is gone. m1 runs its share (4 of 8 tasks) and holds a
	// standby of 1_2 5 records behind and an old dir of 1_3 20,000 behind; m2 has room.
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"m1": member(t, subscriptionData{Version: 1, Owned: []string{"0_0", "0_1", "1_0", "1_1"}, State: []string{"1_0", "1_1", "1_2", "1_3"}, Standby: []string{"1_2"},
			Offsets: map[string]int64{"1_0": caughtUp, "1_1": caughtUp, "1_2": 995, "1_3": 1000}}),
		"m2": member(t, subscriptionData{Version: 1, Owned: []string{"0_2", "0_3"}}),
	}
	active, _ := planStandbys(t, a, members)
	if !slices.Contains(active["m1"], "1_2") {
		t.Errorf("task 1_2 went to m2, which has no state of it, not to m1's standby 5 records behind (actives %v)", active)
	}
	if !slices.Contains(active["m2"], "1_3") {
		t.Errorf("task 1_3 went to m1, full and 20,000 records behind, not to m2 with room (actives %v)", active)
	}
	if len(active["m1"]) != 5 || len(active["m2"]) != 3 {
		t.Errorf("actives %v; want m1's 4 and 1_2, m2's 2 and 1_3", active)
	}
}

// The acceptable lag for an orphaned task to go to a full holder is
// Config.AcceptableRecoveryLag, the one holdBack and the probing rebalances use, wired
// by the runtime (useAssignor): with 50, a full holder 100 records behind gets no more
// than its share (the default 10,000 would give it the task), one 40 behind does.
func TestAssignorOrphanUsesConfiguredRecoveryLag(t *testing.T) {
	topo, err := wordcount.Topology()
	if err != nil {
		t.Fatal(err)
	}
	rt := &runtime{g: graph.Of(topo), sc: sarama.NewConfig(), cfg: Config{ApplicationID: "app", AcceptableRecoveryLag: 50}}
	rt.useAssignor()
	a := rt.assignor
	a.logf = nil
	a.endOffsets = func(tasks []processor.TaskID) map[processor.TaskID]int64 {
		out := map[processor.TaskID]int64{}
		for _, id := range tasks {
			out[id] = 1000
		}
		return out
	}
	// m3, which ran 1_2 and 1_3, is gone. m1 runs its share (4 of 8 tasks) and holds
	// 1_2 100 records behind and 1_3 40 behind; m2 has room.
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"m1": member(t, subscriptionData{Version: 1, Owned: []string{"0_0", "0_1", "1_0", "1_1"}, State: []string{"1_0", "1_1", "1_2", "1_3"},
			Offsets: map[string]int64{"1_0": caughtUp, "1_1": caughtUp, "1_2": 900, "1_3": 960}}),
		"m2": member(t, subscriptionData{Version: 1, Owned: []string{"0_2", "0_3"}}),
	}
	active, _ := planStandbys(t, a, members)
	if !slices.Contains(active["m2"], "1_2") {
		t.Errorf("task 1_2 went to m1, full and 100 records behind (Config.AcceptableRecoveryLag 50), not to m2 with room (actives %v)", active)
	}
	if !slices.Contains(active["m1"], "1_3") {
		t.Errorf("task 1_3 went to m2, which has no state of it, not to m1 40 records behind (Config.AcceptableRecoveryLag 50) (actives %v)", active)
	}
}
