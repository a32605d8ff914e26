package eddy

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/restore"
	"github.com/eddy-streams/eddy/internal/task"
)

// open makes the task's stores and engine, once per ownership.
func (t *taskRunner) open() error {
	if t.eng != nil {
		return nil
	}
	backend, err := t.openBackend()
	if err != nil {
		return err
	}
	set := kvstore.NewSet(backend)
	eng, err := task.New(task.Config{
		ID: t.id, ApplicationID: t.cfg.appID, Graph: t.cfg.graph, Subtopology: t.sub,
		Stores: set, StoresRestored: true, GlobalBackend: t.host.globalBackend(), Collector: t, Logger: t.cfg.logger,
		OnDeserializationError: t.cfg.badRecords, OnOutputError: t.cfg.outputErrors, OnProcessingError: t.cfg.processingErrors, SayWayOut: true, DeadLetterTopic: t.cfg.deadLetterTopic,
		OnBadRecord: func(p task.ErrorPolicy, rec graph.RawRecord, _ error) {
			action := "skipped"
			if p == task.DeadLetter {
				action = "dead_lettered"
			}
			t.metrics.BadRecord(rec.Topic, action)
		},
	})
	if err != nil {
		_ = set.Close()
		return err
	}
	set.WriteBehind(storeHeldKeys, t.cfg.storeWriteInterval, nil)
	t.queryMu.Lock()
	t.set, t.eng, t.changelogs = set, eng, eng.ChangelogTopics()
	t.queryMu.Unlock()
	return nil
}

// storeHeldKeys bounds the committed changes a task holds in memory before it writes
// them to its store file (Config.StoreWriteInterval): Kafka Streams, under
// exactly-once, likewise writes its checkpoint once 10,000 records were written.
const storeHeldKeys = 10_000

// openBackend opens the task's store file in its directory of the state dir, or a
// memory backend when every store of the task is in memory.
func (t *taskRunner) openBackend() (kvstore.Backend, error) {
	persistent := false
	for _, st := range t.sub.Stores {
		persistent = persistent || !st.InMemory
	}
	if !persistent {
		return kvstore.NewMemoryBackend(), nil
	}
	b, rep, err := kvstore.OpenBoltReport(filepath.Join(t.cfg.stateDir, t.id.String()), kvstore.BoltOptions{NoSync: t.cfg.storeNoSync, Logger: t.logger})
	if err != nil {
		return nil, fmt.Errorf("task %s: open state: %w", t.id, err)
	}
	if rep.Recreated {
		t.logger.Warn("store file not usable; starting empty, restoring from the changelogs", "reason", rep.Reason, "moved_to", rep.MovedTo)
		t.metrics.StoreRecreated()
	}
	return b, nil
}

