package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
	"unsafe"

	"github.com/storhdb/storh-go/storh/internal/errs"

	bolt "go.etcd.io/bbolt"
)

// Point reads straight from the memory map. A collection's records sit in
// a bucket nested in the collection's: bbolt opens each bucket of the path
// with a cursor search and four allocations, twice per point read, which
// was most of what a read cost over a raw bbolt Get from a top-level
// bucket. Between two commits every reader sees the same tree, so the
// records bucket's root page is found once per commit (rootAt, per
// handle), and a read searches the B+tree from it in bbolt's pages
// directly: the page layout the structural page check already reads
// (pages.go), checked as it is read.
//
// The mapping is read while a bbolt read transaction is open: bbolt does
// not remap while one is, and the transaction's pages are not reused
// before it ends. A page outside the file, an element outside its page or
// a tree deeper than any bbolt writes is ErrCorrupt; a fault on a
// truncated file is contained as on every direct read.

// rootAt is a records bucket's root page at one transaction id of one
// open file, with the kind of its collection: transaction ids are the
// file's, so a Handle value carried to another DB (two files copied from
// one, whose ids coincide) must not find its root here. The kind is
// checked on every read, as the full path checks it when it opens the
// collection: another handle may have created the collection as another
// kind after this one was opened.
type rootAt struct {
	file *bolt.DB
	txid int
	root uint64
	kind Kind
}

// rootSlot caches the rootAt of one handle's collection.
type rootSlot struct{ p atomic.Pointer[rootAt] }

// pageReader reads a read transaction's pages from bbolt's mapping.
type pageReader struct {
	data     []byte // the mapping, up to the transaction's size
	pageSize uint64
}

func newPageReader(btx *bolt.Tx) pageReader {
	info := btx.DB().Info()
	// info.Data is the mapping's address as a uintptr: read it as the
	// pointer it is. The mapping is not Go memory; the transaction keeps
	// it in place.
	base := *(*unsafe.Pointer)(unsafe.Pointer(&info.Data))
	return pageReader{data: unsafe.Slice((*byte)(base), btx.Size()), pageSize: uint64(info.PageSize)}
}

// page returns page id with its overflow pages.
func (r pageReader) page(id uint64) ([]byte, error) {
	n := uint64(len(r.data)) / r.pageSize
	if id < 2 || id >= n {
		return nil, fmt.Errorf("%w: page %d is outside the file's pages 2 to %d", errs.ErrCorrupt, id, n-1)
	}
	start := id * r.pageSize
	head := r.data[start : start+boltPageHeader]
	overflow := uint64(binary.NativeEndian.Uint32(head[12:]))
	if binary.NativeEndian.Uint64(head) != id || overflow >= n-id {
		return nil, fmt.Errorf("%w: page %d has a damaged header", errs.ErrCorrupt, id)
	}
	return r.data[start : start+(1+overflow)*r.pageSize], nil
}

// pageAt is one node of a tree as read from the mapping, at element i
// where a walk stands on it.
type pageAt struct {
	p     []byte // the page with its overflow
	id    uint64
	count int
	i     int
	leaf  bool
}

// node reads page id as a node of a tree: a branch or a leaf whose element
// headers lie inside it. Only a root leaf may be empty (emptyOK): bbolt
// merges away every other page that runs empty.
func (r pageReader) node(id uint64, emptyOK bool) (pageAt, error) {
	p, err := r.page(id)
	if err != nil {
		return pageAt{}, err
	}
	flags, count := binary.NativeEndian.Uint16(p[8:]), int(binary.NativeEndian.Uint16(p[10:]))
	if flags != boltBranchPage && flags != boltLeafPage {
		return pageAt{}, fmt.Errorf("%w: page %d is neither a branch nor a leaf (flags %#x)", errs.ErrCorrupt, id, flags)
	}
	if (count == 0 && !(emptyOK && flags == boltLeafPage)) || boltPageHeader+count*boltElemSize > len(p) {
		return pageAt{}, fmt.Errorf("%w: page %d holds %d elements in %d bytes", errs.ErrCorrupt, id, count, len(p))
	}
	return pageAt{p: p, id: id, count: count, leaf: flags == boltLeafPage}, nil
}

// get finds key in the tree rooted at page root: its value, or nil.
func (r pageReader) get(root uint64, key []byte) ([]byte, error) {
	id := root
	for range maxTreeDepth {
		n, err := r.node(id, false)
		if err != nil {
			return nil, err
		}
		if !n.leaf {
			i, err := branchIndex(n, key)
			if err != nil {
				return nil, err
			}
			id = branchChild(n.p, i)
			continue
		}
		i, err := leafIndex(n, key)
		if err != nil || i == n.count {
			return nil, err
		}
		k, v, err := leafElem(&n, i)
		if err != nil || !bytes.Equal(k, key) {
			return nil, err
		}
		return v, nil // nil for a nested bucket, which is not a value
	}
	return nil, fmt.Errorf("%w: a tree deeper than %d pages", errs.ErrCorrupt, maxTreeDepth)
}

