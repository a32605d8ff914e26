package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/examples/wordcount/wordcount"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
)

// TestResetOnOneHostOnly: the reset plan says to delete the local state on every host,
// and one is easily missed. Host B runs the word count; the operator resets the
// application (to a time after each partition's first two lines) with --state-dir on
// host A only; A runs and rebuilds the changelog, with more input than before, past
// B's old checkpoints; then B starts on its pre-reset state dir. Its counts store's
// checkpoints fit inside the new changelog, but they count offsets of the deleted one:
// B must restore the store from the start of the new changelog. It used to restore
// only the new tail on top of its pre-reset store ("from=3 to=8 ... wiped=false"), and
// counted words from their pre-reset counts.
func TestResetOnOneHostOnly(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		e := newResetEnv(t, c)
		dirA, dirB := t.TempDir(), t.TempDir()
		var mu sync.Mutex
		var restores []string
		run := func(host, dir string, until func() bool) {
			t.Helper()
			topo, err := wordcount.TopologyFor(e.input, e.output, wordcount.NoCaching()) // every count: the tests check 1..n
			if err != nil {
				t.Fatal(err)
			}
			cfg := eddy.Config{ApplicationID: e.app, Brokers: c.Addrs(), StateDir: dir, Logger: testLogger(t),
				OnRestore: func(task processor.TaskID, r changelog.Result) {
					mu.Lock()
					defer mu.Unlock()
					if r.Store == wordcount.StoreName {
						restores = append(restores, fmt.Sprintf("%s %s from=%d to=%d records=%d wiped=%v", host, task, r.From, r.To, r.Records, r.Wiped))
					}
				}}
			app, err := eddy.New(topo, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			in := &instance{cancel: cancel, done: make(chan error, 1)}
			go func() { in.done <- app.Run(ctx) }()
			defer in.stop(t)
			deadline := time.Now().Add(2 * time.Minute)
			for !until() {
				select {
				case err := <-in.done:
					in.done = nil
					t.Fatalf("host %s: the application stopped: %v", host, err)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("host %s: output not there after 2m: %v", host, e.outputs())
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		last := func(word string) (int64, int) {
			seq := e.outputs()[word]
			if len(seq) == 0 {
				return 0, 0
			}
			return seq[len(seq)-1], len(seq)
		}
		ctx := testCtx(t)
		produce := func(p int32, lines ...string) {
			t.Helper()
			for _, line := range lines {
				if err := c.ProduceToPartition(ctx, e.input, p, &sarama.ProducerMessage{Value: sarama.StringEncoder(line)}); err != nil {
					t.Fatal(err)
				}
			}
		}

		// Host B counts every line: a 2, b 2, c 2, d 2, e 3, f 1.
		run("B", dirB, func() bool { n, _ := last("e"); return n == 3 })
		// Reset to t1 (lines 2.. of each partition: c d, d e / f), deleting host A's
		// local state only.
		if out, err := e.reset("--to-datetime", e.t1.Format(time.RFC3339), "--state-dir", dirA); err != nil {
			t.Fatalf("reset: %v\n%s", err, out)
		}
		// Host A rebuilds the changelog from the lines since t1 and 40 new words, so
		// that each changelog partition passes B's old checkpoint.
		for i := range 20 {
			produce(int32(i%2), fmt.Sprintf("x%d y%d", i, i))
		}
		run("A", dirA, func() bool { n, _ := last("y19"); return n == 1 })
		// Host B again, then a line with a and b, which the reset left out of every count:
		// each must count 1, not its pre-reset count plus 1.
		_, seen := last("a")
		mu.Lock()
		before := len(restores)
		mu.Unlock()
		produce(0, "a b")
		run("B", dirB, func() bool { _, n := last("a"); _, m := last("b"); return n > seen && m > seen })
		mu.Lock()
		for i, r := range restores {
			t.Log(r)
			if i >= before && !strings.HasSuffix(r, "wiped=true") {
				t.Errorf("host B's last start kept its pre-reset store: %s", r)
			}
		}
		mu.Unlock()
		for _, w := range []string{"a", "b"} {
			if n, _ := last(w); n != 1 {
				t.Errorf("after the reset on host A only, host B counts %q as %d, want 1 (its pre-reset count survived the reset)", w, n)
			}
		}
		if n, _ := last("d"); n != 2 {
			t.Errorf("d counted %d by host A, want 2", n)
		}
	})
}
