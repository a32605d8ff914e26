//go:build unix

package eos

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// removeDeadMembers removes the group member of a process that ended longer than its
// session timeout plus the grace ago, and leaves alone live members and members of
// processes that ended recently. (The kfake bug it works around — a member that died
// while its JoinGroup was pending is never expired — needs a response to be lost to a
// closed connection, which kfake's buffered response channel makes happen about half
// the time; here the dead process's member is simply one that stopped heartbeating.)
func TestRemoveDeadMembers(t *testing.T) {
	c := kafkatest.Embedded(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	group, topic := c.Unique("dead-member"), c.Unique("topic")
	if err := c.CreateTopic(ctx, topic, 4, nil); err != nil {
		t.Fatal(err)
	}

	// A live member, with a short heartbeat interval so that it rejoins quickly.
	cfg := kafkatest.NewSaramaConfig()
	cfg.ClientID = "live"
	cfg.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	live, err := sarama.NewConsumerGroup(c.Addrs(), group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	liveCtx, stopLive := context.WithCancel(ctx)
	defer stopLive()
	liveDone := make(chan struct{})
	go func() {
		defer close(liveDone)
		for liveCtx.Err() == nil {
			_ = live.Consume(liveCtx, []string{topic}, idleHandler{})
		}
	}()
	defer func() { stopLive(); <-liveDone }()
	members := func() map[string]string { // member ID → client ID
		t.Helper()
		admin, err := sarama.NewClusterAdmin(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		gs, err := admin.DescribeConsumerGroups([]string{group})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for id, m := range gs[0].Members {
			out[id] = m.ClientId
		}
		return out
	}
	waitMembers := func(what string, ok func(map[string]string) bool) map[string]string {
		t.Helper()
		for {
			m := members()
			if ok(m) {
				return m
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: members %v", what, m)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitMembers("the live member joins", func(m map[string]string) bool { return len(m) == 1 })

	// The member of the "dead" process: it joins and never heartbeats (the broker would
	// expire it 6 s after the join).
	deadName := "i0#1"
	bcfg := kafkatest.NewSaramaConfig()
	bcfg.ClientID = ClientID(deadName)
	b := sarama.NewBroker(c.Addrs()[0])
	if err := b.Open(bcfg); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	req := &sarama.JoinGroupRequest{
		Version: 3, GroupId: group, SessionTimeout: 6000, RebalanceTimeout: 10000, ProtocolType: "consumer",
	}
	if err := req.AddGroupProtocolMetadata(sarama.RangeBalanceStrategyName, &sarama.ConsumerGroupMemberMetadata{Topics: []string{topic}}); err != nil {
		t.Fatal(err)
	}
	resp, err := b.JoinGroup(req)
	if err != nil || !errors.Is(resp.Err, sarama.ErrNoError) {
		t.Fatalf("join: %v %v", err, resp)
	}
	deadID := resp.MemberId
	joinedAt := time.Now()
	waitMembers("both members", func(m map[string]string) bool { return m[deadID] != "" && len(m) == 2 })

	h := &harness{
		cfg:    Config{Brokers: c.Addrs(), SessionTimeout: 6 * time.Second},
		names:  Names{App: group},
		logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
		res:    &Result{},
	}
	defer func() {
		if h.membersClient != nil {
			_ = h.membersClient.Close()
		}
	}()
	ended := make(chan struct{})
	close(ended)
	dead := &process{name: deadName, done: ended, endedAt: time.Now()}
	alive := &process{name: "i1#1", done: make(chan struct{})}
	h.instances = []*instance{{proc: dead}, {proc: alive}}

	// Not yet: the member of a process that just ended may stay its session timeout
	// plus the grace.
	h.removeDeadMembers()
	if h.res.DeadMembersRemoved != 0 || members()[deadID] == "" {
		t.Fatalf("removed %d members before the grace was over", h.res.DeadMembersRemoved)
	}
	dead.endedAt = time.Now().Add(-h.cfg.SessionTimeout - deadMemberGrace)
	h.membersChecked = time.Time{}
	h.removeDeadMembers()
	if h.res.DeadMembersRemoved != 1 {
		t.Fatalf("removed %d members, want 1", h.res.DeadMembersRemoved)
	}
	left := waitMembers("the dead member is gone", func(m map[string]string) bool { return m[deadID] == "" })
	if !slices.Contains(slices.Collect(maps.Values(left)), "live") {
		t.Errorf("the live member went too: %v", left)
	}
	if d := time.Since(joinedAt); d >= 6*time.Second {
		t.Errorf("the check took %v: the broker may have expired the member itself", d)
	}
}

// idleHandler consumes nothing: the test only needs a live group member.
type idleHandler struct{}

func (idleHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (idleHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (idleHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for range c.Messages() {
	}
	return nil
}
