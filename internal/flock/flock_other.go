//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || windows)

package flock

import (
	"fmt"
	"os"
	"runtime"
)

// TryLock fails: there is no file lock here, and two owners of a state dir would corrupt
// it.
func TryLock(*os.File) (bool, error) {
	return false, fmt.Errorf("%w (%s)", ErrUnsupported, runtime.GOOS)
}

// Unlock does nothing.
func Unlock(*os.File) error { return nil }
