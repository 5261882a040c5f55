package codec

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/internal/mpack"
)

// decState is the cursor of one Decode call, pooled.
type decState struct {
	b   []byte
	pos int
	// s is one string copy of a small b (at most sharedMax bytes), made
	// when the first string is decoded: every decoded string is cut from
	// it, which costs one allocation per record instead of one per string.
	s   string
	lib *msgpack.Decoder // for CustomDecoder values, created on first use
	rd  bytes.Reader
}

// sharedMax is the largest payload whose strings share one copy, as in
// mpack.Decode: the bound limits how much memory one retained string pins.
const sharedMax = 4 << 10

var decPool = sync.Pool{New: func() any { return new(decState) }}

// Decode decodes the msgpack record payload into v, which must be a
// non-nil pointer; see the package documentation for the rules. Errors
// wrap ErrType when the data does not fit v's type and mpack.ErrMalformed
// (or mpack.ErrTooDeep) when the payload is not well-formed msgpack.
func Decode(payload []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return &pathError{op: fmt.Sprintf("decode into %v", t), kind: ErrType, msg: errNotPointer.Error()}
	}
	p := efaceData(&v) // a pointer is held in the interface itself
	if p == nil {
		return &pathError{op: "decode into " + t.String(), kind: ErrType, msg: errNotPointer.Error()}
	}
	return For(t.Elem()).DecodeRecord(payload, p)
}

// DecodeRecord is Decode into the value of the codec's type at p, without
// the type lookup: the entry for callers that know their type statically
// (the typed collections). p must point to a value of c.Type().
func (c *Codec) DecodeRecord(payload []byte, p unsafe.Pointer) (err error) {
	d := decPool.Get().(*decState)
	d.b, d.pos = payload, 0
	defer func() {
		if r := recover(); r != nil {
			err = withOp(typeErrorf("panic: %v", r), c.t)
		}
		d.b, d.s = nil, ""
		decPool.Put(d)
	}()
	if o := c.dop; o != opOther {
		err = d.decodeOp(o, c.t, p)
	} else {
		err = c.dec(d, p, level1)
	}
	if err == nil && d.pos != len(payload) {
		err = malformed(fmt.Errorf("%w: %d trailing bytes after offset %d", mpack.ErrMalformed, len(payload)-d.pos, d.pos))
	}
	if err != nil {
		return withOp(err, c.t)
	}
	return nil
}

// str returns n bytes at b[p:] as a string that does not alias b.
func (d *decState) str(p, n int) string {
	if n == 0 {
		return ""
	}
	if d.s == "" && len(d.b) <= sharedMax {
		d.s = string(d.b)
	}
	if d.s != "" {
		return d.s[p : p+n]
	}
	return string(d.b[p : p+n])
}

func (d *decState) head() (mpack.Head, error) {
	h, err := mpack.ReadHead(d.b, d.pos)
	if err != nil {
		return h, malformed(err)
	}
	return h, nil
}

// nilNext consumes a msgpack nil if one is next.
func (d *decState) nilNext() bool {
	if d.pos < len(d.b) && d.b[d.pos] == 0xc0 {
		d.pos++
		return true
	}
	return false
}

func mismatch(h mpack.Head, t reflect.Type) error {
	if h.Kind == mpack.KindBin || h.Kind == mpack.KindExt {
		return typeErrorf("cannot decode %s of %d bytes into %s", wireKind(h.Kind), h.N, t)
	}
	return typeErrorf("cannot decode %s into %s", wireKind(h.Kind), t)
}

// mapHead reads a map header (or nil) for a value of type t.
func (d *decState) mapHead(t reflect.Type) (n int, isNil bool, err error) {
	if d.pos < len(d.b) {
		if c := d.b[d.pos]; c&0xf0 == 0x80 {
			d.pos++
			return int(c & 0x0f), false, nil
		}
	}
	h, err := d.head()
	switch {
	case err != nil:
		return 0, false, err
	case h.Kind == mpack.KindNil:
		d.pos++
		return 0, true, nil
	case h.Kind != mpack.KindMap:
		return 0, false, mismatch(h, t)
	}
	d.pos += h.Size
	return h.N, false, nil
}

