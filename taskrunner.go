package eddy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/kread"
	"github.com/eddy-streams/eddy/internal/metrics"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/txproducer"
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

// taskRunner owns one task while this instance is assigned it: its producer, stores,
// engine and input. Its run method is the task's goroutine for one group session;
// between sessions the task stays open (suspended) if it is assigned again.
type taskRunner struct {
	rt     *runtime
	id     processor.TaskID
	sub    *graph.Subtopology
	topics []string
	logger *slog.Logger
	inbox  *inbox

	runMu sync.Mutex // held by run; close waits for it
	dead  atomic.Bool
	state atomic.Int32 // a taskState
	// queryMu guards the stores against closing while an interactive query reads them.
	queryMu    sync.RWMutex
	metrics    *metrics.Task
	bufferKeys atomic.Pointer[map[string]int] // dirty keys per store, for the metrics
	// life ends when the task closes. Sends and commits run under it (with timeouts),
	// not under the session's context: a rebalance must not cut a commit in half.
	life    context.Context
	endLife context.CancelFunc

	// creator makes the task's producers, one creation at a time (a creation that
	// timed out in OnAssignment is taken over by the next, not raced).
	creator *txproducer.Creator

	// The fields below belong to the goroutine holding runMu.
	producer     *txproducer.Producer
	eng          *task.Task
	set          *statestore.Set
	initDone     bool
	changelogs   map[string]string // store → changelog topic
	sess         sarama.ConsumerGroupSession
	consumed     map[string]int64  // per source topic: the offset after the last processed record
	kept         []graph.RawRecord // input of the open transaction, for replay after an abort
	offsetsTopic string            // where the task records its committed offsets
	partCounts   map[string]int32  // partition counts of output topics
	pending      int               // records processed since the last commit
	lastCommit   time.Time
	// purge: the repartition topics the task reads, and when it last deleted their
	// committed records.
	purgeTopics []string
	lastPurge   time.Time
	// failingSince is when the current run of failed transactions began (zero: none).
	failingSince time.Time
	// storesCurrent is true while the stores hold exactly their changelogs' committed
	// prefix up to their checkpoints and nobody else wrote the changelogs since: a task
	// kept across a rebalance then needs no restore.
	storesCurrent bool
	// attempt is the nonce of the offsets record of the transaction being committed
	// (0: none), to tell after an unknown outcome whether it committed.
	attempt uint64
	// topicIDs are the IDs of the task's source topics, recorded with their offsets.
	topicIDs map[string]sarama.Uuid
}

func newTaskRunner(rt *runtime, id processor.TaskID) *taskRunner {
	sub := rt.g.Subtopologies[id.Subtopology]
	life, end := context.WithCancel(context.Background())
	var purge []string
	for _, r := range sub.RepartitionSources {
		purge = append(purge, names.RepartitionTopic(rt.cfg.ApplicationID, r))
	}
	cfg := txproducer.Config{Brokers: rt.cfg.Brokers, Sarama: rt.sc, TransactionTimeout: rt.cfg.TransactionTimeout}
	if rt.cfg.Guarantee == ExactlyOnce {
		cfg.TransactionalID = rt.transactionalID(id)
	}
	return &taskRunner{
		rt: rt, id: id, sub: sub, topics: rt.sortedTopicsOf(sub), purgeTopics: purge,
		creator: txproducer.NewCreator(cfg),
		logger:  rt.logger.With("task", id.String()),
		inbox:   newInbox(),
		life:    life, endLife: end,
		metrics: rt.metrics.Task(id.String()),
	}
}

// broken reports whether the task must be recreated rather than resumed.
func (t *taskRunner) broken() bool {
	if t.dead.Load() {
		return true
	}
	if !t.runMu.TryLock() {
		return false
	}
	defer t.runMu.Unlock()
	return t.rt.cfg.Guarantee == ExactlyOnce && t.producer == nil && t.eng != nil
}

