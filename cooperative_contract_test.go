package eddy_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/kafkatest"
)

// claimLog records a consumer's session calls and claims, with their times.
type claimLog struct {
	mu                sync.Mutex
	setups, cleanups  int
	sess              sarama.ConsumerGroupSession // the last Setup's
	started, finished map[int32][]time.Time
	hold              map[int32]time.Duration // how long a revoked claim takes to return
}

func newClaimLog() *claimLog {
	return &claimLog{started: map[int32][]time.Time{}, finished: map[int32][]time.Time{}, hold: map[int32]time.Duration{}}
}

func (l *claimLog) Setup(sess sarama.ConsumerGroupSession) error {
	l.mu.Lock()
	l.setups++
	l.sess = sess
	l.mu.Unlock()
	return nil
}

func (l *claimLog) Cleanup(sarama.ConsumerGroupSession) error {
	l.mu.Lock()
	l.cleanups++
	l.mu.Unlock()
	return nil
}

func (l *claimLog) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	p := claim.Partition()
	l.mu.Lock()
	l.started[p] = append(l.started[p], time.Now())
	l.mu.Unlock()
	for range claim.Messages() {
	}
	// Messages closed: the claim is revoked (or the session ends). A worker would
	// commit or abort the task's transaction here before returning.
	l.mu.Lock()
	hold := l.hold[p]
	l.mu.Unlock()
	time.Sleep(hold)
	l.mu.Lock()
	l.finished[p] = append(l.finished[p], time.Now())
	l.mu.Unlock()
	return nil
}

func (l *claimLog) snapshot() (setups, cleanups int, started, finished map[int32][]time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	started, finished = map[int32][]time.Time{}, map[int32][]time.Time{}
	for p, ts := range l.started {
		started[p] = append([]time.Time(nil), ts...)
	}
	for p, ts := range l.finished {
		finished[p] = append([]time.Time(nil), ts...)
	}
	return l.setups, l.cleanups, started, finished
}

