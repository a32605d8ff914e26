package kvstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// This file checks a bbolt file without bbolt. bbolt trusts its file: it reads pages
// through an unchecked mmap, so a damaged page id makes it fault outside the mapping or
// panic, and with NoFreelistSync its Open walks the whole tree in a goroutine of its
// own, where neither can be recovered. The checker below reads the file with pread and
// checks every bound before it uses it, so a damaged file is an error, never a crash.
//
// The on-disk format (bbolt file format version 2, unchanged since boltdb) in host byte
// order:
//
//	page header (16 B)   id u64, flags u16, count u16, overflow u32
//	meta (at 16)         magic u32, version u32, pageSize u32, flags u32,
//	                     root bucket {root pgid u64, sequence u64}, freelist pgid u64,
//	                     high-water mark pgid u64, txid u64, checksum u64 (FNV-64a of the
//	                     56 bytes before it)
//	branch element (16)  pos u32, ksize u32, pgid u64; key at element + pos
//	leaf element (16)    flags u32 (1 = bucket), pos u32, ksize u32, vsize u32; key at
//	                     element + pos, value right after the key
//	bucket value         {root pgid u64, sequence u64}; root 0 = inline: a leaf page follows
//	freelist page        count pgids after the header; count 0xFFFF: the first u64 is the
//	                     count
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderSize   = 16
	elemSize         = 16
	bucketHeaderSize = 16
	metaSize         = 64
	noFreelist       = ^uint64(0)

	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	metaPageFlag     = 0x04
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01

	maxTreeDepth = 64 // a B+tree of 4 KiB pages is far shallower
)

var ne = binary.NativeEndian

// boltMeta is a decoded meta page.
type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	hwm      uint64 // pages [0, hwm) are in use
	txid     uint64
}

// damage describes a structural problem of a bbolt file.
type damage struct{ msg string }

func (d *damage) Error() string { return d.msg }

func damagef(format string, args ...any) error { return &damage{msg: fmt.Sprintf(format, args...)} }

// isDamage reports whether err says the file is damaged (as opposed to unreadable
// because of the environment: permissions, I/O).
func isDamage(err error) bool {
	var d *damage
	return errors.As(err, &d)
}

func decodeMeta(buf []byte) (boltMeta, error) {
	if len(buf) < pageHeaderSize+metaSize {
		return boltMeta{}, damagef("meta page truncated")
	}
	if flags := ne.Uint16(buf[8:]); flags != metaPageFlag {
		return boltMeta{}, damagef("meta page has flags %#x", flags)
	}
	m := buf[pageHeaderSize : pageHeaderSize+metaSize]
	if ne.Uint32(m[0:]) != boltMagic {
		return boltMeta{}, damagef("bad magic %#x", ne.Uint32(m[0:]))
	}
	if v := ne.Uint32(m[4:]); v != boltVersion {
		return boltMeta{}, damagef("unknown file format version %d", v)
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:56])
	if sum := ne.Uint64(m[56:]); sum != h.Sum64() {
		return boltMeta{}, damagef("meta checksum mismatch")
	}
	return boltMeta{
		pageSize: ne.Uint32(m[8:]),
		root:     ne.Uint64(m[16:]),
		freelist: ne.Uint64(m[32:]),
		hwm:      ne.Uint64(m[40:]),
		txid:     ne.Uint64(m[48:]),
	}, nil
}