func (t *taskRunner) exactlyOnce() bool { return t.rt.cfg.Guarantee == ExactlyOnce }

// initProducer creates the task's producer if it has none.
func (t *taskRunner) initProducer(ctx context.Context) error {
	if t.producer != nil {
		return nil
	}
	p, err := t.creator.Create(ctx)
	if err != nil {
		return err
	}
	t.producer = p
	return nil
}

// open makes the task's stores and engine, once per ownership.
func (t *taskRunner) open() error {
	if t.eng != nil {
		return nil
	}
	cfg := t.rt.cfg
	var backend statestore.Backend
	persistent := false
	for _, st := range t.sub.Stores {
		persistent = persistent || !st.InMemory
	}
	if persistent {
		b, rep, err := statestore.OpenBoltReport(filepath.Join(t.rt.appDir, t.id.String()), statestore.BoltOptions{NoSync: cfg.StoreNoSync, Logger: t.logger})
		if err != nil {
			return fmt.Errorf("task %s: open state: %w", t.id, err)
		}
		if rep.Recreated {
			t.logger.Warn("store file not usable; starting empty, restoring from the changelogs", "reason", rep.Reason, "moved_to", rep.MovedTo)
			t.metrics.StoreRecreated()
		}
		backend = b
	} else {
		backend = statestore.NewMemoryBackend()
	}
	set := statestore.NewSet(backend)
	policy := task.Fail
	switch cfg.OnBadRecord {
	case SkipBadRecord:
		policy = task.Skip
	case DeadLetterBadRecord:
		policy = task.DeadLetter
	}
	eng, err := task.New(task.Config{
		ID: t.id, ApplicationID: cfg.ApplicationID, Graph: t.rt.g, Subtopology: t.sub,
		Stores: set, GlobalBackend: t.rt.globalBackend(), Collector: t, Logger: t.rt.logger,
		OnDeserializationError: policy, DeadLetterTopic: cfg.DeadLetterTopic,
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
	t.queryMu.Lock()
	t.set, t.eng, t.changelogs = set, eng, eng.ChangelogTopics()
	t.queryMu.Unlock()
	t.offsetsTopic = names.ChangelogTopic(cfg.ApplicationID, names.OffsetsStore(t.sub.ID))
	return nil
}

// The offsets record: in every transaction a task also writes the input offsets the
// transaction commits, one record per source topic (key: the topic, value: the offset,
// 8 bytes big-endian), to partition p of <app>-eddy-offsets-<subtopology>-changelog. They
// are the offsets the group coordinator stores, kept a second time where the task reads
// them itself at start: a Kafka group coordinator that answers an older committed
// offset (seen after a kill -9 of a single-node Kafka 4.1 while it reloads
// __consumer_offsets; docs/kafka-notes.md) would otherwise make the task process
// committed input again. Every record of the last transaction is at the end of the
// partition, so reading its last few offsets is enough.
//
// Only under exactly-once: there the record commits atomically with the output it
// vouches for. An at-least-once producer acknowledges each partition on its own, so a
// record could be written while an output record failed; used as a floor after a crash
// it would skip input whose output was lost. At-least-once may repeat input anyway.

// writeOffsets sends the offsets record of every source topic: the consumed position
// where the task processed input, else the committed one.
func (t *taskRunner) writeOffsets(ctx context.Context) error {
	if !t.exactlyOnce() {
		return nil
	}
	for _, topic := range t.topics {
		off, ok := t.consumed[topic]
		if !ok {
			if off = t.inbox.startOf(topic); off < 0 {
				continue
			}
		}
		if err := t.producer.Send(ctx, t.offsetsTopic, t.id.Partition, []byte(topic), encodeOffset(off, t.topicIDs[topic]), nil, time.Now()); err != nil {
			return err
		}
	}
	t.attempt = rand.Uint64() | 1
	return t.producer.Send(ctx, t.offsetsTopic, t.id.Partition, []byte(commitKey), binary.BigEndian.AppendUint64(nil, t.attempt), nil, time.Now())
}

// readFloors reads the offsets record of the last committed transaction and makes the
// inbox drop input below it; it returns the nonce of that transaction. A floor above the
// group's committed offset means the coordinator answered a stale offset; it is logged.
// A floor recorded for another incarnation of the topic (its ID changed, or the floor is
// above the partition's high-water mark) is ignored with a warning: the topic was
// deleted and created anew, and its new records must not be skipped.
func (t *taskRunner) readFloors(ctx context.Context) (uint64, error) {
	if !t.exactlyOnce() {
		return 0, nil
	}
	last, err := changelog.ReadLast(ctx, t.rt.restoreC, t.offsetsTopic, t.id.Partition, 4*(len(t.topics)+1)+16)
	if err != nil {
		return 0, fmt.Errorf("task %s: read its offsets record: %w", t.id, err)
	}
	ids, err := t.rt.topicIDs(t.topics)
	if err != nil {
		t.logger.Warn("could not read the source topics' IDs; a recreated topic is recognised only by its end offset", "error", err)
	}
	if t.topicIDs == nil {
		t.topicIDs = map[string]sarama.Uuid{}
	}
	for _, topic := range t.topics {
		current, known := ids[topic]
		if prev, ok := t.topicIDs[topic]; known && ok && prev != current {
			t.logger.Warn("source topic was deleted and created anew while the task ran; forgetting its committed offsets",
				"topic", topic, "partition", t.id.Partition, "old_id", prev.String(), "new_id", current.String())
			t.inbox.forget(topic)
		}
		if known {
			t.topicIDs[topic] = current
		}
		v, ok := last[topic]
		if !ok {
			continue
		}
		floor, id, err := decodeOffset(v)
		if err != nil {
			t.logger.Warn("ignoring an unreadable offsets record", "topic", topic, "partition", t.id.Partition, "error", err)
			continue
		}
		if known && id != (sarama.Uuid{}) && id != current {
			t.logger.Warn("SOURCE TOPIC RECREATED: the task's offsets record is for an earlier topic of this name; ignoring it and reading the new topic from its committed offset",
				"topic", topic, "partition", t.id.Partition, "recorded_id", id.String(), "current_id", current.String(), "recorded_offset", floor)
			continue
		}
		if floor > 0 {
			hwm, err := kread.HighWaterMark(t.rt.restoreC, topic, t.id.Partition)
			if err != nil {
				return 0, fmt.Errorf("task %s: end offset of %s/%d: %w", t.id, topic, t.id.Partition, err)
			}
			if floor > hwm {
				t.logger.Warn("SOURCE TOPIC RECREATED: the task's offsets record is above the partition's end; ignoring it and reading the new topic from its committed offset",
					"topic", topic, "partition", t.id.Partition, "recorded_offset", floor, "end_offset", hwm)
				continue
			}
		}
		if claim := t.inbox.startOf(topic); claim >= 0 && claim < floor {
			t.logger.Warn("the group coordinator answered a committed offset older than the task's own record; skipping the committed records in between",
				"topic", topic, "partition", t.id.Partition, "coordinator", claim, "recorded", floor)
		}
		t.inbox.setFloor(topic, floor)
	}
	var nonce uint64
	if v := last[commitKey]; len(v) == 8 {
		nonce = binary.BigEndian.Uint64(v)
	}
	return nonce, nil
}

// beginSession prepares the task's input for a new group session; called by Setup
// before the claims start.
func (t *taskRunner) beginSession(sess sarama.ConsumerGroupSession) {
	t.inbox.reset()
	if t.dead.Load() {
		t.inbox.close()
	}
}

// run is the task's goroutine for one session: restore, then process and commit until
// the session ends, then commit and suspend.
func (t *taskRunner) run(sess sarama.ConsumerGroupSession) {
	t.runMu.Lock()
	defer t.runMu.Unlock()
	if t.dead.Load() {
		return
	}
	t.sess = sess
	err := t.runSession(sess.Context())
	switch {
	case err == nil:
		return
	case sess.Context().Err() != nil && recoverable(err):
		// The session ended while the transaction was failing: drop it; whoever owns
		// the task next replays from the last commit.
		t.logger.Info("session ended during a failed transaction; dropping it", "error", err)
		t.abandon()
		return
	case errors.Is(err, errReconsume):
		t.logger.Warn("output failed; the session ends and the uncommitted input is consumed again", "error", err)
		return
	case isFenced(err):
		t.metrics.Fenced()
		t.logger.Info("task migrated to another instance; dropping it", "reason", err)
		// If the group still gives us the task, only a new generation sorts it out.
		t.rt.requestRejoin(sess)
	default:
		t.rt.fail(err)
	}
	t.dead.Store(true)
	t.inbox.close()
	t.abandon()
}

// abandon drops the task's uncommitted work: abort the open transaction (best effort),
// discard the store buffers, close the producer.
func (t *taskRunner) abandon() {
	if t.set != nil {
		t.set.Discard()
	}
	// Records of the dropped transaction may be in the changelogs (at-least-once
	// writes them without a transaction): the next session restores.
	t.storesCurrent = false
	if t.eng != nil {
		// The engine's time state and the tables' caches belong to the dropped work
		// too: back to the last commit (a kept at-least-once task goes on with them).
		t.eng.Rollback()
	}
	if t.producer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if t.producer.Transactional() {
			_ = t.producer.Abort(ctx)
		}
		cancel()
		_ = t.producer.Close()
		t.producer = nil
	}
	t.kept, t.pending = nil, 0
}

func (t *taskRunner) runSession(ctx context.Context) error {
	t.state.Store(int32(taskRestoring))
	defer func() {
		if taskState(t.state.Load()) != taskClosed {
			t.state.Store(int32(taskSuspended))
		}
	}()
	if err := t.open(); err != nil {
		return err
	}
	if err := t.prepare(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // a rebalance: a restore resumes from its checkpoint later
		}
		return err
	}
	if !t.initDone {
		if err := t.eng.Init(); err != nil {
			return err
		}
		t.initDone = true
	}
	t.consumed = map[string]int64{}
	t.kept, t.pending = nil, 0
	t.lastCommit = time.Now()
	t.state.Store(int32(taskRunning))
	t.logger.Debug("task running")

	interval := t.rt.cfg.CommitInterval
	tick := time.NewTicker(min(interval, 100*time.Millisecond))
	defer tick.Stop()
	for {
		// Work through what is buffered, in chunks, checking the clock in between.
		for i := 0; i < 512; i++ {
			msg, ok := t.inbox.pop()
			if !ok {
				break
			}
			began := time.Now()
			if err := t.processWithRecovery(ctx, toRaw(msg)); err != nil {
				return err
			}
			t.metrics.Processed(time.Since(began))
			if t.pending >= t.rt.cfg.CommitRecords || t.eng.CommitRequested() {
				if err := t.commitWithRecovery(ctx); err != nil {
					return err
				}
			}
		}
		if time.Since(t.lastCommit) >= interval {
			if err := t.commitWithRecovery(ctx); err != nil {
				return err
			}
		}
		t.recordBufferKeys()
		select {
		case <-ctx.Done():
			return t.suspend()
		case <-t.inbox.notify:
		case now := <-tick.C:
			if err := t.eng.PunctuateWallClock(now); err != nil {
				if err := t.recover(ctx, err); err != nil {
					return err
				}
			}
		}
	}
}

