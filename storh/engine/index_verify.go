package engine

import (
	"bytes"
	"fmt"

	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// ProblemIndex is a finding about a secondary index: an entry missing for a
// record, an entry without its record (or for a value the record no longer
// holds), two records sharing a value of a unique index, an entry counter
// that disagrees, or a definition that cannot be read.
const ProblemIndex ProblemKind = "index"

// checkIndexes checks every index of collection c both ways: each record
// (that the index covers: all of them once built) has every entry its
// values call for, and each entry belongs to a record that calls for it; a
// unique index holds each non-null value once; the entry counter is right.
// It returns the indexes that need rebuilding.
func checkIndexes(c *Coll, emit func(Problem)) []*collIndex {
	bad, _ := checkIndexesPaced(c, emit, nil) // a nil pace never stops
	return bad
}

// checkIndexesPaced is checkIndexes that stops with pace's error, part way
// through an index and without its counter check, when the context is done.
func checkIndexesPaced(c *Coll, emit func(Problem), pace *pace) ([]*collIndex, error) {
	all, err := c.indexes()
	if err != nil {
		emit(Problem{Kind: ProblemIndex, Collection: c.Name, Detail: trim(err)})
		return nil, nil
	}
	var bad []*collIndex
	for _, ix := range all {
		ok, err := checkIndex(c, ix, emit, pace)
		if err != nil {
			return nil, err
		}
		if !ok {
			bad = append(bad, ix)
		}
	}
	return bad, nil
}

// maxIndexProblems bounds the findings reported per index: past it the
// index needs rebuilding anyway.
const maxIndexProblems = 100

func checkIndex(c *Coll, ix *collIndex, emit func(Problem), pace *pace) (bool, error) {
	problems := 0
	report := func(id uuidv7.UUID, key []byte, format string, args ...any) {
		problems++
		if problems <= maxIndexProblems {
			p := Problem{Kind: ProblemIndex, Collection: c.Name, ID: id, Detail: fmt.Sprintf("index %q: ", ix.name) + fmt.Sprintf(format, args...)}
			if id.IsZero() && key != nil {
				p.Key = bytes.Clone(key)
			}
			emit(p)
		}
	}
	// Every record the index covers has all its entries.
	var expected, missingEntries int64
	var buf []byte
	var keys [][]byte
	cur := c.records.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if err := pace.step(len(v)); err != nil {
			return false, err
		}
		var id uuidv7.UUID
		if len(k) != len(id) || v == nil {
			continue // not a record: checkColl reports it
		}
		copy(id[:], k)
		if !ix.maintains(id) {
			continue
		}
		payload, err := Payload(k, v)
		if err != nil {
			continue // a damaged record: checkColl reports it
		}
		var err2 error
		buf, keys, _, err2 = ix.entryKeys(buf[:0], keys[:0], payload, id)
		if err2 != nil {
			report(id, nil, "the record's values cannot be indexed: %v", trim(err2))
			continue
		}
		for _, key := range keys {
			expected++
			if !hasKey(ix.entries, key) {
				missingEntries++
				report(id, nil, "no entry for the record's value (key %x)", key)
			}
		}
	}
	// Every entry belongs to a record that calls for it, and a unique index
	// holds each value once. Counting first keeps the common, healthy case
	// to one walk: when every expected entry is there, the index holds a
	// stray exactly when it holds more entries than expected.
	var actual int64
	var prevValue []byte
	var prevID uuidv7.UUID
	ec := ix.entries.Cursor()
	for k, _ := ec.First(); k != nil; k, _ = ec.Next() {
		if err := pace.step(0); err != nil {
			return false, err
		}
		actual++
		if len(k) < 18 || (k[0] != entryWhole && k[0] != entryElement) {
			report(uuidv7.UUID{}, k, "an entry key of an unknown shape")
			continue
		}
		id := keyID(k)
		value := k[:len(k)-16]
		if ix.def.Unique && k[0] == entryWhole && prevValue != nil && bytes.Equal(value, prevValue) && !nullWhole(c, ix, id) {
			report(id, nil, "unique, but record %s holds the same value", prevID)
		}
		prevValue, prevID = append(prevValue[:0], value...), id
	}
	if actual != expected || missingEntries > 0 {
		if err := findStrays(c, ix, report, pace); err != nil {
			return false, err
		}
	}
	if ix.def.Entries != actual {
		report(uuidv7.UUID{}, nil, "the definition counts %d entries, the index holds %d", ix.def.Entries, actual)
	}
	return problems == 0, nil
}

// hasKey is Get for a key that may hold an empty value (bbolt's Get cannot
// tell an empty value from a missing key).
func hasKey(b kv.Bucket, key []byte) bool {
	k, _ := b.Cursor().Seek(key)
	return k != nil && bytes.Equal(k, key)
}

// nullWhole reports whether the record id's values for ix include null (or
// a missing field), which a unique index does not constrain.
func nullWhole(c *Coll, ix *collIndex, id uuidv7.UUID) bool {
	v := c.records.Get(id[:])
	if v == nil {
		return false
	}
	payload, err := Payload(id[:], v)
	if err != nil {
		return false
	}
	_, _, null, err := ix.entryKeys(nil, nil, payload, id)
	return err == nil && null
}

// findStrays reports the entries whose record is gone, or whose record's
// values no longer call for them.
func findStrays(c *Coll, ix *collIndex, report func(uuidv7.UUID, []byte, string, ...any), pace *pace) error {
	var buf []byte
	var keys [][]byte
	ec := ix.entries.Cursor()
	for k, _ := ec.First(); k != nil; k, _ = ec.Next() {
		if err := pace.step(0); err != nil {
			return err
		}
		if len(k) < 18 {
			continue
		}
		id := keyID(k)
		v := c.records.Get(id[:])
		if v == nil {
			report(id, nil, "an entry for a record that does not exist")
			continue
		}
		if !ix.maintains(id) {
			report(id, nil, "an entry past the build's progress")
			continue
		}
		payload, err := Payload(id[:], v)
		if err != nil {
			continue
		}
		buf, keys, _, err = ix.entryKeys(buf[:0], keys[:0], payload, id)
		if err == nil && !containsKey(keys, k) {
			report(id, nil, "an entry for a value the record does not hold (key %x)", k)
		}
	}
	return nil
}

// rebuildIndex empties an index and builds it again from the records, in
// the caller's transaction, checking pace's context between build steps
// (every buildBatch records).
func (t *Tx) rebuildIndex(c *Coll, ix *collIndex, pace *pace) error {
	entries := c.root.Bucket(bucketIndexEntries)
	if err := entries.DeleteBucket([]byte(ix.name)); err != nil {
		return mapStoreErr(err)
	}
	b, err := entries.CreateBucket([]byte(ix.name))
	if err != nil {
		return mapStoreErr(err)
	}
	b.SetFillPercent(indexFillPercent)
	ix.entries = b
	ix.def.Entries, ix.delta = 0, 0
	ix.def.Building, ix.def.Mark, ix.def.Built, ix.changed = true, nil, 0, true
	for ix.def.Building {
		if err := pace.check(); err != nil {
			return err
		}
		if _, err := t.buildStep(c, ix, buildBatch); err != nil {
			return err
		}
	}
	return nil
}
