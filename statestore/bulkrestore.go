package statestore

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// BulkRestorerOptions bound the memory of a BulkRestorer.
type BulkRestorerOptions struct {
	// MaxBytes bounds the gathered keys and values held in memory (with a per-key
	// overhead counted); above it they are written to a sorted run file. Default 32 MiB.
	MaxBytes int
	// TxBytes bounds the keys and values of one bbolt transaction of the load; default
	// 32 MiB. bbolt keeps a transaction's values referenced until it commits.
	TxBytes int
	// SpillDir is where run files go; default the bbolt backend's directory (the
	// task's state dir), else os.TempDir.
	SpillDir string
}

// entryOverhead approximates the memory of one gathered key beyond its bytes: the map
// entry, the string and slice headers.
const entryOverhead = 64

// A BulkRestorer restores a store from empty: a store with no checkpoint (new, or
// wiped). bbolt is a copy-on-write B+tree: writing random keys rewrites most leaf pages
// at every write, which made a restore ~3 times slower than reading the changelog
// (BENCHMARKS.md). A BulkRestorer instead gathers each key's last value (a tombstone
// removes it: the store starts empty), spills sorted runs to files when over
// MaxBytes (an external sort: memory stays bounded for a store larger than RAM), and
// at Finish merges them and loads the keys in order, appending to the right edge of
// the tree with full pages, into a staging bucket that is moved into place, with the
// checkpoint, in the load's last transaction.
//
// Why every state is valid (the invariant: the store holds exactly the changelog's
// committed prefix up to its checkpoint, or is empty with no checkpoint):
//   - Until the last transaction, the store's own bucket is untouched: it stays empty
//     with no checkpoint (the restore wiped it), whatever happens. The gathered data
//     lives in memory, in run files, and in the staging bucket "__eddy_staging"/store,
//     which is no store (the prefix "__eddy_" is reserved) and nothing reads.
//   - The last transaction moves the staging bucket to the store's name and writes the
//     checkpoint of the last Add (the offset after every gathered record). bbolt
//     commits a transaction atomically, so after it the store holds the last value of
//     every key in [start, checkpoint) — a committed prefix — with that checkpoint.
//   - An interrupted restore (Abort, a cancelled Finish, or a crash) leaves the store
//     empty with no checkpoint; the next restore of the store starts over, and first
//     drops a leftover staging bucket and leftover run files (Wipe drops the staging
//     bucket too).
//
// The price: an interrupted restore from empty keeps no progress (the Restorer's
// batched writes keep it, but cost 3 times as much per record).
type BulkRestorer struct {
	loader  bulkLoader
	store   string
	opts    BulkRestorerOptions
	mem     map[string][]byte // key → last value; nil is a tombstone
	bytes   int
	runs    []string // run files, oldest first
	dir     string   // spill directory of this restore, made at the first spill
	next    int64
	has     bool
	records int64
}

// bulkLoader is a backend that can build a store aside and move it into place with
// its checkpoint in one transaction (bbolt).
type bulkLoader interface {
	Backend
	// bulkLoad loads the entries src yields (strictly increasing keys, no tombstones)
	// into the empty store and sets its checkpoint, as BulkRestorer describes.
	bulkLoad(ctx context.Context, store string, src func() (key, value []byte, ok bool, err error), checkpoint int64, txBytes int) error
	// bulkDrop removes a leftover staging bucket of store.
	bulkDrop(store string) error
	// spillDir is the default directory for run files.
	spillDir() string
}

// CanBulkRestore reports whether backend supports NewBulkRestorer.
func CanBulkRestore(backend Backend) bool {
	_, ok := backend.(bulkLoader)
	return ok
}

// ErrBulkUnsupported is returned by NewBulkRestorer for a backend that cannot build a
// store aside (the memory backend: use a Restorer).
var ErrBulkUnsupported = errors.New("backend does not support bulk restore")

// ErrNotEmpty is wrapped by a bulk restore whose store has a checkpoint or keys: a
// BulkRestorer restores only from empty.
var ErrNotEmpty = errors.New("store is not empty")

// NewBulkRestorer makes a BulkRestorer of store in backend, which must be empty with
// no checkpoint (wipe it first). It removes what an interrupted bulk restore of the
// store left behind.
func NewBulkRestorer(backend Backend, store string, opts BulkRestorerOptions) (*BulkRestorer, error) {
	l, ok := backend.(bulkLoader)
	if !ok {
		return nil, ErrBulkUnsupported
	}
	if err := checkStoreName(store); err != nil {
		return nil, &StoreError{Store: store, Op: "bulk restore", Err: err}
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 32 << 20
	}
	if opts.TxBytes <= 0 {
		opts.TxBytes = 32 << 20
	}
	if opts.SpillDir == "" {
		opts.SpillDir = l.spillDir()
	}
	r := &BulkRestorer{loader: l, store: store, opts: opts, mem: map[string][]byte{}}
	if err := l.bulkDrop(store); err != nil {
		return nil, &StoreError{Store: store, Op: "bulk restore", Err: err}
	}
	old, _ := filepath.Glob(filepath.Join(opts.SpillDir, r.spillPattern()))
	for _, d := range old {
		if err := os.RemoveAll(d); err != nil {
			return nil, &StoreError{Store: store, Op: "bulk restore", Err: fmt.Errorf("remove leftover run files: %w", err)}
		}
	}
	return r, nil
}

