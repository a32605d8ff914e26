package kvstore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// damageFixture writes store "s" with 2000 keys (a two-level tree: a branch root over
// leaves) at checkpoint 2, after a first write at checkpoint 1, and leaves the file
// closed cleanly or abandoned as by a crash.
func damageFixture(t *testing.T, clean bool) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	b, _ := openTestBolt(t, dir, BoltOptions{})
	put(t, b, "s", 1, "first", "write")
	var es []Entry
	for i := range 2000 {
		es = append(es, Entry{Key: fmt.Appendf(nil, "key-%06d", i), Value: fmt.Appendf(nil, "value-%06d-%s", i, strings.Repeat("x", 20))})
	}
	if err := b.Write(Batch{Writes: map[string][]Entry{"s": es}, Checkpoints: map[string]int64{"s": 2}}); err != nil {
		t.Fatal(err)
	}
	if clean {
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	} else {
		abandon(t, b)
	}
	return dir, filepath.Join(dir, BoltFileName)
}

// pagesOf returns the page size, the root page of bucket s (a branch) and one leaf of it.
func pagesOf(t *testing.T, path string) (ps int64, branch, leaf uint64) {
	t.Helper()
	db, err := bolt.Open(path, 0o644, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		branch = uint64(tx.Bucket([]byte("s")).Root())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ps = int64(db.Info().PageSize)
	raw := readAt(t, path, int64(branch)*ps, int(ps))
	if ne.Uint16(raw[8:]) != branchPageFlag {
		t.Fatalf("root of s is not a branch page: flags %#x", ne.Uint16(raw[8:]))
	}
	leaf = ne.Uint64(raw[pageHeaderSize+8:]) // the first element's child
	if raw := readAt(t, path, int64(leaf)*ps, pageHeaderSize); ne.Uint16(raw[8:]) != leafPageFlag {
		t.Fatalf("child of the root is not a leaf: flags %#x", ne.Uint16(raw[8:]))
	}
	return ps, branch, leaf
}

func readAt(t *testing.T, path string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	return buf
}

func writeAt(t *testing.T, path string, off int64, p []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

// expectRecreated opens dir and checks that the damage was detected, logged, the file
// moved aside unchanged, and the backend is empty.
func expectRecreated(t *testing.T, dir string, opts BoltOptions, want CloseState) OpenReport {
	t.Helper()
	path := filepath.Join(dir, BoltFileName)
	damaged, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	opts.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	b, rep := openTestBolt(t, dir, opts)
	if !rep.Recreated || rep.Previous != want || rep.Reason == "" {
		t.Fatalf("damage not detected: report %+v", rep)
	}
	t.Logf("detected: %s", rep.Reason)
	if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "moved aside") ||
		!strings.Contains(logs.String(), rep.MovedTo) {
		t.Errorf("damage not logged at error level with the new name: %s", logs.String())
	}
	moved, err := os.ReadFile(rep.MovedTo)
	if err != nil || !bytes.Equal(moved, damaged) {
		t.Fatalf("damaged file not moved aside intact to %s: %v", rep.MovedTo, err)
	}
	if !strings.HasPrefix(filepath.Base(rep.MovedTo), "stores.db.damaged-") {
		t.Errorf("moved to %s", rep.MovedTo)
	}
	for _, store := range []string{"s", "x"} {
		if m, _, ok := dump(t, b, store); len(m) != 0 || ok {
			t.Fatalf("recreated store %s is not empty: %d keys, checkpoint %v", store, len(m), ok)
		}
	}
	// The new file works and survives a reopen.
	put(t, b, "s", 9, "new", "value")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	first := rep
	b, rep = openTestBolt(t, dir, BoltOptions{})
	if rep.Recreated || rep.Previous != StateClean {
		t.Fatalf("reopen of the new file: %+v", rep)
	}
	if m, off, _ := dump(t, b, "s"); len(m) != 1 || off != 9 {
		t.Fatalf("new file: %v @%d", m, off)
	}
	return first
}

func TestBoltDamageDetectedAtOpen(t *testing.T) {
	corruptions := []struct {
		name    string
		corrupt func(t *testing.T, path string)
	}{
		{"both meta pages", func(t *testing.T, path string) {
			ps, _, _ := pagesOf(t, path)
			writeAt(t, path, pageHeaderSize+4, []byte{0xde, 0xad}) // meta 0: version
			writeAt(t, path, ps+pageHeaderSize+40, []byte{0xff})   // meta 1: high-water mark (checksum)
		}},
		{"magic", func(t *testing.T, path string) {
			ps, _, _ := pagesOf(t, path)
			writeAt(t, path, pageHeaderSize, []byte("junk"))
			writeAt(t, path, ps+pageHeaderSize, []byte("junk"))
		}},
		{"leaf page id", func(t *testing.T, path string) {
			ps, _, leaf := pagesOf(t, path)
			writeAt(t, path, int64(leaf)*ps, []byte{0x77, 0x77, 0x77})
		}},
		{"leaf element bounds", func(t *testing.T, path string) {
			ps, _, leaf := pagesOf(t, path)
			writeAt(t, path, int64(leaf)*ps+pageHeaderSize+elemSize*3+8, []byte{0xff, 0xff, 0x00, 0x00}) // ksize of element 3
		}},
		{"leaf key order", func(t *testing.T, path string) {
			ps, _, leaf := pagesOf(t, path)
			raw := readAt(t, path, int64(leaf)*ps, int(ps))
			off := pageHeaderSize + elemSize*5
			pos := int(ne.Uint32(raw[off+4:]))
			writeAt(t, path, int64(leaf)*ps+int64(off+pos), []byte("zzz")) // key 5 > key 6
		}},
		{"branch child beyond the file", func(t *testing.T, path string) {
			ps, branch, _ := pagesOf(t, path)
			writeAt(t, path, int64(branch)*ps+pageHeaderSize+elemSize+8, []byte{0, 0, 0, 0, 0, 1, 0, 0}) // element 1's pgid
		}},
		{"branch page type", func(t *testing.T, path string) {
			ps, branch, _ := pagesOf(t, path)
			writeAt(t, path, int64(branch)*ps+8, []byte{0x10}) // flags: freelist
		}},
		{"truncated", func(t *testing.T, path string) {
			f, _ := os.Open(path)
			meta, _, err := readBoltMeta(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, int64(meta.hwm*2/3)*int64(meta.pageSize)); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage", func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			if err := os.WriteFile(path, bytes.Repeat([]byte{0x5a, 0xa5, 0x01}, int(fi.Size())/3), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range corruptions {
		t.Run(c.name+"/after a crash", func(t *testing.T) {
			dir, path := damageFixture(t, false)
			if st, err := VerifyBoltFile(path); err != nil || st.Keys < 2000 || st.Buckets < 3 {
				t.Fatalf("VerifyBoltFile of the sound file: %+v %v", st, err)
			}
			c.corrupt(t, path)
			rep := expectRecreated(t, dir, BoltOptions{}, StateCrashed)
			if _, err := VerifyBoltFile(rep.MovedTo); !errors.Is(err, ErrDamaged) {
				t.Errorf("VerifyBoltFile of the moved-aside file: %v; want ErrDamaged", err)
			}
		})
		t.Run(c.name+"/VerifyAlways", func(t *testing.T) {
			dir, path := damageFixture(t, true)
			c.corrupt(t, path)
			expectRecreated(t, dir, BoltOptions{Verify: VerifyAlways}, StateClean)
		})
	}
}

// After a clean close only the cheap checks run: they catch meta, freelist and size
// damage at open.
func TestBoltCheapChecksAfterCleanClose(t *testing.T) {
	t.Run("meta", func(t *testing.T) {
		dir, path := damageFixture(t, true)
		ps, _, _ := pagesOf(t, path)
		writeAt(t, path, pageHeaderSize+20, []byte{1, 2, 3})
		writeAt(t, path, ps+pageHeaderSize+20, []byte{1, 2, 3})
		expectRecreated(t, dir, BoltOptions{}, StateClean)
	})
	t.Run("freelist", func(t *testing.T) {
		dir, path := damageFixture(t, true)
		f, _ := os.Open(path)
		meta, _, err := readBoltMeta(f)
		f.Close()
		if err != nil || meta.freelist == noFreelist {
			t.Fatalf("meta %+v %v", meta, err)
		}
		writeAt(t, path, int64(meta.freelist)*int64(meta.pageSize)+8, []byte{0x02}) // flags: leaf
		expectRecreated(t, dir, BoltOptions{}, StateClean)
	})
	t.Run("truncated", func(t *testing.T) {
		dir, path := damageFixture(t, true)
		// Below the pages in use (the file is longer: bbolt extends it ahead).
		f, _ := os.Open(path)
		meta, _, err := readBoltMeta(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, int64(meta.hwm/2)*int64(meta.pageSize)); err != nil {
			t.Fatal(err)
		}
		expectRecreated(t, dir, BoltOptions{}, StateClean)
	})
}

// A damaged data page that the cheap checks at open cannot see is found when read: the
// backend returns ErrDamaged instead of crashing (bbolt panics, or faults reading past
// its mapping), records it, and the next open moves the file aside.
func TestBoltDamageFoundWhileInUse(t *testing.T) {
	for _, c := range []struct {
		name    string
		corrupt func(t *testing.T, path string)
	}{
		{"leaf page id (bbolt panics)", func(t *testing.T, path string) {
			ps, _, leaf := pagesOf(t, path)
			writeAt(t, path, int64(leaf)*ps, []byte{0x77, 0x77, 0x77})
		}},
		{"branch child past bbolt's largest map (bbolt panics)", func(t *testing.T, path string) {
			ps, branch, _ := pagesOf(t, path)
			writeAt(t, path, int64(branch)*ps+pageHeaderSize+8, []byte{0, 0, 0, 0, 0, 0x10, 0, 0})
		}},
		{"branch child outside the mapping (memory fault)", func(t *testing.T, path string) {
			ps, branch, _ := pagesOf(t, path)
			writeAt(t, path, int64(branch)*ps+pageHeaderSize+8, []byte{0, 0, 0, 0x40, 0, 0, 0, 0}) // page 2^30: 4 TiB in
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, path := damageFixture(t, true)
			c.corrupt(t, path)
			var logs bytes.Buffer
			b, rep := openTestBolt(t, dir, BoltOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			if rep.Recreated || rep.Verified {
				t.Fatalf("cheap checks should pass: %+v", rep)
			}
			_, err := b.Get("s", []byte("key-000000"))
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("Get on a damaged page: %v; want ErrDamaged", err)
			}
			if !strings.Contains(logs.String(), "damaged while in use") {
				t.Errorf("not logged: %s", logs.String())
			}
			// Every later call fails the same way; Close does not record a clean close.
			if _, err := b.Get("other", []byte("k")); !errors.Is(err, ErrDamaged) {
				t.Fatalf("later Get: %v", err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			expectRecreated(t, dir, BoltOptions{}, StateDamaged)
		})
	}
}

// bbolt keeps two meta pages and falls back to the older when the newer is damaged: the
// file then holds the previous transaction, with its own checkpoint. It is behind the
// changelog, never ahead, and restore replays the difference.
func TestBoltNewestMetaDamagedFallsBackConsistently(t *testing.T) {
	dir, path := damageFixture(t, true)
	f, _ := os.Open(path)
	meta, _, _ := readBoltMeta(f)
	f.Close()
	newest := int64(meta.txid % 2)
	writeAt(t, path, newest*int64(meta.pageSize)+pageHeaderSize+48, []byte{0xee}) // txid: checksum fails
	b, rep := openTestBolt(t, dir, BoltOptions{})
	if rep.Recreated || !rep.Verified {
		t.Fatalf("report %+v; want a full check (the clean record no longer matches) and no recreation", rep)
	}
	m, off, _ := dump(t, b, "s")
	if off != 1 || len(m) != 1 || m["first"] != "write" {
		t.Fatalf("after falling back: %d keys at checkpoint %d; want the first write at checkpoint 1", len(m), off)
	}
}

func TestBoltKeepDamaged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, BoltFileName)
	for i := range 3 {
		if err := os.WriteFile(path, bytes.Repeat([]byte{byte(i)}, 9000), 0o644); err != nil {
			t.Fatal(err)
		}
		b, rep := openTestBolt(t, dir, BoltOptions{KeepDamaged: 2})
		if !rep.Recreated {
			t.Fatalf("garbage %d not detected", i)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	kept, _ := filepath.Glob(filepath.Join(dir, damagedPrefix+"*"))
	if len(kept) != 2 {
		t.Fatalf("kept %v; want the 2 newest", kept)
	}
	for i, name := range kept {
		data, _ := os.ReadFile(name)
		if len(data) == 0 || data[0] == 0 {
			t.Errorf("kept %s (#%d) holds the oldest file", name, i)
		}
	}
	if err := os.WriteFile(path, []byte("junk junk junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, rep := openTestBolt(t, dir, BoltOptions{KeepDamaged: -1})
	if !rep.Recreated || rep.MovedTo != "" {
		t.Fatalf("KeepDamaged -1: %+v", rep)
	}
}
