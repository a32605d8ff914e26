package kvstore

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/eddy-streams/eddy/internal/flock"
	"github.com/eddy-streams/eddy/internal/names"
	"github.com/eddy-streams/eddy/statestore"
)

// Files of a task's state directory.
const (
	// BoltFileName is the bbolt file holding every store of the task.
	BoltFileName = "stores.db"
	// BoltStateFileName records how the file was last left: open (by which boot of the
	// machine, with or without fsync), closed cleanly (at which bbolt transaction), or
	// found damaged. OpenBolt reads it to decide what to check.
	BoltStateFileName = "stores.db.state"
	// BoltLockFileName is the file OpenBolt locks (flock) for as long as the backend
	// is open. A lock file apart from the data file stays put when a damaged data
	// file is moved aside.
	BoltLockFileName = "LOCK"
	// damagedPrefix starts the name a damaged file is moved to, followed by the unix time.
	damagedPrefix = BoltFileName + ".damaged-"
)

// ErrDamaged is wrapped by the errors of a bbolt backend that found its file damaged
// while in use (a page that does not parse). The backend refuses further work; the next
// OpenBolt moves the file aside and the task restores the stores from their changelogs.
var ErrDamaged = errors.New("state store file is damaged")

// Buckets of the backend's own, next to one bucket per store. Store names starting
// with reservedPrefix are refused.
var (
	// metaBucket holds each store's checkpoint: store name → 8-byte big-endian offset.
	metaBucket = []byte("__eddy_meta")
	// emptyKeyBucket holds the value of each store's empty key (bbolt refuses empty
	// keys; Kafka and the memory backend do not): store name → value.
	emptyKeyBucket = []byte("__eddy_empty_key")
	// changelogIDBucket holds the ID of each store's changelog topic (the topic its
	// checkpoint counts offsets of): store name → 16 bytes. Files written before it
	// existed have none.
	changelogIDBucket = []byte("__eddy_changelog_id")
)

const reservedPrefix = "__eddy_"

func checkStoreName(store string) error {
	if strings.HasPrefix(store, reservedPrefix) {
		return fmt.Errorf("store name %q: the prefix %q is reserved", store, reservedPrefix)
	}
	return nil
}

// VerifyMode says when OpenBolt runs a full consistency check of an existing file.
type VerifyMode int

const (
	// VerifyUnclean checks the file when it was not closed cleanly (the process died,
	// the machine restarted, the state file is missing or does not match the file).
	// A cleanly closed file gets the cheap checks only: both meta pages, the
	// freelist page, and that the file is the one the clean close recorded.
	VerifyUnclean VerifyMode = iota
	// VerifyAlways checks the file at every open.
	VerifyAlways
	// VerifyNever runs the cheap checks only.
	VerifyNever
)

// BoltOptions tunes a bbolt backend; the zero value is the recommended setting.
type BoltOptions struct {
	// NoSync skips the fsyncs of each write (and of file growth). See the package doc,
	// "Durability": the changelog is the durable copy, a process crash loses nothing,
	// and after a machine restart a file that was open without fsync is not trusted:
	// OpenBolt moves it aside and the task restores it from the changelog.
	NoSync bool
	// LockTimeout bounds the wait for the lock held by another owner (another process,
	// or another goroutine that has not closed the backend yet); default 2s.
	LockTimeout time.Duration
	// Logger receives a line when a file is checked, found damaged or moved aside.
	Logger *slog.Logger
	// Verify says when to run the full consistency check; default VerifyUnclean.
	Verify VerifyMode
	// KeepDamaged is the number of moved-aside damaged files kept for inspection, the
	// newest; 0 means 1, a negative number keeps none.
	KeepDamaged int
	// MmapSize is the initial size of bbolt's memory map (address space, not memory);
	// default 1 GiB on 64-bit platforms. A file that outgrows its map is remapped in a
	// commit, which waits for every reader and copies every node the commit touched.
	MmapSize int
}

// CloseState is how OpenBolt found the file left by its previous owner.
type CloseState string

// The states OpenBolt reports.
const (
	StateNew     CloseState = "new"     // no file: a fresh, empty one was made
	StateClean   CloseState = "clean"   // closed by Close
	StateCrashed CloseState = "crashed" // left open by a process that died; the machine kept running
	StateRestart CloseState = "restart" // left open across a restart of the machine
	StateUnknown CloseState = "unknown" // no readable state file next to the data file
	StateDamaged CloseState = "damaged" // its previous owner found it damaged
)

