package eddy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/internal/kafkaerr"
)

// A read_committed member asks for its committed offsets with RequireStable (KIP-447):
// while a transaction that committed offsets for a partition is open, the group
// coordinator answers UNSTABLE_OFFSET_COMMIT, sarama retries a few times and ends the
// session, and the runtime joins again. That passes once the transaction ends, at the
// latest when the transaction coordinator aborts it for its timeout. Past that, no open
// transaction explains it: Kafka 4.1.1 answered so for two input partitions for more
// than ten minutes after a broker kill -9, with every transactional ID of the group's
// producers Empty and no open transaction in the group's __consumer_offsets partition,
// until the broker was restarted (two long runs of the exactly-once harness,
// 2026-12-04). The cause is a race in Kafka's group coordinator when it reloads that
// partition (docs/kafka-notes.md, "The group coordinator after a restart";
// integration/eos/cmd/unstable-wedge reproduces it without eddy). The application
// processes nothing meanwhile, and only the rejoins said so, as warnings; now an error
// says what is wrong and what to do, and the runtime clears what it can
// (clearPendingOffsets).

// unstableSlack is how long past Config.TransactionTimeout an open transaction can keep
// offsets unstable: the transaction coordinator looks for timed-out transactions every
// 10 s by default (transaction.abort.timed.out.transaction.cleanup.interval.ms), then
// writes the abort markers.
const unstableSlack = 30 * time.Second

// unstableReportEvery spaces the errors while the condition lasts.
const unstableReportEvery = time.Minute

// unstableOffsets follows the group sessions that end on UNSTABLE_OFFSET_COMMIT, one
// after the other; the runtime's consume loop owns it.
type unstableOffsets struct {
	since    time.Time // when the run of such ends began; zero: not in one
	reported time.Time
}

// observe takes how a session ended (nil: it ran) at now, and reports how long the
// sessions have ended on unstable offsets when that is past after and no report was
// made in the last unstableReportEvery.
func (u *unstableOffsets) observe(err error, now time.Time, after time.Duration) (lasted time.Duration, report bool) {
	if err == nil || !errors.Is(err, sarama.ErrUnstableOffsetCommit) {
		u.since, u.reported = time.Time{}, time.Time{}
		return 0, false
	}
	if u.since.IsZero() {
		u.since = now
	}
	lasted = now.Sub(u.since)
	if lasted < after || (!u.reported.IsZero() && now.Sub(u.reported) < unstableReportEvery) {
		return lasted, false
	}
	u.reported = now
	return lasted, true
}

// unstableAfter is how long sessions may end on unstable offsets before the runtime
// reports it as an error.
func (rt *runtime) unstableAfter() time.Duration {
	if rt.app.unstableAfter > 0 {
		return rt.app.unstableAfter
	}
	return rt.cfg.TransactionTimeout + unstableSlack
}

// clearPendingOffsets asks the group coordinator to drop the pending offset commits of
// this instance's producers: for each worker's transactional ID it runs a transaction
// that adds the group's offsets and aborts (InitProducerId, AddOffsetsToTxn, EndTxn),
// so the transaction coordinator writes an ABORT marker for that producer ID to the
// group's __consumer_offsets partition, and the group coordinator drops whatever it
// held pending for the producer ID. The pending commit Kafka's race leaves behind is
// keyed by the producer ID of the partition's last owner (docs/kafka-notes.md, "The
// group coordinator after a restart"): on Kafka 4.1.1 such a transaction of the wedged
// owner's transactional ID cleared a wedge in a second (integration/eos/cmd/
// unstable-wedge -clear). It only helps when the last owner was a worker of this
// instance, and it clears nothing a producer may still want: the runtime calls it
// between sessions, when a session's commit at suspend has ended every transaction,
// and each worker's producer is closed first (the InitProducerId fences it; the next
// session makes a new one). Nothing to do under at-least-once or with ProducerPerTask
// (whose transactional IDs are the tasks').
func (rt *runtime) clearPendingOffsets(ctx context.Context) {
	if !rt.settings.exactlyOnce || rt.cfg.ProducerPerTask {
		return
	}
	var cleared []string
	for _, w := range rt.workers {
		w.waitInflight()
		w.txn.drop()
		if err := abortWithGroupOffsets(ctx, rt.client, w.txn.id, rt.cfg.ApplicationID, rt.cfg.TransactionTimeout); err != nil {
			rt.logger.Warn("could not abort a transaction that adds the group's offsets, to clear a pending offset commit", "transactional_id", w.txn.id, "error", kafkaerr.Explain(err))
			continue
		}
		cleared = append(cleared, w.txn.id)
	}
	if len(cleared) > 0 {
		rt.logger.Warn("aborted a transaction that adds the group's offsets for each worker's transactional ID: the group coordinator drops the pending offset commits of their producer IDs, which clears the unstable offsets if one of them holds it",
			"group", rt.cfg.ApplicationID, "transactional_ids", cleared)
	}
}

