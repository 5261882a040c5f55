//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package engine

import "syscall"

// fileSizeLimit returns the process's file size limit (RLIMIT_FSIZE), and
// false when there is none.
func fileSizeLimit() (int64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &rl); err != nil || rl.Cur >= 1<<63 { // RLIM_INFINITY is all ones
		return 0, false
	}
	return int64(rl.Cur), true
}
