//go:build unix

package engine

import (
	"os"
	"syscall"
)

func allocatedBytes(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512 // st_blocks counts 512-byte units on every unix
	}
	return fi.Size()
}
