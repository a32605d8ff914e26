package kvstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/eddy-streams/eddy/statestore"
)

// This file builds a bbolt file front to back, without bbolt, for a store restored
// from empty: the store's keys arrive in order (BulkRestorer's merge), so its B+tree is
// written bottom-up, page after page, full, with one fsync at the end, and renamed over
// the task's file. Loading the same keys through bbolt's Put (the staging bucket of
// boltbulk.go) cost ~1 µs a key — a search from the root, a copy of the key, a node
// split and a page rewrite at each commit: 48% of restore-full's CPU (BENCHMARKS.md) —
// where writing the page costs a copy.
//
// The other buckets of the file (the other stores of the task, the checkpoints, the
// empty keys) are copied into the new file the same way, so the build pays for the old
// file's size too: boltBackend.buildLoad builds only when the old file is no larger than
// the data being loaded, and otherwise leaves it to the staging bucket.
//
// Why every state is valid: the new file is written under another name
// (stores.db.build), fsynced, and renamed over stores.db, and the directory fsynced; a
// crash before the rename leaves the old file as it was (its store empty with no
// checkpoint: the restore starts over) and a leftover build file that the next bulk
// restore removes; after the rename the file is the new one, complete, with the
// store's keys and checkpoint in it. The format is the one boltverify.go describes.

// buildFileSuffix names the file a build writes before it is renamed into place.
const buildFileSuffix = ".build"

// ctxEvery is how many keys a build writes between two looks at its context.
const ctxEvery = 64

// boltFileWriter writes the pages of a bbolt file in id order: pages 0 and 1 (meta) and
// 2 (the freelist, empty) last, data pages from 3 on, each as soon as it is full.
type boltFileWriter struct {
	f    *os.File
	w    *bufio.Writer
	ps   int
	next uint64 // id of the next page written
	page []byte // scratch
}

func newBoltFileWriter(f *os.File, pageSize int) (*boltFileWriter, error) {
	if _, err := f.Seek(int64(3*pageSize), io.SeekStart); err != nil {
		return nil, err
	}
	return &boltFileWriter{f: f, w: bufio.NewWriterSize(f, 1<<20), ps: pageSize, next: 3}, nil
}

// writePage writes one page (and its overflow pages) of the given kind: the header is
// made here, body follows it. It returns the page's id.
func (fw *boltFileWriter) writePage(flags uint16, count int, body ...[]byte) (uint64, error) {
	size := pageHeaderSize
	for _, b := range body {
		size += len(b)
	}
	pages := (size + fw.ps - 1) / fw.ps
	id := fw.next
	var hdr [pageHeaderSize]byte
	ne.PutUint64(hdr[0:], id)
	ne.PutUint16(hdr[8:], flags)
	ne.PutUint16(hdr[10:], uint16(count))
	ne.PutUint32(hdr[12:], uint32(pages-1))
	if _, err := fw.w.Write(hdr[:]); err != nil {
		return 0, err
	}
	for _, b := range body {
		if _, err := fw.w.Write(b); err != nil {
			return 0, err
		}
	}
	if pad := pages*fw.ps - size; pad > 0 {
		if cap(fw.page) < pad {
			fw.page = make([]byte, fw.ps)
		}
		if _, err := fw.w.Write(fw.page[:pad]); err != nil {
			return 0, err
		}
	}
	fw.next += uint64(pages)
	return id, nil
}

// finish writes the root bucket's tree from the buckets' headers (name → bucket
// value), the empty freelist and both meta pages. The caller fsyncs the file.
func (fw *boltFileWriter) finish(buckets map[string][]byte) error {
	root := fw.tree()
	names := make([]string, 0, len(buckets))
	for name := range buckets {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := root.add([]byte(name), buckets[name], bucketLeafFlag); err != nil {
			return err
		}
	}
	rootID, inline, err := root.finish()
	if err != nil {
		return err
	}
	if inline { // no buckets at all: the root bucket is one empty leaf page
		if rootID, err = fw.writePage(leafPageFlag, 0); err != nil {
			return err
		}
	}
	if err := fw.w.Flush(); err != nil {
		return err
	}
	head := make([]byte, 3*fw.ps)
	for i := range 2 {
		p := head[i*fw.ps:]
		ne.PutUint64(p[0:], uint64(i))
		ne.PutUint16(p[8:], metaPageFlag)
		m := p[pageHeaderSize:]
		ne.PutUint32(m[0:], boltMagic)
		ne.PutUint32(m[4:], boltVersion)
		ne.PutUint32(m[8:], uint32(fw.ps))
		ne.PutUint64(m[16:], rootID) // root bucket {root, sequence 0}
		ne.PutUint64(m[32:], 2)      // freelist page
		ne.PutUint64(m[40:], fw.next)
		ne.PutUint64(m[48:], uint64(i)) // txid: bbolt uses the valid meta with the higher one
		h := fnv.New64a()
		_, _ = h.Write(m[:56])
		ne.PutUint64(m[56:], h.Sum64())
	}
	fl := head[2*fw.ps:]
	ne.PutUint64(fl[0:], 2)
	ne.PutUint16(fl[8:], freelistPageFlag)
	_, err = fw.f.WriteAt(head, 0)
	return err
}

