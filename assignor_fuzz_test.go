package eddy

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/processor"
)

// The group's user data comes from other processes through the group coordinator: any
// member (an older or newer eddy, a buggy client, a hostile one with the group's read
// ACL) can send any bytes. These targets check that the assignor takes whatever it gets:
// the plan still gives every task to exactly one member within the balance bound, and
// user data that does not decode is ignored as a whole, as the log line says, never
// half-used.

// FuzzSubscriptionUserData: three members with arbitrary subscription user data.
func FuzzSubscriptionUserData(f *testing.F) {
	valid := func(sd subscriptionData) []byte { b, _ := json.Marshal(sd); return b }
	f.Add(valid(subscriptionData{Version: 1, Owned: []string{"0_0", "1_1"}, Host: "h1:80"}),
		valid(subscriptionData{Version: 1, State: []string{"1_0", "1_2"}, Host: "h2:80"}), []byte(nil))
	f.Add([]byte(`{"v":1,"owned":["0_0","0_0","0_1","0_2","0_3","1_0","1_1"]}`), []byte(`{"v":1,"owned":["0_0"]}`), []byte(`{}`))
	f.Add([]byte(`{"v":"x","owned":["0_0","0_1","0_2"]}`), []byte(`{"owned":["9_9","-1_0","0_99999999999","0_01"," 0_1"]}`), []byte(`null`))
	f.Add([]byte(`{"owned":{"a":1},"state":["0_1"]}`), []byte(`[1,2]`), []byte("\xff"))
	f.Fuzz(func(t *testing.T, d1, d2, d3 []byte) {
		a := newAssignor(graph.Of(joinTopology(t)), "app")
		data := map[string][]byte{"m1": d1, "m2": d2, "m3": d3}
		members := map[string]sarama.ConsumerGroupMemberMetadata{}
		clean := map[string]sarama.ConsumerGroupMemberMetadata{}
		for m, d := range data {
			members[m] = sarama.ConsumerGroupMemberMetadata{UserData: d, GenerationID: -1} // eager members
			// The same member as the assignor must see it: data that does not decode
			// counts as none.
			if len(d) > 0 && json.Unmarshal(d, new(subscriptionData)) != nil {
				d = nil
			}
			clean[m] = sarama.ConsumerGroupMemberMetadata{UserData: d, GenerationID: -1}
		}
		plan, err := a.Plan(members, fourPartitions(a))
		if err != nil {
			t.Fatalf("Plan: %v", err)
		}
		hosts := maps.Clone(a.lastHosts)
		got := tasksOfPlan(t, a, plan) // every task once, co-partitioned
		n := 0
		for m, ts := range got {
			n += len(ts)
			if len(ts) > 3 {
				t.Fatalf("member %s got %d tasks (%v); 8 tasks over 3 members is at most 3 each", m, len(ts), ts)
			}
		}
		if n != 8 || len(plan) != 3 {
			t.Fatalf("%d tasks over %d members in the plan; want 8 over 3", n, len(plan))
		}
		want, err := a.Plan(clean, fourPartitions(a))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(tasksOfPlan(t, a, plan), tasksOfPlan(t, a, want)) || !reflect.DeepEqual(hosts, a.lastHosts) {
			t.Fatalf("unreadable user data was half-used: plan %v, hosts %v; with it ignored %v, %v", plan, hosts, want, a.lastHosts)
		}
	})
}

