package kvstore

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/eddy-streams/eddy/internal/flock"
	"github.com/eddy-streams/eddy/statestore"
)

// This file reads a task's bbolt file for operators (cmd/eddy's "state inspect" and
// "state dump") without changing anything: no directory or file is created, the data
// file is opened read-only, and the state file is only read.

// InspectOptions tunes InspectBolt and DumpBolt; the zero value works.
type InspectOptions struct {
	// LockTimeout bounds the wait for the lock of a running owner; default 1s. The owner
	// keeps the lock for as long as it has the file open, so the wait fails with an
	// error wrapping statestore.ErrLocked while the application runs.
	LockTimeout time.Duration
	// Verify runs the full consistency check (VerifyBoltFile) before reading the file.
	// Without it only the meta pages are checked.
	Verify bool
}

// BoltFileInfo describes the bbolt file of one task directory.
type BoltFileInfo struct {
	Dir  string // the task directory
	Path string // the bbolt file
	Size int64  // file size in bytes
	TxID uint64 // the last committed bbolt transaction
	// Previous says how the file's last owner left it: StateClean when it was closed
	// cleanly. StateCrashed, StateRestart and StateUnknown mean the next OpenBolt checks
	// the file (or, after a restart of a NoSync file, moves it aside); StateDamaged means
	// it moves the file aside and the task restores every store from its changelog.
	Previous CloseState
	// Detail tells more about Previous: the pid of a dead owner, the reason a file was
	// found damaged, or a clean close that does not match the file.
	Detail string
	// StateTime is when the state file was last written (zero if there is none).
	StateTime time.Time
	// Verified is set when Verify ran the full check (and it passed).
	Verified bool
	// Stores are the stores in the file, by name.
	Stores []BoltStoreInfo
	// MovedAside lists damaged files OpenBolt moved aside in the directory.
	MovedAside []string
}

// BoltStoreInfo describes one store (bucket) of a bbolt file.
type BoltStoreInfo struct {
	Name string
	Keys int64
	// Bytes is the space the store's pages use in the file (keys, values and page
	// headers; approximate, it leaves out free space within pages).
	Bytes int64
	// Checkpoint is the changelog offset the store reflects (the next offset to
	// restore from); HasCheckpoint is false when the store has none (it restores
	// from the start of its changelog).
	Checkpoint    int64
	HasCheckpoint bool
	// Segments is the number of time segments of a window or session store (Segmented:
	// its keys and bytes are those of its segments and segment list); 0 for others.
	Segments int
}

