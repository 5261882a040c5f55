package codec

import (
	"encoding"
	"errors"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

var (
	timeType     = reflect.TypeFor[time.Time]()
	uuidType     = reflect.TypeFor[uuidv7.UUID]()
	objectIDType = reflect.TypeFor[objectid.ObjectID]()
	errorType    = reflect.TypeFor[error]()
	anyType      = reflect.TypeFor[any]()
	stringType   = reflect.TypeFor[string]()

	customEncoderType     = reflect.TypeFor[msgpack.CustomEncoder]()
	customDecoderType     = reflect.TypeFor[msgpack.CustomDecoder]()
	marshalerType         = reflect.TypeFor[msgpack.Marshaler]()
	unmarshalerType       = reflect.TypeFor[msgpack.Unmarshaler]()
	binaryMarshalerType   = reflect.TypeFor[encoding.BinaryMarshaler]()
	binaryUnmarshalerType = reflect.TypeFor[encoding.BinaryUnmarshaler]()
	textMarshalerType     = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshalerType   = reflect.TypeFor[encoding.TextUnmarshaler]()
	isZeroerType          = reflect.TypeFor[interface{ IsZero() bool }]()
)

// Levels. Every encoder and decoder gets lv: the nesting level the value
// would occupy if it is a map or an array (the top-level map is level 1),
// shifted left by hopBits, and in the low bits the number of pointer and
// interface hops taken since the last container. A container deeper than
// mpack.MaxDepth is an error, and so is a run of hops that never reaches a
// container, which only a cycle of pointers and interfaces can make (var
// x any; x = &x): the level alone would never grow on it.
const (
	hopBits = 5
	hopMask = 1<<hopBits - 1
	level1  = 1 << hopBits
)

func tooDeep(lv int) bool { return lv>>hopBits > mpack.MaxDepth }

// deeper is the lv of the elements of a container at lv.
func deeper(lv int) int { return (lv>>hopBits + 1) << hopBits }

type (
	encFn func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error)
	decFn func(d *decState, p unsafe.Pointer, lv int) error
)

// op lets the loops over struct fields and list elements handle the
// common scalars inline, without an indirect call.
type op uint8

const (
	opOther op = iota
	opString
	opBool
	opInt
	opInt8
	opInt16
	opInt32
	opInt64
	opUint
	opUint8
	opUint16
	opUint32
	opUint64
	opUintptr
	opFloat32
	opFloat64
	opTime
	opUUID
	opObjectID
)

// Codec is the compiled encoder and decoder of one Go type, built on first
// use and cached for the life of the process: For returns the same *Codec
// for the same type. A Codec is safe for concurrent use.
type Codec struct {
	t      reflect.Type
	eop    op // the encoder is the plain one of this scalar (opOther: call enc)
	dop    op // the decoder is the plain one of this scalar (opOther: call dec)
	enc    encFn
	dec    decFn
	empty  func(p unsafe.Pointer) bool // the library's omitempty rule
	zero   func(p unsafe.Pointer) bool // omitzero: IsZero() or the zero value
	direct bool                        // an interface holds the value itself, not a pointer to it
	// plainPtr: a pointer type encoded as what it points to (no method of
	// its own), so a pointer held in an interface can be followed directly.
	plainPtr bool
	elem     *Codec // pointers, slices, arrays, maps
	st       *structPlan
}

// Type returns the Go type of the codec.
func (c *Codec) Type() reflect.Type { return c.t }

var (
	cache   sync.Map // reflect.Type → *Codec, complete codecs only
	buildMu sync.Mutex
)

