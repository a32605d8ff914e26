//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package kvstore

// bootID is unknown here: every unclean close of a NoSync file counts as a restart.
func bootID() string { return "" }
