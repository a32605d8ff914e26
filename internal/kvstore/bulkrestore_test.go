package kvstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// randomChangelog makes n records over a small key space that stresses the bulk path:
// overwrites, tombstones, empty values (not tombstones), the empty key, keys that are
// prefixes of others, and keys with 0x00/0xff bytes.
func randomChangelog(rng *rand.Rand, n, keys int) []Entry {
	alphabet := []byte{0x00, 0x01, 'a', 'b', 0x7f, 0xff}
	space := make([][]byte, keys)
	for i := range space {
		k := make([]byte, rng.IntN(10))
		for j := range k {
			k[j] = alphabet[rng.IntN(len(alphabet))]
		}
		space[i] = k
	}
	records := make([]Entry, n)
	for i := range records {
		e := Entry{Key: bytes.Clone(space[rng.IntN(len(space))])}
		switch rng.IntN(8) {
		case 0: // tombstone
		case 1:
			e.Value = []byte{}
		default:
			e.Value = fmt.Appendf(nil, "v%d-%x", i, rng.Uint32())
		}
		records[i] = e
	}
	return records
}

// plainReplay applies records one by one, in log order, as the processing path would.
func plainReplay(t *testing.T, records []Entry) map[string]string {
	t.Helper()
	b := NewMemoryBackend()
	for _, e := range records {
		if err := b.Write(Batch{Writes: map[string][]Entry{"s": {e}}}); err != nil {
			t.Fatal(err)
		}
	}
	m, _, _ := dump(t, b, "s")
	return m
}

// feed adds records to add in fetches of random sizes, as the changelog Restorer does;
// next is the offset after each fetch (offsets are positions here). With reuse, it
// overwrites each fetch's bytes after add returns (a BulkRestorer must copy what it
// keeps; a Restorer keeps references, by contract).
func feed(t *testing.T, rng *rand.Rand, records []Entry, from int, reuse bool, add func([]Entry, int64) error) {
	t.Helper()
	for i := from; i < len(records); {
		j := min(len(records), i+1+rng.IntN(40))
		// A fetch's slices are reused after Add returns: the restorers must copy what they keep.
		fetch := make([]Entry, j-i)
		for k, e := range records[i:j] {
			fetch[k] = Entry{Key: bytes.Clone(e.Key), Value: bytes.Clone(e.Value)}
		}
		if err := add(fetch, int64(j)); err != nil {
			t.Fatal(err)
		}
		for _, e := range fetch {
			if !reuse {
				break
			}
			for x := range e.Key {
				e.Key[x] = 'X'
			}
			for x := range e.Value {
				e.Value[x] = 'X'
			}
		}
		i = j
	}
}

func sameMap(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d keys, want %d", what, len(got), len(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Fatalf("%s: key %q = %q (present %v), want %q", what, k, g, ok, v)
		}
	}
}

