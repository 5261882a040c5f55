package postgres

import (
	"bytes"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh/kv"
)

// Read-ahead: a cursor fetches rows in pages, the first of firstPage rows
// after a jump (First, Last, Seek), each following one in the same
// direction twice as large up to maxPage, and smaller when rows are large
// so that a page stays near pageBytes.
const (
	firstPage = 16
	maxPage   = 512
	pageBytes = 1 << 20
)

// Where a cursor is.
const (
	unset   = iota // never moved: Next and Prev find nothing, as on bbolt
	onKey          // on k (which may have been deleted since)
	pastEnd        // after the last key: a Seek beyond it, or an empty bucket
)

// cursor is a kv.Cursor. Its position is the last key it returned, so
// writes between moves are seen: each fetch sends the bucket's buffered
// writes first and asks for the keys after (or before) that one. The rows
// read ahead are dropped when a write of the transaction lands among
// them (see bucket.wrote).
type cursor struct {
	b     *bucket
	state int
	k, v  []byte

	// ahead are rows fetched beyond k in direction dir (+1 ascending, -1
	// descending), in the order the cursor will meet them; end means the
	// fetch reached the end of the bucket in that direction.
	ahead   []row
	dir     int
	end     bool
	next    int  // size of the next page in direction dir
	hint    int  // size of the first page after a jump; 0 is firstPage
	watched bool // listed in b.cursors

	// ranged confines the cursor to the keys from lo to hi (see Range).
	ranged bool
	lo, hi []byte
}

type row struct{ k, v []byte }

var (
	_ kv.Cursor    = (*cursor)(nil)
	_ kv.ReadAhead = (*cursor)(nil)
	_ kv.Lasting   = (*cursor)(nil)
	_ kv.Ranger    = (*cursor)(nil)
)

// Range confines the cursor to the keys from lo to hi (see kv.Ranger).
// Rows read ahead are dropped; the cursor stays on its key.
func (c *cursor) Range(lo, hi []byte) {
	c.drop()
	c.ranged = lo != nil || hi != nil
	c.lo, c.hi = append([]byte{}, lo...), hi
	if hi == nil {
		c.hi = beyondKeys
	} else {
		c.hi = append([]byte(nil), hi...)
	}
}

// beyondKeys sorts after every key a bucket can hold (a key is at most
// MaxKeySize bytes): the upper bound of a range that has none.
var beyondKeys = bytes.Repeat([]byte{0xff}, MaxKeySize+1)

// Lasting: keys and values are copied out of the connection's buffer
// into the transaction's arena, whose chunks are never reused.
func (c *cursor) Lasting() {}

// ReadAhead sets the size of the first page after the next jumps and
// turns: n keys, within 1 and maxPage.
func (c *cursor) ReadAhead(n int) { c.hint = max(1, min(n, maxPage)) }

func (c *cursor) First() ([]byte, []byte) { return c.jump(+1, sqlFirst) }
func (c *cursor) Last() ([]byte, []byte)  { return c.jump(-1, sqlLast) }

// The cursor's statements, picked from its bucket's when a batch is made,
// within its range or not.
type statement func(s *tableSQL, ranged bool) string

func sqlFirst(s *tableSQL, ranged bool) string { return pick(ranged, s.first, s.ranged.first) }
func sqlLast(s *tableSQL, ranged bool) string  { return pick(ranged, s.last, s.ranged.last) }
func sqlGE(s *tableSQL, ranged bool) string    { return pick(ranged, s.ge, s.ranged.ge) }
func sqlGT(s *tableSQL, ranged bool) string    { return pick(ranged, s.gt, s.ranged.gt) }
func sqlLT(s *tableSQL, ranged bool) string    { return pick(ranged, s.lt, s.ranged.lt) }

func pick(ranged bool, plain, within string) string {
	if ranged {
		return within
	}
	return plain
}

func (c *cursor) Seek(seek []byte) ([]byte, []byte) {
	if len(seek) == 0 {
		return c.First()
	}
	return c.jump(+1, sqlGE, seek)
}

func (c *cursor) Next() ([]byte, []byte) { return c.step(+1) }
func (c *cursor) Prev() ([]byte, []byte) { return c.step(-1) }

// Delete buffers the deletion of the key the cursor is on; the next Next
// moves to the key after it. A cursor on no key deletes nothing.
func (c *cursor) Delete() error {
	if err := c.b.writable("cursor delete"); err != nil {
		return err
	}
	if c.state != onKey {
		return nil
	}
	if c.v == nil {
		return fmt.Errorf("postgres: cursor delete %q: %w: it is a nested bucket", c.k, kv.ErrIncompatibleValue)
	}
	// The write is at the cursor, not ahead of it: what it read ahead
	// stays good.
	c.b.write(op{k: c.k, del: true})
	return nil
}

