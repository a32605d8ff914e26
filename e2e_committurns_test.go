package eddy_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/topology"
)

// turnRecords is a task's turn in the worker (worker.turnRecords).
const turnRecords = 512

// recordFloor is the least time a record of TestWorkerCommitsOnTimeWithManyTasks takes
// to process (it waits for the clock to pass it: load only makes it longer). So between two commits, which are
// due one commit interval after the last ended, a worker processes at most
// interval/recordFloor + 1 records, however loaded the machine: the test bounds records
// per commit, not time.
const recordFloor = 200 * time.Microsecond

// turnsRun is what one run of the turns scenario saw: the partition (task) of every
// record in the order the worker processed them, and the commits.
type turnsRun struct {
	order   []int32
	commits int
	// spans are the worker's commits, each from its first before-commit hook to its last
	// after-commit hook (a commit carrying the first task's work includes its
	// commitDelay); lastRecord is when the last record was processed.
	spans      []commitSpan
	lastRecord time.Time
	times      []time.Time // when each record of order was processed
}

// commitSpan is one commit: its hooks' times, and the time of the last record processed
// before it (the commit, prepare included, began after that).
type commitSpan struct{ lastRecord, begin, end time.Time }

// runTurns writes backlog[p] records to partition p of a new topic, then runs one
// instance with one worker (every task in it) over it, committing every interval, its
// processor taking at least floor per record and each commit of the first task's work at
// least commitDelay, until everything is processed and committed.
func runTurns(t *testing.T, c *kafkatest.Cluster, backlog []int, interval, floor, commitDelay time.Duration) turnsRun {
	t.Helper()
	ctx := ctxT(t)
	in := c.Unique("turns-in")
	if err := c.CreateTopic(ctx, in, int32(len(backlog)), nil); err != nil {
		t.Fatal(err)
	}
	total := 0
	for p, n := range backlog {
		msgs := make([]*sarama.ProducerMessage, n)
		for i := range msgs {
			msgs[i] = &sarama.ProducerMessage{Key: sarama.StringEncoder(fmt.Sprint(i)), Value: sarama.StringEncoder("v")}
		}
		if err := c.ProduceToPartition(ctx, in, int32(p), msgs...); err != nil {
			t.Fatal(err)
		}
		total += n
	}

	var mu sync.Mutex
	var run turnsRun
	b := topology.NewBuilder()
	topology.AddSource(b, "src", serde.String(), serde.String(), in)
	topology.AddProcessor(b, "slow", func() processor.Processor[string, string, string, string] {
		return &slowRecorder{floor: floor, record: func(p int32) {
			mu.Lock()
			run.order = append(run.order, p)
			run.lastRecord = time.Now()
			run.times = append(run.times, run.lastRecord)
			mu.Unlock()
		}}
	}, "src")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	appID := c.Unique("turns")
	app, err := eddy.New(topo, eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t),
		Workers: 1, CommitInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	first := processor.TaskID{Partition: 0}
	// The hooks are called for each task the commit carries, the before-hooks all before
	// the commit and the after-hooks all after it (one worker: commits do not overlap).
	// A commit is counted once whichever tasks it carries: the worker's tasks join it one
	// by one as they are readied, so counting the first task's commits only missed those
	// made before it ran (and TestWorkerCommitsOnTimeWithManyTasks saw 4-10 commits for
	// 2,400 records on real Kafka).
	eddy.SetBeforeCommitHook(app, func(task processor.TaskID) error {
		mu.Lock()
		if len(run.spans) == 0 || !run.spans[len(run.spans)-1].end.IsZero() {
			run.spans = append(run.spans, commitSpan{lastRecord: run.lastRecord, begin: time.Now()})
		}
		mu.Unlock()
		if task == first {
			time.Sleep(commitDelay)
		}
		return nil
	})
	eddy.SetAfterCommitHook(app, func(task processor.TaskID) error {
		mu.Lock()
		if last := &run.spans[len(run.spans)-1]; last.end.IsZero() {
			run.commits++
			last.end = time.Now()
		}
		mu.Unlock()
		return nil
	})
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitFor(t, 3*time.Minute, "every record processed", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(run.order) >= total, nil
	})
	if err := c.WaitProcessed(ctx, appID, in); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return turnsRun{order: append([]int32(nil), run.order...), commits: run.commits,
		spans: append([]commitSpan(nil), run.spans...), lastRecord: run.lastRecord, times: append([]time.Time(nil), run.times...)}
}

// slowRecorder takes at least floor per record and reports its task's partition. It
// spins rather than sleeps: a sleep of microseconds takes a millisecond or more on a
// loaded machine, and the tests' runs would take minutes.
type slowRecorder struct {
	ctx    processor.Context[string, string]
	floor  time.Duration
	record func(partition int32)
}

