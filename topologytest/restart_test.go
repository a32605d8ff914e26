package topologytest_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/stream"
	"github.com/eddy-streams/eddy/topologytest"
	"github.com/eddy-streams/eddy/window"
)

// Restart restores the stores from their changelogs: the sums go on from the totals
// before it, in memory and with bbolt files (restored after their checkpoint).
func TestRestartRestoresStoresFromChangelogs(t *testing.T) {
	for name, cfg := range map[string]topologytest.Config{
		"memory": {},
		"bbolt":  {StateDir: t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			d := sums(t, cfg)
			in := topologytest.NewInputTopic(d, "amounts", serde.String(), serde.Int64())
			out := topologytest.NewOutputTopic(d, "totals", serde.String(), serde.Int64())
			for _, v := range []int64{1, 2} {
				if err := in.Pipe("a", v); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Restart(); err != nil {
				t.Fatal(err)
			}
			if err := d.Restart(); err != nil { // twice: the second restores from its checkpoint
				t.Fatal(err)
			}
			if err := in.Pipe("a", 4); err != nil {
				t.Fatal(err)
			}
			if got, want := readAll(t, out), []string{"a=1", "a=3", "a=7"}; !slices.Equal(got, want) {
				t.Fatalf("totals %q, want %q", got, want)
			}
		})
	}
}

func TestRestartRefusesAnOpenTransaction(t *testing.T) {
	d := sums(t, topologytest.Config{CommitEvery: 10})
	in := topologytest.NewInputTopic(d, "amounts", serde.String(), serde.Int64())
	if err := in.Pipe("a", 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Restart(); !errors.Is(err, topologytest.ErrOpenTransaction) {
		t.Fatalf("Restart with a record waiting for its commit: %v, want ErrOpenTransaction", err)
	}
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := d.Restart(); err != nil {
		t.Fatal(err)
	}
}

// Restart restores window stores into their time segments: a windowed count goes on
// from its counts before the restart, in memory and with bbolt files.
func TestRestartRestoresWindowStores(t *testing.T) {
	for name, cfg := range map[string]topologytest.Config{
		"memory": {StartTime: time.Unix(0, 0)},
		"bbolt":  {StartTime: time.Unix(0, 0), StateDir: t.TempDir()},
	} {
		t.Run(name, func(t *testing.T) {
			b := stream.NewBuilder(stream.NoCaching())
			counts := stream.From(b, serde.String(), serde.String(), []string{"views"}).
				GroupByKey(serde.String(), serde.String()).
				WindowedBy(window.Tumbling(time.Minute, time.Hour)).Count()
			minutes := window.TimeWindowedSerde(serde.String(), time.Minute)
			stream.ToStream(counts).To("counts", minutes, serde.Nullable(serde.Int64()))
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			d, err := topologytest.New(topo, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			in := topologytest.NewInputTopic(d, "views", serde.String(), serde.String())
			out := topologytest.NewOutputTopic(d, "counts", minutes, serde.Int64())
			pipe := func(sec int64) {
				t.Helper()
				if err := in.PipeAt("ann", "/", time.Unix(sec, 0)); err != nil {
					t.Fatal(err)
				}
			}
			pipe(10)
			pipe(70)
			if err := d.Restart(); err != nil {
				t.Fatal(err)
			}
			pipe(20)
			pipe(80)
			recs, err := out.ReadRecords()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				got = append(got, fmt.Sprintf("%d=%d", r.Key.Window.StartMs(), r.Value))
			}
			if want := []string{"0=1", "60000=1", "0=2", "60000=2"}; !slices.Equal(got, want) {
				t.Fatalf("counts %q, want %q", got, want)
			}
		})
	}
}

// A windowed store under StateDir whose retention changed (here its grace: retention =
// size + grace) has time segments cut with another interval; the runtime rebuilds it
// from its changelog, but a new driver's changelogs start empty, so the driver refuses
// it, naming the store and the retention, rather than read it with the wrong interval.
func TestStateDirRefusesStoreCutForAnotherRetention(t *testing.T) {
	dir := t.TempDir()
	counts := func(grace time.Duration) (*topologytest.Driver, error) {
		b := stream.NewBuilder()
		stream.From(b, serde.String(), serde.String(), []string{"views"}).
			GroupByKey(serde.String(), serde.String()).
			WindowedBy(window.Tumbling(10*time.Minute, grace)).
			Count(stream.Materialized("per-10m"))
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return topologytest.New(topo, topologytest.Config{StateDir: dir, StartTime: time.Unix(0, 0)})
	}
	d, err := counts(10 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	in := topologytest.NewInputTopic(d, "views", serde.String(), serde.String())
	if err := in.PipeAt("k", "v", time.Unix(95*60, 0)); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err := counts(30 * time.Minute); err == nil {
		d.Close()
		t.Fatal("a driver with another grace opened the store cut for the old one")
	} else if !strings.Contains(err.Error(), `store "per-10m"`) || !strings.Contains(err.Error(), "retention is now 40m0s") {
		t.Fatalf("error %q does not name the store and its retention", err)
	}
	d, err = counts(10 * time.Minute)
	if err != nil {
		t.Fatalf("the same grace again: %v", err)
	}
	defer d.Close()
}
