package statestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// BoltFileName is the name of a task's store file inside its state directory.
const BoltFileName = "stores.db"

// metaBucket holds each store's checkpoint: store name → 8-byte big-endian offset.
var metaBucket = []byte("__eddy_meta")

// BoltOptions tunes a bbolt backend; the zero value is the safe default.
type BoltOptions struct {
	// NoSync skips the fsync after each write. The changelog, not the file, is the
	// durable copy of a store: a process crash loses nothing (the page cache survives),
	// and a machine crash can leave a damaged file, which OpenBolt detects, moves aside
	// and has restored from the changelog.
	NoSync bool
	// LockTimeout bounds the wait for the file lock held by another owner; default 2s.
	LockTimeout time.Duration
	// Logger receives a line when a damaged file is moved aside.
	Logger *slog.Logger
}

// OpenBolt opens (creating if needed) the bbolt file of one task in dir. A file locked
// by another owner yields an error wrapping ErrLocked within LockTimeout.
func OpenBolt(dir string, opts BoltOptions) (Backend, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("statestore: state dir %q: %w", dir, err)
	}
	path := filepath.Join(dir, BoltFileName)
	db, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: opts.LockTimeout, NoSync: opts.NoSync, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("statestore: %s: %w (waited %v; is another instance using this state dir?)", path, ErrLocked, opts.LockTimeout)
		}
		return nil, fmt.Errorf("statestore: open %s: %w", path, err)
	}
	return &boltBackend{db: db, path: path}, nil
}

type boltBackend struct {
	db     *bolt.DB
	path   string
	closed bool
}

func (b *boltBackend) Get(store string, key []byte) ([]byte, error) {
	var out []byte
	err := b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(store))
		if bk == nil {
			return nil
		}
		if v := bk.Get(key); v != nil {
			out = bytes.Clone(v)
		}
		return nil
	})
	return out, err
}

func (b *boltBackend) Iterate(store string, from, to []byte) (BytesIterator, error) {
	tx, err := b.db.Begin(false)
	if err != nil {
		return nil, err
	}
	bk := tx.Bucket([]byte(store))
	if bk == nil {
		_ = tx.Rollback()
		return &sliceIterator{}, nil
	}
	return &boltIterator{tx: tx, c: bk.Cursor(), from: from, to: to}, nil
}

type boltIterator struct {
	tx       *bolt.Tx
	c        *bolt.Cursor
	from, to []byte
	k, v     []byte
	started  bool
	done     bool
}

func (it *boltIterator) Next() bool {
	if it.done {
		return false
	}
	if !it.started {
		it.started = true
		if it.from == nil {
			it.k, it.v = it.c.First()
		} else {
			it.k, it.v = it.c.Seek(it.from)
		}
	} else {
		it.k, it.v = it.c.Next()
	}
	if it.k == nil || (it.to != nil && bytes.Compare(it.k, it.to) >= 0) {
		it.done = true
		return false
	}
	return true
}

func (it *boltIterator) Key() []byte   { return it.k }
func (it *boltIterator) Value() []byte { return it.v }
func (it *boltIterator) Err() error    { return nil }

func (it *boltIterator) Close() error {
	it.done = true
	if it.tx == nil {
		return nil
	}
	err := it.tx.Rollback()
	it.tx = nil
	return err
}

func (b *boltBackend) Count(store string) (int64, error) {
	var n int64
	err := b.db.View(func(tx *bolt.Tx) error {
		if bk := tx.Bucket([]byte(store)); bk != nil {
			n = int64(bk.Stats().KeyN)
		}
		return nil
	})
	return n, err
}

func (b *boltBackend) Write(batch Batch) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		for store, entries := range batch.Writes {
			bk, err := tx.CreateBucketIfNotExists([]byte(store))
			if err != nil {
				return err
			}
			for _, e := range entries {
				if e.Value == nil {
					err = bk.Delete(e.Key)
				} else {
					err = bk.Put(e.Key, e.Value)
				}
				if err != nil {
					return fmt.Errorf("store %q: %w", store, err)
				}
			}
		}
		if len(batch.Checkpoints) == 0 {
			return nil
		}
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		for store, off := range batch.Checkpoints {
			if err := meta.Put([]byte(store), binary.BigEndian.AppendUint64(nil, uint64(off))); err != nil {
				return err
			}
		}
		return nil
	})
}

func (b *boltBackend) Checkpoint(store string) (int64, bool, error) {
	var off int64
	var ok bool
	err := b.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(metaBucket)
		if meta == nil {
			return nil
		}
		if v := meta.Get([]byte(store)); len(v) == 8 {
			off, ok = int64(binary.BigEndian.Uint64(v)), true
		}
		return nil
	})
	return off, ok, err
}

func (b *boltBackend) Wipe(store string) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte(store)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
		if meta := tx.Bucket(metaBucket); meta != nil {
			return meta.Delete([]byte(store))
		}
		return nil
	})
}

func (b *boltBackend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	return b.db.Close()
}
