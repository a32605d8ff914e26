package eddy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/processor"
)

// warmupAssignor is the word count's assignor (standbyAssignor: 1_p are stateful) with
// warm-ups on: acceptable lag 1000, at most max warm-ups, and every counting task's
// changelog ending at end.
func warmupAssignor(t *testing.T, standbys, max int, end int64) (*assignor, *[]string) {
	t.Helper()
	a, logged := standbyAssignor(t, standbys)
	a.warm.acceptableLag = 1000
	a.warm.max = max
	a.endOffsets = func(tasks []processor.TaskID) map[processor.TaskID]int64 {
		out := map[processor.TaskID]int64{}
		for _, id := range tasks {
			out[id] = end
		}
		return out
	}
	return a, logged
}

// planWarmups runs the leader's plan and returns each member's active, standby and
// warm-up tasks as its assignment carries them.
func planWithWarmups(t *testing.T, a *assignor, members map[string]sarama.ConsumerGroupMemberMetadata) (active, standby, warmup map[string][]string) {
	t.Helper()
	plan, err := a.Plan(members, fourPartitions(a))
	if err != nil {
		t.Fatal(err)
	}
	active, standby, warmup = map[string][]string{}, map[string][]string{}, map[string][]string{}
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
		standby[m], warmup[m] = ad.Standby, ad.Warmup
	}
	return active, standby, warmup
}

// runsAll is the subscription of a member that ran every task: caught up on each
// counting task.
func runsAll() subscriptionData {
	sd := subscriptionData{Version: subscriptionVersion, Offsets: map[string]int64{}}
	for p := range 4 {
		sd.Owned = append(sd.Owned, processor.TaskID{Subtopology: 0, Partition: int32(p)}.String(), processor.TaskID{Subtopology: 1, Partition: int32(p)}.String())
		sd.Offsets[processor.TaskID{Subtopology: 1, Partition: int32(p)}.String()] = caughtUp
	}
	return sd
}

// An instance joins a group of one that runs every task, with changelogs 50,000
// records long: the balanced plan gives it half the tasks, but the counting tasks
// among them stay where they run and it gets a warm-up of each; the stateless ones
// move.
func TestAssignorWarmsUpInsteadOfMoving(t *testing.T) {
	a, logged := warmupAssignor(t, 0, 2, 50000)
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"a": member(t, runsAll()),
		"b": member(t, subscriptionData{Version: subscriptionVersion}),
	}
	active, _, warmup := planWithWarmups(t, a, members)
	if want := []string{"0_0", "1_0", "0_1", "1_1", "1_2", "1_3"}; !slices.Equal(active["a"], want) {
		t.Errorf("a runs %v; want %v (its counting tasks kept)", active["a"], want)
	}
	if want := []string{"0_2", "0_3"}; !slices.Equal(active["b"], want) {
		t.Errorf("b runs %v; want %v (the stateless tasks of its share)", active["b"], want)
	}
	if want := []string{"1_2", "1_3"}; !slices.Equal(warmup["b"], want) || len(warmup["a"]) > 0 {
		t.Errorf("warm-ups %v; want b warming %v", warmup, want)
	}
	if len(*logged) != 1 || !strings.Contains((*logged)[0], "warms up") {
		t.Errorf("logged %q; want one line naming the tasks held back", *logged)
	}

	// Its state within the acceptable lag (1000) is as good as caught up: no warm-up.
	a2, _ := warmupAssignor(t, 0, 2, 900)
	active, _, warmup = planWithWarmups(t, a2, members)
	if want := []string{"0_2", "1_2", "0_3", "1_3"}; !slices.Equal(active["b"], want) || len(warmup["b"]) > 0 {
		t.Errorf("with 900-record changelogs b runs %v and warms %v; want %v and none", active["b"], warmup["b"], want)
	}
}

