package codec

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// encState is the scratch of one AppendRecord call, pooled.
type encState struct {
	start    int // where the record starts in the output
	limit    int // its size limit
	fallback bool
	keys     []string   // a stack: each map sorts its keys in its own window
	entries  []mapEntry // the same for the generic form, its values beside
	perm     []int32    // a stack of entry orders, for maps of other types
	sorter   mpack.Sorter
	sorted   []byte
	lib      *msgpack.Encoder // for CustomEncoder values, created on first use
	libw     appendWriter
}

// maxScratch bounds the scratch a pooled state keeps.
const maxScratch = 64 << 10

var encPool = sync.Pool{New: func() any { return new(encState) }}

// appendWriter lets the library's encoder append to our buffer.
type appendWriter struct{ buf []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *appendWriter) WriteByte(c byte) error {
	w.buf = append(w.buf, c)
	return nil
}

func (w *appendWriter) WriteString(s string) (int, error) {
	w.buf = append(w.buf, s...)
	return len(s), nil
}

// AppendRecord appends the canonical msgpack encoding of the record v to
// dst: v must be a map with string keys, a struct, or a pointer to either.
// The encoding of a record larger than limit bytes (limit <= 0: no limit)
// is abandoned as soon as it passes the limit. On error dst is returned
// unchanged in length (the bytes past it may have been written).
//
// map[string]any values (at any depth) are encoded without allocating;
// other types through their cached Codec.
func AppendRecord(dst []byte, v any, limit int) (out []byte, err error) {
	switch m := v.(type) {
	case nil:
		return dst, unsupportedf("data is nil; pass a map or a struct")
	case map[string]any:
		if m == nil {
			return dst, unsupportedf("data is a nil map")
		}
		s := getEncState(len(dst), limit)
		defer func() {
			if r := recover(); r != nil {
				out, err = dst, unsupportedf("cannot encode %T: panic: %v", v, r)
			}
		}()
		b, err := s.appendMapAny(dst, m, level1)
		return s.finish(dst, b, err)
	}
	c := For(reflect.TypeOf(v))
	p := efaceData(&v)
	if c.direct {
		if c.plainPtr {
			// The interface holds the pointer itself: start at its
			// target, without boxing the pointer.
			if p == nil {
				return dst, unsupportedf("data is a nil %s", c.t)
			}
			return c.elem.appendRecord(dst, p, limit, c.t)
		}
		box := new(unsafe.Pointer)
		*box = p
		p = unsafe.Pointer(box)
	}
	return c.appendRecord(dst, p, limit, c.t)
}

// AppendRecord is the package-level AppendRecord for a value of the
// codec's type at p, without the type lookup: the entry for callers that
// know their type statically (the typed collections). p must point to a
// value of c.Type().
func (c *Codec) AppendRecord(dst []byte, p unsafe.Pointer, limit int) ([]byte, error) {
	return c.appendRecord(dst, p, limit, c.t)
}

// CheckRecordType reports whether values of the codec's type can be
// records: maps with string keys, structs, and pointers to them.
func (c *Codec) CheckRecordType() error {
	t := c.t
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Map && t.Key().Kind() != reflect.String:
		return unsupportedf("map keys must be strings, got %s", t.Key())
	case t.Kind() != reflect.Map && t.Kind() != reflect.Struct:
		return unsupportedf("data must be a map or a struct, got %s", c.t)
	}
	return nil
}

