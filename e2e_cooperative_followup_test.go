package eddy_test

import (
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
)

// A cooperative move's follow-up rebalance is its old owner's to ask for; when the old
// owner is replaced by an instance with its InstanceID before it asks, the coordinator
// hands the replacement the member's last assignment without a rebalance and nobody
// asks (followup.go): the exactly-once harness (real Kafka, static IDs, seed
// 1796359265421138314) stalled 3 minutes so with three tasks running nowhere.
//
// Here a (InstanceID "a") runs the 4 tasks; b joins, the plan withholds the tasks that
// move, a releases them and stalls at the start of its follow-up join (a seam at the
// join), and a2 replaces a with its InstanceID. b, which learnt the withheld tasks with
// its assignment, joins again a session timeout later, and the plan hands them out:
// every task runs on b or a2, and every word is counted once. Mutant without b's watch
// (crew.watchFollowUp returns at once): the withheld tasks run nowhere, times out.
func TestCooperativeMoveWhoseOwnerIsReplaced(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		session := func(sc *sarama.Config) {
			sc.Consumer.Group.Session.Timeout = 6 * time.Second
			sc.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
		}
		config := func(instance string) eddy.Config {
			cfg := e.config(t)
			cfg.InstanceID = instance
			cfg.RebalanceProtocol = eddy.CooperativeRebalancing
			cfg.TransactionTimeout = 10 * time.Second // a's open transactions end soon after it stalls
			cfg.Sarama = session
			return cfg
		}
		logB := newLogCapture()
		cfgA, cfgB, cfgA2 := config("a"), config("b"), config("a")
		cfgA.Workers = 1
		cfgB.Logger = slog.New(logB)
		appA, err := eddy.New(e.topo, cfgA)
		if err != nil {
			t.Fatal(err)
		}
		var armed atomic.Bool
		var joins atomic.Int32
		stalled, resume := make(chan struct{}), make(chan struct{})
		var resumeOnce sync.Once
		wake := func() { resumeOnce.Do(func() { close(resume) }) }
		defer wake()
		eddy.SetBeforeJoinHook(appA, func() {
			// The first join after b starts is the one b causes; the second is a's
			// follow-up, once it released the tasks the plan withheld.
			if armed.Load() && joins.Add(1) == 2 {
				close(stalled)
				<-resume
			}
		})
		a := run(t, appA)
		waitFor(t, time.Minute, "a to own every task", func() (bool, error) { return len(a.app.Tasks()) == 4, nil })
		e.produce(t, 100)
		e.waitCountsWhileRunning(t, a, time.Minute, "the counts")

		stopLines := flowLines(e)
		defer stopLines()
		armed.Store(true)
		b := start(t, e.topo, cfgB)
		select {
		case <-stalled:
		case <-time.After(time.Minute):
			t.Fatal("a did not start a follow-up join after b joined")
		}
		a2 := start(t, e.topo, cfgA2)
		waitFor(t, time.Minute, "b and a2 to run every task, none twice", func() (bool, error) {
			tb, ta2 := b.app.Tasks(), a2.app.Tasks()
			return len(tb) > 0 && len(ta2) > 0 && len(tb)+len(ta2) == 4, nil
		})
		time.Sleep(time.Second)
		if err := stopLines(); err != nil {
			t.Fatal(err)
		}
		e.waitCountsWhileRunning(t, b, time.Minute, "the counts")
		watched := logB.grep("tasks withheld for a move are still unassigned")
		if len(watched) == 0 {
			t.Errorf("the withheld tasks were handed out without b's follow-up join: the scenario did not stall")
		}
		wake()
		var errA error
		waitFor(t, time.Minute, "a, replaced by a2, to stop once resumed", func() (bool, error) {
			err, done := a.exited()
			errA = err
			return done, nil
		})
		if errA == nil || !strings.Contains(errA.Error(), `InstanceID "a"`) {
			t.Errorf("a, replaced by a2, stopped with %v; want the error naming its InstanceID", errA)
		}
		if err := b.stop(); err != nil {
			t.Fatalf("stopping b: %v", err)
		}
		if err := a2.stop(); err != nil {
			t.Fatalf("stopping a2: %v", err)
		}
		e.checkExactlyOnce(t)
		t.Logf("b joined again for the withheld tasks: %q; %d lines", watched, e.linesWritten)
	})
}
