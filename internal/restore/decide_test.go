package restore

import "testing"

// The restore decision, against the table in Restore's doc: no checkpoint or one below
// the log start restores from empty; one above the last stable offset waits for the
// store's own commit markers, and if it is still above afterwards (it was above the
// high-water mark) the changelog was recreated; otherwise the tail from the checkpoint.
func TestDecideStart(t *testing.T) {
	for _, c := range []struct {
		name                 string
		cp                   int64
		hasCP                bool
		logStart, lastStable int64
		want                 start
	}{
		{"no checkpoint", 0, false, 0, 100, fromEmpty},
		{"no checkpoint, empty changelog", 0, false, 0, 0, fromEmpty},
		{"checkpoint at the end", 100, true, 0, 100, atCheckpoint},
		{"checkpoint inside", 40, true, 0, 100, atCheckpoint},
		{"checkpoint at the log start", 10, true, 10, 100, atCheckpoint},
		{"checkpoint below the log start (truncated)", 9, true, 10, 100, fromEmpty},
		{"checkpoint above the last stable offset", 101, true, 0, 100, awaitMarkers},
		{"checkpoint zero on an empty changelog", 0, true, 0, 0, atCheckpoint},
	} {
		if got := decideStart(c.cp, c.hasCP, c.logStart, c.lastStable); got != c.want {
			t.Errorf("%s: decideStart(%d, %v, %d, %d) = %d, want %d", c.name, c.cp, c.hasCP, c.logStart, c.lastStable, got, c.want)
		}
	}
	if got := afterMarkers(101, 101); got != atCheckpoint {
		t.Errorf("markers came: %d, want atCheckpoint", got)
	}
	if got := afterMarkers(150, 120); got != fromEmpty {
		t.Errorf("checkpoint above the high-water mark: %d, want fromEmpty", got)
	}
}
