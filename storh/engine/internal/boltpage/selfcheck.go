package boltpage

import (
	"bytes"
	"fmt"
	"io"

	bolt "go.etcd.io/bbolt"
)

// The reader depends on bbolt's page layout, which bbolt does not export.
// Two guards keep that coupling honest: LayoutChecked (layout.go), checked
// against go.mod by a test, and LayoutMismatch, which a store runs on each
// file it opens, and which reads the file through bbolt only when the
// reader fails it: slower, never wrong.

// layoutCheckEntries is how many entries of a tree, from each end, the
// layout check compares: enough to cross a leaf and meet a branch.
const layoutCheckEntries = 32

// LayoutMismatch checks that the reader knows the format of the file bbolt
// has open in btx: that one of its meta pages, read through f, is a meta
// page of bbolt's format version 2 for this transaction with bbolt's page
// size and root, and that the reader finds the same keys and values as
// bbolt's cursor at both ends of the root tree and of the tree sample
// gives (a bucket with pages of its own, described by what; nil for
// none), which it calls only once the rest has passed. It returns why
// not, or "".
func LayoutMismatch(f io.ReaderAt, btx *bolt.Tx, sample func() (b *bolt.Bucket, what string)) string {
	pageSize := btx.DB().Info().PageSize
	root := rootPage(btx)
	found := false
	for id := range 2 {
		var b [metaBytes]byte
		if _, err := f.ReadAt(b[:], int64(id*pageSize)); err != nil {
			continue
		}
		if m, ok := readMeta(b[:]); ok && m.txid == uint64(btx.ID()) {
			if m.pageSize != uint32(pageSize) || m.root != root {
				return fmt.Sprintf("the meta page says page size %d and root page %d, bbolt reads %d and %d", m.pageSize, m.root, pageSize, root)
			}
			found = true
		}
	}
	if !found {
		return fmt.Sprintf("no meta page of bbolt's format version %d holds transaction %d", metaVersion, btx.ID())
	}
	r := NewReader(btx)
	if why := sameEntries(r, root, btx.Cursor(), "the root tree"); why != "" {
		return why
	}
	if b, what := sample(); b != nil {
		return sameEntries(r, uint64(b.Root()), b.Cursor(), what)
	}
	return ""
}

// sameEntries compares the first and last layoutCheckEntries entries of
// the tree at root as the page cursor reads them with what bbolt's cursor
// c reads, and a point read of the first key; it returns the first
// difference, or "".
func sameEntries(r Reader, root uint64, c *bolt.Cursor, what string) string {
	pc := NewCursor(r, root)
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
	if got, err := r.Get(root, bk); err != nil || !bytes.Equal(got, bv) {
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
