package eddy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/internal/metrics"
	"github.com/eddy-streams/eddy/internal/sinktxn"
)

func (w *worker) commitWithRecovery(ctx context.Context) error {
	for {
		opCtx, cancel := w.opContext()
		err := w.commit(opCtx)
		cancel()
		if err == nil {
			w.failingSince, w.attempts = time.Time{}, 0
			w.retryDelay.Reset()
			w.finishSinks(ctx)
			return nil
		}
		if err := w.recover(ctx, err); err != nil {
			return err
		}
	}
}

// finishSinks commits the sink transactions of the committed Kafka transaction (the
// post-commit of package sink): retried with backoff while the session lives, since
// the Kafka transaction that names them committed and nothing may undo it. The worker
// commits nothing meanwhile (a task never has two committed transactions with
// unfinished sink transactions). If the session ends first, they stay prepared, and
// the task's next start commits them (taskRunner.prepareOnce).
func (w *worker) finishSinks(ctx context.Context) {
	b := backoff.Backoff{Max: maxRecoverDelay}
	for attempt := 1; ; attempt++ {
		opCtx, cancel := w.opContext()
		err := w.finishSinksOnce(opCtx)
		cancel()
		if err == nil {
			return
		}
		if errors.Is(err, sinktxn.ErrNotPrepared) {
			w.host.fail(err)
			return
		}
		delay := b.Next()
		w.logger.Warn("committing the sink transactions of a committed Kafka transaction failed; retrying", "error", err, "attempt", attempt, "retry_in", delay)
		if backoff.Sleep(ctx, delay) != nil {
			w.logger.Warn("the session ended with sink transactions still prepared; the tasks' next start commits them", "error", err)
			return
		}
	}
}

func (w *worker) finishSinksOnce(ctx context.Context) error {
	var errs []error
	for _, t := range w.tasks {
		if t.eng != nil && t.eng.Sinks().Unfinished() > 0 {
			errs = append(errs, t.eng.Sinks().Finish(ctx))
		}
	}
	return errors.Join(errs...)
}

// commit ends the unit of work of the worker's tasks, in Kafka Streams' three steps.
// Prepare: the tables' caches forward; each task with work sends its offsets record and
// the changelog records of its dirty keys into the open transaction. Commit: under
// exactly-once the transaction commits with the consumed offsets of every task (their
// positions, advanced or not: the group generation they carry fences a zombie); under
// at-least-once the producer flushes and the advanced offsets are marked. Post-commit:
// only now do the stores write their buffers with the new changelog checkpoints, so a
// store is never ahead of its changelog.
func (w *worker) commit(ctx context.Context) error {
	start := time.Now()
	// The sink transactions of the last commit first: a Kafka transaction must not
	// commit while an earlier one's sink transactions are unfinished (the session that
	// failed to finish them ended; this is the commit at the end of the next one, or
	// at suspend).
	if err := w.finishSinksOnce(ctx); err != nil {
		return &taskError{task: w.tasks[0].id, rec: abortTxn, err: err,
			op: "commit the sink transactions of the last committed transaction before committing another"}
	}
	for _, t := range w.tasks {
		// The tables' record caches forward into this transaction (or abort it).
		if err := t.eng.Flush(); err != nil {
			return err
		}
		t.reportCaches()
	}
	for _, t := range w.tasks {
		// The write buffers' fill at its peak, just before the commit empties them
		// (once per commit: publishing it at every turn of the loop cost a map per
		// task per turn).
		t.recordBufferKeys()
	}
	parts := w.participants()
	if len(parts) == 0 {
		w.lastCommit = time.Now()
		for _, t := range w.tasks {
			t.work.lastCommit = w.lastCommit
		}
		return nil
	}
	began := time.Now()
	offsets := map[string]map[int32]int64{}
	for _, t := range parts {
		if err := t.prepareWrites(ctx); err != nil {
			return err
		}
	}
	for _, t := range w.tasks {
		t.offsetsToCommit(offsets, w.cfg.exactlyOnce)
	}
	// Pre-commit: every sink transaction durable and invisible (package sink) before
	// the Kafka transaction, which names them by its nonce, commits. A failure aborts
	// the Kafka transaction too (the input is replayed).
	for _, t := range parts {
		if err := t.eng.Sinks().Prepare(ctx); err != nil {
			return &taskError{task: t.id, rec: abortTxn, err: err, op: "pre-commit its sinks"}
		}
	}
	var fenced func()
	if w.cfg.exactlyOnce && len(offsets) == 0 {
		var err error
		if fenced, err = w.fenceOffset(offsets); err != nil {
			return err
		}
	}
	// The records in flight first, timed apart from the transaction's own requests
	// (the commit flushes too, and then finds none).
	var ph metrics.CommitPhases
	prepared := time.Now()
	ph.Prepare = prepared.Sub(start)
	if err := w.txn.flush(ctx); err != nil {
		return err
	}
	flushed := time.Now()
	ph.Flush = flushed.Sub(prepared)
	if err := w.txn.commit(ctx, offsets); err != nil {
		return err
	}
	committed := time.Now()
	ph.Commit = committed.Sub(flushed)
	if fenced != nil {
		fenced()
	}
	for _, t := range parts {
		t.eng.Sinks().Committed()
	}
	if err := w.postCommit(); err != nil {
		return err
	}
	w.txn.nonce = 0
	w.lastCommit = time.Now()
	ph.Stores = w.lastCommit.Sub(committed)
	w.cfg.metrics.CommitPhases(ph)
	for _, t := range parts {
		t.metrics.Committed(w.lastCommit.Sub(began))
		t.purge()
	}
	w.logger.Debug("committed", "tasks", len(parts), "offsets", offsets, "took", w.lastCommit.Sub(began),
		"prepare", ph.Prepare, "flush", ph.Flush, "commit", ph.Commit, "stores", ph.Stores)
	return nil
}

