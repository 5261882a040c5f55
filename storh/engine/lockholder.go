package engine

import (
	"fmt"
	"time"

	"github.com/storhdb/storh-go/storh/internal/errs"
)

// lockHolder is what keeps an Open out of a database file, as far as it can
// be known after the wait: bbolt's lock is flock(2) on Unix, shared for a
// read-only open and exclusive for a writable one, and a probe with a
// descriptor of its own tells which kind is held (lockHolderOf).
type lockHolder int

const (
	holderUnknown lockHolder = iota // no probe on this platform, or it failed
	holderWriter                    // an exclusive lock: open for writing
	holderReaders                   // shared locks only: open read-only
	holderGone                      // no lock any more: the holder closed the file
)

// lockedError is the Err and Hint of an Open that waited for the lock on
// the file at path and did not get it. It says which kind of holder keeps
// the file as the probe saw it just after the wait, never more: a
// read-only storh serve is not "a writer".
func lockedError(path string, waited time.Duration) (error, string) {
	var who, hint string
	switch lockHolderOf(path) {
	case holderWriter:
		who, hint = "another process, or another Open in this one, has the file open for writing", "close it, or raise the lock timeout"
	case holderReaders:
		who, hint = "other processes, or other Opens in this one, have the file open read-only, which keeps writers out", "close them, or raise the lock timeout"
	case holderGone:
		who, hint = "another process, or another Open in this one, had the file and has closed it since", "it is free now: try again"
	default:
		who, hint = "another process, or another Open in this one, has the file open", "close it, or raise the lock timeout"
	}
	return fmt.Errorf("%w (waited %v): %s", errs.ErrLocked, waited, who), hint
}
