package engine

import (
	"slices"

	"github.com/storhdb/storh-go/storh/kv"
)

// What the storh front door's expiry (WithTTL, WithRetention and its
// background sweep) asks of a collection beyond reads and deletes.

// Incarnation tells this life of the collection from another of the same
// name made after it was dropped: the identity of its top-level bucket on
// a store whose buckets have one (kv.Identifier: PostgreSQL, where another
// process may drop and make the collection again), which is never handed
// to another bucket. It is 0 on a file, where the one writing process
// drops collections itself and knows it (DroppedSince).
//
// On PostgreSQL a bucket taken from the DB's cache is checked against the
// store in the transaction's first round trip: a transaction that read
// the identity of one that had changed fails (kv.ErrStale in a read, a
// conflict in a write) and runs again, so the identity a committed
// transaction saw is the collection's.
func (c *Coll) Incarnation() uint64 {
	if ider, ok := c.root.(kv.Identifier); ok {
		return ider.ID()
	}
	return 0
}

// DroppedSince reports whether this DB dropped h's collection after h was
// opened: a collection of that name found now was made again since, and
// is not the one h was opened on.
func (db *DB) DroppedSince(h Handle) bool { return db.droppedSince(h.Name, h.Epoch) }

// WalkableBy reports whether the collection has a ready index that leads
// with path and can be walked in its order (a query ordered by path is
// served by it, in batches that each read only what they return): for a
// path of one field, any such index; for a longer path, one where no
// record's values at path went through a list (the index's multikey mark
// for that path is absent: one seek), since an order by a path that goes
// through a list in some record fails the query when it meets it.
func (c *Coll) WalkableBy(path []string) (bool, error) {
	all, err := c.indexes()
	if err != nil {
		return false, err
	}
	for _, ix := range all {
		if ix.def.Building || ix.mapsOnly() || !slices.Equal(ix.def.Paths[0], path) {
			continue
		}
		if len(path) == 1 {
			return true, nil
		}
		fanned, err := ix.fanned()
		if err != nil {
			return false, err
		}
		if !fanned[0] {
			return true, nil
		}
	}
	return false, nil
}
