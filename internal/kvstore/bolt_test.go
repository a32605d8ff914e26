package kvstore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"

	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/eddy-streams/eddy/internal/flock"
	"github.com/eddy-streams/eddy/statestore"
)

// Child processes: a test re-executes the test binary with -test.run naming
// TestBoltChildProcess and the job in childEnv; without it that test does nothing.
const childEnv = "EDDY_STATESTORE_CHILD"

func TestBoltChildProcess(t *testing.T) {
	job := os.Getenv(childEnv)
	if job == "" {
		return // not a child: nothing to do
	}
	dir := os.Getenv(childEnv + "_DIR")
	switch job {
	case "lock":
		childHoldLock(dir)
	case "crash":
		childCrashLoop(dir, os.Getenv(childEnv+"_NOSYNC") == "1")
	case "build":
		childBuild(dir, os.Getenv(childEnv+"_HOLD") == "1")
	default:
		fmt.Fprintln(os.Stderr, "unknown child job", job)
		os.Exit(2)
	}
	os.Exit(0)
}

// startChild runs a child job; it returns the child and its stdout.
func startChild(t *testing.T, job, dir string, env ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBoltChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+job, childEnv+"_DIR="+dir)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, bufio.NewScanner(out)
}

// childHoldLock opens the store, says so, and waits to be killed.
func childHoldLock(dir string) {
	b, err := OpenBolt(dir, BoltOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(1)
	}
	if err := b.Write(Batch{Writes: map[string][]Entry{"s": {{Key: []byte("k"), Value: []byte("v")}}}, Checkpoints: map[string]int64{"s": 7}}); err != nil {
		fmt.Fprintln(os.Stderr, "child write:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	time.Sleep(time.Minute)
	os.Exit(3)
}

func openTestBolt(t *testing.T, dir string, opts BoltOptions) (Backend, OpenReport) {
	t.Helper()
	b, rep, err := OpenBoltReport(dir, opts)
	if err != nil {
		t.Fatalf("OpenBoltReport(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, rep
}

// abandon drops an open backend as a dying process would: no sync, no clean-close record.
func abandon(t *testing.T, be Backend) {
	t.Helper()
	b := be.(*boltBackend)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if err := b.db.Close(); err != nil {
		t.Fatal(err)
	}
	_ = flock.Unlock(b.lock)
	_ = b.lock.Close()
}

func put(t *testing.T, b Backend, store string, checkpoint int64, kv ...string) {
	t.Helper()
	var es []Entry
	for i := 0; i+1 < len(kv); i += 2 {
		e := Entry{Key: []byte(kv[i])}
		if kv[i+1] != "<nil>" {
			e.Value = []byte(kv[i+1])
		}
		es = append(es, e)
	}
	SortEntries(es)
	if err := b.Write(Batch{Writes: map[string][]Entry{store: es}, Checkpoints: map[string]int64{store: checkpoint}}); err != nil {
		t.Fatal(err)
	}
}

// dump reads a whole store and its checkpoint.
func dump(t *testing.T, b Backend, store string) (map[string]string, int64, bool) {
	t.Helper()
	it, err := b.Iterate(store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	var prev []byte
	for it.Next() {
		if prev != nil && bytes.Compare(prev, it.Key()) >= 0 {
			t.Fatalf("iterator out of order: %q then %q", prev, it.Key())
		}
		prev = bytes.Clone(it.Key())
		m[string(it.Key())] = string(it.Value())
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		t.Fatal(err)
	}
	off, ok, err := b.Checkpoint(store)
	if err != nil {
		t.Fatal(err)
	}
	return m, off, ok
}

func TestBoltReopenKeepsDataAndCheckpoints(t *testing.T) {
	dir := t.TempDir()
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("nosync=%v", noSync), func(t *testing.T) {
			dir := filepath.Join(dir, fmt.Sprint(noSync))
			b, rep := openTestBolt(t, dir, BoltOptions{NoSync: noSync})
			if rep.Previous != StateNew || rep.Recreated || rep.Verified {
				t.Fatalf("new file: report %+v", rep)
			}
			put(t, b, "a", 10, "k1", "v1", "k2", "v2")
			put(t, b, "b", 3, "x", "y")
			put(t, b, "a", 12, "k1", "<nil>", "k3", "v3")
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b, rep = openTestBolt(t, dir, BoltOptions{NoSync: noSync})
			if rep.Previous != StateClean || rep.Recreated || rep.Verified {
				t.Fatalf("after a clean close: report %+v", rep)
			}
			m, off, ok := dump(t, b, "a")
			if want := map[string]string{"k2": "v2", "k3": "v3"}; fmt.Sprint(m) != fmt.Sprint(want) || off != 12 || !ok {
				t.Fatalf("store a = %v @%d %v; want %v @12", m, off, ok, want)
			}
			if _, _, ok, err := checkpointOf(b, "nope"); err != nil || ok {
				t.Fatalf("unknown store has a checkpoint: %v %v", ok, err)
			}
			if err := b.Wipe("a"); err != nil {
				t.Fatal(err)
			}
			if m, _, ok := dump(t, b, "a"); len(m) != 0 || ok {
				t.Fatalf("after Wipe: %v, checkpoint %v", m, ok)
			}
			if m, off, _ := dump(t, b, "b"); m["x"] != "y" || off != 3 {
				t.Fatalf("Wipe of a touched b: %v @%d", m, off)
			}
		})
	}
}

func checkpointOf(b Backend, store string) (Backend, int64, bool, error) {
	off, ok, err := b.Checkpoint(store)
	return b, off, ok, err
}

func TestBoltCloseIsIdempotentAndLaterCallsFail(t *testing.T) {
	b, _ := openTestBolt(t, t.TempDir(), BoltOptions{})
	put(t, b, "s", 1, "k", "v")
	it, err := b.Iterate("s", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = b.Close() }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Close #%d: %v", i, err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close after Close: %v", err)
	}
	if it.Next() || !errors.Is(it.Err(), statestore.ErrClosed) {
		t.Fatalf("iterator after Close: err %v", it.Err())
	}
	if _, err := b.Get("s", []byte("k")); !errors.Is(err, statestore.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := b.Write(Batch{}); !errors.Is(err, statestore.ErrClosed) {
		t.Fatalf("Write after Close: %v", err)
	}
	if _, _, err := b.Checkpoint("s"); !errors.Is(err, statestore.ErrClosed) {
		t.Fatalf("Checkpoint after Close: %v", err)
	}
}

func TestBoltLockSameProcess(t *testing.T) {
	dir := t.TempDir()
	first, _ := openTestBolt(t, dir, BoltOptions{})
	start := time.Now()
	second, err := OpenBolt(dir, BoltOptions{LockTimeout: 300 * time.Millisecond})
	took := time.Since(start)
	if !errors.Is(err, statestore.ErrLocked) {
		if second != nil {
			second.Close()
		}
		t.Fatalf("second OpenBolt while the first is open: %v; want statestore.ErrLocked", err)
	}
	if took < 300*time.Millisecond || took > 3*time.Second {
		t.Fatalf("statestore.ErrLocked after %v; want the 300ms timeout", took)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("error does not name the holder: %v", err)
	}
	// A waiter gets the file as soon as the first owner closes it.
	done := make(chan error, 1)
	go func() {
		b, err := OpenBolt(dir, BoltOptions{LockTimeout: 5 * time.Second})
		if err == nil {
			err = b.Close()
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waiting opener: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting opener did not get the lock after Close")
	}
}

func TestBoltLockOtherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd, out := startChild(t, "lock", dir)
	if !out.Scan() || out.Text() != "locked" {
		t.Fatalf("child did not lock: %q %v", out.Text(), out.Err())
	}
	start := time.Now()
	b, err := OpenBolt(dir, BoltOptions{LockTimeout: 300 * time.Millisecond})
	if !errors.Is(err, statestore.ErrLocked) {
		if b != nil {
			b.Close()
		}
		t.Fatalf("OpenBolt while another process holds it: %v; want statestore.ErrLocked", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("statestore.ErrLocked after %v", took)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("pid %d", cmd.Process.Pid)) {
		t.Errorf("error does not name the holder pid %d: %v", cmd.Process.Pid, err)
	}
	// The kernel releases the lock of a killed process; its write survives.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	b, rep := openTestBolt(t, dir, BoltOptions{})
	if rep.Previous != StateCrashed || !rep.Verified || rep.Recreated {
		t.Fatalf("after the holder was killed: %+v", rep)
	}
	if m, off, _ := dump(t, b, "s"); m["k"] != "v" || off != 7 {
		t.Fatalf("child's write lost: %v @%d", m, off)
	}
}

// An iterator left open while the same goroutine writes enough to make bbolt grow and
// remap its file: with a read transaction held across calls this deadlocks (the remap
// waits for every reader); the chunked iterator holds none.
func TestBoltIteratorOpenAcrossWriteAndRemap(t *testing.T) {
	// A small initial map, so that the write below outgrows it.
	b, _ := openTestBolt(t, t.TempDir(), BoltOptions{NoSync: true, MmapSize: 1 << 16})
	var es []Entry
	for i := range 3000 {
		es = append(es, Entry{Key: fmt.Appendf(nil, "k%06d", i), Value: bytes.Repeat([]byte{'v'}, 50)})
	}
	if err := b.Write(Batch{Writes: map[string][]Entry{"s": es}}); err != nil {
		t.Fatal(err)
	}
	it, err := b.Iterate("s", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !it.Next() {
		t.Fatal("empty")
	}
	done := make(chan error, 1)
	go func() {
		// 40 MB of new pages: the file outgrows its mapping several times.
		var big []Entry
		for i := range 4000 {
			big = append(big, Entry{Key: fmt.Appendf(nil, "z%06d", i), Value: bytes.Repeat([]byte{'x'}, 10000)})
		}
		done <- b.Write(Batch{Writes: map[string][]Entry{"s": big}})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Write blocked by an open iterator (remap deadlock)")
	}
	n := 1
	for it.Next() {
		n++
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		t.Fatal(err)
	}
	// The iterator sees the write made between its chunks.
	if n != 7000 {
		t.Fatalf("iterated %d keys; want 7000", n)
	}
}

func TestBoltIterateBoundsAndChunks(t *testing.T) {
	for _, mk := range backendMakers() {
		t.Run(mk.name, func(t *testing.T) {
			b := mk.open(t, t.TempDir())
			var es []Entry
			for i := range 5000 {
				es = append(es, Entry{Key: fmt.Appendf(nil, "%05d", i), Value: fmt.Appendf(nil, "v%d", i)})
			}
			if err := b.Write(Batch{Writes: map[string][]Entry{"s": es}}); err != nil {
				t.Fatal(err)
			}
			cases := []struct {
				from, to string
				n        int
			}{{"", "", 5000}, {"00100", "00200", 100}, {"00100", "", 4900}, {"", "00010", 10}, {"0499", "05", 10}, {"1", "2", 0}, {"00005", "00005", 0}}
			for _, c := range cases {
				var from, to []byte
				if c.from != "" {
					from = []byte(c.from)
				}
				if c.to != "" {
					to = []byte(c.to)
				}
				it, err := b.Iterate("s", from, to)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for it.Next() {
					k := string(it.Key())
					if (from != nil && k < c.from) || (to != nil && k >= c.to) || string(it.Value()) != "v"+strings.TrimLeft(k, "0") && k != "00000" {
						t.Fatalf("[%q,%q): got %q=%q", c.from, c.to, k, it.Value())
					}
					n++
				}
				if err := errors.Join(it.Err(), it.Close()); err != nil || n != c.n {
					t.Fatalf("[%q,%q): %d keys, err %v; want %d", c.from, c.to, n, err, c.n)
				}
			}
			it, err := b.Iterate("missing", nil, nil)
			if err != nil || it.Next() || it.Close() != nil {
				t.Fatalf("iterating a missing store: %v", err)
			}
		})
	}
}

type backendMaker struct {
	name string
	open func(t *testing.T, dir string) Backend
}

func backendMakers() []backendMaker {
	return []backendMaker{
		{"memory", func(t *testing.T, _ string) Backend { return NewMemoryBackend() }},
		{"bolt", func(t *testing.T, dir string) Backend {
			b, _ := openTestBolt(t, dir, BoltOptions{NoSync: true})
			return b
		}},
	}
}

func TestBoltUncleanCloseIsVerifiedAndKept(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("nosync=%v", noSync), func(t *testing.T) {
			dir := t.TempDir()
			b, _ := openTestBolt(t, dir, BoltOptions{NoSync: noSync})
			put(t, b, "s", 5, "a", "1", "b", "2")
			abandon(t, b)
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			b, rep := openTestBolt(t, dir, BoltOptions{NoSync: noSync, Logger: logger})
			if rep.Previous != StateCrashed || !rep.Verified || rep.Recreated {
				t.Fatalf("after a process crash: %+v", rep)
			}
			if !strings.Contains(logs.String(), "checked the state file") {
				t.Errorf("no log line about the check: %s", logs.String())
			}
			if m, off, _ := dump(t, b, "s"); len(m) != 2 || off != 5 {
				t.Fatalf("lost data: %v @%d", m, off)
			}
		})
	}
}

// A machine restart while the file was open: without fsync it cannot be trusted even
// if it looks sound; with fsync it is checked and kept.
func TestBoltMachineRestart(t *testing.T) {
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("nosync=%v", noSync), func(t *testing.T) {
			dir := t.TempDir()
			b, _ := openTestBolt(t, dir, BoltOptions{NoSync: noSync})
			put(t, b, "s", 5, "a", "1")
			abandon(t, b)
			st, err := readBoltState(dir)
			if err != nil || st.State != "open" || st.NoSync != noSync {
				t.Fatalf("state while open: %+v %v", st, err)
			}
			st.Boot = "another-boot"
			if err := writeBoltState(dir, st); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			b, rep := openTestBolt(t, dir, BoltOptions{NoSync: noSync, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			if rep.Previous != StateRestart {
				t.Fatalf("previous = %s", rep.Previous)
			}
			m, _, ok := dump(t, b, "s")
			if noSync {
				if !rep.Recreated || rep.Verified || rep.MovedTo == "" || len(m) != 0 || ok {
					t.Fatalf("NoSync file after a restart: %+v, content %v", rep, m)
				}
				if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "moved aside") {
					t.Errorf("recreation not logged: %s", logs.String())
				}
				if _, err := os.Stat(rep.MovedTo); err != nil {
					t.Errorf("moved-aside file: %v", err)
				}
			} else if rep.Recreated || !rep.Verified || m["a"] != "1" {
				t.Fatalf("synced file after a restart: %+v, content %v", rep, m)
			}
		})
	}
}

// A state file that does not match the data file (another file copied in) triggers the
// full check instead of trusting the clean-close record.
func TestBoltCleanRecordMustMatchTheFile(t *testing.T) {
	dir := t.TempDir()
	b, _ := openTestBolt(t, dir, BoltOptions{})
	put(t, b, "s", 1, "a", "1")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	st, _ := readBoltState(dir)
	st.TxID++
	if err := writeBoltState(dir, st); err != nil {
		t.Fatal(err)
	}
	_, rep := openTestBolt(t, dir, BoltOptions{})
	if rep.Previous != StateClean || !rep.Verified || rep.Recreated {
		t.Fatalf("mismatching clean record: %+v", rep)
	}
}

func TestBoltMissingStateFileIsVerified(t *testing.T) {
	dir := t.TempDir()
	b, _ := openTestBolt(t, dir, BoltOptions{})
	put(t, b, "s", 1, "a", "1")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, BoltStateFileName)); err != nil {
		t.Fatal(err)
	}
	b, rep := openTestBolt(t, dir, BoltOptions{})
	if rep.Previous != StateUnknown || !rep.Verified || rep.Recreated {
		t.Fatalf("no state file: %+v", rep)
	}
	if m, _, _ := dump(t, b, "s"); m["a"] != "1" {
		t.Fatalf("content %v", m)
	}
}

