package boltpage

import (
	"fmt"
	"os"

	"github.com/storhdb/storh-go/storh/internal/errs"
)

// Precheck reads the meta pages of the existing database file at path and
// fails with ErrCorrupt when the file is too short for the pages they
// describe. bbolt itself would read those pages through its mapping, past
// the end of the file: a fault, recovered as a panic out of bolt.Open, which
// leaves bbolt's lock and mapping behind. Files whose meta pages are both
// invalid are left to bbolt, which reports them as errors.
func Precheck(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // bbolt reports it, with the operating system's reason
	}
	defer f.Close()
	m, found, size, err := readFileMeta(f, 0)
	if err != nil || size == 0 || !found {
		return nil
	}
	return shortFile(m, size)
}

// CheckFileHolds checks the file of an open database, whose pages are
// pageSize bytes, through its descriptor: a valid meta page, and every page
// it claims. A file cut short under the mapping, or whose meta pages were
// both overwritten, fails it; an error reading it too.
func CheckFileHolds(f *os.File, pageSize int) error {
	m, found, size, err := readFileMeta(f, int64(pageSize))
	switch {
	case err != nil:
		return fmt.Errorf("%w: the file cannot be read: %v", errs.ErrCorrupt, err)
	case !found:
		return fmt.Errorf("%w: the file is damaged: neither of its meta pages is valid (truncated to %d bytes, or overwritten)", errs.ErrCorrupt, size)
	}
	return shortFile(m, size)
}

// readFileMeta reads the meta pages of the database file f, whose pages are
// pageSize bytes (0: as its first meta page says, else the system's): the
// valid one with the higher transaction id (found is false when neither
// is), and the file's size, taken after the meta pages: a writer grows the
// file before it writes a meta page that claims the new pages, so a size
// taken before could be short of a meta page read after it.
func readFileMeta(f *os.File, pageSize int64) (best meta, found bool, size int64, err error) {
	// The second meta page is one page size in, which the first one gives.
	readAt := func(off int64) (meta, bool) {
		var b [metaBytes]byte
		if _, err := f.ReadAt(b[:], off); err != nil {
			return meta{}, false
		}
		return readMeta(b[:])
	}
	m0, ok0 := readAt(0)
	if ok0 {
		best, found = m0, true
	}
	switch {
	case pageSize > 0:
	case ok0:
		pageSize = int64(m0.pageSize)
	default:
		pageSize = int64(os.Getpagesize())
	}
	if pageSize > 0 {
		if m1, ok1 := readAt(pageSize); ok1 && (!found || m1.txid > best.txid) {
			best, found = m1, true
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return best, false, 0, err
	}
	return best, found && best.pageSize > 0, fi.Size(), nil
}

// shortFile fails a file of size bytes that cannot hold the pages its meta
// page m claims.
func shortFile(m meta, size int64) error {
	switch need := int64(m.pgid) * int64(m.pageSize); {
	case size < need:
		return fmt.Errorf("%w: the file is damaged: truncated to %d bytes, but its pages need %d", errs.ErrCorrupt, size, need)
	case m.freelist != noFreelist && m.freelist >= m.pgid:
		return fmt.Errorf("%w: the file is damaged: its freelist is said to be on page %d, past its last page %d", errs.ErrCorrupt, m.freelist, m.pgid-1)
	}
	return nil
}