// For returns the codec of t. Building one never fails: a type that cannot
// be encoded or decoded (a chan, a map with int keys) gets a codec that
// returns an error when a value of it is met, as the library does.
func For(t reflect.Type) *Codec {
	if c, ok := cache.Load(t); ok {
		return c.(*Codec)
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if c, ok := cache.Load(t); ok {
		return c.(*Codec)
	}
	bd := builder{m: map[reflect.Type]*Codec{}}
	c := bd.codec(t)
	// Publish only once every codec the type reaches is complete: a
	// recursive type's codecs refer to each other.
	for t, c := range bd.m {
		cache.Store(t, c)
	}
	return c
}

type builder struct {
	m map[reflect.Type]*Codec // codecs built by this call, maybe incomplete
}

func (bd *builder) codec(t reflect.Type) *Codec {
	if c, ok := cache.Load(t); ok {
		return c.(*Codec)
	}
	if c, ok := bd.m[t]; ok {
		return c // a recursive type: complete by the time it is called
	}
	c := &Codec{t: t, direct: isDirect(t)}
	bd.m[t] = c
	bd.fill(c)
	return c
}

// isDirect reports whether an interface holding a value of t holds the
// value itself in its data word (pointer-shaped types) rather than a
// pointer to it. The zero value shows it: boxed, a pointer-shaped zero is
// a nil data word, while any other type is boxed behind a non-nil pointer.
func isDirect(t reflect.Type) bool {
	v := reflect.New(t).Elem().Interface()
	return efaceData(&v) == nil
}

type eface struct {
	typ, data unsafe.Pointer
}

func efaceData(v *any) unsafe.Pointer { return (*eface)(unsafe.Pointer(v)).data }

type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

func special(t reflect.Type) bool {
	return t == timeType || t == uuidType || t == objectIDType
}

func nilable(k reflect.Kind) bool {
	switch k {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
		return true
	}
	return false
}

func (bd *builder) fill(c *Codec) {
	t := c.t
	switch t {
	case timeType:
		c.eop, c.dop = opTime, opTime
	case uuidType:
		c.eop, c.dop = opUUID, opUUID
	case objectIDType:
		c.eop, c.dop = opObjectID, opObjectID
	}
	// Containers get their parts first, so that the encoder and decoder
	// selections below can refer to them.
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		c.elem = bd.codec(t.Elem())
	case reflect.Struct:
		if !special(t) {
			c.st = bd.structPlan(t)
		}
	}
	c.enc = bd.encoder(c)
	c.dec = bd.decoder(c)
	c.empty = emptyFunc(c)
	c.zero = zeroFunc(c)
}

// userMethod finds the method a value of t is encoded or decoded with, in
// the library's order of precedence: the interfaces on t itself, then on
// *t (for an addressable value). It returns the interface, and whether it
// is *t's.
func userMethod(t reflect.Type, ifaces ...reflect.Type) (reflect.Type, bool) {
	for _, i := range ifaces {
		if t.Implements(i) {
			return i, false
		}
	}
	if t.Kind() != reflect.Pointer {
		pt := reflect.PointerTo(t)
		for _, i := range ifaces {
			if pt.Implements(i) {
				return i, true
			}
		}
	}
	return nil, false
}

// ownEncoding reports whether t is encoded by a user's method: the first
// check of both the encoder and decoder selection, after storh's own
// types (times and ids, and pointers to them), which come first because
// the ids implement MarshalBinary and MarshalText.
func ownsEncoding(t reflect.Type) bool {
	if special(t) || t.Kind() == reflect.Pointer && special(t.Elem()) {
		return false
	}
	return true
}

func (bd *builder) encoder(c *Codec) encFn {
	t := c.t
	switch c.eop {
	case opTime:
		return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
			return appendTime(b, *(*time.Time)(p)), nil
		}
	case opUUID:
		return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
			return appendUUID(b, (*[16]byte)(p)), nil
		}
	case opObjectID:
		return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
			return appendObjectID(b, (*[12]byte)(p)), nil
		}
	}
	if ownsEncoding(t) {
		if i, viaPtr := userMethod(t, customEncoderType, marshalerType, binaryMarshalerType, textMarshalerType); i != nil {
			return userEncoder(t, i, viaPtr)
		}
	}
	if t == errorType {
		return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
			err := *(*error)(p)
			if err == nil {
				return append(b, 0xc0), nil
			}
			return appendStr(b, err.Error()), nil
		}
	}
	switch t.Kind() {
	case reflect.Bool:
		c.eop = opBool
	case reflect.Int:
		c.eop = opInt
	case reflect.Int8:
		c.eop = opInt8
	case reflect.Int16:
		c.eop = opInt16
	case reflect.Int32:
		c.eop = opInt32
	case reflect.Int64:
		c.eop = opInt64
	case reflect.Uint:
		c.eop = opUint
	case reflect.Uint8:
		c.eop = opUint8
	case reflect.Uint16:
		c.eop = opUint16
	case reflect.Uint32:
		c.eop = opUint32
	case reflect.Uint64:
		c.eop = opUint64
	case reflect.Uintptr:
		c.eop = opUintptr
	case reflect.Float32:
		c.eop = opFloat32
	case reflect.Float64:
		c.eop = opFloat64
	case reflect.String:
		c.eop = opString
	case reflect.Interface:
		if t.NumMethod() == 0 {
			return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
				return s.appendAny(b, *(*any)(p), lv)
			}
		}
		return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
			v := reflect.NewAt(t, p).Elem()
			if v.IsNil() {
				return append(b, 0xc0), nil
			}
			return s.appendAny(b, v.Interface(), lv)
		}
	case reflect.Pointer:
		elem := c.elem
		c.plainPtr = true
		return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
			ep := *(*unsafe.Pointer)(p)
			if ep == nil {
				return append(b, 0xc0), nil
			}
			if lv&hopMask == hopMask {
				return b, errTooDeep()
			}
			return elem.enc(s, b, ep, lv+1)
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
				return appendBin(b, *(*[]byte)(p)), nil
			}
		}
		return sliceEncoder(c.elem)
	case reflect.Array:
		n := t.Len()
		if t.Elem().Kind() == reflect.Uint8 {
			return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
				b = appendLen(b, n, 0, 0, 0xc4, 0xc5, 0xc6)
				return append(b, unsafe.Slice((*byte)(p), n)...), nil
			}
		}
		return arrayEncoder(c.elem, n)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			// As the library wrote them: nil and empty maps are fine.
			return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
				switch {
				case *(*unsafe.Pointer)(p) == nil:
					return append(b, 0xc0), nil
				case reflect.NewAt(t, p).Elem().Len() == 0:
					return append(b, 0x80), nil
				}
				return b, unsupportedf("map keys must be strings, got %s", t.Key())
			}
		}
		return mapEncoder(c)
	case reflect.Struct:
		if c.st.asArray {
			return libraryEncoder(t)
		}
		return c.st.encode
	default: // complex numbers, channels, functions, unsafe pointers
		return func(s *encState, b []byte, p unsafe.Pointer, lv int) ([]byte, error) {
			return b, unsupportedf("cannot encode %s", t)
		}
	}
	return scalarEncoder(c.eop)
}

