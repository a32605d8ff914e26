package windowstore_test

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/windowstore"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
)

// retStore is window store "w" (10-minute windows) opened with a retention, as a task
// opens it (kvstore.Segmented.Open before anything reads it).
type retStore struct {
	set     *kvstore.Set
	seg     *kvstore.Segmented
	buf     *kvstore.Buffer
	ws      statestore.WindowStore[string, string]
	changed *kvstore.LayoutChange
}

func openRetention(t *testing.T, be kvstore.Backend, retention time.Duration, noRebuild bool) (retStore, error) {
	t.Helper()
	spec := windowstore.WindowSegments(retention)
	spec.NoRebuild = noRebuild
	seg := kvstore.NewSegmented(be, "w", spec)
	changed, err := seg.Open()
	if err != nil {
		return retStore{}, err
	}
	set := kvstore.NewSet(be)
	buf, err := set.RegisterIn("w", true, seg)
	if err != nil {
		t.Fatal(err)
	}
	return retStore{set, seg, buf, windowstore.NewWindowStore(buf, "w-changelog", serde.String(), serde.String(), 10*time.Minute, retention), changed}, nil
}

func minute(n int64) time.Time { return ms(n * 60_000) }

func (s retStore) fetch(t *testing.T, k string, start time.Time) string {
	t.Helper()
	v, ok, err := s.ws.Fetch(k, start)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return "(none)"
	}
	return v
}

// changelogOf turns the recorded changes into the changelog's records, offsets 0, 1, ...
func changelogOf(changes []change) []kvstore.Entry {
	out := make([]kvstore.Entry, len(changes))
	for i, c := range changes {
		out[i] = kvstore.Entry{Key: c.key, Value: c.value}
	}
	return out
}

// A restart that changes a window store's retention (a windowed aggregation's grace:
// retention = size + grace) changes its segment interval, max(retention/2, 60 s), and
// the segment list held only ids: segments cut with 20-minute intervals were read as
// 10-minute ones (lowered: below the oldest live segment, dropped, and TrimOffset
// offered the checkpoint to the purger) or the other way (raised: live windows looked
// for in the wrong segment, and counted again from nothing). The store now records its
// interval; opened with another, it is emptied (checkpoint first), offers nothing to
// trim, and the restore from the start of its changelog finds every live window.
// (Reproduction of issue 22, item 1, at the store.)
func TestRetentionChangeRebuildsLiveWindowsFromChangelog(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after time.Duration
	}{
		{"grace raised 10m->30m (retention 20m->40m)", 20 * time.Minute, 40 * time.Minute},
		{"grace lowered 30m->10m (retention 40m->20m)", 40 * time.Minute, 20 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := openRetention(t, openBolt(t, dir), tc.before, false)
			if err != nil || s.changed != nil {
				t.Fatalf("first open: %v, %v", s.changed, err)
			}
			// Observed stream time 100 min; the window [95m, 105m) is live under both
			// retentions (95m > 100m - 20m).
			if err := s.ws.Put("k", "v", minute(95)); err != nil {
				t.Fatal(err)
			}
			if err := s.ws.Put("other", "x", minute(100)); err != nil {
				t.Fatal(err)
			}
			var log recorder
			if err := s.set.LogChanges(&log); err != nil {
				t.Fatal(err)
			}
			records := changelogOf(log.changes)
			if err := s.set.Flush(map[string]int64{"w": int64(len(records))}); err != nil {
				t.Fatal(err)
			}
			if err := s.set.Close(); err != nil {
				t.Fatal(err)
			}

			s, err = openRetention(t, openBolt(t, dir), tc.after, false)
			if err != nil {
				t.Fatal(err)
			}
			defer s.set.Close()
			want := kvstore.LayoutChange{Store: "w", Recorded: kvstore.SegmentInterval(tc.before.Milliseconds()),
				Interval: kvstore.SegmentInterval(tc.after.Milliseconds()), Retention: tc.after.Milliseconds()}
			if s.changed == nil || *s.changed != want {
				t.Fatalf("Open found %v, want %v", s.changed, &want)
			}
			// Emptied, checkpoint and all: nothing to trim, and the restore starts at the
			// changelog's beginning.
			segs, _ := s.seg.Segments()
			_, hasCP, err := s.buf.Backend().Checkpoint("w")
			if err != nil {
				t.Fatal(err)
			}
			_, trim, err := s.seg.TrimOffset()
			if err != nil {
				t.Fatal(err)
			}
			if len(segs) != 0 || hasCP || trim {
				t.Fatalf("after the layout change: segments %v, checkpoint %v, trim %v; want an empty store with no checkpoint and nothing to trim", segs, hasCP, trim)
			}
			if err := s.buf.Restore(records, int64(len(records))); err != nil {
				t.Fatal(err)
			}
			if got := s.fetch(t, "k", minute(95)); got != "v" {
				t.Fatalf("live window [95m,105m) of k after the retention changed from %v to %v and the rebuild: %q, want v", tc.before, tc.after, got)
			}
			if off, ok, err := s.seg.TrimOffset(); err != nil || (ok && off > 0) {
				t.Fatalf("TrimOffset after the rebuild = %d, %v, %v: the live window's record is at offset 0", off, ok, err)
			}
			if err := s.set.Close(); err != nil {
				t.Fatal(err)
			}
			// The interval is recorded with the rebuilt segments: the next open keeps them.
			s, err = openRetention(t, openBolt(t, dir), tc.after, false)
			if err != nil || s.changed != nil {
				t.Fatalf("reopened with the same retention: %v, %v; want no change", s.changed, err)
			}
			defer s.set.Close()
			if got := s.fetch(t, "k", minute(95)); got != "v" {
				t.Fatalf("window [95m,105m) of k after reopening: %q, want v", got)
			}
		})
	}
}

