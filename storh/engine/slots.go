package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"

	"github.com/storhdb/storh-go/storh/internal/api"

	"github.com/storhdb/storh-go/storh/kv"
)

// Counter slots. A transaction that holds a collection beside other
// writers (HoldRows, HoldMoving) never rewrites the collection's counters,
// which every such writer would have to lock in turn: it adds its changes
// to slots of its DB's own in the collection's metadata bucket, with
// kv.Adder (an addition on the server, without a read), and a count is
// the base counter plus every slot:
//
//	"cs:" ‖ slot                  records and their bytes: two 8-byte deltas
//	"xs:" ‖ index ‖ 0x00 ‖ slot   an index's entries: one
//	"qs:" ‖ slot                  a queue's jobs, by state: four
//
// slot is 8 random bytes drawn when the DB opens (DB.slotKey), so no two
// DBs add to one key. A transaction that holds the collection alone and
// changes its counters folds every slot into the base counters and deletes
// it, so that slots stay as few as the DBs that wrote since; the slots of
// a file, which only a copy of a shared store gives it, wait for Repair
// (a queue's are folded too). bbolt never writes one.
var (
	collSlotPrefix  = []byte("cs:")
	entrySlotPrefix = []byte("xs:")
)

// collSlotSize is a record slot's value; an entry slot's is 8 bytes.
const (
	collSlotSize  = 16
	entrySlotSize = 8
)

// isSlot reports whether a metadata key is a counter slot.
func isSlot(k []byte) bool {
	return bytes.HasPrefix(k, collSlotPrefix) || bytes.HasPrefix(k, entrySlotPrefix) || bytes.HasPrefix(k, jobSlotPrefix)
}

// slotID is the tail of this DB's slot keys (drawn here for a transaction
// outside a DB).
func (c *Coll) slotID() []byte {
	if c.slotKey == nil {
		c.slotKey = binary.BigEndian.AppendUint64(bytes.Clone(jobSlotPrefix), rand.Uint64())
	}
	return c.slotKey[len(jobSlotPrefix):]
}

// entrySlotKey is the key of index name's entry slot ending in id.
func entrySlotKey(name string, id []byte) []byte {
	k := append(bytes.Clone(entrySlotPrefix), name...)
	return append(append(k, 0), id...)
}

// entrySlotIndex is the index an entry slot key counts for.
func entrySlotIndex(k string) string {
	k = strings.TrimPrefix(k, string(entrySlotPrefix))
	if len(k) < 9 || k[len(k)-9] != 0 {
		return ""
	}
	return k[:len(k)-9]
}

// ints is deltas as a slot value.
func ints(deltas ...int64) []byte {
	v := make([]byte, 0, 8*len(deltas))
	for _, d := range deltas {
		v = binary.BigEndian.AppendUint64(v, uint64(d))
	}
	return v
}

// flushSlots adds the counter changes of a transaction that held c beside
// other writers to this DB's slots, and writes the queue's sequence, whose
// row it holds locked (nextSeq).
func (c *Coll) flushSlots() error {
	adder, ok := c.meta.(kv.Adder)
	if !ok {
		return errNoAdder
	}
	id := c.slotID()
	if c.countDelta != 0 || c.bytesDelta != 0 {
		if err := adder.Add(append(bytes.Clone(collSlotPrefix), id...), ints(c.countDelta, c.bytesDelta)); err != nil {
			return mapStoreErr(err)
		}
		c.countDelta, c.bytesDelta = 0, 0
	}
	for _, ix := range c.idx {
		if ix.delta != 0 {
			if err := adder.Add(entrySlotKey(ix.name, id), ints(ix.delta)); err != nil {
				return mapStoreErr(err)
			}
			ix.delta = 0
		}
	}
	if d := c.jobDelta; d != [5]int64{} {
		if err := adder.Add(c.slotKey, ints(d[api.JobPending], d[api.JobClaimed], d[api.JobDone], d[api.JobDead])); err != nil {
			return mapStoreErr(err)
		}
		c.jobDelta = [5]int64{}
	}
	if c.jobSeq >= 0 {
		var err error
		if seq := ints(c.jobSeq); c.seqFresh {
			err = c.meta.(kv.Inserter).Insert(keyJobSeq, seq)
		} else {
			err = c.meta.Put(keyJobSeq, seq)
		}
		if err != nil {
			return mapStoreErr(err)
		}
		c.jobSeq, c.seqFresh = -1, false
	}
	return nil
}