// appendRecord checks the shape of the record at p (named outer in
// messages) and encodes it.
func (c *Codec) appendRecord(dst []byte, p unsafe.Pointer, limit int, outer reflect.Type) (out []byte, err error) {
	top, tp := c, p
	for top.t.Kind() == reflect.Pointer {
		if tp = *(*unsafe.Pointer)(tp); tp == nil {
			return dst, unsupportedf("data is a nil %s", outer)
		}
		top = top.elem
	}
	switch top.t.Kind() {
	case reflect.Map:
		if *(*unsafe.Pointer)(tp) == nil {
			return dst, unsupportedf("data is a nil map")
		}
		if top.t.Key().Kind() != reflect.String {
			return dst, unsupportedf("map keys must be strings, got %s", top.t.Key())
		}
	case reflect.Struct:
	default:
		return dst, unsupportedf("data must be a map or a struct, got %s", outer)
	}
	s := getEncState(len(dst), limit)
	defer func() {
		if r := recover(); r != nil {
			out, err = dst, unsupportedf("cannot encode %s: panic: %v", outer, r)
		}
	}()
	// Pointers are followed as long as they have no encoding of their own
	// (a pointer type's Marshaler takes precedence over its target's).
	for c.plainPtr {
		p = *(*unsafe.Pointer)(p)
		c = c.elem
	}
	b, err := c.enc(s, dst, p, level1)
	if err == nil && !mpack.IsMap(b[s.start:]) {
		// A type with its own encoding (a Marshaler) wrote something else.
		err = unsupportedf("data must encode as a map; %s's own encoding is not one", outer)
	}
	return s.finish(dst, b, err)
}

func getEncState(start, limit int) *encState {
	s := encPool.Get().(*encState)
	s.start, s.limit, s.fallback = start, limit, false
	if limit <= 0 {
		s.limit = math.MaxInt
	}
	return s
}

// finish checks the size of the record, brings it into canonical form if
// some value was encoded by the library, and returns the state to the
// pool.
func (s *encState) finish(dst, b []byte, err error) ([]byte, error) {
	defer s.release()
	if err != nil {
		return dst, err
	}
	payload := b[s.start:]
	if len(payload) > s.limit {
		return dst, errTooLarge(len(payload), s.limit, true)
	}
	if !s.fallback {
		return b, nil
	}
	// A user's encoder wrote part of the record: check that the whole is
	// a valid record and put every map in order. Only the order changes,
	// not the length, so the sorted form goes back over the payload.
	canon, err := s.sorter.CanonicalRecord(s.sorted[:0], payload)
	if err != nil {
		return dst, wrapRaw(ErrUnsupported, err, "a custom msgpack encoding makes an invalid record: "+err.Error())
	}
	if len(payload) > 0 && &canon[0] != &payload[0] {
		copy(payload, canon)
		s.sorted = canon[:0]
	}
	return b, nil
}

func (s *encState) release() {
	s.keys = s.keys[:0]
	// An encoding abandoned half way leaves entries, the caller's values:
	// the pooled state must not keep them alive.
	clear(s.entries)
	s.entries = s.entries[:0]
	if cap(s.entries) > maxScratch/32 {
		s.entries = nil
	}
	s.perm = s.perm[:0]
	if cap(s.sorted) > maxScratch {
		s.sorted = nil
	}
	if cap(s.keys) > maxScratch/16 {
		s.keys = nil
	}
	s.libw.buf = nil
	encPool.Put(s)
}

// appendScalar writes the plain scalar of kind o at p.
func appendScalar(b []byte, o op, p unsafe.Pointer) []byte {
	switch o {
	case opString:
		return appendStr(b, *(*string)(p))
	case opInt64:
		return appendInt(b, *(*int64)(p))
	case opInt:
		return appendInt(b, int64(*(*int)(p)))
	case opBool:
		return appendBool(b, *(*bool)(p))
	case opFloat64:
		return appendFloat64(b, *(*float64)(p))
	case opTime:
		return appendTime(b, *(*time.Time)(p))
	case opUUID:
		return appendUUID(b, (*[16]byte)(p))
	case opInt32:
		return appendInt(b, int64(*(*int32)(p)))
	case opInt16:
		return appendInt(b, int64(*(*int16)(p)))
	case opInt8:
		return appendInt(b, int64(*(*int8)(p)))
	case opUint:
		return appendUint(b, uint64(*(*uint)(p)))
	case opUint64:
		return appendUint(b, *(*uint64)(p))
	case opUint32:
		return appendUint(b, uint64(*(*uint32)(p)))
	case opUint16:
		return appendUint(b, uint64(*(*uint16)(p)))
	case opUint8:
		return appendUint(b, uint64(*(*uint8)(p)))
	case opUintptr:
		return appendUint(b, uint64(*(*uintptr)(p)))
	case opFloat32:
		return appendFloat32(b, *(*float32)(p))
	case opObjectID:
		return appendObjectID(b, (*[12]byte)(p))
	}
	panic("codec: appendScalar of a non-scalar")
}