// arrayHead reads an array header (or nil) for a value of type t.
func (d *decState) arrayHead(t reflect.Type) (n int, isNil bool, err error) {
	if d.pos < len(d.b) {
		if c := d.b[d.pos]; c&0xf0 == 0x90 {
			d.pos++
			return int(c & 0x0f), false, nil
		}
	}
	h, err := d.head()
	switch {
	case err != nil:
		return 0, false, err
	case h.Kind == mpack.KindNil:
		d.pos++
		return 0, true, nil
	case h.Kind != mpack.KindArray:
		return 0, false, mismatch(h, t)
	}
	d.pos += h.Size
	return h.N, false, nil
}

// key reads a map key, which must be a string, and returns its bytes
// (aliasing the payload).
func (d *decState) key() ([]byte, error) {
	b, pos := d.b, d.pos
	if pos < len(b) && b[pos]&0xe0 == 0xa0 {
		if end := pos + 1 + int(b[pos]&0x1f); end <= len(b) {
			d.pos = end
			return b[pos+1 : end], nil
		}
	}
	h, err := d.head()
	if err != nil {
		return nil, err
	}
	if h.Kind != mpack.KindStr {
		return nil, malformed(fmt.Errorf("%w: map key at offset %d is not a string", mpack.ErrMalformed, pos))
	}
	start := pos + h.Size
	d.pos = start + h.N
	return b[start:d.pos], nil
}

// keyString reads a map key as a string that does not alias the payload.
func (d *decState) keyString() (string, error) {
	k, err := d.key()
	if err != nil {
		return "", err
	}
	return d.str(d.pos-len(k), len(k)), nil
}

func (d *decState) skip() error {
	n, err := mpack.Skip(d.b[d.pos:])
	if err != nil {
		return malformed(err)
	}
	d.pos += n
	return nil
}

// raw returns the next value's bytes (aliasing the payload) and steps
// over it.
func (d *decState) raw() ([]byte, error) {
	start := d.pos
	if err := d.skip(); err != nil {
		return nil, err
	}
	return d.b[start:d.pos:d.pos], nil
}

// decodeAny decodes the next value into mpack's normalised form, exactly
// as mpack.Decode does (the fuzz and property tests hold it to that), but
// with its strings cut from the record's shared copy, and with the depth
// counted from the record's top: lv is the level of the value.
func (d *decState) decodeAny(lv int) (any, error) {
	b, pos := d.b, d.pos
	if pos < len(b) {
		// The commonest scalars, without a full header parse.
		switch c := b[pos]; {
		case c <= 0x7f:
			d.pos++
			return int64(c), nil
		case c&0xe0 == 0xa0:
			n := int(c & 0x1f)
			if end := pos + 1 + n; end <= len(b) {
				d.pos = end
				return d.str(pos+1, n), nil
			}
		}
	}
	h, err := d.head()
	if err != nil {
		return nil, err
	}
	p := pos + h.Size
	switch h.Kind {
	case mpack.KindNil:
		d.pos = p
		return nil, nil
	case mpack.KindFalse, mpack.KindTrue:
		d.pos = p
		return h.Kind == mpack.KindTrue, nil
	case mpack.KindInt:
		d.pos = p
		return int64(h.Bits), nil
	case mpack.KindUint:
		d.pos = p
		if h.Bits > math.MaxInt64 {
			return h.Bits, nil
		}
		return int64(h.Bits), nil
	case mpack.KindFloat32, mpack.KindFloat64:
		d.pos = p
		return headFloat(h), nil
	case mpack.KindStr:
		d.pos = p + h.N
		return d.str(p, h.N), nil
	case mpack.KindBin:
		d.pos = p + h.N
		return append([]byte{}, b[p:p+h.N]...), nil
	case mpack.KindExt:
		// mpack applies the extension rules (timestamps, ids).
		v, n, err := mpack.Decode(b[pos : p+h.N])
		if err != nil {
			return nil, malformed(err)
		}
		d.pos = pos + n
		return v, nil
	}
	if tooDeep(lv) {
		return nil, errTooDeep()
	}
	d.pos = p
	next := deeper(lv)
	if h.Kind == mpack.KindArray {
		a := make([]any, h.N)
		for i := range a {
			if a[i], err = d.decodeAny(next); err != nil {
				return nil, err
			}
		}
		return a, nil
	}
	m := make(map[string]any, h.N)
	for i := 0; i < h.N; i++ {
		kpos := d.pos
		k, err := d.keyString()
		if err != nil {
			return nil, err
		}
		if m[k], err = d.decodeAny(next); err != nil {
			return nil, err
		}
		if len(m) != i+1 {
			return nil, malformed(fmt.Errorf("%w: duplicate map key %q at offset %d", mpack.ErrMalformed, k, kpos))
		}
	}
	return m, nil
}

