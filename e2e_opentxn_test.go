package eddy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/internal/producer"
	"github.com/eddy-streams/eddy/kafkatest"
)

// Readers of a changelog or offsets partition behind another producer's open
// transaction (issue 22; docs/architecture.md, "Reading to the end of a partition").
// With a producer per worker, the next owner of a task does not abort its previous
// owner's open transaction (another transactional ID): a previous owner that stalled or
// died in a commit holds the partition's last stable offset at its first record until
// the transaction ends, while records committed behind it lie above that offset.

// openTxn begins a transaction of a producer of its own (a previous owner stalled in a
// commit), writes one record to partition of topic in it and leaves it open; the broker
// aborts it after timeout, the test may end it earlier.
func openTxn(t *testing.T, c *kafkatest.Cluster, topic string, partition int32, key, value []byte, timeout time.Duration) *producer.Producer {
	t.Helper()
	ctx := ctxT(t)
	p, err := producer.New(ctx, producer.Config{Brokers: c.Addrs(), Sarama: kafkatest.NewSaramaConfig(), TransactionalID: c.Unique("previous-owner"), TransactionTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if err := p.Send(ctx, topic, partition, key, value, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

// behindOpenTxn fails the test unless records lie above partition 0's last stable
// offset of topic (a transaction is open with commits behind it), and returns both
// offsets.
func behindOpenTxn(t *testing.T, c *kafkatest.Cluster, topic string) (lso, hwm int64) {
	t.Helper()
	l, err := c.EndOffsets(ctxT(t), topic, sarama.ReadCommitted)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.EndOffsets(ctxT(t), topic, sarama.ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	if l[0]+2 >= h[0] {
		t.Fatalf("scene: %s/0 last stable offset %d, high-water mark %d: want commits behind an open transaction", topic, l[0], h[0])
	}
	return l[0], h[0]
}

// A task that moves twice while a previous owner's transaction is open on its
// changelog: B commits behind it, then C must restore B's commits, not stop at the
// open transaction's first record (it reads the input from B's committed offsets, so
// B's updates would be lost: counts start over).
func TestRestoreWaitsForAnotherProducersOpenTxn(t *testing.T) {
	// No transaction open: the wait costs nothing.
	t.Run("control", func(t *testing.T) {
		kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) { testRestoreBehindOpenTxn(t, c, noOpenTxn) })
	})
	// The previous owner A stalled in a commit before B took the task (the order of
	// issue 22): B waits until the broker aborts A's transaction past its timeout, then
	// restores and commits; C then finds no transaction open.
	t.Run("open-before-B", func(t *testing.T) {
		kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) { testRestoreBehindOpenTxn(t, c, openBeforeB) })
	})
	// A transaction opened while B runs (a zombie's), and B commits behind it: C must
	// hold the task in its restore until the transaction ends (the test aborts it two
	// seconds after C owns the task), then restore B's commits.
	t.Run("open-while-B-runs", func(t *testing.T) {
		kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) { testRestoreBehindOpenTxn(t, c, openWhileBRuns) })
	})
}

type openTxnScene int

const (
	noOpenTxn openTxnScene = iota
	openBeforeB
	openWhileBRuns
)

func testRestoreBehindOpenTxn(t *testing.T, c *kafkatest.Cluster, scene openTxnScene) {
	e := newWordCount(t, c, 1)
	cl := names.ChangelogTopic(e.appID, wordcount.StoreName)
	if err := c.CreateTopic(ctxT(t), cl, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	zombie := []byte("zombie")
	var prev *producer.Producer
	if scene == openBeforeB {
		// The broker ends it: 8 s, longer than B's start and first commits, so that a B
		// that did not wait would commit behind it.
		prev = openTxn(t, c, cl, 0, zombie, make([]byte, 8), 8*time.Second)
	}
	e.produce(t, 300)
	inB := start(t, e.topo, e.config(t))
	e.waitCountsWhileRunning(t, inB, time.Minute, "B's counts")
	if scene == openWhileBRuns {
		prev = openTxn(t, c, cl, 0, zombie, make([]byte, 8), time.Minute)
		e.produce(t, 30)
		e.waitCountsWhileRunning(t, inB, time.Minute, "B's counts behind the open transaction")
		behindOpenTxn(t, c, cl)
	}

	// The task moves to C (a fresh state dir).
	inC := start(t, e.topo, e.config(t))
	if err := inB.stop(); err != nil {
		t.Fatalf("stopping B: %v", err)
	}
	waitFor(t, time.Minute, "C to own every task", func() (bool, error) { return len(inC.app.Tasks()) == 2, nil })
	if scene == openWhileBRuns {
		// C holds the task in its restore while the transaction is open.
		waitFor(t, time.Minute, "C to restore", func() (bool, error) { return inC.app.State() == eddy.StateRestoring, nil })
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if s := inC.app.State(); s != eddy.StateRestoring {
				t.Fatalf("C is %s while a transaction is open in front of B's commits on %s/0: it took the last stable offset for the end of the changelog", s, cl)
			}
		}
		if err := prev.Abort(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	e.produce(t, 20)
	waitFor(t, time.Minute, "C to process the new input", func() (bool, error) {
		if err, done := inC.exited(); done {
			return false, fmt.Errorf("C stopped: %v", err)
		}
		return c.WaitProcessed(ctxT(t), e.appID, e.input, names.RepartitionTopic(e.appID, "words")) == nil, nil
	})
	if err := inC.stop(); err != nil {
		t.Fatalf("stopping C: %v", err)
	}
	e.checkExactlyOnce(t)
}
