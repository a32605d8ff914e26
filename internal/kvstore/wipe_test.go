package kvstore

import (
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