// decodeOp decodes a plain scalar of kind o (and Go type t, for messages)
// into p.
func (d *decState) decodeOp(o op, t reflect.Type, p unsafe.Pointer) error {
	switch o {
	case opString:
		return d.decodeString(t, (*string)(p))
	case opInt64:
		v, err := d.readInt(t, 64)
		*(*int64)(p) = v
		return err
	case opInt:
		v, err := d.readInt(t, strconv.IntSize)
		*(*int)(p) = int(v)
		return err
	case opBool:
		return d.decodeBool(t, (*bool)(p))
	case opFloat64:
		v, err := d.readFloat(t, 64)
		*(*float64)(p) = v
		return err
	case opTime:
		return d.decodeTime(t, (*time.Time)(p))
	case opUUID:
		return d.decodeID(t, unsafe.Slice((*byte)(p), 16), mpack.ExtUUID)
	case opObjectID:
		return d.decodeID(t, unsafe.Slice((*byte)(p), 12), mpack.ExtObjectID)
	case opInt32:
		v, err := d.readInt(t, 32)
		*(*int32)(p) = int32(v)
		return err
	case opInt16:
		v, err := d.readInt(t, 16)
		*(*int16)(p) = int16(v)
		return err
	case opInt8:
		v, err := d.readInt(t, 8)
		*(*int8)(p) = int8(v)
		return err
	case opUint:
		v, err := d.readUint(t, strconv.IntSize)
		*(*uint)(p) = uint(v)
		return err
	case opUint64:
		v, err := d.readUint(t, 64)
		*(*uint64)(p) = v
		return err
	case opUint32:
		v, err := d.readUint(t, 32)
		*(*uint32)(p) = uint32(v)
		return err
	case opUint16:
		v, err := d.readUint(t, 16)
		*(*uint16)(p) = uint16(v)
		return err
	case opUint8:
		v, err := d.readUint(t, 8)
		*(*uint8)(p) = uint8(v)
		return err
	case opUintptr:
		v, err := d.readUint(t, strconv.IntSize)
		*(*uintptr)(p) = uintptr(v)
		return err
	case opFloat32:
		v, err := d.readFloat(t, 32)
		*(*float32)(p) = float32(v)
		return err
	}
	panic("codec: decodeOp of a non-scalar")
}

func (d *decState) decodeString(t reflect.Type, p *string) error {
	b, pos := d.b, d.pos
	if pos < len(b) {
		var start, n int
		switch c := b[pos]; {
		case c&0xe0 == 0xa0: // fixstr
			start, n = pos+1, int(c&0x1f)
		case (c == 0xd9 || c == 0xc4) && pos+1 < len(b): // str8, bin8
			start, n = pos+2, int(b[pos+1])
		}
		if start != 0 && start+n <= len(b) {
			*p = d.str(start, n)
			d.pos = start + n
			return nil
		}
	}
	h, err := d.head()
	if err != nil {
		return err
	}
	switch h.Kind {
	case mpack.KindStr, mpack.KindBin:
		*p = d.str(pos+h.Size, h.N)
		d.pos = pos + h.Size + h.N
	case mpack.KindNil:
		*p = ""
		d.pos++
	default:
		return mismatch(h, t)
	}
	return nil
}