// InspectBolt describes the bbolt file in the task directory dir: its stores, their key
// counts, sizes and checkpoints, and whether the file was closed cleanly. It reads the
// file read-only while holding the directory's lock. While another owner (a running
// application) has the file open, it fails within LockTimeout with an error wrapping
// statestore.ErrLocked; a file that is not a sound bbolt file gives an error wrapping ErrDamaged.
func InspectBolt(dir string, opts InspectOptions) (BoltFileInfo, error) {
	info := BoltFileInfo{Dir: dir, Path: filepath.Join(dir, BoltFileName)}
	err := viewBolt(dir, opts, &info, func(tx *bolt.Tx) error {
		info.TxID = uint64(tx.ID())
		stores := map[string]*BoltStoreInfo{}
		get := func(name string) *BoltStoreInfo {
			if s := stores[name]; s != nil {
				return s
			}
			s := &BoltStoreInfo{Name: name}
			stores[name] = s
			return s
		}
		err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if strings.HasPrefix(string(name), reservedPrefix) {
				return nil
			}
			st := b.Stats()
			size := int64(st.BranchInuse + st.LeafInuse + st.InlineBucketInuse)
			// A store in time segments is the buckets <store>/segment-<id> and its list
			// <store>/segments (no store name has a slash): one store here.
			store, part, inner := strings.Cut(string(name), "/")
			switch {
			case !inner:
				s := get(store)
				s.Keys += int64(st.KeyN)
				s.Bytes += size
			case part == "segments":
				get(store).Bytes += size
			case strings.HasPrefix(part, "segment-"):
				s := get(store)
				s.Keys += int64(st.KeyN)
				s.Bytes += size
				s.Segments++
			default:
				s := get(string(name))
				s.Keys += int64(st.KeyN)
				s.Bytes += size
			}
			return nil
		})
		if err != nil {
			return err
		}
		if eb := tx.Bucket(emptyKeyBucket); eb != nil {
			err := eb.ForEach(func(store, v []byte) error {
				s := get(string(store))
				s.Keys++
				s.Bytes += int64(len(store) + len(v))
				return nil
			})
			if err != nil {
				return err
			}
		}
		if meta := tx.Bucket(metaBucket); meta != nil {
			err := meta.ForEach(func(store, v []byte) error {
				if len(v) != 8 {
					return damagef("checkpoint of store %q is %d bytes, not 8", store, len(v))
				}
				s := get(string(store))
				s.Checkpoint, s.HasCheckpoint = int64(binary.BigEndian.Uint64(v)), true
				return nil
			})
			if err != nil {
				return err
			}
		}
		for _, s := range stores {
			info.Stores = append(info.Stores, *s)
		}
		slices.SortFunc(info.Stores, func(a, b BoltStoreInfo) int { return strings.Compare(a.Name, b.Name) })
		return nil
	})
	if errors.Is(err, errEmptyFile) {
		err = nil
	}
	return info, err
}

// DumpBolt calls fn with every key and value of store in the bbolt file of the task
// directory dir, in key order (the empty key first), reading the file read-only as
// InspectBolt does. key and value are valid only during the call. An error from fn
// stops the walk and is returned. A store the file does not hold is an error that
// names the stores it holds.
func DumpBolt(dir, store string, opts InspectOptions, fn func(key, value []byte) error) error {
	if err := checkStoreName(store); err != nil {
		return err
	}
	var info BoltFileInfo
	err := viewBolt(dir, opts, &info, func(tx *bolt.Tx) error {
		if segs := segmentBuckets(tx, store); len(segs) > 0 {
			// A store in time segments: each segment's keys, oldest segment first.
			for _, bk := range segs {
				err := bk.ForEach(func(k, v []byte) error {
					if v == nil {
						return nil
					}
					return fn(k, v)
				})
				if err != nil {
					return err
				}
			}
			return nil
		}
		bk := tx.Bucket([]byte(store))
		var empty []byte
		if eb := tx.Bucket(emptyKeyBucket); eb != nil {
			empty = eb.Get([]byte(store))
		}
		if bk == nil && empty == nil {
			var have []string
			_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
				if !strings.HasPrefix(string(name), reservedPrefix) {
					have = append(have, string(name))
				}
				return nil
			})
			if meta := tx.Bucket(metaBucket); meta != nil && meta.Get([]byte(store)) != nil {
				return nil // a store with a checkpoint and no keys: empty
			}
			if len(have) == 0 {
				return fmt.Errorf("statestore: %s has no store %q (it holds no keys of any store)", info.Path, store)
			}
			return fmt.Errorf("statestore: %s has no store %q (it holds %s)", info.Path, store, strings.Join(have, ", "))
		}
		if empty != nil {
			if err := fn([]byte{}, empty); err != nil {
				return err
			}
		}
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(k, v []byte) error {
			if v == nil {
				return nil // a nested bucket: stores have none
			}
			return fn(k, v)
		})
	})
	if errors.Is(err, errEmptyFile) {
		return fmt.Errorf("statestore: %s has no store %q (the file is empty)", info.Path, store)
	}
	return err
}

// errEmptyFile: the bbolt file has zero bytes (no stores).
var errEmptyFile = errors.New("statestore: empty file")