// spillPattern names this store's spill directories; the store name is hex-encoded
// (store names may hold any byte).
func (r *BulkRestorer) spillPattern() string {
	return ".restore-" + hex.EncodeToString([]byte(r.store)) + "-*"
}

// Add takes one fetched batch of records in log order and next, the offset of the
// record after it. It copies what it keeps: the caller may reuse the records.
func (r *BulkRestorer) Add(records []Entry, next int64) error {
	for _, e := range records {
		if old, ok := r.mem[string(e.Key)]; ok {
			r.bytes += len(e.Value) - len(old)
			r.mem[string(e.Key)] = bytes.Clone(e.Value)
			continue
		}
		r.mem[string(e.Key)] = bytes.Clone(e.Value)
		r.bytes += len(e.Key) + len(e.Value) + entryOverhead
	}
	r.records += int64(len(records))
	r.next, r.has = next, true
	if r.bytes >= r.opts.MaxBytes {
		return r.spill()
	}
	return nil
}

// Records is the number of changelog records added.
func (r *BulkRestorer) Records() int64 { return r.records }

// Runs is the number of run files written so far.
func (r *BulkRestorer) Runs() int { return len(r.runs) }

// sortedMem returns the gathered keys in order. As in RestoreBatch, keys compare first
// by an 8-byte integer prefix: one integer comparison for most pairs instead of a
// string comparison, which halves the sort.
func (r *BulkRestorer) sortedMem() []string {
	type pk struct {
		prefix uint64
		key    string
	}
	ps := make([]pk, 0, len(r.mem))
	for k := range r.mem {
		ps = append(ps, pk{keyPrefixString(k), k})
	}
	slices.SortFunc(ps, func(a, b pk) int {
		if a.prefix != b.prefix {
			if a.prefix < b.prefix {
				return -1
			}
			return 1
		}
		return strings.Compare(a.key, b.key)
	})
	keys := make([]string, len(ps))
	for i, p := range ps {
		keys[i] = p.key
	}
	return keys
}

// keyPrefixString is keyPrefix of a string key.
func keyPrefixString(key string) uint64 {
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}

// spill writes the gathered keys as one sorted run file and empties memory. A run
// record is uvarint(len(key)) key uvarint(0) for a tombstone, or uvarint(len(value)+1)
// value: tombstones are kept, they must hide older runs' values of the key.
func (r *BulkRestorer) spill() (err error) {
	if len(r.mem) == 0 {
		return nil
	}
	if r.dir == "" {
		if err := os.MkdirAll(r.opts.SpillDir, 0o755); err != nil {
			return &StoreError{Store: r.store, Op: "bulk restore", Err: err}
		}
		if r.dir, err = os.MkdirTemp(r.opts.SpillDir, r.spillPattern()[:len(r.spillPattern())-1]); err != nil {
			return &StoreError{Store: r.store, Op: "bulk restore", Err: err}
		}
	}
	path := filepath.Join(r.dir, fmt.Sprintf("run-%06d", len(r.runs)))
	f, err := os.Create(path)
	if err != nil {
		return &StoreError{Store: r.store, Op: "bulk restore", Err: err}
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = &StoreError{Store: r.store, Op: "bulk restore", Err: cerr}
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	var hdr []byte
	for _, k := range r.sortedMem() {
		v := r.mem[k]
		hdr = binary.AppendUvarint(hdr[:0], uint64(len(k)))
		hdr = append(hdr, k...)
		if v == nil {
			hdr = binary.AppendUvarint(hdr, 0)
		} else {
			hdr = binary.AppendUvarint(hdr, uint64(len(v))+1)
		}
		if _, err := w.Write(hdr); err != nil {
			return &StoreError{Store: r.store, Op: "bulk restore", Err: err}
		}
		if _, err := w.Write(v); err != nil {
			return &StoreError{Store: r.store, Op: "bulk restore", Err: err}
		}
	}
	if err := w.Flush(); err != nil {
		return &StoreError{Store: r.store, Op: "bulk restore", Err: err}
	}
	r.runs = append(r.runs, path)
	clear(r.mem)
	r.bytes = 0
	return nil
}

// Finish merges what was gathered and loads it into the store with the checkpoint of
// the last Add, atomically (see BulkRestorer). A cancelled ctx stops the load and
// leaves the store empty with no checkpoint. Finish with nothing added does nothing.
func (r *BulkRestorer) Finish(ctx context.Context) error {
	defer r.cleanup()
	if !r.has {
		return nil
	}
	src, closeSrc, err := r.merged()
	if err != nil {
		return &StoreError{Store: r.store, Op: "bulk restore", Err: err}
	}
	defer closeSrc()
	if u, ok := r.loader.(unsyncedWriter); ok {
		if err := u.beginUnsynced(); err != nil {
			return &StoreError{Store: r.store, Op: "bulk restore", Err: err}
		}
	}
	if err := r.loader.bulkLoad(ctx, r.store, src, r.next, r.opts.TxBytes); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &StoreError{Store: r.store, Op: "bulk restore", Err: err}
	}
	if u, ok := r.loader.(unsyncedWriter); ok {
		if err := u.endUnsynced(); err != nil {
			return &StoreError{Store: r.store, Op: "bulk restore", Err: err}
		}
	}
	return nil
}

