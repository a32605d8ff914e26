package eddy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/internal/kafkaerr"
)

// run joins the group and consumes until ctx ends or a fatal error.
func (rt *runtime) run(parent context.Context) error {
	ctx, stop := context.WithCancelCause(parent)
	defer stop(nil)
	rt.mu.Lock()
	rt.stop = stop
	rt.mu.Unlock()
	if rt.fatalErr != nil {
		return rt.fatalErr
	}

	// Global stores first: tasks start with them up to date (Kafka Streams bootstraps
	// global state before its stream threads start).
	if err := rt.startGlobal(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer rt.stopGlobal()
	stopPurging := rt.startPurging(ctx)
	defer stopPurging()
	group, err := sarama.NewConsumerGroupFromClient(rt.cfg.ApplicationID, rt.client)
	if err != nil {
		return fmt.Errorf("eddy: consumer group: %w", err)
	}
	errsDone := rt.watchGroupErrors(group)
	rt.logger.Info("starting", "guarantee", rt.cfg.Guarantee.String(), "topics", rt.topics, "state_dir", rt.appDir, "group_instance_id", rt.cfg.InstanceID,
		"overlap_commits", rt.cfg.OverlapCommits && rt.cfg.Guarantee == ExactlyOnce)
	rt.consume(ctx, group)
	rt.stopping.Store(true)
	if rt.cfg.InstanceID != "" {
		// sarama sends no LeaveGroup for a static member (KIP-345): the member stays
		// until its session times out, and an instance back with the same InstanceID
		// before then takes its tasks back without a rebalance.
		rt.logger.Info("stopping: staying in the group as a static member", "group_instance_id", rt.cfg.InstanceID)
	} else {
		rt.logger.Info("stopping: leaving the group")
	}
	if err := group.Close(); err != nil {
		rt.logger.Warn("closing the consumer group", "error", err)
	}
	<-errsDone
	if rt.fatalErr != nil {
		return rt.fatalErr
	}
	return nil
}

// startPurging runs the purger until the returned stop, which waits for it to end.
func (rt *runtime) startPurging(ctx context.Context) (stop func()) {
	purgeCtx, stopPurging := context.WithCancel(ctx)
	var purging sync.WaitGroup
	purging.Go(func() { rt.purger.run(purgeCtx) })
	return func() {
		stopPurging()
		purging.Wait()
	}
}

// watchGroupErrors logs the errors the consumer group reports, and fails the runtime
// on those that do not pass with time. The returned channel closes when the group has
// closed its errors (after group.Close).
func (rt *runtime) watchGroupErrors(group sarama.ConsumerGroup) <-chan struct{} {
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for err := range group.Errors() {
			// A fetch refused for want of READ on a topic is retried by sarama for
			// ever, each refusal reported here: stop instead.
			if refused(err) {
				rt.fail(fmt.Errorf("eddy: consumer group %q: %w", rt.cfg.ApplicationID, err))
				continue
			}
			if fencedInstance(err) {
				rt.fail(rt.fencedInstanceErr(err))
				continue
			}
			rt.logger.Warn("consumer group", "error", kafkaerr.Explain(err))
		}
	}()
	return errsDone
}

// consume runs group sessions until ctx ends, the group closes or the broker refuses
// the group's principal; a session that ends otherwise is joined again with backoff.
func (rt *runtime) consume(ctx context.Context, group sarama.ConsumerGroup) {
	h := &groupHandler{rt: rt}
	var rejoin backoff.Backoff
	var unstable unstableOffsets
	for ctx.Err() == nil {
		sessCtx, cancel := context.WithCancel(ctx)
		rt.mu.Lock()
		rt.cancelSession = cancel
		rt.mu.Unlock()
		err := group.Consume(sessCtx, rt.topics, h)
		cancel()
		if ctx.Err() != nil {
			return
		}
		unstableFor, reportUnstable := unstable.observe(err, time.Now(), rt.unstableAfter())
		if err == nil {
			rejoin.Reset()
			continue
		}
		if errors.Is(err, sarama.ErrClosedConsumerGroup) {
			return
		}
		// A refusal does not pass with time: rejoining would retry it for ever.
		if refused(err) {
			rt.fail(fmt.Errorf("eddy: consumer group %q: %w", rt.cfg.ApplicationID, err))
			return
		}
		if sessionTimeoutRefused(err) {
			rt.fail(rt.sessionTimeoutErr(err))
			return
		}
		if fencedInstance(err) {
			rt.fail(rt.fencedInstanceErr(err))
			return
		}
		delay := rejoin.Next()
		if reportUnstable {
			rt.logger.Error("the group coordinator has answered UNSTABLE_OFFSET_COMMIT for longer than any transaction stays open: it holds, in memory only, an offset commit of a transaction that ended (a race in Kafka's group coordinator when it reloads the group's __consumer_offsets partition, seen with Kafka 4.1.1 after a broker restart; docs/kafka-notes.md), so a member assigned those partitions cannot start and nothing is processed. eddy aborts a transaction of each of its workers' transactional IDs that adds the group's offsets, which clears it when one of their producers holds it (logged next). Restart the broker that coordinates the group if it lasts, which reloads it; eddy keeps rejoining",
				"group", rt.cfg.ApplicationID, "for", unstableFor.Round(time.Second), "transaction_timeout", rt.cfg.TransactionTimeout, "error", kafkaerr.Explain(err))
			rt.clearPendingOffsets(ctx)
		}
		rt.logger.Warn("consumer group session ended; rejoining", "error", kafkaerr.Explain(err), "backoff", delay)
		_ = backoff.Sleep(ctx, delay)
	}
}