func TestRestoreBatchDeduplicatesAndSorts(t *testing.T) {
	recs := []Entry{
		{Key: []byte("b"), Value: []byte("1")},
		{Key: []byte("a"), Value: []byte("1")},
		{Key: []byte("b"), Value: nil},
		{Key: []byte("c"), Value: []byte("1")},
		{Key: []byte("a"), Value: []byte("2")},
		{Key: []byte("b"), Value: []byte("3")},
		{Key: []byte("c"), Value: nil},
	}
	orig := fmt.Sprint(recs)
	batch := RestoreBatch("s", recs, 42)
	if fmt.Sprint(recs) != orig {
		t.Fatal("RestoreBatch changed its input")
	}
	got := fmt.Sprint(batch.Writes["s"])
	want := fmt.Sprint([]Entry{{Key: []byte("a"), Value: []byte("2")}, {Key: []byte("b"), Value: []byte("3")}, {Key: []byte("c")}})
	if got != want || batch.Checkpoints["s"] != 42 {
		t.Fatalf("RestoreBatch = %s @%d; want %s @42", got, batch.Checkpoints["s"], want)
	}
	for _, mk := range backendMakers() {
		t.Run(mk.name, func(t *testing.T) {
			set := NewSet(mk.open(t, t.TempDir()))
			buf, err := set.Register("s", true)
			if err != nil {
				t.Fatal(err)
			}
			if err := buf.Restore(recs, 42); err != nil {
				t.Fatal(err)
			}
			m, off, _ := dump(t, buf.Backend(), "s")
			if fmt.Sprint(m) != "map[a:2 b:3]" || off != 42 {
				t.Fatalf("restored %v @%d", m, off)
			}
			buf.Put([]byte("x"), []byte("y"))
			if err := buf.Restore(recs, 43); err == nil {
				t.Fatal("Restore with buffered changes succeeded")
			}
		})
	}
}