// jump moves to the first row query returns, reading a first page.
func (c *cursor) jump(dir int, query statement, args ...any) ([]byte, []byte) {
	c.drop()
	c.state, c.k, c.v, c.dir, c.next = unset, nil, nil, dir, firstPage
	if c.hint > 0 {
		c.next = c.hint
	}
	rows, ok := c.fetch(query, args...)
	if !ok {
		return nil, nil
	}
	if len(rows) == 0 {
		c.state = pastEnd
		return nil, nil
	}
	c.state = onKey
	return c.land(rows)
}

// step moves one key in direction dir.
func (c *cursor) step(dir int) ([]byte, []byte) {
	switch c.state {
	case unset:
		return nil, nil
	case pastEnd:
		if dir > 0 {
			return nil, nil
		}
		return c.jump(-1, sqlLast)
	}
	if c.dir == dir && (len(c.ahead) > 0 || c.end) {
		if !c.b.tx.readable() || c.b.deleted {
			return nil, nil
		}
		if len(c.ahead) == 0 {
			return nil, nil // at the end; stay on the last key, as on bbolt
		}
		return c.land(c.ahead)
	}
	if c.dir != dir {
		c.dir, c.next = dir, firstPage
		if c.hint > 0 {
			c.next = c.hint
		}
	}
	c.drop()
	query := sqlGT
	if dir < 0 {
		query = sqlLT
	}
	rows, ok := c.fetch(query, c.k)
	if !ok || len(rows) == 0 {
		c.watch()
		return nil, nil
	}
	return c.land(rows)
}

// land moves onto rows[0] and keeps the rest as read ahead.
func (c *cursor) land(rows []row) ([]byte, []byte) {
	c.k, c.v = rows[0].k, rows[0].v
	c.ahead = rows[1:]
	if len(c.ahead) == 0 {
		c.ahead = nil
	}
	c.watch()
	return c.k, c.v
}

// fetch sends the bucket's buffered writes and reads the next page:
// query with args and the page size. It sets end and the size of the
// page after.
func (c *cursor) fetch(query statement, args ...any) ([]row, bool) {
	b, t := c.b, c.b.tx
	if !t.readable() || b.deleted {
		return nil, false
	}
	limit := c.next
	if c.ranged {
		args = append([]any{c.lo, c.hi}, args...)
	}
	args = append(args, limit)
	if avg := t.s.rowBytes.Load(); avg > 0 {
		n := int(avg) * limit
		t.arena.reserve(n + n/8)
	}
	var rows []row
	size := 0
	err := t.trip("cursor", func(batch *pgx.Batch) {
		b.queueFlush(batch)
		rows, size = nil, 0
		// The statement is b's as it is when the batch is made: a
		// subtree found changed moves b onto its table.
		batch.Queue(query(b.sql, c.ranged), args...).Query(func(r pgx.Rows) error {
			rows = make([]row, 0, limit)
			for r.Next() {
				k, v, err := scanRow(r, &t.arena, true)
				if err != nil {
					return err
				}
				rows = append(rows, row{k, v})
				size += len(k) + len(v)
			}
			return nil
		})
	})
	if err != nil {
		return nil, false
	}
	c.end = len(rows) < limit
	c.next = min(2*limit, maxPage)
	if len(rows) > 0 {
		avg := max(1, size/len(rows))
		t.s.rowBytes.Store(int64(avg))
		c.next = max(1, min(c.next, pageBytes/avg))
	}
	return rows, true
}

// watch lists the cursor with its bucket while it holds rows read ahead
// or knows it is at the end, which writes may change; drop forgets them.
func (c *cursor) watch() {
	switch need := len(c.ahead) > 0 || c.end; {
	case need && !c.watched:
		c.watched = true
		c.b.cursors = append(c.b.cursors, c)
	case !need && c.watched:
		c.unwatch()
	}
}

func (c *cursor) drop() {
	c.ahead, c.end = nil, false
	c.unwatch()
}

func (c *cursor) unwatch() {
	if !c.watched {
		return
	}
	c.watched = false
	cs := c.b.cursors
	for i := range cs {
		if cs[i] == c {
			cs[i] = cs[len(cs)-1]
			cs[len(cs)-1] = nil
			c.b.cursors = cs[:len(cs)-1]
			return
		}
	}
}

// staleAfter reports whether a write of key changes what the cursor read
// ahead: a key strictly beyond it in its direction, and within the rows
// read ahead unless those reach the end.
func (c *cursor) staleAfter(key []byte) bool {
	if bytes.Compare(key, c.k)*c.dir <= 0 {
		return false
	}
	if c.end || len(c.ahead) == 0 {
		return true
	}
	return bytes.Compare(key, c.ahead[len(c.ahead)-1].k)*c.dir <= 0
}