// The next generation: b's warm-up of 1_2 is 500 behind (within 1000), that of 1_3
// 20,000: 1_2 moves to b, 1_3 stays with its warm-up.
func TestAssignorMovesOnceWarm(t *testing.T) {
	a, _ := warmupAssignor(t, 0, 2, 50000)
	owner := runsAll()
	owner.Owned = []string{"0_0", "1_0", "0_1", "1_1", "1_2", "1_3"}
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"a": member(t, owner),
		"b": member(t, subscriptionData{Version: subscriptionVersion, Owned: []string{"0_2", "0_3"}, State: []string{"1_2", "1_3"},
			Offsets: map[string]int64{"1_2": 49500, "1_3": 30000}, warmupSubscription: warmupSubscription{Warmup: []string{"1_2", "1_3"}}}),
	}
	active, _, warmup := planWithWarmups(t, a, members)
	if want := []string{"0_2", "1_2", "0_3"}; !slices.Equal(active["b"], want) {
		t.Errorf("b runs %v; want %v (1_2 moved once warm)", active["b"], want)
	}
	if want := []string{"1_3"}; !slices.Equal(warmup["b"], want) || !slices.Contains(active["a"], "1_3") {
		t.Errorf("b warms %v and a runs %v; want b warming %v while a runs it", warmup["b"], active["a"], want)
	}
}

// At most MaxWarmupReplicas warm-ups in the group: the task beyond stays where it runs
// without one; the one a member warmed in the last generation keeps its warm-up.
func TestAssignorBoundsWarmups(t *testing.T) {
	a, _ := warmupAssignor(t, 0, 1, 50000)
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"a": member(t, runsAll()),
		"b": member(t, subscriptionData{Version: subscriptionVersion, warmupSubscription: warmupSubscription{Warmup: []string{"1_3"}}}),
	}
	active, _, warmup := planWithWarmups(t, a, members)
	if want := []string{"1_3"}; !slices.Equal(warmup["b"], want) {
		t.Errorf("b warms %v; want %v (one warm-up, the one it had)", warmup["b"], want)
	}
	if !slices.Contains(active["a"], "1_2") || !slices.Contains(active["a"], "1_3") {
		t.Errorf("a runs %v; want 1_2 and 1_3 kept", active["a"])
	}
}

// No warm-up where it cannot help or is not wanted: a target of an older eddy (it
// would not run one), no caught-up member (the owner is gone), warm-ups off.
func TestAssignorMovesWithoutWarmup(t *testing.T) {
	for _, c := range []struct {
		name    string
		max     int
		members map[string]subscriptionData
		want    []string // tasks b runs (among others)
	}{
		{"older member", 2, map[string]subscriptionData{"a": runsAll(), "b": {Version: 1}}, []string{"0_2", "1_2", "0_3", "1_3"}},
		{"warm-ups off", -1, map[string]subscriptionData{"a": runsAll(), "b": {Version: subscriptionVersion}}, []string{"0_2", "1_2", "0_3", "1_3"}},
		{"nobody caught up", 2, map[string]subscriptionData{
			"b": {Version: subscriptionVersion, State: []string{"1_0"}, Offsets: map[string]int64{"1_0": 100}},
			"c": {Version: subscriptionVersion}}, []string{"1_0"}},
	} {
		a, _ := warmupAssignor(t, 0, c.max, 50000)
		members := map[string]sarama.ConsumerGroupMemberMetadata{}
		for m, sd := range c.members {
			members[m] = member(t, sd)
		}
		active, _, warmup := planWithWarmups(t, a, members)
		missing := slices.ContainsFunc(c.want, func(id string) bool { return !slices.Contains(active["b"], id) })
		if missing || len(warmupTasksOf(warmup)) > 0 {
			t.Errorf("%s: b runs %v, warm-ups %v; want %v and none", c.name, active["b"], warmup, c.want)
		}
	}
}

// A target that keeps a standby of the task has its warm-up already: the standby
// becomes it, whatever the bound (it runs anyway).
func TestAssignorStandbyBecomesWarmup(t *testing.T) {
	a, _ := warmupAssignor(t, 1, 1, 50000)
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"a": member(t, runsAll()),
		"b": member(t, subscriptionData{Version: subscriptionVersion}),
	}
	_, standby, warmup := planWithWarmups(t, a, members)
	if want := []string{"1_2", "1_3"}; !slices.Equal(warmup["b"], want) {
		t.Errorf("b warms %v; want %v (its standbys of them)", warmup["b"], want)
	}
	if want := []string{"1_0", "1_1"}; !slices.Equal(standby["b"], want) {
		t.Errorf("b keeps standbys %v; want %v", standby["b"], want)
	}
}

func warmupTasksOf(m map[string][]string) []string {
	var out []string
	for _, ts := range m {
		out = append(out, ts...)
	}
	return out
}

