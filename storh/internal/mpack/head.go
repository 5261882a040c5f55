package mpack

import "time"

// Kind is the type of a msgpack value as its header gives it.
type Kind uint8

// The kinds ReadHead reports. Integers keep their signedness: a positive
// value written as a signed integer is KindInt, one written as a fixint or
// unsigned integer is KindUint.
const (
	KindNil     = Kind(kNil)
	KindFalse   = Kind(kFalse)
	KindTrue    = Kind(kTrue)
	KindInt     = Kind(kInt)
	KindUint    = Kind(kUint)
	KindFloat32 = Kind(kFloat32)
	KindFloat64 = Kind(kFloat64)
	KindStr     = Kind(kStr)
	KindBin     = Kind(kBin)
	KindExt     = Kind(kExt)
	KindArray   = Kind(kArray)
	KindMap     = Kind(kMap)
)

// Head is the header of one msgpack value, as ReadHead parses it.
type Head struct {
	Kind Kind
	// Size is the length of the header in bytes: the type code, any length
	// field and, for an extension, its type byte. For the scalars it is
	// the whole value.
	Size int
	// N is the payload length of a str, bin or ext value and the number of
	// elements of an array or of entries (key-value pairs) of a map.
	N int
	// Bits is the value of a number: int64(Bits) for KindInt, Bits for
	// KindUint, the IEEE 754 bits for KindFloat32 (low 32 bits) and
	// KindFloat64.
	Bits uint64
	// Ext is the extension type of a KindExt value.
	Ext int8
}

// ReadHead parses the header of the value that starts at b[pos], without
// allocating. It checks that a str, bin or ext payload lies inside b and
// that an array or map count is plausible for the bytes left (at least one
// byte per element), but reads neither the payload nor the elements: the
// value's remaining rules (string and unique map keys, MaxDepth, timestamps
// as the only extension) are the caller's to apply, as Decode does. Errors
// wrap ErrMalformed.
//
// It exists for readers outside this package that must walk raw values
// without decoding them, such as the index key encoder.
func ReadHead(b []byte, pos int) (Head, error) {
	h, err := readHead(b, pos)
	if err != nil {
		return Head{}, err
	}
	return Head{Kind: Kind(h.k), Size: h.size, N: h.n, Bits: h.u, Ext: h.ext}, nil
}

// Timestamp decodes the extension value whose header h starts at b[pos] as
// Decode does: a msgpack timestamp in one of its three forms, with
// nanoseconds below 10^9, in UTC. Another extension type is ErrUnsupported,
// a bad length or nanoseconds field ErrMalformed. It allocates nothing.
func (h Head) Timestamp(b []byte, pos int) (time.Time, error) {
	p := pos + h.Size
	return timestamp(h.Ext, b[p:p+h.N], p)
}