// FuzzAssignmentUserData: the leader's assignment data as any member receives it.
func FuzzAssignmentUserData(f *testing.F) {
	f.Add([]byte(`{"v":1,"hosts":{"h1:80":["0_0","1_1"],"h2:80":["0_1"]}}`))
	f.Add([]byte(`{"v":1,"hosts":{"h1:80":["0_0"]},"v":"x"}`))
	f.Add([]byte(`{"hosts":{"h1:80":"0_0"}}`))
	f.Add([]byte(`null`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		a := newAssignor(graph.Of(joinTopology(t)), "app")
		var gotHosts map[string][]string
		var gotTasks []processor.TaskID
		calls := 0
		a.onAssign = func(tasks, _ []processor.TaskID, _ int32, hosts map[string][]string) {
			calls++
			gotTasks, gotHosts = tasks, hosts
		}
		a.OnAssignment(&sarama.ConsumerGroupMemberAssignment{
			Topics:   map[string][]int32{"left": {1}, "right": {1}, "unknown": {0}},
			UserData: data,
		}, 7)
		if calls != 1 || len(gotTasks) != 1 || gotTasks[0] != (processor.TaskID{Subtopology: 0, Partition: 1}) {
			t.Fatalf("onAssign called %d times with tasks %v; want once with [0_1]", calls, gotTasks)
		}
		var ad assignmentData
		if len(data) == 0 || json.Unmarshal(data, &ad) != nil {
			ad.Hosts = nil // unreadable: no hosts known, never half a map
		}
		if !reflect.DeepEqual(gotHosts, ad.Hosts) {
			t.Fatalf("hosts %v from %q; want %v", gotHosts, data, ad.Hosts)
		}
	})
}

// FuzzParseTaskID: a task ID from user data parses only in its canonical form, and
// then prints back to the same text.
func FuzzParseTaskID(f *testing.F) {
	for _, s := range []string{"0_0", "12_345", "-1_0", "0_-1", "01_1", "1_01", "1_2_3", "1_2147483648", " 1_2", "1_", "_1", "+1_2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := processor.ParseTaskID(s)
		if err != nil {
			if id != (processor.TaskID{}) {
				t.Fatalf("ParseTaskID(%q) failed (%v) but returned %v", s, err, id)
			}
			return
		}
		if id.String() != s || id.Subtopology < 0 || id.Partition < 0 {
			t.Fatalf("ParseTaskID(%q) = %v", s, id)
		}
	})
}

