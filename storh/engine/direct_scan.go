package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime/debug"

	"github.com/storhdb/storh-go/storh/kv"
)

// Ranged reads straight from the memory map. Every chunk of a run read
// through the collection paid three bucket opens (the collection's, its
// metadata's and its records'), a read of its kind and bbolt's cursor
// before the walk itself. A run over an id range with no condition and no
// field order needs none of the collection's metadata, so on bbolt it
// walks the records bucket's leaves from the root this commit has (the
// root point reads find: direct.go) with a cursor over the mapping,
// checked as it reads as the point read's search is. The same page of
// 100 went from 2.7x to about 1.4x a raw bbolt walk that copies each value
// (docs/benchmarks.md).

// pageCursor walks the leaves of one tree in a read transaction's mapping
// in key order, as bbolt's cursor does in a read transaction. It is a
// kv.Cursor, so the ranged scan runs over it unchanged. Damage it meets
// (a page outside the file, an element outside its page, a tree deeper
// than bbolt writes) ends the walk as the end of the keys would, and is
// kept in err: the reader must look at it when the walk stops.
type pageCursor struct {
	r    pageReader
	root uint64
	// path holds the pages from the root to the current leaf, each at
	// the element the walk is on; empty off either end.
	path []pageAt
	err  error

	inline [6]pageAt // path's first storage: trees this deep hold billions of keys
}

// pageAt is one page of a cursor's path.
type pageAt struct {
	p     []byte // the page with its overflow
	id    uint64
	count int
	i     int
	leaf  bool
}

func newPageCursor(r pageReader, root uint64) *pageCursor {
	c := &pageCursor{r: r, root: root}
	c.path = c.inline[:0]
	return c
}

// fail ends the walk with err (the first damage it met is the one kept).
func (c *pageCursor) fail(err error) ([]byte, []byte) {
	if c.err == nil {
		c.err = err
	}
	c.path = c.path[:0]
	return nil, nil
}

// push reads page id onto the path, at its first element or, with last,
// its last.
func (c *pageCursor) push(id uint64, last bool) error {
	if len(c.path) == maxTreeDepth {
		return fmt.Errorf("%w: a tree deeper than %d pages", ErrCorrupt, maxTreeDepth)
	}
	p, err := c.r.page(id)
	if err != nil {
		return err
	}
	flags, count := binary.NativeEndian.Uint16(p[8:]), int(binary.NativeEndian.Uint16(p[10:]))
	if flags != boltBranchPage && flags != boltLeafPage {
		return fmt.Errorf("%w: page %d is neither a branch nor a leaf (flags %#x)", ErrCorrupt, id, flags)
	}
	// Only a root leaf may be empty: bbolt merges away every other page
	// that runs empty.
	if (count == 0 && (flags == boltBranchPage || len(c.path) > 0)) || boltPageHeader+count*boltElemSize > len(p) {
		return fmt.Errorf("%w: page %d holds %d elements in %d bytes", ErrCorrupt, id, count, len(p))
	}
	at := pageAt{p: p, id: id, count: count, leaf: flags == boltLeafPage}
	if last {
		at.i = count - 1
	}
	c.path = append(c.path, at)
	return nil
}

// descend follows the children of the path's last page down to a leaf:
// their first elements, or with last their last.
func (c *pageCursor) descend(last bool) error {
	for {
		top := &c.path[len(c.path)-1]
		if top.leaf {
			return nil
		}
		if err := c.push(branchChild(top.p, top.i), last); err != nil {
			return err
		}
	}
}

// leafKey is branchKey for a leaf's element, whose header starts with its
// flags.
func leafKey(p []byte, i int, id uint64) ([]byte, error) {
	e := boltPageHeader + i*boltElemSize
	pos := e + int(binary.NativeEndian.Uint32(p[e+4:]))
	ks := int(binary.NativeEndian.Uint32(p[e+8:]))
	if pos < e || ks > len(p)-pos {
		return nil, fmt.Errorf("%w: page %d element %d lies outside its page", ErrCorrupt, id, i)
	}
	return p[pos : pos+ks], nil
}

func branchChild(p []byte, i int) uint64 {
	return binary.NativeEndian.Uint64(p[boltPageHeader+i*boltElemSize+8:])
}

// here returns the leaf element the walk is on, or moves on (after, the
// direction) from a leaf it stands past.
func (c *pageCursor) here(forward bool) ([]byte, []byte) {
	if len(c.path) == 0 {
		return nil, nil
	}
	top := &c.path[len(c.path)-1]
	if top.i < 0 || top.i >= top.count {
		if forward {
			return c.Next()
		}
		return c.Prev()
	}
	return c.elem(top)
}

// elem returns the element a leaf of the path is on.
func (c *pageCursor) elem(top *pageAt) ([]byte, []byte) {
	p := top.p
	e := boltPageHeader + top.i*boltElemSize
	pos := e + int(binary.NativeEndian.Uint32(p[e+4:]))
	ks, vs := int(binary.NativeEndian.Uint32(p[e+8:])), int(binary.NativeEndian.Uint32(p[e+12:]))
	if pos < e || ks > len(p)-pos || vs > len(p)-pos-ks {
		return c.fail(fmt.Errorf("%w: page %d element %d lies outside its page", ErrCorrupt, top.id, top.i))
	}
	k := p[pos : pos+ks : pos+ks]
	if binary.NativeEndian.Uint32(p[e:])&boltBucketLeaf != 0 {
		return k, nil // a nested bucket, as bbolt's cursor shows one
	}
	v := p[pos+ks : pos+ks+vs : pos+ks+vs]
	return k, v
}

