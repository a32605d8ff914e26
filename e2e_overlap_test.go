package eddy_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
)

// Overlapped commits (Config.OverlapCommits): a worker processes on while its commit's
// transaction commits, holding the next transaction's output and state changes. The
// word count's output must stay exact — every word's counts 1..n, once each — with
// every commit going through, and when commits fail in each of the ways a commit can:
// refused (abortable: both transactions roll back), failed before it was sent with an
// unknown outcome (the settle finds it did not commit: both roll back), and lost after
// it committed (the settle finds it committed: only the one after it rolls back, from
// the seal). Each case also checks that the workers did run ahead
// (eddy_commit_overlap_records_total), so that the faults hit overlapped commits.
func TestOverlappedCommits(t *testing.T) {
	cases := []struct {
		name   string
		inject func(app *eddy.App, fail func() error)
	}{
		{"clean", nil},
		{"refused", func(app *eddy.App, fail func() error) {
			eddy.SetBeforeCommitHook(app, func(processor.TaskID) error { return fail() })
		}},
		{"unknown-not-committed", func(app *eddy.App, fail func() error) {
			eddy.SetBeforeCommitUnknownHook(app, func(processor.TaskID) error { return fail() })
		}},
		{"unknown-committed", func(app *eddy.App, fail func() error) {
			eddy.SetAfterCommitHook(app, func(processor.TaskID) error { return fail() })
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			forEachProducerModel(t, func(t *testing.T, perTask bool) {
				kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
					testOverlappedCommits(t, c, perTask, tc.inject)
				})
			})
		})
	}
}

func testOverlappedCommits(t *testing.T, c *kafkatest.Cluster, perTask bool, inject func(*eddy.App, func() error)) {
	e := newWordCount(t, c, 4)
	e.perTask = perTask
	reg := prometheus.NewRegistry()
	cfg := e.config(t)
	cfg.OverlapCommits = true
	cfg.CommitInterval = 20 * time.Millisecond // many commits, each overlapping input
	cfg.Workers = 2
	cfg.Metrics = reg
	app, err := eddy.New(e.topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Every 7th commit fails (a task's worth of a commit counts once), 5 in all.
	var commits, injected atomic.Int32
	if inject != nil {
		inject(app, func() error {
			if n := commits.Add(1); n%7 != 0 || injected.Load() >= 5 {
				return nil
			}
			injected.Add(1)
			return errors.New("injected")
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	var stopped bool
	var runErr error
	stop := func() error {
		if !stopped {
			cancel()
			runErr, stopped = <-done, true
		}
		return runErr
	}
	defer stop()
	for range 20 {
		e.produce(t, 50)
		time.Sleep(20 * time.Millisecond)
	}
	e.waitCounts(t, time.Minute, "the counts")
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	e.checkExactlyOnce(t)
	if inject != nil && injected.Load() == 0 {
		t.Fatal("no commit failed: the test injected nothing")
	}
	ran := counterTotal(t, reg, "eddy_commit_overlap_records_total")
	if ran == 0 {
		t.Fatal("no record was processed while a commit was under way: the commits did not overlap")
	}
	t.Logf("records processed while a commit was under way: %.0f; commits failed: %d", ran, injected.Load())
}
