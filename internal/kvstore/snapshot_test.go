package kvstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
)

// TestSnapshotReadsMatchTheirCheckpoint: a writer applies batches that set every key
// to the batch's checkpoint while readers take GetAt and ScanAt: each read must see
// values equal to the checkpoint it returned, never a batch half applied nor a
// checkpoint of another state (the guarantee stale queries of a standby rely on).
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