func TestRestorer(t *testing.T) {
	for _, mk := range backendMakers() {
		t.Run(mk.name, func(t *testing.T) {
			be := mk.open(t, t.TempDir())
			r := NewRestorer(be, "s", RestorerOptions{MaxRecords: 5})
			batch := func(kv ...string) []Entry {
				var es []Entry
				for i := 0; i < len(kv); i += 2 {
					e := Entry{Key: []byte(kv[i])}
					if kv[i+1] != "<nil>" {
						e.Value = []byte(kv[i+1])
					}
					es = append(es, e)
				}
				return es
			}
			if err := r.Add(batch("a", "1", "b", "1"), 10); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := be.Checkpoint("s"); ok {
				t.Fatal("written before a bound was reached")
			}
			// 5 records: written, with the checkpoint of the last batch; b's tombstone
			// in the second batch wins over its value in the first.
			if err := r.Add(batch("b", "<nil>", "c", "2", "a", "3"), 20); err != nil {
				t.Fatal(err)
			}
			if m, off, _ := dump(t, be, "s"); fmt.Sprint(m) != "map[a:3 c:2]" || off != 20 {
				t.Fatalf("after the bound: %v @%d", m, off)
			}
			if err := r.Add(batch("d", "4"), 30); err != nil {
				t.Fatal(err)
			}
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
			if m, off, _ := dump(t, be, "s"); fmt.Sprint(m) != "map[a:3 c:2 d:4]" || off != 30 || r.Restored() != 6 {
				t.Fatalf("after Flush: %v @%d, %d restored", m, off, r.Restored())
			}
			// An empty fetch still moves the checkpoint (a compacted or aborted tail).
			if err := r.Add(nil, 35); err != nil {
				t.Fatal(err)
			}
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
			if _, off, _ := dump(t, be, "s"); off != 35 {
				t.Fatalf("checkpoint after an empty fetch: %d", off)
			}
		})
	}
}

