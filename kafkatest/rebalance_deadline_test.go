package kafkatest_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// rawJoin sends a JoinGroup for member (empty: a new member, which Kafka answers
// with MEMBER_ID_REQUIRED and the ID to join with) on its own connection and returns
// the response and how long the join took.
func rawJoin(t *testing.T, addr, group, member string, session, rebalance time.Duration) (*sarama.JoinGroupResponse, time.Duration, error) {
	t.Helper()
	cfg := kafkatest.NewSaramaConfig()
	cfg.Net.ReadTimeout = time.Minute
	b := sarama.NewBroker(addr)
	if err := b.Open(cfg); err != nil {
		return nil, 0, err
	}
	defer b.Close()
	coord, err := findCoordinator(b, group)
	if err != nil {
		return nil, 0, err
	}
	if coord.Addr() != addr {
		if err := coord.Open(cfg); err != nil {
			return nil, 0, err
		}
		defer coord.Close()
		b = coord
	}
	start := time.Now()
	for {
		req := &sarama.JoinGroupRequest{
			Version: 5, GroupId: group, MemberId: member, ProtocolType: "consumer",
			SessionTimeout: int32(session.Milliseconds()), RebalanceTimeout: int32(rebalance.Milliseconds()),
		}
		req.AddGroupProtocol("range", []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
		resp, err := b.JoinGroup(req)
		if err != nil {
			return nil, time.Since(start), err
		}
		if errors.Is(resp.Err, sarama.ErrMemberIdRequired) {
			member = resp.MemberId
			continue
		}
		return resp, time.Since(start), nil
	}
}

func findCoordinator(b *sarama.Broker, group string) (*sarama.Broker, error) {
	resp, err := b.FindCoordinator(&sarama.FindCoordinatorRequest{Version: 2, CoordinatorKey: group, CoordinatorType: sarama.CoordinatorGroup})
	if err != nil {
		return nil, err
	}
	if !errors.Is(resp.Err, sarama.ErrNoError) {
		return nil, resp.Err
	}
	return resp.Coordinator, nil
}

// A rebalance ends at the rebalance timeout counted from its start, whatever joins in
// the meantime: members that have not rejoined by then are dropped. (Kafka's
// DelayedJoin is created once, when the group starts preparing a rebalance.) If each
// join pushed the deadline out instead, members rejoining after their own join timed
// out would keep a group with one silent member from ever completing a rebalance.
func TestRebalanceEndsAtTheRebalanceTimeout(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		const rebalance = 4 * time.Second
		group := c.Unique("deadline")
		addr := c.Addrs()[0]
		// The silent member: joins, never heartbeats, never rejoins; its session outlasts
		// the test, so only the rebalance deadline can drop it.
		z, _, err := rawJoin(t, addr, group, "", time.Minute, rebalance)
		if err != nil || !errors.Is(z.Err, sarama.ErrNoError) {
			t.Fatalf("silent member's join: %v %v", err, z)
		}
		type result struct {
			resp *sarama.JoinGroupResponse
			took time.Duration
			err  error
		}
		first := make(chan result, 1)
		go func() {
			r, took, err := rawJoin(t, addr, group, "", time.Minute, rebalance)
			first <- result{r, took, err}
		}()
		// Newcomers join every second for longer than the deadline.
		later := make(chan result, 8)
		for i := range 6 {
			time.Sleep(time.Second)
			go func() {
				r, took, err := rawJoin(t, addr, group, "", time.Minute, rebalance)
				later <- result{r, took, fmt.Errorf("newcomer %d: %w", i, err)}
			}()
		}
		r := <-first
		if r.err != nil {
			t.Fatal(r.err)
		}
		t.Logf("%s: the first member's join took %v (rebalance timeout %v, newcomers every 1 s)", c.Name(), r.took.Round(100*time.Millisecond), rebalance)
		if r.took > rebalance+2*time.Second {
			t.Errorf("the first member's join took %v: the rebalance went on past its timeout (%v) while members kept joining", r.took, rebalance)
		}
	})
}