// Abort drops what was gathered: the store stays empty with no checkpoint.
func (r *BulkRestorer) Abort() error {
	r.cleanup()
	if err := r.loader.bulkDrop(r.store); err != nil {
		return &StoreError{Store: r.store, Op: "bulk restore", Err: err}
	}
	return nil
}

func (r *BulkRestorer) cleanup() {
	clear(r.mem)
	r.bytes, r.has, r.records = 0, false, 0
	if r.dir != "" {
		_ = os.RemoveAll(r.dir) // best effort: the next bulk restore of the store removes leftovers
		r.dir, r.runs = "", nil
	}
}

// merged returns the gathered entries in key order, each key's newest value, without
// tombstones.
func (r *BulkRestorer) merged() (src func() ([]byte, []byte, bool, error), closeSrc func(), err error) {
	keys := r.sortedMem()
	if len(r.runs) == 0 {
		i := 0
		return func() ([]byte, []byte, bool, error) {
			for i < len(keys) {
				k := keys[i]
				i++
				if v := r.mem[k]; v != nil {
					return []byte(k), v, true, nil
				}
			}
			return nil, nil, false, nil
		}, func() {}, nil
	}
	// A k-way merge: sources are the runs (oldest first) and memory (newest); of equal
	// keys the newest source wins.
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	h := &mergeHeap{}
	for i, path := range r.runs {
		f, err := os.Open(path)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		files = append(files, f)
		rr := &runReader{r: bufio.NewReaderSize(f, 256<<10), src: i}
		if ok, err := rr.advance(); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("run %s: %w", path, err)
		} else if ok {
			h.items = append(h.items, rr)
		}
	}
	memSrc := &runReader{mem: r.mem, keys: keys, src: len(r.runs)}
	if ok, _ := memSrc.advance(); ok {
		h.items = append(h.items, memSrc)
	}
	heap.Init(h)
	return func() ([]byte, []byte, bool, error) {
		for h.Len() > 0 {
			top := h.items[0]
			key, val := top.key, top.val
			// Drop the older sources' records of the same key.
			for h.Len() > 0 && bytes.Equal(h.items[0].key, key) {
				s := h.items[0]
				ok, err := s.advance()
				if err != nil {
					return nil, nil, false, err
				}
				if ok {
					heap.Fix(h, 0)
				} else {
					heap.Pop(h)
				}
			}
			if val != nil {
				return key, val, true, nil
			}
		}
		return nil, nil, false, nil
	}, closeAll, nil
}

// runReader reads one sorted source: a run file or the in-memory map.
type runReader struct {
	r        *bufio.Reader
	mem      map[string][]byte
	keys     []string
	src      int
	key, val []byte
}

// advance moves to the next record; false at the end. The key and value are fresh
// slices: bbolt keeps values referenced until its transaction commits.
func (rr *runReader) advance() (bool, error) {
	if rr.r == nil {
		if len(rr.keys) == 0 {
			return false, nil
		}
		k := rr.keys[0]
		rr.keys = rr.keys[1:]
		rr.key, rr.val = []byte(k), rr.mem[k]
		return true, nil
	}
	n, err := binary.ReadUvarint(rr.r)
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	key := make([]byte, n)
	if _, err := io.ReadFull(rr.r, key); err != nil {
		return false, fmt.Errorf("truncated run: %w", err)
	}
	vn, err := binary.ReadUvarint(rr.r)
	if err != nil {
		return false, fmt.Errorf("truncated run: %w", err)
	}
	var val []byte
	if vn > 0 {
		val = make([]byte, vn-1)
		if _, err := io.ReadFull(rr.r, val); err != nil {
			return false, fmt.Errorf("truncated run: %w", err)
		}
	}
	rr.key, rr.val = key, val
	return true, nil
}

type mergeHeap struct{ items []*runReader }

func (h *mergeHeap) Len() int { return len(h.items) }
func (h *mergeHeap) Less(i, j int) bool {
	if c := bytes.Compare(h.items[i].key, h.items[j].key); c != 0 {
		return c < 0
	}
	return h.items[i].src > h.items[j].src // newest first
}
func (h *mergeHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *mergeHeap) Push(x any)    { h.items = append(h.items, x.(*runReader)) }
func (h *mergeHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
