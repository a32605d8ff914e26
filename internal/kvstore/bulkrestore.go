package kvstore

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/eddy-streams/eddy/statestore"
)

// BulkRestorerOptions bound the memory of a BulkRestorer.
type BulkRestorerOptions struct {
	// MaxBytes bounds the gathered keys and values held in memory (with a per-key
	// overhead counted); above it they are written to a sorted run file. Default 32 MiB.
	MaxBytes int
	// TxBytes bounds the keys and values of one bbolt transaction of the load; default
	// 1 MiB. bbolt keeps a transaction's new keys in one growing node until it commits,
	// so larger transactions search and grow larger slices: 1 MiB loaded 1M keys ~15%
	// faster than 32 MiB (BenchmarkRestoreFromEmpty, 3 runs each).
	TxBytes int
	// SpillDir is where run files go; default the bbolt backend's directory (the
	// task's state dir), else os.TempDir.
	SpillDir string
	// Load says how the keys go into a bbolt file; default LoadAuto.
	Load BulkLoad
	// Records, when known, is about how many records will be added (a changelog's
	// offsets to restore): the gathered list starts with room for them, up to what
	// MaxBytes bounds, instead of growing by doubling, which copied it over and over
	// (17% of restore-full's CPU in a profile of 1M records on 8 tasks).
	Records int64
}

// BulkLoad is how a BulkRestorer loads a bbolt file.
type BulkLoad int

const (
	// LoadAuto builds a new file when the task's file is no larger than the gathered
	// data (copying the file's other buckets costs no more than the load), else loads
	// in place.
	LoadAuto BulkLoad = iota
	// LoadInPlace loads the keys through bbolt's Put, in key order, into a staging
	// bucket of the open file, moved into place at the end (boltbulk.go).
	LoadInPlace
	// LoadNewFile writes a new file page by page, the file's other buckets copied, and
	// renames it over the old one (boltbuild.go): 2-3 times cheaper than bbolt's Put
	// in key order.
	LoadNewFile
)

// A BulkRestorer restores a store from empty: a store with no checkpoint (new, or
// wiped). bbolt is a copy-on-write B+tree: writing random keys rewrites most leaf pages
// at every write, which made a restore ~3 times slower than reading the changelog
// (BENCHMARKS.md). A BulkRestorer instead gathers each key's last value (a tombstone
// removes it: the store starts empty), spills sorted runs to files when over
// MaxBytes (an external sort: memory stays bounded for a store larger than RAM), and
// at Finish merges them and loads the keys in order: by default (LoadAuto, on a file no
// larger than the data) as a new file written page by page and renamed into place with
// the checkpoint in it (boltbuild.go says why every state on the way is valid);
// otherwise (LoadInPlace) appending to the right edge of the tree with full pages,
// into a staging bucket that is moved into place, with the checkpoint, in the load's
// last transaction, as follows.
//
// Why every state of the in-place load is valid (the invariant: the store holds exactly the changelog's
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
	loader bulkLoader
	store  string
	opts   BulkRestorerOptions
	// gathered holds the records added since the last spill, in log order, their keys
	// and values copied into arena: one allocation per MiB instead of two per record
	// (with a map of the last values, allocation and garbage collection were a third of
	// a restore's CPU time).
	gathered []gatheredRecord
	arena    arena
	sortedN  int // the first sortedN gathered records are sorted (see sortGathered)
	bytes    int
	runs     []string // run files, oldest first
	runBytes int64    // their size
	dir      string   // spill directory of this restore, made at the first spill
	next     int64
	has      bool
	records  int64
	tail     bool // NewBulkTailRestorer's
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
	return newBulkRestorer(backend, store, opts)
}

func newBulkRestorer(backend Backend, store string, opts BulkRestorerOptions) (*BulkRestorer, error) {
	l, ok := backend.(bulkLoader)
	if !ok {
		return nil, ErrBulkUnsupported
	}
	if err := checkStoreName(store); err != nil {
		return nil, &statestore.StoreError{Store: store, Op: "bulk restore", Err: err}
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 32 << 20
	}
	if opts.TxBytes <= 0 {
		opts.TxBytes = 1 << 20
	}
	if opts.SpillDir == "" {
		opts.SpillDir = l.spillDir()
	}
	r := &BulkRestorer{loader: l, store: store, opts: opts}
	if opts.Records > 0 {
		r.gathered = make([]gatheredRecord, 0, min(opts.Records, int64(opts.MaxBytes/gatheredOverhead)))
	}
	if err := l.bulkDrop(store); err != nil {
		return nil, &statestore.StoreError{Store: store, Op: "bulk restore", Err: err}
	}
	old, _ := filepath.Glob(filepath.Join(opts.SpillDir, r.spillPattern()))
	for _, d := range old {
		if err := os.RemoveAll(d); err != nil {
			return nil, &statestore.StoreError{Store: store, Op: "bulk restore", Err: fmt.Errorf("remove leftover run files: %w", err)}
		}
	}
	return r, nil
}

