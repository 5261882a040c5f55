package engine

import (
	"bytes"

	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Reads of many records at once. On a store whose reads are round trips
// (PostgreSQL), a record read alone costs one: an index walk that reads
// the record of each entry, or a deletion that reads each record's value
// before it removes it and its index entries, spent two trips per record,
// which held a background sweep to a few thousand records a second. Read
// together, the records of a chunk cost one trip; on a file, where a read
// is a lookup in the memory map, they are read one by one as before.

// fetchGroup bounds the records one round trip reads where nothing is
// known of their size yet: the most a chunk returns (ChunkRecords), so
// that the bytes read past chunkBytes before a chunk stops are at most
// one such group's. Later groups of a chunk are sized from the records
// read before them, up to what the chunk may still take.
const fetchGroup = ChunkRecords

// deleteChunk is the chunk a deletion reads at a time on a store whose
// reads are round trips: a chunk costs two of them (the index or records
// walked, the records read), and with ChunkRecords records to a chunk
// they took about as long as the server's work on its records.
const deleteChunk = 4 * ChunkRecords

// DeleteChunk is how many records a deletion (DeleteMatching, an expiry
// sweep) reads per Run.Next in this transaction: more than a read's
// chunk where each costs round trips, which a deletion's own bound on a
// transaction's records keeps from growing long.
func (c *Coll) DeleteChunk() int {
	if c.pipe != nil {
		return deleteChunk
	}
	return ChunkRecords
}

// groupFor is how many records the next group of a chunk reads, when the
// chunk has taken taken records of size bytes and may take left more.
func groupFor(taken, size, left int) int {
	if taken == 0 || size == 0 {
		return min(left, fetchGroup)
	}
	avg := size/taken + 1
	return max(1, min(left, (chunkBytes-size)/avg+1))
}

// storedMany returns the stored values of ids, index by index (nil: not
// stored), in one round trip where the store pipelines reads. Like
// stored, it takes no row lock.
func (c *Coll) storedMany(ids []uuidv7.UUID) [][]byte {
	if c.pipe == nil {
		values := make([][]byte, len(ids))
		for i, id := range ids {
			values[i] = c.stored(id)
		}
		return values
	}
	keys := make([][]byte, len(ids))
	for i := range ids {
		keys[i] = ids[i][:]
	}
	r := &kv.Read{Bucket: c.records, Op: kv.Get, Keys: keys}
	c.pipe.Pipeline(r)
	return r.Values
}

// currentMany is current of each of ids, index by index, reading those it
// must in one round trip where the store pipelines reads: beside other
// writers, the rows this transaction has not locked yet, locked together
// (in key order, as LockKeys takes them) and kept with the transaction.
func (c *Coll) currentMany(ids []uuidv7.UUID) [][]byte {
	if !c.shared {
		return c.storedMany(ids)
	}
	var missing [][]byte
	for i := range ids {
		if _, ok := c.rows[ids[i]]; !ok {
			missing = append(missing, ids[i][:])
		}
	}
	if len(missing) > 0 {
		got := c.records.(kv.RowLocker).LockKeys(missing, true)
		if c.rows == nil {
			c.rows = make(map[uuidv7.UUID][]byte, len(missing))
		}
		for i, k := range missing {
			c.rows[uuidv7.UUID(k)] = got[i]
		}
	}
	values := make([][]byte, len(ids))
	for i, id := range ids {
		values[i] = c.rows[id]
	}
	return values
}

// DeleteMany is Delete of each of ids in turn, and returns how many were
// stored and deleted: it reads their values, which it needs to remove
// their index entries, in one round trip where the store pipelines reads,
// instead of one per record. With still, it deletes only the records
// whose payload, as it reads it, still passes it: a deletion of what a
// condition selected in an earlier transaction leaves a record written
// since so that it no longer matches (Run.Matches). An id given twice is
// deleted once, as Delete called twice would. The deletions themselves
// are buffered as Delete's are.
func (t *Tx) DeleteMany(c *Coll, ids []uuidv7.UUID, still func(payload []byte) bool) (int, error) {
	if !t.ktx.Writable() {
		return 0, errs.ErrReadOnly
	}
	n := 0
	for len(ids) > 0 {
		group := ids[:min(len(ids), deleteChunk)]
		ids = ids[len(group):]
		olds := c.currentMany(group)
		var seen map[uuidv7.UUID]struct{}
		if len(group) > 1 {
			seen = make(map[uuidv7.UUID]struct{}, len(group))
		}
		for i, id := range group {
			old := olds[i]
			if seen != nil {
				if _, dup := seen[id]; dup {
					// Its first occurrence in the group deleted it, or
					// found it absent or no longer matching: this one
					// has nothing more to do.
					old = nil
				}
				seen[id] = struct{}{}
			}
			if old != nil && still != nil {
				if payload, err := Payload(id[:], old); err != nil || !still(payload) {
					continue
				}
			}
			deleted, err := t.deleteOld(c, id, old)
			if err != nil {
				return n, err
			}
			if deleted {
				n++
			}
		}
	}
	return n, nil
}

// Matches reports whether payload passes the run's condition (a run
// without one: any payload); a payload the condition cannot read does
// not.
func (r *Run) Matches(payload []byte) bool {
	if r.match == nil {
		return true
	}
	ok, err := r.match(payload)
	return err == nil && ok
}

// nextIndexGrouped is nextIndex on a store that pipelines reads: it
// walks the index for the keys of up to the records the chunk still has
// room for, reads those records in one round trip, and goes on while the
// chunk has room. A group is read whole, so the chunk may pass chunkBytes
// by one group's records; the walk's position is its last key, as one by
// one.
func (r *Run) nextIndexGrouped(c *Coll, w *keyWalk, cur kv.Cursor, max int, dst []Item) ([]Item, error) {
	// The walk reads the index ahead by what the chunk may take (and the
	// key that ends it), not in pages that grow from a few: one trip for
	// the keys of a chunk whose entries all match, as for its records.
	if ra, ok := cur.(kv.ReadAhead); ok {
		ra.ReadAhead(max + 1)
	}
	start := len(dst)
	taken, size, examined := 0, 0, 0
	ids := make([]uuidv7.UUID, 0, min(max, deleteChunk))
	for !r.Done && taken < max && examined < ChunkExamined && size < chunkBytes {
		ids = ids[:0]
		for group := groupFor(taken, size, max-taken); len(ids) < group && examined < ChunkExamined; {
			k := w.next(cur)
			if k == nil {
				r.Done = true
				break
			}
			examined++
			r.Stats.KeysRead++
			id := keyID(k)
			if !r.inIDs(id) || (r.spec.Order != nil && !r.inCursors(w.seqKey(k))) {
				continue
			}
			ids = append(ids, id)
		}
		err := r.readGroup(c, ids, func(item Item) error {
			if item.Err == nil && len(r.spec.Order) > 1 {
				// As nextIndex: a record written since the plan whose
				// order path goes through a list fails the query.
				var err error
				if r.orderK, err = orderKey(r.orderK[:0], item.Payload, r.spec.Order); err != nil {
					return err
				}
			}
			dst = append(dst, item)
			taken++
			size += len(item.Payload)
			return nil
		})
		if err != nil {
			return dst, err
		}
	}
	ownPayloads(dst[start:], r.reuse)
	r.took(dst[len(dst)-taken:])
	return dst, nil
}

// gatherWalk is gather's walk of one index scan: the records of up to
// fetchGroup new candidates read together (in one round trip where the
// store pipelines reads; one by one from a file's memory map), until the
// walk ends or *budget keys were examined.
func (r *Run) gatherWalk(c *Coll, w *keyWalk, cur kv.Cursor, budget *int) error {
	if ra, ok := cur.(kv.ReadAhead); ok {
		ra.ReadAhead(*budget + 1)
	}
	ids := make([]uuidv7.UUID, 0, fetchGroup)
	for ended := false; !ended && *budget > 0; {
		ids = ids[:0]
		for ; *budget > 0 && len(ids) < fetchGroup; *budget-- {
			k := w.next(cur)
			if k == nil {
				ended = true
				break
			}
			r.Stats.KeysRead++
			id := keyID(k)
			if !r.inIDs(id) {
				continue
			}
			if _, dup := r.seen[id]; dup {
				continue
			}
			r.seen[id] = struct{}{}
			ids = append(ids, id)
		}
		err := r.readGroup(c, ids, func(item Item) error {
			if item.Err == nil {
				item.Payload = bytes.Clone(item.Payload)
			}
			return r.consider(item)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// readGroup reads the records of ids together (storedMany) and gives each
// that is stored and passes the run's condition to each, in order; an
// index entry without its record is passed over (Verify reports it).
func (r *Run) readGroup(c *Coll, ids []uuidv7.UUID, each func(Item) error) error {
	if len(ids) == 0 {
		return nil
	}
	values := c.storedMany(ids)
	for i, id := range ids {
		if values[i] == nil {
			continue
		}
		r.Stats.RecordsRead++
		if item, keep := readItem(id, id[:], values[i], r.match); keep {
			if err := each(item); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReadNow reports whether the items the last Next returned were read by
// that call, in the transaction it ran in, as they were stored there: a
// run that streams (by id, or in an index's order) reads each chunk as it
// returns it, where a collecting run may return payloads it kept from an
// earlier chunk, read in an earlier transaction (see emit).
func (r *Run) ReadNow() bool { return r.mode != modeCollect }

// DeleteRead is DeleteMany of the records of items, which Next returned
// to the caller in this transaction with ReadNow true and which nothing in
// the transaction has written since: holding the collection alone, the
// transaction acts on them as they were read, so their payloads serve to
// remove their index entries, and no read of them is made again (on
// PostgreSQL, a round trip per chunk). Beside other writers, whose rows a
// deletion must lock, and for an item that is an unreadable record (Err
// set), it reads them as DeleteMany does. An id given twice is deleted
// once.
func (t *Tx) DeleteRead(c *Coll, items []Item) (int, error) {
	if !t.ktx.Writable() {
		return 0, errs.ErrReadOnly
	}
	var again []uuidv7.UUID // read as DeleteMany reads them
	seen := make(map[uuidv7.UUID]struct{}, len(items))
	n := 0
	for _, it := range items {
		if _, dup := seen[it.ID]; dup {
			continue
		}
		seen[it.ID] = struct{}{}
		if c.shared || it.Err != nil {
			again = append(again, it.ID)
			continue
		}
		if err := t.deleteStored(c, it.ID, nil, it.Payload, true, int64(HeaderSize+len(it.Payload))); err != nil {
			return n, err
		}
		n++
	}
	if len(again) > 0 {
		more, err := t.DeleteMany(c, again, nil)
		n += more
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
