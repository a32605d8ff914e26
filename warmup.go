package eddy

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/processor"
)

// The runtime's side of warm-up replicas (assignwarmup.go has the leader's): a warm-up
// runs as a standby replica does (standbyTask, started and stopped by
// reconcileStandbys), /tasks and eddy_tasks report it as "warm-up", and while this
// instance has warm-ups it makes probing rebalances.

// startProbing starts, for a session in which this instance keeps warm-up replicas,
// the goroutine that makes the probing rebalance (probe); it ends with the session.
func (rt *runtime) startProbing(sess sarama.ConsumerGroupSession, wg *sync.WaitGroup) {
	if rt.cfg.RebalanceProtocol == CooperativeRebalancing {
		// The session outlives rebalances: warm-ups may come in any of its
		// generations.
		wg.Go(func() { rt.probe(sess.Context(), rt.cfg.ProbingRebalanceInterval, sess) })
		return
	}
	if len(rt.assignor.warmups()) == 0 {
		return
	}
	wg.Go(func() { rt.probe(sess.Context(), rt.cfg.ProbingRebalanceInterval, nil) })
}

// probe asks, every interval, whether one of this instance's warm-ups is within
// Config.AcceptableRecoveryLag, and then ends the session with a changed subscription:
// the leader plans again and moves the task (Kafka Streams' probing rebalance, which
// it makes every interval whatever the warm-ups' lags; here a rebalance, which stops
// every task of the group for a moment, is made only when it can move a task).
//
// Under cooperative rebalancing (live, the session) the member joins again within the
// session (sarama.RequestRejoin): only the task that moves pauses, and the probe goes
// on for the warm-ups of the later generations.
func (rt *runtime) probe(ctx context.Context, interval time.Duration, live sarama.ConsumerGroupSession) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if warm := rt.warmupsCaughtUp(); len(warm) > 0 {
			rt.logger.Info("probing rebalance: warm-up replicas are within Config.AcceptableRecoveryLag; asking for a new generation to move their tasks here",
				"warm", warm, "acceptable_recovery_lag", rt.cfg.AcceptableRecoveryLag)
			if live != nil {
				rt.assignor.bumpEpoch()
				sarama.RequestRejoin(live, errProbingRebalance)
				continue
			}
			rt.endSession()
			return
		}
	}
}

// errProbingRebalance is the cause of a probing rebalance's rejoin.
var errProbingRebalance = errors.New("eddy: probing rebalance: a warm-up replica caught up")

// warmupsCaughtUp lists this instance's warm-ups whose last round of reading found
// them within Config.AcceptableRecoveryLag of their changelogs' ends.
func (rt *runtime) warmupsCaughtUp() []processor.TaskID {
	warm := rt.assignor.warmups()
	var out []processor.TaskID
	for _, sb := range rt.standbyInfos() {
		if !warm[sb.ID] || sb.Rounds == 0 || sb.Err != nil {
			continue
		}
		var lag int64
		for _, l := range sb.Lag {
			lag += l
		}
		if lag <= rt.cfg.AcceptableRecoveryLag {
			out = append(out, sb.ID)
		}
	}
	return out
}

// endSession ends the current group session with a subscription that forces a new
// generation, whether or not this instance has claims: requestRejoin ends a session
// through its claims, and an instance that only warms tasks up may have none.
func (rt *runtime) endSession() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.assignor.bumpEpoch()
	if rt.cancelSession != nil {
		rt.cancelSession()
	}
}