// readBoltMeta returns the meta bbolt will use (the valid one with the higher txid, as
// bbolt picks it), the file size, and an error if neither meta page is valid. It reads
// two pages: cheap enough for every open.
func readBoltMeta(f *os.File) (boltMeta, int64, error) {
	st, err := f.Stat()
	if err != nil {
		return boltMeta{}, 0, err
	}
	size := st.Size()
	// Page 0 tells the page size; page 1 is at that offset. Try the common sizes for
	// page 1 when page 0 is damaged, as bbolt does.
	buf := make([]byte, 4096)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return boltMeta{}, size, err
	}
	m0, err0 := decodeMeta(buf[:n])
	var cands []boltMeta
	if err0 == nil {
		cands = append(cands, m0)
	}
	sizes := []int64{1024, 2048, 4096, 8192, 16384, 32768, 65536}
	if err0 == nil {
		sizes = []int64{int64(m0.pageSize)}
	}
	var err1 error = damagef("no second meta page")
	for _, ps := range sizes {
		if ps+pageHeaderSize+metaSize > size {
			break
		}
		n, err := f.ReadAt(buf, ps)
		if err != nil && !errors.Is(err, io.EOF) {
			return boltMeta{}, size, err
		}
		m1, e := decodeMeta(buf[:n])
		if e == nil && int64(m1.pageSize) == ps {
			cands = append(cands, m1)
			err1 = nil
			break
		}
		if err0 != nil && ps == int64(os.Getpagesize()) {
			err1 = e // the likeliest place of page 1 tells the most
		} else if err0 == nil {
			err1 = e
		}
	}
	if len(cands) == 0 {
		return boltMeta{}, size, damagef("both meta pages are invalid (page 0: %v; page 1: %v)", err0, err1)
	}
	best := cands[0]
	for _, c := range cands[1:] {
		if c.txid > best.txid {
			best = c
		}
	}
	if best.pageSize < 512 || best.pageSize&(best.pageSize-1) != 0 {
		return boltMeta{}, size, damagef("implausible page size %d", best.pageSize)
	}
	return best, size, nil
}

// VerifyStats tells what a consistency check covered.
type VerifyStats struct {
	Pages    uint64 // pages below the high-water mark
	Reached  uint64 // pages reachable from the root
	Free     uint64 // pages on the stored freelist (0 when it is not stored)
	Keys     uint64 // leaf elements (keys and bucket entries)
	Buckets  uint64
	FileSize int64
	TxID     uint64
}

// VerifyBoltFile runs OpenBolt's full consistency check on the bbolt file at path,
// without bbolt and without changing the file: the meta page bbolt would use, every
// page reachable from it (ids, types, bounds, overflow), the key order within pages and
// against their parents, nested and inline buckets, that no page is referenced twice,
// and the freelist when it is stored. It takes no lock: use it on files nobody has
// open (a moved-aside damaged file, a copy). The error wraps ErrDamaged when the file
// is damaged; other errors are failures to read it.
func VerifyBoltFile(path string) (VerifyStats, error) {
	st, err := verifyBoltFile(path)
	if isDamage(err) {
		return st, fmt.Errorf("statestore: %s: %w: %w", path, ErrDamaged, err)
	}
	return st, err
}

// verifyBoltFile is VerifyBoltFile; a problem with the file is a *damage error.
func verifyBoltFile(path string) (VerifyStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return VerifyStats{}, err
	}
	defer f.Close()
	meta, size, err := readBoltMeta(f)
	if err != nil {
		return VerifyStats{FileSize: size}, err
	}
	v := &verifier{f: f, meta: meta, ps: uint64(meta.pageSize), size: size}
	v.stats = VerifyStats{FileSize: size, TxID: meta.txid, Pages: meta.hwm}
	if err := checkSize(meta, size); err != nil {
		return v.stats, err
	}
	v.reached = make([]uint64, (meta.hwm+63)/64)
	v.mark(0, 0)
	v.mark(1, 0)
	if err := v.checkBucketRoot(meta.root, 0); err != nil {
		return v.stats, err
	}
	if meta.freelist != noFreelist {
		if err := v.checkFreelist(); err != nil {
			return v.stats, err
		}
		// With a stored freelist every page is either in use or free.
		for id := uint64(0); id < meta.hwm; id++ {
			if !v.isMarked(id) {
				return v.stats, damagef("page %d is neither reachable nor free", id)
			}
		}
	}
	return v.stats, nil
}

// checkSize checks the meta's high-water mark against the file size (before anything is
// sized by it).
func checkSize(meta boltMeta, size int64) error {
	if meta.hwm < 2 {
		return damagef("high-water mark %d below 2", meta.hwm)
	}
	if meta.hwm > uint64(size)/uint64(meta.pageSize) {
		return damagef("file is %d bytes, shorter than its %d pages of %d bytes", size, meta.hwm, meta.pageSize)
	}
	return nil
}

type verifier struct {
	f       *os.File
	meta    boltMeta
	ps      uint64
	size    int64
	reached []uint64 // bitmap of pages reached (or free)
	stats   VerifyStats
}

func (v *verifier) isMarked(id uint64) bool { return v.reached[id/64]&(1<<(id%64)) != 0 }

