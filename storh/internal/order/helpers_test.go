package order_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

type fataler interface {
	Helper()
	Fatalf(string, ...any)
}

func hx(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// key is Append that fails the test on error.
func key(t fataler, v any) []byte {
	t.Helper()
	k, err := order.Append(nil, v)
	if err != nil {
		t.Fatalf("Append(%s): %v", show(v), err)
	}
	return k
}

func rawKey(t fataler, raw []byte) []byte {
	t.Helper()
	k, err := order.AppendRaw(nil, raw)
	if err != nil {
		t.Fatalf("AppendRaw(%x): %v", raw, err)
	}
	return k
}

// encodeLib writes v with the msgpack library, as the engine does when
// compactInts and sorted are true. With float32, every float64 that
// float32 holds exactly is written as a float32.
func encodeLib(t fataler, v any, compactInts, float32s, sorted bool) []byte {
	t.Helper()
	if float32s {
		v = narrowFloats(v)
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(compactInts)
	enc.SetSortMapKeys(sorted)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("msgpack encode %s: %v", show(v), err)
	}
	return buf.Bytes()
}

// narrowFloats returns v with every float64 that float32 holds exactly,
// NaN included, replaced by a float32, at every depth. (The library's
// UseCompactFloats is no help: it writes integral floats as integers.)
func narrowFloats(v any) any {
	switch x := v.(type) {
	case float64:
		if f := float32(x); float64(f) == x || x != x {
			return f
		}
	case []any:
		if x == nil {
			return v
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = narrowFloats(e)
		}
		return out
	case map[string]any:
		if x == nil {
			return v
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = narrowFloats(e)
		}
		return out
	}
	return v
}

func sign(c int) int {
	switch {
	case c < 0:
		return -1
	case c > 0:
		return 1
	}
	return 0
}

func isSentinel(err error) bool {
	return errors.Is(err, mpack.ErrMalformed) || errors.Is(err, mpack.ErrTooDeep) || errors.Is(err, mpack.ErrUnsupported)
}

// show formats a value with its Go types, which %v hides (1 and 1.0, "1").
func show(v any) string {
	switch x := v.(type) {
	case float64:
		return fmt.Sprintf("float64(%v, %#x)", x, math.Float64bits(x))
	case time.Time:
		return fmt.Sprintf("time(%d.%09d)", x.Unix(), x.Nanosecond())
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = show(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		parts := make([]string, 0, len(x))
		for k, e := range x {
			parts = append(parts, fmt.Sprintf("%q: %s", k, show(e)))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprintf("%T(%#v)", v, v)
}

// decodeKey reads the first key in b back into a normalised value and
// returns it with the key's length. It is the test's constructive proof
// that keys are prefix-free: it decides where a key ends from the key's
// own bytes, whatever follows. Numbers come back as the value they encode
// (an integer F+r, or the float F), NaN as math.NaN().
func decodeKey(b []byte) (any, int, error) {
	bad := func(pos int, what string) (any, int, error) {
		return nil, 0, fmt.Errorf("bad key at %d: %s", pos, what)
	}
	if len(b) == 0 {
		return bad(0, "empty")
	}
	switch b[0] {
	case order.TagNull:
		return nil, 1, nil
	case order.TagFalse:
		return false, 1, nil
	case order.TagTrue:
		return true, 1, nil
	case order.TagNumber:
		if len(b) < order.NumberLen {
			return bad(0, "short number")
		}
		e := binary.BigEndian.Uint64(b[1:])
		r := uint64(binary.BigEndian.Uint16(b[9:]))
		kind := b[11]
		if e == 0 {
			if r != 0 || kind != 1 {
				return bad(0, "NaN with r or int kind")
			}
			return math.NaN(), order.NumberLen, nil
		}
		bits := ^e
		if e>>63 != 0 {
			bits = e &^ (1 << 63)
		}
		f := math.Float64frombits(bits)
		switch {
		case kind == 1 && r == 0:
			return f, order.NumberLen, nil
		case kind != 0 || math.IsInf(f, 0) || f != math.Trunc(f):
			return bad(0, "bad number kind or integer")
		case f >= 0x1p64 || f < -0x1p63:
			return bad(0, "integer out of range")
		case f >= 0:
			u := uint64(f) + r
			if u < uint64(f) {
				return bad(0, "integer out of range")
			}
			if u > math.MaxInt64 {
				return u, order.NumberLen, nil
			}
			return int64(u), order.NumberLen, nil
		default:
			if uint64(-f) < r {
				return bad(0, "integer out of range")
			}
			m := uint64(-f) - r
			return int64(-m), order.NumberLen, nil
		}
	case order.TagString, order.TagBytes:
		s, n, err := unescape(b, 1)
		if err != nil {
			return nil, 0, err
		}
		if b[0] == order.TagString {
			return string(s), n, nil
		}
		return s, n, nil
	case order.TagTime:
		if len(b) < 13 {
			return bad(0, "short time")
		}
		sec := int64((binary.BigEndian.Uint64(b[1:]) ^ 1<<63) - order.UnixToInternal)
		nsec := binary.BigEndian.Uint32(b[9:])
		if nsec > 999_999_999 {
			return bad(9, "nanoseconds")
		}
		return time.Unix(sec, int64(nsec)).UTC(), 13, nil
	case order.TagUUID:
		if len(b) < 17 {
			return bad(0, "short uuid")
		}
		return uuidv7.UUID(b[1:17]), 17, nil
	case order.TagObjectID:
		if len(b) < 13 {
			return bad(0, "short objectid")
		}
		return objectid.ObjectID(b[1:13]), 13, nil
	case order.TagList:
		out, pos := []any{}, 1
		for {
			if pos >= len(b) {
				return bad(pos, "unterminated list")
			}
			if b[pos] == 0 {
				return out, pos + 1, nil
			}
			v, n, err := decodeKey(b[pos:])
			if err != nil {
				return nil, 0, err
			}
			out, pos = append(out, v), pos+n
		}
	case order.TagMap:
		out, pos := map[string]any{}, 1
		prev := ""
		for {
			if pos >= len(b) {
				return bad(pos, "unterminated map")
			}
			switch b[pos] {
			case 0:
				return out, pos + 1, nil
			case 1:
			default:
				return bad(pos, "map entry marker")
			}
			k, n, err := unescape(b, pos+1)
			if err != nil {
				return nil, 0, err
			}
			if len(out) > 0 && string(k) <= prev {
				return bad(pos, "map keys out of order")
			}
			prev = string(k)
			v, vn, err := decodeKey(b[n:])
			if err != nil {
				return nil, 0, err
			}
			out[prev], pos = v, n+vn
		}
	}
	return bad(0, "unknown tag")
}

// unescape reads escaped content from b[pos] up to its terminator and
// returns it and where the terminator ends.
func unescape(b []byte, pos int) ([]byte, int, error) {
	out := []byte{}
	for {
		i := bytes.IndexByte(b[pos:], 0)
		if i < 0 || pos+i+1 >= len(b) {
			return nil, 0, fmt.Errorf("bad key at %d: unterminated content", pos)
		}
		out = append(out, b[pos:pos+i]...)
		pos += i + 2
		switch b[pos-1] {
		case 0x01:
			return out, pos, nil
		case 0xFF:
			out = append(out, 0)
		default:
			return nil, 0, fmt.Errorf("bad key at %d: 0x00 followed by %#x", pos-2, b[pos-1])
		}
	}
}
