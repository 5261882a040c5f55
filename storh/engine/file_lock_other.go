//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package engine

import "os"

// unlockFile has nothing to do where bbolt's lock goes with the descriptor
// (fcntl locks, Windows' LockFileEx): closing it releases the lock.
func unlockFile(*os.File) error { return nil }