// What eddy's cooperative rebalancing would rely on in sarama's cooperative protocol
// (issue 24 item 4; docs/architecture.md "Rebalancing: eager, and what cooperative would
// take"), checked on the brokers rather than read in its source: consumer A runs four
// partitions alone; B joins. With cooperative-sticky, A keeps its session (Setup once,
// no Cleanup), the claims it keeps are never stopped, and of each revoked claim sarama
// waits for ConsumeClaim to return — here held 2 s after Messages closes, as a commit
// would hold it — before B's claim of that partition starts.
func TestSaramaCooperativeKeepsClaimsAndWaitsForRevoked(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		t.Parallel()
		ctx := ctxT(t)
		topic, group := c.Unique("coop"), c.Unique("coop-group")
		if err := c.CreateTopic(ctx, topic, 4, nil); err != nil {
			t.Fatal(err)
		}
		newGroup := func() sarama.ConsumerGroup {
			cfg := kafkatest.NewSaramaConfig()
			cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
			cfg.Consumer.Group.Heartbeat.Interval = 250 * time.Millisecond
			cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
			g, err := sarama.NewConsumerGroup(c.Addrs(), group, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = g.Close() })
			return g
		}
		run := func(g sarama.ConsumerGroup, h *claimLog) (context.CancelFunc, chan struct{}) {
			runCtx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				for runCtx.Err() == nil {
					if err := g.Consume(runCtx, []string{topic}, h); err != nil && runCtx.Err() == nil {
						t.Logf("consume: %v", err)
						time.Sleep(100 * time.Millisecond)
					}
				}
			}()
			return cancel, done
		}
		a, b := newClaimLog(), newClaimLog()
		for p := int32(0); p < 4; p++ {
			a.hold[p] = 2 * time.Second
		}
		cancelA, doneA := run(newGroup(), a)
		waitFor(t, time.Minute, "A to claim all four partitions", func() (bool, error) {
			_, _, started, _ := a.snapshot()
			return len(started) == 4, nil
		})
		joined := time.Now()
		cancelB, doneB := run(newGroup(), b)
		waitFor(t, time.Minute, "B to claim two partitions", func() (bool, error) {
			_, _, started, _ := b.snapshot()
			return len(started) == 2, nil
		})
		time.Sleep(time.Second) // let a late extra rebalance show
		setupsA, cleanupsA, startedA, finishedA := a.snapshot()
		_, _, startedB, _ := b.snapshot()
		if setupsA != 1 || cleanupsA != 0 {
			t.Errorf("A's session: %d Setups and %d Cleanups; want one Setup and no Cleanup (the session lives across the rebalance)", setupsA, cleanupsA)
		}
		kept := 0
		for p := int32(0); p < 4; p++ {
			if len(startedA[p]) != 1 {
				t.Errorf("A's claim of partition %d started %d times; want once", p, len(startedA[p]))
			}
			if bs, moved := startedB[p]; moved {
				if len(finishedA[p]) != 1 {
					t.Errorf("partition %d moved to B, but A's claim ended %d times", p, len(finishedA[p]))
					continue
				}
				if !bs[0].After(finishedA[p][0]) {
					t.Errorf("partition %d: B's claim started %v before A's returned", p, finishedA[p][0].Sub(bs[0]))
				}
				if held := finishedA[p][0].Sub(joined); held < 2*time.Second {
					t.Errorf("partition %d: A's claim returned %v after B joined; it was held 2 s", p, held)
				}
				t.Logf("partition %d: A returned %v after B joined, B started %v after that", p,
					finishedA[p][0].Sub(joined).Round(time.Millisecond), bs[0].Sub(finishedA[p][0]).Round(time.Millisecond))
			} else {
				kept++
				if len(finishedA[p]) != 0 {
					t.Errorf("partition %d stayed with A, but its claim was stopped", p)
				}
			}
		}
		if kept != 2 {
			t.Errorf("A kept %d partitions; want 2", kept)
		}

		// The rejoin trigger eddy's patch adds (sarama.RequestRejoin): the leader, A, asks
		// for a new generation within its live session; nothing is revoked, so no claim
		// stops and the session goes on.
		a.mu.Lock()
		sessA := a.sess
		a.mu.Unlock()
		gen := sessA.GenerationID()
		if !sarama.RequestRejoin(sessA, fmt.Errorf("test: rejoin")) {
			t.Fatal("RequestRejoin refused sarama's own session")
		}
		waitFor(t, time.Minute, "a new generation after RequestRejoin", func() (bool, error) {
			return sessA.GenerationID() > gen, nil
		})
		setupsA2, cleanupsA2, startedA2, finishedA2 := a.snapshot()
		if setupsA2 != setupsA || cleanupsA2 != cleanupsA {
			t.Errorf("the rejoin ended A's session: %d Setups and %d Cleanups", setupsA2, cleanupsA2)
		}
		for p := int32(0); p < 4; p++ {
			if len(startedA2[p]) != len(startedA[p]) || len(finishedA2[p]) != len(finishedA[p]) {
				t.Errorf("the rejoin (generation %d -> %d) stopped or restarted A's claim of partition %d", gen, sessA.GenerationID(), p)
			}
		}
		cancelB()
		<-doneB
		cancelA()
		<-doneA
	})
}

// joinHook wraps sarama's cooperative-sticky strategy and calls before at the start of
// each join of its member (SubscriptionUserData), as eddy's assignor calls beforeJoin.
type joinHook struct {
	inner  sarama.BalanceStrategy
	before func()
}

func (h joinHook) Name() string { return h.inner.Name() }
func (h joinHook) Plan(members map[string]sarama.ConsumerGroupMemberMetadata, topics map[string][]int32) (sarama.BalanceStrategyPlan, error) {
	return h.inner.Plan(members, topics)
}
func (h joinHook) AssignmentData(memberID string, topics map[string][]int32, generationID int32) ([]byte, error) {
	return h.inner.AssignmentData(memberID, topics, generationID)
}
func (h joinHook) SupportedProtocols() []sarama.RebalanceProtocol {
	return h.inner.(interface {
		SupportedProtocols() []sarama.RebalanceProtocol
	}).SupportedProtocols()
}
func (h joinHook) SubscriptionUserData(topics []string) ([]byte, error) {
	h.before()
	return h.inner.(sarama.SubscriptionUserDataBalanceStrategy).SubscriptionUserData(topics)
}
func (h joinHook) OnAssignment(assignment *sarama.ConsumerGroupMemberAssignment, generationID int32) {
	h.inner.(sarama.OnAssignmentBalanceStrategy).OnAssignment(assignment, generationID)
}

// quitLog is a handler whose claims all return, revoked or not, once quit closes.
type quitLog struct {
	quit    chan struct{}
	mu      sync.Mutex
	ended   int32 // the session's generation when its context ended
	cleanup time.Time
	lastGen int32 // the session's generation at Cleanup
	claimed map[int32]time.Time
	gens    map[int32]int32 // the generation a partition was first claimed in
}

func (q *quitLog) Setup(sess sarama.ConsumerGroupSession) error {
	go func() {
		<-sess.Context().Done()
		q.mu.Lock()
		q.ended = sess.GenerationID()
		q.mu.Unlock()
	}()
	return nil
}