// TestBulkRestoreMatchesPlainReplay: on bbolt, a restore from empty in key order (with
// and without spilled runs), and the same followed by a tail through the batched
// Restorer, give the store a plain replay of the changelog gives, with the checkpoint
// of the last record.
func TestBulkRestoreMatchesPlainReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	ctx := context.Background()
	for round := range 40 {
		n := 1 + rng.IntN(2000)
		records := randomChangelog(rng, n, 1+rng.IntN(300))
		want := plainReplay(t, records)
		// The second budget spills at every few records, the third mostly compacts.
		for _, maxBytes := range []int{1 << 30, 1 + rng.IntN(2000), 4000 + rng.IntN(30000)} {
			name := fmt.Sprintf("round %d, %d records, budget %d", round, n, maxBytes)
			dir := t.TempDir()
			be, _ := openTestBolt(t, dir, BoltOptions{})
			split := rng.IntN(n + 1) // the bulk restore covers [0, split), the tail the rest
			br, err := NewBulkRestorer(be, "s", BulkRestorerOptions{MaxBytes: maxBytes, TxBytes: 1 + rng.IntN(4000)})
			if err != nil {
				t.Fatal(err)
			}
			feed(t, rng, records[:split], 0, true, br.Add)
			distinct := map[string]bool{}
			for _, e := range records[:split] {
				distinct[string(e.Key)] = true
			}
			if len(distinct)*gatheredOverhead > maxBytes && br.Runs() == 0 {
				t.Fatalf("%s: a budget of %d bytes spilled no run", name, maxBytes)
			}
			if err := br.Finish(ctx); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			sameMap(t, name+", bulk part", dumpOK(t, be, split), plainReplay(t, records[:split]))
			sr := NewRestorer(be, "s", RestorerOptions{MaxRecords: 1 + rng.IntN(500)})
			feed(t, rng, records, split, false, sr.Add)
			if err := sr.Finish(); err != nil {
				t.Fatal(err)
			}
			sameMap(t, name+", bulk then tail", dumpOK(t, be, n), want)
			if leftovers, _ := filepath.Glob(filepath.Join(dir, ".restore-*")); len(leftovers) > 0 {
				t.Fatalf("%s: run files left behind: %v", name, leftovers)
			}
			noStaging(t, be, name)
			if err := be.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// dumpOK dumps store "s" and checks its checkpoint: cp, or none when cp is 0 and
// nothing was restored.
func dumpOK(t *testing.T, be Backend, cp int) map[string]string {
	t.Helper()
	m, off, ok := dump(t, be, "s")
	if cp == 0 {
		if ok || len(m) > 0 {
			t.Fatalf("nothing restored but the store has %d keys, checkpoint %d (%v)", len(m), off, ok)
		}
		return m
	}
	if !ok || off != int64(cp) {
		t.Fatalf("checkpoint %d (%v), want %d", off, ok, cp)
	}
	if n, err := be.Count("s"); err != nil || n != int64(len(m)) {
		t.Fatalf("Count %d (%v), iterated %d keys", n, err, len(m))
	}
	return m
}

func noStaging(t *testing.T, be Backend, what string) {
	t.Helper()
	err := be.(*boltBackend).db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(stagingBucket) != nil {
			return errors.New("the staging bucket is left")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// cancelAfter is a context whose Err turns to Canceled after n calls: it cancels a bulk
// load between two of its transactions.
type cancelAfter struct {
	context.Context
	n atomic.Int64
}

func (c *cancelAfter) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestBulkRestoreInterrupted: a bulk restore cancelled while gathering (Abort), while
// loading (between transactions: some are committed to the staging bucket), or left
// behind by a crash, leaves the store empty with no checkpoint, and the next restore
// from empty gives the full store.
// The loads in place (staging bucket) and by a new file (boltbuild.go) both.
func TestBulkRestoreInterrupted(t *testing.T) {
	t.Run("in-place", func(t *testing.T) { testBulkRestoreInterrupted(t, LoadInPlace, 5) })
	t.Run("new-file", func(t *testing.T) { testBulkRestoreInterrupted(t, LoadNewFile, 2) })
}

func testBulkRestoreInterrupted(t *testing.T, load BulkLoad, cancelAt int64) {
	rng := rand.New(rand.NewPCG(9, 1))
	records := randomChangelog(rng, 3000, 400)
	want := plainReplay(t, records)
	opts := BulkRestorerOptions{MaxBytes: 2000, TxBytes: 500, Load: load}
	empty := func(be Backend, what string) {
		t.Helper()
		m, off, ok := dump(t, be, "s")
		if ok || len(m) > 0 {
			t.Fatalf("%s: store has %d keys, checkpoint %d (%v); want empty with none", what, len(m), off, ok)
		}
		if n, err := be.Count("s"); err != nil || n != 0 {
			t.Fatalf("%s: Count %d %v", what, n, err)
		}
	}
	dir := t.TempDir()
	be, _ := openTestBolt(t, dir, BoltOptions{})

	// Cancelled while gathering.
	br, err := NewBulkRestorer(be, "s", opts)
	if err != nil {
		t.Fatal(err)
	}
	feed(t, rng, records[:1500], 0, true, br.Add)
	if br.Runs() == 0 {
		t.Fatal("no run spilled")
	}
	if err := br.Abort(); err != nil {
		t.Fatal(err)
	}
	empty(be, "aborted")

	// Cancelled while loading, after 5 transactions.
	br, err = NewBulkRestorer(be, "s", opts)
	if err != nil {
		t.Fatal(err)
	}
	feed(t, rng, records, 0, true, br.Add)
	ctx := &cancelAfter{Context: context.Background()}
	ctx.n.Store(cancelAt)
	if err := br.Finish(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled load: %v, want context.Canceled", err)
	}
	empty(be, "cancelled load")
	noStaging(t, be, "cancelled load")
	if _, err := os.Stat(filepath.Join(dir, BoltFileName+buildFileSuffix)); !os.IsNotExist(err) {
		t.Fatalf("cancelled file build left its file: %v", err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".restore-*")); len(leftovers) > 0 {
		t.Fatalf("run files left behind: %v", leftovers)
	}

	// A crash mid-load: a staging bucket with keys and a spill directory are left.
	err = be.(*boltBackend).db.Update(func(tx *bolt.Tx) error {
		st, err := tx.CreateBucketIfNotExists(stagingBucket)
		if err != nil {
			return err
		}
		bk, err := st.CreateBucket([]byte("s"))
		if err != nil {
			return err
		}
		return bk.Put([]byte("ghost"), []byte("x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	ghostDir := filepath.Join(dir, ".restore-73-123")
	if err := os.MkdirAll(ghostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	abandon(t, be)
	be, _ = openTestBolt(t, dir, BoltOptions{})
	empty(be, "after a crash mid-load")

	// The next restore from empty drops the leftovers and restores everything.
	br, err = NewBulkRestorer(be, "s", opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ghostDir); !os.IsNotExist(err) {
		t.Fatalf("leftover run directory not removed: %v", err)
	}
	feed(t, rng, records, 0, true, br.Add)
	if err := br.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameMap(t, "restored after the interruptions", dumpOK(t, be, len(records)), want)
	noStaging(t, be, "restored")

	// A bulk restore refuses a store that is not empty, and changes nothing.
	br, err = NewBulkRestorer(be, "s", opts)
	if err != nil {
		t.Fatal(err)
	}
	feed(t, rng, records[:10], 0, true, br.Add)
	if err := br.Finish(context.Background()); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("bulk restore into a restored store: %v, want ErrNotEmpty", err)
	}
	sameMap(t, "after the refused bulk restore", dumpOK(t, be, len(records)), want)
	noStaging(t, be, "refused")

	// Nor one with a checkpoint and no keys (restored from an empty changelog prefix).
	if err := be.Write(Batch{Checkpoints: map[string]int64{"t": 7}}); err != nil {
		t.Fatal(err)
	}
	br, err = NewBulkRestorer(be, "t", opts)
	if err != nil {
		t.Fatal(err)
	}
	feed(t, rng, records[:10], 0, true, br.Add)
	if err := br.Finish(context.Background()); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("bulk restore into a store with a checkpoint: %v, want ErrNotEmpty", err)
	}
	if off, ok, err := be.Checkpoint("t"); err != nil || !ok || off != 7 {
		t.Fatalf("checkpoint after the refused bulk restore: %d %v %v, want 7", off, ok, err)
	}

	// Wipe drops a leftover staging bucket too.
	if err := be.(*boltBackend).db.Update(func(tx *bolt.Tx) error {
		st, err := tx.CreateBucketIfNotExists(stagingBucket)
		if err != nil {
			return err
		}
		_, err = st.CreateBucket([]byte("s"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := be.Wipe("s"); err != nil {
		t.Fatal(err)
	}
	noStaging(t, be, "wiped")
}

func TestBulkRestoreUnsupportedOnMemory(t *testing.T) {
	if _, err := NewBulkRestorer(NewMemoryBackend(), "s", BulkRestorerOptions{}); !errors.Is(err, ErrBulkUnsupported) {
		t.Fatalf("NewBulkRestorer on memory: %v, want ErrBulkUnsupported", err)
	}
}
