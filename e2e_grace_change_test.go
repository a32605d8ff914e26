package eddy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topology"
	"github.com/eddy-streams/eddy/window"
)

// graceTopology counts views per key in 10-minute tumbling windows with the given grace,
// in store "per-10m" (retention size + grace, so the grace decides the segment interval).
func graceTopology(t *testing.T, input string, grace time.Duration, opts ...stream.Option) *topology.Topology {
	t.Helper()
	b := stream.NewBuilder()
	stream.From(b, serde.String(), serde.String(), []string{input}).
		GroupByKey(serde.String(), serde.String()).
		WindowedBy(window.Tumbling(10*time.Minute, grace)).
		Count(append([]stream.Option{stream.Materialized("per-10m")}, opts...)...)
	tp, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// TestRestartWithChangedGraceKeepsLiveWindows: a windowed count is restarted on its
// state dir with another grace period (the store's retention is size + grace, so its
// segment interval changes). The window still live under both retentions must keep its
// count. Before the segment interval was recorded with the segments, the lowered grace
// read the old segment ids as expired, dropped them at open, and the purger trimmed the
// changelog up to the checkpoint (the count started over at 1, and nothing could
// restore it); the raised grace looked for the window in the wrong segment and found it
// twice (1 and 3), emitting 1 instead of 4. Now the store is rebuilt from its changelog
// at the restart; a third instance on an empty state dir, restoring from the changelog
// alone, proves the trim kept what the window needs. (Reproduction of issue 22, item 1.)
func TestRestartWithChangedGraceKeepsLiveWindows(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after time.Duration // grace
	}{
		{"grace-lowered", 30 * time.Minute, 10 * time.Minute},
		{"grace-raised", 10 * time.Minute, 30 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
				appID, input := c.Unique("grace"), c.Unique("grace-in")
				if err := c.CreateTopic(ctxT(t), input, 1, nil); err != nil {
					t.Fatal(err)
				}
				t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
				rec := func(key string, at time.Duration) *sarama.ProducerMessage {
					return &sarama.ProducerMessage{Topic: input, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder("v"), Timestamp: t0.Add(at)}
				}
				cfg := eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t),
					RepartitionPurgeInterval: time.Millisecond}
				// First run: three views of k in the window [90m, 100m); stream time 100m.
				in := start(t, graceTopology(t, input, tc.before), cfg)
				for _, m := range []*sarama.ProducerMessage{rec("k", 91*time.Minute), rec("k", 92*time.Minute), rec("k", 93*time.Minute), rec("other", 100*time.Minute)} {
					if err := c.Produce(ctxT(t), input, m); err != nil {
						t.Fatal(err)
					}
				}
				if err := c.WaitProcessed(ctxT(t), appID, input); err != nil {
					t.Fatal(err)
				}
				if err := in.stop(); err != nil {
					t.Fatalf("Run: %v", err)
				}
				// Second run, same state dir, another grace: the window [90m, 100m) is live
				// under both (it accepts records until 100m + grace; the store keeps
				// windows starting after 100m - (10m + grace)). A fourth view of k at 95m
				// (stream time 100m) counts 4.
				in2 := start(t, graceTopology(t, input, tc.after), cfg)
				if err := c.Produce(ctxT(t), input, rec("k", 95*time.Minute)); err != nil {
					t.Fatal(err)
				}
				if err := c.WaitProcessed(ctxT(t), appID, input); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * time.Second) // let a commit's trim request reach the purger
				fetch := func(app *eddy.App) ([]statestore.KeyValue[window.Windowed[string], int64], error) {
					q, err := eddy.QueryWindows[string, int64](app, "per-10m")
					if err != nil {
						return nil, err
					}
					return q.Fetch("k", t0.Add(90*time.Minute), t0.Add(90*time.Minute))
				}
				got, err := fetch(in2.app)
				if err != nil {
					t.Fatal(err)
				}
				client, err := sarama.NewClient(c.Addrs(), sarama.NewConfig())
				if err != nil {
					t.Fatal(err)
				}
				defer client.Close()
				logStart, _ := client.GetOffset(changelog.TopicName(appID, "per-10m"), 0, sarama.OffsetOldest)
				logEnd, _ := client.GetOffset(changelog.TopicName(appID, "per-10m"), 0, sarama.OffsetNewest)
				if err := in2.stop(); err != nil {
					t.Fatalf("Run: %v", err)
				}
				t.Logf("changelog of per-10m: log start %d, end %d", logStart, logEnd)
				if len(got) != 1 || got[0].Value != 4 {
					t.Fatalf("window [90m,100m) of k after the restart with grace %v (was %v): %s; want one window counted 4", tc.after, tc.before, fmt.Sprint(got))
				}
				// Third run on an empty state dir: the store is restored from the
				// changelog alone, which must still hold the live window.
				cfg.StateDir = t.TempDir()
				in3 := start(t, graceTopology(t, input, tc.after), cfg)
				waitFor(t, time.Minute, "the window of k restored on an empty state dir", func() (bool, error) {
					got, err = fetch(in3.app)
					return err == nil && len(got) > 0, nil
				})
				if err := in3.stop(); err != nil {
					t.Fatalf("Run: %v", err)
				}
				if len(got) != 1 || got[0].Value != 4 {
					t.Fatalf("window [90m,100m) of k restored from the changelog (log start %d): %s; want one window counted 4", logStart, fmt.Sprint(got))
				}
			})
		})
	}
}

// TestRestartWithChangedGraceRefusesStoreWithoutChangelog: a windowed count kept
// without a changelog cannot be rebuilt when a changed grace changes its segment
// interval; the application stops with an error naming the store and the retention
// rather than reading its segments with the wrong interval.
func TestRestartWithChangedGraceRefusesStoreWithoutChangelog(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		appID, input := c.Unique("grace-nolog"), c.Unique("grace-nolog-in")
		if err := c.CreateTopic(ctxT(t), input, 1, nil); err != nil {
			t.Fatal(err)
		}
		cfg := eddy.Config{ApplicationID: appID, Brokers: c.Addrs(), StateDir: t.TempDir(), Logger: testLogger(t)}
		in := start(t, graceTopology(t, input, 10*time.Minute, stream.WithoutChangelog()), cfg)
		msg := &sarama.ProducerMessage{Topic: input, Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder("v"),
			Timestamp: time.Date(2024, 5, 1, 13, 31, 0, 0, time.UTC)}
		if err := c.Produce(ctxT(t), input, msg); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitProcessed(ctxT(t), appID, input); err != nil {
			t.Fatal(err)
		}
		if err := in.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		in2 := start(t, graceTopology(t, input, 30*time.Minute, stream.WithoutChangelog()), cfg)
		var runErr error
		waitFor(t, time.Minute, "Run to fail", func() (bool, error) {
			err, done := in2.exited()
			runErr = err
			return done, nil
		})
		t.Logf("Run: %v", runErr)
		if runErr == nil {
			t.Fatal("Run returned nil; want the store refused")
		}
		for _, want := range []string{`store "per-10m"`, "retention is now 40m0s", "segments 20m0s long", "10m0s long"} {
			if !strings.Contains(runErr.Error(), want) {
				t.Errorf("Run's error %q does not say %q", runErr, want)
			}
		}
	})
}