// prepare readies the task for a session: its producer, its stores restored (a task
// kept across a rebalance has current stores and skips that), its offsets record read.
// A failure that can pass (a broker or coordinator away or loading, commit markers
// pending, a timeout) is retried with backoff while the session lives, as Kafka Streams
// retries within task.timeout.ms; only a fatal one (authorization, an unsupported
// version) is returned, and stops the application.
func (t *taskRunner) prepare(ctx context.Context) error {
	b := backoff.Backoff{Max: maxRecoverDelay}
	for attempt := 1; ; attempt++ {
		err := t.prepareOnce(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if rec := classify(err); rec == fatalFailure || rec == taskMigrated {
			return fmt.Errorf("task %s: preparing the task failed (%s), not retried: %w", t.id, rec, err)
		}
		delay := b.Next()
		t.logger.Warn("preparing the task failed; retrying", "error", err, "attempt", attempt, "retry_in", delay)
		if err := backoff.Sleep(ctx, delay); err != nil {
			return err
		}
	}
}

func (t *taskRunner) prepareOnce(ctx context.Context) error {
	if err := t.initProducer(ctx); err != nil {
		return err
	}
	// The offsets record first: a store restored from its source topic stops at the
	// committed input offset.
	if _, err := t.readFloors(ctx); err != nil {
		return err
	}
	if !t.storesCurrent {
		if err := t.restore(ctx); err != nil {
			return err
		}
	}
	return nil
}

// opContext bounds one producer operation (a commit, a flush) by time and by the
// task's life, never by the session.
func (t *taskRunner) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.life, max(2*t.rt.cfg.TransactionTimeout, 30*time.Second))
}

