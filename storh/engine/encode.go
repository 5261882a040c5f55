package engine

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/internal/codec"
)

// Records are encoded by storh's own codec (storh/internal/codec): the
// generic map form without reflection or allocation, any other Go type
// through a per-type encoder compiled once and cached, in one pass that
// writes every map's keys in order and enforces the depth and size limits
// as it goes. The msgpack library only encodes the values of types that
// carry their own msgpack encoding (CustomEncoder, Marshaler), after which
// the record is put in canonical form.

// scratch lets AppendValue(nil, ...) encode into a pooled buffer and copy
// the result out once: growing a nil slice from empty costs several
// allocations per record, the copy one.
type scratch struct{ buf []byte }

// maxScratch bounds the scratch buffer a pooled encoder keeps.
const maxScratch = 64 << 10

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// AppendValue encodes data as a stored value (header + msgpack payload)
// appended to dst. It fails with ErrInvalidData, appending nothing, when data
// is not a map or struct, cannot be encoded, or breaks a limit. The checksum
// is left for sealValue, because it covers the id, which Put assigns only
// once the data is known to be valid (Tx.Put seals every value it writes).
func AppendValue(dst []byte, data any) ([]byte, error) {
	s, start, b := beginValue(dst)
	out, err := codec.AppendRecord(b, data, api.MaxRecordSize)
	return s.endValue(dst, out, start, err)
}

// beginValue starts a value: in a pooled scratch buffer when dst is nil
// (s is then set), else straight at the end of dst.
func beginValue(dst []byte) (s *scratch, start int, b []byte) {
	b = dst
	if dst == nil {
		s = scratchPool.Get().(*scratch)
		b = s.buf[:0]
	}
	start = len(b)
	return s, start, append(b, valueVersion, 0, 0, 0, 0)
}

// endValue returns the value begun at start, copied out of the scratch
// buffer if it was written there, and gives the buffer back.
func (s *scratch) endValue(dst, out []byte, start int, err error) ([]byte, error) {
	if s != nil {
		encoded := out
		if err == nil {
			out = append(make([]byte, 0, len(out)-start), out[start:]...)
		}
		if cap(encoded) <= maxScratch {
			s.buf = encoded[:0]
		}
		scratchPool.Put(s)
	}
	if err != nil {
		return dst, fmt.Errorf("%w: %w", errs.ErrInvalidData, err)
	}
	return out, nil
}

// TypedCodec encodes and decodes the records of one Go type T with the
// codec compiled for T, without looking the type up on every call. It is
// the entry for the typed collections (storh.TypedDocs[T]): create one per
// handle, then call it for every item.
//
//	tc, err := engine.NewTypedCodec[Post]() // once: T must be a struct, a pointer to one, or a map with string keys
//	value, err := tc.AppendValue(arena, &post) // per write: exactly what AppendValue(arena, &post) appends
//	err = tc.Decode(payload, &post)         // per read: what DecodeInto(payload, &post) does
//
// Pass pointers into the caller's own storage (&items[i]): neither call
// copies the value or keeps the pointer. AppendValue(nil, ...) costs one
// allocation (the result), as AppendValue does; appending to an arena with
// room costs none for plain structs. A TypedCodec is a small value, safe
// for concurrent use and cheap to copy.
type TypedCodec[T any] struct{ c *codec.Codec }

// NewTypedCodec returns the codec of T, or ErrInvalidData if values of T
// cannot be records.
func NewTypedCodec[T any]() (TypedCodec[T], error) {
	c := codec.For(reflect.TypeFor[T]())
	if err := c.CheckRecordType(); err != nil {
		return TypedCodec[T]{}, fmt.Errorf("%w: %w", errs.ErrInvalidData, err)
	}
	return TypedCodec[T]{c: c}, nil
}

// AppendValue is AppendValue for *v.
func (tc TypedCodec[T]) AppendValue(dst []byte, v *T) ([]byte, error) {
	if v == nil {
		return dst, fmt.Errorf("%w: data is a nil %s", errs.ErrInvalidData, reflect.PointerTo(tc.c.Type()))
	}
	s, start, b := beginValue(dst)
	out, err := tc.c.AppendRecord(b, unsafe.Pointer(v), api.MaxRecordSize)
	return s.endValue(dst, out, start, err)
}

// Decode is DecodeInto for v.
func (tc TypedCodec[T]) Decode(payload []byte, v *T) error {
	if v == nil {
		return fmt.Errorf("decode into a nil *%s: %w", tc.c.Type(), codec.ErrType)
	}
	return decodeErr(tc.c.DecodeRecord(payload, unsafe.Pointer(v)))
}
