package windowstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/eddy-streams/eddy/internal/kvstore"
	"github.com/eddy-streams/eddy/internal/windowstore"
	"github.com/eddy-streams/eddy/serde"
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
