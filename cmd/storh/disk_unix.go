//go:build unix

package main

import (
	"os"
	"syscall"
)

// onDisk returns the space the file system allocated for a file (what du
// shows), or its size where that is not known.
func onDisk(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
