package engine

import (
	"fmt"

	"github.com/storhdb/storh-go/storh/engine/internal/boltpage"

	bolt "go.etcd.io/bbolt"
)

// Ranged reads straight from the memory map. Every chunk of a run read
// through the collection paid three bucket opens (the collection's, its
// metadata's and its records'), a read of its kind and bbolt's cursor
// before the walk itself. A run over an id range with no condition and no
// field order needs none of the collection's metadata, so on bbolt it
// walks the records bucket's leaves from the root this commit has (the
// root point reads find: direct.go) with a cursor over the mapping
// (boltpage.Cursor), checked as it reads as the point read's search is. The same page of
// 100 went from 2.7x to about 1.4x a raw bbolt walk that copies each value
// (docs/benchmarks.md).

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
		cur := boltpage.NewCursor(boltpage.NewReader(btx), root)
		out = r.nextIDsOn(cur, min(max, r.left), dst)
		if err := cur.Err(); err != nil {
			return fmt.Errorf("collection %q: %w", h.Name, err)
		}
		return nil
	})
	if err != nil {
		r.Done = true
		return dst[:n], true, err
	}
	return out, ok, nil
}
