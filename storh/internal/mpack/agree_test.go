package mpack_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
	"github.com/storhdb/storh-go/storh/internal/testkit"
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

func TestAgreesWithLibrary(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		orig := testkit.GoMap(t, 1)
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
