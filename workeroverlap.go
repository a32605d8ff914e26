package eddy

import (
	"context"
	"time"

	"github.com/eddy-streams/eddy/internal/metrics"
)

// The overlapped commit (Config.OverlapCommits; docs/architecture.md, "Overlapped
// commits"): the worker prepares a commit as always (caches forwarded, changelog and
// offsets records sent), then seals every task's part of it (store buffers, engine
// time state, input positions) and hands the transaction's commit — the producer's
// flush and CommitTxn — to a committer goroutine, and goes on processing. The next
// transaction's state changes fill new write buffers over the sealed ones, and its
// output records are held (transaction.sendOutput): the producer runs one transaction
// at a time. When the commit has answered, the worker lands it (land): on success its
// post-commit runs as before, on the sealed parts only, and the held records go out
// into the next transaction; on failure both transactions roll back and the kept input
// of both is processed again (recover), which the seal makes exact: a rollback returns
// every task to its last commit, and a settle that finds the sealed commit committed
// goes on after the seal.

// overlapHeldBytes bounds the output a worker holds while a commit is under way (keys
// and values): past it the worker waits for the commit before it processes more.
const overlapHeldBytes = 16 << 20

// inflightCommit is a commit whose Kafka transaction commits on the committer
// goroutine while the worker processes on.
type inflightCommit struct {
	parts   []*taskRunner
	offsets map[string]map[int32]int64
	fenced  func()
	began   time.Time
	cancel  context.CancelFunc
	done    chan struct{} // closed when the committer has set the fields below
	ph      metrics.CommitPhases
	ended   time.Time // when the commit step ended
	err     error
}

// canOverlap reports whether the worker may hand its next commit to the committer: the
// application asked for it (exactly-once only), the session goes on, and no task
// writes to a sink outside Kafka (their transactions are named by the Kafka
// transaction's nonce while they are written).
func (w *worker) canOverlap(ctx context.Context) bool {
	if !w.cfg.overlapCommits || ctx.Err() != nil {
		return false
	}
	for _, t := range w.tasks {
		if len(t.eng.Sinks().Nodes()) > 0 {
			return false
		}
	}
	return true
}

// handOff seals every task's part of the prepared commit (parts carry work; offsets
// and fenced as prepareCommit gave them) and starts its commit step on the committer
// goroutine; output is held from now on. start is when the commit began, began when
// its prepare's writes began.
func (w *worker) handOff(start, began time.Time, parts []*taskRunner, offsets map[string]map[int32]int64, fenced func()) error {
	for _, t := range w.tasks {
		if err := t.seal(); err != nil {
			return err
		}
	}
	ctx, cancel := w.opContext()
	c := &inflightCommit{parts: parts, offsets: offsets, fenced: fenced, began: began, cancel: cancel, done: make(chan struct{})}
	w.inflight = c
	w.txn.holding = true
	go func() {
		defer close(c.done)
		c.ph, c.ended, c.err = w.commitTxn(ctx, start, offsets)
	}()
	// The worker paused for the prepare alone; the next transaction begins now.
	w.lastCommit = time.Now()
	w.commitTook = w.lastCommit.Sub(start)
	return nil
}

// inflightDone is closed once the commit under way has answered; nil (never ready)
// when none is under way.
func (w *worker) inflightDone() <-chan struct{} {
	if w.inflight == nil {
		return nil
	}
	return w.inflight.done
}

// landDue reports whether the worker must land the commit under way before it goes
// on: it has answered, the next commit is due (due), or the held output reached its
// bound.
func (w *worker) landDue(due bool) bool {
	if w.inflight == nil {
		return false
	}
	if due || w.txn.heldBytes >= overlapHeldBytes {
		return true
	}
	select {
	case <-w.inflight.done:
		return true
	default:
		return false
	}
}

// land waits for the commit under way, if any, and finishes it: its post-commit (the
// sealed store layers written, committed offsets advanced, the sealed input let go)
// and, with release, the held output sent into the next transaction (without, it is
// dropped: the caller rolls the next transaction back). An error is the commit's (the
// caller recovers: both transactions roll back), its post-commit's, or the release's.
func (w *worker) land(release bool) error {
	c := w.inflight
	if c == nil {
		return nil
	}
	<-c.done
	c.cancel()
	w.inflight = nil
	if c.err != nil {
		w.txn.dropHeld()
		return c.err
	}
	if c.fenced != nil {
		c.fenced()
	}
	ran := 0
	for _, t := range w.tasks {
		ran += t.work.pending // since the seal
	}
	if _, err := w.afterCommit(c.parts, c.offsets, c.began, c.ended, c.ph); err != nil {
		w.txn.dropHeld()
		return err
	}
	w.cfg.metrics.OverlapRecords(ran)
	w.succeeded()
	if !release {
		w.txn.dropHeld()
		return nil
	}
	return w.txn.release()
}

// landOrRecover lands the commit under way; a failure is recovered from as any failed
// transaction (rolled back with the one after it, their input processed again).
func (w *worker) landOrRecover(ctx context.Context) error {
	if err := w.land(true); err != nil {
		return w.recover(ctx, err)
	}
	return nil
}

// waitInflight ends a commit under way when the session ends on an error: it lands it
// if it committed (the tasks then know it did), and drops the held output either way;
// the caller drops the open work.
func (w *worker) waitInflight() {
	if w.inflight != nil {
		if err := w.land(false); err != nil {
			w.logger.Info("the commit under way when the session ended did not complete", "error", err)
		}
	}
	w.txn.dropHeld()
}