// FuzzWarmupPlan: three members with arbitrary subscriptions to the word count's
// assignor (1_p stateful) with one standby, warm-ups (acceptable lag 10, at most 2) and
// changelogs 50 records long. Whatever they claim: every task runs once; a task placed
// elsewhere than the plan without warm-ups (the same acceptable lag) is a counting task
// kept on a member within the acceptable lag (it reported caughtUp or an offset sum of
// 40-50) away from a target of version 2 that is not; at most 2 warm-ups, each on the target of such a
// task, none beside a standby of it or on its active member; and a standby shares a
// rack with its task's active member or another standby only when every member
// without a replica of the task is on a rack the task uses (checkRackFallback).
func FuzzWarmupPlan(f *testing.F) {
	valid := func(sd subscriptionData) []byte { b, _ := json.Marshal(sd); return b }
	f.Add(valid(subscriptionData{Version: 2, Owned: []string{"0_0", "1_0", "1_1", "1_2", "1_3"}, Offsets: map[string]int64{"1_0": -2, "1_1": -2, "1_2": -2, "1_3": -2}, rackSubscription: rackSubscription{Rack: "r1"}}),
		valid(subscriptionData{Version: 2, rackSubscription: rackSubscription{Rack: "r1"}}), valid(subscriptionData{Version: 2, Offsets: map[string]int64{"1_2": 45}, rackSubscription: rackSubscription{Rack: "r2"}}))
	f.Add([]byte(`{"v":2,"owned":["1_0","1_1"],"offsets":{"1_0":-2,"1_1":-2,"1_3":41},"warmup":["1_2"]}`), []byte(`{"v":1,"rack":"a"}`), []byte(`{"v":2,"standby":["1_0"],"rack":"a"}`))
	// m1 is full (3 of 8 tasks) and holds the orphaned 1_2 20 records behind, 1_3 5
	// behind: only 1_3 goes to it above its share.
	f.Add([]byte(`{"v":1,"owned":["0_0","0_1","1_0"],"state":["1_0","1_2","1_3"],"offsets":{"1_0":-2,"1_2":30,"1_3":45}}`), []byte(`{"v":2,"owned":["0_2","0_3","1_1"]}`), []byte(`{"v":2}`))
	f.Fuzz(func(t *testing.T, d1, d2, d3 []byte) {
		a, _ := warmupAssignor(t, 1, 2, 50)
		a.warm.acceptableLag = 10
		base, _ := warmupAssignor(t, 1, 0, 50)
		base.warm.acceptableLag = 10 // the same plan, warm-ups off
		members := map[string]sarama.ConsumerGroupMemberMetadata{}
		subs := map[string]subscriptionData{}
		for m, d := range map[string][]byte{"m1": d1, "m2": d2, "m3": d3} {
			members[m] = sarama.ConsumerGroupMemberMetadata{UserData: d, GenerationID: -1} // eager members
			var sd subscriptionData
			if len(d) == 0 || json.Unmarshal(d, &sd) != nil {
				sd = subscriptionData{}
			}
			subs[m] = sd
		}
		caught := func(m string, id processor.TaskID) bool {
			off, ok := subs[m].Offsets[id.String()]
			return ok && (off == caughtUp || (off >= 40 && off <= 50))
		}
		plan, err := a.Plan(members, fourPartitions(a))
		if err != nil {
			t.Fatal(err)
		}
		got := tasksOfPlan(t, a, plan)
		basePlan, err := base.Plan(members, fourPartitions(base))
		if err != nil {
			t.Fatal(err)
		}
		runs, baseRuns := map[processor.TaskID]string{}, map[processor.TaskID]string{}
		for m, ts := range got {
			for _, id := range ts {
				runs[id] = m
			}
		}
		for m, ts := range tasksOfPlan(t, base, basePlan) {
			for _, id := range ts {
				baseRuns[id] = m
			}
		}
		if len(runs) != 8 {
			t.Fatalf("%d tasks run; want 8: %v", len(runs), got)
		}
		for id, m := range runs {
			if to := baseRuns[id]; to != m && (id.Subtopology != 1 || !caught(m, id) || caught(to, id) || subs[to].Version < 2) {
				t.Fatalf("%s runs on %s, not %s as without warm-ups, and is not a counting task held back on a caught-up member: %v", id, m, to, subs)
			}
		}
		n := 0
		for m := range members {
			for _, id := range a.warm.planned[m] {
				n++
				if baseRuns[id] != m || runs[id] == m || slices.Contains(a.lastStandby[m], id) {
					t.Fatalf("warm-up of %s on %s: target %s, runs on %s, standbys there %v", id, m, baseRuns[id], runs[id], a.lastStandby[m])
				}
			}
		}
		if n > 2 {
			t.Fatalf("%d warm-ups; at most 2: %v", n, a.warm.planned)
		}
		checkRackFallback(t, subs, runs, a.lastStandby)
	})
}

// checkRackFallback: a standby sharing a rack with its task's active member or another
// standby of it is allowed only when no member without a replica of the task (active
// or standby) is on a rack it does not use, or on no rack. (A standby that became a
// warm-up left the standbys: one fewer can only share less.)
func checkRackFallback(t *testing.T, subs map[string]subscriptionData, runs map[processor.TaskID]string, standby map[string][]processor.TaskID) {
	t.Helper()
	holds := map[processor.TaskID]map[string]bool{}
	for m, ts := range standby {
		for _, id := range ts {
			if holds[id] == nil {
				holds[id] = map[string]bool{runs[id]: true}
			}
			holds[id][m] = true
		}
	}
	for id, ms := range holds {
		racks := map[string]bool{}
		shared := false
		for m := range ms {
			if r := subs[m].Rack; r != "" {
				shared = shared || racks[r]
				racks[r] = true
			}
		}
		if !shared {
			continue
		}
		for m := range subs {
			if r := subs[m].Rack; !ms[m] && (r == "" || !racks[r]) {
				t.Fatalf("replicas of %s on %v share a rack while %s (rack %q) holds none", id, ms, m, r)
			}
		}
	}
}
