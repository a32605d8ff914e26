package kvstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The state files on disk are bytes from outside the process too: a crash, a full
// disk or an operator's copy can leave anything. These targets check the two readers
// of those bytes: the consistency check OpenBolt and InspectBolt run before bbolt sees
// a file, and the checkpoint of a store.

// smallBoltFile builds a bbolt file of small pages (so the fuzzer mutates a few KB):
// a bucket with a branch root over leaves, a nested bucket, an inline bucket, and a
// stored freelist (freelist true) or none (as eddy's NoFreelistSync files).
func smallBoltFile(tb testing.TB, freelist bool) []byte {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "seed.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: 1024, NoFreelistSync: !freelist, NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		s, err := tx.CreateBucket([]byte("s"))
		if err != nil {
			return err
		}
		for i := range 60 {
			if err := s.Put(fmt.Appendf(nil, "key-%03d", i), bytes.Repeat([]byte{'v'}, 20)); err != nil {
				return err
			}
		}
		nested, err := s.CreateBucket([]byte("nested"))
		if err != nil {
			return err
		}
		if err := nested.Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		inline, err := tx.CreateBucket([]byte("inline"))
		if err != nil {
			return err
		}
		if err := inline.Put([]byte("a"), []byte("b")); err != nil {
			return err
		}
		meta, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		return meta.Put([]byte("s"), binary.BigEndian.AppendUint64(nil, 7))
	})
	if err == nil {
		// A second transaction: the two meta pages differ, some pages are free.
		err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("s")).Delete([]byte("key-010")) })
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	// bbolt grows a file to 32 KiB at once; the pages past the high-water mark are
	// unused, and the fuzzer does better without them.
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	meta, _, err := readBoltMeta(f)
	if err != nil {
		tb.Fatal(err)
	}
	return data[:meta.hwm*uint64(meta.pageSize)]
}

// FuzzVerifyBoltFile: any file is either accepted by the consistency check or rejected
// with an error wrapping ErrDamaged (never a panic, never another error for a file that
// reads fine); and a file the check accepts, bbolt opens and reads in full without
// panicking or faulting: the check is what stands between a damaged file and a crash
// of the process.
func FuzzVerifyBoltFile(f *testing.F) {
	f.Add(smallBoltFile(f, true))
	f.Add(smallBoltFile(f, false))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "stores.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := VerifyBoltFile(path)
		if err != nil {
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("VerifyBoltFile: %v does not wrap ErrDamaged", err)
			}
			return
		}
		if err := readAllBolt(path); err != nil {
			t.Fatalf("VerifyBoltFile accepted a file that bbolt cannot read: %v", err)
		}
	})
}

// readAllBolt opens path with bbolt and reads every key of every bucket, nested ones
// included; a panic or fault is an error.
func readAllBolt(path string) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = fmt.Errorf("bbolt panicked: %v", r)
		}
	}()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	var walk func(b *bolt.Bucket, depth int) error
	walk = func(b *bolt.Bucket, depth int) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				if nb := b.Bucket(k); nb != nil {
					return walk(nb, depth+1)
				}
			}
			return nil
		})
	}
	return db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(b, 0) })
	})
}

// FuzzCheckpoint: whatever bytes a file holds as a store's checkpoint, the backend
// reads a checkpoint only from exactly 8 bytes (and then the offset they hold), and
// otherwise has none, so the store restores in full; InspectBolt agrees, and calls any
// other length damage.
func FuzzCheckpoint(f *testing.F) {
	f.Add(binary.BigEndian.AppendUint64(nil, 42))
	f.Add(binary.BigEndian.AppendUint64(nil, 1<<63))
	f.Add([]byte{0, 0, 0, 42})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 42})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, value []byte) {
		dir := t.TempDir()
		be, err := OpenBolt(dir, BoltOptions{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := be.Write(Batch{Writes: map[string][]Entry{"s": {{Key: []byte("k"), Value: []byte("v")}}}, Checkpoints: map[string]int64{"s": 1}}); err != nil {
			t.Fatal(err)
		}
		// Overwrite the checkpoint with the fuzzed bytes, as a damaged file would hold.
		err = be.(*boltBackend).db.Update(func(tx *bolt.Tx) error { return tx.Bucket(metaBucket).Put([]byte("s"), value) })
		if err != nil {
			t.Fatal(err)
		}
		off, ok, err := be.Checkpoint("s")
		if err != nil {
			t.Fatalf("Checkpoint: %v", err)
		}
		if ok != (len(value) == 8) || (ok && off != int64(binary.BigEndian.Uint64(value))) {
			t.Fatalf("Checkpoint of % x = %d, %v", value, off, ok)
		}
		if err := be.Close(); err != nil {
			t.Fatal(err)
		}
		info, err := InspectBolt(dir, InspectOptions{})
		if len(value) != 8 {
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("InspectBolt with a %d-byte checkpoint: %v; want ErrDamaged", len(value), err)
			}
			return
		}
		if err != nil {
			t.Fatalf("InspectBolt: %v", err)
		}
		if len(info.Stores) != 1 || !info.Stores[0].HasCheckpoint || info.Stores[0].Checkpoint != off {
			t.Fatalf("InspectBolt stores %+v; want s at checkpoint %d", info.Stores, off)
		}
	})
}

// The seeds of FuzzVerifyBoltFile are sound files, so the fuzzer starts on the path
// where the check accepts and bbolt reads.
func TestSmallBoltFileIsSound(t *testing.T) {
	for _, freelist := range []bool{true, false} {
		data := smallBoltFile(t, freelist)
		path := filepath.Join(t.TempDir(), "stores.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := VerifyBoltFile(path)
		if err != nil || st.Buckets < 4 || st.Keys < 60 {
			t.Fatalf("freelist %v: %d bytes: %+v, %v; want a sound file of 4+ buckets and 60+ keys", freelist, len(data), st, err)
		}
		if err := readAllBolt(path); err != nil {
			t.Fatal(err)
		}
	}
}
