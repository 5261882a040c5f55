package blockindex

import (
	"bytes"
	"math"
	"slices"

	"github.com/tidwall/btree"
)

// Cursor walks the entries of a blocked index as one transaction sees
// them: its blocks, merged with the journal's changes up to the
// transaction's snapshot and then with the transaction's own changes. A
// key's newest change decides whether it is there; a deleted key is
// skipped. It has the moves of a kv.Cursor; after a move returns nil, only
// First, Last or Seek may follow (the engine's walks never do otherwise).
// A key it returns is valid until its next move.
//
// Most keys of a walk come from the blocks, with the changes far apart:
// the blocks are a cursor of their own, so that a step is one comparison
// with the nearest change. The sources on the current key stay on it (the
// key returned is theirs, not a copy) and move at the next move.
type Cursor struct {
	blocks   *BlockCursor
	bk       []byte   // the blocks' entry; nil: none
	ops      []Source // in rising precedence: journal, flushed, own changes
	fwd      bool
	key      []byte // the key the cursor is on; nil: none
	onBlocks bool   // the blocks are on key
	onOps    uint32 // bit i: ops[i] is on key
	buf      []byte

	// below: walking forward, the blocks' entry is below the nearest
	// change, the two sharing their first same bytes; while only the
	// blocks step, what an entry shares with the one before tells how it
	// compares without comparing (see settle).
	below bool
	same  int
}

func NewCursor(blocks *BlockCursor, ops ...Source) *Cursor {
	return &Cursor{blocks: blocks, ops: ops}
}

// Source is one sorted run of changes: a source's current key and
// whether it deletes that key, after each move.
type Source interface {
	first()
	last()
	seek(k []byte)
	next()
	prev()
	current() (key []byte, del bool)
}

func (m *Cursor) First() ([]byte, []byte) {
	m.below = false
	m.bk, _ = m.blocks.First()
	for _, s := range m.ops {
		s.first()
	}
	m.fwd = true
	return m.settle(), nil
}

func (m *Cursor) Last() ([]byte, []byte) {
	m.below = false
	m.bk, _ = m.blocks.Last()
	for _, s := range m.ops {
		s.last()
	}
	m.fwd = false
	return m.settle(), nil
}

func (m *Cursor) Seek(k []byte) ([]byte, []byte) {
	m.below = false
	m.bk, _ = m.blocks.Seek(k)
	for _, s := range m.ops {
		s.seek(k)
	}
	m.fwd = true
	return m.settle(), nil
}

// Next moves past the current key: the sources on it step forward; after a
// move backward, each is put on its first key after it instead.
func (m *Cursor) Next() ([]byte, []byte) {
	if m.key == nil {
		return nil, nil
	}
	if m.fwd {
		m.stepOn()
		return m.settle(), nil
	}
	key := append(m.buf[:0], m.key...) // the sources' keys move with them
	m.buf, m.below = key, false
	if m.bk, _ = m.blocks.Seek(key); m.bk != nil && bytes.Equal(m.bk, key) {
		m.bk, _ = m.blocks.Next()
	}
	for _, s := range m.ops {
		s.seek(key)
		if k, _ := s.current(); k != nil && bytes.Equal(k, key) {
			s.next()
		}
	}
	m.fwd = true
	return m.settle(), nil
}

// Prev moves before the current key: the sources on it step back; after a
// move forward, each is put on its last key below it instead.
func (m *Cursor) Prev() ([]byte, []byte) {
	if m.key == nil {
		return nil, nil
	}
	if !m.fwd {
		m.stepOn()
		return m.settle(), nil
	}
	key := append(m.buf[:0], m.key...)
	m.buf, m.below = key, false
	if m.bk, _ = m.blocks.Seek(key); m.bk == nil {
		m.bk, _ = m.blocks.Last()
	} else {
		m.bk, _ = m.blocks.Prev()
	}
	for _, s := range m.ops {
		s.seek(key)
		if k, _ := s.current(); k == nil {
			s.last()
		} else {
			s.prev()
		}
	}
	m.fwd = false
	return m.settle(), nil
}

// stepOn moves the sources on the current key one step on.
func (m *Cursor) stepOn() {
	if m.onBlocks {
		if m.fwd {
			m.bk, _ = m.blocks.Next()
		} else {
			m.bk, _ = m.blocks.Prev()
		}
	}
	if m.onOps != 0 {
		m.below = false // the nearest change moves
		for i, s := range m.ops {
			if m.onOps&(1<<i) != 0 {
				if m.fwd {
					s.next()
				} else {
					s.prev()
				}
			}
		}
	}
	m.onBlocks, m.onOps = false, 0
}

// nearest returns the change nearest in the walk's direction among the
// sources (-1: none) and the sources on its key: on a tie, the latest
// source's change counts.
func (m *Cursor) nearest() (best int, ok []byte, on uint32) {
	best = -1
	for i, s := range m.ops {
		k, _ := s.current()
		if k == nil {
			continue
		}
		if best < 0 {
			best, ok, on = i, k, 1<<i
			continue
		}
		c := bytes.Compare(k, ok)
		if !m.fwd {
			c = -c
		}
		switch {
		case c < 0:
			best, ok, on = i, k, 1<<i
		case c == 0:
			best, on = i, on|1<<i
		}
	}
	return best, ok, on
}

