package eddy

import (
	"context"
	"time"
)

// The worker's processing loop: tasks take turns, and commits come every commit gap.

// turnRecords is how many records a task runs in its turn before the worker moves on to
// the next task (Kafka Streams' equivalent is a task's share of a poll's records).
const turnRecords = 512

// loop processes the worker's tasks in turn, up to turnRecords records each, and commits
// them together every commit interval, when one asks, and at the end of the session; a
// task of p that is ready joins them between two turns.
func (w *worker) loop(ctx context.Context, p *preparing) error {
	tick := time.NewTicker(min(w.cfg.commitInterval, 100*time.Millisecond))
	defer tick.Stop()
	for {
		if err := w.joinReady(ctx, p); err != nil {
			return err
		}
		need, more, err := w.processChunks(ctx)
		if err != nil {
			return err
		}
		due := need || time.Since(w.lastCommit) >= w.commitGap()
		if w.landDue(due) {
			// The commit under way has answered, or the next one is due, or the
			// held output is at its bound (an overlapped commit).
			if err := w.landOrRecover(ctx); err != nil {
				return err
			}
		}
		if due && !w.host.commitHeld(w.sess, w.txn.openFor()) {
			if err := w.commitWithRecovery(ctx); err != nil {
				return err
			}
		}
		if more && ctx.Err() == nil {
			// With a backlog the loop never waits below, so a due wall-clock tick is
			// taken here, as Kafka Streams' stream thread punctuates after every round
			// of processing: wall-clock punctuators never fired while a worker's tasks
			// had records waiting.
			select {
			case now := <-tick.C:
				if err := w.punctuate(ctx, now); err != nil {
					return err
				}
			default:
			}
			continue
		}
		select {
		case <-ctx.Done():
			w.stoppedAt = time.Now()
			return w.suspend()
		case <-w.notify:
		case <-w.inflightDone():
		case now := <-tick.C:
			if err := w.punctuate(ctx, now); err != nil {
				return err
			}
		}
	}
}

// processChunks gives the tasks their turns, one round from the task whose turn is
// next, and stops as soon as a commit is due: the commit interval has passed since the
// last commit ended, a task reached CommitRecords or a processor asked. The next call
// goes on where this one stopped: a task whose turn a commit cut short finishes it
// (what it has left of its turnRecords), then the next task has its turn, so a task
// with records waits at most one round of the others' turns, however often the worker
// commits. It used to check the interval only after a whole round from the first task,
// up to 512 records of every task: a worker of 64 tasks committed every ~1.8 s instead
// of 100 ms, and one of 8 every ~0.44 s (BENCHMARKS.md, "Where a worker's commit time
// goes"). A processing error is recovered from (the transaction of all the worker's
// tasks rolled back and replayed).
func (w *worker) processChunks(ctx context.Context) (need, more bool, err error) {
	due := w.lastCommit.Add(w.commitGap())
	for range len(w.tasks) {
		t := w.tasks[w.turn]
		ran, n, m, err := t.processChunk(turnRecords-w.turnRan, due)
		w.turnRan += ran
		if err != nil {
			if err := w.recover(ctx, err); err != nil {
				return false, false, err
			}
			n, m = false, true
		}
		more = more || m
		if n {
			if !m || w.turnRan >= turnRecords {
				w.nextTurn()
			}
			return true, true, nil
		}
		w.nextTurn()
	}
	return false, more, nil
}

// commitGap is how long after the end of its last commit the worker commits again: the
// commit interval, or as long as that commit took if longer. A worker whose commits take
// longer than its interval (a loaded broker: 200-735 ms each at load 26-67 here) still
// spends at least half its time processing; committing every interval regardless cut
// the word count's throughput 2.1-3x (BENCHMARKS.md, "Commits on time"). It stays under
// half the transaction timeout: the transaction opens at the first record after a commit
// and must commit within the timeout, else the broker aborts it and bumps the epoch.
// Uncapped, one commit that spanned a broker restart (~15 s, TransactionTimeout 10 s) made
// every later transaction wait past the timeout: fenced, rejoined, fenced again every
// ~16 s for good (the exactly-once harness, seed 1796307357998205083), since a failed
// commit never updates commitTook.
func (w *worker) commitGap() time.Duration {
	gap := max(w.cfg.commitInterval, w.commitTook)
	if w.cfg.txnTimeout > 0 {
		gap = min(gap, max(w.cfg.commitInterval, w.cfg.txnTimeout/2))
	}
	return gap
}

func (w *worker) nextTurn() {
	w.turn, w.turnRan = (w.turn+1)%len(w.tasks), 0
}

func (w *worker) punctuate(ctx context.Context, now time.Time) error {
	for _, t := range w.tasks {
		if err := t.eng.PunctuateWallClock(now); err != nil {
			if err := w.recover(ctx, err); err != nil {
				return err
			}
		}
	}
	return nil
}