func (d *decState) decodeBool(t reflect.Type, p *bool) error {
	if d.pos < len(d.b) {
		switch d.b[d.pos] {
		case 0xc2, 0xc0:
			*p = false
			d.pos++
			return nil
		case 0xc3:
			*p = true
			d.pos++
			return nil
		}
	}
	h, err := d.head()
	if err != nil {
		return err
	}
	return mismatch(h, t)
}

// readInt reads an integer for a signed type of the given width: any
// msgpack integer in range, or an integral float in range. nil is 0.
func (d *decState) readInt(t reflect.Type, bits int) (int64, error) {
	if d.pos < len(d.b) {
		switch c := d.b[d.pos]; {
		case c <= 0x7f:
			d.pos++
			return int64(c), nil // a positive fixint fits every width
		case c >= 0xe0:
			d.pos++
			return int64(int8(c)), nil // so does a negative one
		case c == 0xcd && bits > 16 && d.pos+2 < len(d.b):
			v := int64(binary.BigEndian.Uint16(d.b[d.pos+1:]))
			d.pos += 3
			return v, nil
		case c == 0xce && bits > 32 && d.pos+4 < len(d.b):
			v := int64(binary.BigEndian.Uint32(d.b[d.pos+1:]))
			d.pos += 5
			return v, nil
		}
	}
	h, err := d.head()
	if err != nil {
		return 0, err
	}
	min, max := int64(-1)<<(bits-1), int64(1)<<(bits-1)-1
	var v int64
	switch h.Kind {
	case mpack.KindUint:
		if h.Bits > uint64(max) {
			return 0, typeErrorf("%d overflows %s", h.Bits, t)
		}
		v = int64(h.Bits)
	case mpack.KindInt:
		if v = int64(h.Bits); v < min || v > max {
			return 0, typeErrorf("%d overflows %s", v, t)
		}
	case mpack.KindFloat32, mpack.KindFloat64:
		f := headFloat(h)
		lim := math.Ldexp(1, bits-1)
		if f != math.Trunc(f) {
			return 0, typeErrorf("%v is not an integer; cannot decode it into %s", f, t)
		}
		if f < -lim || f >= lim {
			return 0, typeErrorf("%v overflows %s", f, t)
		}
		v = int64(f)
	case mpack.KindNil:
	default:
		return 0, mismatch(h, t)
	}
	d.pos += h.Size
	return v, nil
}

// readUint is readInt for unsigned types.
func (d *decState) readUint(t reflect.Type, bits int) (uint64, error) {
	if d.pos < len(d.b) {
		if c := d.b[d.pos]; c <= 0x7f {
			d.pos++
			return uint64(c), nil
		}
	}
	h, err := d.head()
	if err != nil {
		return 0, err
	}
	var v uint64
	switch h.Kind {
	case mpack.KindUint:
		if v = h.Bits; bits < 64 && v >= 1<<bits {
			return 0, typeErrorf("%d overflows %s", v, t)
		}
	case mpack.KindInt:
		i := int64(h.Bits)
		if i < 0 || bits < 64 && i >= 1<<bits {
			return 0, typeErrorf("%d overflows %s", i, t)
		}
		v = uint64(i)
	case mpack.KindFloat32, mpack.KindFloat64:
		f := headFloat(h)
		if f != math.Trunc(f) {
			return 0, typeErrorf("%v is not an integer; cannot decode it into %s", f, t)
		}
		if f < 0 || f >= math.Ldexp(1, bits) {
			return 0, typeErrorf("%v overflows %s", f, t)
		}
		v = uint64(f)
	case mpack.KindNil:
	default:
		return 0, mismatch(h, t)
	}
	d.pos += h.Size
	return v, nil
}

