package eddy

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/processor"
)

// Cooperative rebalancing (Config.RebalanceProtocol, issue 24 item 4; docs/architecture.md,
// "Rebalancing"). Under sarama's cooperative protocol a group session outlives the
// rebalances: Setup and Cleanup run once, the claims a member keeps are never stopped,
// a revoked claim is told by its Messages channel closing, and sarama waits for its
// ConsumeClaim to return before the member joins again for the follow-up rebalance that
// hands the partitions to their new owner (the leader withholds a task that moves until
// its old owner no longer runs it: assigncooperative.go). So the runtime, within one
// session:
//   - releases a revoked task before its ConsumeClaim returns: the worker running it
//     commits its open transaction (all its tasks'), the task is closed
//     (crew.release);
//   - starts a task added to the session on the worker with the fewest tasks
//     (crew.add), readied off the worker's goroutine as at a session's start;
//   - holds the workers' commits from the start of a join until the member stores the
//     new generation (commitGate): a TxnOffsetCommit carries sess.GenerationID(), which
//     the coordinator refuses (ILLEGAL_GENERATION) once the join completed and before
//     sarama stores the generation after SyncGroup.
//
// A worker whose tasks change is stopped (its loop commits and suspends its tasks, as at
// the end of an eager session) and started again with its new share: its kept tasks
// pause for that commit and resume without a restore (their stores are current, their
// claims go on). Workers whose tasks do not change never stop. A worker that could not
// commit when stopped (it dropped its open transaction: fenced, or a commit that
// failed) cannot go on in the same session — its kept tasks' claims have delivered
// records past the dropped ones — so the whole session ends (requestRejoin) and the
// next starts every claim at the committed offsets, as the eager protocol does at every
// rebalance.

// crew runs the workers of one cooperative session and changes their shares.
type crew struct {
	rt   *runtime
	sess sarama.ConsumerGroupSession
	wg   *sync.WaitGroup // the session's: Cleanup waits for every run

	// commitGen is the generation the workers' commits carry (commitGeneration): the
	// session's first, then each one whose assignment arrived while the session was
	// live. Once it ends (ending) sarama may still finish a join under way and the
	// follow-up join of the claims it revokes there, and store their generations, but
	// a revoked claim that had already returned (the session ending) released nothing:
	// its task is still in a worker, and the follow-up plan gives it to another member.
	// A commit with the newer generation was accepted: the CI run of 533aaa4 (real
	// Kafka, cooperative, static IDs, seed 1796353265152862519) committed input/0 at
	// 3256 after 3405, duplicates=5135. With the generation of the last live
	// assignment the coordinator refuses such a commit once the group moved on, and
	// the worker aborts.
	commitGen atomic.Int32

	mu       sync.Mutex
	shifts   map[*worker]*shift
	owner    map[processor.TaskID]*worker
	releases map[processor.TaskID]chan struct{} // closed once the task is released
}

// shift is one worker's run in the session: the tasks it runs and how to stop it.
type shift struct {
	mu     sync.Mutex // held while the run is stopped and started again
	tasks  []*taskRunner
	cancel context.CancelFunc
	done   chan struct{}
}

func newCrew(rt *runtime, sess sarama.ConsumerGroupSession, wg *sync.WaitGroup) *crew {
	c := &crew{rt: rt, sess: sess, wg: wg, shifts: map[*worker]*shift{}, owner: map[processor.TaskID]*worker{}, releases: map[processor.TaskID]chan struct{}{}}
	c.commitGen.Store(sess.GenerationID())
	return c
}

// ending reports whether the session is over or the runtime asked for its end
// (requestRejoin): from then on a claim's end releases nothing (ConsumeClaim, revoked),
// so what sarama reports as given up may still run in a worker.
func (c *crew) ending() bool {
	if c.sess.Context().Err() != nil {
		return true
	}
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	select {
	case <-c.rt.rejoin:
		return true
	default:
		return false
	}
}

