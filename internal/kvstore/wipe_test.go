package kvstore

import (
	"context"
	"testing"

	"github.com/eddy-streams/eddy/internal/names"
)

// TestWipeForgetsThePartitionCheckpoints: a global store keeps one checkpoint per
// partition of its topic (names.GlobalCheckpoint). Wiping the store must forget them
// with its data, in the same write: kept, they send the next read of those partitions
// past records the store no longer holds (a crash in the middle of reading the store
// again lost them for good). Other stores' checkpoints stay, those of a store whose
// name starts with the wiped one's too.
func TestWipeForgetsThePartitionCheckpoints(t *testing.T) {
	backends := map[string]func(t *testing.T) Backend{
		"memory": func(*testing.T) Backend { return NewMemoryBackend() },
		"bolt": func(t *testing.T) Backend {
			b, _ := openTestBolt(t, t.TempDir(), BoltOptions{NoSync: true})
			return b
		},
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			b := open(t)
			defer b.Close()
			cps := map[string]int64{"g": 4, "gx": 5}
			keep := map[string]bool{"gx": true} // after Wipe(g)
			for _, store := range []string{"g", "gx", "h"} {
				for p := range int32(12) {
					cps[names.GlobalCheckpoint(store, p)] = int64(p) + 1
					keep[names.GlobalCheckpoint(store, p)] = store != "g"
				}
			}
			if err := b.Write(Batch{Writes: map[string][]Entry{"g": {{Key: []byte("k"), Value: []byte("v")}}}, Checkpoints: cps}); err != nil {
				t.Fatal(err)
			}
			if err := b.Wipe("g"); err != nil {
				t.Fatal(err)
			}
			for cp := range cps {
				_, ok, err := b.Checkpoint(cp)
				if err != nil {
					t.Fatal(err)
				}
				if ok != keep[cp] {
					t.Errorf("after Wipe(g) checkpoint %q is there: %v, want %v", cp, ok, keep[cp])
				}
			}
			if n, err := b.Count("g"); err != nil || n != 0 {
				t.Errorf("after Wipe(g) the store holds %d keys (%v)", n, err)
			}
		})
	}
}

// TestChangelogID: the ID of a store's changelog is kept across a reopen and a tail
// merged in a new file (NewBulkTailRestorer), is the inner backend's for a store in time
// segments, and Wipe forgets it with the checkpoint it describes; other stores keep
// theirs.
func TestChangelogID(t *testing.T) {
	dir := t.TempDir()
	b, _ := openTestBolt(t, dir, BoltOptions{NoSync: true})
	idS, idT := [16]byte{1, 2, 3}, [16]byte{9, 8, 7}
	if _, ok, err := b.ChangelogID("s"); err != nil || ok {
		t.Fatalf("a new store has a changelog ID: %v (%v)", ok, err)
	}
	for store, id := range map[string][16]byte{"s": idS, "t": idT} {
		if err := b.SetChangelogID(store, id); err != nil {
			t.Fatal(err)
		}
	}
	put(t, b, "s", 3, "k1", "v1", "k2", "v2")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ = openTestBolt(t, dir, BoltOptions{NoSync: true})
	defer b.Close()
	br, err := NewBulkTailRestorer(b, "s", BulkRestorerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := br.Add([]Entry{{Key: []byte("k3"), Value: []byte("v3")}}, 4); err != nil {
		t.Fatal(err)
	}
	if err := br.Finish(context.Background()); err != nil {
		t.Fatal(err)
	}
	seg := NewSegmented(b, "s", SegmentSpec{Retention: 1000, Time: func([]byte) (int64, error) { return 0, nil }})
	for _, be := range []Backend{b, seg} {
		if id, ok, err := be.ChangelogID("s"); err != nil || !ok || id != idS {
			t.Fatalf("%T: after a reopen and a tail merge the changelog ID of s is %x %v (%v), want %x", be, id, ok, err, idS)
		}
	}
	if err := b.Wipe("s"); err != nil {
		t.Fatal(err)
	}
	if id, ok, err := b.ChangelogID("s"); err != nil || ok {
		t.Fatalf("after Wipe(s) the changelog ID of s is still there: %x (%v)", id, err)
	}
	if id, ok, err := b.ChangelogID("t"); err != nil || !ok || id != idT {
		t.Fatalf("Wipe(s) touched the changelog ID of t: %x %v (%v)", id, ok, err)
	}
}
