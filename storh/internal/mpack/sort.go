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

// sortEntry is one map entry: where its key starts, the key's bytes to
// order by, where its value starts and where the entry ends.
type sortEntry struct {
	name              []byte
	start, value, end int
}

// CanonicalRecord validates the record b like ValidateRecord and returns it
// in canonical form: b itself when every map is already in order (the
// engine's own encoder writes them so), else the sorted form appended to
// dst, of the same length as b. A duplicate key, in any map, is an error.
func (s *Sorter) CanonicalRecord(dst, b []byte) ([]byte, error) {
	sorted, err := validateRecord(b, false)
	switch {
	case err != nil:
		return nil, err
	case sorted:
		return b, nil
	}
	out, _, err := s.value(dst, b, 0)
	return out, err
}

// AppendSorted appends the canonical form of the record b, which must have
// passed ValidateRecord, to dst. The result has the same length as b: only
// the order of map entries changes, never an encoding.
func (s *Sorter) AppendSorted(dst, b []byte) []byte {
	out, _, _ := s.value(dst, b, 0)
	return out
}

// value appends the canonical form of the validated value at b[pos] and
// returns where that value ends in b.
func (s *Sorter) value(dst, b []byte, pos int) ([]byte, int, error) {
	h, _ := readHead(b, pos) // validated: cannot fail
	switch h.k {
	case kArray:
		dst = append(dst, b[pos:pos+h.size]...)
		p := pos + h.size
		for i := 0; i < h.n; i++ {
			var err error
			if dst, p, err = s.value(dst, b, p); err != nil {
				return dst, 0, err
			}
		}
		return dst, p, nil
	case kMap:
		return s.sortMap(dst, b, pos, h)
	}
	end := pos + h.size + h.n
	return append(dst, b[pos:end]...), end, nil
}

func (s *Sorter) sortMap(dst, b []byte, pos int, h head) ([]byte, int, error) {
	dst = append(dst, b[pos:pos+h.size]...)
	base := len(s.entries)
	p := pos + h.size
	for i := 0; i < h.n; i++ {
		name, next, _ := mapKey(b, p)
		end, ok := skipFast(b, next)
		if !ok {
			size, _ := Skip(b[next:])
			end = next + size
		}
		s.entries = append(s.entries, sortEntry{name: name, start: p, value: next, end: end})
		p = end
	}
	window := s.entries[base:]
	if len(window) <= 16 {
		// Insertion sort: most maps are small, and often nearly in order.
		for i := 1; i < len(window); i++ {
			for j := i; j > 0 && bytes.Compare(window[j].name, window[j-1].name) < 0; j-- {
				window[j], window[j-1] = window[j-1], window[j]
			}
		}
	} else {
		slices.SortFunc(window, func(x, y sortEntry) int { return bytes.Compare(x.name, y.name) })
	}
	for i := 1; i < len(window); i++ {
		if bytes.Equal(window[i].name, window[i-1].name) {
			s.entries = s.entries[:base]
			return dst, 0, duplicate(window[i].name, window[i].start)
		}
	}
	for i := 0; i < h.n; i++ {
		e := s.entries[base+i] // re-read: nested maps may have moved the stack
		if c := b[e.value]; c <= 0x7f || c >= 0xa0 && c <= 0xbf || c >= 0xc0 && c != 0xdc && c != 0xdd && c != 0xde && c != 0xdf {
			// A value that holds no map: copy key and value at once.
			dst = append(dst, b[e.start:e.end]...)
			continue
		}
		dst = append(dst, b[e.start:e.value]...)
		var err error
		if dst, _, err = s.value(dst, b, e.value); err != nil {
			s.entries = s.entries[:base]
			return dst, 0, err
		}
	}
	s.entries = s.entries[:base]
	return dst, p, nil
}
