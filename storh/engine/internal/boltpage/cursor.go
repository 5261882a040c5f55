package boltpage

import (
	"fmt"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/kv"
)

// Cursor walks the leaves of one tree in a read transaction's mapping in
// key order, as bbolt's cursor does in a read transaction. It is a
// kv.Cursor, so a scan runs over it unchanged. Damage it meets (a page
// outside the file, an element outside its page, a tree deeper than bbolt
// writes) ends the walk as the end of the keys would, and is kept in Err:
// the reader must look at it when the walk stops.
//
// It does not check that keys ascend: a leaf level damaged so that the
// walk comes back to pages it passed is caught by Check beforehand, or by
// a caller that checks the order of the keys as it walks (the engine's
// scans do; CheckSearchPaths does not read the leaves of large trees).
type Cursor struct {
	r    Reader
	root uint64
	// path holds the pages from the root to the current leaf, each at
	// the element the walk is on; empty off either end.
	path []pageAt
	err  error

	inline [6]pageAt // path's first storage: trees this deep hold billions of keys
}

// NewCursor walks the tree rooted at page root of r.
func NewCursor(r Reader, root uint64) *Cursor {
	c := &Cursor{r: r, root: root}
	c.path = c.inline[:0]
	return c
}

// Err is the damage that ended the walk, or nil.
func (c *Cursor) Err() error { return c.err }

// fail ends the walk with err (the first damage it met is the one kept).
func (c *Cursor) fail(err error) ([]byte, []byte) {
	if c.err == nil {
		c.err = err
	}
	c.path = c.path[:0]
	return nil, nil
}

// push reads page id onto the path, at its first element or, with last,
// its last.
func (c *Cursor) push(id uint64, last bool) error {
	if len(c.path) == maxDepth {
		return fmt.Errorf("%w: a tree deeper than %d pages", errs.ErrCorrupt, maxDepth)
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
func (c *Cursor) descend(last bool) error {
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
func (c *Cursor) here(forward bool) ([]byte, []byte) {
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
func (c *Cursor) elem(top *pageAt) ([]byte, []byte) {
	k, v, err := leafElem(top, top.i)
	if err != nil {
		return c.fail(err)
	}
	return k, v
}

func (c *Cursor) First() ([]byte, []byte) { return c.end(false) }
func (c *Cursor) Last() ([]byte, []byte)  { return c.end(true) }

func (c *Cursor) end(last bool) ([]byte, []byte) {
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
func (c *Cursor) Seek(seek []byte) ([]byte, []byte) {
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
func (c *Cursor) Next() ([]byte, []byte) {
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
func (c *Cursor) Prev() ([]byte, []byte) {
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
func (c *Cursor) Delete() error { return kv.ErrTxNotWritable }

var _ kv.Cursor = (*Cursor)(nil)
