package eddy

import (
	"context"
	"fmt"
	"time"
)

func (t *taskRunner) commitWithRecovery(ctx context.Context) error {
	for {
		opCtx, cancel := t.opContext()
		err := t.commit(opCtx)
		cancel()
		if err == nil {
			t.failingSince = time.Time{}
			return nil
		}
		if err := t.recover(ctx, err); err != nil {
			return err
		}
	}
}

// commit ends the task's unit of work, in Kafka Streams' three steps. Prepare: the
// tables' caches forward, the offsets record and the changelog records of the dirty keys
// join the open transaction. Commit: under exactly-once the transaction commits with the
// consumed offsets; under at-least-once the producer flushes and the offsets are marked.
// Post-commit: only now do the stores write their buffers with the new changelog
// checkpoints, so a store is never ahead of its changelog.
func (t *taskRunner) commit(ctx context.Context) error {
	// The tables' record caches forward into this transaction (or abort it on error).
	if err := t.eng.Flush(); err != nil {
		return err
	}
	if t.work.pending == 0 && t.set.Dirty() == 0 && !t.txn.open() {
		t.work.lastCommit = time.Now()
		return nil
	}
	began := time.Now()
	offsets, err := t.prepareCommit(ctx)
	if err != nil {
		return err
	}
	if err := t.txn.commit(ctx, offsets); err != nil {
		return err
	}
	if err := t.postCommit(); err != nil {
		return err
	}
	t.metrics.Committed(time.Since(began))
	t.purge()
	t.logger.Debug("committed", "offsets", offsets, "took", time.Since(began))
	return nil
}

// prepareCommit sends the task's part of the commit into the open transaction and
// returns the consumed offsets it commits.
func (t *taskRunner) prepareCommit(ctx context.Context) (map[string]map[int32]int64, error) {
	offsets := map[string]map[int32]int64{}
	for topic, off := range t.work.consumed {
		if off > t.committed.of(topic) {
			offsets[topic] = map[int32]int64{t.id.Partition: off}
		}
	}
	if t.cfg.exactlyOnce {
		if err := t.writeOffsetsRecord(ctx); err != nil {
			return nil, err
		}
	}
	if err := t.set.LogChanges(changelogWriter{t: t, ctx: ctx}); err != nil {
		return nil, err
	}
	return offsets, nil
}

// writeOffsetsRecord sends the task's offsets record into the open transaction.
func (t *taskRunner) writeOffsetsRecord(ctx context.Context) error {
	return t.record.write(t.work.consumed, t.txn.commitNonce(), func(key, value []byte) error {
		return t.txn.send(ctx, t.record.topic, t.id.Partition, key, value, nil)
	})
}

// postCommit finishes the task's part of a committed transaction: the stores write
// their buffers with the changelogs' new checkpoints, the committed offsets advance, the
// engine's time state is committed and the kept input let go.
func (t *taskRunner) postCommit() error {
	checkpoints := map[string]int64{}
	for store, topic := range t.changelogs {
		if off, ok := t.txn.checkpoint(topic, t.id.Partition); ok {
			checkpoints[store] = off
		}
	}
	flushBegan, dirty := time.Now(), t.set.Dirty()
	// A bbolt write holds a page buffer per page it rewrites (random keys rewrite most
	// of a store) and is CPU-bound: many tasks flushing at once are no faster than a few,
	// and hold all their buffers together (32 tasks: +100 MB).
	release := func() {}
	if dirty > 0 {
		release = t.host.flushSlot()
	}
	err := t.set.Flush(checkpoints)
	release()
	if err != nil {
		t.storesCurrent = false
		// The transaction is committed; the store file lags behind its changelog, which
		// a restore repairs. Stop rather than run on a store we cannot write.
		return fmt.Errorf("task %s: write stores after commit: %w", t.id, err)
	}
	t.metrics.Flushed(dirty, time.Since(flushBegan))
	t.committedWork()
	return nil
}

// committedWork moves the task past its unit of work, which committed.
func (t *taskRunner) committedWork() {
	for topic, off := range t.work.consumed {
		t.committed.advance(topic, off)
	}
	t.eng.Committed()
	t.txn.nonce = 0
	t.work.done()
}

// changelogWriter sends a commit's changelog records into the task's transaction.
type changelogWriter struct {
	t   *taskRunner
	ctx context.Context
}

func (w changelogWriter) WriteChange(store string, key, value []byte) error {
	return w.t.txn.send(w.ctx, w.t.changelogs[store], w.t.id.Partition, key, value, nil)
}

// purge deletes the records of the repartition topics the task reads below its
// committed offsets, every purge interval. They are committed input: no owner of the
// task will read them again. Best effort: a failure is logged and the next interval
// tries again.
func (t *taskRunner) purge() {
	if len(t.purgeTopics) == 0 || time.Since(t.lastPurge) < t.cfg.purgeInterval {
		return
	}
	t.lastPurge = time.Now()
	for _, topic := range t.purgeTopics {
		off := t.committed.of(topic)
		if off <= 0 {
			continue
		}
		if err := t.host.deleteRecords(topic, t.id.Partition, off); err != nil {
			t.logger.Warn("could not delete committed records of a repartition topic; retrying later", "topic", topic, "partition", t.id.Partition, "below", off, "error", err)
			continue
		}
		t.logger.Debug("deleted committed repartition records", "topic", topic, "partition", t.id.Partition, "below", off)
	}
}