func scalarEncoder(o op) encFn {
	return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
		return appendScalar(b, o, p), nil
	}
}

// appendAny writes a dynamic value. The types of the generic record form
// are handled here without reflection or allocation; any other goes
// through its Codec.
func (s *encState) appendAny(b []byte, v any, lv int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, 0xc0), nil
	case string:
		return appendStr(b, x), nil
	case bool:
		return appendBool(b, x), nil
	case int:
		return appendInt(b, int64(x)), nil
	case int64:
		return appendInt(b, x), nil
	case int32:
		return appendInt(b, int64(x)), nil
	case int16:
		return appendInt(b, int64(x)), nil
	case int8:
		return appendInt(b, int64(x)), nil
	case uint:
		return appendUint(b, uint64(x)), nil
	case uint64:
		return appendUint(b, x), nil
	case uint32:
		return appendUint(b, uint64(x)), nil
	case uint16:
		return appendUint(b, uint64(x)), nil
	case uint8:
		return appendUint(b, uint64(x)), nil
	case float64:
		return appendFloat64(b, x), nil
	case float32:
		return appendFloat32(b, x), nil
	case []byte:
		return appendBin(b, x), nil
	case time.Time:
		return appendTime(b, x), nil
	case uuidv7.UUID:
		return appendUUID(b, (*[16]byte)(&x)), nil
	case objectid.ObjectID:
		return appendObjectID(b, (*[12]byte)(&x)), nil
	case map[string]any:
		if x == nil {
			return append(b, 0xc0), nil
		}
		return s.appendMapAny(b, x, lv)
	case []any:
		if x == nil {
			return append(b, 0xc0), nil
		}
		if tooDeep(lv) {
			return b, errTooDeep()
		}
		b = appendArrayLen(b, len(x))
		next := deeper(lv)
		for i, el := range x {
			var err error
			if b, err = s.appendAny(b, el, next); err != nil {
				return b, atIndex(err, i)
			}
			if len(b)-s.start > s.limit {
				return b, errTooLarge(len(b)-s.start, s.limit, false)
			}
		}
		return b, nil
	}
	return s.appendDynamic(b, v, lv)
}

// appendDynamic encodes an interface's value through the Codec of its
// dynamic type.
func (s *encState) appendDynamic(b []byte, v any, lv int) ([]byte, error) {
	c := For(reflect.TypeOf(v))
	p := efaceData(&v)
	if c.direct {
		if c.plainPtr {
			if p == nil {
				return append(b, 0xc0), nil
			}
			if lv&hopMask == hopMask {
				return b, errTooDeep()
			}
			return c.elem.enc(s, b, p, lv+1)
		}
		box := new(unsafe.Pointer)
		*box = p
		p = unsafe.Pointer(box)
	}
	return c.enc(s, b, p, lv)
}

// mapEntry is a key of a map[string]any being encoded, with its value:
// taken together in the one pass over the map, so that writing them in
// key order needs no lookup of each key again.
type mapEntry struct {
	k string
	v any
}

// appendMapAny writes the generic map form with its keys in order; it
// allocates nothing once the entry stack has grown.
func (s *encState) appendMapAny(b []byte, m map[string]any, lv int) ([]byte, error) {
	if tooDeep(lv) {
		return b, errTooDeep()
	}
	b = appendMapLen(b, len(m))
	base := len(s.entries)
	for k, v := range m {
		s.entries = append(s.entries, mapEntry{k, v})
	}
	sortEntries(s.entries[base:])
	next := deeper(lv)
	var err error
	for i, end := base, len(s.entries); i < end; i++ {
		e := s.entries[i] // a copy: nested maps may move the stack
		b = appendStr(b, e.k)
		if b, err = s.appendAny(b, e.v, next); err != nil {
			err = atField(err, e.k)
			break
		}
		if len(b)-s.start > s.limit {
			err = errTooLarge(len(b)-s.start, s.limit, false)
			break
		}
	}
	clear(s.entries[base:]) // the caller's values: see release
	s.entries = s.entries[:base]
	return b, err
}