// A file written by bbolt without a stored freelist and without a state file (as the
// first version of this backend left them) is checked, kept, and gets a freelist.
func TestBoltFileWithoutFreelistOrState(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, BoltFileName), 0o644, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucket([]byte("s"))
		if err != nil {
			return err
		}
		for i := range 3000 {
			if err := bk.Put(fmt.Appendf(nil, "k%05d", i), []byte("v")); err != nil {
				return err
			}
		}
		meta, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		return meta.Put([]byte("s"), []byte{0, 0, 0, 0, 0, 0, 0, 42})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, rep := openTestBolt(t, dir, BoltOptions{})
	if rep.Previous != StateUnknown || !rep.Verified || rep.Recreated {
		t.Fatalf("report %+v", rep)
	}
	if m, off, _ := dump(t, b, "s"); len(m) != 3000 || off != 42 {
		t.Fatalf("%d keys @%d", len(m), off)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := VerifyBoltFile(filepath.Join(dir, BoltFileName)); err != nil || st.Free == 0 && st.Reached != st.Pages {
		t.Fatalf("after a clean close: %+v %v", st, err)
	}
}

// A program that ignores LOCK but holds bbolt's own lock of stores.db: OpenBolt still
// fails with statestore.ErrLocked within LockTimeout (bbolt's flock, like ours, excludes another
// open file description of the same process).
func TestBoltLockHeldByBboltItself(t *testing.T) {
	dir := t.TempDir()
	b, _ := openTestBolt(t, dir, BoltOptions{})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, BoltFileName), 0o644, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	b, err = OpenBolt(dir, BoltOptions{LockTimeout: 300 * time.Millisecond})
	if !errors.Is(err, statestore.ErrLocked) {
		if b != nil {
			b.Close()
		}
		t.Fatalf("OpenBolt while bbolt holds the file: %v; want statestore.ErrLocked", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("statestore.ErrLocked after %v", took)
	}
	// Our lock was released with the failure: a later open succeeds.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	openTestBolt(t, dir, BoltOptions{})
}