// OpenReport tells what OpenBolt found and did; the runtime logs it and counts
// recreated stores.
type OpenReport struct {
	Path     string
	Previous CloseState
	// Verified is set when the full consistency check ran; VerifyTime is its duration.
	Verified   bool
	VerifyTime time.Duration
	// Recreated is set when the file was not usable (damaged, or not trustworthy after
	// a machine restart): it was moved to MovedTo (empty if it was deleted, see
	// KeepDamaged) and the backend starts empty, so every store restores from offset 0.
	Recreated bool
	Reason    string
	MovedTo   string
}

// OpenBolt opens (creating if needed) the bbolt file of one task in dir. A file locked
// by another owner yields an error wrapping statestore.ErrLocked within LockTimeout. A damaged
// file is moved aside and replaced by an empty one (see OpenBoltReport).
func OpenBolt(dir string, opts BoltOptions) (Backend, error) {
	b, _, err := OpenBoltReport(dir, opts)
	return b, err
}

// OpenBoltReport is OpenBolt, and tells what it found: whether the previous owner
// closed the file cleanly, whether it was checked, and whether it had to be recreated.
func OpenBoltReport(dir string, opts BoltOptions) (Backend, OpenReport, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = 2 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	path := filepath.Join(dir, BoltFileName)
	rep := OpenReport{Path: path}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, rep, fmt.Errorf("statestore: state dir %s: %w", dir, err)
	}
	lock, err := lockDir(dir, opts.LockTimeout)
	if err != nil {
		return nil, rep, err
	}
	b, err := openLocked(dir, path, lock, opts, &rep)
	if err != nil {
		_ = flock.Unlock(lock)
		_ = lock.Close()
		return nil, rep, err
	}
	return b, rep, nil
}

