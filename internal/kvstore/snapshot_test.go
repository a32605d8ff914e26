package kvstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestSnapshotReadsMatchTheirCheckpoint: a writer applies batches that set every key
// to the batch's checkpoint while readers take GetAt, ScanAt and ViewAt (two keys):
// each read must see values equal to the checkpoint it returned, never a batch half
// applied nor a checkpoint of another state (the guarantee stale queries of a standby
// rely on).
func TestSnapshotReadsMatchTheirCheckpoint(t *testing.T) {
	for _, kind := range []string{"bolt", "memory"} {
		t.Run(kind, func(t *testing.T) {
			var b Backend = NewMemoryBackend()
			if kind == "bolt" {
				b, _ = openTestBolt(t, t.TempDir(), BoltOptions{NoSync: true})
			}
			const keys, batches = 50, 300
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for r := 0; r < 2; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- readSnapshots(ctx, b, keys, kind == "bolt")
				}()
			}
			for cp := int64(1); cp <= batches; cp++ {
				es := make([]Entry, keys)
				for i := range es {
					es[i] = Entry{Key: fmt.Appendf(nil, "k%03d", i), Value: []byte(strconv.FormatInt(cp, 10))}
				}
				if err := b.Write(Batch{Writes: map[string][]Entry{"s": es}, Checkpoints: map[string]int64{"s": cp}}); err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// readSnapshots reads until ctx ends. exact: the value must equal the checkpoint
// (bbolt); else it must be at least the checkpoint (read first).
func readSnapshots(ctx context.Context, b Backend, keys int, exact bool) error {
	check := func(v []byte, snap Snapshot) error {
		if v == nil || !snap.HasCheckpoint {
			return nil // before the first batch
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return err
		}
		if n < snap.Checkpoint || (exact && n != snap.Checkpoint) {
			return fmt.Errorf("read value %d with checkpoint %d", n, snap.Checkpoint)
		}
		return nil
	}
	for i := 0; ctx.Err() == nil; i++ {
		v, snap, err := GetAt(b, "s", fmt.Appendf(nil, "k%03d", i%keys))
		if err != nil {
			return err
		}
		if err := check(v, snap); err != nil {
			return err
		}
		var out []Entry
		snap, err = ScanAt(b, "s", nil, nil, &out)
		if err != nil {
			return err
		}
		if len(out) != 0 && len(out) != keys {
			return fmt.Errorf("scan saw %d keys, want 0 or %d", len(out), keys)
		}
		for _, e := range out {
			if err := check(e.Value, snap); err != nil {
				return fmt.Errorf("scan: %w", err)
			}
		}
		var view []Entry
		snap, err = ViewAt(b, "s", nil, func(v Backend) error {
			for _, k := range []int{i % keys, (i + keys/2) % keys} {
				val, err := v.Get("s", fmt.Appendf(nil, "k%03d", k))
				if err != nil {
					return err
				}
				view = append(view, Entry{Value: val})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, e := range view {
			if err := check(e.Value, snap); err != nil {
				return fmt.Errorf("view: %w", err)
			}
		}
	}
	return nil
}

// TestSnapshotReadDoesNotWaitForARebuild: while the backend's write lock is held (a
// file rebuild holds it for the whole build), GetAt and ScanAt give ErrBusy instead
// of waiting; once it is released they read.
func TestSnapshotReadDoesNotWaitForARebuild(t *testing.T) {
	be, _ := openTestBolt(t, t.TempDir(), BoltOptions{NoSync: true})
	put(t, be, "s", 7, "a", "1", "b", "2")
	b := be.(*boltBackend)
	b.mu.Lock()
	_, _, err := GetAt(be, "s", []byte("a"))
	var out []Entry
	_, err2 := ScanAt(be, "s", nil, nil, &out)
	b.mu.Unlock()
	if !errors.Is(err, ErrBusy) || !errors.Is(err2, ErrBusy) {
		t.Fatalf("reads under a held write lock: %v, %v; want ErrBusy", err, err2)
	}
	v, snap, err := GetAt(be, "s", []byte("a"))
	if err != nil || string(v) != "1" || snap != (Snapshot{Checkpoint: 7, HasCheckpoint: true}) {
		t.Fatalf("GetAt = %q, %+v, %v; want 1 at checkpoint 7", v, snap, err)
	}
	snap, err = ScanAt(be, "s", []byte("b"), nil, &out)
	if err != nil || len(out) != 1 || string(out[0].Key) != "b" || snap.Checkpoint != 7 {
		t.Fatalf("ScanAt [b, ∞) = %v, %+v, %v", out, snap, err)
	}
}

// TestViewAtCheckpointIsOfItsValues: a writer commits a new state (every key and the
// checkpoint 1 → 2) in the middle of a ViewAt, between its read of one key and of the
// next. The view's values and the checkpoint it returns must all be of the state it
// began on (checkpoint 1): a checkpoint read in a transaction of its own after the
// values' would say 2 for values of 1, and values read outside the view's transaction
// would mix both states (the guarantee a stale window query of a standby relies on:
// its windows are the store exactly as of StaleInfo.Checkpoint).
func TestViewAtCheckpointIsOfItsValues(t *testing.T) {
	be, _ := openTestBolt(t, t.TempDir(), BoltOptions{NoSync: true})
	put(t, be, "s", 1, "a", "1", "b", "1")
	var a, b []byte
	snap, err := ViewAt(be, "s", nil, func(v Backend) error {
		var err error
		if a, err = v.Get("s", []byte("a")); err != nil {
			return err
		}
		// The write commits from another goroutine while the view's read transaction is
		// open (bbolt lets one writer run beside readers; the 1 GiB map needs no remap).
		done := make(chan error, 1)
		go func() {
			done <- be.Write(Batch{Writes: map[string][]Entry{"s": {{Key: []byte("a"), Value: []byte("2")}, {Key: []byte("b"), Value: []byte("2")}}}, Checkpoints: map[string]int64{"s": 2}})
		}()
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-time.After(time.Minute):
			return errors.New("the write did not commit beside the view's read transaction within a minute")
		}
		b, err = v.Get("s", []byte("b"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if snap != (Snapshot{Checkpoint: 1, HasCheckpoint: true}) || string(a) != "1" || string(b) != "1" {
		t.Fatalf("ViewAt across a write = a %q, b %q at %+v; want a 1, b 1 at checkpoint 1 (the state the view began on)", a, b, snap)
	}
	v, snap, err := GetAt(be, "s", []byte("b"))
	if err != nil || string(v) != "2" || snap.Checkpoint != 2 {
		t.Fatalf("after the view: b %q at %+v, %v; want 2 at checkpoint 2 (the write committed)", v, snap, err)
	}
}
