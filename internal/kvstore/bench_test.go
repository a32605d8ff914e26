package kvstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// Benchmarks of the bbolt backend; see BENCHMARKS.md ("State stores") for the command
// and the results. Keys are 16 random bytes, values 100 bytes, as in the issue.

const (
	benchKeySize   = 16
	benchValueSize = 100
)

// benchKey writes key i of a fixed random key space into dst.
func benchKey(dst []byte, i uint64) []byte {
	// A bijective mix of i: distinct keys in random order.
	x := i*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 29
	dst = binary.BigEndian.AppendUint64(dst, x)
	return binary.BigEndian.AppendUint64(dst, i)
}

func benchValue(rng *rand.Rand) []byte {
	v := make([]byte, benchValueSize)
	for i := range v {
		v[i] = byte('a' + rng.IntN(26))
	}
	return v
}

func benchModes() []struct {
	name   string
	noSync bool
} {
	return []struct {
		name   string
		noSync bool
	}{{"sync", false}, {"nosync", true}}
}

// benchPopulate writes keys [0, n) of the key space to store s, in sorted batches.
func benchPopulate(b *testing.B, be Backend, n int) {
	rng := rand.New(rand.NewPCG(1, 2))
	val := benchValue(rng)
	for start := 0; start < n; start += 50000 {
		var es []Entry
		for i := start; i < min(n, start+50000); i++ {
			es = append(es, Entry{Key: benchKey(nil, uint64(i)), Value: val})
		}
		SortEntries(es)
		if err := be.Write(Batch{Writes: map[string][]Entry{"s": es}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFlush: a Set.Flush of N dirty keys (updates and inserts at random, with a
// checkpoint) into a store holding 100k keys (and 1M keys for 10k dirty ones). ns/op is
// the time of one flush.
func BenchmarkFlush(b *testing.B) {
	type flushCase struct{ base, dirty int }
	cases := []flushCase{{100_000, 1000}, {100_000, 10_000}, {100_000, 100_000}, {1_000_000, 10_000}}
	for _, mode := range benchModes() {
		for _, c := range cases {
			base, dirty := c.base, c.dirty
			b.Run(fmt.Sprintf("%s/store=%dk/dirty=%dk", mode.name, base/1000, dirty/1000), func(b *testing.B) {
				be, err := OpenBolt(b.TempDir(), BoltOptions{NoSync: mode.noSync})
				if err != nil {
					b.Fatal(err)
				}
				defer be.Close()
				benchPopulate(b, be, base)
				set := NewSet(be)
				buf, err := set.Register("s", true)
				if err != nil {
					b.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(3, 4))
				val := benchValue(rng)
				key := make([]byte, 0, benchKeySize)
				b.ResetTimer()
				for i := range b.N {
					b.StopTimer()
					for range dirty {
						// Half the keys exist, half are new (the store grows by dirty/2 per flush).
						buf.Put(benchKey(key[:0], uint64(rng.IntN(2*base))), val)
					}
					b.StartTimer()
					if err := set.Flush(map[string]int64{"s": int64(i)}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRestore: 1M changelog records (random 16-byte keys, 100-byte values) restored
// into an empty store from fetches of 8192 records: "per-fetch" writes each fetch in
// one Write with its checkpoint (RestoreBatch); "restorer" feeds the fetches to a
// Restorer, which writes 100k records at a time. Run with -benchtime=1x.
func BenchmarkRestore(b *testing.B) {
	const records, fetch = 1_000_000, 8192
	for _, mode := range benchModes() {
		for _, how := range []string{"per-fetch", "restorer"} {
			b.Run(fmt.Sprintf("%s/%s", mode.name, how), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(5, 6))
				vals := make([][]byte, 64)
				for i := range vals {
					vals[i] = benchValue(rng)
				}
				for range b.N {
					b.StopTimer()
					dir := b.TempDir()
					be, err := OpenBolt(dir, BoltOptions{NoSync: mode.noSync})
					if err != nil {
						b.Fatal(err)
					}
					r := NewRestorer(be, "s", RestorerOptions{})
					for off := 0; off < records; off += fetch {
						// A fetch: fresh records, as a Kafka client hands them out.
						n := min(fetch, records-off)
						recs := make([]Entry, n)
						keys := make([]byte, n*benchKeySize)
						for j := range n {
							recs[j] = Entry{Key: benchKey(keys[j*benchKeySize:j*benchKeySize], uint64(off+j)), Value: vals[(off+j)%len(vals)]}
						}
						b.StartTimer()
						if how == "per-fetch" {
							err = be.Write(RestoreBatch("s", recs, int64(off+n)))
						} else {
							err = r.Add(recs, int64(off+n))
						}
						if err != nil {
							b.Fatal(err)
						}
						b.StopTimer()
					}
					b.StartTimer()
					if err := r.Finish(); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if off, _, err := be.Checkpoint("s"); err != nil || off != records {
						b.Fatalf("checkpoint %d %v", off, err)
					}
					if fi, err := os.Stat(dir + "/" + BoltFileName); err == nil {
						b.ReportMetric(float64(fi.Size())/(1<<20), "file-MB")
					}
					if err := be.Close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(records*b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// BenchmarkGet: Backend.Get of a present and of an absent key, in a store of 100k keys.
func BenchmarkGet(b *testing.B) {
	be, err := OpenBolt(b.TempDir(), BoltOptions{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	const n = 100000
	benchPopulate(b, be, n)
	rng := rand.New(rand.NewPCG(7, 8))
	key := make([]byte, 0, benchKeySize)
	b.Run("hit", func(b *testing.B) {
		for range b.N {
			v, err := be.Get("s", benchKey(key[:0], uint64(rng.IntN(n))))
			if err != nil || v == nil {
				b.Fatalf("hit: %v %v", v, err)
			}
		}
	})
	b.Run("miss", func(b *testing.B) {
		for range b.N {
			v, err := be.Get("s", benchKey(key[:0], uint64(n+rng.IntN(n))))
			if err != nil || v != nil {
				b.Fatalf("miss: %v %v", v, err)
			}
		}
	})
}

// BenchmarkOpen: OpenBolt of a file of 1M keys after a clean close (cheap checks) and
// after a crash (full consistency check), and the check alone.
func BenchmarkOpen(b *testing.B) {
	dir := b.TempDir()
	be, err := OpenBolt(dir, BoltOptions{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	benchPopulate(b, be, 1_000_000)
	if err := be.Close(); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(dir + "/" + BoltFileName)
	b.Logf("file: %d MB", fi.Size()>>20)
	b.Run("clean", func(b *testing.B) {
		for range b.N {
			be, rep, err := OpenBoltReport(dir, BoltOptions{NoSync: true})
			if err != nil || rep.Verified {
				b.Fatal(err, rep)
			}
			if err := be.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify", func(b *testing.B) {
		for range b.N {
			be, rep, err := OpenBoltReport(dir, BoltOptions{NoSync: true, Verify: VerifyAlways})
			if err != nil || !rep.Verified || rep.Recreated {
				b.Fatal(err, rep)
			}
			if err := be.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(fi.Size())/(1<<20)/(b.Elapsed().Seconds()/float64(b.N)), "MB/s")
	})
}

// BenchmarkRestoreFromEmpty: 1M changelog records over 100k or 1M random 16-byte keys
// (100-byte values) restored into an empty store from fetches of 8192 records, side by
// side: "restorer" (batched random-order writes, the tail path), "bulk-inplace"
// (BulkRestorer: gather, sort, load in key order through bbolt's Put), "bulk" (the same,
// the file built page by page and swapped in: LoadAuto on an empty file), "bulk-spill"
// (the same with a 4 MiB budget: sorted runs spilled to files and merged). Run with
// -benchtime=1x.
func BenchmarkRestoreFromEmpty(b *testing.B) {
	const records, fetch = 1_000_000, 8192
	for _, keys := range []int{100_000, 1_000_000} {
		for _, how := range []string{"restorer", "bulk-inplace", "bulk", "bulk-spill"} {
			b.Run(fmt.Sprintf("keys=%d/%s", keys, how), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(5, 6))
				vals := make([][]byte, 64)
				for i := range vals {
					vals[i] = benchValue(rng)
				}
				order := make([]uint64, records)
				for i := range order {
					if keys == records {
						order[i] = uint64(i) // every key once
					} else {
						order[i] = uint64(rng.IntN(keys))
					}
				}
				for range b.N {
					b.StopTimer()
					dir := b.TempDir()
					be, err := OpenBolt(dir, BoltOptions{})
					if err != nil {
						b.Fatal(err)
					}
					var add func([]Entry, int64) error
					var finish func() error
					switch how {
					case "restorer":
						r := NewRestorer(be, "s", RestorerOptions{})
						add, finish = r.Add, r.Finish
					default:
						opts := BulkRestorerOptions{}
						if how == "bulk-spill" {
							opts.MaxBytes = 4 << 20
						}
						if how == "bulk-inplace" {
							opts.Load = LoadInPlace
						}
						r, err := NewBulkRestorer(be, "s", opts)
						if err != nil {
							b.Fatal(err)
						}
						add, finish = r.Add, func() error { return r.Finish(context.Background()) }
					}
					for off := 0; off < records; off += fetch {
						n := min(fetch, records-off)
						recs := make([]Entry, n)
						kb := make([]byte, n*benchKeySize)
						for j := range n {
							recs[j] = Entry{Key: benchKey(kb[j*benchKeySize:j*benchKeySize], order[off+j]), Value: vals[(off+j)%len(vals)]}
						}
						b.StartTimer()
						if err := add(recs, int64(off+n)); err != nil {
							b.Fatal(err)
						}
						b.StopTimer()
					}
					b.StartTimer()
					if err := finish(); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if off, _, err := be.Checkpoint("s"); err != nil || off != records {
						b.Fatalf("checkpoint %d %v", off, err)
					}
					if fi, err := os.Stat(dir + "/" + BoltFileName); err == nil {
						b.ReportMetric(float64(fi.Size())/(1<<20), "file-MB")
					}
					if err := be.Close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(records*b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
