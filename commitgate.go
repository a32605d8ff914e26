package eddy

import (
	"context"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// commitGate holds the workers' commits during a join of a cooperative session: from
// the start of the join (SubscriptionUserData; commits under way are waited for) until
// the session's generation changes. A TxnOffsetCommit carries sess.GenerationID(),
// which the coordinator refuses (ILLEGAL_GENERATION) from the moment the join completes
// until sarama stores the new generation after SyncGroup; on real Kafka a join took
// 1.5-2.6 s here (the coordinator's join, the leader's plan, SyncGroup), and a bound of
// 2.5 s on the wait let a commit through with the old generation (the worker was fenced
// and the session ended: TestWarmupBeforeTheMove, cooperative, 1 run in 4). So a
// worker does not commit while the gate is shut (held) and goes on processing into its
// open transaction, as Kafka Streams does not commit while a rebalance is in progress;
// a commit that must happen (a release, a transaction near its timeout) waits (enter).
type commitGate struct {
	mu     sync.Mutex
	idle   sync.Cond
	active int
	shut   bool
	gen    int32 // the generation the gate was shut in
}

func newCommitGate() *commitGate {
	g := &commitGate{}
	g.idle.L = &g.mu
	return g
}

// shutFor shuts the gate for a join that starts in generation gen, once no commit is
// under way.
func (g *commitGate) shutFor(gen int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut, g.gen = true, gen
	for g.active > 0 {
		g.idle.Wait()
	}
}

// held reports whether a commit in sess must wait; g.mu is held.
func (g *commitGate) heldLocked(sess sarama.ConsumerGroupSession) bool {
	if g.shut && sess.GenerationID() != g.gen {
		g.shut = false
	}
	return g.shut
}

// held reports whether commits in sess are held (a join is under way).
func (g *commitGate) held(sess sarama.ConsumerGroupSession) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.heldLocked(sess)
}

// enter waits until a commit in sess may go ahead, for at most bound, and returns the
// function that ends the commit.
func (g *commitGate) enter(ctx context.Context, sess sarama.ConsumerGroupSession, bound time.Duration) (leave func()) {
	deadline := time.Now().Add(bound)
	for {
		g.mu.Lock()
		if !g.heldLocked(sess) || ctx.Err() != nil || !time.Now().Before(deadline) {
			g.active++
			g.mu.Unlock()
			return g.leave
		}
		g.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (g *commitGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active--
	if g.active == 0 {
		g.idle.Broadcast()
	}
}

// beforeJoin shuts the commit gate at the start of a join within a live cooperative
// session.
func (rt *runtime) beforeJoin() {
	if c := rt.liveCrew(); c != nil {
		rt.gate.shutFor(c.sess.GenerationID())
	}
	if rt.app.joinSeam != nil {
		rt.app.joinSeam()
	}
}

// commitHeld reports whether the worker should not commit now: under cooperative
// rebalancing a join is under way (commitGate) and its transaction, open for open, is
// far enough from TransactionTimeout to wait for the join to end.
func (rt *runtime) commitHeld(sess sarama.ConsumerGroupSession, open time.Duration) bool {
	if rt.gate == nil || sess == nil || open >= rt.cfg.TransactionTimeout/2 {
		return false
	}
	return rt.gate.held(sess)
}

// enterCommit waits, under cooperative rebalancing, until a commit in sess may carry
// its generation (commitGate), while its transaction, open for open, stays within three
// quarters of TransactionTimeout (past it the commit goes ahead: if the join has not
// ended, the coordinator refuses it and the worker is fenced, where waiting longer
// would have the broker abort the transaction); it returns the generation the commit
// carries (commitGeneration) and the function that ends the commit.
func (rt *runtime) enterCommit(ctx context.Context, sess sarama.ConsumerGroupSession, open time.Duration) (generation int32, leave func()) {
	if rt.gate == nil || sess == nil {
		return sessionGeneration(sess), func() {}
	}
	leave = rt.gate.enter(ctx, sess, max(rt.cfg.TransactionTimeout*3/4-open, 0))
	return rt.commitGeneration(sess), leave
}

// commitGeneration is the generation a commit in sess carries: the session's, except
// in a cooperative session, where it is the generation of the last assignment taken
// while the session was live (crew.commitGen).
func (rt *runtime) commitGeneration(sess sarama.ConsumerGroupSession) int32 {
	if c := rt.liveCrew(); c != nil && c.sess == sess {
		return c.commitGen.Load()
	}
	return sessionGeneration(sess)
}

// sessionGeneration is sess's generation (-1: no session).
func sessionGeneration(sess sarama.ConsumerGroupSession) int32 {
	if sess == nil {
		return -1
	}
	return sess.GenerationID()
}
