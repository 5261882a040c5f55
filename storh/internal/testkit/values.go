package testkit

import (
	"math"
	"time"

	"pgregory.net/rapid"
)

var zone = time.FixedZone("UTC+1", 3600)

// goTime draws a time in each of msgpack's three timestamp forms, in UTC or
// a fixed zone.
func goTime(t *rapid.T) time.Time {
	var tm time.Time
	switch rapid.IntRange(0, 2).Draw(t, "timeForm") {
	case 0: // 4-byte form
		tm = time.Unix(rapid.Int64Range(0, 1<<32-1).Draw(t, "sec"), 0)
	case 1: // 8-byte form
		tm = time.Unix(rapid.Int64Range(0, 1<<34-1).Draw(t, "sec"), rapid.Int64Range(0, 999_999_999).Draw(t, "nsec"))
	default: // 12-byte form
		tm = time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, "sec"), rapid.Int64Range(0, 999_999_999).Draw(t, "nsec"))
	}
	if rapid.Bool().Draw(t, "zoned") {
		tm = tm.In(zone)
	}
	return tm
}

var specialFloats = []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, 1, -1, 0.1}

// GoValue draws a Go value as a user might store it: every integer width,
// floats (NaN, infinities and -0 among them), short and long strings,
// bytes, times, typed and empty containers, and nested lists and maps up
// to depth 4 (depth counts the containers above the value).
func GoValue(t *rapid.T, depth int) any {
	max := 25
	if depth >= 4 {
		max = 20 // scalars only (the empty containers of 19 nest no further)
	}
	switch rapid.IntRange(0, max).Draw(t, "kind") {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, "bool")
	case 2:
		return rapid.Int().Draw(t, "int")
	case 3:
		return rapid.Int8().Draw(t, "int8")
	case 4:
		return rapid.Int16().Draw(t, "int16")
	case 5:
		return rapid.Int32().Draw(t, "int32")
	case 6:
		return rapid.Int64().Draw(t, "int64")
	case 7:
		return rapid.Uint().Draw(t, "uint")
	case 8:
		return rapid.Uint8().Draw(t, "uint8")
	case 9:
		return rapid.Uint16().Draw(t, "uint16")
	case 10:
		return rapid.Uint32().Draw(t, "uint32")
	case 11:
		return rapid.Uint64().Draw(t, "uint64")
	case 12: // small numbers in many types, so that fields often compare equal
		n := rapid.IntRange(-2, 2).Draw(t, "small")
		return rapid.SampledFrom([]any{n, int8(n), uint64(n & 3), float32(n), float64(n), string(rune('0' + n&3))}).Draw(t, "smallAs")
	case 13:
		return rapid.Float32().Draw(t, "float32")
	case 14:
		return rapid.Float64().Draw(t, "float64")
	case 15:
		return rapid.SampledFrom(specialFloats).Draw(t, "special")
	case 16:
		return rapid.String().Draw(t, "string")
	case 17:
		return rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")
	case 18:
		return goTime(t)
	case 19:
		return rapid.SampledFrom([]any{[]byte(nil), []any(nil), map[string]any(nil), "", []byte{}}).Draw(t, "empty")
	case 20:
		return rapid.StringN(30, 300, 70000).Draw(t, "long") // strings past msgpack's 8- and 16-bit lengths
	case 21:
		return rapid.SliceOfN(rapid.Int16(), 0, 4).Draw(t, "ints")
	case 22:
		return rapid.MapOfN(rapid.StringN(0, 3, -1), rapid.String(), 0, 3).Draw(t, "strmap")
	case 23, 24:
		n := rapid.IntRange(0, 4).Draw(t, "len")
		a := make([]any, n)
		for i := range a {
			a[i] = GoValue(t, depth+1)
		}
		return a
	}
	return GoMap(t, depth+1)
}

// GoMap draws a record's map of GoValues at depth.
func GoMap(t *rapid.T, depth int) map[string]any {
	n := rapid.IntRange(0, 10).Draw(t, "fields")
	m := make(map[string]any, n)
	for range n {
		m[rapid.StringN(0, 6, -1).Draw(t, "key")] = GoValue(t, depth)
	}
	return m
}
