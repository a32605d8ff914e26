package eddy

import (
	"context"
	"fmt"
	"time"
)

// recover handles an error from processing or committing. A producer error that is
// abortable aborts the transaction; one with an unknown outcome recreates the producer
// (settling the transaction), re-reads the committed offsets and restores the stores'
// tails. Either way the store buffers are discarded and the input every task kept since
// the last commit is processed again, with backoff between attempts. Other errors are
// returned: fenced (the tasks moved) or fatal (the application stops), except an output
// record the broker refused for good, which a replay hands to Config.OnOutputError
// (forOutputPolicy), whether the first try or a replay met the refusal. Under
// at-least-once a producer error ends the session (errReconsume): the input since the
// last commit is consumed again, and its output may repeat.
func (w *worker) recover(ctx context.Context, cause error) error {
	if w.inflight != nil {
		// A commit under way (an overlapped commit) lands first; if it failed, its
		// failure is the one to recover from, and it takes the next transaction with it.
		if err := w.land(false); err != nil {
			cause = err
		}
	}
	if !w.cfg.exactlyOnce {
		if !recoverable(cause) {
			return cause
		}
		w.abandon()
		w.host.requestRejoin(w.sess)
		return fmt.Errorf("%w: %w", errReconsume, cause)
	}
	if cause = w.forOutputPolicy(cause); !recoverable(cause) {
		return cause
	}
	if w.failingSince.IsZero() {
		w.failingSince = time.Now()
	}
	w.retryDelay.Max = maxRecoverDelay
	for {
		w.attempts++
		attempt := w.attempts
		rec := classify(cause)
		if rec != abortTxn && rec != settleTxn {
			return cause
		}
		if attempt > minRecoveries && time.Since(w.failingSince) > recoveryBudget {
			return fmt.Errorf("%s: giving up after %d attempts over %v: %w", w.name(), attempt-1, time.Since(w.failingSince).Round(time.Second), cause)
		}
		if ctx.Err() != nil {
			return cause
		}
		w.logger.Warn("transaction failed; rolling back and replaying its input", "recovery", rec.String(), "error", cause, "attempt", attempt, "records", w.kept())
		for _, t := range w.tasks {
			t.metrics.Aborted()
		}
		opCtx, cancel := w.opContext()
		err := w.rollback(opCtx, rec)
		cancel()
		if w.retryDelay.Wait(ctx) != nil {
			if err != nil {
				return err
			}
			return cause
		}
		if err != nil {
			cause = err
			continue
		}
		if cause = w.replay(); cause == nil {
			return nil
		}
		// The replay can fail as the first try did: a refusal that arrives before the
		// next record is sent fails that send, in the replay itself.
		cause = w.forOutputPolicy(cause)
	}
}

// forOutputPolicy returns cause as an abortable failure when it is an output record
// the broker refused for good and the replay can hand it to Config.OnOutputError
// (refuseOutputs); otherwise cause as it is.
func (w *worker) forOutputPolicy(cause error) error {
	if recoverable(cause) || !w.refuseOutputs(cause) {
		return cause
	}
	return &taskError{task: w.tasks[0].id, op: "an output record refused by the broker; replaying to apply Config.OnOutputError", rec: abortTxn, err: cause}
}

// name is how errors name the worker: by its task when it runs one alone.
func (w *worker) name() string {
	if w.solo && len(w.tasks) == 1 {
		return "task " + w.tasks[0].id.String()
	}
	return fmt.Sprintf("worker %d", w.idx)
}

func (w *worker) kept() int {
	n := 0
	for _, t := range w.tasks {
		n += len(t.work.kept)
	}
	return n
}

// rollback undoes the open transaction. An abortable one is aborted. Otherwise the
// producer is recreated, which settles the transaction one way or the other, and the
// offsets records tell which (settle).
func (w *worker) rollback(ctx context.Context, rec recovery) error {
	for _, t := range w.tasks {
		t.set.Discard()
	}
	if rec == abortTxn {
		err := w.txn.abort(ctx)
		if err == nil {
			for _, t := range w.tasks {
				t.eng.Rollback()
				// Only once the Kafka transaction is known aborted: its sink
				// transactions go too. One whose rollback fails is tried again
				// before the next commit (Registry.Finish); it is not the last
				// committed one, so the task's next start rolls it back too.
				if err := t.eng.Sinks().Rollback(ctx); err != nil {
					t.logger.Warn("rolling back the sink transactions failed; tried again before the next commit", "error", err)
				}
			}
			return nil
		}
		if isFenced(err) {
			return err
		}
		// Could not abort cleanly: settle it by recreating the producer.
	}
	return w.settle(ctx)
}

// settle recreates the producer, which settles the open transaction, and reads the
// tasks' offsets records back: a record of the transaction's own nonce means it
// committed, and every task goes on after it (its stores restored from the changelogs,
// its kept input done with); else every task goes back to its last commit. Either way
// the committed offsets come from the offsets records, never from the group
// coordinator, which can answer stale ones, and they never move back.
func (w *worker) settle(ctx context.Context) error {
	if w.solo {
		// Creating the producer fences every other producer of the task. An instance
		// that lost the task while it was stalled (a zombie) must not do that to the
		// new owner: recreate only while the group still gives us the task.
		t := w.tasks[0]
		if err := w.host.checkOwnership(ctx, w.sess, t.id, t.topics[0]); err != nil {
			return err
		}
	}
	if err := w.txn.recreate(ctx); err != nil {
		return err
	}
	committed := false
	for _, t := range w.tasks {
		nonce, err := t.readOffsetsRecord(ctx, readAtSettle)
		if err != nil {
			return &taskError{task: t.id, op: "re-read the offsets record", rec: settleTxn, err: err}
		}
		committed = committed || (w.txn.nonce != 0 && nonce == w.txn.nonce)
	}
	if committed {
		w.logger.Info("the transaction whose outcome was unknown committed; going on after it", "records", w.kept())
	}
	for _, t := range w.tasks {
		if committed {
			sealed := t.work.sealed
			t.committedWork()
			if sealed {
				// The sealed commit committed, the one after it did not: back to the
				// seal, and its input is processed again.
				t.eng.Rollback()
			}
		} else {
			t.eng.Rollback()
		}
		if err := t.eng.Sinks().Settled(ctx, committed); err != nil {
			t.logger.Warn("rolling back the sink transactions of the transaction that did not commit failed; tried again before the next commit", "error", err)
		}
	}
	w.txn.nonce = 0
	// The changelogs may hold the settled transaction's records: read their tails.
	for _, t := range w.tasks {
		if err := t.restore(ctx); err != nil {
			return &taskError{task: t.id, op: "restore after rollback", rec: settleTxn, err: err}
		}
	}
	return nil
}

// replay processes again every task's kept input at or above its committed offsets.
func (w *worker) replay() error {
	for _, t := range w.tasks {
		if err := t.replay(); err != nil {
			return err
		}
	}
	return nil
}