// lockDir takes the directory's lock file, polling until timeout.
func lockDir(dir string, timeout time.Duration) (*os.File, error) {
	name := filepath.Join(dir, BoltLockFileName)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("statestore: lock file %s: %w", name, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		ok, err := flock.TryLock(f)
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("statestore: lock %s: %w", name, err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			holder, _ := os.ReadFile(name)
			_ = f.Close()
			who := ""
			if h := trimSpace(holder); len(h) > 0 {
				who = ", held by " + string(h)
			}
			return nil, fmt.Errorf("statestore: %s: %w (waited %v%s; is another instance or task using this state dir?)", dir, statestore.ErrLocked, timeout, who)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Tell a waiting owner who holds the lock (best effort: only for its message).
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(fmt.Appendf(nil, "pid %d\n", os.Getpid()), 0)
	}
	return f, nil
}

func trimSpace(b []byte) []byte { return bytes.TrimSpace(b) }

// openLocked decides, under the lock, whether the existing file can be used, checks it
// when needed, moves a bad one aside, and opens bbolt.
func openLocked(dir, path string, lock *os.File, opts BoltOptions, rep *OpenReport) (*boltBackend, error) {
	log := opts.Logger.With("file", path)
	boot := bootID()
	var reason string // set: the file must be recreated
	info, statErr := os.Stat(path)
	switch {
	case errors.Is(statErr, os.ErrNotExist) || (statErr == nil && info.Size() == 0):
		rep.Previous = StateNew
	case statErr != nil:
		return nil, fmt.Errorf("statestore: %s: %w", path, statErr)
	default:
		st, stErr := readBoltState(dir)
		d := decideOpen(st, stErr == nil, boot, opts.Verify)
		rep.Previous, reason = d.previous, d.reason
		verify := d.verify
		if reason == "" && !verify {
			// The cheap checks: both meta pages, the freelist, and the file is the one
			// the clean close left.
			r, err := cheapCheck(path, rep.Previous, st)
			if err != nil && !isDamage(err) {
				return nil, fmt.Errorf("statestore: check %s: %w", path, err)
			}
			if err != nil {
				reason = err.Error()
			} else if r != "" && opts.Verify != VerifyNever {
				log.Info("statestore: state file does not match the data file; checking it", "why", r)
				verify = true
			}
		}
		if reason == "" && verify {
			start := time.Now()
			stats, err := verifyBoltFile(path)
			rep.Verified, rep.VerifyTime = true, time.Since(start)
			if err != nil && !isDamage(err) {
				return nil, fmt.Errorf("statestore: check %s: %w", path, err)
			}
			if err != nil {
				reason = "consistency check failed: " + err.Error()
			} else {
				log.Info("statestore: checked the state file after an unclean close", "previous", rep.Previous,
					"took", rep.VerifyTime, "pages", stats.Pages, "keys", stats.Keys, "bytes", stats.FileSize)
			}
		}
	}
	if reason != "" {
		if err := recreate(dir, path, reason, opts, rep, log); err != nil {
			return nil, err
		}
	}
	// From here on the file may change: record that it is open, durably, first.
	if err := writeBoltState(dir, boltState{State: "open", Boot: boot, NoSync: opts.NoSync, PID: os.Getpid()}); err != nil {
		return nil, err
	}
	db, err := openBoltDB(path, opts)
	if err != nil && isDamage(err) && !rep.Recreated {
		// The cheap checks passed, yet bbolt refused or panicked: move it aside too.
		if err := recreate(dir, path, err.Error(), opts, rep, log); err != nil {
			return nil, err
		}
		db, err = openBoltDB(path, opts)
	}
	if err != nil {
		return nil, err
	}
	return &boltBackend{db: db, dir: dir, path: path, lock: lock, opts: opts, log: log, firstChunk: firstChunk}, nil
}

// cheapCheck reads both meta pages and the freelist page. For a cleanly closed file it
// also compares the transaction id and size the close recorded; a mismatch (returned
// as why) means the state file belongs to another file and a full check is due.
func cheapCheck(path string, prev CloseState, st boltState) (why string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	meta, size, err := readBoltMeta(f)
	if err != nil {
		return "", err
	}
	if err := checkSize(meta, size); err != nil {
		return "", err
	}
	if meta.freelist != noFreelist {
		v := &verifier{f: f, meta: meta, ps: uint64(meta.pageSize), size: size, reached: make([]uint64, (meta.hwm+63)/64)}
		if err := v.checkFreelist(); err != nil {
			return "", err
		}
	}
	if prev == StateClean && (meta.txid != st.TxID || size != st.Size) {
		return fmt.Sprintf("clean close recorded txid %d size %d, the file has txid %d size %d", st.TxID, st.Size, meta.txid, size), nil
	}
	return "", nil
}

// recreate moves the file at path aside and prunes older moved-aside files.
func recreate(dir, path, reason string, opts BoltOptions, rep *OpenReport, log *slog.Logger) error {
	rep.Recreated, rep.Reason = true, reason
	keep := opts.KeepDamaged
	if keep == 0 {
		keep = 1
	}
	if keep < 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("statestore: remove damaged %s: %w", path, err)
		}
	} else {
		to := fmt.Sprintf("%s%d", filepath.Join(dir, damagedPrefix), time.Now().Unix())
		for i := 1; ; i++ {
			if _, err := os.Lstat(to); errors.Is(err, os.ErrNotExist) {
				break
			}
			to = fmt.Sprintf("%s%d-%d", filepath.Join(dir, damagedPrefix), time.Now().Unix(), i)
		}
		if err := os.Rename(path, to); err != nil {
			return fmt.Errorf("statestore: move damaged %s aside: %w", path, err)
		}
		rep.MovedTo = to
		pruneDamaged(dir, keep, log)
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	log.Error("statestore: state file is damaged or untrusted; moved aside, its stores will be restored from their changelogs",
		"previous", rep.Previous, "reason", reason, "moved_to", rep.MovedTo)
	return nil
}

// pruneDamaged deletes all but the newest keep moved-aside files.
func pruneDamaged(dir string, keep int, log *slog.Logger) {
	matches, err := filepath.Glob(filepath.Join(dir, damagedPrefix+"*"))
	if err != nil || len(matches) <= keep {
		return
	}
	// Newest first, by the unix time in the name and then the collision counter (the
	// rename keeps the modification time of the data, not of the move).
	order := func(name string) (secs, n int64) {
		s, c, _ := strings.Cut(strings.TrimPrefix(filepath.Base(name), damagedPrefix), "-")
		secs, _ = strconv.ParseInt(s, 10, 64)
		n, _ = strconv.ParseInt(c, 10, 64)
		return secs, n
	}
	slices.SortFunc(matches, func(a, b string) int {
		as, an := order(a)
		bs, bn := order(b)
		return cmp.Or(cmp.Compare(bs, as), cmp.Compare(bn, an))
	})
	for _, name := range matches[keep:] {
		if err := os.Remove(name); err != nil {
			log.Warn("statestore: cannot delete an old damaged file", "path", name, "err", err)
		}
	}
}