// readFloat reads a float for a float type of the given width: any msgpack
// float or integer. A finite float64 beyond the range of float32 is an
// error; integers are rounded to the nearest float.
func (d *decState) readFloat(t reflect.Type, bits int) (float64, error) {
	if d.pos+8 < len(d.b) && d.b[d.pos] == 0xcb && bits == 64 {
		f := math.Float64frombits(binary.BigEndian.Uint64(d.b[d.pos+1:]))
		d.pos += 9
		return f, nil
	}
	h, err := d.head()
	if err != nil {
		return 0, err
	}
	var f float64
	switch h.Kind {
	case mpack.KindFloat64:
		f = math.Float64frombits(h.Bits)
		if bits == 32 && !math.IsInf(f, 0) && math.IsInf(float64(float32(f)), 0) {
			return 0, typeErrorf("%v overflows %s", f, t)
		}
	case mpack.KindFloat32:
		f = float64(math.Float32frombits(uint32(h.Bits)))
	case mpack.KindInt:
		f = float64(int64(h.Bits))
	case mpack.KindUint:
		f = float64(h.Bits)
	case mpack.KindNil:
	default:
		return 0, mismatch(h, t)
	}
	d.pos += h.Size
	return f, nil
}

func headFloat(h mpack.Head) float64 {
	if h.Kind == mpack.KindFloat32 {
		return float64(math.Float32frombits(uint32(h.Bits)))
	}
	return math.Float64frombits(h.Bits)
}

func (d *decState) decodeTime(t reflect.Type, p *time.Time) error {
	if b, pos := d.b, d.pos; pos+5 < len(b) && b[pos] == 0xd6 && b[pos+1] == 0xff {
		*p = time.Unix(int64(binary.BigEndian.Uint32(b[pos+2:])), 0).UTC()
		d.pos += 6
		return nil
	}
	h, err := d.head()
	if err != nil {
		return err
	}
	switch {
	case h.Kind == mpack.KindExt && h.Ext == -1:
		tm, err := h.Timestamp(d.b, d.pos)
		if err != nil {
			return malformed(err)
		}
		*p = tm
	case h.Kind == mpack.KindNil:
		*p = time.Time{}
	default:
		return mismatch(h, t)
	}
	d.pos += h.Size + h.N
	return nil
}

// decodeID decodes storh's id extension ext, or bin of the id's length (as
// ids were stored through MarshalBinary before the extensions existed).
// Any bytes are accepted: a foreign key need not be a valid id.
func (d *decState) decodeID(t reflect.Type, dst []byte, ext int8) error {
	if b, pos := d.b, d.pos; pos+1+len(dst) < len(b) {
		// The stored forms: fixext 16 for a UUID, ext 8 for an ObjectID,
		// and bin 8 for either as the library wrote it.
		c, c1 := b[pos], b[pos+1]
		if c == 0xd8 && c1 == byte(ext) && len(dst) == 16 || c == 0xc4 && int(c1) == len(dst) {
			copy(dst, b[pos+2:])
			d.pos += 2 + len(dst)
			return nil
		}
	}
	h, err := d.head()
	if err != nil {
		return err
	}
	switch {
	case h.Kind == mpack.KindExt && h.Ext == ext:
		if h.N != len(dst) {
			return malformed(fmt.Errorf("%w: extension %d of %d bytes at offset %d", mpack.ErrMalformed, ext, h.N, d.pos))
		}
		fallthrough
	case h.Kind == mpack.KindBin && h.N == len(dst):
		copy(dst, d.b[d.pos+h.Size:])
	case h.Kind == mpack.KindNil:
		clear(dst)
	default:
		return mismatch(h, t)
	}
	d.pos += h.Size + h.N
	return nil
}

// decodeBytes decodes bin or str into a new []byte (never aliasing the
// payload; empty but not nil for an empty value, nil for nil).
func (d *decState) decodeBytes(t reflect.Type, p *[]byte) error {
	h, err := d.head()
	if err != nil {
		return err
	}
	switch h.Kind {
	case mpack.KindBin, mpack.KindStr:
		start := d.pos + h.Size
		*p = append(make([]byte, 0, h.N), d.b[start:start+h.N]...)
	case mpack.KindNil:
		*p = nil
	default:
		return mismatch(h, t)
	}
	d.pos += h.Size + h.N
	return nil
}

