package kvstore

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/eddy-streams/eddy/statestore"
)

// A store's checkpoint is an offset of one changelog topic. A topic deleted and created
// anew under the same name (an "eddy reset" that missed this host's state dir, a
// changelog deleted by hand) starts its offsets again at 0; once it holds as many
// records as the checkpoint counts, offsets alone cannot tell it from the old one, and a
// restore would read its tail on top of data from the old one. The topic's ID (Kafka
// 2.8+) tells them apart: the restore records it with the store (SetChangelogID) before
// it writes anything read from that topic, and a store whose recorded ID is not the
// topic's current one is wiped and restored from the start (internal/restore).

func (b *memoryBackend) ChangelogID(store string) ([16]byte, bool, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return [16]byte{}, false, statestore.ErrClosed
	}
	id, ok := b.changelogIDs[store]
	return id, ok, nil
}

func (b *memoryBackend) SetChangelogID(store string, id [16]byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return statestore.ErrClosed
	}
	b.changelogIDs[store] = id
	return nil
}

func (b *boltBackend) ChangelogID(store string) ([16]byte, bool, error) {
	var id [16]byte
	var ok bool
	err := b.do("read changelog ID", store, func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			bk := tx.Bucket(changelogIDBucket)
			if bk == nil {
				return nil
			}
			if v := bk.Get([]byte(store)); len(v) == len(id) {
				copy(id[:], v)
				ok = true
			}
			return nil
		})
	})
	return id, ok, err
}

func (b *boltBackend) SetChangelogID(store string, id [16]byte) error {
	return b.do("write changelog ID", store, func() error {
		return b.db.Update(func(tx *bolt.Tx) error {
			if err := checkStoreName(store); err != nil {
				return err
			}
			bk, err := tx.CreateBucketIfNotExists(changelogIDBucket)
			if err != nil {
				return err
			}
			if err := bk.Put([]byte(store), id[:]); err != nil {
				return fmt.Errorf("store %q: changelog ID: %w", store, err)
			}
			return nil
		})
	})
}

// ChangelogID is the inner backend's: the segments share the store's checkpoint.
func (s *Segmented) ChangelogID(store string) ([16]byte, bool, error) {
	return s.inner.ChangelogID(store)
}

// SetChangelogID records the ID in the inner backend, beside the store's checkpoint.
func (s *Segmented) SetChangelogID(store string, id [16]byte) error {
	return s.inner.SetChangelogID(store, id)
}
