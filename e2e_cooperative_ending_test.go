package eddy_test

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
)

// A cooperative session asked to end while a join is under way must not commit with
// the generations sarama still takes for it. The fresh-clone CI run of 533aaa4 (real
// Kafka, cooperative, static IDs, TestShortMode seed 1796353265152862519) committed
// input/0 at 3256 after 3405 and counted 5,135 records twice; a harness run of the
// same seed here showed how: a worker of one member dropped its transaction while a
// join was under way (a commit let through the gate was refused with
// ILLEGAL_GENERATION), so the runtime asked the session to end; every claim returned,
// among them those the join then revoked, which released nothing; sarama still
// completed that join and, those claims done, at once the follow-up join, whose plan
// gave the revoked tasks to another member while they were still in this member's
// workers (a standby of one could not open its file: the active task held it), and
// the workers committed them at suspend with the follow-up's generation.
//
// Here a's session is asked to end at the start of the join that b's arrival causes, as
// a worker dropping its transaction there would: the assignment a takes in that join
// does not become the generation its commits carry, so its next commit is refused and
// its worker drops the transaction; b gets its share and every word is counted once.
// Mutant: commits carry the newest generation (crew.commitGen advanced while ending) —
// a's commit is accepted, no worker is fenced.
func TestCooperativeSessionEndingDuringAJoin(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newWordCount(t, c, 2)
		logA := newLogCapture()
		cfgA, cfgB := e.config(t), e.config(t)
		cfgA.Logger = slog.New(logA)
		cfgA.Workers = 2
		cfgA.RebalanceProtocol, cfgB.RebalanceProtocol = eddy.CooperativeRebalancing, eddy.CooperativeRebalancing
		appA, err := eddy.New(e.topo, cfgA)
		if err != nil {
			t.Fatal(err)
		}
		var armed, ended atomic.Bool
		eddy.SetBeforeJoinHook(appA, func() {
			if armed.CompareAndSwap(true, false) {
				ended.Store(eddy.EndCooperativeSession(appA))
			}
		})
		a := run(t, appA)
		waitFor(t, time.Minute, "a to own every task", func() (bool, error) { return len(a.app.Tasks()) == 4, nil })
		e.produce(t, 100)
		e.waitCountsWhileRunning(t, a, time.Minute, "the counts")

		stopLines := flowLines(e)
		defer stopLines()
		time.Sleep(500 * time.Millisecond) // a's workers have open transactions
		armed.Store(true)
		b := start(t, e.topo, cfgB)
		waitFor(t, time.Minute, "both instances to own tasks, none twice", func() (bool, error) {
			ta, tb := a.app.Tasks(), b.app.Tasks()
			return len(ta) > 0 && len(tb) > 0 && len(ta)+len(tb) == 4, nil
		})
		if !ended.Load() {
			t.Fatal("a's session was not live at the start of the join b caused")
		}
		time.Sleep(time.Second)
		if err := stopLines(); err != nil {
			t.Fatal(err)
		}
		e.waitCountsWhileRunning(t, a, time.Minute, "the counts")

		taken := logA.grep("an assignment arrived while the group session ends")
		if len(taken) == 0 {
			t.Fatalf("a took no assignment while its session ended; the join b caused completed before the end was asked for?")
		}
		fenced := logA.grep("fenced")
		if len(fenced) == 0 {
			t.Errorf("no worker of a was fenced after it took an assignment while its session ended (%q): it committed with that assignment's generation", taken)
		}
		for _, l := range fenced {
			if !strings.Contains(l, "generation") {
				t.Errorf("a's worker was fenced for another reason than its generation: %q", l)
			}
		}
		if err := b.stop(); err != nil {
			t.Fatalf("stopping b: %v", err)
		}
		if err := a.stop(); err != nil {
			t.Fatalf("stopping a: %v", err)
		}
		e.checkExactlyOnce(t)
		t.Logf("a: %d assignments taken while ending, %d fenced: %q; %d lines", len(taken), len(fenced), fenced, e.linesWritten)
	})
}
