package eddy

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// joinTopology: sub-topology 0 reads "left" and "right" (co-partitioned), repartitions
// into sub-topology 1.
func joinTopology(t *testing.T) *topology.Topology {
	b := topology.NewBuilder()
	topology.AddSource(b, "src", serde.String(), serde.String(), "left", "right")
	topology.AddRepartition(b, "rekey", serde.String(), serde.String(), "src")
	topology.AddProcessor(b, "p", processor.Filter(func(processor.Record[string, string]) bool { return true }), "rekey")
	topology.AddSink(b, "out", "out", serde.String(), serde.String(), "p")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func member(t *testing.T, sd subscriptionData) sarama.ConsumerGroupMemberMetadata {
	b, err := json.Marshal(sd)
	if err != nil {
		t.Fatal(err)
	}
	// An eager member's join: it holds nothing, so it names no generation (sarama's
	// defaultGeneration); cooperative tests set theirs.
	return sarama.ConsumerGroupMemberMetadata{UserData: b, GenerationID: -1}
}

// tasksOfPlan turns a plan back into tasks per member, checking co-partitioning: every
// task's partition of every source topic goes to the same member.
func tasksOfPlan(t *testing.T, a *assignor, plan sarama.BalanceStrategyPlan) map[string][]processor.TaskID {
	t.Helper()
	owner := map[string]string{} // "topic/partition" → member
	out := map[string][]processor.TaskID{}
	for m, topics := range plan {
		for topic, parts := range topics {
			for _, p := range parts {
				key := fmt.Sprintf("%s/%d", topic, p)
				if o, dup := owner[key]; dup {
					t.Fatalf("%s assigned to %s and %s", key, o, m)
				}
				owner[key] = m
			}
		}
		out[m] = a.tasksOf(topics)
	}
	for _, s := range a.graph.Subtopologies {
		topics := s.AllSourceTopics(a.appID)
		for p := 0; p < 4; p++ {
			first := owner[fmt.Sprintf("%s/%d", topics[0], p)]
			if first == "" {
				t.Fatalf("%s/%d assigned to nobody", topics[0], p)
			}
			for _, topic := range topics[1:] {
				if o := owner[fmt.Sprintf("%s/%d", topic, p)]; o != first {
					t.Fatalf("task %d_%d split: %s/%d on %s, %s/%d on %s", s.ID, p, topics[0], p, first, topic, p, o)
				}
			}
		}
	}
	return out
}

func fourPartitions(a *assignor) map[string][]int32 {
	topics := map[string][]int32{}
	for topic := range a.topicToSub {
		topics[topic] = []int32{0, 1, 2, 3}
	}
	return topics
}

func TestAssignorCoPartitionsAndBalances(t *testing.T) {
	a := newAssignor(graph.Of(joinTopology(t)), "app")
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"m1": member(t, subscriptionData{Version: 1}),
		"m2": member(t, subscriptionData{Version: 1}),
		"m3": member(t, subscriptionData{Version: 1}),
	}
	plan, err := a.Plan(members, fourPartitions(a))
	if err != nil {
		t.Fatal(err)
	}
	got := tasksOfPlan(t, a, plan)
	total := 0
	for m, ts := range got {
		total += len(ts)
		if len(ts) < 2 || len(ts) > 3 {
			t.Errorf("member %s got %d tasks (%v); 8 tasks over 3 members means 2 or 3 each", m, len(ts), ts)
		}
	}
	if total != 8 {
		t.Fatalf("%d tasks assigned, want 8", total)
	}
}

// With no history, each sub-topology's tasks spread over the members, rather than one
// member getting every task of one sub-topology.
func TestAssignorSpreadsEachSubtopology(t *testing.T) {
	a := newAssignor(graph.Of(joinTopology(t)), "app")
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"m1": member(t, subscriptionData{Version: 1}),
		"m2": member(t, subscriptionData{Version: 1}),
	}
	plan, err := a.Plan(members, fourPartitions(a))
	if err != nil {
		t.Fatal(err)
	}
	for m, ts := range tasksOfPlan(t, a, plan) {
		perSub := map[int]int{}
		for _, id := range ts {
			perSub[id.Subtopology]++
		}
		if perSub[0] != 2 || perSub[1] != 2 {
			t.Errorf("member %s got %v: want two tasks of each sub-topology", m, ts)
		}
	}
}