// abortWithGroupOffsets runs one transaction of txnID that adds group's offsets and
// aborts, with the raw requests (sarama's transaction manager sends AddOffsetsToTxn
// only at commit). The transaction coordinator answers CONCURRENT_TRANSACTIONS while
// the ID's last transaction is still writing its markers (right after a commit: seen
// on Kafka 4.1.1 in TestAbortWithGroupOffsets), and a coordinator error while it moves;
// those are retried for up to abortRetryFor.
func abortWithGroupOffsets(ctx context.Context, client sarama.Client, txnID, group string, timeout time.Duration) error {
	deadline := time.Now().Add(abortRetryFor)
	for {
		err := abortWithGroupOffsetsOnce(client, txnID, group, timeout)
		if err == nil || !abortRetriable(err) || time.Now().After(deadline) {
			return err
		}
		_ = client.RefreshTransactionCoordinator(txnID)
		if serr := backoff.Sleep(ctx, 100*time.Millisecond); serr != nil {
			return fmt.Errorf("%w (last answer: %w)", serr, err)
		}
	}
}

// abortRetryFor bounds the retries of abortWithGroupOffsets.
const abortRetryFor = 10 * time.Second

func abortRetriable(err error) bool {
	return errors.Is(err, sarama.ErrConcurrentTransactions) || errors.Is(err, sarama.ErrNotCoordinatorForConsumer) ||
		errors.Is(err, sarama.ErrConsumerCoordinatorNotAvailable) || errors.Is(err, sarama.ErrOffsetsLoadInProgress)
}

func abortWithGroupOffsetsOnce(client sarama.Client, txnID, group string, timeout time.Duration) error {
	coordinator, err := client.TransactionCoordinator(txnID)
	if err != nil {
		return fmt.Errorf("finding the transaction coordinator: %w", err)
	}
	ip, err := coordinator.InitProducerID(&sarama.InitProducerIDRequest{TransactionalID: &txnID, TransactionTimeout: timeout})
	if err == nil && ip.Err != sarama.ErrNoError {
		err = ip.Err
	}
	if err != nil {
		return fmt.Errorf("InitProducerId: %w", err)
	}
	ao, err := coordinator.AddOffsetsToTxn(&sarama.AddOffsetsToTxnRequest{TransactionalID: txnID, ProducerID: ip.ProducerID, ProducerEpoch: ip.ProducerEpoch, GroupID: group})
	if err == nil && ao.Err != sarama.ErrNoError {
		err = ao.Err
	}
	if err != nil {
		return fmt.Errorf("AddOffsetsToTxn: %w", err)
	}
	et, err := coordinator.EndTxn(&sarama.EndTxnRequest{TransactionalID: txnID, ProducerID: ip.ProducerID, ProducerEpoch: ip.ProducerEpoch, TransactionResult: false})
	if err == nil && et.Err != sarama.ErrNoError {
		err = et.Err
	}
	if err != nil {
		return fmt.Errorf("EndTxn (abort): %w", err)
	}
	return nil
}
