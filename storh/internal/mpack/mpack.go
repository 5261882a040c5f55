package mpack

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var (
	// ErrMalformed is returned when the input is not well-formed msgpack for
	// the call: truncated input, the reserved code 0xc1, trailing bytes after
	// a record or a value, a map key that is not a string, a duplicate map
	// key, a record that is not a map, or a timestamp extension whose length
	// or nanoseconds field is out of range.
	ErrMalformed = errors.New("mpack: malformed msgpack")

	// ErrTooDeep is returned when maps and arrays are nested more than
	// MaxDepth levels, or when Normalize meets a Go value nested that deep
	// (which includes a cyclic value).
	ErrTooDeep = errors.New("mpack: nesting too deep")

	// ErrUnsupported is returned for extension types other than -1
	// (timestamp) in stored data, and by Normalize and EqualRaw for Go values
	// that have no normalised form (structs, channels, functions, maps with
	// non-string keys, ...).
	ErrUnsupported = errors.New("mpack: unsupported type")
)

// MaxDepth is the deepest nesting of maps and arrays accepted. The top-level
// map of a record is depth 1, so a record may hold 63 further levels.
const MaxDepth = 64

// Extension types a record may hold: the msgpack specification's timestamp,
// and storh's own typed ids, so that an id stored in a field keeps its type.
const (
	extTimestamp = -1
	// ExtUUID holds a UUID (uuidv7.UUID): its 16 bytes, big-endian as in
	// its text form. Decoded as uuidv7.UUID.
	ExtUUID = 1
	// ExtObjectID holds a MongoDB ObjectID (objectid.ObjectID): its 12
	// bytes. Decoded as objectid.ObjectID.
	ExtObjectID = 2
)

type kind uint8

const (
	kNil kind = iota
	kFalse
	kTrue
	kInt     // signed: value is int64(h.u)
	kUint    // unsigned: value is h.u
	kFloat32 // bits in h.u
	kFloat64 // bits in h.u
	kStr     // h.n payload bytes follow the header
	kBin
	kExt // h.ext is the type, h.n payload bytes follow the header
	kArray
	kMap // h.n pairs follow
)

// head is a parsed value header. readHead guarantees that a str, bin or ext
// payload lies inside the input and that an array or map count is plausible,
// so callers can slice and preallocate without checking again.
type head struct {
	k    kind
	ext  int8
	size int // header bytes, including the code and any ext type byte
	n    int // payload length (str, bin, ext) or element count (array, map)
	u    uint64
}

func tooDeepAt(pos int) error {
	return fmt.Errorf("%w: more than %d levels at offset %d", ErrTooDeep, MaxDepth, pos)
}

func truncated(pos int) error {
	return fmt.Errorf("%w: truncated at offset %d", ErrMalformed, pos)
}

// be reads a w-byte big-endian unsigned integer at b[pos:]; ok is false if
// the input is too short.
func be(b []byte, pos, w int) (uint64, bool) {
	if w > len(b)-pos {
		return 0, false
	}
	switch w {
	case 1:
		return uint64(b[pos]), true
	case 2:
		return uint64(binary.BigEndian.Uint16(b[pos:])), true
	case 4:
		return uint64(binary.BigEndian.Uint32(b[pos:])), true
	default:
		return binary.BigEndian.Uint64(b[pos:]), true
	}
}