func TestAssignorIsSticky(t *testing.T) {
	a := newAssignor(graph.Of(joinTopology(t)), "app")
	owned := map[string][]string{
		"m1": {"0_0", "1_0", "0_1", "1_1"},
		"m2": {"0_2", "1_2", "0_3", "1_3"},
	}
	members := map[string]sarama.ConsumerGroupMemberMetadata{}
	for m, o := range owned {
		members[m] = member(t, subscriptionData{Version: 1, Owned: o})
	}
	// A third member joins: each old member keeps most of its tasks and gives some up.
	members["m3"] = member(t, subscriptionData{Version: 1})
	plan, err := a.Plan(members, fourPartitions(a))
	if err != nil {
		t.Fatal(err)
	}
	got := tasksOfPlan(t, a, plan)
	for m, o := range owned {
		kept := 0
		for _, id := range got[m] {
			for _, s := range o {
				if id.String() == s {
					kept++
				}
			}
		}
		if kept != len(got[m]) {
			t.Errorf("member %s got tasks it did not own (%v, owned %v) while it had to give some up", m, got[m], o)
		}
		if kept < 2 {
			t.Errorf("member %s kept %d of its tasks", m, kept)
		}
	}
	if len(got["m3"]) < 2 {
		t.Errorf("the new member got %v", got["m3"])
	}
}

func TestAssignorPrefersLocalState(t *testing.T) {
	a := newAssignor(graph.Of(joinTopology(t)), "app")
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"m1": member(t, subscriptionData{Version: 1}),
		"m2": member(t, subscriptionData{Version: 1, State: []string{"1_0", "1_1", "1_2"}}),
	}
	plan, err := a.Plan(members, fourPartitions(a))
	if err != nil {
		t.Fatal(err)
	}
	got := tasksOfPlan(t, a, plan)
	for _, want := range []string{"1_0", "1_1", "1_2"} {
		found := false
		for _, id := range got["m2"] {
			found = found || id.String() == want
		}
		if !found {
			t.Errorf("task %s with local state on m2 went elsewhere: m2 has %v", want, got["m2"])
		}
	}
}

func TestAssignmentDataNamesHosts(t *testing.T) {
	a := newAssignor(graph.Of(joinTopology(t)), "app")
	members := map[string]sarama.ConsumerGroupMemberMetadata{
		"m1": member(t, subscriptionData{Version: 1, Host: "h1:80"}),
		"m2": member(t, subscriptionData{Version: 1, Host: "h2:80"}),
		"m3": member(t, subscriptionData{Version: 1, Host: "h3:80"}),
		"m4": member(t, subscriptionData{Version: 1, Host: "h4:80"}),
		"m5": member(t, subscriptionData{Version: 1, Host: "h5:80"}),
		"m6": member(t, subscriptionData{Version: 1, Host: "h6:80"}),
		"m7": member(t, subscriptionData{Version: 1, Host: "h7:80"}),
		"m8": member(t, subscriptionData{Version: 1, Host: "h8:80"}),
		"m9": member(t, subscriptionData{Version: 1, Host: "h9:80"}), // one too many: no task
	}
	plan, err := a.Plan(members, fourPartitions(a))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plan["m9"]; !ok {
		t.Fatal("a member without tasks has no entry in the plan, so it would get no assignment data")
	}
	data, err := a.AssignmentData("m9", nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	var ad assignmentData
	if err := json.Unmarshal(data, &ad); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ts := range ad.Hosts {
		n += len(ts)
	}
	if n != 8 || len(ad.Hosts) != 8 {
		t.Fatalf("hosts map %v: want 8 hosts with one task each", ad.Hosts)
	}
}
