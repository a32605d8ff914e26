package eddy_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
)

// A paused instance that resumes after its tasks moved must not get a single record
// committed. Instance A stalls inside a commit — its output, changelog and offsets
// records are in the open transaction, the commit itself not sent — while B joins; the
// group gives up on A after the rebalance timeout and B takes every task. Then A resumes
// and tries to commit: with workers (one producer per worker, KIP-447) the group
// generation its TxnOffsetCommit carries is stale, with a producer per task B's
// producers fenced A's; either way A's transaction must abort, and every word's output
// stays exactly 1, 2, ..., n.
//
// With a producer per task, B's producers abort A's transaction when B takes the tasks,
// and B processes A's stalled input again before A resumes. With workers, A's
// transaction (another transactional ID) stays open, and B must not restore the tasks
// whose changelog and offsets partitions it holds, nor process their input, until it
// ends (docs/architecture.md, "Reading to the end of a partition"): B holds them in their
// restore until A resumes, is refused and aborts; A must notice it was fenced.
func TestZombieCommitsNothing(t *testing.T) { forEachProducerModel(t, testZombie) }

func testZombie(t *testing.T, perTask bool) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) { testZombieOn(t, c, perTask) })
}

func testZombieOn(t *testing.T, c *kafkatest.Cluster, perTask bool) {
	e := newWordCount(t, c, 4)
	e.produce(t, 200)
	config := func() eddy.Config {
		cfg := e.config(t)
		cfg.ProducerPerTask = perTask
		cfg.Workers = 2
		// Longer than the whole stall: only the group generation (or the new owner's
		// producers) may end A's transaction, not the coordinator's timeout (which
		// would fence A's producer itself).
		cfg.TransactionTimeout = 2 * time.Minute
		cfg.Sarama = func(sc *sarama.Config) {
			sc.Consumer.Group.Rebalance.Timeout = 3 * time.Second
			sc.Consumer.Group.Session.Timeout = 6 * time.Second
			sc.Consumer.Group.Heartbeat.Interval = time.Second
		}
		return cfg
	}
	regA := prometheus.NewRegistry()
	cfgA := config()
	cfgA.Metrics = regA
	appA, err := eddy.New(e.topo, cfgA)
	if err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	stalled, resume := make(chan struct{}), make(chan struct{})
	var stallOnce sync.Once
	eddy.SetBeforeCommitHook(appA, func(processor.TaskID) error {
		if !armed.Load() {
			return nil
		}
		first := false
		stallOnce.Do(func() { first = true })
		if first {
			close(stalled)
			<-resume
		}
		return nil
	})
	ctxA, stopA := context.WithCancel(context.Background())
	doneA := make(chan error, 1)
	go func() { doneA <- appA.Run(ctxA) }()
	t.Cleanup(func() { stopA(); <-doneA })
	var resumeOnce sync.Once
	wake := func() { resumeOnce.Do(func() { close(resume) }) }
	t.Cleanup(wake) // a failed test wakes A before it stops it
	e.waitCounts(t, time.Minute, "A's counts")

	armed.Store(true)
	e.produce(t, 100)
	select {
	case <-stalled:
	case <-time.After(time.Minute):
		t.Fatal("A never committed the new input")
	}
	inB := start(t, e.topo, config())
	if perTask {
		// B cannot finish the counts while A's transaction is open (it holds the last
		// stable offset of the repartition and output partitions A wrote to), but it
		// reads the input again and commits its offsets: A's stalled input is B's now.
		end, err := c.EndOffsets(ctxT(t), e.input, sarama.ReadCommitted)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "B to commit the input A holds in its stalled transaction", func() (bool, error) {
			if err, done := inB.exited(); done {
				return false, fmt.Errorf("B stopped: %v", err)
			}
			committed, err := c.CommittedOffsets(ctxT(t), e.appID, e.input)
			if err != nil {
				return false, nil
			}
			for p, off := range end {
				if committed[p] < off {
					return false, nil
				}
			}
			return true, nil
		})
	} else {
		// B owns every task but holds those A's transaction wrote in their restore.
		waitFor(t, time.Minute, "B to own every task", func() (bool, error) {
			if err, done := inB.exited(); done {
				return false, fmt.Errorf("B stopped: %v", err)
			}
			return len(inB.app.Tasks()) == 8 && inB.app.State() == eddy.StateRestoring, nil
		})
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if s := inB.app.State(); s != eddy.StateRestoring {
				t.Fatalf("B is %s while A's transaction is open on its tasks' changelog and offsets partitions", s)
			}
		}
	}
	wake() // A wakes up and tries to commit
	if !perTask {
		// B's producers did not fence A's: the group generation must.
		waitFor(t, time.Minute, "A to be fenced", func() (bool, error) { return counterTotal(t, regA, "eddy_fenced_tasks_total") > 0, nil })
	}
	time.Sleep(3 * time.Second)
	e.produce(t, 50)
	waitFor(t, 2*time.Minute, "the counts after A resumed", func() (bool, error) {
		for w, s := range e.readOutput(t) {
			if n := s[len(s)-1]; n > e.want[w] {
				return false, fmt.Errorf("word %q counted %d times, want %d: the zombie's transaction committed", w, n, e.want[w])
			}
		}
		return e.complete(t), nil
	})
	if err := inB.stop(); err != nil {
		t.Fatalf("B: %v", err)
	}
	stopA()
	if err := <-doneA; err != nil {
		t.Logf("A: %v", err)
	}
	doneA <- nil
	e.checkExactlyOnce(t)
}

// counterTotal sums the counter name over all its label values in reg.
func counterTotal(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
