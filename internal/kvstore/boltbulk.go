package kvstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/eddy-streams/eddy/statestore"
)

// stagingBucket holds the stores a BulkRestorer is building: store name → a bucket
// with the store's keys, moved to the root, under the store's name, by the load's last
// transaction.
var stagingBucket = []byte("__eddy_staging")

func (b *boltBackend) spillDir() string { return b.dir }

// bulkLoad appends src's entries (increasing keys) to the staging bucket of store in
// transactions of about txBytes, with full pages: in key order bbolt only ever touches
// the right edge of the tree, instead of rewriting most leaves at every write. A last,
// small transaction moves the staging bucket into place and writes the checkpoint (see
// BulkRestorer for why every state on the way is valid). On any error, and when ctx is
// cancelled between transactions, the staging bucket is dropped.
func (b *boltBackend) bulkLoad(ctx context.Context, store string, src func() ([]byte, []byte, bool, error), checkpoint int64, txBytes int) error {
	var emptyValue []byte // the empty key's value: bbolt keeps it in emptyKeyBucket
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return errors.Join(err, b.bulkDrop(store))
		}
		err := b.do("bulk restore", store, func() error {
			return b.db.Update(func(tx *bolt.Tx) error {
				staging, err := tx.CreateBucketIfNotExists(stagingBucket)
				if err != nil {
					return err
				}
				bk, err := staging.CreateBucketIfNotExists([]byte(store))
				if err != nil {
					return err
				}
				// Keys arrive in order: split pages full, not half full (the default
				// for random inserts, which leaves room for later ones).
				bk.FillPercent = 1.0
				for n := 0; n < txBytes; {
					k, v, ok, err := src()
					if err != nil {
						return err
					}
					if !ok {
						done = true
						break
					}
					if len(k) == 0 {
						emptyValue = v
						continue
					}
					if len(k) > statestore.MaxKeySize {
						return fmt.Errorf("store %q: %w: a key of %d bytes (starting %x)", store, statestore.ErrKeyTooLarge, len(k), k[:16])
					}
					if err := bk.Put(k, v); err != nil {
						return fmt.Errorf("store %q: key %x: %w", store, k, err)
					}
					n += len(k) + len(v)
				}
				return nil
			})
		})
		if err != nil {
			return errors.Join(err, b.bulkDrop(store))
		}
	}
	// The move gets a transaction of its own: bbolt's MoveBucket moves the bucket's
	// committed header, so keys put into it in the same transaction would be lost.
	err := b.do("bulk restore", store, func() error {
		return b.db.Update(func(tx *bolt.Tx) error {
			return moveIntoPlace(tx, store, emptyValue, checkpoint)
		})
	})
	if err != nil {
		return errors.Join(err, b.bulkDrop(store))
	}
	return nil
}

// moveIntoPlace is the bulk load's last step, in its last transaction: the staging
// bucket becomes the store, with its empty key's value and its checkpoint. The store
// must be empty with no checkpoint: nothing else writes a store while it restores, so
// anything else is a caller's bug, refused rather than overwritten.
func moveIntoPlace(tx *bolt.Tx, store string, emptyValue []byte, checkpoint int64) error {
	name := []byte(store)
	staging := tx.Bucket(stagingBucket)
	if staging == nil || staging.Bucket(name) == nil {
		return fmt.Errorf("store %q: the staging bucket is gone", store)
	}
	meta, err := tx.CreateBucketIfNotExists(metaBucket)
	if err != nil {
		return err
	}
	if meta.Get(name) != nil {
		return fmt.Errorf("store %q: %w: it has a checkpoint", store, ErrNotEmpty)
	}
	if old := tx.Bucket(name); old != nil {
		if k, _ := old.Cursor().First(); k != nil {
			return fmt.Errorf("store %q: %w: it has keys", store, ErrNotEmpty)
		}
		if err := tx.DeleteBucket(name); err != nil {
			return err
		}
	}
	if err := tx.MoveBucket(name, staging, nil); err != nil {
		return fmt.Errorf("store %q: move the staging bucket into place: %w", store, err)
	}
	if k, _ := staging.Cursor().First(); k == nil {
		if err := tx.DeleteBucket(stagingBucket); err != nil {
			return err
		}
	}
	eb, err := tx.CreateBucketIfNotExists(emptyKeyBucket)
	if err != nil {
		return err
	}
	if eb.Get(name) != nil {
		return fmt.Errorf("store %q: %w: it has a value for the empty key", store, ErrNotEmpty)
	}
	if emptyValue != nil {
		if err := eb.Put(name, emptyValue); err != nil {
			return err
		}
	}
	return meta.Put(name, binary.BigEndian.AppendUint64(nil, uint64(checkpoint)))
}

// bulkDrop removes the staging bucket of store, if any, and a file an interrupted file
// build left (boltbuild.go).
func (b *boltBackend) bulkDrop(store string) error {
	if err := removeIfThere(b.path + buildFileSuffix); err != nil {
		return err
	}
	var found bool
	err := b.do("drop bulk restore", store, func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			if st := tx.Bucket(stagingBucket); st != nil && st.Bucket([]byte(store)) != nil {
				found = true
			}
			return nil
		})
	})
	if err != nil || !found {
		return err
	}
	return b.do("drop bulk restore", store, func() error {
		return b.db.Update(func(tx *bolt.Tx) error { return dropStaging(tx, store) })
	})
}

// dropStaging deletes the staging bucket of store, and the staging bucket itself when
// it is left empty.
func dropStaging(tx *bolt.Tx, store string) error {
	st := tx.Bucket(stagingBucket)
	if st == nil {
		return nil
	}
	if err := st.DeleteBucket([]byte(store)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return err
	}
	if k, _ := st.Cursor().First(); k == nil {
		return tx.DeleteBucket(stagingBucket)
	}
	return nil
}
