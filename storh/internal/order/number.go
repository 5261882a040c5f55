package order

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/storhdb/storh-go/storh/internal/mpack"
)

// A number x is keyed by three fields, compared in this order:
//
//	F     the largest float64 <= x, as 8 order-preserving bytes (fbits)
//	r     x - F, an integer in [0, 2048), 2 bytes big-endian
//	kind  0x00 for an integer, 0x01 for a float
//
// A float is its own F with r = 0. So is an integer of magnitude at most
// 2^53, which float64 holds exactly. A larger integer lies between two
// adjacent float64s whose distance is a power of two 2^s with s <= 11 (it is
// below 2^64, where the spacing is 2^(64-53)), so r < 2^11 fits in 2 bytes.
//
// Claim: for numbers x and y, x < y exactly when (F(x), r(x)) < (F(y),
// r(y)) lexicographically, and x = y exactly when both pairs are equal.
// Proof: x = F(x) + r(x) and F is a function of x, so x = y gives equal
// pairs. If x < y then F(x) <= F(y), since F(x) is a float64 <= x < y and
// F(y) is the largest such float64 <= y. Either F(x) < F(y), or F(x) = F(y)
// and then r(x) = x - F < y - F = r(y). Both cases give (F(x), r(x)) <
// (F(y), r(y)); by symmetry y < x gives the reverse, and the three cases
// exhaust the possibilities because numbers are totally ordered. At equal
// value the pairs are equal and the kind byte puts the integer first.
//
// fbits maps float64s to big-endian bytes in their numeric order: a
// non-negative float has its sign bit set, which lifts it above every
// negative one, and a negative float has all bits flipped, which reverses
// the order of magnitudes. -0 is keyed as +0. Every NaN gets the bytes 0,
// which no number uses (it would take a NaN with its sign bit set and all
// other bits set), and 0 is below fbits(-Inf) = 0x000FFFFFFFFFFFFF: so NaN
// sorts before every number, and all NaNs are equal.

// fbits returns the order-preserving bits of f.
func fbits(f float64) uint64 {
	if f != f {
		return 0
	}
	if f == 0 {
		f = 0 // -0 to +0
	}
	b := math.Float64bits(f)
	if b>>63 != 0 {
		return ^b
	}
	return b | 1<<63
}

// splitUint returns F and r for the integer u.
func splitUint(u uint64) (float64, uint64) {
	if u <= 1<<53 {
		return float64(u), 0
	}
	shift := bits.Len64(u) - 53 // the spacing of float64s near u is 2^shift
	t := u >> shift << shift    // u rounded down to that spacing: exact
	return float64(t), u - t
}

// splitInt returns F and r for the integer x.
func splitInt(x int64) (float64, uint64) {
	if x >= 0 {
		return splitUint(uint64(x))
	}
	u := -uint64(x) // |x|, right for math.MinInt64 too
	if u <= 1<<53 {
		return -float64(u), 0
	}
	// F is minus the smallest float64 >= u, which is u rounded up to the
	// spacing of float64s near u (possibly up to the next power of two,
	// at most 2^63, which is exact).
	shift := bits.Len64(u) - 53
	t := u >> shift << shift
	if t != u {
		t += 1 << shift
	}
	return -float64(t), t - u
}

func appendNumber(dst []byte, f float64, r uint64, kind byte) []byte {
	dst = binary.BigEndian.AppendUint64(append(dst, TagNumber), fbits(f))
	return append(dst, byte(r>>8), byte(r), kind)
}

func appendInt(dst []byte, x int64) []byte {
	f, r := splitInt(x)
	return appendNumber(dst, f, r, kindInt)
}

func appendUint(dst []byte, u uint64) []byte {
	f, r := splitUint(u)
	return appendNumber(dst, f, r, kindInt)
}

func appendFloat(dst []byte, f float64) []byte {
	return appendNumber(dst, f, 0, kindFloat)
}

