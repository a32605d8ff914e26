//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package statestore

import "os"

// tryLock is a no-op where flock is unavailable: bbolt's own lock of the data file
// (taken by bolt.Open within LockTimeout) is then the only one.
func tryLock(*os.File) (bool, error) { return true, nil }

func unlock(*os.File) error { return nil }

// bootID is unknown here: every unclean close of a NoSync file counts as a restart.
func bootID() string { return "" }