// start runs the session's first tasks, dealt to the workers as the eager protocol
// deals them (startWorkers).
func (c *crew) start(tasks []*taskRunner) {
	if c.rt.cfg.ProducerPerTask {
		for _, t := range tasks {
			c.launch(soloWorker(c.rt, c.rt.settings, t), []*taskRunner{t})
		}
		return
	}
	for i, share := range c.rt.deal(tasks) {
		if len(share) > 0 {
			c.launch(c.rt.workers[i], share)
		}
	}
}

// launch makes w's shift and starts its run.
func (c *crew) launch(w *worker, tasks []*taskRunner) {
	s := &shift{}
	c.mu.Lock()
	c.shifts[w] = s
	for _, t := range tasks {
		c.owner[t.id] = w
	}
	c.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	c.run(w, s, tasks)
}

// run starts w on tasks under a context of the session's own; s.mu is held.
func (c *crew) run(w *worker, s *shift, tasks []*taskRunner) {
	s.tasks = tasks
	s.done = nil
	if len(tasks) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(c.sess.Context())
	done := make(chan struct{})
	s.cancel, s.done = cancel, done
	c.wg.Go(func() {
		defer close(done)
		defer cancel()
		w.run(ctx, c.sess, tasks)
	})
}

// stop ends w's run and waits for it: its loop commits and suspends its tasks. It
// reports whether the run dropped uncommitted work (it could not commit); s.mu is held.
func (c *crew) stop(w *worker, s *shift) (dropped bool) {
	if s.done == nil {
		return false
	}
	s.cancel()
	<-s.done
	s.done = nil
	return w.dropped
}

// add starts tasks new to the session: each goes to the worker with the fewest tasks,
// and each worker given some is stopped and started again with them (their kept tasks
// pause for its commit; the new ones are readied off its goroutine). It runs on a
// goroutine of the session's (OnAssignment must not wait for a commit: the commit waits
// for the generation that OnAssignment's return stores).
func (c *crew) add(tasks []*taskRunner) {
	if len(tasks) == 0 {
		return
	}
	if c.rt.cfg.ProducerPerTask {
		for _, t := range tasks {
			c.launch(soloWorker(c.rt, c.rt.settings, t), []*taskRunner{t})
		}
		return
	}
	slices.SortFunc(tasks, func(a, b *taskRunner) int {
		return cmp.Or(cmp.Compare(a.id.Subtopology, b.id.Subtopology), cmp.Compare(a.id.Partition, b.id.Partition))
	})
	gained := map[*worker][]*taskRunner{}
	c.mu.Lock()
	load := map[*worker]int{}
	for _, w := range c.rt.workers {
		if s := c.shifts[w]; s != nil {
			load[w] = len(s.tasks)
		}
	}
	for _, t := range tasks {
		least := c.rt.workers[0]
		for _, w := range c.rt.workers[1:] {
			if load[w] < load[least] {
				least = w
			}
		}
		load[least]++
		gained[least] = append(gained[least], t)
		c.owner[t.id] = least
	}
	for w := range gained {
		if c.shifts[w] == nil {
			c.shifts[w] = &shift{}
		}
	}
	c.mu.Unlock()
	for w, more := range gained {
		c.mu.Lock()
		s := c.shifts[w]
		c.mu.Unlock()
		c.reshift(w, s, func(kept []*taskRunner) []*taskRunner { return append(kept, more...) })
	}
}

// reshift stops w's run and starts it again on change(its tasks). When the stopped run
// dropped its uncommitted work, nothing is started: the session ends. Otherwise the
// tasks it keeps are carried over (taskRunner.carriedIn): they run again without
// reading back what the stop's commit has just written.
func (c *crew) reshift(w *worker, s *shift, change func([]*taskRunner) []*taskRunner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.stop(w, s) {
		c.rt.logger.Warn("a worker dropped its open transaction while its tasks changed; ending the group session so every claim starts again at the committed offsets", "worker", w.idx)
		c.rt.requestRejoin(c.sess)
		return
	}
	next := change(slices.Clone(s.tasks))
	for _, t := range next {
		if slices.Contains(s.tasks, t) {
			t.runMu.Lock()
			t.carriedIn = c.sess
			t.runMu.Unlock()
		}
	}
	c.run(w, s, next)
}

