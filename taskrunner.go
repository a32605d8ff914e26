package eddy

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/graph"
	"github.com/eddy-streams/eddy/internal/metrics"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/task"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/statestore"
)

// taskRunner owns one task while this instance is assigned it: its transaction, stores,
// engine and input. Its run method is the task's goroutine for one group session;
// between sessions the task stays open (suspended) if it is assigned again. The files
// task*.go hold its parts: taskrunner.go its life, taskopen.go its stores and restore,
// taskcommit.go the commit, taskrecovery.go what it does when a transaction fails.
type taskRunner struct {
	host   taskHost
	cfg    taskSettings
	id     processor.TaskID
	sub    *graph.Subtopology
	topics []string // the resolved source topics, sorted
	logger *slog.Logger

	// committed is where the committed input ends; the inbox, the offsets record and
	// the commit share it.
	committed *committedOffsets
	inbox     *inbox
	record    *offsetsRecord

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

	// The fields below belong to the goroutine holding runMu (txn.creator excepted:
	// OnAssignment may create the producer before the task runs).
	txn           *transaction
	work          work
	eng           *task.Task
	set           *statestore.Set
	initDone      bool
	changelogs    map[string]string // store → changelog topic
	sess          sarama.ConsumerGroupSession
	partCounts    map[string]int32 // partition counts of output topics
	purgeTopics   []string         // the repartition topics the task reads
	lastPurge     time.Time        // when it last deleted their committed records
	failingSince  time.Time        // when the current run of failed transactions began (zero: none)
	storesCurrent bool             // see restore
}

func newTaskRunner(host taskHost, cfg taskSettings, id processor.TaskID) *taskRunner {
	sub := cfg.graph.Subtopologies[id.Subtopology]
	life, end := context.WithCancel(context.Background())
	var purge []string
	for _, r := range sub.RepartitionSources {
		purge = append(purge, names.RepartitionTopic(cfg.appID, r))
	}
	pc := cfg.producer
	if cfg.exactlyOnce {
		pc.TransactionalID = names.TransactionalID(cfg.appID, id.String())
	}
	txn := newTransaction(pc, cfg.appID)
	if cfg.commitSeam != nil {
		txn.commit = cfg.commitSeam(func() []processor.TaskID { return []processor.TaskID{id} }, txn.commit)
	}
	logger := cfg.logger.With("task", id.String())
	topics := slices.Sorted(slices.Values(sub.AllSourceTopics(cfg.appID)))
	committed := newCommittedOffsets()
	return &taskRunner{
		host: host, cfg: cfg, id: id, sub: sub, topics: topics, purgeTopics: purge,
		txn: txn, logger: logger,
		committed: committed,
		inbox:     newInbox(committed),
		record: &offsetsRecord{
			topic:     names.ChangelogTopic(cfg.appID, names.OffsetsStore(sub.ID)),
			partition: id.Partition, sources: topics, committed: committed, logger: logger,
		},
		life: life, endLife: end,
		metrics: cfg.metrics.Task(id.String()),
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
	return t.txn.lacksProducer() && t.eng != nil
}

// beginSession prepares the task's input for a new group session; called by Setup
// before the claims start.
func (t *taskRunner) beginSession() {
	t.committed.newSession()
	t.inbox.reset()
	if t.dead.Load() {
		t.inbox.close()
	}
}

// claim starts the claim of a source topic's partition at offset, the group's committed
// offset; hwm reports the claim's high-water mark.
func (t *taskRunner) claim(topic string, offset int64, hwm func() int64) {
	t.inbox.start(topic, offset, hwm)
	if known := t.committed.claim(topic, offset); known > offset && offset >= 0 {
		t.logger.Warn("the group coordinator answered a committed offset older than the task's own record; skipping the committed records in between",
			"topic", topic, "partition", t.id.Partition, "coordinator", offset, "recorded", known)
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
	t.sess, t.txn.sess = sess, sess
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
		t.host.requestRejoin(sess)
	default:
		t.host.fail(err)
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
	t.txn.drop()
	t.work.drop()
}

func (t *taskRunner) runSession(ctx context.Context) error {
	if err := transition(&t.state, t.id, taskRestoring); err != nil {
		return err
	}
	defer func() {
		if err := transition(&t.state, t.id, taskSuspended); err != nil {
			t.host.fail(err)
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
	t.work.begin()
	if err := transition(&t.state, t.id, taskRunning); err != nil {
		return err
	}
	t.logger.Debug("task running")
	return t.loop(ctx)
}

// loop processes and commits until the session ends, then suspends.
func (t *taskRunner) loop(ctx context.Context) error {
	tick := time.NewTicker(min(t.cfg.commitInterval, 100*time.Millisecond))
	defer tick.Stop()
	for {
		if err := t.processBuffered(ctx); err != nil {
			return err
		}
		if time.Since(t.work.lastCommit) >= t.cfg.commitInterval {
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

// processBuffered works through what is buffered, in a chunk, committing where the
// record count or a processor asks for it.
func (t *taskRunner) processBuffered(ctx context.Context) error {
	for range 512 {
		msg, ok := t.inbox.pop()
		if !ok {
			return nil
		}
		began := time.Now()
		if err := t.process(toRaw(msg)); err != nil {
			if err := t.recover(ctx, err); err != nil {
				return err
			}
		}
		t.metrics.Processed(time.Since(began))
		if t.work.pending >= t.cfg.commitRecords || t.eng.CommitRequested() {
			if err := t.commitWithRecovery(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// process runs one record through the task's engine.
func (t *taskRunner) process(rec graph.RawRecord) error {
	if t.cfg.exactlyOnce {
		t.work.kept = append(t.work.kept, rec)
	}
	if err := t.eng.Process(rec); err != nil {
		return err
	}
	t.work.processed(rec)
	return nil
}

// opContext bounds one producer operation (a commit, a flush) by time and by the
// task's life, never by the session.
func (t *taskRunner) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.life, max(2*t.cfg.txnTimeout, 30*time.Second))
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

// close releases everything the task holds; an open transaction is aborted.
func (t *taskRunner) close() {
	t.inbox.close()
	t.endLife()
	t.runMu.Lock()
	defer t.runMu.Unlock()
	if err := transition(&t.state, t.id, taskClosed); err != nil {
		return // closed already
	}
	t.queryMu.Lock()
	defer t.queryMu.Unlock()
	t.abandon()
	t.txn.close()
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