// branchIndex is the element of branch n whose child holds key's place:
// the last at or below key, or the first when key is below them all.
func branchIndex(n pageAt, key []byte) (int, error) {
	lo, hi := 1, n.count
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		k, err := branchKey(n.p, m, n.id)
		if err != nil {
			return 0, err
		}
		if bytes.Compare(k, key) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1, nil
}

// leafIndex is the first element of leaf n at or after key; n.count when
// there is none.
func leafIndex(n pageAt, key []byte) (int, error) {
	lo, hi := 0, n.count
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		k, err := leafKey(n.p, m, n.id)
		if err != nil {
			return 0, err
		}
		if bytes.Compare(k, key) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, nil
}

func branchKey(p []byte, i int, id uint64) ([]byte, error) {
	e := boltPageHeader + i*boltElemSize
	pos := e + int(binary.NativeEndian.Uint32(p[e:]))
	ks := int(binary.NativeEndian.Uint32(p[e+4:]))
	if pos < e || ks > len(p)-pos {
		return nil, fmt.Errorf("%w: page %d element %d lies outside its page", errs.ErrCorrupt, id, i)
	}
	return p[pos : pos+ks], nil
}

// leafKey is branchKey for a leaf's element, whose header starts with its
// flags.
func leafKey(p []byte, i int, id uint64) ([]byte, error) {
	e := boltPageHeader + i*boltElemSize
	pos := e + int(binary.NativeEndian.Uint32(p[e+4:]))
	ks := int(binary.NativeEndian.Uint32(p[e+8:]))
	if pos < e || ks > len(p)-pos {
		return nil, fmt.Errorf("%w: page %d element %d lies outside its page", errs.ErrCorrupt, id, i)
	}
	return p[pos : pos+ks], nil
}

// leafElem returns element i of leaf n: its key and its value, nil for a
// nested bucket (as bbolt's cursor shows one).
func leafElem(n *pageAt, i int) (k, v []byte, err error) {
	p := n.p
	e := boltPageHeader + i*boltElemSize
	pos := e + int(binary.NativeEndian.Uint32(p[e+4:]))
	ks, vs := int(binary.NativeEndian.Uint32(p[e+8:])), int(binary.NativeEndian.Uint32(p[e+12:]))
	if pos < e || ks > len(p)-pos || vs > len(p)-pos-ks {
		return nil, nil, fmt.Errorf("%w: page %d element %d lies outside its page", errs.ErrCorrupt, n.id, i)
	}
	k = p[pos : pos+ks : pos+ks]
	if binary.NativeEndian.Uint32(p[e:])&boltBucketLeaf != 0 {
		return k, nil, nil
	}
	return k, p[pos+ks : pos+ks+vs : pos+ks+vs], nil
}

func branchChild(p []byte, i int) uint64 {
	return binary.NativeEndian.Uint64(p[boltPageHeader+i*boltElemSize+8:])
}

// recordsRoot returns the root page of h's records bucket in btx, found
// once per commit; 0 when the bucket is inline in its parent's page (a
// small collection), or when there is no collection (exists false). A
// collection of another kind than h's is ErrWrongKind.
func recordsRoot(btx *bolt.Tx, h Handle) (root uint64, exists bool, err error) {
	txid, file := btx.ID(), btx.DB()
	if h.roots != nil {
		if r := h.roots.p.Load(); r != nil && r.txid == txid && r.file == file {
			return r.root, true, r.checkKind(h)
		}
	}
	name := h.key
	if name == nil {
		name = []byte(h.Name)
	}
	coll := btx.Bucket(name)
	if coll == nil {
		return 0, false, nil
	}
	meta, recs := coll.Bucket(bucketMeta), coll.Bucket(bucketRecords)
	if meta == nil || recs == nil {
		return 0, false, fmt.Errorf("%w: collection %q lacks its %s bucket", errs.ErrCorrupt, h.Name, missing(wrapBucket(meta), wrapBucket(recs)))
	}
	k := meta.Get(keyKind)
	if len(k) != 1 {
		return 0, false, fmt.Errorf("%w: collection %q has no valid kind", errs.ErrCorrupt, h.Name)
	}
	at := &rootAt{file: file, txid: txid, root: uint64(recs.Root()), kind: Kind(k[0])}
	if h.roots != nil {
		h.roots.p.Store(at)
	}
	return at.root, true, at.checkKind(h)
}

// checkKind is checkKind for the direct paths, which open no Coll.
func (r *rootAt) checkKind(h Handle) error {
	if h.Kind == 0 || r.kind == h.Kind {
		return nil
	}
	return checkKind(&Coll{Name: h.Name, Kind: r.kind}, h.Kind)
}

