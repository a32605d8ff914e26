package eddy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/processor"
)

// onAssignment runs on sarama's rebalance path right after SyncGroup: it closes the
// tasks this instance lost and creates the producers of the tasks it gained (in
// parallel, bounded in time), before sarama reads the committed offsets.
func (rt *runtime) onAssignment(assigned, standby []processor.TaskID, generation int32, hosts map[string][]string) {
	rt.metrics.Rebalance()
	if c := rt.liveCrew(); c != nil {
		rt.onCooperativeAssignment(c, assigned, standby, generation, hosts)
		return
	}
	prevGen := rt.registry.newGeneration(generation, hosts)
	// A task kept across a generation gap may have been owned and changed by another
	// instance in between: start it afresh.
	closing, fresh := rt.registry.reconcile(assigned, func(t *taskRunner) bool {
		return generation != prevGen+1 || t.broken()
	}, rt.newTask)
	for _, t := range closing {
		t.close()
	}
	if len(closing) > 0 || len(fresh) > 0 {
		rt.logger.Info("assignment", "generation", generation, "tasks", assigned, "closed", len(closing), "new", len(fresh), "standby", standby)
	}
	// After the active tasks lost are closed (a standby may be placed where its task
	// ran: the file must be free) and before any new task opens its file (in the
	// session, after this): a standby promoted to active is stopped here.
	rt.reconcileStandbys(standby)
	if rt.cfg.Guarantee != ExactlyOnce {
		return
	}
	// Producers first: creating one fences the previous producer of its transactional
	// ID and settles its open transaction, so the committed offsets sarama reads next
	// are stable. Per task: the new tasks' producers; per worker: those of the workers
	// without one (the first assignment after a start, or after a failure).
	var txns []*transaction
	if rt.cfg.ProducerPerTask {
		for _, t := range fresh {
			txns = append(txns, t.txn)
		}
	} else {
		for _, w := range rt.workers {
			txns = append(txns, w.txn)
		}
	}
	rt.createProducers(txns)
}

// createProducers creates the producers of txns that have none, in parallel and bounded
// in time; one that fails is created again when its tasks start.
func (rt *runtime) createProducers(txns []*transaction) {
	ctx, cancel := context.WithTimeout(context.Background(), rt.producerInitTimeout())
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, x := range txns {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := x.ensure(ctx); err != nil {
				rt.logger.Warn("creating a producer failed; retrying when its tasks start", "transactional_id", x.id, "error", err)
			}
		})
	}
	wg.Wait()
}

func (rt *runtime) producerInitTimeout() time.Duration {
	// The group waits for us while this runs (no heartbeats yet): stay well inside the
	// session timeout.
	return max(rt.sc.Consumer.Group.Session.Timeout/2, 2*time.Second)
}

// refused reports whether the broker refused the group's principal: no READ on the
// group or a topic, or failed authentication.
func refused(err error) bool {
	return errors.Is(err, sarama.ErrGroupAuthorizationFailed) || errors.Is(err, sarama.ErrTopicAuthorizationFailed) ||
		errors.Is(err, sarama.ErrSASLAuthenticationFailed)
}

// sessionTimeoutRefused reports whether the coordinator refused the group session
// timeout: it must lie within the broker's group.min.session.timeout.ms and
// group.max.session.timeout.ms (6 s and 30 min by default). Every rejoin is refused the
// same (issue 26: it was retried every 5 s for ever).
func sessionTimeoutRefused(err error) bool {
	return errors.Is(err, sarama.ErrInvalidSessionTimeout)
}

// sessionTimeoutErr is the error the application stops with when
// sessionTimeoutRefused(err).
func (rt *runtime) sessionTimeoutErr(err error) error {
	return fmt.Errorf("eddy: consumer group %q: the broker refuses the session timeout %v (%w): it must lie within the broker's group.min.session.timeout.ms and group.max.session.timeout.ms (6 s and 30 min by default); "+
		"eddy's default is 10 s, so it was set by the Config.Sarama hook (Consumer.Group.Session.Timeout): change it there or the broker's range",
		rt.cfg.ApplicationID, rt.sc.Consumer.Group.Session.Timeout, err)
}

// fencedInstance reports whether the coordinator fenced this instance's static
// membership: another member joined with the same Config.InstanceID. Rejoining would
// fence that one in turn, and the two would take the tasks from each other for ever;
// Kafka Streams stops too (FencedInstanceIdException is fatal there).
func fencedInstance(err error) bool {
	return errors.Is(err, sarama.ErrFencedInstancedId)
}

// fencedInstanceErr is the error the application stops with when fencedInstance(err).
func (rt *runtime) fencedInstanceErr(err error) error {
	return fmt.Errorf("eddy: consumer group %q: InstanceID %q: another instance joined with the same InstanceID and replaced this one (%w); give every instance its own InstanceID (the StatefulSet pod name)", rt.cfg.ApplicationID, rt.cfg.InstanceID, err)
}

