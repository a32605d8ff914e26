package windowstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/windowstore"
	"github.com/eddy-streams/eddy/serde"
	"github.com/eddy-streams/eddy/statestore"
)

// benchStore fills a bbolt window store with keys × windows one-minute windows (an hour
// for 60), each value 8 bytes, committed, as a windowed count over an hour keeps them.
func benchStore(b *testing.B, keys, windows int) (func(k string, start time.Time) (int64, bool, error), func(k string) int) {
	b.Helper()
	be, err := kvstore.OpenBolt(b.TempDir(), kvstore.BoltOptions{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	set := kvstore.NewSet(be)
	buf, err := set.RegisterIn("w", true, kvstore.NewSegmented(be, "w", windowstore.WindowSegments(2*time.Hour)))
	if err != nil {
		b.Fatal(err)
	}
	ws := windowstore.NewWindowStore(buf, "w", serde.String(), serde.Int64(), time.Minute, 2*time.Hour)
	for w := range windows {
		for k := range keys {
			if err := ws.Put(fmt.Sprintf("user-%05d", k), int64(w), ms(int64(w)*60_000)); err != nil {
				b.Fatal(err)
			}
		}
		if err := set.Flush(nil); err != nil {
			b.Fatal(err)
		}
	}
	count := func(k string) int {
		n := 0
		seq, errf := ws.FetchRange(k, ms(0), ms(int64(windows)*60_000))
		for range seq {
			n++
		}
		if err := errf(); err != nil {
			b.Fatal(err)
		}
		return n
	}
	return ws.Fetch, count
}

// BenchmarkWindowStoreFetch: one window of one key, from 10k keys × 60 windows on bbolt.
func BenchmarkWindowStoreFetch(b *testing.B) {
	fetch, _ := benchStore(b, 10_000, 60)
	b.ResetTimer()
	for i := range b.N {
		_, ok, err := fetch(fmt.Sprintf("user-%05d", i%10_000), ms(int64(i%60)*60_000))
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkWindowStoreFetchRange: the hour of one key (60 windows).
func BenchmarkWindowStoreFetchRange(b *testing.B) {
	_, count := benchStore(b, 10_000, 60)
	b.ResetTimer()
	for i := range b.N {
		if n := count(fmt.Sprintf("user-%05d", i%10_000)); n != 60 {
			b.Fatalf("%d windows, want 60", n)
		}
	}
}

// BenchmarkWindowStoreFetchAll: the windows of every key that start in one minute (10k
// windows) out of 10k keys × 60 windows.
func BenchmarkWindowStoreFetchAll(b *testing.B) {
	ws := benchWindows(b, 10_000, 60)
	b.ResetTimer()
	for i := range b.N {
		from := ms(int64(i%60) * 60_000)
		n := 0
		seq, errf := ws.FetchAll(from, from)
		for range seq {
			n++
		}
		if err := errf(); err != nil || n != 10_000 {
			b.Fatal(n, err)
		}
	}
}

// benchWindows is benchStore's window store itself.
func benchWindows(b *testing.B, keys, windows int) statestore.WindowStore[string, int64] {
	b.Helper()
	be, err := kvstore.OpenBolt(b.TempDir(), kvstore.BoltOptions{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	set := kvstore.NewSet(be)
	buf, err := set.RegisterIn("w", true, kvstore.NewSegmented(be, "w", windowstore.WindowSegments(2*time.Hour)))
	if err != nil {
		b.Fatal(err)
	}
	ws := windowstore.NewWindowStore(buf, "w", serde.String(), serde.Int64(), time.Minute, 2*time.Hour)
	for w := range windows {
		for k := range keys {
			if err := ws.Put(fmt.Sprintf("user-%05d", k), int64(w), ms(int64(w)*60_000)); err != nil {
				b.Fatal(err)
			}
		}
		if err := set.Flush(nil); err != nil {
			b.Fatal(err)
		}
	}
	return ws
}

// BenchmarkSegmentExpiry: expiring n windows. "drop": a window store with a minute of
// retention holds n windows in its first segment; the timed part is the commit of one
// window two minutes later, which drops that segment (one bucket delete). "scan-delete":
// the same n keys in a plain bucket, deleted the way a store without segments must: a
// scan for the expired keys and a write of their tombstones. Before segments the store
// did neither: expired windows stayed in the file, invisible.
func BenchmarkSegmentExpiry(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("drop/windows=%d", n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				be, set, ws := expiryStore(b, n)
				b.StartTimer()
				if err := ws.Put("late-comer", 1, ms(120_000)); err != nil {
					b.Fatal(err)
				}
				if err := set.Flush(nil); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if c, _ := be.Count("w/segment-0"); c != 0 {
					b.Fatalf("segment 0 holds %d keys after the drop", c)
				}
				be.Close()
			}
		})
		b.Run(fmt.Sprintf("scan-delete/windows=%d", n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				be, _, _ := expiryStore(b, n)
				b.StartTimer()
				it, err := be.Iterate("w/segment-0", nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				var dels []kvstore.Entry
				for it.Next() {
					dels = append(dels, kvstore.Entry{Key: bytes.Clone(it.Key())})
				}
				if err := errors.Join(it.Err(), it.Close()); err != nil {
					b.Fatal(err)
				}
				if err := be.Write(kvstore.Batch{Writes: map[string][]kvstore.Entry{"w/segment-0": dels}}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if c, _ := be.Count("w/segment-0"); c != 0 || len(dels) != n {
					b.Fatalf("%d keys left, %d deleted", c, len(dels))
				}
				be.Close()
			}
		})
	}
}

// expiryStore makes a window store with a minute of retention whose first segment holds
// n windows (n keys, starts spread over the first minute), committed to bbolt.
func expiryStore(b *testing.B, n int) (kvstore.Backend, *kvstore.Set, statestore.WindowStore[string, int64]) {
	be, err := kvstore.OpenBolt(b.TempDir(), kvstore.BoltOptions{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	set := kvstore.NewSet(be)
	buf, err := set.RegisterIn("w", true, kvstore.NewSegmented(be, "w", windowstore.WindowSegments(time.Minute)))
	if err != nil {
		b.Fatal(err)
	}
	ws := windowstore.NewWindowStore(buf, "w", serde.String(), serde.Int64(), time.Second, time.Minute)
	for k := range n {
		if err := ws.Put(fmt.Sprintf("user-%06d", k), int64(k), ms(int64(k%60)*1000)); err != nil {
			b.Fatal(err)
		}
	}
	if err := set.Flush(nil); err != nil {
		b.Fatal(err)
	}
	return be, set, ws
}