// NewBulkTailRestorer makes a BulkRestorer of a store's tail: a store with keys and a
// checkpoint, restored from there by a changelog tail far larger than the store. It
// gathers the tail as a restore from empty does (tombstones kept) and at Finish writes
// a new file in which the store is the merge of its keys with the tail's last values
// (boltbuild.go), with the tail's checkpoint. Until then the store stays as it was, at
// its old checkpoint: an interrupted tail restore keeps no progress but loses nothing.
// Only a backend that builds files (bbolt) supports it; LoadInPlace is not possible.
func NewBulkTailRestorer(backend Backend, store string, opts BulkRestorerOptions) (*BulkRestorer, error) {
	if _, ok := backend.(fileBuilder); !ok {
		return nil, ErrBulkUnsupported
	}
	opts.Load = LoadNewFile
	r, err := newBulkRestorer(backend, store, opts)
	if err != nil {
		return nil, err
	}
	r.tail = true
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
		g := gatheredRecord{prefix: keyPrefix(e.Key), key: r.arena.copy(e.Key), pos: len(r.gathered)}
		if e.Value != nil {
			g.value = r.arena.copy(e.Value)
			if g.value == nil {
				g.value = []byte{} // an empty value, not a tombstone
			}
		}
		r.gathered = append(r.gathered, g)
		r.bytes += len(e.Key) + len(e.Value) + gatheredOverhead
	}
	r.records += int64(len(records))
	r.next, r.has = next, true
	if r.bytes >= r.opts.MaxBytes {
		// A changelog overwrites its keys: keep only each key's last record, and spill
		// only when that frees less than a quarter of the budget.
		r.compact()
		if r.bytes >= r.opts.MaxBytes*3/4 {
			return r.spill()
		}
	}
	return nil
}

// compact keeps each gathered key's last record (tombstones too: they hide older
// runs), sorted, copied into a fresh arena.
func (r *BulkRestorer) compact() {
	r.sortGathered()
	var fresh arena
	out := make([]gatheredRecord, 0, len(r.gathered)/2)
	r.bytes = 0
	for i := 0; i < len(r.gathered); {
		j := lastOf(r.gathered, i)
		g := r.gathered[j-1]
		g.key, g.pos = fresh.copy(g.key), len(out)
		if g.value != nil {
			if g.value = fresh.copy(g.value); g.value == nil {
				g.value = []byte{}
			}
		}
		out = append(out, g)
		r.bytes += len(g.key) + len(g.value) + gatheredOverhead
		i = j
	}
	clear(r.gathered)
	r.gathered, r.arena, r.sortedN = out, fresh, len(out)
}

// gatheredRecord is one added record; a nil value is a tombstone.
type gatheredRecord struct {
	prefix     uint64 // keyPrefix(key)
	key, value []byte
	pos        int // position in log order
}

// gatheredOverhead is the memory of a gatheredRecord beyond its key and value.
const gatheredOverhead = 64

// arena hands out copies of byte slices from 1 MiB chunks.
type arena struct {
	chunk []byte
}

func (a *arena) copy(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	if len(b) > cap(a.chunk)-len(a.chunk) {
		if len(b) > 64<<10 {
			return bytes.Clone(b) // large values get their own allocation
		}
		a.chunk = make([]byte, 0, 1<<20)
	}
	n := len(a.chunk)
	a.chunk = append(a.chunk, b...)
	return a.chunk[n:len(a.chunk):len(a.chunk)]
}

