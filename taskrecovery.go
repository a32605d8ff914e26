package eddy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eddy-streams/eddy/internal/backoff"
)

// A task retries a failing transaction (abort or recreate the producer, replay) with
// backoff for as long as its group session lives; a broker that is down ends the session
// soon enough. Within a session it gives up, stopping the application, only when the
// failure lasted recoveryBudget and at least minRecoveries attempts: a deterministic
// failure (a record too large for the broker) must not loop forever.
const (
	minRecoveries   = 10
	recoveryBudget  = 2 * time.Minute
	maxRecoverDelay = 5 * time.Second
)

// errReconsume ends an at-least-once task's session after an output failure: its
// uncommitted input is consumed again from the committed offsets.
var errReconsume = errors.New("at-least-once: re-consuming from the committed offsets")

// recover handles an error from processing or committing. A producer error that is
// abortable aborts the transaction; one with an unknown outcome recreates the producer
// (settling the transaction), re-reads the committed offsets and restores the stores'
// tail. Either way the store buffers are discarded and the input kept since the last
// commit is processed again, with backoff between attempts. Other errors are returned:
// fenced (the task moved) or fatal (the application stops). Under at-least-once a
// producer error ends the session (errReconsume): the input since the last commit is
// consumed again, and its output may repeat.
func (t *taskRunner) recover(ctx context.Context, cause error) error {
	if !recoverable(cause) {
		return cause
	}
	if !t.cfg.exactlyOnce {
		t.abandon()
		t.host.requestRejoin(t.sess)
		return fmt.Errorf("%w: %w", errReconsume, cause)
	}
	if t.failingSince.IsZero() {
		t.failingSince = time.Now()
	}
	b := backoff.Backoff{Max: maxRecoverDelay}
	for attempt := 1; ; attempt++ {
		rec := classify(cause)
		if rec != abortTxn && rec != settleTxn {
			return cause
		}
		if attempt > minRecoveries && time.Since(t.failingSince) > recoveryBudget {
			return fmt.Errorf("task %s: giving up after %d attempts over %v: %w", t.id, attempt-1, time.Since(t.failingSince).Round(time.Second), cause)
		}
		if ctx.Err() != nil {
			return cause
		}
		t.logger.Warn("transaction failed; rolling back and replaying its input", "recovery", rec.String(), "error", cause, "attempt", attempt, "records", len(t.work.kept))
		t.metrics.Aborted()
		opCtx, cancel := t.opContext()
		err := t.rollback(opCtx, rec)
		cancel()
		if b.Wait(ctx) != nil {
			if err != nil {
				return err
			}
			return cause
		}
		if err != nil {
			cause = err
			continue
		}
		if cause = t.replay(); cause == nil {
			return nil
		}
	}
}

// rollback undoes the open transaction. An abortable one is aborted. Otherwise the
// producer is recreated, which settles the transaction one way or the other, and the
// offsets record tells which (settle).
func (t *taskRunner) rollback(ctx context.Context, rec recovery) error {
	t.set.Discard()
	if rec == abortTxn {
		err := t.txn.abort(ctx)
		if err == nil {
			t.eng.Rollback()
			return nil
		}
		if isFenced(err) {
			return err
		}
		// Could not abort cleanly: settle it by recreating the producer.
	}
	return t.settle(ctx)
}

// settle recreates the producer, which settles the open transaction, and reads the
// offsets record back: the record of the transaction's own nonce means it committed,
// and the task goes on after it (its stores restored from the changelogs, its kept input
// done with); else the task goes back to its last commit. Either way the committed
// offsets come from the offsets record, never from the group coordinator, which can
// answer stale ones, and they never move back.
func (t *taskRunner) settle(ctx context.Context) error {
	// Creating a producer fences every other producer of the task. An instance that
	// lost the task while it was stalled (a zombie) must not do that to the new owner:
	// recreate only while the group still gives us the task.
	if err := t.host.checkOwnership(ctx, t.sess, t.id, t.topics[0]); err != nil {
		return err
	}
	if err := t.txn.recreate(ctx); err != nil {
		return err
	}
	nonce, err := t.readOffsetsRecord(ctx)
	if err != nil {
		return &taskError{task: t.id, op: "re-read the offsets record", rec: settleTxn, err: err}
	}
	if t.txn.nonce != 0 && nonce == t.txn.nonce {
		t.logger.Info("the transaction whose outcome was unknown committed; going on after it", "records", len(t.work.kept))
		t.committedWork()
	} else {
		t.eng.Rollback()
	}
	t.txn.nonce = 0
	// The changelogs may hold the settled transaction's records: read their tail.
	t.storesCurrent = false
	if err := t.restore(ctx); err != nil {
		return &taskError{task: t.id, op: "restore after rollback", rec: settleTxn, err: err}
	}
	return nil
}

// replay processes again the kept input at or above the committed offsets.
func (t *taskRunner) replay() error {
	kept := t.work.takeKept()
	for i, rec := range kept {
		if rec.Offset < t.committed.of(rec.Topic) {
			continue
		}
		if err := t.process(rec); err != nil {
			// keep the rest for the next attempt
			t.work.kept = append(t.work.kept, kept[i+1:]...)
			return err
		}
	}
	return nil
}
