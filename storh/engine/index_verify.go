package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/storhdb/storh-go/storh/engine/internal/blockindex"
	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/tune"

	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// checkIndexes checks every index of collection c both ways: each record
// (that the index covers: all of them once built) has every entry its
// values call for, and each entry belongs to a record that calls for it; a
// unique index holds each non-null value once; the entry counter is right.
// It returns the indexes that need rebuilding.
func checkIndexes(c *Coll, emit func(api.Problem)) []*collIndex {
	bad, _ := checkIndexesPaced(c, emit, nil) // a nil pace never stops
	return bad
}

// checkIndexesPaced is checkIndexes that stops with pace's error, part way
// through an index and without its counter check, when the context is done.
func checkIndexesPaced(c *Coll, emit func(api.Problem), pace *pace) ([]*collIndex, error) {
	all, err := c.indexes()
	if err != nil {
		emit(api.Problem{Kind: api.ProblemIndex, Collection: c.Name, Detail: trim(err)})
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

func checkIndex(c *Coll, ix *collIndex, emit func(api.Problem), pace *pace) (bool, error) {
	problems := 0
	report := func(id uuidv7.UUID, key []byte, format string, args ...any) {
		problems++
		if problems <= maxIndexProblems {
			p := api.Problem{Kind: api.ProblemIndex, Collection: c.Name, ID: id, Detail: fmt.Sprintf("index %q: ", ix.name) + fmt.Sprintf(format, args...)}
			if id.IsZero() && key != nil {
				p.Key = bytes.Clone(key)
			}
			emit(p)
		}
	}
	if ix.mapsOnly() && !tune.PreLists { // a build from before keeps such indexes
		report(uuidv7.UUID{}, nil, "made before paths went through lists, it reads its dotted paths through maps only, so queries do not use it (the next open for writing rebuilds it, and so does Repair)")
	}
	if ix.def.Layout == layoutBlocks {
		// Blocks and journal first: the entries below are read through them.
		if err := checkBlocked(ix, report, pace); err != nil || problems > 0 {
			return false, err
		}
	}
	probe, err := ix.cursor()
	if err != nil {
		report(uuidv7.UUID{}, nil, "%v", trim(err))
		return false, nil
	}
	// Every record the index covers has all its entries, and a unique
	// index's claims are its non-null values, each the first holder's.
	var expected, missingEntries int64
	var buf []byte
	var keys [][]byte
	var claims map[string]uuidv7.UUID
	if ix.def.Claims {
		claims = map[string]uuidv7.UUID{}
	}
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
		var wholes, nulls int
		buf, keys, wholes, nulls, err2 = ix.entryKeys(buf[:0], keys[:0], payload, id)
		if err2 != nil {
			report(id, nil, "the record's values cannot be indexed: %v", trim(err2))
			continue
		}
		for _, whole := range keys[nulls:wholes] {
			if value := string(wholeValue(whole)); claims != nil {
				if _, taken := claims[value]; !taken {
					claims[value] = id
				}
			}
		}
		for _, key := range keys {
			expected++
			if k, _ := probe.Seek(key); k == nil || !bytes.Equal(k, key) {
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
	var prevValue, prevKey []byte
	var prevID uuidv7.UUID
	ec, err := ix.cursor()
	if err != nil {
		return false, err
	}
	for k, _ := ec.First(); k != nil; k, _ = ec.Next() {
		if err := pace.step(0); err != nil {
			return false, err
		}
		actual++
		if prevKey != nil && bytes.Compare(prevKey, k) >= 0 {
			report(uuidv7.UUID{}, k, "an entry key out of order")
			break // a walk that goes back could go round for ever
		}
		prevKey = append(prevKey[:0], k...)
		if len(k) < 18 || (k[0] != entryWhole && k[0] != entryElement && k[0] != entryFanned) {
			report(uuidv7.UUID{}, k, "an entry key of an unknown shape")
			continue
		}
		id := keyID(k)
		value := k[:len(k)-16]
		if ix.def.Unique && k[0] == entryWhole && prevValue != nil && bytes.Equal(value, prevValue) && constrains(c, ix, id, value) {
			report(id, nil, "unique, but record %s holds the same value", prevID)
		}
		prevValue, prevID = append(prevValue[:0], value...), id
	}
	if actual != expected || missingEntries > 0 {
		if err := findStrays(c, ix, report, pace); err != nil {
			return false, err
		}
	}
	if n := c.entryCount(ix); n != actual {
		report(uuidv7.UUID{}, nil, "the definition and its counter slots count %d entries, the index holds %d", n, actual)
	}
	if _, bad := entrySlotSum(c.slotRows(), ix.name); len(bad) > 0 {
		report(uuidv7.UUID{}, nil, "counter slot %x is not %d bytes", bad[0], entrySlotSize)
	}
	if claims != nil {
		if err := checkClaims(ix, claims, report, pace); err != nil {
			return false, err
		}
	}
	if c.failed != nil {
		report(uuidv7.UUID{}, nil, "%v", trim(c.failed))
		c.failed = nil // reported: the collection's other checks go on
	}
	return problems == 0, nil
}

// checkBlocked checks a blocked index's own structure, its blocks and
// journal (blockindex.Check), against its definition.
func checkBlocked(ix *collIndex, report func(uuidv7.UUID, []byte, string, ...any), pace *pace) error {
	d := &ix.def
	state := blockindex.State{Chained: d.Chained, Seq: d.Seq, Floor: d.Floor, FoldTo: d.FoldTo, Pending: d.Pending}
	return blockindex.Check(ix.entries, ix.journal, state, func(key []byte, format string, args ...any) {
		report(uuidv7.UUID{}, key, format, args...)
	}, pace.step)
}

// constrains reports whether the whole entry value (without its id) is
// one of record id's values that unique index ix constrains: not null, not
// missing.
func constrains(c *Coll, ix *collIndex, id uuidv7.UUID, value []byte) bool {
	v := c.records.Get(id[:])
	if v == nil {
		return false
	}
	payload, err := Payload(id[:], v)
	if err != nil {
		return false
	}
	_, keys, wholes, nulls, err := ix.entryKeys(nil, nil, payload, id)
	return err == nil && containsValue(keys[nulls:wholes], value)
}

// findStrays reports the entries whose record is gone, or whose record's
// values no longer call for them.
func findStrays(c *Coll, ix *collIndex, report func(uuidv7.UUID, []byte, string, ...any), pace *pace) error {
	var buf []byte
	var keys [][]byte
	ec, err := ix.cursor()
	if err != nil {
		return err
	}
	var prev []byte
	for k, _ := ec.First(); k != nil; k, _ = ec.Next() {
		if err := pace.step(0); err != nil {
			return err
		}
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			return nil // reported by checkIndex
		}
		prev = append(prev[:0], k...)
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
		buf, keys, _, _, err = ix.entryKeys(buf[:0], keys[:0], payload, id)
		if err == nil && !containsKey(keys, k) {
			report(id, nil, "an entry for a value the record does not hold (key %x)", k)
		}
	}
	return nil
}

// rebuildIndex empties an index and builds it again from the records, in
// the caller's transaction, checking pace's context between build steps
// (every tune.IndexBuildBatch records). A blocked index is rebuilt as packed blocks
// with an empty journal, under a new incarnation, so no view of its old
// journal is used again.
func (t *Tx) rebuildIndex(c *Coll, ix *collIndex, pace *pace) error {
	b, err := recreateBucket(c.root.Bucket(bucketIndexEntries), ix.name)
	if err != nil {
		return err
	}
	ix.entries = b
	ix.def.Entries, ix.delta = 0, 0
	if err := c.deleteSlots(entrySlotKey(ix.name, nil)); err != nil {
		return err
	}
	if ix.def.Claims {
		if ix.claims, err = recreateBucket(c.root.Bucket(bucketIndexClaims), ix.name); err != nil {
			return err
		}
		ix.claimed = nil
	}
	ix.def.Building, ix.def.Mark, ix.def.Built, ix.def.Lists, ix.changed = true, nil, 0, true, true
	if ix.def.Layout == layoutBlocks {
		journals, err := c.root.CreateBucketIfNotExists(bucketIndexJournal)
		if err != nil {
			return mapStoreErr(err)
		}
		if ix.journal, err = recreateBucket(journals, ix.name); err != nil {
			return err
		}
		d := &ix.def
		d.Inc, d.Floor, d.Pending, d.FoldTo, d.FoldNext = rand.Uint64()|1, d.Seq, 0, 0, nil
		d.Chained, d.ChainNext = true, nil
		if err := t.needFormat(formatChained); err != nil {
			return err
		}
		ix.base.Seq, ix.base.Floor = d.Seq, d.Seq
		ix.view, ix.viewDone, ix.pend, ix.flushed, ix.folded = nil, false, nil, nil, false
		if c.mems != nil {
			c.mems.drop(c.Name, ix.name)
		}
		// The entries are collected, sorted and written as packed blocks.
		ix.collect, ix.unique = [][]byte{}, nil
		defer func() { ix.collect, ix.unique = nil, nil }()
	}
	ix.setFill()
	for ix.def.Building {
		if err := pace.check(); err != nil {
			return err
		}
		if _, err := t.buildStep(c, ix, tune.IndexBuildBatch); err != nil {
			return err
		}
	}
	if ix.collect == nil {
		return nil
	}
	slices.SortFunc(ix.collect, bytes.Compare)
	slices.SortFunc(ix.unique, bytes.Compare)
	for i := 1; i < len(ix.unique); i++ {
		a, b := ix.unique[i-1], ix.unique[i]
		if bytes.Equal(a[:len(a)-16], b[:len(b)-16]) {
			held, other := keyID(a), keyID(b)
			payload, err := Payload(held[:], c.records.Get(held[:]))
			if err != nil {
				return err
			}
			return errUnique(ix, payload, other)
		}
	}
	return mapStoreErr(blockindex.WriteBlocks(ix.entries, ix.collect))
}

// checkJournaledViews compares, for each blocked index of c, the entries
// this transaction reads (through the DB's views of the journals) with
// those the file holds (blocks and journal records decoded afresh), after
// flush: the invariant checks run it at every commit, so a view that
// drifted from its journal is caught where it happened.
func checkJournaledViews(c *Coll) error {
	for _, ix := range c.idx {
		if ix.def.Layout != layoutBlocks {
			continue
		}
		mem, err := ix.cursor()
		if err != nil {
			return err
		}
		file, err := blockindex.ReadView(ix.journal, ix.def.Floor, ix.def.Seq)
		if err != nil {
			return err
		}
		disk := blockindex.NewCursor(ix.blockCursor(), file.Source(ix.def.Seq))
		mk, _ := mem.First()
		dk, _ := disk.First()
		for mk != nil || dk != nil {
			if !bytes.Equal(mk, dk) {
				return fmt.Errorf("index %q: the view reads entry %x where the file holds %x", ix.name, mk, dk)
			}
			mk, _ = mem.Next()
			dk, _ = disk.Next()
		}
	}
	return c.failed
}

// recreateBucket replaces the bucket name inside parent with an empty one.
func recreateBucket(parent kv.Bucket, name string) (kv.Bucket, error) {
	if err := parent.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, kv.ErrBucketNotFound) {
		return nil, mapStoreErr(err)
	}
	b, err := parent.CreateBucket([]byte(name))
	return b, mapStoreErr(err)
}
