package eddy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// prepareWrites sends the task's part of a commit into the open transaction: its
// offsets record (exactly-once) and the changelog records of its dirty keys.
func (t *taskRunner) prepareWrites(ctx context.Context) error {
	if t.cfg.exactlyOnce {
		if err := t.writeOffsetsRecord(ctx); err != nil {
			return err
		}
	}
	t.logged = t.logged[:0]
	for _, name := range t.set.Names() {
		if buf := t.set.Buffer(name); buf.Logged() && buf.Dirty() > 0 {
			t.logged = append(t.logged, name)
		}
	}
	return t.set.LogChanges(changelogWriter{t: t, ctx: ctx})
}

// offsetsToCommit adds the task's consumed offsets to a commit's: the advanced ones, or
// with all, every position it knows (consumed, else committed), so that the commit
// carries the group generation even when the task did not move.
func (t *taskRunner) offsetsToCommit(into map[string]map[int32]int64, all bool) {
	for _, topic := range t.topics {
		off, consumed := t.work.consumed[topic]
		switch {
		case consumed && off > t.committed.of(topic):
		case all:
			if off = t.committed.of(topic); off < 0 {
				continue
			}
		default:
			continue
		}
		if into[topic] == nil {
			into[topic] = map[int32]int64{}
		}
		into[topic][t.id.Partition] = off
	}
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
	flushBegan, dirty := time.Now(), t.set.ToFlush()
	if dirty == 0 && len(t.logged) == 0 && !t.hasSourceStores() && !t.set.Sealed() {
		t.committedWork() // nothing to write: no store file transaction, no fsync
		return nil
	}
	// A store's checkpoint moves only when this transaction wrote its changelog: the
	// producer's offsets of earlier transactions (a worker's producer outlives a task's
	// stay on this instance) say nothing about what the changelog holds now.
	checkpoints := map[string]int64{}
	for _, store := range t.logged {
		if off, ok := t.txn.checkpoint(t.changelogs[store], t.id.Partition); ok {
			checkpoints[store] = off
		}
	}
	t.logged = t.logged[:0]
	t.sourceCheckpoints(checkpoints)
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

// seal keeps the task's part of the commit now under way apart from what it processes
// next (an overlapped commit): its stores' dirty keys (sealed layer), its engine's time
// state and where its input ends. The commit's post-commit, or a rollback, ends it.
func (t *taskRunner) seal() error {
	if err := t.set.Seal(); err != nil {
		return fmt.Errorf("task %s: %w", t.id, err)
	}
	t.eng.Seal()
	t.work.seal()
	return nil
}

// committedWork moves the task past its unit of work, which committed (the sealed one,
// while sealed).
func (t *taskRunner) committedWork() {
	for topic, off := range t.work.committedPositions() {
		t.committed.advance(topic, off)
	}
	t.forgetCommittedRefusals()
	t.eng.Committed()
	if late := t.eng.LateRecords(); late > t.lateReported {
		t.metrics.Dropped("late", late-t.lateReported)
		t.lateReported = late
	}
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

// purge asks, every purge interval, for the records no owner of the task will read
// again to be deleted: those of the repartition topics the task reads below its
// committed offsets (committed input), and those of its window and session stores'
// changelogs below the offset where their live segments begin (expired windows,
// kvstore.Set.ChangelogTrims). The runtime's purger deletes them on its own goroutine
// and retries what fails; the task never waits for it.
func (t *taskRunner) purge() {
	if time.Since(t.lastPurge) < t.cfg.purgeInterval {
		return
	}
	t.lastPurge = time.Now()
	for _, topic := range t.purgeTopics {
		if off := t.committed.of(topic); off > 0 {
			t.host.purge(topic, t.id.Partition, off, "")
		}
	}
	if t.set == nil {
		return
	}
	trims, err := t.set.ChangelogTrims()
	if err != nil {
		t.logger.Warn("could not read where the changelogs of window stores can be trimmed; retrying later", "error", err)
		return
	}
	if t.trimmed == nil {
		t.trimmed = map[string]int64{}
	}
	for _, store := range slices.Sorted(maps.Keys(trims)) {
		off, topic := trims[store], t.changelogs[store]
		if off <= t.trimmed[store] || topic == "" {
			continue
		}
		t.host.purge(topic, t.id.Partition, off, store)
		t.trimmed[store] = off
	}
}