// decodeByteArray decodes bin (or str) of exactly len(dst) bytes; a
// [16]byte also takes a UUID and a [12]byte an ObjectID.
func (d *decState) decodeByteArray(t reflect.Type, dst []byte) error {
	h, err := d.head()
	if err != nil {
		return err
	}
	switch {
	case (h.Kind == mpack.KindBin || h.Kind == mpack.KindStr) && h.N == len(dst),
		h.Kind == mpack.KindExt && (h.Ext == mpack.ExtUUID && h.N == 16 || h.Ext == mpack.ExtObjectID && h.N == 12) && h.N == len(dst):
		copy(dst, d.b[d.pos+h.Size:])
	case h.Kind == mpack.KindNil:
		clear(dst)
	default:
		return mismatch(h, t)
	}
	d.pos += h.Size + h.N
	return nil
}

func ptrDecoder(c *Codec) decFn {
	elem := c.elem
	return func(d *decState, p unsafe.Pointer, lv int) error {
		pp := (*unsafe.Pointer)(p)
		if d.nilNext() {
			*pp = nil
			return nil
		}
		if lv&hopMask == hopMask {
			return errTooDeep()
		}
		if *pp == nil {
			*pp = reflect.New(elem.t).UnsafePointer()
		}
		if o := elem.dop; o != opOther {
			return d.decodeOp(o, elem.t, *pp)
		}
		return elem.dec(d, *pp, lv+1)
	}
}

// ifaceDecoder decodes into an interface type with methods, as the
// library does: nil makes it nil, a string into an error is errors.New,
// and an interface holding a non-nil pointer decodes into what it points
// to. Anything else has no type to decode into.
func ifaceDecoder(t reflect.Type) decFn {
	return func(d *decState, p unsafe.Pointer, lv int) error {
		v := reflect.NewAt(t, p).Elem()
		if d.nilNext() {
			v.SetZero()
			return nil
		}
		if t == errorType && d.pos < len(d.b) {
			if h, err := d.head(); err == nil && h.Kind == mpack.KindStr {
				var s string
				if err := d.decodeString(t, &s); err != nil {
					return err
				}
				*(*error)(p) = errors.New(s)
				return nil
			}
		}
		if !v.IsNil() && v.Elem().Kind() == reflect.Pointer && !v.Elem().IsNil() {
			if lv&hopMask == hopMask {
				return errTooDeep()
			}
			pc := For(v.Elem().Type())
			return pc.elem.decodeAt(d, v.Elem().UnsafePointer(), lv+1)
		}
		h, err := d.head()
		if err != nil {
			return err
		}
		return typeErrorf("cannot decode %s into %s: the interface holds no pointer to decode into", wireKind(h.Kind), t)
	}
}

// decodeAt decodes into the value of c's type at p.
func (c *Codec) decodeAt(d *decState, p unsafe.Pointer, lv int) error {
	if c.dop != opOther {
		return d.decodeOp(c.dop, c.t, p)
	}
	return c.dec(d, p, lv)
}

// newArray allocates n elements of elem's type (sliceType is []elem).
// Slices of strings, of any and of pointer-free scalars are made directly,
// which costs one allocation where reflect.MakeSlice costs two.
func newArray(elem *Codec, sliceType reflect.Type, n int) unsafe.Pointer {
	switch k := elem.t.Kind(); {
	case k == reflect.String:
		return unsafe.Pointer(unsafe.SliceData(make([]string, n)))
	case k == reflect.Interface && elem.t.NumMethod() == 0:
		return unsafe.Pointer(unsafe.SliceData(make([]any, n)))
	case k >= reflect.Bool && k <= reflect.Float64: // no pointers: only the size matters
		switch elem.t.Size() {
		case 8:
			return unsafe.Pointer(unsafe.SliceData(make([]uint64, n)))
		case 4:
			return unsafe.Pointer(unsafe.SliceData(make([]uint32, n)))
		case 2:
			return unsafe.Pointer(unsafe.SliceData(make([]uint16, n)))
		case 1:
			return unsafe.Pointer(unsafe.SliceData(make([]uint8, n)))
		}
	}
	return reflect.MakeSlice(sliceType, n, n).UnsafePointer()
}