// settle puts the cursor on the next key in its direction that some source
// holds and whose newest change is not a delete, and returns it.
func (m *Cursor) settle() []byte {
	for {
		// The nearest change: of the changes on one key, the latest
		// source's counts.
		best := -1
		var ok []byte
		var on uint32 // bit i: source i is on ok
		if len(m.ops) == 1 {
			if ok, _ = m.ops[0].current(); ok != nil {
				best, on = 0, 1
			}
		} else {
			best, ok, on = m.nearest()
		}
		c := -1 // the blocks' entry, compared with the change: before it
		switch {
		case best < 0 && m.bk == nil:
			m.key = nil
			return nil
		case best < 0:
		case m.bk == nil:
			c = 1
		case !m.fwd:
			c = -bytes.Compare(m.bk, ok)
		case m.below && m.blocks.shared >= 0:
			// The entry before was below the change, sharing same bytes
			// with it. An entry sharing more with it differs from the
			// change where that one did; sharing less, it is above it
			// where that one matched it.
			switch s := m.blocks.shared; {
			case s > m.same:
				c = -1
			case s < m.same:
				c = 1
			default:
				c, m.same = compareFrom(m.bk, ok, s)
			}
		default:
			c, m.same = compareFrom(m.bk, ok, 0)
		}
		m.below = m.fwd && c < 0
		if c < 0 {
			m.key, m.onBlocks, m.onOps = m.bk, true, 0
			return m.key
		}
		// The change is about this key (and the blocks' entry, on a tie).
		m.key, m.onBlocks, m.onOps = ok, c == 0, on
		if _, del := m.ops[best].current(); !del {
			return m.key
		}
		m.stepOn()
	}
}

func (m *Cursor) Delete() error { return (*BlockCursor)(nil).Delete() }

// Err returns the first damage the blocks' cursor met (BlockCursor.Err).
func (m *Cursor) Err() error { return m.blocks.err }

// opSource is a tree of changes seen up to sequence upto: of each key,
// the newest change at or below upto counts, and a key with none is not
// there. The iterator stands on the first change not looked at yet in the
// direction of the last move (fwd).
type opSource struct {
	it    btree.IterG[ixOp]
	upto  uint64
	fwd   bool
	valid bool // it stands on a change
	key   []byte
	del   bool
}

func newOpSource(t *opTree, upto uint64) *opSource {
	return &opSource{it: t.Iter(), upto: upto}
}

func (s *opSource) first() {
	s.valid, s.fwd = s.it.First(), true
	s.forward()
}

func (s *opSource) last() {
	s.valid, s.fwd = s.it.Last(), false
	s.backward()
}

func (s *opSource) seek(k []byte) {
	s.valid, s.fwd = s.it.Seek(ixOp{key: k, seq: math.MaxUint64}), true
	s.forward()
}

func (s *opSource) next() {
	if !s.fwd {
		if s.key == nil {
			s.first()
			return
		}
		// Turning round: past every change of the current key (seq 0 sorts
		// after them all; no change has it).
		s.valid, s.fwd = s.it.Seek(ixOp{key: s.key, seq: 0}), true
	}
	s.forward()
}

func (s *opSource) prev() {
	if s.fwd {
		if s.key == nil {
			s.last()
			return
		}
		// Turning round: before the current key's newest change.
		if s.it.Seek(ixOp{key: s.key, seq: math.MaxUint64}) {
			s.valid = s.it.Prev()
		} else {
			s.valid = s.it.Last()
		}
		s.fwd = false
	}
	s.backward()
}

func (s *opSource) current() ([]byte, bool) { return s.key, s.del }

// forward takes the next key with a change at or below upto: a key's
// changes come newest first, so its first such change is the one.
func (s *opSource) forward() {
	for s.valid {
		k := s.it.Item().key
		found := false
		for s.valid && bytes.Equal(s.it.Item().key, k) {
			if op := s.it.Item(); !found && op.seq <= s.upto {
				found, s.key, s.del = true, op.key, op.del
			}
			s.valid = s.it.Next()
		}
		if found {
			return
		}
	}
	s.key, s.del = nil, false
}

// backward takes the previous key with a change at or below upto: walking
// back, a key's changes come oldest first, so its last such change is the
// one.
func (s *opSource) backward() {
	for s.valid {
		k := s.it.Item().key
		found := false
		for s.valid && bytes.Equal(s.it.Item().key, k) {
			if op := s.it.Item(); op.seq <= s.upto {
				found, s.key, s.del = true, op.key, op.del
			}
			s.valid = s.it.Prev()
		}
		if found {
			return
		}
	}
	s.key, s.del = nil, false
}