// openBoltDB opens bbolt. A bbolt panic or format error is returned as damage.
func openBoltDB(path string, opts BoltOptions) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, damagef("bbolt panicked opening the file: %v", r)
		}
	}()
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	db, err = bolt.Open(path, 0o644, boltOptions(opts))
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("statestore: %s: %w (bbolt's own lock; waited %v)", path, statestore.ErrLocked, opts.LockTimeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, damagef("bbolt cannot open the file: %v", err)
	default:
		return nil, fmt.Errorf("statestore: open %s: %w", path, err)
	}
}

// boltOptions are the bbolt settings; see the package doc ("Durability") for the
// measurements behind them.
func boltOptions(opts BoltOptions) *bolt.Options {
	mmap := opts.MmapSize
	if mmap <= 0 && strconv.IntSize == 64 {
		mmap = 1 << 30
	}
	return &bolt.Options{
		// OpenBolt holds the directory lock already: bbolt's own flock of the data file
		// succeeds at once unless a foreign program holds it.
		Timeout: opts.LockTimeout,
		NoSync:  opts.NoSync,
		// Growing the file costs an fsync unless NoGrowSync; without fsync per write it
		// buys nothing.
		NoGrowSync: opts.NoSync,
		// The freelist is written at each commit. Not writing it (NoFreelistSync) makes
		// bbolt rebuild it at every open by walking the whole tree in a goroutine of its
		// own, where a damaged page crashes the process beyond recovery.
		NoFreelistSync: false,
		// The array freelist flushed 10k dirty keys 15-25% faster than the hashmap one
		// here; the hashmap pays off for huge, fragmented freelists (etcd's), not for
		// task files.
		FreelistType:    bolt.FreelistArrayType,
		InitialMmapSize: mmap,
	}
}

// openDecision is what OpenBolt does with an existing file before opening it.
type openDecision struct {
	previous CloseState
	verify   bool   // run the full consistency check
	reason   string // set: move the file aside without checking it
}

// decideOpen is the table of the package doc's "Damage" section: what the state file
// (st, when readable) says of the last close, the running kernel's boot ID, and the
// Verify mode decide whether the file is trusted, checked in full, or moved aside.
// (A clean close still gets the cheap checks, and a full check where the state file
// does not match the data file: OpenBolt does those.) No I/O.
func decideOpen(st boltState, readable bool, boot string, mode VerifyMode) openDecision {
	var d openDecision
	switch {
	case !readable:
		d.previous, d.verify = StateUnknown, true
	case st.State == "damaged":
		d.previous, d.reason = StateDamaged, "its previous owner found it damaged: "+st.Reason
	case st.State == "closed":
		d.previous = StateClean
	case st.State == "open" && boot != "" && st.Boot == boot:
		d.previous, d.verify = StateCrashed, true
	case st.State == "open" && st.NoSync:
		d.previous = StateRestart
		d.reason = "the machine restarted while the file was open without fsync (NoSync): " +
			"the disk may hold any mix of old and new pages, even if they look sound"
	case st.State == "open":
		d.previous, d.verify = StateRestart, true
	default:
		d.previous, d.verify = StateUnknown, true
	}
	switch mode {
	case VerifyAlways:
		d.verify = d.reason == ""
	case VerifyNever:
		d.verify = false
	}
	return d
}