func sliceDecoder(c *Codec) decFn {
	t, elem := c.t, c.elem
	size := elem.t.Size()
	return func(d *decState, p unsafe.Pointer, lv int) error {
		n, isNil, err := d.arrayHead(t)
		if err != nil {
			return err
		}
		if isNil {
			*(*sliceHeader)(p) = sliceHeader{}
			return nil
		}
		if tooDeep(lv) {
			return errTooDeep()
		}
		data := newArray(elem, t, n)
		if err := d.decodeElems(elem, size, data, n, lv); err != nil {
			return err
		}
		*(*sliceHeader)(p) = sliceHeader{data: data, len: n, cap: n}
		return nil
	}
}

func arrayDecoder(c *Codec) decFn {
	t, elem := c.t, c.elem
	size, max := elem.t.Size(), t.Len()
	return func(d *decState, p unsafe.Pointer, lv int) error {
		n, isNil, err := d.arrayHead(t)
		if err != nil {
			return err
		}
		if isNil {
			reflect.NewAt(t, p).Elem().SetZero()
			return nil
		}
		if n > max {
			return typeErrorf("cannot decode an array of %d elements into %s", n, t)
		}
		if tooDeep(lv) {
			return errTooDeep()
		}
		if err := d.decodeElems(elem, size, p, n, lv); err != nil {
			return err
		}
		for i := n; i < max; i++ {
			reflect.NewAt(elem.t, unsafe.Add(p, uintptr(i)*size)).Elem().SetZero()
		}
		return nil
	}
}

func (d *decState) decodeElems(elem *Codec, size uintptr, data unsafe.Pointer, n, lv int) error {
	next := deeper(lv)
	o := elem.dop
	for i := range n {
		ep := unsafe.Add(data, uintptr(i)*size)
		var err error
		if o != opOther {
			err = d.decodeOp(o, elem.t, ep)
		} else {
			err = elem.dec(d, ep, next)
		}
		if err != nil {
			return atIndex(err, i)
		}
	}
	return nil
}

// mapDecoder decodes maps with string keys. A decoded map replaces the
// one in the target. The generic form is mpack's normalised decode.
func mapDecoder(c *Codec) decFn {
	t, elem := c.t, c.elem
	if t.Key() == stringType && t.Elem() == anyType {
		return func(d *decState, p unsafe.Pointer, lv int) error {
			if d.nilNext() {
				*(*map[string]any)(p) = nil
				return nil
			}
			h, err := d.head()
			if err != nil {
				return err
			}
			if h.Kind != mpack.KindMap {
				return mismatch(h, t)
			}
			v, err := d.decodeAny(lv)
			if err != nil {
				return err
			}
			*(*map[string]any)(p) = v.(map[string]any)
			return nil
		}
	}
	if t.Key() == stringType && t.Elem() == stringType {
		return func(d *decState, p unsafe.Pointer, lv int) error {
			n, isNil, err := d.mapHead(t)
			if err != nil {
				return err
			}
			if isNil {
				*(*map[string]string)(p) = nil
				return nil
			}
			if tooDeep(lv) {
				return errTooDeep()
			}
			m := make(map[string]string, n)
			for range n {
				k, err := d.keyString()
				if err != nil {
					return err
				}
				var v string
				if err := d.decodeString(stringType, &v); err != nil {
					return atField(err, k)
				}
				m[k] = v
			}
			*(*map[string]string)(p) = m
			return nil
		}
	}
	return func(d *decState, p unsafe.Pointer, lv int) error {
		n, isNil, err := d.mapHead(t)
		if err != nil {
			return err
		}
		mv := reflect.NewAt(t, p).Elem()
		if isNil {
			mv.SetZero()
			return nil
		}
		if tooDeep(lv) {
			return errTooDeep()
		}
		m := reflect.MakeMapWithSize(t, n)
		key := reflect.New(t.Key()).Elem()
		val := reflect.New(t.Elem()).Elem()
		vp := val.Addr().UnsafePointer()
		next := deeper(lv)
		for range n {
			k, err := d.keyString()
			if err != nil {
				return err
			}
			key.SetString(k)
			val.SetZero()
			if err := elem.decodeAt(d, vp, next); err != nil {
				return atField(err, k)
			}
			m.SetMapIndex(key, val)
		}
		mv.Set(m)
		return nil
	}
}