// suspend commits the open transaction at the end of a session, so the next owner
// (this instance or another) starts exactly where this one stopped.
func (t *taskRunner) suspend() error {
	ctx, cancel := t.opContext()
	defer cancel()
	err := t.commit(ctx)
	if err == nil {
		return nil
	}
	if isFenced(err) {
		return err
	}
	// Whatever went wrong, the safe way out is to drop the open transaction: the next
	// owner replays from the last commit.
	t.logger.Warn("commit at suspend failed; aborting the open transaction", "error", err)
	t.abandon()
	if recoverable(err) {
		return nil
	}
	return err
}

// processWithRecovery runs one record through the task; a producer error aborts the
// transaction and replays its input.
func (t *taskRunner) processWithRecovery(ctx context.Context, rec graph.RawRecord) error {
	if err := t.process(ctx, rec); err != nil {
		return t.recover(ctx, err)
	}
	return nil
}

// keptReuse is the capacity up to which a task always reuses its kept-records array
// after a commit; a larger one is reused while commits fill at least a quarter of it.
const keptReuse = 4096

func (t *taskRunner) process(ctx context.Context, rec graph.RawRecord) error {
	if t.exactlyOnce() {
		t.kept = append(t.kept, rec)
	}
	if err := t.eng.Process(rec); err != nil {
		return err
	}
	t.consumed[rec.Topic] = rec.Offset + 1
	t.pending++
	return nil
}

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

