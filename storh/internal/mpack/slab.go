package mpack

import (
	"sync"
	"unsafe"
)

// Slab holds the memory that decoded numbers, strings and lists live in, so
// that records decoded one after another share a few allocations instead of
// making one for every number above 255, every string and every list:
// putting an int64, a float64 or a string into an interface (the any of a
// map[string]any) otherwise allocates a box for it. Decoding a page of
// records into maps through one Slab allocates the maps, one copy of each
// record's bytes, and a block of boxes every few hundred values.
//
// A decoded value keeps the block it was boxed in alive, so a map kept from
// a page pins at most a few KiB of its neighbours' numbers. A Slab is safe
// for concurrent use; the zero Slab is ready.
type Slab struct {
	mu    sync.Mutex
	words []uint64 // free boxes for int64, uint64 and float64
	strs  []string // free boxes for strings
	anys  []any    // free elements for lists
	// one is set on the slab of a single value of size bytes: it allocates
	// blocks sized to that value, when it needs them, not blocks for a page.
	one  bool
	size int
}

// Blocks of boxes: a page of a hundred ten-field records fills a few.
const (
	slabWords = 256
	slabStrs  = 128
	slabAnys  = 256
)

// eface is the layout of an empty interface: its dynamic type and a pointer
// to its value. Boxing by hand points the interface at a slab's element
// instead of a new allocation. The runtime reads a non-pointer value
// through that pointer and never writes to it; a slab never reuses an
// element it handed out, so the value stays as boxed.
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

func typeOf(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

var (
	typeInt64   = typeOf(int64(0))
	typeUint64  = typeOf(uint64(0))
	typeFloat64 = typeOf(float64(0))
	typeString  = typeOf("")
)

func boxAt(typ, data unsafe.Pointer) (v any) {
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = typ, data
	return v
}

// word boxes the 8 bytes of an int64, uint64 or float64 (bits) as typ.
func (s *Slab) word(typ unsafe.Pointer, bits uint64) any {
	if len(s.words) == 0 {
		s.words = make([]uint64, s.block(slabWords))
	}
	p := &s.words[0]
	*p = bits
	s.words = s.words[1:]
	return boxAt(typ, unsafe.Pointer(p))
}

// int64 boxes v; the decoder keeps 0..255, which the runtime boxes
// without allocating, out of the slab.
func (s *Slab) int64(v int64) any { return s.word(typeInt64, uint64(v)) }

func (s *Slab) uint64(v uint64) any { return s.word(typeUint64, v) }

func (s *Slab) float64(v float64) any {
	return s.word(typeFloat64, *(*uint64)(unsafe.Pointer(&v)))
}

func (s *Slab) string(v string) any {
	if len(s.strs) == 0 {
		s.strs = make([]string, s.block(slabStrs))
	}
	p := &s.strs[0]
	*p = v
	s.strs = s.strs[1:]
	return boxAt(typeString, unsafe.Pointer(p))
}

// list returns a list of n elements, cut from the slab when it is short.
// Its capacity is n, so an append by the caller copies it out first.
func (s *Slab) list(n int) []any {
	if n > slabAnys/4 || s.one {
		return make([]any, n)
	}
	if len(s.anys) < n {
		s.anys = make([]any, slabAnys)
	}
	a := s.anys[:n:n]
	s.anys = s.anys[n:]
	return a
}

// block is the size of a new block of boxes: a page's, or one sized to a
// single value (a box per 16 bytes of it covers a record of small fields).
func (s *Slab) block(page int) int {
	if s.one {
		return max(8, s.size/16+1)
	}
	return page
}
