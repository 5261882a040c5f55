package engine

import (
	"bytes"
	"fmt"

	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Item is one record read by a scan: its id and its checked msgpack payload
// (owned by the caller), or the error that made it unreadable.
type Item struct {
	ID      uuidv7.UUID
	Payload []byte
	Err     error
}

// Cursor is the resumable position of a ranged scan over [Lo, Hi]. Each
// chunk narrows the range past the keys it examined, so the next chunk
// starts where the last one stopped, in a fresh transaction.
type Cursor struct {
	Lo, Hi  uuidv7.UUID
	Reverse bool
	Done    bool
}

// Chunk bounds: a chunk returns at most ChunkRecords records or ChunkBytes
// of payload (but always at least one record), and examines at most
// ChunkExamined keys, so a read transaction stays short and a chunk's memory
// stays bounded even for large records or a filter that rejects almost
// everything.
const (
	ChunkRecords  = 256
	ChunkBytes    = 1 << 20
	ChunkExamined = 4096
	chunkArena    = 64 << 10
)

// Matcher filters payloads; nil matches everything.
type Matcher func(payload []byte) (bool, error)

// scanColl scans c from cur inside the caller's transaction, appending up
// to max items (and examining at most maxExamined keys) to dst, and advances
// cur; examined counts the keys it looked at. Payloads are copied, so items
// outlive the transaction.
func scanColl(c *Coll, cur *Cursor, match Matcher, max, maxExamined int, dst []Item, examined *int) []Item {
	if cur.Done || max <= 0 {
		return dst
	}
	bc := c.records.Cursor()
	// On a backend that reads ahead, the keys it will walk: the records it
	// may take and the one that tells it the range ended (a filter may
	// need more). A reverse walk's Seek needs one key forward, then turns.
	readAhead := func(int) {}
	if ra, ok := bc.(kv.ReadAhead); ok {
		readAhead = ra.ReadAhead
	}
	// It reads no page past the range either: without a bound a window's
	// last page would run on to the page size.
	if r, ok := bc.(kv.Ranger); ok {
		r.Range(cur.Lo[:], cur.Hi[:])
	}
	var k, v []byte
	if cur.Reverse {
		readAhead(1)
		k, v = bc.Seek(cur.Hi[:])
		readAhead(max + 1)
		if k == nil {
			k, v = bc.Last()
		} else if bytes.Compare(k, cur.Hi[:]) > 0 {
			k, v = bc.Prev()
		}
	} else {
		readAhead(max + 1)
		k, v = bc.Seek(cur.Lo[:])
	}
	// Small reads (a Limit(1) lookup) should not pay for a full-size arena.
	// A backend whose values outlive the transaction needs none.
	var arena []byte
	var into *[]byte
	if _, lasting := bc.(kv.Lasting); !lasting {
		arena = make([]byte, 0, min(chunkArena, max*256))
		into = &arena
	}
	taken, size := 0, 0
	for ; k != nil; k, v = step(bc, cur.Reverse) {
		if cur.Reverse {
			if bytes.Compare(k, cur.Lo[:]) < 0 {
				break
			}
		} else if bytes.Compare(k, cur.Hi[:]) > 0 {
			break
		}
		var id uuidv7.UUID
		copy(id[:], k)
		*examined++
		var item Item
		keep := true
		if backwards(cur, k) {
			// A damaged page put this key out of order. It is reported,
			// and the resume point stays where it is: moving it back
			// would walk the same keys again.
			item = Item{ID: id, Err: errOutOfOrder}
		} else {
			if !advance(cur, id) {
				cur.Done = true
			}
			item, keep = readItem(id, k, v, match, into)
		}
		if keep {
			dst = append(dst, item)
			taken++
			size += len(item.Payload)
		}
		if cur.Done || taken >= max || *examined >= maxExamined || size >= ChunkBytes {
			return dst
		}
	}
	cur.Done = true
	return dst
}

func step(c kv.Cursor, reverse bool) ([]byte, []byte) {
	if reverse {
		return c.Prev()
	}
	return c.Next()
}

// errOutOfOrder is the error of a key a walk meets out of order.
var errOutOfOrder = fmt.Errorf("%w: the database file is damaged: a key out of order; run Verify", ErrCorrupt)

// backwards reports whether record key k lies behind the cursor's open end,
// where a healthy walk never goes. Keys that are not 16 bytes are reported
// by readItem and skipped here.
func backwards(cur *Cursor, k []byte) bool {
	if len(k) != len(cur.Lo) {
		return false
	}
	if cur.Reverse {
		return bytes.Compare(k, cur.Hi[:]) > 0
	}
	return bytes.Compare(k, cur.Lo[:]) < 0
}

// advance moves the cursor's open end past id; false when nothing is left.
func advance(cur *Cursor, id uuidv7.UUID) bool {
	if cur.Reverse {
		p, ok := plan.Prev(id)
		cur.Hi = p
		return ok && cur.Lo.Compare(p) <= 0
	}
	n, ok := plan.Next(id)
	cur.Lo = n
	return ok && n.Compare(cur.Hi) <= 0
}

// readItem checks record (k, v) and, if match keeps it, makes it an item
// whose payload is copied into arena, or kept as it is without one (a
// value that outlives its transaction: kv.Lasting).
func readItem(id uuidv7.UUID, k, v []byte, match Matcher, arena *[]byte) (Item, bool) {
	if len(k) != len(id) {
		return Item{ID: id, Err: fmt.Errorf("%w: key of %d bytes in a records bucket", ErrCorrupt, len(k))}, true
	}
	if v == nil {
		return Item{ID: id, Err: fmt.Errorf("%w: nested bucket in a records bucket", ErrCorrupt)}, true
	}
	payload, err := Payload(k, v)
	if err != nil {
		return Item{ID: id, Err: err}, true
	}
	if match != nil {
		ok, err := match(payload)
		if err != nil {
			return Item{ID: id, Err: fmt.Errorf("%w: %v", ErrCorrupt, err)}, true
		}
		if !ok {
			return Item{}, false
		}
	}
	if arena == nil {
		return Item{ID: id, Payload: payload[:len(payload):len(payload)]}, true
	}
	if len(payload) > chunkArena/4 {
		// Large records get their own allocation: in the arena they would
		// make it grow by doubling and pin every neighbour's memory.
		return Item{ID: id, Payload: append([]byte(nil), payload...)}, true
	}
	start := len(*arena)
	*arena = append(*arena, payload...)
	return Item{ID: id, Payload: (*arena)[start:len(*arena):len(*arena)]}, true
}
