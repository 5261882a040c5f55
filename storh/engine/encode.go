package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
)

// The generic record form, map[string]any, is what most callers write, and
// the msgpack library spends most of a bulk load on it: reflection for every
// value, an allocated key slice to sort each map, and the separate walks
// that guard depth (checkShape) and validity (mpack.ValidateRecord). This
// encoder handles that form in one pass with no allocation, producing the
// same bytes as the library configured with SetSortMapKeys(true) and
// UseCompactInts(true) (encode_test.go holds it to that). A value of any
// other type makes it give up, and the library encodes the record instead.

// mapEncoder holds the reusable key stack of the fast path.
type mapEncoder struct {
	keys []string // a stack: each map level sorts its keys in its own window
}

// appendFast appends the encoding of m to dst. handled is false when m holds
// a type the fast path does not know; dst is then returned unchanged.
func (e *mapEncoder) appendFast(dst []byte, m map[string]any) (out []byte, handled bool, err error) {
	start := len(dst)
	out, handled, err = e.appendMap(dst, m, 1, start)
	if !handled || err != nil {
		e.keys = e.keys[:0]
		return dst[:start], handled, err
	}
	return out, true, nil
}

func (e *mapEncoder) appendMap(b []byte, m map[string]any, depth, start int) ([]byte, bool, error) {
	if depth > MaxDepth {
		return b, true, errTooDeep()
	}
	b = appendLen(b, len(m), 0x80, 16, 0xde, 0xdf)
	base := len(e.keys)
	for k := range m {
		e.keys = append(e.keys, k)
	}
	slices.Sort(e.keys[base:])
	for i := base; i < base+len(m); i++ {
		k := e.keys[i] // re-read: nested maps may have moved the stack
		b = appendStr(b, k)
		var ok bool
		var err error
		if b, ok, err = e.appendAny(b, m[k], depth, start); !ok || err != nil {
			return b, ok, err
		}
	}
	e.keys = e.keys[:base]
	return b, true, nil
}

func (e *mapEncoder) appendAny(b []byte, v any, depth, start int) ([]byte, bool, error) {
	if len(b)-start > MaxRecordSize {
		return b, true, fmt.Errorf("%w: record is over %d bytes encoded", ErrInvalidData, MaxRecordSize)
	}
	switch x := v.(type) {
	case nil:
		return append(b, 0xc0), true, nil
	case string:
		return appendStr(b, x), true, nil
	case bool:
		if x {
			return append(b, 0xc3), true, nil
		}
		return append(b, 0xc2), true, nil
	case int:
		return appendInt(b, int64(x)), true, nil
	case int64:
		return appendInt(b, x), true, nil
	case int32:
		return appendInt(b, int64(x)), true, nil
	case int16:
		return appendInt(b, int64(x)), true, nil
	case int8:
		return appendInt(b, int64(x)), true, nil
	case uint:
		return appendUint(b, uint64(x)), true, nil
	case uint64:
		return appendUint(b, x), true, nil
	case uint32:
		return appendUint(b, uint64(x)), true, nil
	case uint16:
		return appendUint(b, uint64(x)), true, nil
	case uint8:
		return appendUint(b, uint64(x)), true, nil
	case float64:
		b = append(b, 0xcb)
		return binary.BigEndian.AppendUint64(b, math.Float64bits(x)), true, nil
	case float32:
		b = append(b, 0xca)
		return binary.BigEndian.AppendUint32(b, math.Float32bits(x)), true, nil
	case []byte:
		if x == nil {
			return append(b, 0xc0), true, nil
		}
		b = appendLen(b, len(x), 0, 0, 0xc4, 0xc5, 0xc6)
		return append(b, x...), true, nil
	case time.Time:
		return appendTime(b, x), true, nil
	case map[string]any:
		if x == nil {
			return append(b, 0xc0), true, nil
		}
		return e.appendMap(b, x, depth+1, start)
	case []any:
		if x == nil {
			return append(b, 0xc0), true, nil
		}
		if depth+1 > MaxDepth {
			return b, true, errTooDeep()
		}
		b = appendLen(b, len(x), 0x90, 16, 0xdc, 0xdd)
		for _, el := range x {
			var ok bool
			var err error
			if b, ok, err = e.appendAny(b, el, depth+1, start); !ok || err != nil {
				return b, ok, err
			}
		}
		return b, true, nil
	}
	return b, false, nil
}

// appendLen writes a container or string header: the fix form (fixBase|n)
// when n < fixLimit, else the 8-, 16- or 32-bit form. Codes not used by a
// family are passed as 0 (maps and arrays have no 8-bit form; bin has no
// fix form).
func appendLen(b []byte, n int, fixBase byte, fixLimit int, codes ...byte) []byte {
	if n < fixLimit {
		return append(b, fixBase|byte(n))
	}
	if len(codes) == 3 { // str8/bin8 exist
		if n <= math.MaxUint8 {
			return append(b, codes[0], byte(n))
		}
		codes = codes[1:]
	}
	if n <= math.MaxUint16 {
		return binary.BigEndian.AppendUint16(append(b, codes[0]), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, codes[1]), uint32(n))
}

func appendStr(b []byte, s string) []byte {
	b = appendLen(b, len(s), 0xa0, 32, 0xd9, 0xda, 0xdb)
	return append(b, s...)
}

// appendUint and appendInt pick the smallest encoding, as the library does
// with UseCompactInts.
func appendUint(b []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(b, byte(n))
	case n <= math.MaxUint8:
		return append(b, 0xcc, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), n)
}

func appendInt(b []byte, n int64) []byte {
	switch {
	case n >= 0:
		return appendUint(b, uint64(n))
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, 0xd0, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

// appendTime writes the msgpack timestamp extension (type -1) in its
// smallest form, as the library does.
func appendTime(b []byte, t time.Time) []byte {
	secs := uint64(t.Unix())
	if secs>>34 == 0 {
		data := uint64(t.Nanosecond())<<34 | secs
		if data&0xffffffff00000000 == 0 {
			return binary.BigEndian.AppendUint32(append(b, 0xd6, 0xff), uint32(data))
		}
		return binary.BigEndian.AppendUint64(append(b, 0xd7, 0xff), data)
	}
	b = append(b, 0xc7, 12, 0xff)
	b = binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
	return binary.BigEndian.AppendUint64(b, secs)
}
