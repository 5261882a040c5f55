package engine

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// dbFile is the bbolt file under a DB, for what only a file has: page
// checks, direct reads of its pages, backup, compaction, file statistics,
// and its failure while open (file_failure.go). It is the zero value on
// another backend, where bolt and fd are nil. Open sets it before the DB is
// shared; after that only the failure's fields change (failed, panicsSeen,
// stuck), each safe for concurrent use.
type dbFile struct {
	// bolt is the bbolt database under the DB's store (boltFile). setStore
	// asserts it once, so a direct read tests a pointer rather than the
	// store's type.
	bolt *bolt.DB
	// fd is bbolt's descriptor of the file: what the engine reads of the
	// file itself (page checks, its size, its meta pages) it reads here,
	// never through the path, which may name another file by now.
	fd       *os.File
	pageSize int // the file's, as bbolt opened it
	openTxid int // the file's transaction id when it was opened

	// directOff says why point and ranged reads take bbolt's buckets rather
	// than the file's pages (layoutMismatch); "" when they read the pages.
	directOff string

	// failed is set when the file failed while open (file_failure.go);
	// panicsSeen is the count of contained panics the file was last
	// checked after. locks are the bbolt locks a failed Begin leaves held,
	// nil where they cannot be reached; stuck is closed when one stays
	// held.
	failed     atomic.Pointer[fileFailure]
	panicsSeen atomic.Uint64
	locks      *boltLocks
	stuck      chan struct{}
	stuckOnce  sync.Once
}

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
	if db.file.bolt == nil {
		return ""
	}
	size, err := db.FileSize()
	if err != nil {
		return ""
	}
	if limit, ok := fileSizeLimit(); ok && size+int64(db.file.bolt.AllocSize) > limit {
		return fmt.Sprintf("the process's file size limit (RLIMIT_FSIZE, %d bytes) refuses a larger file", limit)
	}
	return ""
}