func (s *slowRecorder) Init(ctx processor.Context[string, string]) error { s.ctx = ctx; return nil }
func (s *slowRecorder) Close() error                                     { return nil }
func (s *slowRecorder) Process(processor.Record[string, string]) error {
	for start := time.Now(); time.Since(start) < s.floor; {
	}
	s.record(s.ctx.TaskID().Partition)
	return nil
}

// A worker with many tasks and a backlog commits every commit interval, not once per
// round of its tasks' turns. It used to check the interval only after a whole round
// (up to 512 records of every task): here 16 tasks with 150 records each, all on the
// broker before the start, made one or a few rounds and so a few commits for 2,400
// records. A commit is due once the worker has processed for the commit interval, or
// for as long as its last commit took if that was longer (worker.commitGap), since the
// last commit ended; each record takes at least recordFloor, so a gap holds at most
// gap/recordFloor + 1 records. The test sums that bound over the gaps it saw, each from
// the commit before it, timed from the last record before the commit to its
// after-commit hook (at least the whole commit, prepare included), and allows twice the
// sum. A loaded machine makes records slower (fewer per gap) and commits longer (longer
// gaps, allowed for): the test failed CI once when its bound took every gap to be the
// interval (10 commits for 2,400 records on real Kafka at load 12-17).
func TestWorkerCommitsOnTimeWithManyTasks(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		const tasks, each, interval = 16, 150, 10 * time.Millisecond
		backlog := make([]int, tasks)
		for i := range backlog {
			backlog[i] = each
		}
		run := runTurns(t, c, backlog, interval, recordFloor, 0)
		allowed := recordsPerGapBound(run.spans, interval, recordFloor)
		t.Logf("%d records, %d commits (at most %d records allowed: twice the sum over the gaps of max(interval, the last commit)/%v + 1)", len(run.order), run.commits, 2*allowed, recordFloor)
		if len(run.order) > 2*allowed {
			for i, sp := range run.spans {
				n := 0
				for _, at := range run.times {
					if at.Before(sp.begin) && (i == 0 || at.After(run.spans[i-1].end)) {
						n++
					}
				}
				t.Logf("commit %d: %d records before it, took %v (%v in its hooks)", i, n, sp.end.Sub(sp.lastRecord), sp.end.Sub(sp.begin))
			}
			t.Fatalf("%d records in %d commits; want at most %d: with every record taking at least %v and a commit due %v (or as long as the last commit took) after the last, the gaps hold at most %d records",
				len(run.order), run.commits, 2*allowed, recordFloor, interval, allowed)
		}
	})
}

// recordsPerGapBound sums, over the gaps before, between and after the commits of spans,
// the most records a worker processes in a gap when each takes at least floor: the gap
// lasts the interval, or as long as the commit before it if that is longer.
func recordsPerGapBound(spans []commitSpan, interval, floor time.Duration) int {
	bound := func(took time.Duration) int { return int(max(interval, took)/floor) + 1 }
	var took time.Duration // no commit before the first gap
	sum := 0
	for _, s := range spans {
		sum += bound(took)
		if !s.end.IsZero() {
			took = s.end.Sub(s.begin)
			if !s.lastRecord.IsZero() {
				took = s.end.Sub(s.lastRecord)
			}
		}
	}
	return sum + bound(took)
}

// The worker rotates its tasks' turns across commits: a commit that cuts a turn short
// does not send the worker back to its first task, so a task with records waits at most
// one round of the others' turns (up to turnRecords records each) however often the
// worker commits. Four tasks have 2,000 records each, a record takes at least 20 µs and a
// commit is due every 5 ms of processing: every turn of 512 records (≥ 10 ms) is cut by
// a commit, however fast or loaded the machine.
// Starting each round at the first task again would run the first task's records until
// it ran out (its turn restarting after every commit), and the last task would wait for
// the other three's 6,000 (4,000 if one of them got its records late). The bound allows
// a task to miss one turn (its records fetched after its turn came): two rounds, 3,072
// records of the other tasks.
func TestWorkerRotatesTurnsAcrossCommits(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		backlog := []int{2000, 2000, 2000, 2000}
		run := runTurns(t, c, backlog, 5*time.Millisecond, 20*time.Microsecond, 0)
		limit := 2 * (len(backlog) - 1) * turnRecords
		for task := range backlog {
			waited, worst, seen := 0, 0, 0
			for _, p := range run.order {
				if int(p) != task {
					waited++
					continue
				}
				worst, waited = max(worst, waited), 0
				seen++
				if seen == backlog[task] {
					break // its last record: it waits for nothing after it
				}
			}
			t.Logf("task %d: at most %d records of other tasks before one of its own", task, worst)
			if worst > limit {
				t.Errorf("task %d waited for %d records of other tasks before one of its own; want at most %d (two rounds of the others' turns of %d records)",
					task, worst, limit, turnRecords)
			}
		}
		t.Logf("%d commits", run.commits)
	})
}