// A retention changed within the same segment interval (60 s up to a retention of 2
// minutes) keeps the segments, and expiry at open takes the observed stream time and
// the new retention: a window live under the new retention stays, an expired one goes.
func TestRetentionChangeSameIntervalExpiresByNewRetention(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after time.Duration
		want          []string // windows of k after the reopen
	}{
		// Observed 130 s. Lowered: the oldest live segment is (130-60)/60 = 1, so 50 s
		// (segment 0) goes and 100 s stays (100 > 130 - 60).
		{"lowered 2m->1m", 2 * time.Minute, time.Minute, []string{"k@100000-110000=100s", "k@130000-140000=130s"}},
		// Raised: segment 0 went at the commit under 1 m; nothing more goes.
		{"raised 1m->2m", time.Minute, 2 * time.Minute, []string{"k@100000-110000=100s", "k@130000-140000=130s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			open := func(retention time.Duration) segStore {
				be := openBolt(t, dir)
				set := kvstore.NewSet(be)
				seg := kvstore.NewSegmented(be, "w", windowstore.WindowSegments(retention))
				if changed, err := seg.Open(); err != nil || changed != nil {
					t.Fatalf("open with retention %v: %v, %v; want no layout change (same interval)", retention, changed, err)
				}
				buf, err := set.RegisterIn("w", true, seg)
				if err != nil {
					t.Fatal(err)
				}
				return segStore{set, seg, windowstore.NewWindowStore(buf, "w-changelog", serde.String(), serde.String(), 10*time.Second, retention)}
			}
			s := open(tc.before)
			for _, at := range []int64{50, 100, 130} {
				s.put(t, "k", fmt.Sprintf("%ds", at), at*sec)
			}
			commit(t, s.set)
			if err := s.set.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(tc.after)
			defer s.set.Close()
			if got := collect(s.ws.FetchRange("k", ms(0), ms(200*sec))); !slices.Equal(got, tc.want) {
				t.Fatalf("windows of k after reopening with retention %v: %q, want %q", tc.after, got, tc.want)
			}
			if got := s.segments(t); !slices.Equal(got, []int64{1, 2}) {
				t.Fatalf("segments %v, want [1 2]", got)
			}
		})
	}
}

