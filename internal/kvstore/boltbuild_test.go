package kvstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// checkBoltFile runs bbolt's own consistency check and eddy's pread verifier on the
// backend's file.
func checkBoltFile(t *testing.T, be Backend, what string) {
	t.Helper()
	b := be.(*boltBackend)
	err := b.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: bbolt check: %v", what, err)
	}
	if _, err := verifyBoltFile(b.path); err != nil {
		t.Fatalf("%s: verifier: %v", what, err)
	}
}

// otherStores fills the file with what a file build must copy: another store with
// small and page-sized values and a sequence, a store with nested buckets, and
// checkpoints and empty keys of other stores.
func otherStores(t *testing.T, be Backend) func(t *testing.T, be Backend, what string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	other := map[string]string{"": "empty-key-value"}
	var es []Entry
	for i := range 700 {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, rng.IntN(120))
		if i%97 == 0 {
			v = bytes.Repeat([]byte{'L'}, 5000+rng.IntN(9000)) // overflow pages
		}
		k := fmt.Sprintf("o%05d", i)
		other[k] = string(v)
		es = append(es, Entry{Key: []byte(k), Value: v})
	}
	es = append(es, Entry{Key: []byte{}, Value: []byte(other[""])})
	SortEntries(es)
	if err := be.Write(Batch{Writes: map[string][]Entry{"other": es}, Checkpoints: map[string]int64{"other": 42, "z-empty": 3}}); err != nil {
		t.Fatal(err)
	}
	err := be.(*boltBackend).db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte("other"))
		if err := bk.SetSequence(99); err != nil {
			return err
		}
		nest, err := tx.CreateBucket([]byte("nested"))
		if err != nil {
			return err
		}
		for s := range 3 {
			seg, err := nest.CreateBucket([]byte("seg" + strconv.Itoa(s)))
			if err != nil {
				return err
			}
			for i := range 300 * s {
				if err := seg.Put(fmt.Appendf(nil, "k%04d", i), fmt.Appendf(nil, "v%d-%d", s, i)); err != nil {
					return err
				}
			}
		}
		return nest.Put([]byte("plain"), []byte{})
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(t *testing.T, be Backend, what string) {
		t.Helper()
		got, cp, ok := dump(t, be, "other")
		if !ok || cp != 42 {
			t.Fatalf("%s: other store's checkpoint %d %v, want 42", what, cp, ok)
		}
		sameMap(t, what+": other store", got, other)
		if cp, ok, err := be.Checkpoint("z-empty"); err != nil || !ok || cp != 3 {
			t.Fatalf("%s: z-empty's checkpoint %d %v %v, want 3", what, cp, ok, err)
		}
		err := be.(*boltBackend).db.View(func(tx *bolt.Tx) error {
			if s := tx.Bucket([]byte("other")).Sequence(); s != 99 {
				return fmt.Errorf("other's sequence %d, want 99", s)
			}
			nest := tx.Bucket([]byte("nested"))
			if nest == nil {
				return errors.New("nested bucket gone")
			}
			if v := nest.Get([]byte("plain")); v == nil || len(v) != 0 {
				return fmt.Errorf("nested/plain = %q, want an empty value", v)
			}
			for s := range 3 {
				seg := nest.Bucket([]byte("seg" + strconv.Itoa(s)))
				if seg == nil {
					return fmt.Errorf("seg%d gone", s)
				}
				if got := seg.Stats().KeyN; got != 300*s {
					return fmt.Errorf("seg%d has %d keys, want %d", s, got, 300*s)
				}
				if s > 0 && string(seg.Get([]byte("k0001"))) != fmt.Sprintf("v%d-1", s) {
					return fmt.Errorf("seg%d/k0001 = %q", s, seg.Get([]byte("k0001")))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// fileID is path's file, to tell with os.SameFile whether a file build renamed a new
// one over it.
func fileID(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// TestFileBuildMatchesPlainReplay: a store restored from empty by a new file (keys of
// every size, large values, duplicates, tombstones, the empty key, spilled runs) equals
// a plain replay of its changelog, has its checkpoint, leaves the file's other buckets
// as they were, passes bbolt's check, takes writes afterwards and reopens.
func TestFileBuildMatchesPlainReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	ctx := context.Background()
	for round := range 12 {
		n := 1 + rng.IntN(3000)
		records := randomChangelog(rng, n, 1+rng.IntN(1500))
		switch round % 3 {
		case 1: // long keys: few per page, a deep tree, branch pages with overflow
			for i := range records {
				records[i].Key = append(bytes.Repeat([]byte{'K'}, rng.IntN(6000)), records[i].Key...)
			}
		case 2: // values larger than a page
			for i := range records {
				if records[i].Value != nil && rng.IntN(10) == 0 {
					records[i].Value = bytes.Repeat([]byte{'V'}, 4000+rng.IntN(20000))
				}
			}
		}
		replayed := plainReplay(t, records)
		for _, maxBytes := range []int{1 << 30, 1 + rng.IntN(3000)} {
			want := maps.Clone(replayed)
			name := fmt.Sprintf("round %d, %d records, %d keys, budget %d", round, n, len(want), maxBytes)
			dir := t.TempDir()
			be, _ := openTestBolt(t, dir, BoltOptions{})
			checkOthers := otherStores(t, be)
			before := fileID(t, filepath.Join(dir, BoltFileName))
			br, err := NewBulkRestorer(be, "s", BulkRestorerOptions{MaxBytes: maxBytes, Load: LoadNewFile})
			if err != nil {
				t.Fatal(err)
			}
			feed(t, rng, records, 0, true, br.Add)
			if maxBytes < 1<<30 && br.Runs() == 0 && len(want) > 50 {
				t.Fatalf("%s: no run spilled (%d bytes gathered, %d records)", name, br.bytes, len(br.gathered))
			}
			if err := br.Finish(ctx); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if os.SameFile(before, fileID(t, filepath.Join(dir, BoltFileName))) {
				t.Fatalf("%s: the file was not rebuilt", name)
			}
			sameMap(t, name, dumpOK(t, be, n), want)
			checkOthers(t, be, name)
			checkBoltFile(t, be, name)
			// bbolt goes on writing the built file: overwrite, delete and add keys.
			var es []Entry
			for k := range want {
				if rng.IntN(3) == 0 {
					e := Entry{Key: []byte(k)}
					if rng.IntN(2) == 0 {
						e.Value = []byte("new")
						want[k] = "new"
					} else {
						delete(want, k)
					}
					es = append(es, e)
				}
			}
			for i := range 200 {
				k := fmt.Sprintf("added-%d", i)
				es, want[k] = append(es, Entry{Key: []byte(k), Value: []byte(k)}), k
			}
			SortEntries(es)
			if err := be.Write(Batch{Writes: map[string][]Entry{"s": es}, Checkpoints: map[string]int64{"s": int64(n + 1)}}); err != nil {
				t.Fatalf("%s: write after the build: %v", name, err)
			}
			checkBoltFile(t, be, name+", written")
			if err := be.Close(); err != nil {
				t.Fatal(err)
			}
			be, rep := openTestBolt(t, dir, BoltOptions{Verify: VerifyAlways})
			if rep.Recreated {
				t.Fatalf("%s: reopened file recreated: %s", name, rep.Reason)
			}
			sameMap(t, name+", reopened", dumpOK(t, be, n+1), want)
			checkOthers(t, be, name+", reopened")
		}
	}
}

// TestFileBuildEmptyStore: a changelog of tombstones only restores an empty store with
// its checkpoint.
func TestFileBuildEmptyStore(t *testing.T) {
	dir := t.TempDir()
	be, _ := openTestBolt(t, dir, BoltOptions{})
	br, err := NewBulkRestorer(be, "s", BulkRestorerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := br.Add([]Entry{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("a")}, {Key: []byte("b")}}, 3); err != nil {
		t.Fatal(err)
	}
	if err := br.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m := dumpOK(t, be, 3); len(m) != 0 {
		t.Fatalf("store has %v, want nothing", m)
	}
	checkBoltFile(t, be, "empty store")
	put(t, be, "s", 4, "c", "3")
	if m := dumpOK(t, be, 4); len(m) != 1 || m["c"] != "3" {
		t.Fatalf("after a write: %v", m)
	}
}

// TestFileBuildFailsBeforeSwap: a build that fails after its file is written (an
// injected error where a crash could come) leaves the old file in use, the store empty
// with no checkpoint, the other stores as they were, no build file; the next restore
// succeeds.
func TestFileBuildFailsBeforeSwap(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 9))
	records := randomChangelog(rng, 2000, 500)
	want := plainReplay(t, records)
	dir := t.TempDir()
	be, _ := openTestBolt(t, dir, BoltOptions{})
	checkOthers := otherStores(t, be)
	path := filepath.Join(dir, BoltFileName)
	before := fileID(t, path)
	injected := errors.New("injected: crash before the swap")
	var sawBuilt bool
	be.(*boltBackend).buildHook = func(stage string) error {
		if _, err := os.Stat(path + buildFileSuffix); err != nil {
			t.Errorf("hook at %s: no build file: %v", stage, err)
		}
		sawBuilt = true
		return injected
	}
	br, err := NewBulkRestorer(be, "s", BulkRestorerOptions{MaxBytes: 3000, Load: LoadNewFile})
	if err != nil {
		t.Fatal(err)
	}
	feed(t, rng, records, 0, true, br.Add)
	if err := br.Finish(context.Background()); !errors.Is(err, injected) {
		t.Fatalf("Finish: %v, want the injected error", err)
	}
	if !sawBuilt {
		t.Fatal("the hook did not run")
	}
	if !os.SameFile(before, fileID(t, path)) {
		t.Fatal("a failed build swapped its file in")
	}
	if _, err := os.Stat(path + buildFileSuffix); !os.IsNotExist(err) {
		t.Fatalf("build file left: %v", err)
	}
	if m, cp, ok := dump(t, be, "s"); len(m) > 0 || ok {
		t.Fatalf("store after the failed build: %d keys, checkpoint %d %v; want empty, none", len(m), cp, ok)
	}
	checkOthers(t, be, "after the failed build")
	checkBoltFile(t, be, "after the failed build")

	// What a crash between the build and the swap leaves: the next restore removes it.
	if err := os.WriteFile(path+buildFileSuffix, []byte("half a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	be.(*boltBackend).buildHook = nil
	br, err = NewBulkRestorer(be, "s", BulkRestorerOptions{MaxBytes: 3000, Load: LoadNewFile})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + buildFileSuffix); !os.IsNotExist(err) {
		t.Fatalf("leftover build file not removed: %v", err)
	}
	feed(t, rng, records, 0, true, br.Add)
	if err := br.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameMap(t, "restored after the failed build", dumpOK(t, be, len(records)), want)
	checkOthers(t, be, "restored after the failed build")
}

// TestFileBuildOnlyWhenSmaller: a file larger than the data to load is not copied:
// the store is loaded in place (same file), and equals the replay all the same.
func TestFileBuildOnlyWhenSmaller(t *testing.T) {
	dir := t.TempDir()
	be, _ := openTestBolt(t, dir, BoltOptions{})
	checkOthers := otherStores(t, be)
	path := filepath.Join(dir, BoltFileName)
	before := fileID(t, path)
	records := []Entry{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}
	br, err := NewBulkRestorer(be, "s", BulkRestorerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := br.Add(records, 2); err != nil {
		t.Fatal(err)
	}
	if err := br.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, fileID(t, path)) {
		t.Fatal("a file larger than the data was rebuilt")
	}
	sameMap(t, "loaded in place", dumpOK(t, be, 2), map[string]string{"a": "1", "b": "2"})
	checkOthers(t, be, "loaded in place")
}

// buildChangelog is the deterministic changelog the file-build crash test restores.
func buildChangelog() []Entry {
	rng := rand.New(rand.NewPCG(11, 12))
	es := make([]Entry, 60_000)
	for i := range es {
		es[i] = Entry{Key: fmt.Appendf(nil, "k%08d", rng.IntN(40_000))}
		if rng.IntN(10) > 0 {
			es[i].Value = bytes.Repeat([]byte{byte('a' + i%26)}, 100+rng.IntN(400))
		}
	}
	return es
}

// childBuild restores store "s" from empty by a file build in dir (which holds store
// "other" with checkpoint 42): it prints "building" before the load and "done" after.
// With hold, it stops between writing the build file and the swap (prints "built"),
// waiting to be killed.
func childBuild(dir string, hold bool) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "build child:", err)
		os.Exit(1)
	}
	be, err := OpenBolt(dir, BoltOptions{})
	if err != nil {
		fail(err)
	}
	if hold {
		be.(*boltBackend).buildHook = func(string) error {
			fmt.Println("built")
			select {}
		}
	}
	if err := be.Wipe("s"); err != nil {
		fail(err)
	}
	br, err := NewBulkRestorer(be, "s", BulkRestorerOptions{MaxBytes: 1 << 20, Load: LoadNewFile})
	if err != nil {
		fail(err)
	}
	records := buildChangelog()
	for i := 0; i < len(records); i += 1000 {
		if err := br.Add(records[i:i+1000], int64(i+1000)); err != nil {
			fail(err)
		}
	}
	fmt.Println("building")
	if err := br.Finish(context.Background()); err != nil {
		fail(err)
	}
	fmt.Println("done")
	os.Exit(0)
}

// TestFileBuildKilled kills a process restoring a store by a file build, at random
// moments of the build and once between the build and the swap: the state dir then
// holds either the old file (the store empty with no checkpoint) or the new one (the
// store complete with its checkpoint), the other store as it was, and passes the
// consistency check.
func TestFileBuildKilled(t *testing.T) {
	dir := t.TempDir()
	be, _ := openTestBolt(t, dir, BoltOptions{})
	checkOthers := otherStores(t, be)
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	records := buildChangelog()
	want := map[string]string{}
	for _, e := range records {
		if e.Value == nil {
			delete(want, string(e.Key))
		} else {
			want[string(e.Key)] = string(e.Value)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 3))
	var sawOld, sawNew int
	for round := range 6 {
		hold := round == 0
		env := childEnv + "_HOLD=0"
		if hold {
			env = childEnv + "_HOLD=1"
		}
		cmd, out := startChild(t, "build", dir, env)
		lines := make(chan string, 4)
		go func() {
			defer close(lines)
			for out.Scan() {
				lines <- out.Text()
			}
		}()
		waitFor := "building"
		if hold {
			waitFor = "built"
		}
		for line := range lines {
			if line == waitFor {
				break
			}
		}
		if !hold {
			time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		done := false
		for line := range lines {
			done = done || line == "done"
		}
		_ = cmd.Wait()
		be, rep := openTestBolt(t, dir, BoltOptions{})
		if rep.Recreated {
			t.Fatalf("round %d: file recreated: %s", round, rep.Reason)
		}
		checkBoltFile(t, be, fmt.Sprintf("round %d", round))
		checkOthers(t, be, fmt.Sprintf("round %d", round))
		got, cp, ok := dump(t, be, "s")
		switch {
		case !ok && len(got) == 0:
			sawOld++
			if done {
				t.Fatalf("round %d: the build said done, the file is the old one", round)
			}
			if hold {
				if _, err := os.Stat(filepath.Join(dir, BoltFileName+buildFileSuffix)); err != nil {
					t.Fatalf("round %d: killed before the swap, but no build file: %v", round, err)
				}
			}
		case ok && cp == int64(len(records)):
			sawNew++
			sameMap(t, fmt.Sprintf("round %d", round), got, want)
			if hold {
				t.Fatalf("round %d: killed before the swap, yet the new file is in place", round)
			}
		default:
			t.Fatalf("round %d: store s has %d keys, checkpoint %d (%v): neither the old nor the new file", round, len(got), cp, ok)
		}
		t.Logf("round %d: %s file after the kill (previous close %s)", round, map[bool]string{true: "new", false: "old"}[ok], rep.Previous)
		if err := be.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if sawOld == 0 {
		t.Fatal("no kill left the old file")
	}
}

// TestFileBuildTail: a store restored to a prefix of its changelog, then the rest (the
// tail) merged in by NewBulkTailRestorer (tombstones deleting old keys, the empty key,
// spilled runs), equals a plain replay of the whole changelog, with the tail's
// checkpoint and the file's other buckets as they were; an interrupted tail leaves the
// store at its old checkpoint with its old keys.
func TestFileBuildTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	ctx := context.Background()
	for round := range 10 {
		n := 2 + rng.IntN(3000)
		records := randomChangelog(rng, n, 1+rng.IntN(800))
		split := 1 + rng.IntN(n-1)
		want := plainReplay(t, records)
		head := plainReplay(t, records[:split])
		for _, maxBytes := range []int{1 << 30, 1 + rng.IntN(3000)} {
			name := fmt.Sprintf("round %d, %d records, tail from %d, budget %d", round, n, split, maxBytes)
			dir := t.TempDir()
			be, _ := openTestBolt(t, dir, BoltOptions{})
			checkOthers := otherStores(t, be)
			r := NewRestorer(be, "s", RestorerOptions{})
			feed(t, rng, records[:split], 0, false, r.Add)
			if err := r.Finish(); err != nil {
				t.Fatal(err)
			}
			sameMap(t, name+", head", dumpOK(t, be, split), head)

			// Interrupted: nothing changes.
			br, err := NewBulkTailRestorer(be, "s", BulkRestorerOptions{MaxBytes: maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			feed(t, rng, records, split, true, br.Add)
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if err := br.Finish(cctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: cancelled tail: %v", name, err)
			}
			sameMap(t, name+", cancelled tail", dumpOK(t, be, split), head)

			br, err = NewBulkTailRestorer(be, "s", BulkRestorerOptions{MaxBytes: maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			feed(t, rng, records, split, true, br.Add)
			if err := br.Finish(ctx); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			sameMap(t, name, dumpOK(t, be, n), want)
			checkOthers(t, be, name)
			checkBoltFile(t, be, name)
		}
	}
	if _, err := NewBulkTailRestorer(NewMemoryBackend(), "s", BulkRestorerOptions{}); !errors.Is(err, ErrBulkUnsupported) {
		t.Fatalf("tail restorer on memory: %v, want ErrBulkUnsupported", err)
	}
}

// TestBulkTailKeys: a tail may be merged into a bbolt store of plain keys, not into one
// with nested buckets nor on the memory backend; the key count is the store's.
func TestBulkTailKeys(t *testing.T) {
	be, _ := openTestBolt(t, t.TempDir(), BoltOptions{})
	otherStores(t, be)
	if n, ok, err := BulkTailKeys(be, "other"); err != nil || !ok || n != 700 {
		t.Fatalf("other: %d keys, ok %v, %v; want 700, true", n, ok, err)
	}
	if _, ok, err := BulkTailKeys(be, "nested"); err != nil || ok {
		t.Fatalf("nested: ok %v, %v; want false", ok, err)
	}
	if n, ok, err := BulkTailKeys(be, "absent"); err != nil || !ok || n != 0 {
		t.Fatalf("absent: %d keys, ok %v, %v; want 0, true", n, ok, err)
	}
	if _, ok, _ := BulkTailKeys(NewMemoryBackend(), "s"); ok {
		t.Fatal("memory backend: ok")
	}
}
