//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package statestore

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive, non-blocking flock on f. flock locks belong to an open
// file description, so a second open of the same file conflicts even within one
// process: two goroutines of one process exclude each other like two processes. The
// kernel drops the lock when the process dies.
func tryLock(f *os.File) (locked bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

func unlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// bootID names the running kernel's boot: when it changed since a file was last open,
// the machine restarted, and writes that were never fsynced may be lost or torn.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "" // unknown: treated as a restart (see OpenBolt)
	}
	return string(trimSpace(b))
}