// commit ends the task's unit of work. Under exactly-once: the changelog records of the
// dirty keys and the consumed offsets join the open transaction, the transaction
// commits, and only then do the stores write their buffers with the new changelog
// checkpoints. Under at-least-once: the same, with "acknowledged" for "committed" and
// the offsets committed after the acknowledgements.
func (t *taskRunner) commit(ctx context.Context) error {
	// The tables' record caches forward into this transaction (or abort it on error).
	if err := t.eng.Flush(); err != nil {
		return err
	}
	t.reportCaches()
	if t.pending == 0 && t.set.Dirty() == 0 && !t.producer.InTransaction() {
		t.lastCommit = time.Now()
		return nil
	}
	began := time.Now()
	offsets := map[string]map[int32]int64{}
	for topic, off := range t.consumed {
		if off > t.inbox.startOf(topic) {
			offsets[topic] = map[int32]int64{t.id.Partition: off}
		}
	}
	if err := t.writeOffsets(ctx); err != nil {
		return err
	}
	if err := t.set.LogChanges(changelogWriter{t: t, ctx: ctx}); err != nil {
		return err
	}
	if h := t.rt.app.hooks.beforeCommit; h != nil {
		if err := h(t.id); err != nil {
			return &txproducer.Error{Op: "commit (injected)", Class: txproducer.Abortable, Err: err}
		}
	}
	if t.exactlyOnce() {
		meta := sarama.NewConsumerGroupMetadataFromSession(t.sess, t.rt.cfg.ApplicationID, nil)
		if err := t.producer.Commit(ctx, offsets, meta); err != nil {
			return err
		}
		if h := t.rt.app.hooks.afterCommit; h != nil {
			if err := h(t.id); err != nil {
				return &txproducer.Error{Op: "commit (injected: answer lost)", Class: txproducer.Indefinite, Err: err}
			}
		}
	} else {
		if err := t.producer.Flush(ctx); err != nil {
			return err
		}
		for topic, parts := range offsets {
			for p, off := range parts {
				t.sess.MarkOffset(topic, p, off, "")
			}
		}
	}
	checkpoints := map[string]int64{}
	for store, topic := range t.changelogs {
		if off, ok := t.producer.Offset(topic, t.id.Partition); ok {
			checkpoints[store] = off + 1
		}
	}
	t.sourceCheckpoints(checkpoints)
	flushBegan, dirty := time.Now(), t.set.Dirty()
	// A bbolt write holds a page buffer per page it rewrites (random keys rewrite most
	// of a store) and is CPU-bound: many tasks flushing at once are no faster than a few,
	// and hold all their buffers together (32 tasks: +100 MB). The wait ignores ctx: the
	// transaction is committed, and giving up here would stop the application; every
	// flush holding a slot ends on its own.
	if dirty > 0 {
		t.rt.flushSlots <- struct{}{}
	}
	err := t.set.Flush(checkpoints)
	if dirty > 0 {
		<-t.rt.flushSlots
	}
	if err != nil {
		t.storesCurrent = false
		// The transaction is committed; the store file lags behind its changelog, which
		// a restore repairs. Stop rather than run on a store we cannot write.
		return fmt.Errorf("task %s: write stores after commit: %w", t.id, err)
	}
	for topic, off := range t.consumed {
		t.inbox.committed(topic, off)
	}
	t.eng.Committed()
	t.attempt = 0
	t.metrics.Flushed(dirty, time.Since(flushBegan))
	if cap(t.kept) > keptReuse && len(t.kept) < cap(t.kept)/4 {
		t.kept = nil // a burst's large array would otherwise stay with every task
	} else {
		clear(t.kept) // let the kept records' bytes go
		t.kept = t.kept[:0]
	}
	t.pending = 0
	t.lastCommit = time.Now()
	t.metrics.Committed(time.Since(began))
	t.purge()
	t.logger.Debug("committed", "offsets", offsets, "took", time.Since(began))
	return nil
}

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
	if !t.exactlyOnce() {
		t.abandon()
		t.rt.requestRejoin(t.sess)
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
		t.logger.Warn("transaction failed; rolling back and replaying its input", "recovery", rec.String(), "error", cause, "attempt", attempt, "records", len(t.kept))
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
		if cause = t.replay(ctx); cause == nil {
			return nil
		}
	}
}

