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
		// A commit under way first (an overlapped commit): one commit at a time.
		if err := w.landOrRecover(ctx); err != nil {
			return err
		}
		opCtx, cancel := w.opContext()
		handedOff, err := w.commit(opCtx, w.canOverlap(ctx))
		cancel()
		if err == nil {
			if !handedOff { // else once it has landed (land)
				w.succeeded()
			}
			w.finishSinks(ctx)
			return nil
		}
		if err := w.recover(ctx, err); err != nil {
			return err
		}
	}
}

// succeeded records that a commit went through: the failures before it are over.
func (w *worker) succeeded() {
	w.failingSince, w.attempts = time.Time{}, 0
	w.retryDelay.Reset()
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
		w.logger.Warn("finishing the sink transactions of earlier transactions failed (commit those whose Kafka transaction committed, roll back those whose did not); retrying", "error", err, "attempt", attempt, "retry_in", delay)
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
// store is never ahead of its changelog. With overlap, the commit step and the
// post-commit run later: the prepared commit is handed to the committer and the worker
// goes on (handOff, handedOff true); land finishes it.
func (w *worker) commit(ctx context.Context, overlap bool) (handedOff bool, err error) {
	start := time.Now()
	parts, err := w.flushCaches(ctx)
	if err != nil {
		return false, err
	}
	if len(parts) == 0 {
		w.lastCommit = time.Now()
		for _, t := range w.tasks {
			t.work.lastCommit = w.lastCommit
		}
		return false, nil
	}
	began := time.Now()
	offsets, fenced, err := w.prepareCommit(ctx, parts)
	if err != nil {
		return false, err
	}
	if overlap {
		return true, w.handOff(start, began, parts, offsets, fenced)
	}
	ph, committed, err := w.commitTxn(ctx, start, offsets)
	if err != nil {
		return false, err
	}
	if fenced != nil {
		fenced()
	}
	if w.lastCommit, err = w.afterCommit(parts, offsets, began, committed, ph); err != nil {
		return false, err
	}
	w.commitTook = w.lastCommit.Sub(start)
	return false, nil
}

// flushCaches begins the prepare step: the sink transactions of the last commit finish,
// the tables' record caches forward into the open transaction, and the write buffers'
// fill is recorded. It returns the tasks the transaction carries (participants).
func (w *worker) flushCaches(ctx context.Context) ([]*taskRunner, error) {
	// The sink transactions of the last commit first: a Kafka transaction must not
	// commit while an earlier one's sink transactions are unfinished (the session that
	// failed to finish them ended; this is the commit at the end of the next one, or
	// at suspend). Nor while a rolled-back one's are stranded prepared: they hold row
	// locks the new ones' writes may wait on.
	if err := w.finishSinksOnce(ctx); err != nil {
		return nil, &taskError{task: w.tasks[0].id, rec: abortTxn, err: err,
			op: "finish the sink transactions of earlier transactions before committing another"}
	}
	for _, t := range w.tasks {
		// The tables' record caches forward into this transaction (or abort it).
		if err := t.eng.Flush(); err != nil {
			return nil, err
		}
		t.reportCaches()
	}
	for _, t := range w.tasks {
		// The write buffers' fill at its peak, just before the commit empties them
		// (once per commit: publishing it at every turn of the loop cost a map per
		// task per turn).
		t.recordBufferKeys()
	}
	return w.participants(), nil
}

// prepareCommit ends the prepare step: each task with work (parts) sends its offsets
// record and the changelog records of its dirty keys into the transaction, the offsets
// to commit are gathered from every task, and the sink transactions are pre-committed.
// Under exactly-once with no offsets to commit it adds one (fenceOffset), and fenced
// records it once the transaction committed.
func (w *worker) prepareCommit(ctx context.Context, parts []*taskRunner) (offsets map[string]map[int32]int64, fenced func(), err error) {
	offsets = map[string]map[int32]int64{}
	for _, t := range parts {
		if err := t.prepareWrites(ctx); err != nil {
			return nil, nil, err
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
			return nil, nil, &taskError{task: t.id, rec: abortTxn, err: err, op: "pre-commit its sinks"}
		}
	}
	if w.cfg.exactlyOnce && len(offsets) == 0 {
		if fenced, err = w.fenceOffset(offsets); err != nil {
			return nil, nil, err
		}
	}
	return offsets, fenced, nil
}

// commitTxn is the commit step: the transaction commits with offsets. It returns the
// times of the prepare step (since start), the flush and the commit, and when the
// commit ended.
func (w *worker) commitTxn(ctx context.Context, start time.Time, offsets map[string]map[int32]int64) (ph metrics.CommitPhases, committed time.Time, err error) {
	// The records in flight first, timed apart from the transaction's own requests
	// (the commit flushes too, and then finds none).
	prepared := time.Now()
	ph.Prepare = prepared.Sub(start)
	if err := w.txn.flush(ctx); err != nil {
		return ph, committed, err
	}
	flushed := time.Now()
	ph.Flush = flushed.Sub(prepared)
	gen, leave := w.host.enterCommit(ctx, w.sess, w.txn.openFor())
	w.txn.generation = gen
	err = w.txn.commit(ctx, offsets)
	leave()
	if err != nil {
		return ph, committed, err
	}
	committed = time.Now()
	ph.Commit = committed.Sub(flushed)
	return ph, committed, nil
}

// afterCommit is the post-commit step, once the transaction committed: the sinks learn
// of it, the stores write their buffers (postCommit), and the commit's times since
// began and its phases (ph, the stores' since committed) are recorded and logged. It
// returns when it ended.
func (w *worker) afterCommit(parts []*taskRunner, offsets map[string]map[int32]int64, began, committed time.Time, ph metrics.CommitPhases) (time.Time, error) {
	for _, t := range parts {
		t.eng.Sinks().Committed()
	}
	if err := w.postCommit(); err != nil {
		return time.Time{}, err
	}
	w.txn.nonce = 0
	ended := time.Now()
	ph.Stores = ended.Sub(committed)
	w.cfg.metrics.CommitPhases(ph)
	for _, t := range parts {
		t.metrics.Committed(ended.Sub(began))
		t.purge()
	}
	w.logger.Debug("committed", "tasks", len(parts), "offsets", offsets, "took", ended.Sub(began),
		"prepare", ph.Prepare, "flush", ph.Flush, "commit", ph.Commit, "stores", ph.Stores)
	return ended, nil
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
		if t.set.ToFlush() == 0 && len(t.logged) == 0 {
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
