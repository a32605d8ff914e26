package eddy

import (
	"encoding/json"
	"maps"
	"reflect"
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
			members[m] = sarama.ConsumerGroupMemberMetadata{UserData: d}
			// The same member as the assignor must see it: data that does not decode
			// counts as none.
			if len(d) > 0 && json.Unmarshal(d, new(subscriptionData)) != nil {
				d = nil
			}
			clean[m] = sarama.ConsumerGroupMemberMetadata{UserData: d}
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
