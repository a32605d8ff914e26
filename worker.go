package eddy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/internal/backoff"
	"github.com/eddy-streams/eddy/processor"
)

// worker runs a share of the instance's tasks with one producer: Kafka Streams'
// exactly_once_v2 (KIP-447) model, where a stream thread, not a task, owns the
// transactional producer. Each session it runs its tasks on one goroutine, and one
// transaction carries all their work: output, changelog records, offsets records and
// the consumed offsets with the group's metadata. A zombie is fenced by the consumer
// group generation that the transaction's TxnOffsetCommit carries (every commit of a
// worker carries the positions of all its tasks, so no transaction escapes that check),
// not by a transactional ID per task; the worker's transactional ID is the instance's
// and the worker's, kept across restarts in the state dir, so a restarted instance
// fences its predecessor's producers and settles their open transactions at once.
type worker struct {
	idx    int
	host   taskHost
	cfg    taskSettings
	txn    *transaction
	logger *slog.Logger
	notify chan struct{} // every inbox of the worker's tasks signals here
	// solo: the worker runs one task with the task's own producer (Config.ProducerPerTask):
	// its transactional ID is the task's, and recreating the producer fences whoever
	// else holds it, so the worker first checks that the group still gives it the task.
	solo bool

	// The fields below belong to the goroutine running the session.
	sess       sarama.ConsumerGroupSession
	tasks      []*taskRunner // this session's tasks
	lastCommit time.Time
	// commitTook is how long the last commit took (prepare to post-commit): the worker
	// processes at least that long before its next commit (commitGap).
	commitTook time.Duration
	// turn is the index in tasks of the task whose turn is next, and turnRan the
	// records it ran in that turn before a commit cut it short (see processChunks).
	turn, turnRan int
	failingSince  time.Time
	// attempts and retryDelay are the recoveries since the last successful commit and
	// the backoff between them: kept across recover calls, since a failure that comes
	// back at every commit (replay succeeds, the commit fails again) is one failure, not
	// a new one each time (issue 26: "attempt=1" at every one of 146 rounds in 30 s).
	attempts   int
	retryDelay backoff.Backoff
	// stoppedAt is when the last session ended under the worker (its context done),
	// for the pause of the tasks it keeps (resumed); zero once reported.
	stoppedAt time.Time
	// dropped: the last run dropped uncommitted work (abandon), so its tasks' claims
	// must start again at the committed offsets (groupcooperative.go).
	dropped bool
	// inflight is the commit under way on the committer goroutine while the worker
	// processes on (Config.OverlapCommits, workeroverlap.go); nil: none.
	inflight *inflightCommit
}

func newWorker(host taskHost, cfg taskSettings, idx int, txnID string) *worker {
	pc := cfg.producer
	if cfg.exactlyOnce {
		pc.TransactionalID = txnID
	}
	w := &worker{
		idx: idx, host: host, cfg: cfg, txn: newTransaction(pc, cfg.appID),
		logger: cfg.logger.With("worker", idx),
		notify: make(chan struct{}, 1),
	}
	if cfg.commitSeam != nil {
		w.txn.commit = cfg.commitSeam(w.taskIDs, w.txn.commit)
	}
	return w
}

// soloWorker runs task t alone with t's own transaction, for one session.
func soloWorker(host taskHost, cfg taskSettings, t *taskRunner) *worker {
	return &worker{host: host, cfg: cfg, txn: t.txn, logger: t.logger, notify: t.inbox.notify, solo: true}
}

func (w *worker) taskIDs() []processor.TaskID {
	ids := make([]processor.TaskID, len(w.tasks))
	for i, t := range w.tasks {
		ids[i] = t.id
	}
	return ids
}