// fenceOffset puts into offsets, which hold none, where one of the worker's partitions
// starts (the partition has no committed offset and nothing was consumed from it:
// host.startOffset resolves the offset reset policy), and returns what records it as
// the task's committed offset once the transaction committed. The generation and
// member ID that TxnOffsetCommit carries are what fence a zombie's transaction
// (KIP-447), and the producer sends none with no offsets: a transaction holding only a
// wall-clock punctuator's output, of tasks whose input had never been committed, was
// committed without the check (TestPunctuationOnlyTxnCommitsOffsets). Once committed,
// the offset goes with every later commit (offsetsToCommit), without another lookup.
func (w *worker) fenceOffset(offsets map[string]map[int32]int64) (func(), error) {
	for _, t := range w.tasks {
		for _, topic := range t.topics {
			off, err := w.host.startOffset(topic, t.id.Partition)
			if err != nil {
				return nil, &taskError{task: t.id, rec: abortTxn, err: err,
					op: fmt.Sprintf("read where %s/%d starts, to commit it with a transaction that consumed no input (its group generation fences a zombie's transaction)", topic, t.id.Partition)}
			}
			offsets[topic] = map[int32]int64{t.id.Partition: off}
			return func() { t.committed.advance(topic, off) }, nil
		}
	}
	return nil, nil
}

// postCommit finishes every task's part of the committed transaction; the tasks that
// write their store files do it in parallel (each write is a bbolt transaction and an
// fsync; the runtime's flush slots bound how many run at once).
func (w *worker) postCommit() error {
	errs := make([]error, len(w.tasks))
	var wg sync.WaitGroup
	for i, t := range w.tasks {
		if t.set.Dirty() == 0 && len(t.logged) == 0 {
			errs[i] = t.postCommit()
			continue
		}
		wg.Go(func() { errs[i] = t.postCommit() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// participants returns the tasks whose work the open transaction carries (input
// processed or stores written since the last commit); none when nothing is open. A
// transaction holding only, say, a punctuator's output still needs one offsets record
// to name it: the first task writes one.
func (w *worker) participants() []*taskRunner {
	var parts []*taskRunner
	for _, t := range w.tasks {
		if t.work.pending > 0 || t.set.Dirty() > 0 || t.eng.Sinks().HasOpen() {
			parts = append(parts, t)
		}
	}
	if len(parts) == 0 && w.txn.open() {
		parts = w.tasks[:1]
	}
	return parts
}

// recover handles an error from processing or committing. A producer error that is
// abortable aborts the transaction; one with an unknown outcome recreates the producer
// (settling the transaction), re-reads the committed offsets and restores the stores'
// tails. Either way the store buffers are discarded and the input every task kept since
// the last commit is processed again, with backoff between attempts. Other errors are
// returned: fenced (the tasks moved) or fatal (the application stops). Under
// at-least-once a producer error ends the session (errReconsume): the input since the
// last commit is consumed again, and its output may repeat.
func (w *worker) recover(ctx context.Context, cause error) error {
	if !recoverable(cause) {
		if !w.cfg.exactlyOnce || !w.refuseOutputs(cause) {
			return cause
		}
		// An output record the broker refused, for Config.OnOutputError in the replay.
		cause = &taskError{task: w.tasks[0].id, op: "an output record refused by the broker; replaying to apply Config.OnOutputError", rec: abortTxn, err: cause}
	}
	if !w.cfg.exactlyOnce {
		w.abandon()
		w.host.requestRejoin(w.sess)
		return fmt.Errorf("%w: %w", errReconsume, cause)
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
	}
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
				// transactions go too. One left prepared here is not the last
				// committed one, and the task's next start rolls it back.
				if err := t.eng.Sinks().Rollback(ctx); err != nil {
					t.logger.Warn("rolling back the sink transactions failed; the task's next start rolls them back", "error", err)
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
		nonce, err := t.readOffsetsRecord(ctx)
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
			t.committedWork()
		} else {
			t.eng.Rollback()
		}
		if err := t.eng.Sinks().Settled(ctx, committed); err != nil {
			t.logger.Warn("rolling back the sink transactions of the transaction that did not commit failed; the task's next start rolls them back", "error", err)
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
