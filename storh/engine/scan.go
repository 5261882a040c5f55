package engine

import (
	"bytes"
	"fmt"
	"sync"

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
)

// Matcher filters payloads; nil matches everything.
type Matcher func(payload []byte) (bool, error)

// scanColl scans c from cur inside the caller's transaction, appending up
// to max items (and examining at most maxExamined keys) to dst, and advances
// cur; examined counts the keys it looked at. Payloads are copied, so items
// outlive the transaction (into *reuse, when given: see ownPayloads).
func scanColl(c *Coll, cur *Cursor, match Matcher, max, maxExamined int, dst []Item, examined *int, reuse *[]byte) []Item {
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
	// Payloads alias the transaction's memory during the walk; finish
	// copies them all into one allocation of exactly their size when it
	// stops (a backend whose values outlive the transaction needs no copy),
	// and moves the cursor's open end past the last key taken, once.
	_, lasting := bc.(kv.Lasting)
	start := len(dst)
	var last uuidv7.UUID
	walked := false
	finish := func(dst []Item) []Item {
		if walked && !advance(cur, last) {
			cur.Done = true
		}
		if !lasting || reuse != nil {
			ownPayloads(dst[start:], reuse)
		}
		return dst
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
		if backwards(cur, k, walked, last) {
			// A damaged page put this key out of order. It is reported,
			// and the resume point stays where it is: moving it back
			// would walk the same keys again.
			item = Item{ID: id, Err: errOutOfOrder}
		} else {
			last, walked = id, true
			if cur.Reverse && id == cur.Lo || !cur.Reverse && id == cur.Hi {
				cur.Done = true // the range's last key
			}
			item, keep = readItem(id, k, v, match)
		}
		if keep {
			dst = append(dst, item)
			taken++
			size += len(item.Payload)
		}
		if cur.Done || taken >= max || *examined >= maxExamined || size >= ChunkBytes {
			return finish(dst)
		}
	}
	cur.Done = true
	return finish(dst)
}

// ownPayloads copies the payloads of items, which alias a transaction's
// memory, into one allocation of their total size: one allocation per
// chunk, none wasted, and every item's bytes its own to keep. With reuse it
// copies them into *reuse instead, grown when too small: the payloads are
// then valid only until the buffer is reused.
func ownPayloads(items []Item, reuse *[]byte) {
	total := 0
	for i := range items {
		total += len(items[i].Payload)
	}
	if total == 0 {
		return
	}
	if reuse == nil {
		// bytes.Join allocates exactly the total without zeroing it
		// first, which a make would: every byte is overwritten at once.
		parts := partsPool.Get().(*[][]byte)
		for i := range items {
			*parts = append(*parts, items[i].Payload)
		}
		arena := bytes.Join(*parts, nil)
		clear(*parts)
		*parts = (*parts)[:0]
		partsPool.Put(parts)
		for i := range items {
			if n := len(items[i].Payload); n > 0 {
				items[i].Payload, arena = arena[:n:n], arena[n:]
			}
		}
		return
	}
	arena := (*reuse)[:0]
	if cap(arena) < total {
		arena = make([]byte, 0, total)
	}
	for i := range items {
		if p := items[i].Payload; p != nil {
			start := len(arena)
			arena = append(arena, p...)
			items[i].Payload = arena[start:len(arena):len(arena)]
		}
	}
	*reuse = arena
}

// partsPool holds ownPayloads' lists of the payloads to join.
var partsPool = sync.Pool{New: func() any {
	p := make([][]byte, 0, ChunkRecords)
	return &p
}}

func step(c kv.Cursor, reverse bool) ([]byte, []byte) {
	if reverse {
		return c.Prev()
	}
	return c.Next()
}

// errOutOfOrder is the error of a key a walk meets out of order.
var errOutOfOrder = fmt.Errorf("%w: the database file is damaged: a key out of order; run Verify", ErrCorrupt)

// backwards reports whether record key k lies behind the cursor's open
// end, where a healthy walk never goes: before the range's start, or, once
// the walk has taken a key (walked), not past the last one taken. Keys
// that are not 16 bytes are reported by readItem and skipped here.
func backwards(cur *Cursor, k []byte, walked bool, last uuidv7.UUID) bool {
	if len(k) != len(cur.Lo) {
		return false
	}
	switch {
	case walked && cur.Reverse:
		return bytes.Compare(k, last[:]) >= 0
	case walked:
		return bytes.Compare(k, last[:]) <= 0
	case cur.Reverse:
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
// whose payload aliases v.
func readItem(id uuidv7.UUID, k, v []byte, match Matcher) (Item, bool) {
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
	return Item{ID: id, Payload: payload[:len(payload):len(payload)]}, true
}