// NumberBound appends a key that sorts before every number key of value v
// (after false) or after every one of them (after true), whether integer or
// float: both kinds of a value, and any bytes that follow them in an index
// key, lie between NumberBound(v, false) and NumberBound(v, true). Every
// number key below v in value sorts before the first bound, every one above
// it after the second. A NaN v bounds the NaN keys, so NumberBound(NaN,
// true) is the first key after every NaN.
//
// v must be a number of any Go integer or float type; anything else is an
// error wrapping mpack.ErrUnsupported. The bound is not the key of a value:
// it is NumberLen-1 bytes, F and r without the kind byte, with r incremented
// for after (r < 2048, so that never carries).
func NumberBound(dst []byte, v any, after bool) ([]byte, error) {
	var f float64
	var r uint64
	switch x := v.(type) {
	case int64:
		f, r = splitInt(x)
	case uint64:
		f, r = splitUint(x)
	case float64:
		f = x
	case int:
		f, r = splitInt(int64(x))
	case int32:
		f, r = splitInt(int64(x))
	case int16:
		f, r = splitInt(int64(x))
	case int8:
		f, r = splitInt(int64(x))
	case uint:
		f, r = splitUint(uint64(x))
	case uint32:
		f, r = splitUint(uint64(x))
	case uint16:
		f, r = splitUint(uint64(x))
	case uint8:
		f, r = splitUint(uint64(x))
	case uintptr:
		f, r = splitUint(uint64(x))
	case float32:
		f = float64(x)
	default:
		if Class(v) == TagNumber { // a named numeric type
			norm, _ := mpack.Normalize(v)
			return NumberBound(dst, norm, after)
		}
		return dst, fmt.Errorf("%w: NumberBound of %T, not a number", mpack.ErrUnsupported, v)
	}
	if after {
		r++
	}
	dst = binary.BigEndian.AppendUint64(append(dst, TagNumber), fbits(f))
	return append(dst, byte(r>>8), byte(r)), nil
}

// AfterNaN appends the first key after every NaN key: the start of the
// numbers that compare as numbers. It equals NumberBound(dst, math.NaN(),
// true) and sorts before NumberBound(dst, math.Inf(-1), false).
func AfterNaN(dst []byte) []byte {
	return append(dst, TagNumber, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)
}

// ClassStart appends the least key of class t, the single byte t: every key
// of class t, and any bytes that follow it in an index key, sorts at or
// after it, and every key of a lower class before it. ClassStart(dst, t+1)
// ends class t.
func ClassStart(dst []byte, t Tag) []byte {
	return append(dst, t)
}

// Bound appends the key that starts the values equal to v (after false) or
// the first key past them (after true), for a range over keys: [Bound(v,
// false), Bound(v, true)) holds exactly the keys of values that equal v in
// the order, followed by any bytes. For a number it is NumberBound, so an
// integer and a float of the same value fall on the same side; for any
// other value it is Append(v) and PrefixEnd of that. Errors are Append's.
func Bound(dst []byte, v any, after bool) ([]byte, error) {
	if Class(v) == TagNumber {
		return NumberBound(dst, v, after)
	}
	dst, err := Append(dst, v)
	if err != nil || !after {
		return dst, err
	}
	// The key's first byte is a tag, never 0xFF: PrefixEnd always exists.
	end := len(dst) - 1
	for dst[end] == 0xFF {
		end--
	}
	dst[end]++
	return dst[:end+1], nil
}

// PrefixEnd returns the smallest byte string greater than every string
// that has p as a prefix, or nil when there is none (p is empty or all
// 0xFF). It increments the last byte of p that is not 0xFF and drops what
// follows; the result is a new slice, p is not modified. The strings with
// prefix p are exactly those in [p, PrefixEnd(p)).
func PrefixEnd(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xFF {
			end := append([]byte(nil), p[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}

// StringPrefix appends the key prefix shared by the keys of exactly the
// strings that start with s: the string tag and s escaped, without the
// terminator. Prefix(s) over keys, index keys included, is the range
// [StringPrefix(s), PrefixEnd(StringPrefix(s))), never empty nor unbounded
// (the tag is not 0xFF).
func StringPrefix(dst []byte, s string) []byte {
	return appendEscapedString(append(dst, TagString), s)
}
