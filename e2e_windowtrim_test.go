package eddy_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/changelog"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/window"
)

// TestWindowChangelogTrimmed checks that a window store's changelog keeps its live
// windows only: the task deletes the records below the offset where the store's oldest
// live segment began, so the changelog does not grow with the store's history, and a
// new instance restoring from what is left has every live window.
func TestWindowChangelogTrimmed(t *testing.T) {
	kafkatest.ForEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		appID, input := c.Unique("trim"), c.Unique("trim-in")
		if err := c.CreateTopic(ctxT(t), input, 1, nil); err != nil {
			t.Fatal(err)
		}
		b := stream.NewBuilder()
		stream.From(b, serde.String(), serde.String(), []string{input}).
			GroupByKey(serde.String(), serde.String()).
			WindowedBy(window.Tumbling(time.Minute, 0)). // retention 1 min: segments of a minute
			Count(stream.Materialized("per-minute"))
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		cl := changelog.TopicName(appID, "per-minute")
		const keys, minutes = 5, 10
		t0 := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
		view := func(k, minute int, sec int) *sarama.ProducerMessage {
			return &sarama.ProducerMessage{Topic: input, Key: sarama.StringEncoder(fmt.Sprintf("k%d", k)),
				Value: sarama.StringEncoder("v"), Timestamp: t0.Add(time.Duration(minute)*time.Minute + time.Duration(sec)*time.Second)}
		}
		e := &wcEnv{c: c, appID: appID, topo: topo}
		cfg := e.config(t)
		cfg.RepartitionPurgeInterval = time.Millisecond // after every commit
		in := start(t, topo, cfg)
		for m := range minutes { // a minute per commit: each segment begins at its own offset
			for k := range keys {
				if err := c.Produce(ctxT(t), input, view(k, m, k+1)); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.WaitProcessed(ctxT(t), appID, input); err != nil {
				t.Fatal(err)
			}
		}
		client, err := sarama.NewClient(c.Addrs(), sarama.NewConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		// The purger trims after the commits, one request behind another: wait until
		// nothing older than the live minutes is left, not only until a first trim
		// (CI once stopped the app after the trim below minute 7 and before the one
		// below minute 8).
		var logStart int64
		oldest := t0.Add(8 * time.Minute).UnixMilli()
		waitFor(t, time.Minute, "the expired windows' changelog records deleted", func() (bool, error) {
			if err, done := in.exited(); done {
				return false, fmt.Errorf("app stopped: %v", err)
			}
			logStart, err = client.GetOffset(cl, 0, sarama.OffsetOldest)
			if err != nil || logStart == 0 {
				return false, err
			}
			recs, err := c.ReadCommitted(ctxT(t), cl)
			if err != nil {
				return false, err
			}
			for _, r := range recs {
				if len(r.Key) >= 12 && int64(binary.BigEndian.Uint64(r.Key[len(r.Key)-12:])) < oldest {
					return false, nil
				}
			}
			return true, nil
		})
		if err := in.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		// Kafka refuses DeleteRecords on a topic whose policy is compact alone: the
		// changelog is compact,delete, with nothing deleted by time or size.
		admin, err := sarama.NewClusterAdminFromClient(client)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: cl})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, en := range entries {
			got[en.Name] = en.Value
		}
		for k, v := range map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "-1", "retention.bytes": "-1"} {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", cl, k, got[k], v)
			}
		}
		// What is left: the minutes still live (the last two: stream time minus one
		// minute of retention reaches into minute 8), nothing older.
		recs, err := c.ReadCommitted(ctxT(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 || len(recs) >= keys*minutes {
			t.Fatalf("the changelog holds %d records from offset %d; want fewer than the %d written, and some", len(recs), logStart, keys*minutes)
		}
		for _, r := range recs {
			if len(r.Key) < 12 {
				t.Fatalf("changelog record %d: key %x is not a window store key", r.Offset, r.Key)
			}
			if start := int64(binary.BigEndian.Uint64(r.Key[len(r.Key)-12:])); start < oldest {
				t.Errorf("changelog record %d: window %s was left, but its segment had expired", r.Offset, time.UnixMilli(start).UTC())
			}
		}
		// A new instance restores from the trimmed changelog into an empty state dir and
		// has the live windows: one more view in minute 9 counts 2 (minute 8 expires with
		// it: 9:30 minus a minute of retention is past its start).
		cfg2 := e.config(t)
		in2 := start(t, topo, cfg2)
		for k := range keys {
			if err := c.Produce(ctxT(t), input, view(k, 9, 30)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.WaitProcessed(ctxT(t), appID, input); err != nil {
			t.Fatal(err)
		}
		q, err := eddy.QueryWindows[string, int64](in2.app, "per-minute")
		if err != nil {
			t.Fatal(err)
		}
		// A task writes its stores after its transaction committed, so a query right
		// after WaitProcessed can read the store a commit behind: wait for the count to
		// reach 2 (it never goes down), then check it is exactly that.
		for k := range keys {
			key := fmt.Sprintf("k%d", k)
			var got []statestore.KeyValue[window.Windowed[string], int64]
			waitFor(t, time.Minute, key+" counted in minute 9", func() (bool, error) {
				var err error
				got, err = q.Fetch(key, t0.Add(9*time.Minute), t0.Add(9*time.Minute))
				if errors.Is(err, eddy.ErrNotReady) {
					return false, nil
				}
				return err == nil && len(got) == 1 && got[0].Value >= 2, err
			})
			if len(got) != 1 || got[0].Value != 2 {
				t.Errorf("%s after the restore: windows %v; want minute 9 counted 2", key, got)
			}
		}
		if err := in2.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}
