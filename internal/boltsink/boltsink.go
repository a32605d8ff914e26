// Package boltsink is a sink.Target on a bbolt file: the second implementation of the
// sink interface (PostgreSQL's in sink/pgsink is the first), on a store with no
// prepared transactions of its own, for eddy's tests. A prepared transaction is a
// bucket of its writes under its ID; committing moves them into the rows and leaves a
// marker, so a second commit is found done. Every row a transaction writes is
// recorded with the ID that wrote it, so a test sees a row written twice.
package boltsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/eddy-streams/eddy/sink"
)

var (
	bucketPrepared = []byte("prepared")
	bucketRows     = []byte("rows")
	bucketMarkers  = []byte("markers")
	bucketDups     = []byte("duplicates")
)

// Target writes rows key → value; Row names a record's row (two records with the same
// row are a duplicate, which the target counts instead of overwriting).
type Target[K, V any] struct {
	db  *bolt.DB
	row func(sink.Record[K, V]) (key, value []byte)

	mu    sync.Mutex
	hooks Hooks
}

// Hooks inject faults at the protocol's steps; each returns an error to fail that step.
type Hooks struct {
	BeforePrepare func(id sink.TxnID) error
	AfterPrepare  func(id sink.TxnID) error // the transaction is prepared; the error fails Prepare
	BeforeCommit  func(id sink.TxnID) error // Resolver.Commit
}

// Open opens (creating) the target's file.
func Open[K, V any](path string, row func(sink.Record[K, V]) (key, value []byte)) (*Target[K, V], error) {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketPrepared, bucketRows, bucketMarkers, bucketDups} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &Target[K, V]{db: db, row: row}, nil
}

// SetHooks replaces the fault hooks.
func (t *Target[K, V]) SetHooks(h Hooks) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hooks = h
}

func (t *Target[K, V]) hook() Hooks {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hooks
}

// Close closes the file.
func (t *Target[K, V]) Close() error { return t.db.Close() }

// Guarantee is sink.TwoPhase.
func (t *Target[K, V]) Guarantee() sink.Guarantee { return sink.TwoPhase }

// Begin opens a transaction that holds its writes in memory until Prepare.
func (t *Target[K, V]) Begin(_ context.Context, id sink.TxnID) (sink.Txn[K, V], error) {
	return &txn[K, V]{t: t, id: id}, nil
}

type txn[K, V any] struct {
	t      *Target[K, V]
	id     sink.TxnID
	keys   [][]byte
	values [][]byte
	done   bool
}

func (x *txn[K, V]) Write(_ context.Context, rec sink.Record[K, V]) error {
	if x.done {
		return fmt.Errorf("boltsink: write to transaction %s after its prepare", x.id)
	}
	k, v := x.t.row(rec)
	x.keys, x.values = append(x.keys, k), append(x.values, v)
	return nil
}

func (x *txn[K, V]) Prepare(context.Context) error {
	h := x.t.hook()
	if h.BeforePrepare != nil {
		if err := h.BeforePrepare(x.id); err != nil {
			return err
		}
	}
	gid := []byte(x.id.String())
	err := x.t.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMarkers).Get(gid) != nil {
			return fmt.Errorf("boltsink: transaction %s was committed before", x.id)
		}
		b, err := tx.Bucket(bucketPrepared).CreateBucket(gid)
		if err != nil {
			return fmt.Errorf("boltsink: prepare %s: %w", x.id, err)
		}
		for i, k := range x.keys {
			// An index keeps two writes of one row in one transaction apart.
			if err := b.Put(fmt.Appendf(nil, "%08d", i), append(append(append([]byte(nil), k...), 0), x.values[i]...)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	x.done = true
	if h.AfterPrepare != nil {
		return h.AfterPrepare(x.id)
	}
	return nil
}

func (x *txn[K, V]) Discard(context.Context) error { x.keys, x.values = nil, nil; return nil }

// Pending lists the prepared transactions whose IDs start with prefix.
func (t *Target[K, V]) Pending(_ context.Context, prefix string) ([]sink.TxnID, error) {
	var ids []sink.TxnID
	err := t.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketPrepared).Cursor()
		for k, _ := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, _ = c.Next() {
			id, err := sink.ParseTxnID(string(k))
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	return ids, err
}

// Commit moves a prepared transaction's writes into the rows; a transaction already
// committed (its marker) is a no-op.
func (t *Target[K, V]) Commit(_ context.Context, id sink.TxnID) error {
	if h := t.hook(); h.BeforeCommit != nil {
		if err := h.BeforeCommit(id); err != nil {
			return err
		}
	}
	gid := []byte(id.String())
	return t.db.Update(func(tx *bolt.Tx) error {
		p := tx.Bucket(bucketPrepared).Bucket(gid)
		if p == nil {
			if tx.Bucket(bucketMarkers).Get(gid) != nil {
				return nil
			}
			return fmt.Errorf("boltsink: commit %s: %w", id, sink.ErrNotPrepared)
		}
		rows, dups := tx.Bucket(bucketRows), tx.Bucket(bucketDups)
		err := p.ForEach(func(_, kv []byte) error {
			i := bytes.IndexByte(kv, 0)
			k, v := kv[:i], kv[i+1:]
			if rows.Get(k) != nil {
				return dups.Put(append(append([]byte(nil), k...), gid...), v)
			}
			return rows.Put(k, v)
		})
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketPrepared).DeleteBucket(gid); err != nil {
			return err
		}
		return tx.Bucket(bucketMarkers).Put(gid, []byte{1})
	})
}

// Rollback drops a prepared transaction; one not there is not an error.
func (t *Target[K, V]) Rollback(_ context.Context, id sink.TxnID) error {
	gid := []byte(id.String())
	return t.db.Update(func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketPrepared).DeleteBucket(gid)
		if errors.Is(err, bolt.ErrBucketNotFound) {
			return nil
		}
		return err
	})
}

// Rows returns the committed rows.
func (t *Target[K, V]) Rows() (map[string][]byte, error) { return t.read(bucketRows) }

// Duplicates returns the rows a committed transaction wrote a second time (key: the row
// followed by the ID of the transaction that wrote it again).
func (t *Target[K, V]) Duplicates() (map[string][]byte, error) { return t.read(bucketDups) }

func (t *Target[K, V]) read(bucket []byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := t.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			out[string(k)] = append([]byte(nil), v...)
			return nil
		})
	})
	return out, err
}

// PrepareLeftover writes a prepared transaction as a crashed owner would have left it,
// with rows keyed as row makes them: for recovery tests.
func (t *Target[K, V]) PrepareLeftover(id sink.TxnID, recs ...sink.Record[K, V]) error {
	x := &txn[K, V]{t: &Target[K, V]{db: t.db, row: t.row}, id: id}
	for _, r := range recs {
		if err := x.Write(context.Background(), r); err != nil {
			return err
		}
	}
	return x.Prepare(context.Background())
}