func (fw *boltFileWriter) tree() *treeBuilder { return &treeBuilder{fw: fw} }

// A treeBuilder writes one bucket's B+tree from its keys in increasing order: leaf pages
// as they fill, and one open page per branch level above them, which takes the first
// key of each page written below it. Each level holds its last full page back until
// the next one fills: at the end, a last page too small for bbolt (a branch page needs
// two children: bbolt's rebalance asserts it) is merged into the one held back.
// Memory: two pages per level.
type treeBuilder struct {
	fw     *boltFileWriter
	levels []*level // levels[0]: leaves
	n      int64    // keys added
	last   uint64   // id of the page written last
}

type level struct {
	open, held *openPage // held: full, not written yet (nil if none)
	written    int       // pages written at this level
}

// openPage is a page being filled: its elements, each with its key's offset in data
// where its pos goes (set when written), then the keys and values.
type openPage struct {
	count int
	elems []byte
	data  []byte
	first []byte
}

// minElems is the fewest elements a page of the level takes before it is full: one
// for a leaf, two for a branch page, as bbolt's own splits do (large keys overflow
// the page instead), so every level has at most half the pages of the one below.
func minElems(lv int) int {
	if lv == 0 {
		return 1
	}
	return 2
}

// add appends a key (greater than the last one) with its value; flags is
// bucketLeafFlag for a nested bucket, whose value is its bucket header.
func (t *treeBuilder) add(key, value []byte, flags uint32) error {
	t.n++
	return t.addAt(0, key, value, flags, 0)
}

func (t *treeBuilder) addAt(lv int, key, value []byte, flags uint32, child uint64) error {
	if lv == len(t.levels) {
		t.levels = append(t.levels, &level{open: &openPage{}})
	}
	l := t.levels[lv]
	p := l.open
	size := pageHeaderSize + (p.count+1)*elemSize + len(p.data) + len(key) + len(value)
	if p.count >= minElems(lv) && (size > t.fw.ps || p.count == 0xFFFF) {
		// Full: write the page held back, hold this one.
		if l.held != nil {
			if err := t.write(lv, l.held, true); err != nil {
				return err
			}
		}
		if l.held == nil {
			l.held = &openPage{}
		}
		l.held, l.open = p, l.held
		p = l.open
	}
	if p.count == 0 {
		p.first = append(p.first[:0], key...)
	}
	var e [elemSize]byte
	if lv == 0 {
		ne.PutUint32(e[0:], flags)
		ne.PutUint32(e[4:], uint32(len(p.data)))
		ne.PutUint32(e[8:], uint32(len(key)))
		ne.PutUint32(e[12:], uint32(len(value)))
	} else {
		ne.PutUint32(e[0:], uint32(len(p.data)))
		ne.PutUint32(e[4:], uint32(len(key)))
		ne.PutUint64(e[8:], child)
	}
	p.elems = append(p.elems, e[:]...)
	p.data = append(p.data, key...)
	p.data = append(p.data, value...)
	p.count++
	return nil
}

// posField is where an element of the level keeps its pos (leaf: flags, pos, ksize,
// vsize; branch: pos, ksize, pgid).
func posField(lv int) int {
	if lv == 0 {
		return 4
	}
	return 0
}

// write writes page p of level lv, empties it, and, with push, adds it to the level
// above; it returns the page's id in t.last.
func (t *treeBuilder) write(lv int, p *openPage, push bool) error {
	at := posField(lv)
	for i := range p.count {
		e := p.elems[i*elemSize:]
		// pos: from the element to its key, which is at off in data, after all elements.
		ne.PutUint32(e[at:], uint32((p.count-i)*elemSize)+ne.Uint32(e[at:]))
	}
	flags := uint16(leafPageFlag)
	if lv > 0 {
		flags = branchPageFlag
	}
	id, err := t.fw.writePage(flags, p.count, p.elems, p.data)
	if err != nil {
		return err
	}
	t.last = id
	t.levels[lv].written++
	p.count, p.elems, p.data = 0, p.elems[:0], p.data[:0]
	if !push {
		return nil
	}
	return t.addAt(lv+1, p.first, nil, 0, id)
}

