package eddy

import (
	"context"
	"sync"
)

// preparing is the tasks new to a worker being readied on goroutines of their own while
// its kept tasks run (worker.session); the worker takes each from ready when it is.
type preparing struct {
	ready  chan preparedTask // buffered for all: a goroutine never waits for the worker
	left   int               // not taken yet; the worker's goroutine only
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type preparedTask struct {
	t   *taskRunner
	err error
}

// ready opens the task's stores and engine and prepares it, and reports whether it was
// carried over instead. A task carried over within
// a cooperative session (carriedIn) is ready as it is: its worker's commit has just
// written its offsets record and stores, so reading the record back (ListOffsets, a
// fetch; 100-140 ms of a kept task's pause on real Kafka here) would learn nothing.
// A task with sinks beyond Kafka is prepared in full: its sinks' recovery runs at
// every start.
func (t *taskRunner) ready(ctx context.Context) (carried bool, err error) {
	carried = t.carriedIn != nil && t.carriedIn == t.sess
	t.carriedIn = nil
	if carried && t.eng != nil && t.storesCurrent && len(t.eng.Sinks().Nodes()) == 0 {
		return true, nil
	}
	if err := t.open(); err != nil {
		return false, err
	}
	return false, t.prepare(ctx)
}

// prepareFresh starts readying tasks under a context of ctx's; each one done wakes the
// worker's loop.
func (w *worker) prepareFresh(ctx context.Context, tasks []*taskRunner) *preparing {
	ctx, cancel := context.WithCancel(ctx)
	p := &preparing{ready: make(chan preparedTask, len(tasks)), left: len(tasks), cancel: cancel}
	for _, t := range tasks {
		p.wg.Go(func() {
			_, err := t.ready(ctx)
			p.ready <- preparedTask{t: t, err: err}
			select {
			case w.notify <- struct{}{}:
			default:
			}
		})
	}
	return p
}

// stop cancels the readying still under way and waits for it: the tasks belong to the
// worker's goroutine again (a restore cut short resumes from its checkpoint later).
func (p *preparing) stop() {
	p.cancel()
	p.wg.Wait()
}

// joinReady starts the tasks of p that are ready, without waiting, and adds them to the
// worker's running tasks: from now on their offsets and records go into the worker's
// transactions. A task whose preparation failed ends the session with its error, as it
// did when every task was prepared first (the application stops; the kept tasks' open
// transaction is dropped by run). Once the session is over nothing joins.
func (w *worker) joinReady(ctx context.Context, p *preparing) error {
	for p.left > 0 && ctx.Err() == nil {
		var r preparedTask
		select {
		case r = <-p.ready:
		default:
			return nil
		}
		p.left--
		if r.err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return r.err
		}
		// A task joins between commits: the commit under way (an overlapped commit)
		// lands first, so that every task it sealed is every task the worker runs.
		if err := w.landOrRecover(ctx); err != nil {
			return err
		}
		if err := w.start(r.t); err != nil {
			return err
		}
		w.tasks = append(w.tasks, r.t)
	}
	return nil
}

// start makes a readied task run: its processors initialised once per ownership, a new
// unit of work begun.
func (w *worker) start(t *taskRunner) error {
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
	return nil
}