// segSource reads the segments of a view as one sorted run: of each key,
// the change with the highest sequence at or below upto counts (a
// segment holds a key's changes newest first), and a key with none is
// not there. pos holds, per segment, the next change to look at in the
// direction of the last move (fwd): its index going forward, the index
// after it going back.
type segSource struct {
	segs []*Segment
	upto uint64
	pos  []int
	fwd  bool
	key  []byte
	del  bool
}

func newSegSource(v *View, upto uint64) *segSource {
	return &segSource{segs: v.segs, upto: upto, pos: make([]int, len(v.segs))}
}

// lowerBound returns the index of the first change of s at or after k,
// upperBound of the first after it.
func lowerBound(s *Segment, k []byte) int { return bound(s, k, 0) }
func upperBound(s *Segment, k []byte) int { return bound(s, k, 1) }

// bound returns the index of the first change of s whose key compares with
// k above past (0: at or after k, 1: after it).
func bound(s *Segment, k []byte, past int) int {
	lo, hi := 0, s.len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(s.key(m), k) < past {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (s *segSource) first() {
	clear(s.pos)
	s.fwd = true
	s.forward()
}

func (s *segSource) last() {
	for i, seg := range s.segs {
		s.pos[i] = seg.len()
	}
	s.fwd = false
	s.backward()
}

func (s *segSource) seek(k []byte) {
	for i, seg := range s.segs {
		s.pos[i] = lowerBound(seg, k)
	}
	s.fwd = true
	s.forward()
}

func (s *segSource) next() {
	if !s.fwd {
		if s.key == nil {
			s.first()
			return
		}
		for i, seg := range s.segs {
			s.pos[i] = upperBound(seg, s.key)
		}
		s.fwd = true
	}
	s.forward()
}

func (s *segSource) prev() {
	if s.fwd {
		if s.key == nil {
			s.last()
			return
		}
		for i, seg := range s.segs {
			s.pos[i] = lowerBound(seg, s.key)
		}
		s.fwd = false
	}
	s.backward()
}

func (s *segSource) current() ([]byte, bool) { return s.key, s.del }

// forward takes the smallest key at the segments' positions that has a
// change the transaction sees, moving each segment past that key.
func (s *segSource) forward() {
	for {
		var k []byte
		for i, seg := range s.segs {
			if p := s.pos[i]; p < seg.len() {
				if pk := seg.key(p); k == nil || bytes.Compare(pk, k) < 0 {
					k = pk
				}
			}
		}
		if k == nil {
			s.key, s.del = nil, false
			return
		}
		found, best := false, uint64(0)
		for i, seg := range s.segs {
			for p := s.pos[i]; p < seg.len() && bytes.Equal(seg.key(p), k); p++ {
				if op := seg.ops[p]; op.seq <= s.upto && (!found || op.seq > best) {
					found, best, s.del = true, op.seq, op.del
				}
				s.pos[i] = p + 1
			}
		}
		if found {
			s.key = k
			return
		}
	}
}

// backward takes the largest key before the segments' positions that has
// a change the transaction sees, moving each segment before that key.
func (s *segSource) backward() {
	for {
		var k []byte
		for i, seg := range s.segs {
			if p := s.pos[i] - 1; p >= 0 {
				if pk := seg.key(p); k == nil || bytes.Compare(pk, k) > 0 {
					k = pk
				}
			}
		}
		if k == nil {
			s.key, s.del = nil, false
			return
		}
		found, best := false, uint64(0)
		for i, seg := range s.segs {
			for p := s.pos[i] - 1; p >= 0 && bytes.Equal(seg.key(p), k); p-- {
				if op := seg.ops[p]; op.seq <= s.upto && (!found || op.seq > best) {
					found, best, s.del = true, op.seq, op.del
				}
				s.pos[i] = p
			}
		}
		if found {
			s.key = k
			return
		}
	}
}

// flatSource is a view flattened (View.flatten): changes in key order,
// one per key.
type flatSource struct {
	ops []ixOp
	i   int // -1 or len(ops): off the ends
}

func (s *flatSource) first() { s.i = 0 }
func (s *flatSource) last()  { s.i = len(s.ops) - 1 }
func (s *flatSource) seek(k []byte) {
	s.i, _ = slices.BinarySearchFunc(s.ops, k, func(op ixOp, k []byte) int { return bytes.Compare(op.key, k) })
}
func (s *flatSource) next() { s.i = min(s.i+1, len(s.ops)) }
func (s *flatSource) prev() { s.i = max(s.i-1, -1) }

func (s *flatSource) current() ([]byte, bool) {
	if s.i < 0 || s.i >= len(s.ops) {
		return nil, false
	}
	return s.ops[s.i].key, s.ops[s.i].del
}

// compareFrom compares a and b, which share their first from bytes, and
// returns the length of the prefix they share.
func compareFrom(a, b []byte, from int) (c, same int) {
	same = from + sharedPrefix(a[from:], b[from:])
	switch {
	case same < len(a) && same < len(b):
		if a[same] < b[same] {
			return -1, same
		}
		return 1, same
	case len(a) < len(b):
		return -1, same
	case len(a) > len(b):
		return 1, same
	}
	return 0, same
}
