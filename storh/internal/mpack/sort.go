package mpack

import (
	"bytes"
	"slices"
)

// Sorter rewrites records into their canonical form, in which the keys of
// every map, at every depth, are in ascending byte order. storh stores every
// record that way, so equal data gives equal bytes whatever Go type wrote
// it: a struct (whose fields the msgpack library writes in declaration
// order), a typed map such as map[string]int (which it writes in Go's
// random map order) or a generic map. A Sorter keeps its scratch space
// between calls; it is not safe for concurrent use.
type Sorter struct {
	entries []sortEntry // a stack: each map sorts its entries in its own window
}

// sortEntry is one map entry: the raw key (header included), the key's
// bytes to order by, and the value's position.
type sortEntry struct {
	key        []byte
	name       []byte
	valueStart int
}

// AppendSorted appends the canonical form of the record b, which must have
// passed ValidateRecord, to dst. The result has the same length as b: only
// the order of map entries changes, never an encoding.
func (s *Sorter) AppendSorted(dst, b []byte) []byte {
	out, _ := s.value(dst, b, 0)
	return out
}

// value appends the canonical form of the validated value at b[pos] and
// returns where that value ends in b.
func (s *Sorter) value(dst, b []byte, pos int) ([]byte, int) {
	h, _ := readHead(b, pos) // validated: cannot fail
	switch h.k {
	case kArray:
		dst = append(dst, b[pos:pos+h.size]...)
		p := pos + h.size
		for i := 0; i < h.n; i++ {
			dst, p = s.value(dst, b, p)
		}
		return dst, p
	case kMap:
		dst = append(dst, b[pos:pos+h.size]...)
		base := len(s.entries)
		p := pos + h.size
		for i := 0; i < h.n; i++ {
			name, next, _ := mapKey(b, p)
			size, _ := Skip(b[next:])
			s.entries = append(s.entries, sortEntry{key: b[p:next], name: name, valueStart: next})
			p = next + size
		}
		window := s.entries[base:]
		slices.SortFunc(window, func(x, y sortEntry) int { return bytes.Compare(x.name, y.name) })
		for i := range window {
			e := s.entries[base+i] // re-read: nested maps may have moved the stack
			dst = append(dst, e.key...)
			dst, _ = s.value(dst, b, e.valueStart)
		}
		s.entries = s.entries[:base]
		return dst, p
	}
	end := pos + h.size + h.n
	return append(dst, b[pos:end]...), end
}