// The direct reader depends on bbolt's page layout, which bbolt does not
// export: the meta page (format version 2), the page header, the element
// headers of branches and leaves, and nested buckets' values. Two guards
// keep that coupling honest. layoutChecked names the bbolt release the
// layout was checked against, and a test fails when go.mod names another
// until the assumptions above (and pages.go's, precheck.go's, and
// file_failure.go's about bbolt's locks) are checked again. And Open checks each file it opens (layoutMismatch): its meta page
// is one the reader knows, and the reader reads a tree of it as bbolt does.
// A file that fails the check is read through bbolt's buckets only: slower,
// never wrong; Stats says so.
const layoutChecked = "v1.5.0"

// forcedLayoutMismatch, set by tests, is what Open's layout check finds in
// every file: the fallback to bbolt's reads is tested on healthy files.
var forcedLayoutMismatch string

// layoutCheckEntries is how many entries of a tree, from each end, the
// layout check compares: enough to cross a leaf and meet a branch.
const layoutCheckEntries = 32

// layoutMismatch checks at Open that the direct reader knows the format of
// the file bbolt has open in btx: that one of its meta pages, read through
// f, is a meta page of bbolt's format version 2 for this transaction with
// bbolt's page size and root, and that the reader finds the same keys and
// values as bbolt's cursor at both ends of the root tree and of the first
// records tree that has pages of its own (outside the collections Open
// found broken). It returns why not, or "".
func layoutMismatch(f io.ReaderAt, btx *bolt.Tx, broken map[string]string) string {
	if forcedLayoutMismatch != "" {
		return forcedLayoutMismatch
	}
	pageSize := btx.DB().Info().PageSize
	root := uint64(btx.Cursor().Bucket().RootPage())
	found := false
	for id := range 2 {
		var b [128]byte
		if _, err := f.ReadAt(b[:], int64(id*pageSize)); err != nil {
			continue
		}
		if m, ok := readBoltMeta(b[:]); ok && m.txid == uint64(btx.ID()) {
			if m.pageSize != uint32(pageSize) || m.root != root {
				return fmt.Sprintf("the meta page says page size %d and root page %d, bbolt reads %d and %d", m.pageSize, m.root, pageSize, root)
			}
			found = true
		}
	}
	if !found {
		return fmt.Sprintf("no meta page of bbolt's format version %d holds transaction %d", boltVersion, btx.ID())
	}
	r := newPageReader(btx)
	if why := sameEntries(r, root, btx.Cursor(), "the root tree"); why != "" {
		return why
	}
	c := btx.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v != nil || broken[string(k)] != "" {
			continue
		}
		recs := btx.Bucket(k).Bucket(bucketRecords)
		if recs == nil || recs.Root() == 0 {
			continue
		}
		return sameEntries(r, uint64(recs.Root()), recs.Cursor(), fmt.Sprintf("the records of %q", k))
	}
	return ""
}

// sameEntries compares the first and last layoutCheckEntries entries of
// the tree at root as the page cursor reads them with what bbolt's cursor
// c reads, and a point read of the first key; it returns the first
// difference, or "".
func sameEntries(r pageReader, root uint64, c *bolt.Cursor, what string) string {
	pc := newPageCursor(r, root)
	differ := func(k, v, bk, bv []byte) string {
		if pc.err != nil {
			return fmt.Sprintf("the direct reader cannot read %s: %v", what, pc.err)
		}
		if !bytes.Equal(k, bk) || !bytes.Equal(v, bv) || (v == nil) != (bv == nil) {
			return fmt.Sprintf("the direct reader reads %s differently from bbolt (key %x)", what, bk)
		}
		return ""
	}
	k, v := pc.First()
	bk, bv := c.First()
	if why := differ(k, v, bk, bv); why != "" || bk == nil {
		return why
	}
	if got, err := r.get(root, bk); err != nil || !bytes.Equal(got, bv) {
		return fmt.Sprintf("the direct reader's search reads %s differently from bbolt (key %x)", what, bk)
	}
	for range layoutCheckEntries {
		k, v = pc.Next()
		bk, bv = c.Next()
		if why := differ(k, v, bk, bv); why != "" || bk == nil {
			return why
		}
	}
	k, v = pc.Last()
	bk, bv = c.Last()
	for range layoutCheckEntries {
		if why := differ(k, v, bk, bv); why != "" || bk == nil {
			return why
		}
		k, v = pc.Prev()
		bk, bv = c.Prev()
	}
	return ""
}

// DirectReadsOff says why point and ranged reads of this file go through
// bbolt's buckets rather than reading its pages directly: "" when they
// read the pages, and on every other backend (which has no pages).
func (db *DB) DirectReadsOff() string { return db.directOff }
