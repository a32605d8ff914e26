package kvstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// errSnapshotReadOnly is the error of a write through a snapshot view (ViewAt).
var errSnapshotReadOnly = errors.New("statestore: a snapshot view is read-only")

// ViewAt runs read on one consistent state of a store file and returns the checkpoint
// of store in that state, as GetAt does for one key: for a reader other than the
// store's writer that reads more than one key or bucket (a stale interactive query of a
// window or session store, whose windows lie in several segment buckets listed in a
// bucket of their own). On a bbolt backend (or a Segmented over one) read gets a
// read-only Backend over one read transaction; with segments, a Segmented layer over it
// that loads its segment list from that transaction too, so the windows read, the list
// and the checkpoint are the store exactly as of the checkpoint. Other backends are
// read as they are, checkpoint first. It does not wait for a rebuild (ErrBusy). read
// must not keep the Backend or what its iterators return past its call.
func ViewAt(b Backend, store string, segments *SegmentSpec, read func(Backend) error) (Snapshot, error) {
	inner := b
	if seg, ok := b.(*Segmented); ok {
		inner = seg.Inner()
	}
	bb, ok := inner.(*boltBackend)
	if !ok {
		snap, err := snapshotCheckpoint(b, store)
		if err != nil {
			return snap, err
		}
		return snap, read(b)
	}
	return bb.viewNoWait("snapshot view", store, func(tx *bolt.Tx) error {
		var v Backend = txView{tx: tx}
		if segments != nil {
			seg := NewSegmented(v, store, *segments)
			seg.readOnly = true
			v = seg
		}
		return read(v)
	})
}

// txView is a read-only Backend over one bbolt read transaction.
type txView struct{ tx *bolt.Tx }

func (v txView) Get(store string, key []byte) ([]byte, error) {
	bk, k := v.tx.Bucket([]byte(store)), key
	if len(key) == 0 {
		bk, k = v.tx.Bucket(emptyKeyBucket), []byte(store)
	}
	if bk == nil {
		return nil, nil
	}
	return bytes.Clone(bk.Get(k)), nil
}

// Iterate reads [from, to) at once: a snapshot read's ranges are bounded by its query.
func (v txView) Iterate(store string, from, to []byte) (BytesIterator, error) {
	var out []Entry
	scanTx(v.tx, store, from, to, &out)
	return &entriesIterator{entries: out, i: -1}, nil
}

func (v txView) Count(store string) (int64, error) {
	if bk := v.tx.Bucket([]byte(store)); bk != nil {
		return int64(bk.Stats().KeyN), nil
	}
	return 0, nil
}

func (v txView) Checkpoint(store string) (int64, bool, error) {
	if meta := v.tx.Bucket(metaBucket); meta != nil {
		if cp := meta.Get([]byte(store)); len(cp) == 8 {
			return int64(binary.BigEndian.Uint64(cp)), true, nil
		}
	}
	return 0, false, nil
}

func (v txView) Write(Batch) error { return errSnapshotReadOnly }
func (v txView) Wipe(store string) error {
	return fmt.Errorf("wipe %q: %w", store, errSnapshotReadOnly)
}
func (v txView) ChangelogID(string) ([16]byte, bool, error) {
	return [16]byte{}, false, errSnapshotReadOnly
}
func (v txView) SetChangelogID(string, [16]byte) error { return errSnapshotReadOnly }
func (v txView) Close() error                          { return nil }

// entriesIterator walks entries read beforehand.
type entriesIterator struct {
	entries []Entry
	i       int
}

func (it *entriesIterator) Next() bool {
	it.i++
	return it.i < len(it.entries)
}
func (it *entriesIterator) Key() []byte   { return it.entries[it.i].Key }
func (it *entriesIterator) Value() []byte { return it.entries[it.i].Value }
func (it *entriesIterator) Err() error    { return nil }
func (it *entriesIterator) Close() error  { return nil }
