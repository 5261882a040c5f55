package codec

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/storhdb/storh-go/storh/internal/mpack"
)

// The msgpack writers. Every one picks the smallest form, exactly as the
// msgpack library does with UseCompactInts(true): the bytes of equal data
// never depend on the Go type that carried it.

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

func appendMapLen(b []byte, n int) []byte {
	if n < 16 {
		return append(b, 0x80|byte(n))
	}
	return appendLen(b, n, 0x80, 16, 0xde, 0xdf)
}

func appendArrayLen(b []byte, n int) []byte {
	if n < 16 {
		return append(b, 0x90|byte(n))
	}
	return appendLen(b, n, 0x90, 16, 0xdc, 0xdd)
}

func appendStr(b []byte, s string) []byte {
	if len(s) < 32 {
		return append(append(b, 0xa0|byte(len(s))), s...)
	}
	b = appendLen(b, len(s), 0xa0, 32, 0xd9, 0xda, 0xdb)
	return append(b, s...)
}

// appendBin writes b as bin; a nil slice is msgpack nil, as the library
// writes it.
func appendBin(b, v []byte) []byte {
	if v == nil {
		return append(b, 0xc0)
	}
	b = appendLen(b, len(v), 0, 0, 0xc4, 0xc5, 0xc6)
	return append(b, v...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

// appendUint and appendInt pick the smallest encoding, with non-negative
// values in the unsigned family, as the library does with UseCompactInts.
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

func appendFloat32(b []byte, f float32) []byte {
	return binary.BigEndian.AppendUint32(append(b, 0xca), math.Float32bits(f))
}

func appendFloat64(b []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(f))
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

// appendUUID writes storh's UUID extension: fixext16 of type ExtUUID.
func appendUUID(b []byte, u *[16]byte) []byte {
	return append(append(b, 0xd8, mpack.ExtUUID), u[:]...)
}

// appendObjectID writes storh's ObjectID extension: ext8 of 12 bytes of
// type ExtObjectID (12 is no fixext size).
func appendObjectID(b []byte, id *[12]byte) []byte {
	return append(append(b, 0xc7, 12, mpack.ExtObjectID), id[:]...)
}