func (bd *builder) decoder(c *Codec) decFn {
	t := c.t
	switch c.dop {
	case opTime, opUUID, opObjectID:
		o := c.dop
		return func(d *decState, p unsafe.Pointer, lv int) error { return d.decodeOp(o, t, p) }
	}
	if ownsEncoding(t) {
		if i, viaPtr := userMethod(t, customDecoderType, unmarshalerType, binaryUnmarshalerType, textUnmarshalerType); i != nil {
			return userDecoder(t, i, viaPtr)
		}
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		o := kindOp(t.Kind())
		c.dop = o
		return func(d *decState, p unsafe.Pointer, lv int) error { return d.decodeOp(o, t, p) }
	case reflect.Interface:
		if t.NumMethod() == 0 {
			return func(d *decState, p unsafe.Pointer, lv int) error {
				v, err := d.decodeAny(lv)
				if err == nil {
					*(*any)(p) = v
				}
				return err
			}
		}
		return ifaceDecoder(t)
	case reflect.Pointer:
		return ptrDecoder(c)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return func(d *decState, p unsafe.Pointer, lv int) error { return d.decodeBytes(t, (*[]byte)(p)) }
		}
		return sliceDecoder(c)
	case reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			n := t.Len()
			return func(d *decState, p unsafe.Pointer, lv int) error {
				return d.decodeByteArray(t, unsafe.Slice((*byte)(p), n))
			}
		}
		return arrayDecoder(c)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return func(d *decState, p unsafe.Pointer, lv int) error {
				n, isNil, err := d.mapHead(t)
				switch {
				case err != nil:
					return err
				case isNil:
					reflect.NewAt(t, p).Elem().SetZero()
				case n == 0:
					reflect.NewAt(t, p).Elem().Set(reflect.MakeMap(t))
				default:
					return typeErrorf("cannot decode into %s: map keys must be strings", t)
				}
				return nil
			}
		}
		return mapDecoder(c)
	case reflect.Struct:
		if c.st.asArray {
			return libraryDecoder(t)
		}
		return c.st.decode
	}
	return func(d *decState, p unsafe.Pointer, lv int) error {
		return typeErrorf("cannot decode into %s", t)
	}
}

func kindOp(k reflect.Kind) op {
	switch k {
	case reflect.Bool:
		return opBool
	case reflect.Int:
		return opInt
	case reflect.Int8:
		return opInt8
	case reflect.Int16:
		return opInt16
	case reflect.Int32:
		return opInt32
	case reflect.Int64:
		return opInt64
	case reflect.Uint:
		return opUint
	case reflect.Uint8:
		return opUint8
	case reflect.Uint16:
		return opUint16
	case reflect.Uint32:
		return opUint32
	case reflect.Uint64:
		return opUint64
	case reflect.Uintptr:
		return opUintptr
	case reflect.Float32:
		return opFloat32
	case reflect.Float64:
		return opFloat64
	case reflect.String:
		return opString
	}
	return opOther
}