// mark records pages id..id+overflow as used; a page used twice is damage.
func (v *verifier) mark(id uint64, overflow uint32) error {
	for i := id; i <= id+uint64(overflow); i++ {
		if v.isMarked(i) {
			return damagef("page %d is referenced twice", i)
		}
		v.reached[i/64] |= 1 << (i % 64)
	}
	return nil
}

// readPage reads page id with its overflow pages, checking its header.
func (v *verifier) readPage(id uint64) ([]byte, error) {
	if id < 2 || id >= v.meta.hwm {
		return nil, damagef("page id %d outside [2, %d)", id, v.meta.hwm)
	}
	hdr := make([]byte, v.ps)
	if _, err := v.f.ReadAt(hdr, int64(id*v.ps)); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, damagef("page %d beyond the end of the file", id)
		}
		return nil, fmt.Errorf("read page %d: %w", id, err)
	}
	if got := ne.Uint64(hdr[0:]); got != id {
		return nil, damagef("page %d identifies itself as page %d", id, got)
	}
	overflow := ne.Uint32(hdr[12:])
	if id+uint64(overflow) >= v.meta.hwm {
		return nil, damagef("page %d with %d overflow pages ends past the high-water mark %d", id, overflow, v.meta.hwm)
	}
	if err := v.mark(id, overflow); err != nil {
		return nil, err
	}
	if overflow == 0 {
		return hdr, nil
	}
	buf := make([]byte, (uint64(overflow)+1)*v.ps)
	copy(buf, hdr)
	if _, err := v.f.ReadAt(buf[v.ps:], int64((id+1)*v.ps)); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, damagef("page %d: overflow beyond the end of the file", id)
		}
		return nil, fmt.Errorf("read page %d: %w", id, err)
	}
	return buf, nil
}

// checkBucketRoot checks the tree of a bucket whose root page is id.
func (v *verifier) checkBucketRoot(id uint64, depth int) error {
	v.stats.Buckets++
	if depth > maxTreeDepth {
		return damagef("buckets nested deeper than %d", maxTreeDepth)
	}
	return v.checkTree(id, nil, nil, depth, 0)
}

// checkTree checks the subtree at page id: every key in [lo, hi) (nil: open).
func (v *verifier) checkTree(id uint64, lo, hi []byte, bucketDepth, depth int) error {
	if depth > maxTreeDepth {
		return damagef("tree deeper than %d at page %d", maxTreeDepth, id)
	}
	p, err := v.readPage(id)
	if err != nil {
		return err
	}
	v.stats.Reached += uint64(ne.Uint32(p[12:])) + 1
	switch flags := ne.Uint16(p[8:]); flags {
	case branchPageFlag:
		return v.checkBranch(id, p, lo, hi, bucketDepth, depth)
	case leafPageFlag:
		return v.checkLeaf(id, p, lo, hi, bucketDepth)
	default:
		return damagef("page %d in a tree has flags %#x", id, flags)
	}
}