// sortGathered sorts the gathered records by key, then log order. Keys compare first
// by their 8-byte integer prefix, as in RestoreBatch: one integer comparison for most
// pairs. The first sortedN records are sorted already (compact's output): only the
// records after them are sorted, then merged with them in one pass, so an
// overwrite-heavy changelog, compacted again and again, is not sorted again and again.
func (r *BulkRestorer) sortGathered() {
	head, tail := r.gathered[:r.sortedN], r.gathered[r.sortedN:]
	sortGatheredRecords(tail)
	if len(head) > 0 && len(tail) > 0 {
		merged := make([]gatheredRecord, 0, len(r.gathered))
		for len(head) > 0 && len(tail) > 0 {
			// On equal keys the head's record is older (a lower pos): it goes first.
			if compareGathered(tail[0], head[0]) < 0 {
				merged, tail = append(merged, tail[0]), tail[1:]
			} else {
				merged, head = append(merged, head[0]), head[1:]
			}
		}
		merged = append(append(merged, head...), tail...)
		clear(r.gathered)
		r.gathered = merged
	}
	r.sortedN = len(r.gathered)
}

// sortRef is a gathered record's place in a sort: its key prefix and index.
type sortRef struct {
	prefix uint64
	i      uint32
}

// sortGatheredRecords sorts recs as compareGathered orders them, through 16-byte
// (prefix, index) pairs: the sort moves those instead of the 64-byte records and
// compares integers for most pairs; the records are then put in place in one pass,
// cycle by cycle, with no second copy of the list. A profile of restore-full had 19%
// of the CPU in sorting the records themselves.
func sortGatheredRecords(recs []gatheredRecord) {
	if len(recs) < 64 || len(recs) >= math.MaxUint32 {
		slices.SortFunc(recs, compareGathered)
		return
	}
	refs := make([]sortRef, len(recs))
	for i := range recs {
		refs[i] = sortRef{recs[i].prefix, uint32(i)}
	}
	slices.SortFunc(refs, func(a, b sortRef) int {
		if a.prefix != b.prefix {
			return cmp.Compare(a.prefix, b.prefix)
		}
		return compareGathered(recs[a.i], recs[b.i])
	})
	// Position j takes the record at refs[j].i; follow each cycle of that permutation,
	// marking the positions done.
	const done = math.MaxUint32
	for j := range refs {
		if refs[j].i == done || int(refs[j].i) == j {
			continue
		}
		first := recs[j]
		k := j
		for {
			src := refs[k].i
			refs[k].i = done
			if int(src) == j {
				recs[k] = first
				break
			}
			recs[k] = recs[src]
			k = int(src)
		}
	}
}

func compareGathered(a, b gatheredRecord) int {
	if a.prefix != b.prefix {
		if a.prefix < b.prefix {
			return -1
		}
		return 1
	}
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c
	}
	return a.pos - b.pos
}

// lastOf returns the index after the group of records with the key of gathered[i]
// (sorted): its last record, at the returned index minus one, is the key's value.
func lastOf(gathered []gatheredRecord, i int) int {
	j := i + 1
	for j < len(gathered) && gathered[j].prefix == gathered[i].prefix && bytes.Equal(gathered[j].key, gathered[i].key) {
		j++
	}
	return j
}

// Records is the number of changelog records added.
func (r *BulkRestorer) Records() int64 { return r.records }

// Runs is the number of run files written so far.
func (r *BulkRestorer) Runs() int { return len(r.runs) }