// errNoAdder is a store whose writers run at once without kv.Adder: the
// engine cannot keep counters beside them.
var errNoAdder = errors.New("storh: internal error: a shared store's bucket cannot add to counters (kv.Adder)")

// countersChanged reports whether the transaction changed c's counters.
func (c *Coll) countersChanged() bool {
	if c.countDelta != 0 || c.bytesDelta != 0 || c.jobDelta != [5]int64{} || c.jobSeq >= 0 {
		return true
	}
	for _, ix := range c.idx {
		if ix.delta != 0 || ix.changed {
			return true
		}
	}
	return false
}

// foldSlots moves, in a transaction that holds c alone and changes its
// counters, the counter slots into the changes it writes to the base
// counters, and deletes them. A slot of the wrong size is left for Verify
// to report; one of an index that is gone is deleted.
func (c *Coll) foldSlots() error {
	if !c.countersChanged() || !c.remote && c.Kind != KindQueue {
		return nil
	}
	rows := c.slotRows()
	for _, k := range sortedKeys(rows) {
		key, v := []byte(k), rows[k]
		switch {
		case bytes.HasPrefix(key, collSlotPrefix) && len(v) == collSlotSize:
			c.countDelta += int64(binary.BigEndian.Uint64(v))
			c.bytesDelta += int64(binary.BigEndian.Uint64(v[8:]))
		case bytes.HasPrefix(key, entrySlotPrefix) && len(v) == entrySlotSize:
			ix, err := c.index(entrySlotIndex(k))
			if err != nil {
				return err
			}
			if ix != nil {
				ix.delta += int64(binary.BigEndian.Uint64(v))
			}
		case bytes.HasPrefix(key, jobSlotPrefix) && len(v) == jobSlotSize:
			addSlot(&c.jobDelta, v)
		default:
			continue
		}
		if err := c.meta.Delete(key); err != nil {
			return mapStoreErr(err)
		}
		delete(rows, k)
	}
	c.slotCount, c.slotBytes, c.slotsRead = 0, 0, true
	return nil
}

// deleteSlots deletes the slots among c's whose keys start with prefix.
func (c *Coll) deleteSlots(prefix []byte) error {
	rows := c.slotRows()
	for k := range rows {
		if strings.HasPrefix(k, string(prefix)) {
			if err := c.meta.Delete([]byte(k)); err != nil {
				return mapStoreErr(err)
			}
			delete(rows, k)
		}
	}
	if bytes.Equal(prefix, collSlotPrefix) {
		c.slotCount, c.slotBytes, c.slotsRead = 0, 0, true
	}
	return nil
}

// collSlotSum adds up the record slots among rows, and lists those of the
// wrong size.
func collSlotSum(rows map[string][]byte) (sum [2]int64, bad []string) {
	for _, k := range sortedKeys(rows) {
		if !strings.HasPrefix(k, string(collSlotPrefix)) {
			continue
		}
		v := rows[k]
		if len(v) != collSlotSize {
			bad = append(bad, k)
			continue
		}
		sum[0] += int64(binary.BigEndian.Uint64(v))
		sum[1] += int64(binary.BigEndian.Uint64(v[8:]))
	}
	return sum, bad
}

// entrySlotSum adds up index name's entry slots among rows, and lists
// those of the wrong size.
func entrySlotSum(rows map[string][]byte, name string) (sum int64, bad []string) {
	for _, k := range sortedKeys(rows) {
		if !strings.HasPrefix(k, string(entrySlotPrefix)) || entrySlotIndex(k) != name {
			continue
		}
		if v := rows[k]; len(v) == entrySlotSize {
			sum += int64(binary.BigEndian.Uint64(v))
		} else {
			bad = append(bad, k)
		}
	}
	return sum, bad
}

// slotRows returns the collection's counter slots as this transaction
// sees them: read with the metadata on a remote store; read now on a
// local one, which has none unless it was copied from a shared store.
func (c *Coll) slotRows() map[string][]byte {
	if c.remote {
		c.loadMeta()
		if c.slots == nil {
			c.slots = map[string][]byte{}
		}
		return c.slots
	}
	return readSlotRows(c.meta)
}

// readSlotRows reads the counter slots of a metadata bucket now.
func readSlotRows(meta kv.Bucket) map[string][]byte {
	rows := map[string][]byte{}
	cur := meta.Cursor()
	for _, prefix := range [][]byte{collSlotPrefix, jobSlotPrefix, entrySlotPrefix} {
		for k, v := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = cur.Next() {
			rows[string(k)] = bytes.Clone(v)
		}
	}
	return rows
}
