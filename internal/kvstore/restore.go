package kvstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/eddy-streams/eddy/statestore"
)

// RestoreBatch makes the backend write that applies one fetched batch of a store's
// changelog records: deduplicated (a key's last record wins, as in the log), sorted by
// key (bbolt inserts sorted keys several times faster), with the checkpoint next, the
// offset of the record after the batch. records is not modified; the batch refers to
// its keys and values, which must stay unchanged until the write returns. A nil Value
// is a tombstone.
func RestoreBatch(store string, records []Entry, next int64) Batch {
	// Sort by key, then by position in the log (pdqsort with a tiebreak: a stable sort
	// is several times slower), and keep the last record of each key. Keys compare
	// first by their first 8 bytes as a big-endian integer (zero-padded, which orders
	// like the bytes): one integer comparison instead of a bytes.Compare for most pairs,
	// which halves the sort, a fifth of a restore's CPU time with random keys.
	type rec struct {
		Entry
		prefix uint64
		pos    int
	}
	rs := make([]rec, len(records))
	for i, e := range records {
		rs[i] = rec{e, keyPrefix(e.Key), i}
	}
	slices.SortFunc(rs, func(a, b rec) int {
		if a.prefix != b.prefix {
			if a.prefix < b.prefix {
				return -1
			}
			return 1
		}
		if c := bytes.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return a.pos - b.pos
	})
	out := make([]Entry, 0, len(rs))
	for i, r := range rs {
		if i+1 < len(rs) && bytes.Equal(r.Key, rs[i+1].Key) {
			continue
		}
		out = append(out, r.Entry)
	}
	return Batch{Writes: map[string][]Entry{store: out}, Checkpoints: map[string]int64{store: next}}
}

// keyPrefix is the first 8 bytes of key as a big-endian integer, zero-padded: if
// keyPrefix(a) < keyPrefix(b) then a < b in bytes order.
func keyPrefix(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}

// Restore applies one fetched batch of the store's changelog records to its backend
// in one atomic write, together with the checkpoint next (the offset of the record
// after the batch), as RestoreBatch describes. Restore before processing: the write
// buffer must be empty, or its values would hide the restored ones.
func (b *Buffer) Restore(records []Entry, next int64) error {
	if n := len(b.dirty) + len(b.sealed); n > 0 {
		return &statestore.StoreError{Store: b.name, Op: "restore", Err: fmt.Errorf("%d buffered changes: restore before processing", n)}
	}
	if len(b.held) > 0 {
		return &statestore.StoreError{Store: b.name, Op: "restore", Err: fmt.Errorf("%d committed changes held: write them (Set.WriteHeld) before restoring", len(b.held))}
	}
	if err := b.backend.Write(RestoreBatch(b.name, records, next)); err != nil {
		return &statestore.StoreError{Store: b.name, Op: "restore", Err: err}
	}
	return nil
}

// RestorerOptions bound the records a Restorer buffers before it writes them.
type RestorerOptions struct {
	// MaxRecords: write when this many records are buffered; default 100,000.
	MaxRecords int
	// MaxBytes: write when the buffered keys and values reach this size; default 32 MiB.
	MaxBytes int
}

// A Restorer applies one store's changelog records to its backend during restore. It
// gathers the fetched batches and writes them in larger atomic writes, each with the
// checkpoint of the last batch it holds. bbolt rewrites every page a write touches, so
// with random keys a write of n records costs about min(n, leaf pages) page writes:
// writing 100k records at once instead of 8k-record fetches writes a third of the
// bytes and restores 2.5-4 times faster (BENCHMARKS.md). A restore interrupted between
// two writes resumes from the last written checkpoint: at most one write's records
// are read again.
//
// On a bbolt backend that fsyncs each write, a Restorer switches the fsyncs off from its
// first write until Finish, which fsyncs once: the state file says NoSync meanwhile, so
// a machine crash during the restore makes the next open start the store over (see the
// package doc, "Durability"); a process crash keeps the restored prefix.
type Restorer struct {
	backend  Backend
	store    string
	opts     RestorerOptions
	pending  []Entry
	bytes    int
	next     int64
	has      bool
	restored int64
}

// NewRestorer makes a Restorer of store in backend.
func NewRestorer(backend Backend, store string, opts RestorerOptions) *Restorer {
	if opts.MaxRecords <= 0 {
		opts.MaxRecords = 100_000
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 32 << 20
	}
	return &Restorer{backend: backend, store: store, opts: opts}
}

// Add takes one fetched batch of records (in log order) and next, the offset of the
// record after it, and writes when the buffered records reach a bound. The Restorer
// keeps the records' key and value slices until they are written: they must not be
// reused by the caller.
func (r *Restorer) Add(records []Entry, next int64) error {
	r.pending = append(r.pending, records...)
	for _, e := range records {
		r.bytes += len(e.Key) + len(e.Value)
	}
	r.next, r.has = next, true
	if len(r.pending) >= r.opts.MaxRecords || r.bytes >= r.opts.MaxBytes {
		return r.Flush()
	}
	return nil
}

// unsyncedWriter is a backend that can skip the fsync of each write for a while (bbolt).
type unsyncedWriter interface {
	beginUnsynced() error
	endUnsynced() error
}

// Flush writes the buffered records and their checkpoint, if any.
func (r *Restorer) Flush() error {
	if !r.has {
		return nil
	}
	if u, ok := r.backend.(unsyncedWriter); ok {
		if err := u.beginUnsynced(); err != nil {
			return &statestore.StoreError{Store: r.store, Op: "restore", Err: err}
		}
	}
	if err := r.backend.Write(RestoreBatch(r.store, r.pending, r.next)); err != nil {
		return &statestore.StoreError{Store: r.store, Op: "restore", Err: err}
	}
	r.restored += int64(len(r.pending))
	clear(r.pending) // drop the references to the records' bytes
	r.pending, r.bytes, r.has = r.pending[:0], 0, false
	return nil
}

// Finish writes the buffered records and makes everything written durable (one fsync
// on a bbolt backend that fsyncs). Call it when the restore reached its end offset, or
// stops early; the Restorer can go on being used after it.
func (r *Restorer) Finish() error {
	if err := r.Flush(); err != nil {
		return err
	}
	if u, ok := r.backend.(unsyncedWriter); ok {
		if err := u.endUnsynced(); err != nil {
			return &statestore.StoreError{Store: r.store, Op: "restore", Err: err}
		}
	}
	return nil
}

// Restored is the number of records written so far (duplicates included).
func (r *Restorer) Restored() int64 { return r.restored }
