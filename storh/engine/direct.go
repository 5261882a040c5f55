package engine

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/storhdb/storh-go/storh/engine/internal/boltpage"
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
// directly (boltpage.Reader), checked as it is read.
//
// The mapping is read while a bbolt read transaction is open: bbolt does
// not remap while one is, and the transaction's pages are not reused
// before it ends. Damage the reader meets is ErrCorrupt; a fault on a
// truncated file is contained as on every direct read (directView).

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

// forcedLayoutMismatch, set by tests, is what Open's layout check finds in
// every file: the fallback to bbolt's reads is tested on healthy files.
var forcedLayoutMismatch string

// layoutMismatch checks at Open that the direct reader knows the format of
// the file bbolt has open in btx (boltpage.LayoutMismatch), on the root
// tree and on the first records tree that has pages of its own (outside
// the collections Open found broken). It returns why not, or "": a file
// that fails it is read through bbolt's buckets only, slower but never
// wrong, and Stats says so.
func layoutMismatch(f io.ReaderAt, btx *bolt.Tx, broken map[string]string) string {
	if forcedLayoutMismatch != "" {
		return forcedLayoutMismatch
	}
	return boltpage.LayoutMismatch(f, btx, func() (*bolt.Bucket, string) {
		c := btx.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if v != nil || broken[string(k)] != "" {
				continue
			}
			recs := btx.Bucket(k).Bucket(bucketRecords)
			if recs == nil || recs.Root() == 0 {
				continue
			}
			return recs, fmt.Sprintf("the records of %q", k)
		}
		return nil, ""
	})
}

// DirectReadsOff says why point and ranged reads of this file go through
// bbolt's buckets rather than reading its pages directly: "" when they
// read the pages, and on every other backend (which has no pages).
func (db *DB) DirectReadsOff() string { return db.file.directOff }
