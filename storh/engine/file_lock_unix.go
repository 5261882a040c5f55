//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package engine

import (
	"os"
	"syscall"
)

// unlockFile drops the flock bbolt took on f. The lock belongs to the open
// file, which a mapping of it keeps alive after its descriptor is closed.
func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