// viewBolt takes dir's lock, checks the file's meta pages (or the whole file with
// opts.Verify), opens it read-only, fills in what info says about the file, and runs fn
// in a read transaction. A bbolt panic or memory fault becomes an error wrapping
// ErrDamaged.
// segmentBuckets returns the segment buckets of a store kept in time segments
// (Segmented), oldest first; none for other stores.
func segmentBuckets(tx *bolt.Tx, store string) []*bolt.Bucket {
	prefix := store + "/segment-"
	type seg struct {
		id int64
		bk *bolt.Bucket
	}
	var segs []seg
	_ = tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		if rest, ok := strings.CutPrefix(string(name), prefix); ok {
			if id, err := strconv.ParseInt(rest, 10, 64); err == nil {
				segs = append(segs, seg{id, b})
			}
		}
		return nil
	})
	slices.SortFunc(segs, func(a, b seg) int { return cmp.Compare(a.id, b.id) })
	out := make([]*bolt.Bucket, len(segs))
	for i, sg := range segs {
		out[i] = sg.bk
	}
	return out
}

func viewBolt(dir string, opts InspectOptions, info *BoltFileInfo, fn func(*bolt.Tx) error) (err error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = time.Second
	}
	path := filepath.Join(dir, BoltFileName)
	info.Dir, info.Path = dir, path
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("statestore: no state store file in %s: %w", dir, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("statestore: %s is not a regular file", path)
	}
	deadline := time.Now().Add(opts.LockTimeout)
	release, err := lockForInspect(dir, opts.LockTimeout)
	if err != nil {
		return err
	}
	defer release()

	// Describe the file before bbolt touches it: the state file, moved-aside files, and
	// the meta pages (a file bbolt cannot read must be an error, not a crash).
	describeState(dir, path, info)
	if fi, err = os.Stat(path); err != nil { // it may have been moved aside meanwhile
		return fmt.Errorf("statestore: no state store file in %s: %w", dir, err)
	}
	info.Size = fi.Size()
	if info.Size == 0 {
		// OpenBolt made the file and died before bbolt wrote its first pages: an empty
		// store file, which OpenBolt treats as new.
		return errEmptyFile
	}
	if opts.Verify {
		st, err := verifyBoltFile(path)
		if err != nil {
			if isDamage(err) {
				return fmt.Errorf("statestore: %s: %w: %w", path, ErrDamaged, err)
			}
			return fmt.Errorf("statestore: check %s: %w", path, err)
		}
		info.Verified, info.TxID = true, st.TxID
	} else if err := checkMeta(path); err != nil {
		return err
	}

	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = fmt.Errorf("statestore: %s: %w: bbolt panicked reading it: %v", path, ErrDamaged, r)
		}
	}()
	wait := max(time.Until(deadline), 10*time.Millisecond)
	db, err := bolt.Open(path, 0o444, &bolt.Options{ReadOnly: true, Timeout: wait})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("statestore: %s: %w: another process has the file open (bbolt's lock; waited %v); stop the application first", path, statestore.ErrLocked, opts.LockTimeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return fmt.Errorf("statestore: %s: %w: %w", path, ErrDamaged, err)
	case err != nil:
		return fmt.Errorf("statestore: open %s read-only: %w", path, err)
	}
	defer db.Close()
	if err := db.View(fn); err != nil {
		if isDamage(err) {
			return fmt.Errorf("statestore: %s: %w: %w", path, ErrDamaged, err)
		}
		return err
	}
	return nil
}

// checkMeta runs the cheap checks OpenBolt runs on a cleanly closed file: a valid meta
// page and a file long enough for it.
func checkMeta(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("statestore: %w", err)
	}
	defer f.Close()
	meta, size, err := readBoltMeta(f)
	if err == nil {
		err = checkSize(meta, size)
	}
	switch {
	case err == nil:
		return nil
	case isDamage(err):
		return fmt.Errorf("statestore: %s: %w: %w", path, ErrDamaged, err)
	default:
		return fmt.Errorf("statestore: read %s: %w", path, err)
	}
}