// requestRejoin ends the session (once) so the consume loop joins the group again, with
// a subscription that forces a new generation.
func (rt *runtime) requestRejoin(sess sarama.ConsumerGroupSession) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.rejoin != nil && sess != nil && sess.Context().Err() == nil {
		rt.assignor.bumpEpoch()
		select {
		case <-rt.rejoin:
		default:
			close(rt.rejoin)
		}
	}
}

// groupHandler is the sarama.ConsumerGroupHandler of the runtime.
type groupHandler struct {
	rt *runtime
	wg sync.WaitGroup
}

// Setup starts one goroutine per assigned task for this session.
func (h *groupHandler) Setup(sess sarama.ConsumerGroupSession) error {
	rt := h.rt
	claimed := map[processor.TaskID]bool{}
	for topic, parts := range sess.Claims() {
		s := rt.topicToSub[topic]
		if s == nil {
			continue
		}
		for _, p := range parts {
			claimed[processor.TaskID{Subtopology: s.ID, Partition: p}] = true
		}
	}
	rt.mu.Lock()
	rt.rejoin = make(chan struct{})
	rt.mu.Unlock()
	ids := make([]processor.TaskID, 0, len(claimed))
	for id := range claimed {
		ids = append(ids, id)
	}
	// OnAssignment made the set the assignment already; this only differs when it did
	// not run (it should always).
	stale, _ := rt.registry.reconcile(ids, nil, rt.newTask)
	for _, t := range stale {
		t.close()
	}
	run := make([]*taskRunner, 0, len(ids))
	for _, id := range ids {
		run = append(run, rt.registry.get(id))
	}
	for _, t := range run {
		t.beginSession()
	}
	if rt.cfg.RebalanceProtocol == CooperativeRebalancing {
		c := newCrew(rt, sess, &h.wg)
		rt.mu.Lock()
		rt.crew = c
		rt.mu.Unlock()
		c.start(run)
		rt.watchWithheld(c)
	} else {
		rt.startWorkers(sess, run, &h.wg)
	}
	rt.startProbing(sess, &h.wg)
	rt.sessions.Add(1)
	rt.inSession.Store(true)
	return nil
}

// ConsumeClaim hands the records of one partition to its task until the claim ends.
func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	t := h.rt.taskFor(claim.Topic(), claim.Partition())
	msgs := claim.Messages()
	if t == nil {
		h.rt.logger.Warn("claim of an unknown task; ignoring its records", "topic", claim.Topic(), "partition", claim.Partition())
	} else {
		t.claim(claim.Topic(), claim.InitialOffset(), claim.HighWaterMarkOffset)
		h.rt.applyOffsetReset(t, claim.Topic(), claim.Partition(), claim.InitialOffset())
	}
	h.rt.mu.Lock()
	rejoin := h.rt.rejoin
	h.rt.mu.Unlock()
	var in *inbox
	if t != nil {
		in = t.inbox
	}
	forwardClaim(sess.Context(), rejoin, msgs, in)
	if t != nil && revoked(sess, rejoin) {
		if c := h.rt.liveCrew(); c != nil {
			c.release(t.id)
		}
	}
	return nil
}

// revoked reports whether a claim whose records ended was revoked (cooperative
// rebalancing) rather than ended with its session.
func revoked(sess sarama.ConsumerGroupSession, rejoin <-chan struct{}) bool {
	if sess.Context().Err() != nil {
		return false
	}
	select {
	case <-rejoin:
		return false
	default:
		return true
	}
}

// Cleanup waits for every task of the session to commit and stop.
func (h *groupHandler) Cleanup(sess sarama.ConsumerGroupSession) error {
	h.rt.inSession.Store(false)
	h.wg.Wait()
	h.rt.mu.Lock()
	h.rt.crew = nil
	h.rt.mu.Unlock()
	return nil
}

// startWorkers starts the session's goroutines: one per task, with the task's own
// producer (Config.ProducerPerTask), or one per worker, each running a share of the
// tasks (dealt in task order) with the worker's producer.
func (rt *runtime) startWorkers(sess sarama.ConsumerGroupSession, tasks []*taskRunner, wg *sync.WaitGroup) {
	if rt.cfg.ProducerPerTask {
		for _, t := range tasks {
			w := soloWorker(rt, rt.settings, t)
			wg.Go(func() { w.run(sess.Context(), sess, []*taskRunner{t}) })
		}
		return
	}
	for i, share := range rt.deal(tasks) {
		if len(share) > 0 {
			w := rt.workers[i]
			wg.Go(func() { w.run(sess.Context(), sess, share) })
		}
	}
}

// deal shares tasks among the workers, in task order: worker i gets the tasks i,
// i+len(workers), ...
func (rt *runtime) deal(tasks []*taskRunner) [][]*taskRunner {
	slices.SortFunc(tasks, func(a, b *taskRunner) int {
		return cmp.Or(cmp.Compare(a.id.Subtopology, b.id.Subtopology), cmp.Compare(a.id.Partition, b.id.Partition))
	})
	shares := make([][]*taskRunner, len(rt.workers))
	for i, t := range tasks {
		shares[i%len(shares)] = append(shares[i%len(shares)], t)
	}
	return shares
}