// userDecoder decodes a value with its own method, found by userMethod:
// CustomDecoder and Unmarshaler through the library from the value's own
// bytes, BinaryUnmarshaler from bin (or str, or the payload of a storh id
// extension) and TextUnmarshaler from str or bin. nil gives the zero value
// without calling the method.
func userDecoder(t, iface reflect.Type, viaPtr bool) decFn {
	return func(d *decState, p unsafe.Pointer, lv int) error {
		if d.nilNext() {
			reflect.NewAt(t, p).Elem().SetZero()
			return nil
		}
		raw, err := d.raw()
		if err != nil {
			return err
		}
		var target any
		if viaPtr {
			target = reflect.NewAt(t, p).Interface()
		} else {
			rv := reflect.NewAt(t, p).Elem()
			if t.Kind() == reflect.Pointer && rv.IsNil() {
				rv.Set(reflect.New(t.Elem()))
			}
			target = rv.Interface()
		}
		return d.callDecoder(raw, target, t, iface)
	}
}

func (d *decState) callDecoder(raw []byte, target any, t, iface reflect.Type) (err error) {
	if target == nil {
		return typeErrorf("cannot decode into a nil %s", t)
	}
	method := ""
	defer func() {
		if r := recover(); r != nil {
			err = typeErrorf("%s.%s panicked: %v", t, method, r)
		}
	}()
	switch iface {
	case customDecoderType:
		method = "DecodeMsgpack"
		d.rd.Reset(raw)
		if d.lib == nil {
			d.lib = msgpack.NewDecoder(&d.rd)
		} else {
			d.lib.Reset(&d.rd)
		}
		err = target.(msgpack.CustomDecoder).DecodeMsgpack(d.lib)
		d.rd.Reset(nil) // keep no reference to the payload in the pool
	case unmarshalerType:
		method = "UnmarshalMsgpack"
		err = target.(msgpack.Unmarshaler).UnmarshalMsgpack(bytes.Clone(raw))
	case binaryUnmarshalerType, textUnmarshalerType:
		h, herr := mpack.ReadHead(raw, 0)
		if herr != nil {
			return malformed(herr)
		}
		ok := h.Kind == mpack.KindBin || h.Kind == mpack.KindStr
		if iface == binaryUnmarshalerType {
			method = "UnmarshalBinary"
			ok = ok || h.Kind == mpack.KindExt && (h.Ext == mpack.ExtUUID || h.Ext == mpack.ExtObjectID)
		} else {
			method = "UnmarshalText"
		}
		if !ok {
			return mismatch(h, t)
		}
		data := raw[h.Size : h.Size+h.N]
		if iface == binaryUnmarshalerType {
			err = target.(encoding.BinaryUnmarshaler).UnmarshalBinary(data)
		} else {
			err = target.(encoding.TextUnmarshaler).UnmarshalText(data)
		}
	}
	if err != nil {
		return wrapRaw(ErrType, err, fmt.Sprintf("%s.%s: %v", t, method, err))
	}
	return nil
}

// libraryDecoder leaves a whole value to the library (structs it encodes
// as arrays).
func libraryDecoder(t reflect.Type) decFn {
	return func(d *decState, p unsafe.Pointer, lv int) error {
		raw, err := d.raw()
		if err != nil {
			return err
		}
		return d.callDecoder(raw, libTarget{reflect.NewAt(t, p).Elem()}, t, customDecoderType)
	}
}

// libTarget adapts a reflect.Value to msgpack.CustomDecoder.
type libTarget struct{ v reflect.Value }

func (l libTarget) DecodeMsgpack(dec *msgpack.Decoder) error { return dec.DecodeValue(l.v) }