// rollback undoes the open transaction. An abortable one is aborted. Otherwise the
// producer is recreated, which settles the transaction one way or the other, and the
// offsets record tells which: the record of the transaction's own nonce means it
// committed, and the task goes on after it (its stores restored from the changelogs,
// its kept input done with); else the task goes back to its last commit. Either way
// the committed offsets come from the offsets record, never from the group coordinator,
// which can answer stale ones, and they never move back.
func (t *taskRunner) rollback(ctx context.Context, rec recovery) error {
	t.set.Discard()
	if rec == abortTxn {
		err := t.producer.Abort(ctx)
		if err == nil {
			t.attempt = 0
			t.eng.Rollback()
			return nil
		}
		if isFenced(err) {
			return err
		}
		// Could not abort cleanly: settle it by recreating the producer.
	}
	// Creating a producer fences every other producer of the task. An instance that
	// lost the task while it was stalled (a zombie) must not do that to the new owner:
	// recreate only while the group still gives us the task.
	if err := t.rt.checkOwnership(ctx, t.sess, t); err != nil {
		return err
	}
	if t.producer != nil {
		_ = t.producer.Close()
		t.producer = nil
	}
	if err := t.initProducer(ctx); err != nil {
		return err
	}
	nonce, err := t.readFloors(ctx)
	if err != nil {
		return &taskError{task: t.id, op: "re-read the offsets record", rec: settleTxn, err: err}
	}
	if t.attempt != 0 && nonce == t.attempt {
		t.logger.Info("the transaction whose outcome was unknown committed; going on after it", "records", len(t.kept))
		for topic, off := range t.consumed {
			t.inbox.committed(topic, off)
		}
		t.eng.Committed()
		clear(t.kept)
		t.kept, t.pending = t.kept[:0], 0
	} else {
		t.eng.Rollback()
	}
	t.attempt = 0
	// The changelogs may hold the settled transaction's records: read their tail.
	t.storesCurrent = false
	if err := t.restore(ctx); err != nil {
		return &taskError{task: t.id, op: "restore after rollback", rec: settleTxn, err: err}
	}
	return nil
}