// lockForInspect takes the directory's lock file as OpenBolt does, polling until
// timeout, without creating or writing it. A directory without a lock file has no
// owner to wait for (bbolt's own lock still guards the data file).
func lockForInspect(dir string, timeout time.Duration) (release func(), err error) {
	name := filepath.Join(dir, BoltLockFileName)
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return func() {}, nil
	}
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
			return func() { _ = flock.Unlock(f); _ = f.Close() }, nil
		}
		if time.Now().After(deadline) {
			holder, _ := os.ReadFile(name)
			_ = f.Close()
			who := "another process"
			if h := bytes.TrimSpace(holder); len(h) > 0 {
				who = "its owner (" + string(h) + ")"
			}
			return nil, fmt.Errorf("statestore: %s: %w: %s has the store file open (waited %v); "+
				"the file cannot be read while the application runs: stop the application (or the instance using this state dir) first",
				dir, statestore.ErrLocked, who, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// describeState fills in how the file's last owner left it, from the state file, and
// the moved-aside damaged files.
func describeState(dir, path string, info *BoltFileInfo) {
	info.MovedAside, _ = filepath.Glob(filepath.Join(dir, damagedPrefix+"*"))
	slices.Sort(info.MovedAside)
	st, err := readBoltState(dir)
	if err != nil {
		info.Previous = StateUnknown
		if errors.Is(err, os.ErrNotExist) {
			info.Detail = "no state file " + BoltStateFileName
		} else {
			info.Detail = err.Error()
		}
		return
	}
	info.StateTime = st.Time
	boot := bootID()
	switch {
	case st.State == "closed":
		info.Previous = StateClean
		if fi, err := os.Stat(path); err == nil && fi.Size() != st.Size {
			info.Detail = fmt.Sprintf("the clean close recorded size %d, the file has %d: the next open checks the file", st.Size, fi.Size())
		} else if f, err := os.Open(path); err == nil {
			if meta, _, err := readBoltMeta(f); err == nil && meta.txid != st.TxID {
				info.Detail = fmt.Sprintf("the clean close recorded bbolt transaction %d, the file is at %d: the next open checks the file", st.TxID, meta.txid)
			}
			_ = f.Close()
		}
	case st.State == "damaged":
		info.Previous = StateDamaged
		info.Detail = "its owner found it damaged: " + st.Reason
	case st.State == "open" && boot != "" && st.Boot == boot:
		info.Previous = StateCrashed
		info.Detail = fmt.Sprintf("left open by pid %d, which died; the next open checks the file", st.PID)
	case st.State == "open" && st.NoSync:
		info.Previous = StateRestart
		info.Detail = "left open without fsync across a machine restart: the next open moves it aside and restores every store from its changelog"
	case st.State == "open":
		info.Previous = StateRestart
		info.Detail = "left open across a machine restart; the next open checks the file"
	default:
		info.Previous = StateUnknown
		info.Detail = fmt.Sprintf("state file says %q", st.State)
	}
}

// ReadCheckpoints returns the checkpoints of the stores in the bbolt file of the task
// directory dir (store → the changelog offset it reflects), reading the file read-only
// as InspectBolt does, but only its checkpoints: it costs one open of the file, not a
// walk of its pages, so the runtime can report what state it holds when it joins the
// group. A directory without a file, or with an empty one, has none.
func ReadCheckpoints(dir string, opts InspectOptions) (map[string]int64, error) {
	out := map[string]int64{}
	var info BoltFileInfo
	err := viewBolt(dir, opts, &info, func(tx *bolt.Tx) error {
		meta := tx.Bucket(metaBucket)
		if meta == nil {
			return nil
		}
		return meta.ForEach(func(store, v []byte) error {
			if len(v) != 8 {
				return damagef("checkpoint of store %q is %d bytes, not 8", store, len(v))
			}
			out[string(store)] = int64(binary.BigEndian.Uint64(v))
			return nil
		})
	})
	if errors.Is(err, errEmptyFile) || errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return out, err
}