// merge appends the elements of q to p (q's keys follow p's).
func merge(lv int, p, q *openPage) {
	at := posField(lv)
	for i := range q.count {
		e := q.elems[i*elemSize : (i+1)*elemSize]
		ne.PutUint32(e[at:], ne.Uint32(e[at:])+uint32(len(p.data)))
		p.elems = append(p.elems, e...)
	}
	p.data = append(p.data, q.data...)
	p.count += q.count
	q.count, q.elems, q.data = 0, q.elems[:0], q.data[:0]
}

// finish writes the pages left bottom-up and returns the root page's id; inline is set
// when the tree has no keys (the bucket is then an empty inline bucket).
func (t *treeBuilder) finish() (root uint64, inline bool, err error) {
	if len(t.levels) == 0 {
		return 0, true, nil
	}
	for lv := 0; ; lv++ {
		l := t.levels[lv]
		if l.held != nil && l.open.count < minElems(lv) {
			merge(lv, l.held, l.open)
		}
		pages := l.written
		if l.held != nil && l.held.count > 0 {
			pages++
		}
		if l.open.count > 0 {
			pages++
		}
		if pages == 1 && lv+1 == len(t.levels) {
			// The only page of the top level: the root.
			p := l.open
			if l.held != nil && l.held.count > 0 {
				p = l.held
			}
			if err := t.write(lv, p, false); err != nil {
				return 0, false, err
			}
			return t.last, false, nil
		}
		for _, p := range []*openPage{l.held, l.open} {
			if p != nil && p.count > 0 {
				if err := t.write(lv, p, true); err != nil {
					return 0, false, err
				}
			}
		}
	}
}

// bucketValue is the value of a bucket's element in its parent: the header {root,
// sequence}, and for an empty bucket an empty inline leaf page after it.
func bucketValue(root uint64, inline bool, sequence uint64) []byte {
	v := make([]byte, bucketHeaderSize, bucketHeaderSize+pageHeaderSize)
	ne.PutUint64(v[0:], root)
	ne.PutUint64(v[8:], sequence)
	if inline {
		var p [pageHeaderSize]byte
		ne.PutUint16(p[8:], leafPageFlag)
		v = append(v, p[:]...)
	}
	return v
}

// copyBucket writes a copy of bk (nested buckets too) and returns its bucket value.
// extra, if set, is merged into its keys: a key of extra must not be in bk, unless
// replace, where extra's value replaces bk's (a nil value removes the key).
func (fw *boltFileWriter) copyBucket(ctx context.Context, bk *bolt.Bucket, extraKey, extraValue []byte, replace bool) ([]byte, error) {
	t := fw.tree()
	addExtra := func() error {
		var err error
		if extraValue != nil {
			err = t.add(extraKey, extraValue, 0)
		}
		extraKey = nil
		return err
	}
	var seq uint64
	if bk != nil {
		seq = bk.Sequence()
		c := bk.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if t.n%ctxEvery == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			if extraKey != nil {
				switch cmp := bytes.Compare(extraKey, k); {
				case cmp == 0 && !replace:
					return nil, fmt.Errorf("%w: key %q is there already", ErrNotEmpty, extraKey)
				case cmp == 0:
					if err := addExtra(); err != nil {
						return nil, err
					}
					continue
				case cmp < 0:
					if err := addExtra(); err != nil {
						return nil, err
					}
				}
			}
			if v == nil {
				if sub := bk.Bucket(k); sub != nil {
					sv, err := fw.copyBucket(ctx, sub, nil, nil, false)
					if err != nil {
						return nil, err
					}
					if err := t.add(k, sv, bucketLeafFlag); err != nil {
						return nil, err
					}
					continue
				}
			}
			if err := t.add(k, v, 0); err != nil {
				return nil, err
			}
		}
	}
	if extraKey != nil {
		if err := addExtra(); err != nil {
			return nil, err
		}
	}
	root, inline, err := t.finish()
	if err != nil {
		return nil, err
	}
	return bucketValue(root, inline, seq), nil
}