// replay processes again the kept input at or above the committed offsets.
func (t *taskRunner) replay(ctx context.Context) error {
	kept := t.kept
	t.kept = make([]graph.RawRecord, 0, len(kept))
	t.consumed = map[string]int64{}
	t.pending = 0
	for i, rec := range kept {
		if rec.Offset < t.inbox.startOf(rec.Topic) {
			continue
		}
		if err := t.process(ctx, rec); err != nil {
			// keep the rest for the next attempt
			t.kept = append(t.kept, kept[i+1:]...)
			return err
		}
	}
	return nil
}

// restore brings every logged store of the task up to its changelog's end.
func (t *taskRunner) restore(ctx context.Context) error {
	t.storesCurrent = false
	for _, name := range t.set.Names() {
		buf := t.set.Buffer(name)
		if !buf.Logged() && t.sourceStore(name) == nil {
			continue
		}
		// Restores are CPU-bound (decoding, sorting, B+tree writes) and each holds a
		// fetch and a write batch in memory: a few at a time restore as fast as all at
		// once, in bounded memory.
		select {
		case t.rt.restoreSlots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		err := t.restoreStore(ctx, buf, name)
		<-t.rt.restoreSlots
		if err != nil {
			return err
		}
	}
	t.storesCurrent = true
	return nil
}

func (t *taskRunner) restoreStore(ctx context.Context, buf *statestore.Buffer, name string) error {
	r := *t.rt.restorer
	r.Logger = t.logger
	r.OnProgress = func(p changelog.Progress) { t.metrics.Restoring(p.Store, p.Total-p.Done, p.Rate) }
	topic := t.changelogs[name]
	if st := t.sourceStore(name); st != nil {
		var err error
		if topic, err = t.restoreFromSource(ctx, &r, st); err != nil {
			return err
		}
	}
	res, err := r.Restore(ctx, buf.Backend(), name, topic, t.id.Partition)
	t.metrics.Restored(name, res.Records)
	if err != nil {
		return fmt.Errorf("task %s: %w", t.id, err)
	}
	if t.rt.cfg.OnRestore != nil {
		t.rt.cfg.OnRestore(t.id, res)
	}
	return nil
}

// close releases everything the task holds; an open transaction is aborted.
func (t *taskRunner) close() {
	t.inbox.close()
	t.endLife()
	t.runMu.Lock()
	defer t.runMu.Unlock()
	t.state.Store(int32(taskClosed))
	t.queryMu.Lock()
	defer t.queryMu.Unlock()
	t.abandon()
	t.creator.Close()
	if t.eng != nil {
		if err := t.eng.Close(); err != nil {
			t.logger.Warn("closing the task's processors", "error", err)
		}
		t.eng = nil
	}
	if t.set != nil {
		if err := t.set.Close(); err != nil {
			t.logger.Warn("closing the task's stores", "error", err)
		}
		t.set = nil
	}
	t.dead.Store(true)
}

// recordBufferKeys publishes the dirty keys per store for the metrics.
func (t *taskRunner) recordBufferKeys() {
	if t.metrics == nil {
		return
	}
	levels := make(map[string]int, len(t.set.Names()))
	for _, name := range t.set.Names() {
		levels[name] = t.set.Buffer(name).Dirty()
	}
	t.bufferKeys.Store(&levels)
}

// Send implements task.Collector: sink and dead-letter records go to the producer.
func (t *taskRunner) Send(topic string, partition int32, key, value []byte, headers []processor.Header, ts time.Time) error {
	var hs []sarama.RecordHeader
	if len(headers) > 0 {
		hs = make([]sarama.RecordHeader, len(headers))
		for i, h := range headers {
			hs[i] = sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value}
		}
	}
	return t.producer.Send(t.life, topic, partition, key, value, hs, ts)
}

