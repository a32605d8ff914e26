//go:build unix

package main

import (
	"os"
	"syscall"
)

// diskBytes is what a file uses on disk (its allocated blocks), -1 when unknown.
func diskBytes(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return -1
}