// spill writes the gathered keys as one sorted run file and empties memory. A run
// record is uvarint(len(key)) key uvarint(0) for a tombstone, or uvarint(len(value)+1)
// value: tombstones are kept, they must hide older runs' values of the key.
func (r *BulkRestorer) spill() (err error) {
	if len(r.gathered) == 0 {
		return nil
	}
	if r.dir == "" {
		if err := os.MkdirAll(r.opts.SpillDir, 0o755); err != nil {
			return &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: err}
		}
		if r.dir, err = os.MkdirTemp(r.opts.SpillDir, r.spillPattern()[:len(r.spillPattern())-1]); err != nil {
			return &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: err}
		}
	}
	path := filepath.Join(r.dir, fmt.Sprintf("run-%06d", len(r.runs)))
	f, err := os.Create(path)
	if err != nil {
		return &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: err}
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: cerr}
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	var hdr []byte
	r.sortGathered()
	for i := 0; i < len(r.gathered); {
		j := lastOf(r.gathered, i)
		k, v := r.gathered[i].key, r.gathered[j-1].value
		i = j
		hdr = binary.AppendUvarint(hdr[:0], uint64(len(k)))
		hdr = append(hdr, k...)
		if v == nil {
			hdr = binary.AppendUvarint(hdr, 0)
		} else {
			hdr = binary.AppendUvarint(hdr, uint64(len(v))+1)
		}
		if _, err := w.Write(hdr); err != nil {
			return &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: err}
		}
		if _, err := w.Write(v); err != nil {
			return &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: err}
		}
		r.runBytes += int64(len(hdr) + len(v))
	}
	if err := w.Flush(); err != nil {
		return &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: err}
	}
	r.runs = append(r.runs, path)
	r.resetGathered()
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
		return &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: err}
	}
	defer closeSrc()
	if r.tail {
		fb := r.loader.(fileBuilder)
		if err := fb.buildTail(ctx, r.store, src, r.next); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: err}
		}
		return nil
	}
	if fb, ok := r.loader.(fileBuilder); ok && r.opts.Load != LoadInPlace {
		// The gathered data's size bounds the store's: the file build copies the rest
		// of the file, worth it when that is not larger.
		limit := int64(r.bytes) + r.runBytes
		if r.opts.Load == LoadNewFile {
			limit = math.MaxInt64
		}
		built, err := fb.buildLoad(ctx, r.store, src, r.next, limit)
		if built {
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: err}
			}
			return nil
		}
	}
	if u, ok := r.loader.(unsyncedWriter); ok {
		if err := u.beginUnsynced(); err != nil {
			return &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: err}
		}
	}
	if err := r.loader.bulkLoad(ctx, r.store, src, r.next, r.opts.TxBytes); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: err}
	}
	if u, ok := r.loader.(unsyncedWriter); ok {
		if err := u.endUnsynced(); err != nil {
			return &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: err}
		}
	}
	return nil
}

// Abort drops what was gathered: the store stays empty with no checkpoint.
func (r *BulkRestorer) Abort() error {
	r.cleanup()
	if err := r.loader.bulkDrop(r.store); err != nil {
		return &statestore.StoreError{Store: r.store, Op: "bulk restore", Err: err}
	}
	return nil
}

// resetGathered drops the gathered records (the arena's chunks go with them: the
// records of a run may be spilled while earlier slices are still referenced nowhere).
func (r *BulkRestorer) resetGathered() {
	clear(r.gathered)
	r.gathered, r.arena, r.bytes, r.sortedN = r.gathered[:0], arena{}, 0, 0
}

func (r *BulkRestorer) cleanup() {
	r.resetGathered()
	r.has, r.records = false, 0
	if r.dir != "" {
		_ = os.RemoveAll(r.dir) // best effort: the next bulk restore of the store removes leftovers
		r.dir, r.runs, r.runBytes = "", nil, 0
	}
}

// merged returns the gathered entries in key order, each key's newest value, without
// tombstones (with them, nil values, for a tail: they delete the store's keys).
func (r *BulkRestorer) merged() (src func() ([]byte, []byte, bool, error), closeSrc func(), err error) {
	r.sortGathered()
	if len(r.runs) == 0 {
		memSrc := &runReader{gathered: r.gathered}
		return func() ([]byte, []byte, bool, error) {
			for {
				if ok, _ := memSrc.advance(); !ok {
					return nil, nil, false, nil
				}
				if memSrc.val != nil || r.tail {
					return memSrc.key, memSrc.val, true, nil
				}
			}
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
	memSrc := &runReader{gathered: r.gathered, src: len(r.runs)}
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
			if val != nil || r.tail {
				return key, val, true, nil
			}
		}
		return nil, nil, false, nil
	}, closeAll, nil
}

// runReader reads one sorted source: a run file, or the gathered records (sorted;
// each key's last record is its value).
type runReader struct {
	r        *bufio.Reader
	gathered []gatheredRecord
	src      int
	key, val []byte
}

// advance moves to the next record; false at the end. The key and value stay valid
// until the load ends (fresh slices from a run, the arena's otherwise): bbolt keeps
// values referenced until its transaction commits.
func (rr *runReader) advance() (bool, error) {
	if rr.r == nil {
		if len(rr.gathered) == 0 {
			return false, nil
		}
		j := lastOf(rr.gathered, 0)
		rr.key, rr.val = rr.gathered[0].key, rr.gathered[j-1].value
		rr.gathered = rr.gathered[j:]
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
