package eddy_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
)

// TestDeletedChangelogStopsTheAppAfterTaskTimeout: a changelog deleted under a running
// application makes every task that moves restore from a topic that is not there (an
// instance creates the missing internal topics only when it starts). That failure can
// pass (a topic being created), so it is retried, but not for ever, as it used to be (a
// warning every 5 s): after Config.TaskTimeout the application stops with an error
// naming the task, the topic and the setting.
//
// The two clusters run in parallel: the test waits on the runtime's retries, not on
// the machine (about 50 s per cluster, one after the other: the leader's plan reads
// the deleted changelog's end offsets for up to 2 x 4.5 s, and one attempt to prepare
// the task takes about 20 s, as kread.ListOffsetAt retries the missing partition 10
// times, each with a metadata refresh that sarama retries too; the app stops after the
// second attempt, 22 s after the first failure).
func TestDeletedChangelogStopsTheAppAfterTaskTimeout(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		t.Parallel()
		e := newWordCount(t, c, 2)
		e.produce(t, 20)
		cfg := e.config(t)
		cfg.TaskTimeout = 3 * time.Second
		logsA := newLogCapture()
		cfg.Logger = slog.New(logsA)
		a := start(t, e.topo, cfg)
		e.waitCountsWhileRunning(t, a, time.Minute, "the counts")
		// A second instance takes half the tasks.
		logsB := newLogCapture()
		cfgB := e.config(t)
		cfgB.Logger = slog.New(logsB)
		b := start(t, e.topo, cfgB)
		waitFor(t, time.Minute, "the second instance to get a task with the store", func() (bool, error) {
			if err, done := b.exited(); done {
				return false, fmt.Errorf("the second instance stopped: %v", err)
			}
			return len(logsB.grep("task running", "task=1_")) > 0, nil
		})
		changelog := e.appID + "-" + wordcount.StoreName + "-changelog"
		admin, err := sarama.NewClusterAdmin(c.Addrs(), kafkatest.NewSaramaConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		if err := admin.DeleteTopic(changelog); err != nil {
			t.Fatal(err)
		}
		// It leaves: its tasks go back to the first, which restores them from the
		// deleted changelog.
		if err := b.stop(); err != nil {
			t.Fatalf("stopping the second instance: %v", err)
		}
		began := time.Now()
		var runErr error
		// Generous: giving up takes about 50 s here (see above), 60 s under load.
		waitFor(t, 4*time.Minute, "the first instance to give up", func() (bool, error) {
			err, done := a.exited()
			runErr = err
			return done, nil
		})
		took := time.Since(began)
		t.Logf("stopped after %v: %v", took.Round(100*time.Millisecond), runErr)
		if runErr == nil {
			t.Fatal("the instance stopped without an error")
		}
		for _, want := range []string{"task 1_", changelog, "Config.TaskTimeout"} {
			if !strings.Contains(runErr.Error(), want) {
				t.Errorf("the error does not name %q: %v", want, runErr)
			}
		}
		// The first instance led the rebalance after the second left: its plan could not
		// read the deleted changelog's end, and says so at Warn, naming the tasks.
		if lines := logsA.grep("WARN", "reading changelog end offsets for the assignment failed", "1_", changelog); len(lines) == 0 {
			t.Error("the leader did not warn that it could not read the deleted changelog's end for its plan")
		} else {
			t.Logf("leader: %s", lines[0])
		}
		if took < cfg.TaskTimeout {
			t.Errorf("gave up after %v, before TaskTimeout %v", took, cfg.TaskTimeout)
		}
	})
}