// boltState is the content of the state file.
type boltState struct {
	State  string    `json:"state"` // "open", "closed" or "damaged"
	Boot   string    `json:"boot,omitempty"`
	NoSync bool      `json:"nosync,omitempty"`
	PID    int       `json:"pid,omitempty"`
	TxID   uint64    `json:"txid,omitempty"`
	Size   int64     `json:"size,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Time   time.Time `json:"time"`
}

type boltBackend struct {
	mu      sync.RWMutex
	db      *bolt.DB
	dir     string
	path    string
	lock    *os.File
	opts    BoltOptions
	log     *slog.Logger
	closed  bool
	damaged atomic.Pointer[error] // set once an operation found the file damaged
	// firstChunk is the size of an iterator's first chunk (tests make it tiny).
	firstChunk int
	// unsynced: a Restorer switched fsync off for the restore (under mu's write lock).
	unsynced bool
	// buildHook, if set (tests), runs between a file build and its swap (boltbuild.go);
	// an error stops the swap.
	buildHook func(stage string) error
}

// beginUnsynced switches the fsync of each write off until endUnsynced: a restore's
// large writes then cost no more than without fsync. The state file says NoSync first,
// durably, so a machine crash meanwhile makes the next open distrust the file (and the
// task restore from zero, as it was doing).
func (b *boltBackend) beginUnsynced() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.opts.NoSync || b.unsynced || b.damaged.Load() != nil {
		return nil
	}
	if err := writeBoltState(b.dir, boltState{State: "open", Boot: bootID(), NoSync: true, PID: os.Getpid()}); err != nil {
		return err
	}
	b.db.NoSync, b.db.NoGrowSync, b.unsynced = true, true, true
	return nil
}

// endUnsynced fsyncs what was written since beginUnsynced and switches fsync back on.
func (b *boltBackend) endUnsynced() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || !b.unsynced {
		return nil
	}
	if err := b.db.Sync(); err != nil {
		return fmt.Errorf("statestore: sync %s: %w", b.path, err)
	}
	b.db.NoSync, b.db.NoGrowSync, b.unsynced = false, false, false
	return writeBoltState(b.dir, boltState{State: "open", Boot: bootID(), NoSync: false, PID: os.Getpid()})
}

// do runs fn (a bbolt call) under the backend's read lock. A panic or a memory fault
// inside bbolt means a damaged file: it is turned into an error wrapping ErrDamaged,
// recorded in the state file, and every later call fails with it.
func (b *boltBackend) do(op, store string, fn func() error) (err error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.doLocked(op, store, fn)
}

// doLocked is do with the read lock held by the caller.
func (b *boltBackend) doLocked(op, store string, fn func() error) (err error) {
	if b.closed {
		return fmt.Errorf("statestore: %s: %w", b.path, statestore.ErrClosed)
	}
	if d := b.damaged.Load(); d != nil {
		return *d
	}
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = b.markDamaged(op, store, fmt.Sprint(r))
		}
	}()
	if err := fn(); err != nil {
		if store != "" {
			return fmt.Errorf("statestore: %s %s, store %q: %w", op, b.path, store, err)
		}
		return fmt.Errorf("statestore: %s %s: %w", op, b.path, err)
	}
	return nil
}

// markDamaged records damage found while in use (read lock held). The first caller
// logs it and writes the state file; racing callers return the same kind of error.
func (b *boltBackend) markDamaged(op, store, what string) error {
	err := fmt.Errorf("statestore: %s %s, store %q: %w: %s", op, b.path, store, ErrDamaged, what)
	if !b.damaged.CompareAndSwap(nil, &err) {
		return err
	}
	b.log.Error("statestore: state file found damaged while in use; it will be moved aside at the next open",
		"op", op, "store", store, "err", what)
	if werr := writeBoltState(b.dir, boltState{State: "damaged", Reason: what}); werr != nil {
		b.log.Error("statestore: cannot record the damage", "err", werr)
	}
	return err
}

func (b *boltBackend) Get(store string, key []byte) ([]byte, error) {
	var out []byte
	err := b.do("get", store, func() error {
		return b.db.View(func(tx *bolt.Tx) error {
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
	})
	return out, err
}

// Iterate reads the range in chunks, each in its own short read transaction, and holds
// no transaction between calls of Next: an open iterator cannot deadlock a Write on the
// same goroutine (bbolt's remap waits for every read transaction), cannot block Close,
// and does not keep bbolt from reusing pages. The price: the iterator sees a Write made
// between two chunks. The set's own Flush moves buffered values into the backend and
// leaves the merged view unchanged.
func (b *boltBackend) Iterate(store string, from, to []byte) (BytesIterator, error) {
	if err := b.do("iterate", store, func() error { return checkStoreName(store) }); err != nil {
		return nil, err
	}
	if len(from) == 0 {
		from = nil
	}
	return &boltIterator{b: b, store: []byte(store), from: bytes.Clone(from), to: bytes.Clone(to), limit: b.firstChunk,
		withEmpty: from == nil && (to == nil || len(to) > 0)}, nil
}

// Chunk sizes of an iterator: small first (a prefix scan often wants a few keys), then
// doubling; a chunk also ends after chunkBytes of keys and values.
const (
	firstChunk = 16
	maxChunk   = 1024
	chunkBytes = 1 << 20
)

type boltIterator struct {
	b        *boltBackend
	store    []byte
	from, to []byte
	last     []byte // last key read; the next chunk starts after it
	started  bool
	done     bool // no more chunks
	chunk    []Entry
	arena    []byte
	pos      int
	limit    int
	err      error
	// withEmpty: the range includes the empty key, kept apart; it comes first.
	withEmpty bool
}

func (it *boltIterator) Next() bool {
	if it.err != nil {
		return false
	}
	it.pos++
	if it.pos < len(it.chunk) {
		return true
	}
	if it.done {
		it.chunk = nil
		return false
	}
	if err := it.fill(); err != nil {
		it.err, it.chunk = err, nil
		return false
	}
	it.pos = 0
	return len(it.chunk) > 0
}

// fill reads the next chunk. The arena is reused: keys and values are valid until the
// next call of Next, as BytesIterator promises.
func (it *boltIterator) fill() error {
	it.chunk, it.arena = it.chunk[:0], it.arena[:0]
	store := string(it.store)
	return it.b.do("iterate", store, func() error {
		return it.b.db.View(func(tx *bolt.Tx) error {
			if it.withEmpty && !it.started {
				if eb := tx.Bucket(emptyKeyBucket); eb != nil {
					if v := eb.Get(it.store); v != nil {
						it.chunk = append(it.chunk, Entry{Key: []byte{}, Value: it.addArena(v)})
					}
				}
			}
			bk := tx.Bucket(it.store)
			if bk == nil {
				it.done = true
				return nil
			}
			c := bk.Cursor()
			var k, v []byte
			switch {
			case it.started:
				k, v = c.Seek(it.last)
				if k != nil && bytes.Equal(k, it.last) {
					k, v = c.Next()
				}
			case it.from == nil:
				k, v = c.First()
			default:
				k, v = c.Seek(it.from)
			}
			it.started = true
			for ; ; k, v = c.Next() {
				if k == nil || (it.to != nil && bytes.Compare(k, it.to) >= 0) {
					it.done = true
					break
				}
				if len(it.chunk) >= it.limit || len(it.arena) >= chunkBytes {
					break
				}
				it.chunk = append(it.chunk, Entry{Key: it.addArena(k), Value: it.addArena(v)})
			}
			if n := len(it.chunk); n > 0 {
				it.last = append(it.last[:0], it.chunk[n-1].Key...)
			}
			it.limit = min(it.limit*2, maxChunk)
			return nil
		})
	})
}

// addArena copies p into the arena. A grown arena leaves earlier entries pointing into
// the old one, which stays valid.
func (it *boltIterator) addArena(p []byte) []byte {
	if len(p) == 0 {
		return []byte{} // an empty value is not a tombstone
	}
	start := len(it.arena)
	it.arena = append(it.arena, p...)
	return it.arena[start:len(it.arena):len(it.arena)]
}

func (it *boltIterator) Key() []byte   { return it.chunk[it.pos].Key }
func (it *boltIterator) Value() []byte { return it.chunk[it.pos].Value }
func (it *boltIterator) Err() error    { return it.err }

func (it *boltIterator) Close() error {
	it.done, it.chunk, it.arena = true, nil, nil
	return nil
}

func (b *boltBackend) Count(store string) (int64, error) {
	var n int64
	err := b.do("count", store, func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			if bk := tx.Bucket([]byte(store)); bk != nil {
				n = int64(bk.Stats().KeyN)
			}
			if eb := tx.Bucket(emptyKeyBucket); eb != nil && eb.Get([]byte(store)) != nil {
				n++
			}
			return nil
		})
	})
	return n, err
}

// Write applies the batch in one bbolt transaction. Entries are applied in order (a key
// given twice: the later entry wins); sorted entries insert several times faster.
func (b *boltBackend) Write(batch Batch) error {
	if err := batch.checkKeys(); err != nil {
		return err
	}
	return b.do("write", "", func() error {
		return b.db.Update(func(tx *bolt.Tx) error {
			for store, entries := range batch.Writes {
				if len(entries) == 0 {
					continue
				}
				if err := checkStoreName(store); err != nil {
					return err
				}
				bk, err := tx.CreateBucketIfNotExists([]byte(store))
				if err != nil {
					return fmt.Errorf("store %q: %w", store, err)
				}
				for _, e := range entries {
					b, k := bk, e.Key
					if len(e.Key) == 0 {
						if b, err = tx.CreateBucketIfNotExists(emptyKeyBucket); err != nil {
							return err
						}
						k = []byte(store)
					}
					if e.Value == nil {
						err = b.Delete(k)
					} else {
						err = b.Put(k, e.Value)
					}
					if err != nil {
						return fmt.Errorf("store %q: key %x: %w", store, e.Key, err)
					}
				}
			}
			if len(batch.Checkpoints) == 0 {
				return nil
			}
			meta, err := tx.CreateBucketIfNotExists(metaBucket)
			if err != nil {
				return err
			}
			for store, off := range batch.Checkpoints {
				if err := meta.Put([]byte(store), binary.BigEndian.AppendUint64(nil, uint64(off))); err != nil {
					return fmt.Errorf("store %q: checkpoint: %w", store, err)
				}
			}
			return nil
		})
	})
}

func (b *boltBackend) Checkpoint(store string) (int64, bool, error) {
	var off int64
	var ok bool
	err := b.do("read checkpoint", store, func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			meta := tx.Bucket(metaBucket)
			if meta == nil {
				return nil
			}
			if v := meta.Get([]byte(store)); len(v) == 8 {
				off, ok = int64(binary.BigEndian.Uint64(v)), true
			}
			return nil
		})
	})
	return off, ok, err
}

func (b *boltBackend) Wipe(store string) error {
	return b.do("wipe", store, func() error {
		return b.db.Update(func(tx *bolt.Tx) error {
			if err := checkStoreName(store); err != nil {
				return err
			}
			if err := tx.DeleteBucket([]byte(store)); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
			for _, name := range [][]byte{metaBucket, emptyKeyBucket, changelogIDBucket} {
				if bk := tx.Bucket(name); bk != nil {
					if err := bk.Delete([]byte(store)); err != nil {
						return err
					}
				}
			}
			if err := deletePartitionCheckpoints(tx, store); err != nil {
				return err
			}
			return dropStaging(tx, store) // an interrupted bulk restore's
		})
	})
}

// deletePartitionCheckpoints deletes the checkpoints of store's partitions
// (names.GlobalCheckpoint) in the wipe's transaction: kept, they would send the next
// read of those partitions past records the wiped store no longer holds.
func deletePartitionCheckpoints(tx *bolt.Tx, store string) error {
	meta := tx.Bucket(metaBucket)
	if meta == nil {
		return nil
	}
	prefix := []byte(names.GlobalCheckpointPrefix(store))
	var keys [][]byte
	c := meta.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	// Deleted after the walk: a bbolt cursor may skip keys deleted under it.
	for _, k := range keys {
		if err := meta.Delete(k); err != nil {
			return fmt.Errorf("store %q: checkpoint %q: %w", store, k, err)
		}
	}
	return nil
}

// Close syncs the file (in NoSync mode), closes it, records a clean close in the state
// file and releases the lock. It is idempotent and safe to call from any goroutine; it
// does not wait for open iterators (they hold no transaction).
func (b *boltBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	var errs []error
	clean := b.damaged.Load() == nil
	var txid uint64
	if clean {
		if b.opts.NoSync || b.unsynced {
			if err := b.db.Sync(); err != nil {
				errs = append(errs, fmt.Errorf("statestore: sync %s: %w", b.path, err))
				clean = false
			}
		}
		if err := b.db.View(func(tx *bolt.Tx) error { txid = uint64(tx.ID()); return nil }); err != nil {
			clean = false
		}
	}
	if err := b.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("statestore: close %s: %w", b.path, err))
		clean = false
	}
	if clean {
		fi, err := os.Stat(b.path)
		if err == nil {
			err = writeBoltState(b.dir, boltState{State: "closed", TxID: txid, Size: fi.Size()})
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := flock.Unlock(b.lock); err != nil {
		errs = append(errs, fmt.Errorf("statestore: unlock %s: %w", b.dir, err))
	}
	if err := b.lock.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
