package eddy_test

import (
	"context"
	"fmt"
	"sync"
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
