package flock_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/eddy-streams/eddy/internal/flock"
)

// A second open of a locked file cannot take the lock, even in the same process; after
// Unlock it can.
func TestTryLockExcludesASecondOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "LOCK")
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return f
	}
	a, b := open(), open()
	if ok, err := flock.TryLock(a); !ok || err != nil {
		t.Fatalf("first lock: %v %v", ok, err)
	}
	if ok, err := flock.TryLock(b); ok || err != nil {
		t.Fatalf("second open locked a held lock: %v %v", ok, err)
	}
	if err := flock.Unlock(a); err != nil {
		t.Fatal(err)
	}
	if ok, err := flock.TryLock(b); !ok || err != nil {
		t.Fatalf("lock after unlock: %v %v", ok, err)
	}
}
