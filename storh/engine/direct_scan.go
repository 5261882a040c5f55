package engine

import (
	"fmt"

	"github.com/storhdb/storh-go/storh/internal/errs"

	bolt "go.etcd.io/bbolt"

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
		return fmt.Errorf("%w: a tree deeper than %d pages", errs.ErrCorrupt, maxTreeDepth)
	}
	at, err := c.r.node(id, len(c.path) == 0)
	if err != nil {
		return err
	}
	if last {
		at.i = at.count - 1
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

// here returns the leaf element the walk is on, or moves on (forward
// gives the direction) from a leaf it stands past.
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
	k, v, err := leafElem(top, top.i)
	if err != nil {
		return c.fail(err)
	}
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
			i, err := leafIndex(*top, seek)
			if err != nil {
				return c.fail(err)
			}
			top.i = i
			return c.here(true)
		}
		i, err := branchIndex(*top, seek)
		if err != nil {
			return c.fail(err)
		}
		top.i = i
		if err := c.push(branchChild(top.p, i), false); err != nil {
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
// collection small enough to sit inline in its parent's page.
func (db *DB) directChunk(h Handle, r *Run, max int, dst []Item) (out []Item, ok bool, err error) {
	n, out, ok := len(dst), dst, true
	err = db.directView(func(btx *bolt.Tx) error {
		root, exists, err := recordsRoot(btx, h)
		switch {
		case err != nil:
			return err
		case !exists:
			r.Done = true // read as an empty collection, as the full path does
			return nil
		case root == 0:
			ok = false
			return nil
		}
		if !r.planned {
			if err := r.plan(nil, nil, nil); err != nil {
				return err
			}
		}
		if r.left <= 0 || r.mode != modeIDs {
			r.Done = true
			return nil
		}
		cur := newPageCursor(newPageReader(btx), root)
		out = r.nextIDsOn(cur, min(max, r.left), dst)
		if cur.err != nil {
			return fmt.Errorf("collection %q: %w", h.Name, cur.err)
		}
		return nil
	})
	if err != nil {
		r.Done = true
		return dst[:n], true, err
	}
	return out, ok, nil
}

var _ kv.Cursor = (*pageCursor)(nil)
