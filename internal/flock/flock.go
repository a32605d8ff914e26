// Package flock takes exclusive, non-blocking locks on open files: the state dir's lock
// of a running instance, a task's store lock, and the eddy CLI's check that no instance
// runs on a state dir. One implementation for the three, per operating system: flock(2)
// on Unix, LockFileEx on Windows; elsewhere TryLock fails with ErrUnsupported.
//
// A lock belongs to the open file (its description), not to the process: a second open
// of the same file conflicts even within one process, so two goroutines exclude each
// other like two processes. The operating system drops the lock when the process dies.
package flock

import "errors"

// ErrUnsupported is returned by TryLock where the operating system has no file locks
// eddy knows how to take.
var ErrUnsupported = errors.New("file locking is not supported on this operating system")
