package mpack_test

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
)

// encode writes v the way the engine does: sorted map keys, and compact
// integers unless compact is false.
func encode(tb interface {
	Helper()
	Fatalf(string, ...any)
}, v any, compact bool) []byte {
	tb.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(compact)
	if err := enc.Encode(v); err != nil {
		tb.Fatalf("msgpack encode %#v: %v", v, err)
	}
	return buf.Bytes()
}

var zone = time.FixedZone("UTC+1", 3600)

func genTime(t *rapid.T) time.Time {
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

// genValue draws a Go value as a user might store it: every integer width,
// floats, strings, bytes, times, and nested containers up to depth 4.
func genValue(t *rapid.T, depth int) any {
	max := 24
	if depth >= 4 {
		max = 19 // scalars only
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
		return genTime(t)
	case 19:
		return rapid.SampledFrom([]any{[]byte(nil), []any(nil), map[string]any(nil), "", []byte{}}).Draw(t, "empty")
	case 20:
		return rapid.SliceOfN(rapid.Int16(), 0, 4).Draw(t, "ints")
	case 21:
		return rapid.MapOfN(rapid.StringN(0, 3, -1), rapid.String(), 0, 3).Draw(t, "strmap")
	case 22, 23:
		n := rapid.IntRange(0, 4).Draw(t, "len")
		a := make([]any, n)
		for i := range a {
			a[i] = genValue(t, depth+1)
		}
		return a
	}
	return genMap(t, depth+1)
}

func genMap(t *rapid.T, depth int) map[string]any {
	n := rapid.IntRange(0, 10).Draw(t, "fields")
	m := make(map[string]any, n)
	for range n {
		m[rapid.StringN(0, 6, -1).Draw(t, "key")] = genValue(t, depth)
	}
	return m
}

func TestAgreesWithLibrary(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		orig := genMap(t, 1)
		normAny, err := mpack.Normalize(orig)
		if err != nil {
			t.Fatalf("Normalize: %v", err)
		}
		norm := normAny.(map[string]any)
		for _, compact := range []bool{true, false} {
			b := encode(t, orig, compact)
			if err := mpack.ValidateRecord(b); err != nil {
				t.Fatalf("compact=%v ValidateRecord(%x): %v", compact, b, err)
			}
			got, err := mpack.DecodeMap(b)
			if err != nil || !same(got, norm) {
				t.Fatalf("compact=%v DecodeMap(%x) = %#v, %v; want %#v", compact, b, got, err, norm)
			}
			var lib any
			if err := msgpack.Unmarshal(b, &lib); err != nil {
				t.Fatalf("library: %v", err)
			}
			if libNorm, err := mpack.Normalize(lib); err != nil || !same(got, libNorm) {
				t.Fatalf("library decoded %#v (normalised %#v, %v), we decoded %#v", lib, libNorm, err, got)
			}
			checkFields(t, b, norm)
		}
	})
}

// checkFields checks Field, Decode, EqualRaw and Equal against each other on
// every field of an encoded record, and every field against every other.
func checkFields(t *rapid.T, b []byte, norm map[string]any) {
	raws := make(map[string][]byte, len(norm))
	for k, v := range norm {
		raw, ok, err := mpack.Field(b, k)
		if err != nil || !ok {
			t.Fatalf("Field(%q) = %v, %v", k, ok, err)
		}
		dv, n, err := mpack.Decode(raw)
		if err != nil || n != len(raw) || !same(dv, v) {
			t.Fatalf("Decode(Field(%q)) = %#v, %d, %v; want %#v", k, dv, n, err, v)
		}
		raws[k] = raw
	}
	if _, ok, err := mpack.Field(b, "\xffmissing"); ok || err != nil {
		t.Fatalf("Field(missing) = %v, %v", ok, err)
	}
	for k1, raw := range raws {
		for k2, want := range norm {
			eq, err := mpack.EqualRaw(raw, want)
			if err != nil {
				t.Fatalf("EqualRaw(%q, %q): %v", k1, k2, err)
			}
			if model := mpack.Equal(norm[k1], want); eq != model || model != mpack.Equal(want, norm[k1]) {
				t.Fatalf("EqualRaw(%q=%#v, %q=%#v) = %v, Equal both ways = %v, %v",
					k1, norm[k1], k2, want, eq, model, mpack.Equal(want, norm[k1]))
			}
			if k1 == k2 && eq == order.HasNaN(want) {
				t.Fatalf("EqualRaw(%q, itself) = %v", k1, eq)
			}
		}
	}
}

// TestLargeLengths covers the 32-bit length forms, which the random values
// are too small to reach.
func TestLargeLengths(t *testing.T) {
	const n = 70_000
	big := make(map[string]any, n)
	arr := make([]any, n)
	for i := range arr {
		arr[i] = i
		big[strings.Repeat("k", i%7)+string(rune('a'+i%26))+strconv.Itoa(i)] = i
	}
	orig := map[string]any{
		"str": strings.Repeat("s", n),
		"bin": bytes.Repeat([]byte{7}, n),
		"arr": arr,
		"map": big,
	}
	b := encode(t, orig, true)
	for k, code := range map[string]byte{"str": 0xdb, "bin": 0xc6, "arr": 0xdd, "map": 0xdf} {
		raw, ok, err := mpack.Field(b, k)
		if err != nil || !ok || raw[0] != code {
			t.Fatalf("Field(%q) = %x..., %v, %v; want code %x", k, raw[:1], ok, err, code)
		}
	}
	if err := mpack.ValidateRecord(b); err != nil {
		t.Fatal(err)
	}
	norm, _ := mpack.Normalize(orig)
	got, err := mpack.DecodeMap(b)
	if err != nil || !same(got, norm) {
		t.Fatalf("DecodeMap: %v", err)
	}
	if eq, err := mpack.EqualRaw(b, norm); !eq || err != nil {
		t.Fatalf("EqualRaw(record, itself) = %v, %v", eq, err)
	}
}
