package boltpage

import (
	"encoding/binary"
	"hash/fnv"
)

// LayoutChecked names the bbolt release this package's assumptions about
// bbolt's file were checked against: the meta page and the page header,
// branch and leaf element headers and nested buckets' values (this file),
// that bbolt neither remaps the file nor reuses its pages while a read
// transaction is open (reader.go, cursor.go). The engine's release of
// bbolt's locks after a failed Begin (file_failure.go) leans on the same
// release. TestLayoutCheckedAgainstGoMod fails when go.mod names another.
const LayoutChecked = "v1.5.0"

// bbolt's page layout (version 2 of its format): a 16-byte header (page
// id, flags, element count, overflow page count), then the element headers
// of 16 bytes each; an element's key starts pos bytes after the element's
// own header, and a leaf element's value follows its key. A branch
// element's header is pos, key size and child page id; a leaf element's is
// flags, pos, key size and value size.
const (
	pageHeader = 16
	branchPage = 0x01
	leafPage   = 0x02
	bucketLeaf = 0x01 // a leaf element that is a nested bucket
	elemSize   = 16
	bucketHead = 16 // a bucket value: root page id and sequence, then the inline page when root is 0
	// maxDepth bounds the descent: bbolt trees of any real size are a
	// handful of levels, and storh nests buckets three deep.
	maxDepth = 64
)

// bbolt's meta page, as bbolt lays it out (version 2 of its format, stable
// since boltdb): a 16-byte page header, then magic, version, page size,
// flags (4 bytes each), the root bucket (root page id and sequence), the
// freelist page id, the high-water page id, the transaction id (8 bytes
// each) and an FNV-64a checksum of everything before it, all in the
// machine's byte order.
const (
	metaMagic   = 0xED0CDAED
	metaVersion = 2
	metaSumFrom = 56 // bytes of the meta covered by its checksum
	// metaBytes is where a meta page's fields end: reading this much of
	// a page is enough to parse it.
	metaBytes = 128
	// noFreelist is the freelist page id of a file written with
	// NoFreelistSync.
	noFreelist = ^uint64(0)
)

type meta struct {
	pageSize             uint32
	root, freelist, pgid uint64
	txid                 uint64
}

// readMeta parses one meta page; ok is false when it is not a valid one.
func readMeta(p []byte) (m meta, ok bool) {
	if len(p) < pageHeader+metaSumFrom+8 {
		return m, false
	}
	b := p[pageHeader:]
	ne := binary.NativeEndian
	if ne.Uint32(b[0:]) != metaMagic || ne.Uint32(b[4:]) != metaVersion {
		return m, false
	}
	h := fnv.New64a()
	h.Write(b[:metaSumFrom])
	if h.Sum64() != ne.Uint64(b[metaSumFrom:]) {
		return m, false
	}
	return meta{pageSize: ne.Uint32(b[8:]), root: ne.Uint64(b[16:]), freelist: ne.Uint64(b[32:]), pgid: ne.Uint64(b[40:]), txid: ne.Uint64(b[48:])}, true
}