// A Restorer on a backend that fsyncs switches fsync off until Finish; the state file
// says so meanwhile, so that a machine crash during the restore is not trusted.
func TestRestorerSkipsFsyncUntilFinish(t *testing.T) {
	recs := []Entry{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}}
	restart := func(t *testing.T, dir string) OpenReport {
		st, err := readBoltState(dir)
		if err != nil {
			t.Fatal(err)
		}
		st.Boot = "another-boot"
		if err := writeBoltState(dir, st); err != nil {
			t.Fatal(err)
		}
		_, rep := openTestBolt(t, dir, BoltOptions{})
		return rep
	}
	t.Run("machine crash during the restore", func(t *testing.T) {
		dir := t.TempDir()
		b, _ := openTestBolt(t, dir, BoltOptions{})
		r := NewRestorer(b, "s", RestorerOptions{MaxRecords: 2})
		if err := r.Add(recs, 10); err != nil {
			t.Fatal(err)
		}
		if st, _ := readBoltState(dir); st.State != "open" || !st.NoSync {
			t.Fatalf("state during the restore: %+v", st)
		}
		if !b.(*boltBackend).db.NoSync {
			t.Fatal("bbolt still fsyncs during the restore")
		}
		abandon(t, b)
		if rep := restart(t, dir); !rep.Recreated || rep.Previous != StateRestart {
			t.Fatalf("after a machine crash during the restore: %+v", rep)
		}
	})
	t.Run("machine crash after Finish", func(t *testing.T) {
		dir := t.TempDir()
		b, _ := openTestBolt(t, dir, BoltOptions{})
		r := NewRestorer(b, "s", RestorerOptions{})
		if err := r.Add(recs, 10); err != nil {
			t.Fatal(err)
		}
		if err := r.Finish(); err != nil {
			t.Fatal(err)
		}
		if st, _ := readBoltState(dir); st.State != "open" || st.NoSync || b.(*boltBackend).db.NoSync {
			t.Fatalf("state after Finish: %+v", st)
		}
		if m, off, _ := dump(t, b, "s"); len(m) != 2 || off != 10 {
			t.Fatalf("restored %v @%d", m, off)
		}
		abandon(t, b)
		if rep := restart(t, dir); rep.Recreated || !rep.Verified {
			t.Fatalf("after a machine crash after Finish: %+v", rep)
		}
	})
	t.Run("clean close without Finish", func(t *testing.T) {
		dir := t.TempDir()
		b, _ := openTestBolt(t, dir, BoltOptions{})
		r := NewRestorer(b, "s", RestorerOptions{})
		if err := r.Add(recs, 10); err != nil {
			t.Fatal(err)
		}
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		b, rep := openTestBolt(t, dir, BoltOptions{})
		if rep.Previous != StateClean || rep.Recreated {
			t.Fatalf("reopen: %+v", rep)
		}
		if m, off, _ := dump(t, b, "s"); len(m) != 2 || off != 10 {
			t.Fatalf("restored %v @%d", m, off)
		}
	})
}