// readHead parses the header of the value starting at b[pos]. The most
// frequent codes are tested first.
func readHead(b []byte, pos int) (head, error) {
	if pos >= len(b) {
		return head{}, truncated(pos)
	}
	c := b[pos]
	switch {
	case c <= 0x7f:
		return head{k: kUint, size: 1, u: uint64(c)}, nil
	case c >= 0xe0:
		return head{k: kInt, size: 1, u: uint64(int64(int8(c)))}, nil
	case c <= 0x8f:
		return counted(b, pos, kMap, 1, uint64(c&0x0f))
	case c <= 0x9f:
		return counted(b, pos, kArray, 1, uint64(c&0x0f))
	case c <= 0xbf:
		return sized(b, pos, kStr, 1, uint64(c&0x1f))
	}
	switch c {
	case 0xc0:
		return head{k: kNil, size: 1}, nil
	case 0xc2:
		return head{k: kFalse, size: 1}, nil
	case 0xc3:
		return head{k: kTrue, size: 1}, nil
	case 0xc4, 0xc5, 0xc6: // bin 8/16/32
		return lengthPrefixed(b, pos, kBin, 1<<(c-0xc4))
	case 0xc7, 0xc8, 0xc9: // ext 8/16/32: length, then type
		w := 1 << (c - 0xc7)
		n, ok := be(b, pos+1, w)
		if !ok || pos+1+w >= len(b) {
			return head{}, truncated(pos)
		}
		h, err := sized(b, pos, kExt, 2+w, n)
		h.ext = int8(b[pos+1+w])
		return h, err
	case 0xca, 0xcb: // float 32/64
		w := 4 << (c - 0xca)
		u, ok := be(b, pos+1, w)
		if !ok {
			return head{}, truncated(pos)
		}
		return head{k: kFloat32 + kind(c-0xca), size: 1 + w, u: u}, nil
	case 0xcc, 0xcd, 0xce, 0xcf: // uint 8/16/32/64
		w := 1 << (c - 0xcc)
		u, ok := be(b, pos+1, w)
		if !ok {
			return head{}, truncated(pos)
		}
		return head{k: kUint, size: 1 + w, u: u}, nil
	case 0xd0, 0xd1, 0xd2, 0xd3: // int 8/16/32/64, sign-extended
		w := 1 << (c - 0xd0)
		u, ok := be(b, pos+1, w)
		if !ok {
			return head{}, truncated(pos)
		}
		shift := 64 - 8*w
		return head{k: kInt, size: 1 + w, u: uint64(int64(u<<shift) >> shift)}, nil
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1/2/4/8/16: type, then payload
		if pos+1 >= len(b) {
			return head{}, truncated(pos)
		}
		h, err := sized(b, pos, kExt, 2, 1<<(c-0xd4))
		h.ext = int8(b[pos+1])
		return h, err
	case 0xd9, 0xda, 0xdb: // str 8/16/32
		return lengthPrefixed(b, pos, kStr, 1<<(c-0xd9))
	case 0xdc, 0xdd: // array 16/32
		w := 2 << (c - 0xdc)
		n, ok := be(b, pos+1, w)
		if !ok {
			return head{}, truncated(pos)
		}
		return counted(b, pos, kArray, 1+w, n)
	case 0xde, 0xdf: // map 16/32
		w := 2 << (c - 0xde)
		n, ok := be(b, pos+1, w)
		if !ok {
			return head{}, truncated(pos)
		}
		return counted(b, pos, kMap, 1+w, n)
	}
	return head{}, fmt.Errorf("%w: reserved code 0x%02x at offset %d", ErrMalformed, c, pos)
}

func lengthPrefixed(b []byte, pos int, k kind, w int) (head, error) {
	n, ok := be(b, pos+1, w)
	if !ok {
		return head{}, truncated(pos)
	}
	return sized(b, pos, k, 1+w, n)
}

// sized checks that a payload of n bytes after a size-byte header fits. The
// comparison is done in uint64 so a 32-bit length can never overflow int.
func sized(b []byte, pos int, k kind, size int, n uint64) (head, error) {
	if n > uint64(len(b)-pos-size) {
		return head{}, truncated(pos)
	}
	return head{k: k, size: size, n: int(n)}, nil
}

// counted rejects element counts the remaining input cannot possibly hold
// (every element needs at least one byte), so a declared length of 2^32 with
// a few bytes of input fails before anything loops over it or allocates for
// it.
func counted(b []byte, pos int, k kind, size int, n uint64) (head, error) {
	need := n
	if k == kMap {
		need = 2 * n
	}
	if need > uint64(len(b)-pos-size) {
		return head{}, truncated(pos)
	}
	return head{k: k, size: size, n: int(n)}, nil
}

