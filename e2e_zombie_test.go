package eddy_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
)

// A paused instance that resumes after its tasks moved must not get a single record
// committed. Instance A stalls inside a commit — its output, changelog and offsets
// records are in the open transaction, the commit itself not sent — while B joins; the
// group gives up on A after the rebalance timeout and B takes every task, restores and
// processes the same input again. Then A resumes and tries to commit: with workers
// (one producer per worker, KIP-447) the group generation its TxnOffsetCommit carries is
// stale, with a producer per task B's producers fenced A's; either way A's transaction
// must abort, and every word's output stays exactly 1, 2, ..., n.
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
	appA, err := eddy.New(e.topo, config())
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
	e.waitCounts(t, time.Minute, "A's counts")

	armed.Store(true)
	e.produce(t, 100)
	select {
	case <-stalled:
	case <-time.After(time.Minute):
		t.Fatal("A never committed the new input")
	}
	inB := start(t, e.topo, config())
	// B cannot finish the counts while A's transaction is open (it holds the last stable
	// offset of the repartition and output partitions A wrote to), but it reads the
	// input again and commits its offsets: A's stalled input is B's now.
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
	close(resume) // A wakes up and tries to commit
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