func (q *quitLog) Cleanup(sess sarama.ConsumerGroupSession) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cleanup.IsZero() {
		q.cleanup, q.lastGen = time.Now(), sess.GenerationID()
	}
	return nil
}

func (q *quitLog) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	q.mu.Lock()
	if _, ok := q.claimed[claim.Partition()]; !ok {
		q.claimed[claim.Partition()], q.gens[claim.Partition()] = time.Now(), sess.GenerationID()
	}
	q.mu.Unlock()
	for {
		select {
		case _, ok := <-claim.Messages():
			if !ok {
				return nil
			}
		case <-q.quit:
			return nil
		}
	}
}

// The hazard crew.commitGen guards against (docs/architecture.md, "The generation a
// commit carries"), checked on the brokers: a cooperative session that ends while its
// member joins is not over for sarama. A runs four partitions alone; B joins; at the
// start of A's join every claim of A returns, as eddy's do when its runtime asks the
// session to end (requestRejoin), so A's session context ends in generation g. sarama
// still completes the join and its follow-up, storing their generations in the ended
// session, so that by Cleanup it carries a generation in which B holds partitions A
// ran and never gave up in a live session: a handler committing there with the
// session's generation would commit partitions B owns. If sarama stops joining for an ended session, this test fails, and
// commitGen's freeze is no longer needed (it stays harmless).
func TestSaramaCooperativeEndedSessionStillJoins(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		t.Parallel()
		ctx := ctxT(t)
		topic, group := c.Unique("coop-end"), c.Unique("coop-end-group")
		if err := c.CreateTopic(ctx, topic, 4, nil); err != nil {
			t.Fatal(err)
		}
		var armed atomic.Bool
		a := &quitLog{quit: make(chan struct{}), claimed: map[int32]time.Time{}, gens: map[int32]int32{}}
		b := &quitLog{quit: make(chan struct{}), claimed: map[int32]time.Time{}, gens: map[int32]int32{}}
		newGroup := func(before func()) sarama.ConsumerGroup {
			cfg := kafkatest.NewSaramaConfig()
			cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{joinHook{inner: sarama.NewBalanceStrategyCooperativeSticky(), before: before}}
			cfg.Consumer.Group.Heartbeat.Interval = 250 * time.Millisecond
			cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
			g, err := sarama.NewConsumerGroup(c.Addrs(), group, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = g.Close() })
			return g
		}
		consume := func(g sarama.ConsumerGroup, h sarama.ConsumerGroupHandler, once bool) (context.CancelFunc, chan struct{}) {
			runCtx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				for runCtx.Err() == nil {
					if err := g.Consume(runCtx, []string{topic}, h); err != nil && runCtx.Err() == nil {
						t.Logf("consume: %v", err)
						time.Sleep(100 * time.Millisecond)
					}
					if once {
						return
					}
				}
			}()
			return cancel, done
		}
		cancelA, doneA := consume(newGroup(func() {
			if armed.CompareAndSwap(true, false) {
				close(a.quit)
			}
		}), a, true)
		waitFor(t, time.Minute, "A to claim all four partitions", func() (bool, error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			return len(a.claimed) == 4, nil
		})
		armed.Store(true)
		cancelB, doneB := consume(newGroup(func() {}), b, false)
		waitFor(t, time.Minute, "A's session to be cleaned up and B to claim partitions", func() (bool, error) {
			a.mu.Lock()
			cleaned := !a.cleanup.IsZero()
			a.mu.Unlock()
			b.mu.Lock()
			defer b.mu.Unlock()
			return cleaned && len(b.claimed) > 0, nil
		})
		a.mu.Lock()
		ended, last := a.ended, a.lastGen
		a.mu.Unlock()
		b.mu.Lock()
		gensB := maps.Clone(b.gens)
		b.mu.Unlock()
		if last <= ended {
			t.Errorf("A's session ended in generation %d and was cleaned up in %d: sarama no longer joins for an ended session", ended, last)
		}
		heldByB := 0
		for _, g := range gensB {
			if g <= last {
				heldByB++
			}
		}
		if heldByB == 0 {
			t.Errorf("B claimed no partition in a generation up to %d, the one A's ended session carries at Cleanup (B's claims: %v)", last, gensB)
		}
		t.Logf("A's session ended in generation %d and carries %d at Cleanup; B claimed partitions A ran in generations %v", ended, last, gensB)
		cancelB()
		<-doneB
		cancelA()
		<-doneA
	})
}
