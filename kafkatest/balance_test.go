package kafkatest_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// recordingStrategy is a stateful assignor like the one eddy's runtime
// needs: each member reports its state in its subscription user data, the
// leader plans from what the members report, and each member learns its
// assignment (and the leader's user data for it) before its session starts.
type recordingStrategy struct {
	member string // this member's label, carried in its user data

	mu       sync.Mutex
	events   []string                                // "subscription", "plan", "assignment", "setup", in order
	plans    []map[string]string                     // per Plan: member ID -> user data the leader saw
	assigned []*sarama.ConsumerGroupMemberAssignment // per OnAssignment
	gens     []int32                                 // generation per OnAssignment
	lastData string                                  // user data of the last assignment, echoed in the next subscription
	setups   []map[string][]int32                    // claims per Setup
}

var (
	_ sarama.SubscriptionUserDataBalanceStrategy = (*recordingStrategy)(nil)
	_ sarama.OnAssignmentBalanceStrategy         = (*recordingStrategy)(nil)
)

func (s *recordingStrategy) Name() string { return "eddy-smoke" }

func (s *recordingStrategy) record(event string) {
	s.events = append(s.events, event)
}

// SubscriptionUserData reports "member=<label>;last=<user data of the last
// assignment>".
func (s *recordingStrategy) SubscriptionUserData(topics []string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("subscription")
	return fmt.Appendf(nil, "member=%s;last=%s", s.member, s.lastData), nil
}

// Plan gives partitions round-robin to the members sorted by their label,
// and gives every member an entry in the plan, even one without partitions,
// so that sarama sends it AssignmentData.
func (s *recordingStrategy) Plan(members map[string]sarama.ConsumerGroupMemberMetadata, topics map[string][]int32) (sarama.BalanceStrategyPlan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("plan")
	seen := make(map[string]string, len(members))
	label := make(map[string]string, len(members))
	for id, m := range members {
		seen[id] = string(m.UserData)
		l, _, _ := strings.Cut(strings.TrimPrefix(string(m.UserData), "member="), ";")
		label[id] = l
	}
	s.plans = append(s.plans, seen)
	ids := slices.Collect(maps.Keys(members))
	slices.SortFunc(ids, func(a, b string) int { return strings.Compare(label[a], label[b]) })
	plan := make(sarama.BalanceStrategyPlan, len(ids))
	for _, id := range ids {
		plan[id] = map[string][]int32{}
	}
	i := 0
	for _, topic := range slices.Sorted(maps.Keys(topics)) {
		for _, p := range topics[topic] {
			plan.Add(ids[i%len(ids)], topic, p)
			i++
		}
	}
	return plan, nil
}

// AssignmentData tells each member which generation the leader planned.
func (s *recordingStrategy) AssignmentData(memberID string, topics map[string][]int32, generationID int32) ([]byte, error) {
	return fmt.Appendf(nil, "from-leader:gen=%d:parts=%d", generationID, countPartitions(topics)), nil
}

func (s *recordingStrategy) OnAssignment(a *sarama.ConsumerGroupMemberAssignment, generationID int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("assignment")
	s.assigned = append(s.assigned, a)
	s.gens = append(s.gens, generationID)
	s.lastData = string(a.UserData)
}

func (s *recordingStrategy) setup(sess sarama.ConsumerGroupSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record("setup")
	s.setups = append(s.setups, sess.Claims())
}

func (s *recordingStrategy) snapshot() (events []string, plans []map[string]string, assigned []*sarama.ConsumerGroupMemberAssignment, gens []int32, setups []map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events), slices.Clone(s.plans), slices.Clone(s.assigned), slices.Clone(s.gens), slices.Clone(s.setups)
}

func countPartitions(topics map[string][]int32) int {
	n := 0
	for _, ps := range topics {
		n += len(ps)
	}
	return n
}