// A worker whose commits take longer than its commit interval processes at least as long
// as its last commit took before it commits again (worker.commitGap): it never spends
// more than about half its time committing. One task with a backlog of 20,000 records
// (at least 20 µs each), a 1 ms interval and commits held 20 ms each: every gap between
// the end of one commit (its after-commit hook) and the start of the next (the next
// before-commit hook) must be at least that commit's span between the two hooks, which
// lies inside the commit the worker timed. Load only lengthens the gaps (processing),
// so it cannot fail the test. Committing whenever the interval is due, the gaps were
// about 1 ms.
func TestWorkerProcessesAsLongAsItsLastCommitTook(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		run := runTurns(t, c, []int{20000}, time.Millisecond, 20*time.Microsecond, 20*time.Millisecond)
		checked := 0
		for k := 0; k+1 < len(run.spans); k++ {
			cur, next := run.spans[k], run.spans[k+1]
			if cur.end.IsZero() || !next.begin.Before(run.lastRecord) {
				continue // a commit that failed, or the one after the backlog ran out
			}
			checked++
			if gap, took := next.begin.Sub(cur.end), cur.end.Sub(cur.begin); gap < took {
				t.Errorf("commit %d took %v and the next began %v after it; want at least as long as it took", k, took, gap)
			}
		}
		t.Logf("%d commits, %d gaps checked", len(run.spans), checked)
		if checked < 3 {
			t.Fatalf("only %d gaps between commits with a backlog; want at least 3", checked)
		}
	})
}

// A wall-clock punctuator fires while its worker has a backlog, as Kafka Streams' stream
// thread punctuates after every round of processing: one task with 20,000 records of at
// least 100 µs each (2 s of processing at the least, however fast the machine) and a
// punctuator every 50 ms. The worker checks the wall clock every 100 ms (its tick), so
// about 20 punctuations fall between the first record and the last; the test wants 3.
// Before, the worker punctuated only when it had nothing to process: none fired until
// the backlog ran out.
func TestWallClockPunctuatorFiresUnderABacklog(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		const records, floor, every = 20000, 100 * time.Microsecond, 50 * time.Millisecond
		ctx := ctxT(t)
		in := c.Unique("wall-in")
		if err := c.CreateTopic(ctx, in, 1, nil); err != nil {
			t.Fatal(err)
		}
		msgs := make([]*sarama.ProducerMessage, records)
		for i := range msgs {
			msgs[i] = &sarama.ProducerMessage{Key: sarama.StringEncoder(fmt.Sprint(i)), Value: sarama.StringEncoder("v")}
		}
		if err := c.ProduceToPartition(ctx, in, 0, msgs...); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var processed int
		var first, last time.Time
		var fired []time.Time
		b := topology.NewBuilder()
		topology.AddSource(b, "src", serde.String(), serde.String(), in)
		topology.AddProcessor(b, "slow", func() processor.Processor[string, string, string, string] {
			return &punctuatedRecorder{slowRecorder: slowRecorder{floor: floor, record: func(int32) {
				mu.Lock()
				defer mu.Unlock()
				now := time.Now()
				if processed == 0 {
					first = now
				}
				processed++
				last = now
			}}, every: every, fired: func(now time.Time) {
				mu.Lock()
				defer mu.Unlock()
				fired = append(fired, time.Now())
			}}
		}, "src")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		appID := c.Unique("wall")
		app, err := eddy.New(topo, eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t), Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.Run(runCtx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		waitFor(t, 3*time.Minute, "every record processed", func() (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return processed >= records, nil
		})
		mu.Lock()
		defer mu.Unlock()
		during := 0
		for _, at := range fired {
			if at.After(first) && at.Before(last) {
				during++
			}
		}
		t.Logf("%d records in %v; %d punctuations in all, %d of them between the first record and the last", processed, last.Sub(first).Round(time.Millisecond), len(fired), during)
		if during < 3 {
			t.Fatalf("%d wall-clock punctuations (every %v) while %d records took %v to process; want at least 3", during, every, processed, last.Sub(first).Round(time.Millisecond))
		}
	})
}

// punctuatedRecorder is a slowRecorder with a wall-clock punctuator.
type punctuatedRecorder struct {
	slowRecorder
	every time.Duration
	fired func(now time.Time)
}

func (p *punctuatedRecorder) Init(ctx processor.Context[string, string]) error {
	if err := p.slowRecorder.Init(ctx); err != nil {
		return err
	}
	_, err := ctx.Schedule(p.every, processor.WallClockTime, func(now time.Time) error {
		p.fired(now)
		return nil
	})
	return err
}
