//go:build !windows && !plan9 && !solaris && !aix && !android

package engine

import (
	"errors"
	"os"
	"syscall"
)

// lockHolderOf probes the lock on the file at path without waiting. bbolt
// locks with flock(2) where this file builds (its bolt_unix.go has the
// same constraint; elsewhere it uses fcntl or LockFileEx, which this probe
// would misread). flock locks belong to an open file description, so a
// descriptor of its own competes with every holder, this process's other
// Opens included, and closing it drops only its own lock. A shared lock is
// refused only while someone holds the exclusive one; the exclusive one,
// taken for an instant, is refused while anyone holds a shared one (an
// Open that tries the lock in that instant only waits: bbolt retries).
func lockHolderOf(path string) lockHolder {
	f, err := os.Open(path)
	if err != nil {
		return holderUnknown
	}
	defer f.Close()
	fd := int(f.Fd())
	switch err := syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return holderWriter
	case err != nil:
		return holderUnknown
	}
	switch err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return holderReaders
	case err != nil:
		return holderUnknown
	}
	return holderGone
}