// TestBalanceStrategyUserData proves the hooks a stateful assignor relies on
// against both brokers: subscription user data reaches the leader's Plan,
// the leader's AssignmentData reaches each member's OnAssignment, which runs
// before Setup with the same partitions as the session's claims, and a
// member can echo what it was assigned into its next subscription.
func TestBalanceStrategyUserData(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		topic, group := c.Unique("in"), c.Unique("group")
		if err := c.CreateTopic(ctx, topic, 3, nil); err != nil {
			t.Fatal(err)
		}

		strategies := map[string]*recordingStrategy{}
		members := map[string]*liveGroup{}
		join := func(label string) {
			s := &recordingStrategy{member: label}
			cfg := groupConfig()
			cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{s}
			strategies[label] = s
			members[label] = joinGroup(t, c, cfg, group, []string{topic}, groupHooks{setup: s.setup})
		}

		// One member: it leads, plans from its own user data, gets all
		// three partitions.
		join("a")
		sa := members["a"].session(ctx, t)
		events, plans, assigned, gens, setups := strategies["a"].snapshot()
		// A first JoinGroup is answered MEMBER_ID_REQUIRED (KIP-394) and
		// sarama joins again with the member ID it got: both call
		// SubscriptionUserData.
		if want := []string{"subscription", "plan", "assignment", "setup"}; !slices.Equal(slices.Compact(slices.Clone(events)), want) {
			t.Fatalf("member a, first generation: hook order %v, want %v (subscription may repeat)", events, want)
		}
		t.Logf("%s: member a, first generation: hooks %v", c.Name(), events)
		if got, want := plans[0][sa.MemberID()], "member=a;last="; got != want {
			t.Errorf("leader saw user data %q for member a, want %q", got, want)
		}
		if got, want := string(assigned[0].UserData), fmt.Sprintf("from-leader:gen=%d:parts=3", sa.GenerationID()); got != want {
			t.Errorf("member a: assignment user data %q, want %q", got, want)
		}
		if gens[0] != sa.GenerationID() {
			t.Errorf("member a: OnAssignment generation %d, session generation %d", gens[0], sa.GenerationID())
		}
		if !maps.EqualFunc(assigned[0].Topics, sa.Claims(), slices.Equal) || !maps.EqualFunc(setups[0], sa.Claims(), slices.Equal) {
			t.Errorf("member a: OnAssignment %v, Setup claims %v, session claims %v; want all equal", assigned[0].Topics, setups[0], sa.Claims())
		}

		// Three more members: a rebalance. The leader (whichever member the
		// coordinator picks) sees all four subscriptions; member a echoes
		// the assignment data of the first generation. Member d gets no
		// partition but still its assignment data, because the plan has an
		// (empty) entry for it.
		join("b")
		join("c")
		join("d")
		var sessions = map[string]sarama.ConsumerGroupSession{}
		var gen int32
		for len(sessions) < 4 || !sameGeneration(sessions) {
			for label, lg := range members {
				select {
				case s := <-lg.sessions:
					sessions[label] = s
				default:
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("no common generation for the four members: sessions %v", sessions)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, s := range sessions {
			gen = s.GenerationID()
		}
		var leaderPlan map[string]string
		for label, s := range strategies {
			_, plans, _, _, _ := s.snapshot()
			for _, p := range plans {
				if len(p) == 4 {
					if leaderPlan != nil {
						t.Errorf("two members planned the four-member generation (second: %s)", label)
					}
					leaderPlan = p
				}
			}
		}
		if leaderPlan == nil {
			t.Fatalf("no member planned a generation with four members")
		}
		// Each member echoes the assignment data of the last generation it was in
		// before this one: for a, the first; for b, c and d, none, unless the
		// coordinator had a generation without one of them first (b and c joined,
		// d after it: seen on a loaded machine against Kafka).
		wantData := map[string]string{}
		for label, sess := range sessions {
			_, _, assigned, gens, _ := strategies[label].snapshot()
			last := ""
			for i, g := range gens {
				if g < sess.GenerationID() {
					last = string(assigned[i].UserData)
				}
			}
			wantData[sess.MemberID()] = "member=" + label + ";last=" + last
		}
		if got := wantData[sessions["a"].MemberID()]; !strings.HasPrefix(got, "member=a;last=from-leader:gen=") {
			t.Errorf("member a's last assignment data %q: it had one from generation %d", got, sa.GenerationID())
		}
		if !maps.Equal(leaderPlan, wantData) {
			t.Errorf("leader's Plan saw user data %v, want %v", leaderPlan, wantData)
		}
		total := 0
		for label, s := range strategies {
			sess := sessions[label]
			events, _, assigned, gens, setups := s.snapshot()
			// The last hooks of the generation: assignment, then setup.
			if n := len(events); n < 2 || events[n-2] != "assignment" || events[n-1] != "setup" {
				t.Errorf("member %s: hooks %v, want ... assignment, setup", label, events)
				continue
			}
			last := assigned[len(assigned)-1]
			if gens[len(gens)-1] != gen {
				t.Errorf("member %s: OnAssignment generation %d, want %d", label, gens[len(gens)-1], gen)
			}
			parts := 1
			if label == "d" {
				parts = 0
			}
			want := fmt.Sprintf("from-leader:gen=%d:parts=%d", gen, parts)
			if got := string(last.UserData); got != want {
				t.Errorf("member %s: assignment user data %q, want %q", label, got, want)
			}
			if !maps.EqualFunc(last.Topics, sess.Claims(), slices.Equal) || !maps.EqualFunc(setups[len(setups)-1], sess.Claims(), slices.Equal) {
				t.Errorf("member %s: OnAssignment %v, Setup claims %v, session claims %v; want all equal", label, last.Topics, setups[len(setups)-1], sess.Claims())
			}
			total += countPartitions(sess.Claims())
		}
		if total != 3 {
			t.Errorf("the four members claim %d partitions in all, want 3", total)
		}
		for label, lg := range members {
			if errs := lg.errs(); len(errs) > 0 {
				t.Errorf("member %s: consumer-group errors: %v", label, errs)
			}
		}
	})
}

func sameGeneration(sessions map[string]sarama.ConsumerGroupSession) bool {
	gen := int32(-2)
	for _, s := range sessions {
		if gen != -2 && s.GenerationID() != gen {
			return false
		}
		gen = s.GenerationID()
	}
	return true
}