// prepare readies the task for a session: its stores restored (a task
// kept across a rebalance has current stores and skips that), its offsets record read.
// A failure that can pass (a broker or coordinator away or loading, commit markers
// pending, a timeout) is retried with backoff while the session lives, as Kafka Streams
// retries within task.timeout.ms, for up to Config.TaskTimeout from the first failure;
// a fatal one (authorization, an unsupported version) is returned at once. Either
// stops the application.
func (t *taskRunner) prepare(ctx context.Context) error {
	b := backoff.Backoff{Max: maxRecoverDelay}
	var failingSince time.Time
	for attempt := 1; ; attempt++ {
		err := t.prepareOnce(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if rec := classify(err); rec == fatalFailure || rec == taskMigrated {
			return fmt.Errorf("task %s: preparing the task failed (%s), not retried: %w", t.id, rec, err)
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if failing := time.Since(failingSince); failing >= t.cfg.taskTimeout {
			return fmt.Errorf("task %s: preparing the task kept failing for %v (%d attempts), past Config.TaskTimeout (%v); giving up: %w",
				t.id, failing.Round(time.Second), attempt, t.cfg.taskTimeout, err)
		}
		delay := b.Next()
		t.logger.Warn("preparing the task failed; retrying", "error", err, "attempt", attempt, "retry_in", delay)
		if err := backoff.Sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// prepareOnce restores the stores unless they are current and reads the offsets
// record. The producer is the worker's business (worker.prepare).
func (t *taskRunner) prepareOnce(ctx context.Context) error {
	// The offsets record first: a store restored from its source topic stops at the
	// committed input offset, and its nonce names the last committed transaction.
	nonce, err := t.readOffsetsRecord(ctx, readAtStart)
	if err != nil {
		return err
	}
	if err := t.recoverSinks(ctx, nonce); err != nil {
		return err
	}
	if !t.storesCurrent {
		if err := t.restore(ctx); err != nil {
			return err
		}
	}
	return nil
}

// recoverSinks resolves what is pending in the task's sinks outside Kafka before the
// task processes (docs/architecture.md, "Sinks beyond Kafka"): a prepared transaction
// of the last committed Kafka transaction (nonce) is committed, any other rolled back.
func (t *taskRunner) recoverSinks(ctx context.Context, nonce uint64) error {
	sinks := t.eng.Sinks()
	if len(sinks.Nodes()) == 0 {
		return nil
	}
	sinks.SetNonce(func() uint64 { return t.txn.commitNonce() })
	got, err := sinks.Recover(ctx, nonce)
	if n := len(got.Committed) + len(got.RolledBack); n > 0 {
		t.logger.Info("resolved the sink transactions a previous owner left prepared", "committed", got.Committed, "rolled_back", got.RolledBack)
	}
	return err
}

// readOffsetsRecord reads the task's offsets record back (exactly-once only) and
// returns the nonce of the last committed transaction.
func (t *taskRunner) readOffsetsRecord(ctx context.Context, why recordRead) (uint64, error) {
	if !t.cfg.exactlyOnce {
		return 0, nil
	}
	nonce, err := t.record.read(ctx, t.host, why)
	if err != nil {
		return 0, fmt.Errorf("task %s: %w", t.id, err)
	}
	return nonce, nil
}

// restore brings every logged store of the task up to its changelog's end. Afterwards
// storesCurrent is true: the stores hold exactly their changelogs' committed prefix up
// to their checkpoints, and while nobody else writes the changelogs (the task kept
// across a rebalance) they need no restore.
func (t *taskRunner) restore(ctx context.Context) error {
	t.storesCurrent = false
	// The restore writes the backend directly and reads from its checkpoints: the
	// committed changes held in memory go first, with theirs.
	if err := t.set.WriteHeld(); err != nil {
		return fmt.Errorf("task %s: write stores before restore: %w", t.id, err)
	}
	for _, name := range t.set.Names() {
		buf := t.set.Buffer(name)
		if !buf.Logged() && t.sourceStore(name) == nil {
			continue
		}
		// Restores are CPU-bound (decoding, sorting, B+tree writes) and each holds a
		// fetch and a write batch in memory: a few at a time restore as fast as all at
		// once, in bounded memory.
		release, err := t.host.restoreSlot(ctx)
		if err != nil {
			return err
		}
		err = t.restoreStore(ctx, buf, name)
		release()
		if err != nil {
			return err
		}
	}
	t.storesCurrent = true
	return nil
}

func (t *taskRunner) restoreStore(ctx context.Context, buf *kvstore.Buffer, name string) error {
	r := t.host.restorer()
	r.Logger = t.logger
	r.OnProgress = func(p restore.Progress) {
		t.metrics.Restoring(p.Store, p.Done, p.Total, p.Rate)
		t.restoreMu.Lock()
		if t.restoreLeft == nil {
			t.restoreLeft = map[string]int64{}
		}
		t.restoreLeft[p.Store] = p.Total - p.Done
		if t.restoreEnd == nil {
			t.restoreEnd = map[string]int64{}
		}
		t.restoreEnd[p.Store] = p.End
		t.restoreMu.Unlock()
	}
	t.restoreMu.Lock()
	delete(t.restoreEnd, name) // an earlier restore's end is not this one's
	t.restoreMu.Unlock()
	topic := t.changelogs[name]
	if st := t.sourceStore(name); st != nil {
		var err error
		if topic, err = t.restoreFromSource(&r, st); err != nil {
			return err
		}
	}
	res, err := r.Restore(ctx, buf.Backend(), name, topic, t.id.Partition)
	t.metrics.Restored(name, res.Records)
	if err != nil {
		return fmt.Errorf("task %s: changelog %q partition %d: %w", t.id, topic, t.id.Partition, err)
	}
	if t.cfg.onRestore != nil {
		t.cfg.onRestore(t.id, res)
	}
	return nil
}