// A store that cannot be rebuilt (no changelog, or the test driver's) is refused when
// its layout changed, with an error that names the store and the retention, and is left
// as it was: reopened with the old retention, it has its windows.
func TestRetentionChangeWithoutRebuildRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := openRetention(t, openBolt(t, dir), 20*time.Minute, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ws.Put("k", "v", minute(95)); err != nil {
		t.Fatal(err)
	}
	if err := s.set.Flush(map[string]int64{"w": 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.set.Close(); err != nil {
		t.Fatal(err)
	}
	be := openBolt(t, dir)
	_, err = openRetention(t, be, 40*time.Minute, true)
	if !errors.Is(err, kvstore.ErrSegmentLayout) {
		t.Fatalf("open with another retention and no rebuild: %v, want ErrSegmentLayout", err)
	}
	for _, want := range []string{`store "w"`, "10m0s long", "retention is now 40m0s", "previous retention"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = openRetention(t, openBolt(t, dir), 20*time.Minute, true)
	if err != nil || s.changed != nil {
		t.Fatalf("reopened with the old retention: %v, %v", s.changed, err)
	}
	defer s.set.Close()
	if got := s.fetch(t, "k", minute(95)); got != "v" {
		t.Fatalf("window of k after the refused open: %q, want v", got)
	}
	if cp, ok, _ := s.buf.Backend().Checkpoint("w"); !ok || cp != 1 {
		t.Fatalf("checkpoint after the refused open: %d, %v; want 1", cp, ok)
	}
}

// failWipe fails the first Wipe of one store, as a crash there would stop the wipe.
type failWipe struct {
	kvstore.Backend
	store  string
	failed bool
}

func (f *failWipe) Wipe(store string) error {
	if store == f.store && !f.failed {
		f.failed = true
		return errors.New("injected: crash before this wipe")
	}
	return f.Backend.Wipe(store)
}

// The wipe for a rebuild removes the checkpoint before the segment list: stopped
// anywhere, the store is either still seen as cut with the old interval (wiped again at
// the next open) or has no checkpoint (restored from the start). Removing the list
// first and stopping before the checkpoint would leave an empty store with the old
// checkpoint: the restore would read only the tail, and every earlier window is lost.
func TestRetentionChangeWipeStoppedLeavesRebuild(t *testing.T) {
	for _, stopAt := range []string{"w", "w/segments", "w/segment-9"} {
		t.Run("stopped at wipe of "+stopAt, func(t *testing.T) {
			dir := t.TempDir()
			s, err := openRetention(t, openBolt(t, dir), 20*time.Minute, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.ws.Put("k", "v", minute(95)); err != nil {
				t.Fatal(err)
			}
			if err := s.set.Flush(map[string]int64{"w": 1}); err != nil {
				t.Fatal(err)
			}
			if segs, _ := s.seg.Segments(); !slices.Equal(segs, []int64{9}) {
				t.Fatalf("segments %v, want [9]", segs)
			}
			if err := s.set.Close(); err != nil {
				t.Fatal(err)
			}
			be := openBolt(t, dir)
			if _, err := openRetention(t, &failWipe{Backend: be, store: stopAt}, 40*time.Minute, false); err == nil {
				t.Fatal("open with a failing wipe succeeded")
			}
			if err := be.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = openRetention(t, openBolt(t, dir), 40*time.Minute, false)
			if err != nil {
				t.Fatal(err)
			}
			defer s.set.Close()
			cp, hasCP, err := s.buf.Backend().Checkpoint("w")
			if err != nil {
				t.Fatal(err)
			}
			if hasCP {
				t.Fatalf("after a wipe stopped at %s and a reopen: checkpoint %d kept (layout change %v); a restore would read only the tail", stopAt, cp, s.changed)
			}
		})
	}
}

// oldFormatDir unpacks testdata/unrecorded-interval: a state dir written by eddy before
// the segment interval was recorded (commit 0cb5828), with window store "w" (10-minute
// windows, retention 40 minutes, so 20-minute segments [4 5]) holding k@95m=v and
// other@100m=x, checkpoint 2. It was made with that commit's code:
//
//	seg := kvstore.NewSegmented(be, "w", windowstore.WindowSegments(40*time.Minute))
//	buf, _ := set.RegisterIn("w", true, seg)
//	ws := windowstore.NewWindowStore(buf, "w-changelog", serde.String(), serde.String(), 10*time.Minute, 40*time.Minute)
//	ws.Put("k", "v", time.UnixMilli(95*60_000)); ws.Put("other", "x", time.UnixMilli(100*60_000))
//	set.Flush(map[string]int64{"w": 2}); set.Close()
func oldFormatDir(t *testing.T) string {
	t.Helper()
	src := filepath.Join("testdata", "unrecorded-interval")
	dir := t.TempDir()
	in, err := os.Open(filepath.Join(src, "stores.db.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, kvstore.BoltFileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile(filepath.Join(src, "stores.db.state"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, kvstore.BoltFileName+".state"), state, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A store written before the interval was recorded: opened with the retention that cut
// it, its keys all lie in the segments the interval gives them, so it is kept and the
// interval recorded; opened with another, its keys do not, and it is emptied for a
// rebuild (or refused without one) — never read by the wrong interval.
func TestOldFormatStoreFile(t *testing.T) {
	t.Run("same retention: kept, interval recorded", func(t *testing.T) {
		dir := oldFormatDir(t)
		if got := buckets(t, dir)["w/segments"]; got != 3 {
			t.Fatalf("the old file's segment list holds %d entries, want 3 (observed, segments 4 and 5; no interval)", got)
		}
		s, err := openRetention(t, openBolt(t, dir), 40*time.Minute, false)
		if err != nil || s.changed != nil {
			t.Fatalf("open: %v, %v; want the store kept", s.changed, err)
		}
		if got := s.fetch(t, "k", minute(95)); got != "v" {
			t.Fatalf("window of k: %q, want v", got)
		}
		if cp, ok, _ := s.buf.Backend().Checkpoint("w"); !ok || cp != 2 {
			t.Fatalf("checkpoint %d, %v; want 2", cp, ok)
		}
		if err := s.set.Close(); err != nil {
			t.Fatal(err)
		}
		if got := buckets(t, dir)["w/segments"]; got != 4 {
			t.Fatalf("segment list after the open holds %d entries, want 4 (the interval recorded)", got)
		}
		// Recorded now: another retention is a layout change with a known interval.
		s, err = openRetention(t, openBolt(t, dir), 20*time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		defer s.set.Close()
		if s.changed == nil || s.changed.Recorded != 20*60_000 {
			t.Fatalf("reopened with retention 20m: %v, want a change from the recorded 20-minute interval", s.changed)
		}
	})
	t.Run("other retention: emptied for a rebuild", func(t *testing.T) {
		dir := oldFormatDir(t)
		s, err := openRetention(t, openBolt(t, dir), 20*time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		defer s.set.Close()
		want := kvstore.LayoutChange{Store: "w", Recorded: 0, Interval: 10 * 60_000, Retention: 20 * 60_000}
		if s.changed == nil || *s.changed != want {
			t.Fatalf("Open found %v, want %v", s.changed, &want)
		}
		if _, ok, _ := s.buf.Backend().Checkpoint("w"); ok {
			t.Fatal("checkpoint kept: the restore would read only the tail into an emptied store")
		}
		if !strings.Contains(s.changed.String(), "before the interval was recorded") {
			t.Errorf("change %q does not say the interval was unknown", s.changed)
		}
	})
	t.Run("other retention without rebuild: refused", func(t *testing.T) {
		dir := oldFormatDir(t)
		be := openBolt(t, dir)
		defer be.Close()
		if _, err := openRetention(t, be, 20*time.Minute, true); !errors.Is(err, kvstore.ErrSegmentLayout) {
			t.Fatalf("open: %v, want ErrSegmentLayout", err)
		}
	})
}

// A restore reads the checkpoint before anything else of the store: that read opens
// the store, so a store cut with another interval has no checkpoint even when nobody
// called Open, and the restore reads the changelog from its start.
func TestRetentionChangeCheckpointReadOpensTheStore(t *testing.T) {
	dir := t.TempDir()
	s, err := openRetention(t, openBolt(t, dir), 20*time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ws.Put("k", "v", minute(95)); err != nil {
		t.Fatal(err)
	}
	if err := s.set.Flush(map[string]int64{"w": 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.set.Close(); err != nil {
		t.Fatal(err)
	}
	be := openBolt(t, dir)
	defer be.Close()
	seg := kvstore.NewSegmented(be, "w", windowstore.WindowSegments(40*time.Minute))
	if cp, ok, err := seg.Checkpoint("w"); err != nil || ok {
		t.Fatalf("Checkpoint of a store cut with another interval, before Open: %d, %v, %v; want none", cp, ok, err)
	}
	if changed, err := seg.Open(); err != nil || changed == nil {
		t.Fatalf("Open after the checkpoint read: %v, %v; want the change it found", changed, err)
	}
}
