package engine

import (
	"fmt"
	"os"
)

// diskUsage returns the apparent size of the file at path and the space the
// file system has allocated for it. bbolt grows its file with truncate,
// which leaves the new tail unallocated until pages are written there, so a
// fresh database shows 16 MiB but occupies a few pages.
func diskUsage(path string) (size, allocated int64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	return fi.Size(), allocatedBytes(fi), nil
}

// cannotGrow tells why the database file cannot grow by bbolt's next step,
// or "" when nothing says so. It backs commitErr, for the one bbolt failure
// whose errno is lost.
func (db *DB) cannotGrow() string {
	if db.bolt == nil {
		return ""
	}
	size, err := db.FileSize()
	if err != nil {
		return ""
	}
	if limit, ok := fileSizeLimit(); ok && size+int64(db.bolt.AllocSize) > limit {
		return fmt.Sprintf("the process's file size limit (RLIMIT_FSIZE, %d bytes) refuses a larger file", limit)
	}
	return ""
}
