package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// payload encodes data exactly as storh stores it.
func payload(t interface {
	Helper()
	Fatalf(string, ...any)
}, data map[string]any) []byte {
	t.Helper()
	v, err := engine.AppendValue(nil, data)
	if err != nil {
		t.Fatalf("encode %v: %v", data, err)
	}
	return v[engine.HeaderSize:]
}

func TestAppendPayloadTypes(t *testing.T) {
	ts := time.Date(2024, 5, 1, 12, 0, 0, 123_456_789, time.FixedZone("x", 7200))
	tests := []struct {
		name string
		data map[string]any
		want string
	}{
		{"empty", map[string]any{}, `{}`},
		{"ints", map[string]any{"a": 0, "b": 127, "c": 128, "d": -1, "e": -32, "f": -33, "g": int64(math.MinInt64), "h": int8(-100), "i": uint16(65535), "j": int32(-70000)},
			`{"a":0,"b":127,"c":128,"d":-1,"e":-32,"f":-33,"g":-9223372036854775808,"h":-100,"i":65535,"j":-70000}`},
		{"uint64", map[string]any{"u": uint64(math.MaxUint64), "v": uint64(1 << 63)}, `{"u":18446744073709551615,"v":9223372036854775808}`},
		{"floats", map[string]any{"a": 1.0, "b": -0.0, "c": 0.1, "d": 1e21, "e": 1e20, "f": 1e-7, "g": 1.5e-6, "h": math.MaxFloat64, "i": -123.456},
			`{"a":1.0,"b":0.0,"c":0.1,"d":1e+21,"e":100000000000000000000.0,"f":1e-7,"g":0.0000015,"h":1.7976931348623157e+308,"i":-123.456}`},
		{"negative zero", map[string]any{"z": math.Copysign(0, -1)}, `{"z":-0.0}`},
		{"float32", map[string]any{"f": float32(0.1), "g": float32(2)}, `{"f":0.10000000149011612,"g":2.0}`},
		{"special floats", map[string]any{"a": math.NaN(), "b": math.Inf(1), "c": math.Inf(-1)},
			`{"a":{"$numberDouble":"NaN"},"b":{"$numberDouble":"Infinity"},"c":{"$numberDouble":"-Infinity"}}`},
		{"strings", map[string]any{"s": "a\"b\\c\n\t\r\b\f\x00\x1f<>&é😀\u2028\u2029/"},
			`{"s":"a\"b\\c\n\t\r\b\f\u0000\u001f<>&é😀\u2028\u2029/"}`},
		{"invalid utf-8", map[string]any{"s": "a\xffb"}, `{"s":"a\ufffdb"}`},
		{"long string", map[string]any{"s": strings.Repeat("x", 300)}, `{"s":"` + strings.Repeat("x", 300) + `"}`},
		{"bytes", map[string]any{"b": []byte{0, 1, 2, 255}, "e": []byte{}}, `{"b":{"$binary":{"base64":"AAEC/w==","subType":"00"}},"e":{"$binary":{"base64":"","subType":"00"}}}`},
		{"time", map[string]any{"t": ts, "s": time.Unix(1714564800, 0)}, `{"s":{"$date":"2024-05-01T12:00:00Z"},"t":{"$date":"2024-05-01T10:00:00.123456789Z"}}`},
		{"time far", map[string]any{"t": time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)}, `{"t":{"$date":{"$numberLong":"316516204800000"}}}`},
		{"nested", map[string]any{"m": map[string]any{"z": nil, "a": []any{true, false, []any{}, map[string]any{}}}},
			`{"m":{"a":[true,false,[],{}],"z":null}}`},
		{"key order", map[string]any{"b": 1, "a": 2, "A": 3, "é": 4, "": 5}, `{"":5,"A":3,"a":2,"b":1,"é":4}`},
		{"ids", map[string]any{"u": uuidv7.MustParse("0190a4f4-5c3b-7def-8123-456789abcdef"), "o": objectid.MustParse("5f1a2b3c4d5e6f7a8b9c0d1e"),
			"l": []any{uuidv7.UUID{}, objectid.ObjectID{}}},
			`{"l":[{"$uuid":"00000000-0000-0000-0000-000000000000"},{"$oid":"000000000000000000000000"}],"o":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d1e"},"u":{"$uuid":"0190a4f4-5c3b-7def-8123-456789abcdef"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := payload(t, tt.data)
			got, err := AppendPayload(nil, p)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("AppendPayload:\n got %s\nwant %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("not valid JSON: %s", got)
			}
			viaValue, err := AppendValue(nil, tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if string(viaValue) != tt.want {
				t.Errorf("AppendValue:\n got %s\nwant %s", viaValue, tt.want)
			}
		})
	}
}

func TestAppendRowAndRecord(t *testing.T) {
	id := uuidv7.MustParse(testID)
	p := payload(t, map[string]any{"a": 1})
	row, err := AppendRow([]byte("prefix "), id, p)
	if err != nil {
		t.Fatal(err)
	}
	if want := "prefix {\"id\":\"" + testID + "\",\"data\":{\"a\":1}}\n"; string(row) != want {
		t.Errorf("AppendRow = %q, want %q", row, want)
	}
	rec, err := AppendRecord(nil, id, p)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"` + testID + `","time":"2024-07-12T03:19:56.219Z","data":{"a":1}}` + "\n"; string(rec) != want {
		t.Errorf("AppendRecord = %q, want %q", rec, want)
	}
	// Both forms import back to the same id and data.
	for _, line := range [][]byte{row[len("prefix "):], rec} {
		got, err := DecodeRow(bytes.TrimSpace(line))
		if err != nil || got.ID != id || got.Data["a"] != int64(1) {
			t.Errorf("%s decodes to %+v, %v", line, got, err)
		}
	}
}

func TestAppendPayloadMalformed(t *testing.T) {
	good := payload(t, map[string]any{"s": "text", "n": 1.5, "t": time.Unix(1, 1), "b": []byte{1}, "a": []any{1, 2}})
	for i := range len(good) {
		if _, err := AppendPayload(nil, good[:i]); !errors.Is(err, ErrPayload) {
			t.Errorf("truncated to %d bytes: err = %v, want ErrPayload", i, err)
		}
	}
	bad := map[string][]byte{
		"not a map":     {0x01},
		"trailing":      append(bytes.Clone(good), 0xc0),
		"key not str":   {0x81, 0x01, 0x01},
		"unused c1":     {0x81, 0xa1, 'a', 0xc1},
		"ext type 5":    {0x81, 0xa1, 'a', 0xd4, 0x05, 0x00},
		"timestamp len": {0x81, 0xa1, 'a', 0xd5, 0xff, 0x00, 0x00},
		"timestamp ns":  {0x81, 0xa1, 'a', 0xd7, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},
		"huge array":    {0x81, 0xa1, 'a', 0xdd, 0xff, 0xff, 0xff, 0xff},
	}
	for name, p := range bad {
		if _, err := AppendPayload(nil, p); !errors.Is(err, ErrPayload) {
			t.Errorf("%s: err = %v, want ErrPayload", name, err)
		}
	}
	if _, err := AppendValue(nil, map[string]any{"c": make(chan int)}); !errors.Is(err, ErrPayload) {
		t.Errorf("AppendValue(chan): %v", err)
	}
}

func TestAppendPayloadAllocs(t *testing.T) {
	p := payload(t, map[string]any{"level": "info", "status": 200, "ms": 12.5, "ok": true, "tags": []any{"a", "b"}})
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() { AppendPayload(buf[:0], p) }); n != 0 {
		t.Errorf("AppendPayload allocates %.0f times per record, want 0", n)
	}
}