// A member's subscription says its version, rack and warm-ups; its assignment's
// warm-ups start as standbys do (onAssign's second list) and are told apart by
// warmups(), never one of a task it runs.
func TestWarmupUserDataRoundTrip(t *testing.T) {
	a, _ := warmupAssignor(t, 0, 2, 0)
	a.warm.rack = "zone-a"
	var gotStandby []processor.TaskID
	a.onAssign = func(_, standby []processor.TaskID, _ int32, _ map[string][]string) { gotStandby = standby }
	data, _ := json.Marshal(assignmentData{Version: 1, Standby: []string{"1_0"}, warmupAssignment: warmupAssignment{Warmup: []string{"1_1", "1_2", "0_3", "1_0"}}})
	topics := map[string][]int32{}
	for topic, sub := range a.topicToSub {
		if sub == 1 {
			topics[topic] = []int32{2}
		}
	}
	a.OnAssignment(&sarama.ConsumerGroupMemberAssignment{Topics: topics, UserData: data}, 3)
	want := []processor.TaskID{{Subtopology: 1, Partition: 0}, {Subtopology: 1, Partition: 1}}
	if !slices.Equal(gotStandby, want) {
		t.Errorf("onAssign got standby+warm-up %v; want %v (1_2 runs here, 0_3 is stateless, 1_0 is a standby)", gotStandby, want)
	}
	if w := a.warmups(); len(w) != 1 || !w[want[1]] {
		t.Errorf("warmups() = %v; want 1_1 alone", w)
	}
	sub, err := a.SubscriptionUserData(nil)
	if err != nil {
		t.Fatal(err)
	}
	var sd subscriptionData
	if err := json.Unmarshal(sub, &sd); err != nil {
		t.Fatal(err)
	}
	if sd.Version != subscriptionVersion || sd.Rack != "zone-a" || !slices.Equal(sd.Warmup, []string{"1_1"}) || !slices.Equal(sd.Standby, []string{"1_0"}) {
		t.Errorf("subscription %s; want v2, rack zone-a, warmup [1_1], standby [1_0]", sub)
	}
}

// racked returns members named by rack: "r1a" is on rack r1.
func racked(t *testing.T, names ...string) map[string]sarama.ConsumerGroupMemberMetadata {
	t.Helper()
	out := map[string]sarama.ConsumerGroupMemberMetadata{}
	for _, n := range names {
		out[n] = member(t, subscriptionData{Version: subscriptionVersion, rackSubscription: rackSubscription{Rack: n[:2]}})
	}
	return out
}

// checkRacks fails when a standby shares a rack (a member name's first two letters)
// with its task's active member or another standby of it.
func checkRacks(t *testing.T, active, standby map[string][]string) {
	t.Helper()
	runs := map[string]string{}
	for m, ts := range active {
		for _, id := range ts {
			runs[id] = m
		}
	}
	used := map[string]map[string]bool{}
	for m, ts := range standby {
		for _, id := range ts {
			if used[id] == nil {
				used[id] = map[string]bool{runs[id][:2]: true}
			}
			if used[id][m[:2]] {
				t.Errorf("a standby of %s on %s shares its rack (active on %s, standbys %v)", id, m, runs[id], standby)
			}
			used[id][m[:2]] = true
		}
	}
}

// Standbys go to other racks than their active task's and each other's: with two
// members on each of two racks, one standby each; with three racks, two each.
func TestAssignorSpreadsStandbysOverRacks(t *testing.T) {
	for _, c := range []struct {
		n       int
		members []string
	}{{1, []string{"r1a", "r1b", "r2a", "r2b"}}, {2, []string{"r1a", "r1b", "r2a", "r3a"}}, {1, []string{"r1a", "r1b", "r1c", "r2a"}}} {
		a, logged := warmupAssignor(t, c.n, 2, 0)
		active, standby, _ := planWithWarmups(t, a, racked(t, c.members...))
		checkStandbys(t, active, standby, c.n)
		checkRacks(t, active, standby)
		if len(*logged) > 0 {
			t.Errorf("%v: logged %q with racks enough", c.members, *logged)
		}
	}
}

// Too few racks: the standbys go where they can, and the leader says so.
func TestAssignorRackFallback(t *testing.T) {
	a, logged := warmupAssignor(t, 2, 2, 0)
	active, standby, _ := planWithWarmups(t, a, racked(t, "r1a", "r1b", "r2a"))
	checkStandbys(t, active, standby, 2)
	if len(*logged) != 1 || !strings.Contains((*logged)[0], "share a rack") {
		t.Errorf("logged %q; want one line saying standbys share a rack", *logged)
	}
}
