package eddy_test

import (
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/kafkatest"
)

// An instance stopped while it readies the tasks it took over stops cleanly: Run
// returns nil, promptly. C takes B's tasks while another producer's transaction is open
// on the counting task's changelog, so that task's restore holds (it must read past the
// open transaction); C is stopped then, its readying cancelled. A stop at that moment is
// what a deployment does to an instance that has just started, and what the
// exactly-once harness does at its end to an instance restarted shortly before.
func TestStopWhileReadyingATakenOverTask(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 1)
		cl := names.ChangelogTopic(e.appID, wordcount.StoreName)
		if err := c.CreateTopic(ctxT(t), cl, 1, map[string]string{"cleanup.policy": "compact"}); err != nil {
			t.Fatal(err)
		}
		e.produce(t, 300)
		inB := start(t, e.topo, e.config(t))
		e.waitCountsWhileRunning(t, inB, time.Minute, "B's counts")
		prev := openTxn(t, c, cl, 0, []byte("zombie"), make([]byte, 8), time.Minute)
		defer func() { _ = prev.Abort(ctxT(t)) }()
		e.produce(t, 30)
		e.waitCountsWhileRunning(t, inB, time.Minute, "B's counts behind the open transaction")

		inC := start(t, e.topo, e.config(t))
		if err := inB.stop(); err != nil {
			t.Fatalf("stopping B: %v", err)
		}
		waitFor(t, time.Minute, "C to restore", func() (bool, error) {
			if err, done := inC.exited(); done {
				return false, err
			}
			return len(inC.app.Tasks()) == 2 && inC.app.State() == eddy.StateRestoring, nil
		})
		time.Sleep(500 * time.Millisecond) // well inside the held restore
		began := time.Now()
		err := inC.stop()
		took := time.Since(began)
		t.Logf("C stopped in %v while restoring: %v", took.Round(time.Millisecond), err)
		if err != nil {
			t.Fatalf("stopping C while it readied its tasks: Run returned %v; want nil", err)
		}
		// Well under a second here; a restore that did not heed the stop held it 24 s
		// (its wait for the open transaction given a context of its own: mutant).
		if took > 10*time.Second {
			t.Fatalf("stopping C while it readied its tasks took %v", took)
		}
	})
}
