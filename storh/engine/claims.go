package engine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Claims. A unique index tells a value taken by seeking its entries with
// that value, which only a writer holding the collection alone may trust:
// beside it, another writer may be inserting the same value. So on a store
// whose writers run at once a unique index (one key per entry) also keeps
// a claim per non-null value, in a bucket of its own:
//
//	"u"/<index>/  whole value key (the entry key without its id) → record id
//
// A writer beside others inserts the claim of a value its record takes
// (kv.Inserter): the table's primary key refuses a second claim of it,
// which fails the transaction with kv.ErrConflict; its next run is careful
// (Tx.careful) and looks the claim up first, so the loser gets
// ErrUniqueViolation, never a duplicate; a run that rolls back sends its
// claims first, and runs again the same way when one was taken
// (blindConflict). A claim is deleted or moved with
// its record, whose row the writer holds locked. Writers holding the
// collection alone keep the claims too, and an index made before claims
// gets them from the first writer that would write beside others
// (rowsReady). Verify checks them; Repair rebuilds them with the index.

// claim is what a transaction did with a value's claim: made it for id,
// or gave it up.
type claim struct {
	id   uuidv7.UUID
	held bool
}

// wholeValue is the value part of a whole entry key: the key without the
// record id, which the claims are keyed by.
func wholeValue(whole []byte) []byte { return whole[:len(whole)-16] }

// uniqueHolder returns the record, other than self, that holds the value
// of the whole entry key in unique index ix, if one does.
func (t *Tx) uniqueHolder(c *Coll, ix *collIndex, whole []byte, self uuidv7.UUID) (uuidv7.UUID, bool, error) {
	if !c.shared {
		return ix.conflict(whole, self)
	}
	value := wholeValue(whole)
	if cl, ok := ix.claimed[string(value)]; ok {
		return cl.id, cl.held && cl.id != self, nil
	}
	if !t.careful {
		// Inserted blind: a claim another record holds fails the commit,
		// and the careful run looks it up.
		return uuidv7.UUID{}, false, nil
	}
	v := ix.claims.Get(value)
	switch {
	case v == nil:
		return uuidv7.UUID{}, false, t.failure()
	case len(v) != 16:
		return uuidv7.UUID{}, false, fmt.Errorf("%w: index %q of collection %q: a claim of %d bytes, not a record id (Repair rebuilds the index)", errs.ErrCorrupt, ix.name, c.Name, len(v))
	}
	other := uuidv7.UUID(v)
	return other, other != self, nil
}

// moveClaims moves record id's claims in ix from the values of the whole
// entry keys olds to those of news.
func (ix *collIndex) moveClaims(c *Coll, olds, news [][]byte, id uuidv7.UUID) error {
	for _, o := range olds {
		if containsValue(news, wholeValue(o)) {
			continue
		}
		if ix.claimed == nil {
			ix.claimed = make(map[string]claim, 2)
		}
		old := wholeValue(o)
		if err := ix.claims.Delete(old); err != nil {
			return mapStoreErr(err)
		}
		ix.claimed[string(old)] = claim{}
	}
	for _, n := range news {
		if containsValue(olds, wholeValue(n)) {
			continue
		}
		if ix.claimed == nil {
			ix.claimed = make(map[string]claim, 2)
		}
		value := wholeValue(n)
		holder := append(c.scratch(16)[:0], id[:]...)
		var err error
		if _, known := ix.claimed[string(value)]; c.shared && !known {
			err = ix.claims.(kv.Inserter).Insert(value, holder)
			ix.inserted = true
		} else {
			err = ix.claims.Put(value, holder)
		}
		if err != nil {
			return mapStoreErr(err)
		}
		ix.claimed[string(value)] = claim{id: id, held: true}
	}
	return nil
}

// blindConflict sends the claims a run that rolls back inserted without
// looking them up (not careful), and returns the conflict they meet: a
// claim another record holds. A run that commits learns of it from its
// commit and runs again carefully, where the put meets the claim and fails
// with ErrUniqueViolation; one that rolls back would never learn of it,
// and its callback would have taken a refused put for a stored one. The
// conflict, left with the transaction, makes it run again too.
func (t *Tx) blindConflict() error {
	if t.careful {
		return nil
	}
	for _, c := range t.colls {
		for _, ix := range c.idx {
			if !ix.inserted {
				continue
			}
			for value := range ix.claimed {
				ix.claims.Get([]byte(value)) // a read sends the bucket's buffered writes first
				break
			}
		}
	}
	if err := t.failure(); errors.Is(err, kv.ErrConflict) {
		return err
	}
	return nil
}

// containsValue reports whether one of the whole entry keys holds value.
func containsValue(wholes [][]byte, value []byte) bool {
	for _, w := range wholes {
		if bytes.Equal(wholeValue(w), value) {
			return true
		}
	}
	return false
}

// buildClaims gives unique index ix, made before claims, its claims, in a
// transaction that holds the collection alone: one per non-null value of
// the records it covers (all of them: it is built). A value two records
// hold, which Verify reports, is claimed by the one with the smaller id.
func (t *Tx) buildClaims(c *Coll, ix *collIndex) error {
	root, err := c.root.CreateBucketIfNotExists(bucketIndexClaims)
	if err != nil {
		return mapStoreErr(err)
	}
	if ix.claims, err = recreateBucket(root, ix.name); err != nil {
		return err
	}
	var wholes [][]byte
	cur := c.records.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		var id uuidv7.UUID
		if len(k) != len(id) || v == nil {
			continue // not a record: Verify reports it
		}
		id = uuidv7.UUID(k)
		payload, err := Payload(k, v)
		if err != nil {
			continue // a damaged record: Verify reports it
		}
		if _, keys, n, nulls, err := ix.entryKeys(nil, nil, payload, id); err == nil {
			wholes = append(wholes, keys[nulls:n]...)
		}
	}
	if err := t.ktx.Err(); err != nil {
		return err
	}
	slices.SortFunc(wholes, bytes.Compare)
	var prev []byte
	for _, w := range wholes {
		value := wholeValue(w)
		if prev != nil && bytes.Equal(value, prev) {
			continue
		}
		prev = value
		if err := ix.claims.Put(value, w[len(value):]); err != nil {
			return mapStoreErr(err)
		}
	}
	ix.def.Claims, ix.changed = true, true
	return nil
}

// checkClaims compares unique index ix's claims with want, the claims its
// records call for.
func checkClaims(ix *collIndex, want map[string]uuidv7.UUID, report func(uuidv7.UUID, []byte, string, ...any), pace *pace) error {
	seen := 0
	cur := ix.claims.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if err := pace.step(0); err != nil {
			return err
		}
		holder, ok := want[string(k)]
		switch {
		case !ok:
			report(uuidv7.UUID{}, k, "a claim of a value no record holds")
		case !bytes.Equal(v, holder[:]):
			report(holder, nil, "the claim of the record's value names %x", v)
		default:
			seen++
		}
	}
	if seen < len(want) {
		report(uuidv7.UUID{}, nil, "%d of the records' values have no claim", len(want)-seen)
	}
	return nil
}
