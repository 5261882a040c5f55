package engine

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"

	"github.com/storhdb/storh-go/storh/internal/errs"
)

// bbolt's meta page, as bbolt lays it out (version 2 of its format, stable
// since boltdb): a 16-byte page header, then magic, version, page size,
// flags (4 bytes each), the root bucket (root page id and sequence), the
// freelist page id, the high-water page id, the transaction id (8 bytes
// each) and an FNV-64a checksum of everything before it, all in the
// machine's byte order.
const (
	boltPageHeader  = 16
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	boltMetaSumFrom = 56 // bytes of the meta covered by its checksum
)

type boltMeta struct {
	pageSize             uint32
	root, freelist, pgid uint64
	txid                 uint64
}

// readBoltMeta parses one meta page; ok is false when it is not a valid one.
func readBoltMeta(p []byte) (m boltMeta, ok bool) {
	if len(p) < boltPageHeader+boltMetaSumFrom+8 {
		return m, false
	}
	b := p[boltPageHeader:]
	ne := binary.NativeEndian
	if ne.Uint32(b[0:]) != boltMagic || ne.Uint32(b[4:]) != boltVersion {
		return m, false
	}
	h := fnv.New64a()
	h.Write(b[:boltMetaSumFrom])
	if h.Sum64() != ne.Uint64(b[boltMetaSumFrom:]) {
		return m, false
	}
	return boltMeta{pageSize: ne.Uint32(b[8:]), root: ne.Uint64(b[16:]), freelist: ne.Uint64(b[32:]), pgid: ne.Uint64(b[40:]), txid: ne.Uint64(b[48:])}, true
}

// precheck reads the meta pages of the existing database file at path and
// fails with ErrCorrupt when the file is too short for the pages they
// describe. bbolt itself would read those pages through its mapping, past
// the end of the file: a fault, recovered as a panic out of bolt.Open, which
// leaves bbolt's lock and mapping behind. Files whose meta pages are both
// invalid are left to bbolt, which reports them as errors.
func precheck(path string) error {
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

// checkFileHolds checks the file of an open database, whose pages are
// pageSize bytes, through its descriptor: a valid meta page, and every page
// it claims. A file cut short under the mapping, or whose meta pages were
// both overwritten, fails it; an error reading it too.
func checkFileHolds(f *os.File, pageSize int) error {
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
// is), and the
// file's size, taken after the meta pages: a writer grows the file before
// it writes a meta page that claims the new pages, so a size taken before
// could be short of a meta page read after it.
func readFileMeta(f *os.File, pageSize int64) (best boltMeta, found bool, size int64, err error) {
	// A meta page's fields fit in its first 128 bytes; the second meta page
	// is one page size in, which the first one gives.
	readMeta := func(off int64) (boltMeta, bool) {
		var b [128]byte
		if _, err := f.ReadAt(b[:], off); err != nil {
			return boltMeta{}, false
		}
		return readBoltMeta(b[:])
	}
	m0, ok0 := readMeta(0)
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
		if m1, ok1 := readMeta(pageSize); ok1 && (!found || m1.txid > best.txid) {
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
func shortFile(m boltMeta, size int64) error {
	const noFreelist = ^uint64(0) // a file written with NoFreelistSync
	switch need := int64(m.pgid) * int64(m.pageSize); {
	case size < need:
		return fmt.Errorf("%w: the file is damaged: truncated to %d bytes, but its pages need %d", errs.ErrCorrupt, size, need)
	case m.freelist != noFreelist && m.freelist >= m.pgid:
		return fmt.Errorf("%w: the file is damaged: its freelist is said to be on page %d, past its last page %d", errs.ErrCorrupt, m.freelist, m.pgid-1)
	}
	return nil
}