func (c *pageCursor) First() ([]byte, []byte) { return c.end(false) }
func (c *pageCursor) Last() ([]byte, []byte)  { return c.end(true) }

func (c *pageCursor) end(last bool) ([]byte, []byte) {
	c.path = c.path[:0]
	if err := c.push(c.root, last); err != nil {
		return c.fail(err)
	}
	if err := c.descend(last); err != nil {
		return c.fail(err)
	}
	return c.here(!last)
}

// Seek moves to the first key at or after seek.
func (c *pageCursor) Seek(seek []byte) ([]byte, []byte) {
	c.path = c.path[:0]
	if err := c.push(c.root, false); err != nil {
		return c.fail(err)
	}
	for {
		top := &c.path[len(c.path)-1]
		if top.leaf {
			// The first element at or after seek.
			lo, hi := 0, top.count
			for lo < hi {
				m := int(uint(lo+hi) >> 1)
				k, err := leafKey(top.p, m, top.id)
				if err != nil {
					return c.fail(err)
				}
				if bytes.Compare(k, seek) < 0 {
					lo = m + 1
				} else {
					hi = m
				}
			}
			top.i = lo
			return c.here(true)
		}
		// The last element at or below seek (the first, when seek is
		// below them all): its child holds seek's place.
		lo, hi := 1, top.count
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			k, err := branchKey(top.p, m, top.id)
			if err != nil {
				return c.fail(err)
			}
			if bytes.Compare(k, seek) <= 0 {
				lo = m + 1
			} else {
				hi = m
			}
		}
		top.i = lo - 1
		if err := c.push(branchChild(top.p, top.i), false); err != nil {
			return c.fail(err)
		}
	}
}

// Next moves to the next key: along the leaf, or up to the first branch
// with a child to the right and down its leftmost leaves.
func (c *pageCursor) Next() ([]byte, []byte) {
	if n := len(c.path); n > 0 {
		if top := &c.path[n-1]; top.leaf && top.i+1 < top.count {
			top.i++ // along the leaf: most steps
			return c.elem(top)
		}
	}
	for len(c.path) > 0 {
		top := &c.path[len(c.path)-1]
		if top.i+1 < top.count {
			top.i++
			if !top.leaf {
				if err := c.push(branchChild(top.p, top.i), false); err != nil {
					return c.fail(err)
				}
				if err := c.descend(false); err != nil {
					return c.fail(err)
				}
			}
			return c.here(true)
		}
		c.path = c.path[:len(c.path)-1]
	}
	return nil, nil
}

// Prev is Next to the left.
func (c *pageCursor) Prev() ([]byte, []byte) {
	for len(c.path) > 0 {
		top := &c.path[len(c.path)-1]
		if top.i > 0 {
			top.i = min(top.i, top.count) - 1
			if !top.leaf {
				if err := c.push(branchChild(top.p, top.i), true); err != nil {
					return c.fail(err)
				}
				if err := c.descend(true); err != nil {
					return c.fail(err)
				}
			}
			return c.here(false)
		}
		c.path = c.path[:len(c.path)-1]
	}
	return nil, nil
}

// Delete is refused: the cursor reads a read transaction's pages.
func (c *pageCursor) Delete() error { return kv.ErrTxNotWritable }

// rangeOnly reports whether the run reads an id range as it lies: no
// condition, no field order, so no index and no metadata of the
// collection can change what it reads.
func (r *Run) rangeOnly() bool {
	return r.spec.Cond == nil && r.spec.Order == nil && r.spec.After == nil && r.spec.Before == nil
}

// directChunk reads the next chunk of a rangeOnly run of h from the
// mapping (ok), or reports that it must take the full path (!ok): a
// collection small enough to sit inline in its parent's page. The
// transaction and the fault handling are directRead's.
func (db *DB) directChunk(h Handle, r *Run, max int, dst []Item) (out []Item, ok bool, err error) {
	n := len(dst)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if rec := recover(); rec != nil {
			out, ok, err = dst[:n], true, damaged(rec)
			r.Done = true
		}
	}()
	btx, err := db.bolt.Begin(false)
	if err != nil {
		return dst, true, mapStoreErr(boltErr(err))
	}
	defer btx.Rollback()
	root, exists, err := recordsRoot(btx, h)
	switch {
	case err != nil:
		r.Done = true
		return dst, true, err
	case !exists:
		r.Done = true // read as an empty collection, as the full path does
		return dst, true, nil
	case root == 0:
		return dst, false, nil
	}
	if !r.planned {
		if err := r.plan(nil, nil, nil); err != nil {
			r.Done = true
			return dst, true, err
		}
	}
	if r.Done || r.left <= 0 || r.mode != modeIDs {
		r.Done = true
		return dst, true, nil
	}
	cur := newPageCursor(newPageReader(btx), root)
	dst = r.nextIDsOn(cur, min(max, r.left), dst)
	if cur.err != nil {
		r.Done = true
		return dst[:n], true, fmt.Errorf("collection %q: %w", h.Name, cur.err)
	}
	return dst, true, nil
}

// directRun reports whether a chunk of r over h may take directChunk.
func (db *DB) directRun(h Handle, r *Run) bool {
	return db.direct(h) && r.rangeOnly()
}

var _ kv.Cursor = (*pageCursor)(nil)