// sortEntries puts a map's entries in ascending byte order of their keys.
// A record's maps are small, so an insertion sort that tells most keys
// apart by their first byte, without a call to compare them, beats a
// general sort of the keys.
func sortEntries(e []mapEntry) {
	if len(e) > 16 {
		slices.SortFunc(e, func(x, y mapEntry) int { return strings.Compare(x.k, y.k) })
		return
	}
	for i := 1; i < len(e); i++ {
		for j := i; j > 0 && keyLess(e[j].k, e[j-1].k); j-- {
			e[j], e[j-1] = e[j-1], e[j]
		}
	}
}

func keyLess(a, b string) bool {
	if a != "" && b != "" && a[0] != b[0] {
		return a[0] < b[0]
	}
	return a < b
}

func sliceEncoder(elem *Codec) encFn {
	size := elem.t.Size()
	return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
		h := (*sliceHeader)(p)
		if h.data == nil {
			return append(b, 0xc0), nil
		}
		return appendElems(s, b, elem, size, h.data, h.len, lv)
	}
}

func arrayEncoder(elem *Codec, n int) encFn {
	size := elem.t.Size()
	return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
		return appendElems(s, b, elem, size, p, n, lv)
	}
}

func appendElems(s *encState, b []byte, elem *Codec, size uintptr, data unsafe.Pointer, n, lv int) ([]byte, error) {
	if tooDeep(lv) {
		return b, errTooDeep()
	}
	b = appendArrayLen(b, n)
	next := deeper(lv)
	o := elem.eop
	for i := range n {
		ep := unsafe.Add(data, uintptr(i)*size)
		if o != opOther {
			b = appendScalar(b, o, ep)
		} else {
			var err error
			if b, err = elem.enc(s, b, ep, next); err != nil {
				return b, atIndex(err, i)
			}
		}
		if len(b)-s.start > s.limit {
			return b, errTooLarge(len(b)-s.start, s.limit, false)
		}
	}
	return b, nil
}

// mapEncoder encodes maps with string keys in key order: the generic form
// and map[string]string through Go maps, any other through reflection,
// with the values copied out to a scratch slice so that none of them is
// allocated on its own.
func mapEncoder(c *Codec) encFn {
	t := c.t
	if t.Key() == stringType {
		switch t.Elem() {
		case anyType:
			return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
				m := *(*map[string]any)(p)
				if m == nil {
					return append(b, 0xc0), nil
				}
				return s.appendMapAny(b, m, lv)
			}
		case stringType:
			return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
				m := *(*map[string]string)(p)
				if m == nil {
					return append(b, 0xc0), nil
				}
				if tooDeep(lv) {
					return b, errTooDeep()
				}
				b = appendMapLen(b, len(m))
				base := len(s.keys)
				for k := range m {
					s.keys = append(s.keys, k)
				}
				slices.Sort(s.keys[base:])
				for _, k := range s.keys[base:] {
					b = appendStr(appendStr(b, k), m[k])
				}
				s.keys = s.keys[:base]
				if len(b)-s.start > s.limit {
					return b, errTooLarge(len(b)-s.start, s.limit, false)
				}
				return b, nil
			}
		}
	}
	elem := c.elem
	size := elem.t.Size()
	scratchType := reflect.SliceOf(t.Elem())
	return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
		if *(*unsafe.Pointer)(p) == nil {
			return append(b, 0xc0), nil
		}
		if tooDeep(lv) {
			return b, errTooDeep()
		}
		mv := reflect.NewAt(t, p).Elem()
		n := mv.Len()
		b = appendMapLen(b, n)
		if n == 0 {
			return b, nil
		}
		vals := reflect.MakeSlice(scratchType, n, n)
		key := reflect.New(t.Key()).Elem()
		base := len(s.keys)
		pbase := len(s.perm)
		it := mv.MapRange()
		for i := 0; it.Next() && i < n; i++ {
			key.SetIterKey(it)
			s.keys = append(s.keys, key.String())
			vals.Index(i).SetIterValue(it)
			s.perm = append(s.perm, int32(i))
		}
		keys := s.keys[base:]
		perm := s.perm[pbase:]
		slices.SortFunc(perm, func(x, y int32) int { return strings.Compare(keys[x], keys[y]) })
		data := vals.UnsafePointer()
		next := deeper(lv)
		for j := range perm {
			i := s.perm[pbase+j] // re-read: nested maps may have moved the stacks
			k := s.keys[base+int(i)]
			b = appendStr(b, k)
			var err error
			if b, err = elem.enc(s, b, unsafe.Add(data, uintptr(i)*size), next); err != nil {
				return b, atField(err, k)
			}
			if len(b)-s.start > s.limit {
				return b, errTooLarge(len(b)-s.start, s.limit, false)
			}
		}
		s.keys = s.keys[:base]
		s.perm = s.perm[:pbase]
		return b, nil
	}
}