func (v *verifier) checkBranch(id uint64, p []byte, lo, hi []byte, bucketDepth, depth int) error {
	count := int(ne.Uint16(p[10:]))
	if count == 0 {
		return damagef("branch page %d is empty", id)
	}
	if pageHeaderSize+count*elemSize > len(p) {
		return damagef("branch page %d: %d elements overflow the page", id, count)
	}
	keys := make([][]byte, count)
	kids := make([]uint64, count)
	for i := range count {
		off := pageHeaderSize + i*elemSize
		pos, ksize := uint64(ne.Uint32(p[off:])), uint64(ne.Uint32(p[off+4:]))
		kids[i] = ne.Uint64(p[off+8:])
		if uint64(off)+pos+ksize > uint64(len(p)) {
			return damagef("branch page %d: element %d points outside the page", id, i)
		}
		keys[i] = p[uint64(off)+pos : uint64(off)+pos+ksize]
		if i > 0 && bytes.Compare(keys[i-1], keys[i]) >= 0 {
			return damagef("branch page %d: keys %d and %d out of order", id, i-1, i)
		}
	}
	if lo != nil && bytes.Compare(keys[0], lo) < 0 {
		return damagef("branch page %d: first key below its parent's key", id)
	}
	if hi != nil && bytes.Compare(keys[count-1], hi) >= 0 {
		return damagef("branch page %d: last key not below the parent's next key", id)
	}
	for i := range count {
		childHi := hi
		if i+1 < count {
			childHi = keys[i+1]
		}
		if err := v.checkTree(kids[i], keys[i], childHi, bucketDepth, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (v *verifier) checkLeaf(id uint64, p []byte, lo, hi []byte, bucketDepth int) error {
	count := int(ne.Uint16(p[10:]))
	if pageHeaderSize+count*elemSize > len(p) {
		return damagef("leaf page %d: %d elements overflow the page", id, count)
	}
	var prev []byte
	for i := range count {
		off := pageHeaderSize + i*elemSize
		flags := ne.Uint32(p[off:])
		pos, ksize, vsize := uint64(ne.Uint32(p[off+4:])), uint64(ne.Uint32(p[off+8:])), uint64(ne.Uint32(p[off+12:]))
		if uint64(off)+pos+ksize+vsize > uint64(len(p)) {
			return damagef("leaf page %d: element %d points outside the page", id, i)
		}
		k := p[uint64(off)+pos : uint64(off)+pos+ksize]
		val := p[uint64(off)+pos+ksize : uint64(off)+pos+ksize+vsize]
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			return damagef("leaf page %d: keys %d and %d out of order", id, i-1, i)
		}
		if (lo != nil && bytes.Compare(k, lo) < 0) || (hi != nil && bytes.Compare(k, hi) >= 0) {
			return damagef("leaf page %d: key %d outside the range its parent gives", id, i)
		}
		prev = k
		v.stats.Keys++
		switch flags {
		case 0:
			if bucketDepth == 0 {
				// bbolt's root holds only buckets (a Tx has no Put); a plain key there
				// gives a nil *Bucket to anyone iterating the root (tx.ForEach).
				return damagef("leaf page %d: element %d of the root is a plain key, not a bucket", id, i)
			}
		case bucketLeafFlag:
			if err := v.checkBucketValue(id, k, val, bucketDepth+1); err != nil {
				return err
			}
		default:
			return damagef("leaf page %d: element %d has flags %#x", id, i, flags)
		}
	}
	return nil
}

func (v *verifier) checkBucketValue(id uint64, name, val []byte, depth int) error {
	if len(val) < bucketHeaderSize {
		return damagef("leaf page %d: bucket %q has a %d-byte header", id, name, len(val))
	}
	root := ne.Uint64(val[0:])
	if root != 0 {
		return v.checkBucketRoot(root, depth)
	}
	// An inline bucket: a leaf page (without page id) follows the header.
	v.stats.Buckets++
	p := val[bucketHeaderSize:]
	if len(p) < pageHeaderSize {
		return damagef("leaf page %d: inline bucket %q truncated", id, name)
	}
	if flags := ne.Uint16(p[8:]); flags != leafPageFlag {
		return damagef("leaf page %d: inline bucket %q has page flags %#x", id, name, flags)
	}
	if depth > maxTreeDepth {
		return damagef("buckets nested deeper than %d", maxTreeDepth)
	}
	return v.checkLeaf(id, p, nil, nil, depth)
}

func (v *verifier) checkFreelist() error {
	id := v.meta.freelist
	p, err := v.readPage(id)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	if flags := ne.Uint16(p[8:]); flags != freelistPageFlag {
		return damagef("freelist page %d has flags %#x", id, flags)
	}
	idx, count := 0, uint64(ne.Uint16(p[10:]))
	if count == 0xFFFF {
		if len(p) < pageHeaderSize+8 {
			return damagef("freelist page %d truncated", id)
		}
		idx, count = 1, ne.Uint64(p[pageHeaderSize:])
	}
	if count > (uint64(len(p))-pageHeaderSize)/8-uint64(idx) {
		return damagef("freelist page %d: %d ids overflow the page", id, count)
	}
	for i := range count {
		pg := ne.Uint64(p[pageHeaderSize+(uint64(idx)+i)*8:])
		if pg < 2 || pg >= v.meta.hwm {
			return damagef("freelist: page %d outside [2, %d)", pg, v.meta.hwm)
		}
		if v.isMarked(pg) {
			return damagef("freelist: page %d is free and in use (or listed twice)", pg)
		}
		v.reached[pg/64] |= 1 << (pg % 64)
		v.stats.Free++
	}
	return nil
}