// run is the worker's goroutine for one session: it prepares its tasks, then processes
// and commits them together until ctx (the session's, or a context of it) ends, then
// commits and suspends them.
func (w *worker) run(ctx context.Context, sess sarama.ConsumerGroupSession, tasks []*taskRunner) {
	w.tasks = w.tasks[:0]
	w.dropped = false
	for _, t := range tasks {
		t.runMu.Lock()
		defer t.runMu.Unlock()
		if t.dead.Load() {
			continue
		}
		t.sess, t.txn = sess, w.txn
		if !w.solo {
			t.inbox.notifyOn(w.notify)
		}
		w.tasks = append(w.tasks, t)
	}
	if len(w.tasks) == 0 {
		w.stoppedAt = time.Time{} // a session without tasks: nothing was kept
		return
	}
	w.sess, w.txn.sess = sess, sess
	w.turn, w.turnRan = 0, 0
	all := w.tasks // the session's tasks; w.tasks becomes those running (session)
	err := w.session(ctx)
	switch {
	case err == nil:
		return
	case ctx.Err() != nil && recoverable(err):
		w.logger.Info("session ended during a failed transaction; dropping it", "error", err)
		w.abandon()
		return
	case errors.Is(err, errReconsume):
		w.logger.Warn("output failed; the session ends and the uncommitted input is consumed again", "error", err)
		return
	case isFenced(err):
		w.logFenced(err)
		for _, t := range w.tasks {
			t.metrics.Fenced()
		}
		w.host.requestRejoin(sess)
	default:
		w.host.fail(err)
	}
	for _, t := range all { // a task still being prepared too: it moved, or the application stops
		t.dead.Store(true)
		t.inbox.close()
	}
	w.abandon()
}

// session runs the session's tasks. The tasks the worker kept from its last session
// (initDone: they ran here before, their stores are current) are readied first, and run
// at once; the tasks new to it are readied meanwhile, each on a goroutine of its own
// (preparing), and join the loop one by one as they are ready (joinReady). Before, the
// worker readied every task and only then ran any: a survivor taking over a static
// member's tasks (down longer than the session timeout) restored their tails first, and
// its kept tasks paused up to 1.82 s at 100,000 keys and 4.70 s at 1M (issue 24 item 4,
// BENCHMARKS.md "Availability"; the target is < 1 s). Exactly-once holds as before: a
// task's offsets and records enter the worker's transactions only once it runs (commit
// and recovery see w.tasks, the running tasks), so a kept task's commit never names a
// partition whose offsets record is not read yet; the worker's producer exists before
// any task prepares (OnAssignment created it, fencing a previous incarnation, and
// ensureProducer here); and a new task's restore and offsets record still wait for a
// previous owner's open transaction on its partitions to end.
func (w *worker) session(ctx context.Context) error {
	for _, t := range w.tasks {
		if err := transition(&t.state, t.id, taskRestoring); err != nil {
			return err
		}
		defer func() {
			if err := transition(&t.state, t.id, taskSuspended); err != nil {
				w.host.fail(err)
			}
		}()
	}
	if err := w.ensureProducer(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // a rebalance
		}
		return err
	}
	var kept, fresh []*taskRunner // fresh: new to this runner (or recreated)
	for _, t := range w.tasks {
		if t.initDone {
			kept = append(kept, t)
		} else {
			fresh = append(fresh, t)
		}
	}
	p := w.prepareFresh(ctx, fresh)
	defer p.stop() // before the transitions above: the goroutines touch the tasks
	defer w.waitInflight()
	w.tasks = kept
	carried, err := prepareTasks(ctx, kept)
	if err != nil {
		if ctx.Err() != nil {
			return nil // a rebalance: a restore resumes from its checkpoint later
		}
		return err
	}
	for _, t := range kept {
		if err := w.start(t); err != nil {
			return err
		}
	}
	w.lastCommit = time.Now()
	w.resumed(len(kept), len(kept)+len(fresh), carried)
	return w.loop(ctx, p)
}

// resumedMsg is the log message of resumed; integration/failover reads it.
const resumedMsg = "tasks running again after a rebalance"

// resumed logs how long the worker's kept tasks processed nothing across the
// rebalance: from the end of the last session (its context done: under eager
// rebalancing every task stops there, Cleanup commits, the member joins again) until
// they run again in this one. It is the pause of a task that does not move (issue 24
// item 4; BENCHMARKS.md "Availability"); the tasks new to the worker are readied
// meanwhile and no longer count in it (session). generation tells one rebalance's
// reports from the next's (a scale-up with warm-ups is two: the join, then the probing rebalance).
// Under cooperative rebalancing only a worker whose tasks changed stops, and carried
// counts its kept tasks that ran again without reading back their offsets record
// (taskRunner.ready).
func (w *worker) resumed(kept, tasks, carried int) {
	if w.stoppedAt.IsZero() || kept == 0 {
		w.stoppedAt = time.Time{}
		return
	}
	w.logger.Info(resumedMsg, "paused", time.Since(w.stoppedAt), "kept", kept, "tasks", tasks, "carried", carried, "generation", w.sess.GenerationID())
	w.stoppedAt = time.Time{}
}

