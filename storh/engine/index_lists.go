package engine

import (
	"errors"
	"slices"

	"github.com/storhdb/storh-go/storh/internal/errs"
)

// upgradeLists brings a store up to formatLists when this build opens it
// for writing. An index on a dotted path made before reads its path
// through maps only (indexDef.Lists unset), so queries cannot use it; it
// is emptied and made again, building, in the transaction that raises the
// format, so that no storh from before opens the store once it may hold
// entries made through lists. Its records are then indexed in bounded
// transactions (buildIndexes), as for an index declared over records:
// queries skip it until it is complete, writes in between keep the part
// already built, and other processes on the same PostgreSQL store join the
// build where its mark stands. keyListsBuild stays in the metadata until
// every such build is done, so an open after a crash finishes them.
//
// An index the records no longer allow (a unique one whose records share a
// value only through lists, a compound one whose record goes through
// lists on two of its paths) is dropped, as a declaration of it over those
// records would be: the collection's next open that declares it fails with
// the error that names the record. A collection too damaged to open is
// left for Verify and Repair, and the upgrade tries it again at the next
// open for writing.
func (db *DB) upgradeLists() error {
	building, skipped, err := db.startLists()
	if err != nil || len(building) == 0 {
		return err
	}
	for _, name := range building {
		for {
			err := db.buildIndexes(Handle{Name: name})
			if errors.Is(err, errs.ErrUniqueViolation) || errors.Is(err, errs.ErrInvalidIndex) {
				continue // that index is dropped; build the others
			}
			// A damaged record (ErrCorrupt) leaves the index building,
			// unused, for the collection's open to report as it would
			// before this build, and Repair to quarantine.
			if err != nil && !errors.Is(err, errs.ErrCorrupt) {
				return err
			}
			break
		}
	}
	if skipped {
		return nil
	}
	return db.UpdateSafe(func(tx *Tx) error {
		return mapStoreErr(tx.ktx.Bucket(dbMetaBucket).Delete(keyListsBuild))
	})
}

// startLists is upgradeLists' first transaction: it raises the format and
// makes every index read through lists, and returns the collections with
// an index to build, and whether it skipped a damaged collection.
func (db *DB) startLists() (building []string, skipped bool, err error) {
	err = db.UpdateSafe(func(tx *Tx) error {
		building, skipped = building[:0], false
		// Rewriting a definition is no reason to fold or chain a blocked
		// index now: that is left to its next write or EnsureIndexes.
		tx.folding = true
		meta := tx.ktx.Bucket(dbMetaBucket)
		if getInt(meta, keyFormat) >= formatLists && meta.Get(keyListsBuild) == nil {
			return nil // another process has done it since Open looked
		}
		var names []string
		cur := tx.ktx.Cursor()
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			if v == nil && validateName(string(k)) == nil {
				names = append(names, string(k))
			}
		}
		for _, name := range names {
			// A look that leaves the collection out of the transaction
			// (Tx.Coll enlists it): one with nothing to do is not
			// written, nor checked again at the commit.
			var all []*collIndex
			err := tx.damaged(name)
			if err == nil {
				var look *Coll
				if look, err = openColl(tx.ktx, name); look != nil {
					all, err = look.indexes()
				}
			}
			if errors.Is(err, errs.ErrCorrupt) {
				skipped = true
				continue
			}
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(all, func(ix *collIndex) bool { return ix.mapsOnly() || ix.def.Building }) {
				continue
			}
			c, err := tx.Coll(name, 0, false)
			if err != nil {
				return err
			}
			b, err := tx.indexThroughLists(c)
			if errors.Is(err, errs.ErrCorrupt) {
				skipped = true
				continue
			}
			if err != nil {
				return err
			}
			if b {
				building = append(building, name)
			}
		}
		if err := tx.needFormat(formatLists); err != nil {
			return err
		}
		if len(building) > 0 || skipped {
			return mapStoreErr(meta.Put(keyListsBuild, []byte{1}))
		}
		return mapStoreErr(meta.Delete(keyListsBuild))
	})
	return building, skipped, err
}

// indexThroughLists makes every index of c read its paths through lists,
// and reports whether one of them is building. One on a dotted path made
// before is dropped and declared again, empty and building. One on single
// fields only is left as it is, Lists unset: its entries are the same
// either way (entryKeys reads a first segment alike), and a collection
// that has nothing else to change is not written at all.
func (t *Tx) indexThroughLists(c *Coll) (building bool, err error) {
	all, err := c.indexes()
	if err != nil {
		return false, err
	}
	for _, ix := range slices.Clone(all) { // DropIndex edits c's list
		if ix.mapsOnly() {
			spec := ix.spec()
			if err := t.DropIndex(c, ix.name); err != nil {
				return false, err
			}
			if ix, err = t.createIndex(c, spec); err != nil {
				return false, err
			}
		}
		building = building || ix.def.Building
	}
	return building, nil
}