// userEncoder encodes a value with its own method, found by userMethod:
// CustomEncoder and Marshaler through the library (the record is put in
// canonical form afterwards), BinaryMarshaler as bin and TextMarshaler as
// str.
func userEncoder(t, iface reflect.Type, viaPtr bool) encFn {
	isNilable := nilable(t.Kind())
	return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
		var v any
		if viaPtr {
			v = reflect.NewAt(t, p).Interface()
		} else {
			rv := reflect.NewAt(t, p).Elem()
			if isNilable && rv.IsNil() {
				return append(b, 0xc0), nil
			}
			v = rv.Interface()
		}
		return s.callEncoder(b, v, t, iface)
	}
}

func (s *encState) callEncoder(b []byte, v any, t, iface reflect.Type) (out []byte, err error) {
	start := len(b)
	method := ""
	defer func() {
		if r := recover(); r != nil {
			s.libw.buf = nil
			out, err = b[:start], unsupportedf("%s.%s panicked: %v", t, method, r)
		}
	}()
	var data []byte
	switch iface {
	case customEncoderType:
		method = "EncodeMsgpack"
		if s.lib == nil {
			s.lib = msgpack.NewEncoder(&s.libw)
			s.lib.SetSortMapKeys(true)
			s.lib.UseCompactInts(true)
		}
		s.libw.buf = b
		err = v.(msgpack.CustomEncoder).EncodeMsgpack(s.lib)
		b, s.libw.buf = s.libw.buf, nil
		data = b[start:]
	case marshalerType:
		method = "MarshalMsgpack"
		data, err = v.(msgpack.Marshaler).MarshalMsgpack()
	case binaryMarshalerType:
		method = "MarshalBinary"
		if data, err = v.(encoding.BinaryMarshaler).MarshalBinary(); err == nil {
			return appendBin(b, data), nil
		}
	default:
		method = "MarshalText"
		if data, err = v.(encoding.TextMarshaler).MarshalText(); err == nil {
			b = appendLen(b, len(data), 0xa0, 32, 0xd9, 0xda, 0xdb)
			return append(b, data...), nil
		}
	}
	if err != nil {
		return b[:start], wrapRaw(ErrUnsupported, err, fmt.Sprintf("%s.%s: %v", t, method, err))
	}
	if n, serr := mpack.Skip(data); serr != nil || n != len(data) {
		return b[:start], unsupportedf("%s.%s did not write exactly one msgpack value", t, method)
	}
	if iface == marshalerType {
		b = append(b, data...)
	}
	s.fallback = true
	return b, nil
}

// libraryEncoder leaves a whole value to the library: structs it encodes
// as arrays (as_array), which this package does not implement.
func libraryEncoder(t reflect.Type) encFn {
	return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
		return s.callEncoder(b, libValue{reflect.NewAt(t, p).Elem()}, t, customEncoderType)
	}
}

// libValue adapts a reflect.Value to msgpack.CustomEncoder.
type libValue struct{ v reflect.Value }

func (l libValue) EncodeMsgpack(enc *msgpack.Encoder) error { return enc.EncodeValue(l.v) }