// loadBucket writes a bucket of src's entries (increasing keys) and returns its bucket
// value and the empty key's last record (bbolt keeps it elsewhere; emptySeen tells
// whether src had one, emptyValue is nil for a tombstone). With old (a tail), src's
// entries are merged into old's keys, src's winning, and a nil value (a tombstone)
// removes a key; without, src has no tombstones.
func (fw *boltFileWriter) loadBucket(ctx context.Context, store string, old *bolt.Bucket, src func() ([]byte, []byte, bool, error)) (value, emptyValue []byte, emptySeen bool, err error) {
	t := fw.tree()
	var oc *bolt.Cursor
	var ok, ov []byte
	if old != nil {
		oc = old.Cursor()
		ok, ov = oc.First()
	}
	// addOld writes old's keys below key (all of them for nil).
	addOld := func(key []byte) error {
		for ok != nil && (key == nil || bytes.Compare(ok, key) < 0) {
			if ov == nil && old.Bucket(ok) != nil {
				return fmt.Errorf("store %q: the store holds a nested bucket %q: a tail cannot be merged into it", store, ok)
			}
			if err := t.add(ok, ov, 0); err != nil {
				return err
			}
			ok, ov = oc.Next()
		}
		return nil
	}
	for {
		if t.n%ctxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, nil, false, err
			}
		}
		k, v, more, err := src()
		if err != nil {
			return nil, nil, false, err
		}
		if !more {
			break
		}
		if len(k) == 0 {
			emptyValue, emptySeen = bytes.Clone(v), true
			continue
		}
		if len(k) > statestore.MaxKeySize {
			return nil, nil, false, fmt.Errorf("store %q: %w: a key of %d bytes (starting %x)", store, statestore.ErrKeyTooLarge, len(k), k[:16])
		}
		if oc != nil {
			if err := addOld(k); err != nil {
				return nil, nil, false, err
			}
			if bytes.Equal(ok, k) {
				ok, ov = oc.Next() // src's record replaces it
			}
			if v == nil {
				continue // a tombstone
			}
		}
		if err := t.add(k, v, 0); err != nil {
			return nil, nil, false, err
		}
	}
	if oc != nil {
		if err := addOld(nil); err != nil {
			return nil, nil, false, err
		}
	}
	root, inline, err := t.finish()
	if err != nil {
		return nil, nil, false, err
	}
	var seq uint64
	if old != nil {
		seq = old.Sequence()
	}
	return bucketValue(root, inline, seq), emptyValue, emptySeen, nil
}

// BulkTailKeys tells whether a tail of store can be merged by a NewBulkTailRestorer
// (a bbolt backend, and a store of plain keys: a tail is not merged into nested
// buckets) and how many keys the store holds.
func BulkTailKeys(backend Backend, store string) (keys int64, ok bool, err error) {
	b, isBolt := backend.(*boltBackend)
	if !isBolt {
		return 0, false, nil
	}
	err = b.do("count", store, func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			ok = true
			if bk := tx.Bucket([]byte(store)); bk != nil {
				st := bk.Stats()
				keys, ok = int64(st.KeyN), st.BucketN <= 1
			}
			return nil
		})
	})
	return keys, ok && err == nil, err
}

// fileBuilder is a backend that can build a store restored from empty as a new file
// (bbolt).
type fileBuilder interface {
	// buildLoad loads src (as bulkLoader.bulkLoad) into a new file that replaces the
	// backend's, if the file is no larger than sizeHint bytes; built is false, with
	// src untouched, when it is larger.
	buildLoad(ctx context.Context, store string, src func() ([]byte, []byte, bool, error), checkpoint, sizeHint int64) (built bool, err error)
	// buildTail merges src (increasing keys, nil values deleting) into the store's keys
	// in a new file that replaces the backend's, with the checkpoint.
	buildTail(ctx context.Context, store string, src func() ([]byte, []byte, bool, error), checkpoint int64) error
}

// buildLoad builds the task's file anew with store loaded from src and its checkpoint,
// every other bucket copied, renames it over the file and reopens it (see the top of
// this file). On an error before the rename the backend goes on with its old file, in
// which the store is still empty with no checkpoint.
func (b *boltBackend) buildLoad(ctx context.Context, store string, src func() ([]byte, []byte, bool, error), checkpoint, sizeHint int64) (built bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false, fmt.Errorf("statestore: %s: %w", b.path, statestore.ErrClosed)
	}
	if d := b.damaged.Load(); d != nil {
		return false, *d
	}
	fi, err := os.Stat(b.path)
	if err != nil {
		return false, err
	}
	if fi.Size() > sizeHint {
		return false, nil
	}
	return true, b.buildSwap(ctx, store, src, checkpoint, false)
}

// buildTail is buildLoad for a tail (NewBulkTailRestorer), whatever the file's size.
func (b *boltBackend) buildTail(ctx context.Context, store string, src func() ([]byte, []byte, bool, error), checkpoint int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("statestore: %s: %w", b.path, statestore.ErrClosed)
	}
	if d := b.damaged.Load(); d != nil {
		return *d
	}
	return b.buildSwap(ctx, store, src, checkpoint, true)
}