// fixedSize holds the encoded size of every value whose size its first byte
// alone determines (fixints, nil, bools, numbers, fixstr, fixext), and 0
// for the rest, including empty containers, which count towards MaxDepth. It lets the hot loops step over the
// common values without a full header parse.
var fixedSize = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
			t[c] = 1
		case c >= 0xa0 && c <= 0xbf:
			t[c] = uint8(1 + c&0x1f)
		case c == 0xca || c == 0xcb:
			t[c] = uint8(1 + 4<<(c-0xca))
		case c >= 0xcc && c <= 0xcf:
			t[c] = uint8(1 + 1<<(c-0xcc))
		case c >= 0xd0 && c <= 0xd3:
			t[c] = uint8(1 + 1<<(c-0xd0))
		case c >= 0xd4 && c <= 0xd8:
			t[c] = uint8(2 + 1<<(c-0xd4))
		}
	}
	return t
}()

// skipFast returns where the value at b[pos] ends if fixedSize knows its
// size and it fits in b; ok false means the caller must parse the header.
func skipFast(b []byte, pos int) (end int, ok bool) {
	if pos < len(b) {
		c := b[pos]
		if n := int(fixedSize[c]); n != 0 && n <= len(b)-pos {
			return pos + n, true
		}
		// Short strings are the most common variable-size values; sizing
		// them here saves a full header parse per skipped field.
		var n int
		switch {
		case c&0xe0 == 0xa0: // fixstr
			n = 1 + int(c&0x1f)
		case (c == 0xd9 || c == 0xc4) && pos+1 < len(b): // str8, bin8
			n = 2 + int(b[pos+1])
		default:
			return 0, false
		}
		if n <= len(b)-pos {
			return pos + n, true
		}
	}
	return 0, false
}

// Skip returns the byte length of the first complete msgpack value in b. It
// checks structure only: any extension type and any map key type is
// accepted, but nesting is limited to MaxDepth.
//
// Skip walks containers with an explicit stack, so its cost is linear in the
// value's size and it never recurses.
func Skip(b []byte) (int, error) {
	if end, ok := skipFast(b, 0); ok {
		return end, nil
	}
	h, err := readHead(b, 0)
	if err != nil {
		return 0, err
	}
	if (h.k == kArray || h.k == kMap) && h.n > 0 {
		return skipContainer(b, h)
	}
	return h.size + h.n, nil // n is 0 for scalars and empty containers
}

// skipContainer finishes Skip for a non-empty container; it is separate so
// the common scalar case does not pay for zeroing the stack.
func skipContainer(b []byte, h head) (int, error) {
	var left [MaxDepth]int // values still to read in each open container
	depth, pos := 0, 0
	for {
		switch {
		case h.k != kArray && h.k != kMap:
			pos += h.size + h.n
			depth = completed(&left, depth)
		case depth == MaxDepth:
			return 0, tooDeepAt(pos)
		case h.n == 0:
			pos += h.size
			depth = completed(&left, depth)
		default:
			pos += h.size
			left[depth] = h.n
			if h.k == kMap {
				left[depth] *= 2
			}
			depth++
		}
		for depth > 0 { // step over fixed-size values without parsing them
			end, ok := skipFast(b, pos)
			if !ok {
				break
			}
			pos, depth = end, completed(&left, depth)
		}
		if depth == 0 {
			return pos, nil
		}
		var err error
		if h, err = readHead(b, pos); err != nil {
			return 0, err
		}
	}
}

// completed counts one value read in the innermost open container, closes
// every container that this completes and returns the new depth.
func completed(left *[MaxDepth]int, depth int) int {
	for depth > 0 {
		left[depth-1]--
		if left[depth-1] > 0 {
			return depth
		}
		depth--
	}
	return 0
}