// emptyFunc is the library's isEmptyValue, the test of omitempty: nil
// interfaces, pointers, maps and slices, zero numbers and false, empty
// strings, arrays, maps and slices, structs whose every field is omitted,
// and values whose IsZero method says so.
func emptyFunc(c *Codec) func(unsafe.Pointer) bool {
	t := c.t
	if t.Kind() == reflect.Interface {
		return func(p unsafe.Pointer) bool {
			v := reflect.NewAt(t, p).Elem()
			if v.IsNil() {
				return true
			}
			dyn := v.Elem()
			dc := For(dyn.Type())
			box := reflect.New(dyn.Type())
			box.Elem().Set(dyn)
			return dc.empty(box.UnsafePointer())
		}
	}
	never := func(unsafe.Pointer) bool { return false }
	if f := isZeroFunc(t); f != nil {
		return f
	}
	switch t.Kind() {
	case reflect.Array:
		n := t.Len()
		return func(unsafe.Pointer) bool { return n == 0 }
	case reflect.Slice:
		return func(p unsafe.Pointer) bool { return (*sliceHeader)(p).len == 0 }
	case reflect.String:
		return func(p unsafe.Pointer) bool { return len(*(*string)(p)) == 0 }
	case reflect.Map:
		return func(p unsafe.Pointer) bool {
			return *(*unsafe.Pointer)(p) == nil || reflect.NewAt(t, p).Elem().Len() == 0
		}
	case reflect.Pointer:
		return func(p unsafe.Pointer) bool { return *(*unsafe.Pointer)(p) == nil }
	case reflect.Struct:
		st := c.st
		return func(p unsafe.Pointer) bool {
			for i := range st.fields {
				if !st.fields[i].omitted(p) {
					return false
				}
			}
			return true
		}
	}
	if z := scalarZero(t); z != nil {
		return z
	}
	return never // channels, functions, complex numbers, unsafe pointers
}

// zeroFunc is the test of omitzero: the IsZero method if the type has one,
// else the zero value of the type.
func zeroFunc(c *Codec) func(unsafe.Pointer) bool {
	t := c.t
	if f := isZeroFunc(t); f != nil {
		return f
	}
	switch t.Kind() {
	case reflect.String:
		return func(p unsafe.Pointer) bool { return len(*(*string)(p)) == 0 }
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return func(p unsafe.Pointer) bool { return *(*unsafe.Pointer)(p) == nil }
	case reflect.Slice:
		return func(p unsafe.Pointer) bool { return (*sliceHeader)(p).data == nil }
	case reflect.Float32: // -0 is not the zero value
		return func(p unsafe.Pointer) bool { return *(*uint32)(p) == 0 }
	case reflect.Float64:
		return func(p unsafe.Pointer) bool { return *(*uint64)(p) == 0 }
	}
	if z := scalarZero(t); z != nil {
		return z
	}
	return func(p unsafe.Pointer) bool { return reflect.NewAt(t, p).Elem().IsZero() }
}

// isZeroFunc returns the IsZero test of a type that has the method (in its
// value's method set, as the library checks it), nil otherwise. storh's
// own types are tested without reflection.
func isZeroFunc(t reflect.Type) func(unsafe.Pointer) bool {
	switch t {
	case timeType:
		return func(p unsafe.Pointer) bool { return (*time.Time)(p).IsZero() }
	case uuidType:
		return func(p unsafe.Pointer) bool { return *(*[16]byte)(p) == [16]byte{} }
	case objectIDType:
		return func(p unsafe.Pointer) bool { return *(*[12]byte)(p) == [12]byte{} }
	}
	if !t.Implements(isZeroerType) {
		return nil
	}
	if t.Kind() == reflect.Pointer && special(t.Elem()) {
		elem := isZeroFunc(t.Elem())
		return func(p unsafe.Pointer) bool {
			ep := *(*unsafe.Pointer)(p)
			return ep == nil || elem(ep)
		}
	}
	isNilable := nilable(t.Kind())
	return func(p unsafe.Pointer) bool {
		v := reflect.NewAt(t, p).Elem()
		if isNilable && v.IsNil() {
			return true
		}
		return v.Interface().(interface{ IsZero() bool }).IsZero()
	}
}

func scalarZero(t reflect.Type) func(unsafe.Pointer) bool {
	switch t.Kind() {
	case reflect.Bool:
		return func(p unsafe.Pointer) bool { return !*(*bool)(p) }
	case reflect.Int8, reflect.Uint8:
		return func(p unsafe.Pointer) bool { return *(*uint8)(p) == 0 }
	case reflect.Int16, reflect.Uint16:
		return func(p unsafe.Pointer) bool { return *(*uint16)(p) == 0 }
	case reflect.Int32, reflect.Uint32:
		return func(p unsafe.Pointer) bool { return *(*uint32)(p) == 0 }
	case reflect.Int64, reflect.Uint64:
		return func(p unsafe.Pointer) bool { return *(*uint64)(p) == 0 }
	case reflect.Int, reflect.Uint, reflect.Uintptr:
		return func(p unsafe.Pointer) bool { return *(*uintptr)(p) == 0 }
	case reflect.Float32:
		return func(p unsafe.Pointer) bool { return *(*float32)(p) == 0 }
	case reflect.Float64:
		return func(p unsafe.Pointer) bool { return *(*float64)(p) == 0 }
	}
	return nil
}

// errNotPointer is the error of a Decode target that is not a non-nil
// pointer.
var errNotPointer = errors.New("need a non-nil pointer")
