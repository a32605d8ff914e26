package eddy_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/window"
)

// Final results under faults (issue #15): a windowed count suppressed until its windows
// close, on the embedded broker, with commits that abort (the broker's transaction is
// aborted and the input replayed), a commit whose answer is lost (its outcome is found
// out), and a new instance half way that restores the buffer from its changelog. The suppression buffer is a store written in the task's transaction, so
// every window comes out exactly once, with its full count: an aborted emission is
// emitted again by the replay, a committed one is never repeated.
func TestSuppressedFinalResultsAreExactlyOnceUnderFaults(t *testing.T) {
	c := kafkatest.Embedded(t)
	in, out := c.Unique("clicks"), c.Unique("final-counts")
	for _, topic := range []string{in, out} {
		if err := c.CreateTopic(ctxT(t), topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	b := stream.NewBuilder()
	counts := stream.From(b, serde.String(), serde.String(), []string{in}).
		GroupByKey(serde.String(), serde.String()).
		WindowedBy(window.Tumbling(10*time.Second, 0)).Count().
		Suppress(stream.UntilWindowCloses(stream.Unbounded()))
	keys := window.TimeWindowedSerde(serde.String(), 10*time.Second)
	stream.ToStream(counts).To(out, keys, serde.Nullable(serde.Int64()))
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := eddy.Config{ApplicationID: c.Unique("final"), Brokers: c.Addrs(), StateDir: t.TempDir(),
		Logger: testLogger(t), CommitInterval: 20 * time.Millisecond}
	// Every fourth commit with work aborts, up to three times; one from the fifth on
	// has its answer lost. (The seventh, before: the input makes 6–9 commits, depending
	// on how its batches meet the commit interval, so a run of six injected no loss.)
	var mu sync.Mutex
	commits, aborted, lost := 0, 0, 0
	run := func(cfg eddy.Config) (stop func(), done chan error) {
		app, err := eddy.New(topo, cfg)
		if err != nil {
			t.Fatal(err)
		}
		eddy.SetBeforeCommitHook(app, func(processor.TaskID) error {
			mu.Lock()
			defer mu.Unlock()
			commits++
			if commits%4 == 0 && aborted < 3 {
				aborted++
				return errors.New("injected abort")
			}
			return nil
		})
		eddy.SetAfterCommitHook(app, func(processor.TaskID) error {
			mu.Lock()
			defer mu.Unlock()
			if commits >= 5 && lost == 0 {
				lost++
				return errors.New("injected lost answer")
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		done = make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		var once sync.Once
		stop = func() {
			once.Do(func() {
				cancel()
				select {
				case err := <-done:
					if err != nil && !errors.Is(err, context.Canceled) {
						t.Errorf("Run: %v", err)
					}
				case <-time.After(90 * time.Second):
					t.Error("Run did not return within 90 s of cancel")
				}
			})
		}
		t.Cleanup(stop)
		return stop, done
	}
	stop, done := run(cfg)

	base := time.Unix(1_700_000_000, 0).Truncate(time.Minute)
	want := map[string]int64{} // key@window start (s) → count
	users := []string{"ann", "bob", "cy"}
	pctx, pcancel := context.WithTimeout(context.Background(), time.Minute)
	defer pcancel()
	for batch := range 10 {
		if batch == 5 {
			// Half way, the instance stops and a new one, with an empty state
			// directory, restores the stores (the suppression buffer too) from their
			// changelogs.
			wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
			if err := c.WaitProcessed(wctx, cfg.ApplicationID, in); err != nil {
				t.Fatal(err)
			}
			wcancel()
			stop()
			cfg.StateDir = t.TempDir()
			stop, done = run(cfg)
		}
		var msgs []*sarama.ProducerMessage
		for i := range 12 {
			s := batch*12 + i
			u := users[(s*7)%len(users)]
			at := time.Duration(s) * 500 * time.Millisecond
			want[fmt.Sprintf("%s@%d", u, (at/(10*time.Second))*10)]++
			msgs = append(msgs, &sarama.ProducerMessage{Key: sarama.StringEncoder(u), Value: sarama.StringEncoder("/"), Timestamp: base.Add(at)})
		}
		mu.Lock()
		before := commits
		mu.Unlock()
		if err := c.Produce(pctx, in, msgs...); err != nil {
			t.Fatal(err)
		}
		// Each batch gets a commit of its own before the next is written, so the
		// faults above have commits to strike: with a fixed pause, an application
		// slow to start (CI's loaded machine) took a half of the input in one commit
		// and the test saw two commits and no fault.
		waitFor(t, time.Minute, "a commit of the batch", func() (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return commits > before, nil
		})
	}
	// A record far ahead closes every window above (its own stays open).
	if err := c.Produce(pctx, in, &sarama.ProducerMessage{Key: sarama.StringEncoder("zed"), Value: sarama.StringEncoder("/"), Timestamp: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var got []string
	waitFor(t, 2*time.Minute, "every final count", func() (bool, error) {
		select {
		case err := <-done:
			done <- err
			return false, fmt.Errorf("app stopped: %v", err)
		default:
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer rcancel()
		msgs, err := c.ReadCommitted(rctx, out)
		if err != nil {
			return false, err
		}
		got = got[:0]
		for _, m := range msgs {
			k, err := keys.Deserialize(out, m.Key)
			if err != nil {
				return false, err
			}
			n, err := serde.Int64().Deserialize(out, m.Value)
			if err != nil {
				return false, err
			}
			got = append(got, fmt.Sprintf("%s@%d=%d", k.Key, (k.Window.Start.Sub(base))/time.Second, n))
		}
		return len(got) >= len(want), nil
	})
	var wantList []string
	for k, n := range want {
		wantList = append(wantList, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(wantList)
	gotSorted := append([]string(nil), got...)
	sort.Strings(gotSorted)
	if fmt.Sprint(gotSorted) != fmt.Sprint(wantList) {
		t.Fatalf("final counts (each window once, complete):\n got  %v\n want %v", gotSorted, wantList)
	}
	mu.Lock()
	defer mu.Unlock()
	if aborted == 0 || lost == 0 {
		t.Fatalf("the faults were not injected: %d aborts, %d lost answers over %d commits", aborted, lost, commits)
	}
	t.Logf("%d windows, %d commits, %d aborted, %d answers lost", len(want), commits, aborted, lost)
}