// release lets a revoked task go: the worker running it commits and stops, starts again
// without it, and the task is closed. Every claim of the task calls it (a task may read
// several partitions); the first does the work, the others wait for it.
func (c *crew) release(id processor.TaskID) {
	c.mu.Lock()
	if ch, ok := c.releases[id]; ok {
		c.mu.Unlock()
		<-ch
		return
	}
	ch := make(chan struct{})
	c.releases[id] = ch
	w := c.owner[id]
	delete(c.owner, id)
	s := c.shifts[w]
	c.mu.Unlock()
	defer close(ch)
	began := time.Now()
	if w != nil && s != nil {
		c.reshift(w, s, func(tasks []*taskRunner) []*taskRunner {
			return slices.DeleteFunc(tasks, func(t *taskRunner) bool { return t.id == id })
		})
		if w.solo {
			c.mu.Lock()
			delete(c.shifts, w)
			c.mu.Unlock()
		}
	}
	if t := c.rt.registry.remove(id); t != nil {
		t.close()
	}
	c.rt.logger.Info("task released to its next owner", "task", id, "took", time.Since(began))
}

// forgetReleases forgets the releases done, once the member has joined again: a task
// released may come back in a later generation.
func (c *crew) forgetReleases() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, ch := range c.releases {
		select {
		case <-ch:
			delete(c.releases, id)
		default:
		}
	}
}

// liveCrew returns the crew of the session under way (nil: eager rebalancing, or no
// session).
func (rt *runtime) liveCrew() *crew {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.crew
}

// onCooperativeAssignment takes an assignment within a live cooperative session: the
// tasks new to the instance are made and started (crew.add, on a goroutine of the
// session), the standbys follow the assignment; the tasks it no longer names keep
// running until sarama closes their claims and ConsumeClaim releases them. A member
// never misses a generation within a session (sarama ends the session when a join
// finds the member gone: lostHeldAssignment), so the eager protocol's generation-gap
// rule is not needed here. An assignment taken while the session ends does not become
// the generation the workers' commits carry (crew.commitGen).
func (rt *runtime) onCooperativeAssignment(c *crew, assigned, standby []processor.TaskID, generation int32, hosts map[string][]string) {
	if c.ending() {
		rt.logger.Warn("an assignment arrived while the group session ends; the workers' commits keep the generation of the last assignment taken live, so the coordinator refuses them and their transactions abort (a task this member gives up may still be in a worker)",
			"generation", generation, "commits_with", c.commitGen.Load())
	} else {
		c.commitGen.Store(generation)
	}
	rt.registry.newGeneration(generation, hosts)
	c.forgetReleases()
	fresh := rt.registry.add(assigned, rt.newTask)
	for _, t := range fresh {
		t.beginSession() // before sarama starts its claims
	}
	keep := make(map[processor.TaskID]bool, len(assigned))
	for _, id := range assigned {
		keep[id] = true
	}
	var leaving []processor.TaskID
	for _, t := range rt.registry.all() {
		if !keep[t.id] {
			leaving = append(leaving, t.id)
		}
	}
	if len(fresh) > 0 || len(leaving) > 0 {
		rt.logger.Info("assignment", "generation", generation, "tasks", assigned, "releasing", leaving, "new", len(fresh), "standby", standby, "protocol", "cooperative")
	}
	rt.reconcileStandbys(standby)
	if rt.cfg.Guarantee == ExactlyOnce && rt.cfg.ProducerPerTask {
		txns := make([]*transaction, 0, len(fresh))
		for _, t := range fresh {
			txns = append(txns, t.txn)
		}
		rt.createProducers(txns)
	}
	if len(fresh) > 0 {
		c.wg.Go(func() { c.add(fresh) })
	}
}
