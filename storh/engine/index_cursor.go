package engine

import (
	"bytes"
	"math"
	"slices"

	"github.com/tidwall/btree"

	"github.com/storhdb/storh-go/storh/kv"
)

// ixCursor walks the entries of a blocked index as one transaction sees
// them: its blocks, merged with the journal's changes up to the
// transaction's snapshot and then with the transaction's own changes. A
// key's newest change decides whether it is there; a deleted key is
// skipped. It has the moves of a kv.Cursor; after a move returns nil, only
// First, Last or Seek may follow (the engine's walks never do otherwise).
// A key it returns is valid until its next move.
type ixCursor struct {
	srcs []ixSource // in rising precedence: blocks, journal, own changes
	fwd  bool
	key  []byte // the key the cursor is on; nil: none
	buf  []byte // holds key
}

// ixSource is one sorted run of changes: a source's current key and
// whether it deletes that key, after each move.
type ixSource interface {
	first()
	last()
	seek(k []byte)
	next()
	prev()
	current() (key []byte, del bool)
}

func (m *ixCursor) First() ([]byte, []byte) {
	for _, s := range m.srcs {
		s.first()
	}
	m.fwd = true
	return m.settle(), nil
}

func (m *ixCursor) Last() ([]byte, []byte) {
	for _, s := range m.srcs {
		s.last()
	}
	m.fwd = false
	return m.settle(), nil
}

func (m *ixCursor) Seek(k []byte) ([]byte, []byte) {
	for _, s := range m.srcs {
		s.seek(k)
	}
	m.fwd = true
	return m.settle(), nil
}

// Next moves past the current key. Going forward, every source is already
// past it (settle moved the ones on it); after a move backward, each is
// put on its first key after it.
func (m *ixCursor) Next() ([]byte, []byte) {
	if m.key == nil {
		return nil, nil
	}
	if !m.fwd {
		for _, s := range m.srcs {
			s.seek(m.key)
			if k, _ := s.current(); k != nil && bytes.Equal(k, m.key) {
				s.next()
			}
		}
		m.fwd = true
	}
	return m.settle(), nil
}

// Prev moves before the current key, putting each source on its last key
// below it after a move forward.
func (m *ixCursor) Prev() ([]byte, []byte) {
	if m.key == nil {
		return nil, nil
	}
	if m.fwd {
		for _, s := range m.srcs {
			s.seek(m.key)
			if k, _ := s.current(); k == nil {
				s.last()
			} else {
				s.prev()
			}
		}
		m.fwd = false
	}
	return m.settle(), nil
}

// settle returns the next key in the cursor's direction that some source
// holds and whose newest change is not a delete, moving every source that
// was on it one step on.
func (m *ixCursor) settle() []byte {
	for {
		best := -1
		var bk []byte
		for i, s := range m.srcs {
			k, _ := s.current()
			if k == nil {
				continue
			}
			if best < 0 {
				best, bk = i, k
				continue
			}
			c := bytes.Compare(k, bk)
			if c == 0 || (c < 0) == m.fwd {
				best, bk = i, k // later sources take precedence on a tie
			}
		}
		if best < 0 {
			m.key = nil
			return nil
		}
		_, del := m.srcs[best].current()
		// A source's key lasts until it moves (a block's entries are
		// decoded into the cursor): keep a copy.
		m.buf = append(m.buf[:0], bk...)
		for _, s := range m.srcs {
			if k, _ := s.current(); k != nil && bytes.Equal(k, m.buf) {
				if m.fwd {
					s.next()
				} else {
					s.prev()
				}
			}
		}
		if !del {
			m.key = m.buf
			return m.buf
		}
	}
}

func (m *ixCursor) Delete() error { return (*blockCursor)(nil).Delete() }

// kvSource is the blocks: keys that are there.
type kvSource struct {
	c   kv.Cursor
	key []byte
}

func (s *kvSource) first()                  { s.key, _ = s.c.First() }
func (s *kvSource) last()                   { s.key, _ = s.c.Last() }
func (s *kvSource) seek(k []byte)           { s.key, _ = s.c.Seek(k) }
func (s *kvSource) next()                   { s.key, _ = s.c.Next() }
func (s *kvSource) prev()                   { s.key, _ = s.c.Prev() }
func (s *kvSource) current() ([]byte, bool) { return s.key, false }

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
	segs []*segment
	upto uint64
	pos  []int
	fwd  bool
	key  []byte
	del  bool
}

func newSegSource(v *ixView, upto uint64) *segSource {
	return &segSource{segs: v.segs, upto: upto, pos: make([]int, len(v.segs))}
}

// lowerBound returns the index of the first change of s at or after k.
func lowerBound(s *segment, k []byte) int {
	lo, hi := 0, s.len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(s.key(m), k) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// upperBound returns the index of the first change of s after k.
func upperBound(s *segment, k []byte) int {
	lo, hi := 0, s.len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(s.key(m), k) <= 0 {
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

// flatSource is a view flattened (ixView.flatten): changes in key order,
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
