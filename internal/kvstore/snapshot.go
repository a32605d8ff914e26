package kvstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrBusy is wrapped by the error of a snapshot read (GetAt, ScanAt) that found the
// store file held for a rebuild: a restore that builds the store as a new file and
// swaps it in (buildLoad, buildTail) holds the backend's write lock for the whole
// build, minutes for a large store, and a read would wait for it. Ask again later.
var ErrBusy = errors.New("statestore: store file held by a rebuild")

// snapshotWait is how long a snapshot read tries for the backend's read lock before it
// gives ErrBusy: the write lock's short holders (beginUnsynced, endUnsynced, Close)
// release it within milliseconds, a rebuild not for a long time.
const snapshotWait = 50 * time.Millisecond

// Snapshot is what a snapshot read saw of a store besides its data: the checkpoint
// (the changelog offset the store reflects, the next offset to read), false when the
// store has none.
type Snapshot struct {
	Checkpoint    int64
	HasCheckpoint bool
}

// GetAt reads key of store and the store's checkpoint from one consistent state, for a
// reader other than the store's writer (a stale interactive query on a standby replica
// or a restoring task). On a bbolt backend both come from one read transaction: each
// Write applies its entries and its checkpoints atomically, so the value is the
// store's exactly as of the checkpoint, never a batch half applied. Other backends
// read the checkpoint first: the value is as of the checkpoint or later. It does not
// wait for a rebuild of the file (ErrBusy).
func GetAt(b Backend, store string, key []byte) ([]byte, Snapshot, error) {
	bb, ok := b.(*boltBackend)
	if !ok {
		snap, err := snapshotCheckpoint(b, store)
		if err != nil {
			return nil, snap, err
		}
		v, err := b.Get(store, key)
		return v, snap, err
	}
	var out []byte
	snap, err := bb.viewNoWait("snapshot get", store, func(tx *bolt.Tx) error {
		bk, k := tx.Bucket([]byte(store)), key
		if len(key) == 0 {
			bk, k = tx.Bucket(emptyKeyBucket), []byte(store)
		}
		if bk != nil {
			if v := bk.Get(k); v != nil {
				out = bytes.Clone(v)
			}
		}
		return nil
	})
	return out, snap, err
}

// ScanAt appends the entries of store in [from, to) (nil bounds open) to out, in key
// order, and returns the checkpoint of the same state, as GetAt does. A bbolt backend
// reads the whole range in one read transaction (Iterate reads in chunks of their
// own), so the caller bounds the range it asks for.
func ScanAt(b Backend, store string, from, to []byte, out *[]Entry) (Snapshot, error) {
	bb, ok := b.(*boltBackend)
	if !ok {
		snap, err := snapshotCheckpoint(b, store)
		if err != nil {
			return snap, err
		}
		it, err := b.Iterate(store, from, to)
		if err != nil {
			return snap, err
		}
		defer it.Close()
		for it.Next() {
			*out = append(*out, Entry{Key: bytes.Clone(it.Key()), Value: bytes.Clone(it.Value())})
		}
		return snap, it.Err()
	}
	return bb.viewNoWait("snapshot scan", store, func(tx *bolt.Tx) error {
		scanTx(tx, store, from, to, out)
		return nil
	})
}

// scanTx appends the entries of store in [from, to) (nil bounds open) read in tx to
// out, in key order.
func scanTx(tx *bolt.Tx, store string, from, to []byte, out *[]Entry) {
	if len(from) == 0 {
		from = nil
	}
	if from == nil && (to == nil || len(to) > 0) {
		if eb := tx.Bucket(emptyKeyBucket); eb != nil {
			if v := eb.Get([]byte(store)); v != nil {
				*out = append(*out, Entry{Key: []byte{}, Value: bytes.Clone(v)})
			}
		}
	}
	bk := tx.Bucket([]byte(store))
	if bk == nil {
		return
	}
	c := bk.Cursor()
	k, v := c.First()
	if from != nil {
		k, v = c.Seek(from)
	}
	for ; k != nil && (to == nil || bytes.Compare(k, to) < 0); k, v = c.Next() {
		*out = append(*out, Entry{Key: bytes.Clone(k), Value: bytes.Clone(v)})
	}
}

func snapshotCheckpoint(b Backend, store string) (Snapshot, error) {
	cp, ok, err := b.Checkpoint(store)
	return Snapshot{Checkpoint: cp, HasCheckpoint: ok}, err
}

// viewNoWait runs fn in a read transaction with the store's checkpoint read in the
// same transaction, under the backend's read lock taken without waiting past
// snapshotWait for a writer that holds it.
func (b *boltBackend) viewNoWait(op, store string, fn func(tx *bolt.Tx) error) (Snapshot, error) {
	var snap Snapshot
	deadline := time.Now().Add(snapshotWait)
	for !b.mu.TryRLock() {
		if time.Now().After(deadline) {
			return snap, fmt.Errorf("statestore: %s %s, store %q: %w", op, b.path, store, ErrBusy)
		}
		time.Sleep(time.Millisecond)
	}
	defer b.mu.RUnlock()
	err := b.doLocked(op, store, func() error {
		if err := checkStoreName(store); err != nil {
			return err
		}
		return b.db.View(func(tx *bolt.Tx) error {
			if meta := tx.Bucket(metaBucket); meta != nil {
				if v := meta.Get([]byte(store)); len(v) == 8 {
					snap = Snapshot{Checkpoint: int64(binary.BigEndian.Uint64(v)), HasCheckpoint: true}
				}
			}
			return fn(tx)
		})
	})
	return snap, err
}