// ensureProducer creates the worker's producer if it has none, retried while the
// session lives unless the failure is fatal.
func (w *worker) ensureProducer(ctx context.Context) error {
	b := backoff.Backoff{Max: maxRecoverDelay}
	for attempt := 1; ; attempt++ {
		err := w.txn.ensure(ctx)
		if err == nil || ctx.Err() != nil {
			return ctx.Err()
		}
		if rec := classify(err); rec == fatalFailure {
			return fmt.Errorf("worker %d: creating its producer failed (%s), not retried: %w", w.idx, rec, err)
		}
		delay := b.Next()
		w.logger.Warn("creating the worker's producer failed; retrying", "error", err, "attempt", attempt, "retry_in", delay)
		if err := backoff.Sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// prepareTasks readies tasks in parallel: stores opened and restored, offsets records
// read (each retried while the session lives, as a task alone does), or carried over
// (taskRunner.ready); carried counts those.
func prepareTasks(ctx context.Context, tasks []*taskRunner) (carried int, err error) {
	errs := make([]error, len(tasks))
	was := make([]bool, len(tasks))
	var wg sync.WaitGroup
	for i, t := range tasks {
		wg.Go(func() { was[i], errs[i] = t.ready(ctx) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	for _, c := range was {
		if c {
			carried++
		}
	}
	return carried, errors.Join(errs...)
}

// logFenced says why the worker was fenced. Usually the tasks moved: another instance's
// producer or a newer generation fenced this one. But the broker also aborts a
// transaction that outlived Config.TransactionTimeout and bumps the producer's epoch,
// and the next request is then refused as fenced the same way: a processor that
// blocked, or a commit that waited too long, looks like a move, and the worker drops its
// tasks and rejoins. Said at Warn, with how long the transaction was open, so that an
// operator looks at what stalled and not at the group.
func (w *worker) logFenced(err error) {
	if open := w.txn.openFor(); w.cfg.txnTimeout > 0 && open >= w.cfg.txnTimeout {
		w.logger.Warn("fenced after the transaction was open longer than Config.TransactionTimeout: the broker aborted it and fenced the producer; dropping the tasks and rejoining (look for a processor or punctuator that blocked, or a slow commit; raise TransactionTimeout if the work is meant to take that long)",
			"by", w.name(), "open_for", open.Round(time.Millisecond), "transaction_timeout", w.cfg.txnTimeout, "reason", err)
		return
	}
	w.logger.Info("fenced: the tasks moved to another instance; dropping them", "by", w.name(), "reason", err)
}

// opContext bounds one producer operation by time and by nothing else: the worker
// lives as long as the runtime, and a rebalance must not cut a commit in half.
func (w *worker) opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), max(2*w.cfg.txnTimeout, 30*time.Second))
}

// suspend commits the open transaction at the end of a session, so the next owners of
// the tasks start exactly where this worker stopped.
func (w *worker) suspend() error {
	ctx, cancel := w.opContext()
	defer cancel()
	err := w.land(true) // a commit under way first (an overlapped commit)
	if err == nil {
		_, err = w.commit(ctx, false)
	}
	if err == nil {
		// The post-commit of the sinks outside Kafka, bounded: what is left stays
		// prepared, and the tasks' next start commits it.
		if err := w.finishSinksOnce(ctx); err != nil {
			w.logger.Warn("the sink transactions of the last commit stay prepared; the tasks' next start commits them", "error", err)
		}
		return nil
	}
	if isFenced(err) {
		return err
	}
	w.logger.Warn("commit at suspend failed; aborting the open transaction", "error", err)
	w.abandon()
	if recoverable(err) {
		return nil
	}
	return err
}

// abandon drops the open transaction and every task's uncommitted work.
func (w *worker) abandon() {
	w.waitInflight() // the producer is the committer's until its commit answered
	w.dropped = true
	for _, t := range w.tasks {
		t.dropWork()
	}
	w.txn.drop()
}

// close ends the worker's producer; the runtime calls it when it stops.
func (w *worker) close() { w.txn.close() }
