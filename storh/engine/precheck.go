package engine

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
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
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return nil
	}
	// A meta page's fields fit in its first 128 bytes; the second meta page
	// is one page size in, which the first one gives.
	readMeta := func(off int64) (boltMeta, bool) {
		var b [128]byte
		if _, err := f.ReadAt(b[:], off); err != nil {
			return boltMeta{}, false
		}
		return readBoltMeta(b[:])
	}
	best, found := boltMeta{}, false
	m0, ok0 := readMeta(0)
	if ok0 {
		best, found = m0, true
	}
	pageSize := int64(m0.pageSize)
	if !ok0 {
		pageSize = int64(os.Getpagesize())
	}
	if pageSize > 0 {
		if m1, ok1 := readMeta(pageSize); ok1 && (!found || m1.txid > best.txid) {
			best, found = m1, true
		}
	}
	if !found || best.pageSize == 0 {
		return nil
	}
	const noFreelist = ^uint64(0) // a file written with NoFreelistSync
	switch need := int64(best.pgid) * int64(best.pageSize); {
	case fi.Size() < need:
		return fmt.Errorf("%w: the file is damaged: truncated to %d bytes, but its pages need %d", ErrCorrupt, fi.Size(), need)
	case best.freelist != noFreelist && best.freelist >= best.pgid:
		return fmt.Errorf("%w: the file is damaged: its freelist is said to be on page %d, past its last page %d", ErrCorrupt, best.freelist, best.pgid-1)
	}
	return nil
}