// buildSwap builds the new file and swaps it in (under the write lock).
func (b *boltBackend) buildSwap(ctx context.Context, store string, src func() ([]byte, []byte, bool, error), checkpoint int64, tail bool) error {
	tmp := b.path + buildFileSuffix
	began := time.Now()
	synced, err := b.buildFile(ctx, tmp, store, src, checkpoint, tail)
	if err != nil {
		return errors.Join(err, removeIfThere(tmp))
	}
	if b.buildHook != nil {
		if err := b.buildHook("built"); err != nil {
			return errors.Join(err, removeIfThere(tmp))
		}
	}
	// The swap. bbolt holds the old file open and mapped: close it first.
	if err := b.db.Close(); err != nil {
		return errors.Join(b.markDamaged("bulk restore", store, "closing the file before the swap: "+err.Error()), removeIfThere(tmp))
	}
	renameErr := os.Rename(tmp, b.path)
	if renameErr == nil {
		renameErr = syncDir(b.dir)
	}
	db, err := openBoltDB(b.path, b.opts)
	if err != nil {
		return errors.Join(renameErr, b.markDamaged("bulk restore", store, "reopening the file after the swap: "+err.Error()))
	}
	db.NoSync, db.NoGrowSync = b.db.NoSync, b.db.NoGrowSync
	b.db = db
	if renameErr != nil {
		return errors.Join(fmt.Errorf("statestore: move the built file into place: %w", renameErr), removeIfThere(tmp))
	}
	b.log.Debug("statestore: store built as a new file", "store", store, "write", synced.Sub(began).Round(time.Millisecond),
		"fsync_and_swap", time.Since(synced).Round(time.Millisecond))
	return nil
}

// buildFile writes the new file at path: store from src, every other bucket of the
// open file copied, the checkpoint added. The store must be empty with no checkpoint.
// A bbolt panic while reading the old file means it is damaged.
// It returns when the pages were written (the fsync follows).
func (b *boltBackend) buildFile(ctx context.Context, path, store string, src func() ([]byte, []byte, bool, error), checkpoint int64, tail bool) (written time.Time, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return written, err
	}
	defer func() {
		if err == nil {
			written = time.Now()
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	fw, err := newBoltFileWriter(f, b.db.Info().PageSize)
	if err != nil {
		return written, err
	}
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = b.markDamaged("bulk restore", store, fmt.Sprint(r))
		}
	}()
	return written, b.db.View(func(tx *bolt.Tx) error {
		name := []byte(store)
		var old *bolt.Bucket
		if tail {
			old = tx.Bucket(name)
		} else {
			if bk := tx.Bucket(name); bk != nil {
				if k, _ := bk.Cursor().First(); k != nil {
					return fmt.Errorf("store %q: %w: it has keys", store, ErrNotEmpty)
				}
			}
			if m := tx.Bucket(metaBucket); m != nil && m.Get(name) != nil {
				return fmt.Errorf("store %q: %w: it has a checkpoint", store, ErrNotEmpty)
			}
			if e := tx.Bucket(emptyKeyBucket); e != nil && e.Get(name) != nil {
				return fmt.Errorf("store %q: %w: it has a value for the empty key", store, ErrNotEmpty)
			}
		}
		buckets := map[string][]byte{}
		v, emptyValue, emptySeen, err := fw.loadBucket(ctx, store, old, src)
		if err != nil {
			return err
		}
		buckets[store] = v
		// A tail replaces the store's checkpoint (and its empty key's value, if the
		// tail has a record of it); a load from empty adds them.
		cp := binary.BigEndian.AppendUint64(nil, uint64(checkpoint))
		if buckets[string(metaBucket)], err = fw.copyBucket(ctx, tx.Bucket(metaBucket), name, cp, tail); err != nil {
			return err
		}
		var emptyKey []byte
		if emptySeen {
			emptyKey = name
		}
		if buckets[string(emptyKeyBucket)], err = fw.copyBucket(ctx, tx.Bucket(emptyKeyBucket), emptyKey, emptyValue, tail); err != nil {
			return err
		}
		err = tx.ForEach(func(n []byte, bk *bolt.Bucket) error {
			switch string(n) {
			case store, string(metaBucket), string(emptyKeyBucket), string(stagingBucket):
				return nil
			}
			v, err := fw.copyBucket(ctx, bk, nil, nil, false)
			buckets[string(n)] = v
			return err
		})
		if err != nil {
			return err
		}
		return fw.finish(buckets)
	})
}

func removeIfThere(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