// Partitions implements task.Collector.
// The counts are cached per task: the engine asks for every record it partitions.
func (t *taskRunner) Partitions(topic string) (int32, error) {
	if n, ok := t.partCounts[topic]; ok {
		return n, nil
	}
	n, err := t.rt.partitionCount(topic)
	if err != nil {
		return 0, err
	}
	if t.partCounts == nil {
		t.partCounts = map[string]int32{}
	}
	t.partCounts[topic] = n
	return n, nil
}

// changelogWriter sends a commit's changelog records into the task's transaction.
type changelogWriter struct {
	t   *taskRunner
	ctx context.Context
}

func (w changelogWriter) WriteChange(store string, key, value []byte) error {
	return w.t.producer.Send(w.ctx, w.t.changelogs[store], w.t.id.Partition, key, value, nil, time.Now())
}

func toRaw(m *sarama.ConsumerMessage) graph.RawRecord {
	var hs []processor.Header
	if len(m.Headers) > 0 {
		hs = make([]processor.Header, 0, len(m.Headers))
		for _, h := range m.Headers {
			if h != nil {
				hs = append(hs, processor.Header{Key: string(h.Key), Value: h.Value})
			}
		}
	}
	return graph.RawRecord{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Headers: hs, Timestamp: m.Timestamp}
}

// purge deletes the records of the repartition topics the task reads below its
// committed offsets, every RepartitionPurgeInterval. They are committed input: no owner
// of the task will read them again. Best effort: a failure is logged and the next
// interval tries again.
func (t *taskRunner) purge() {
	if len(t.purgeTopics) == 0 || time.Since(t.lastPurge) < t.rt.cfg.RepartitionPurgeInterval {
		return
	}
	t.lastPurge = time.Now()
	for _, topic := range t.purgeTopics {
		off := t.inbox.startOf(topic) // the committed offset
		if off <= 0 {
			continue
		}
		if err := t.rt.admin.DeleteRecords(topic, map[int32]int64{t.id.Partition: off}); err != nil {
			t.logger.Warn("could not delete committed records of a repartition topic; retrying later", "topic", topic, "partition", t.id.Partition, "below", off, "error", err)
			continue
		}
		t.logger.Debug("deleted committed repartition records", "topic", topic, "partition", t.id.Partition, "below", off)
	}
}