// genValue draws the values a record holds, as storh decodes them.
func genValue(depth int) *rapid.Generator[any] {
	scalars := []*rapid.Generator[any]{
		rapid.Map(rapid.Int64(), func(v int64) any { return v }),
		rapid.Map(rapid.Uint64Min(1<<63), func(v uint64) any { return v }),
		rapid.Map(rapid.Float64(), func(v float64) any { return v }),
		rapid.Map(rapid.String(), func(v string) any { return v }),
		rapid.Map(rapid.Bool(), func(v bool) any { return v }),
		rapid.Just[any](nil),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 40), func(v []byte) any { return v }),
		rapid.Custom(func(t *rapid.T) any {
			// Years 1 to 9999: written as RFC 3339, exact to the nanosecond.
			sec := rapid.Int64Range(-62135596800, 253402300799).Draw(t, "sec")
			ns := rapid.Int64Range(0, 999_999_999).Draw(t, "ns")
			return time.Unix(sec, ns).UTC()
		}),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 16, 16), func(v []byte) any { return uuidv7.UUID(v) }),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 12, 12), func(v []byte) any { return objectid.ObjectID(v) }),
	}
	if depth == 0 {
		return rapid.OneOf(scalars...)
	}
	return rapid.OneOf(append(scalars,
		rapid.Map(rapid.SliceOfN(genValue(depth-1), 0, 4), func(v []any) any { return v }),
		rapid.Map(genMap(depth-1), func(v map[string]any) any { return v }),
	)...)
}

// genMap draws maps whose keys cannot be mistaken for Extended JSON
// wrappers (see the package Caveats).
func genMap(depth int) *rapid.Generator[map[string]any] {
	key := rapid.StringMatching(`[a-zA-Z_é"\\ \n]{0,8}`)
	return rapid.MapOfN(key, genValue(depth), 0, 5)
}

// TestRoundTrip is export → import → export: the stored bytes, written as
// JSON and read back, are stored as the same bytes, and both writers agree.
func TestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		data := genMap(3).Draw(t, "data")
		p := payload(t, data)
		js, err := AppendPayload(nil, p)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(js) {
			t.Fatalf("invalid JSON %s", js)
		}
		viaValue, err := AppendValue(nil, data)
		if err != nil || !bytes.Equal(viaValue, js) {
			t.Fatalf("AppendValue = %s, %v\nAppendPayload = %s", viaValue, err, js)
		}
		row, err := DecodeRow(append(append([]byte(`{"data":`), js...), '}'))
		if err != nil {
			t.Fatalf("decode %s: %v", js, err)
		}
		if p2 := payload(t, row.Data); !bytes.Equal(p2, p) {
			t.Fatalf("stored bytes differ after the round trip through\n%s", js)
		}
	})
}

func BenchmarkAppendPayload(b *testing.B) {
	p := payload(b, map[string]any{"level": "info", "service": "api", "path": "/pages/582", "status": 200,
		"ms": 84.74337369372327, "user": "u1033", "ok": true, "n": 12345, "tags": []any{"a", "b"}})
	buf := make([]byte, 0, 1024)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendPayload(buf[:0], p)
	}
}
