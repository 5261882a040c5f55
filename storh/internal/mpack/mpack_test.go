package mpack_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// hx turns "c4 02 0102" into bytes; spaces are for readability.
func hx(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// same is exact equality for tests: identical normalised types, NaN equal to
// NaN, the sign of zero respected, times equal and in UTC.
func same(got, want any) bool {
	switch w := want.(type) {
	case float64:
		g, ok := got.(float64)
		if !ok {
			return false
		}
		if math.IsNaN(w) {
			return math.IsNaN(g)
		}
		return g == w && math.Signbit(g) == math.Signbit(w)
	case time.Time:
		g, ok := got.(time.Time)
		return ok && g.Equal(w) && g.Location() == time.UTC
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !same(g[i], w[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !same(gv, wv) {
				return false
			}
		}
		return true
	case []byte:
		g, ok := got.([]byte)
		return ok && bytes.Equal(g, w)
	case nil:
		return got == nil
	}
	return got == want // bool, int64, uint64, string: same type and value
}

// record wraps one encoded value as the record {"v": value}.
func record(val []byte) []byte {
	return append([]byte{0x81, 0xa1, 'v'}, val...)
}

func nest(n int, leaf string) []byte {
	return append(bytes.Repeat([]byte{0x91}, n), hx(leaf)...)
}

var codeTests = []struct {
	name string
	in   []byte
	want any   // normalised value when err is nil
	err  error // expected sentinel from Decode, Skip excepted (see skipErr)
	// skipErr is Skip's expected error when it differs from err: Skip is
	// structural and accepts what only the record rules reject.
	skipErr error
}{
	{"fixint 0", hx("00"), int64(0), nil, nil},
	{"fixint 127", hx("7f"), int64(127), nil, nil},
	{"negative fixint -1", hx("ff"), int64(-1), nil, nil},
	{"negative fixint -32", hx("e0"), int64(-32), nil, nil},
	{"int8", hx("d0 80"), int64(-128), nil, nil},
	{"int8 positive", hx("d0 05"), int64(5), nil, nil},
	{"int16", hx("d1 ff00"), int64(-256), nil, nil},
	{"int32", hx("d2 80000000"), int64(math.MinInt32), nil, nil},
	{"int64", hx("d3 8000000000000000"), int64(math.MinInt64), nil, nil},
	{"int64 positive", hx("d3 0000000000000005"), int64(5), nil, nil},
	{"uint8", hx("cc ff"), int64(255), nil, nil},
	{"uint16", hx("cd ffff"), int64(65535), nil, nil},
	{"uint32", hx("ce ffffffff"), int64(math.MaxUint32), nil, nil},
	{"uint64 fits int64", hx("cf 7fffffffffffffff"), int64(math.MaxInt64), nil, nil},
	{"uint64 max", hx("cf ffffffffffffffff"), uint64(math.MaxUint64), nil, nil},
	{"float32", hx("ca 3fc00000"), 1.5, nil, nil},
	{"float32 NaN", hx("ca 7fc00000"), math.NaN(), nil, nil},
	{"float64", hx("cb 3ff8000000000000"), 1.5, nil, nil},
	{"float64 -0", hx("cb 8000000000000000"), math.Copysign(0, -1), nil, nil},
	{"fixstr", hx("a3 616263"), "abc", nil, nil},
	{"fixstr empty", hx("a0"), "", nil, nil},
	{"str8", hx("d9 03 616263"), "abc", nil, nil},
	{"str16", hx("da 0003 616263"), "abc", nil, nil},
	{"str32", hx("db 00000003 616263"), "abc", nil, nil},
	{"bin8", hx("c4 02 0102"), []byte{1, 2}, nil, nil},
	{"bin8 empty", hx("c4 00"), []byte{}, nil, nil},
	{"bin16", hx("c5 0002 0102"), []byte{1, 2}, nil, nil},
	{"bin32", hx("c6 00000002 0102"), []byte{1, 2}, nil, nil},
	{"fixarray", hx("92 01 a161"), []any{int64(1), "a"}, nil, nil},
	{"fixarray empty", hx("90"), []any{}, nil, nil},
	{"array16", hx("dc 0002 01 02"), []any{int64(1), int64(2)}, nil, nil},
	{"array32", hx("dd 00000002 01 02"), []any{int64(1), int64(2)}, nil, nil},
	{"fixmap", hx("82 a161 01 a162 c0"), map[string]any{"a": int64(1), "b": nil}, nil, nil},
	{"fixmap empty", hx("80"), map[string]any{}, nil, nil},
	{"map16", hx("de 0001 a161 01"), map[string]any{"a": int64(1)}, nil, nil},
	{"map32", hx("df 00000001 a161 01"), map[string]any{"a": int64(1)}, nil, nil},
	{"map unsorted", hx("82 a162 01 a161 02"), map[string]any{"b": int64(1), "a": int64(2)}, nil, nil},
	{"nested", hx("81 a161 91 81 a162 c3"), map[string]any{"a": []any{map[string]any{"b": true}}}, nil, nil},
	{"nil", hx("c0"), nil, nil, nil},
	{"true", hx("c3"), true, nil, nil},
	{"false", hx("c2"), false, nil, nil},
	{"timestamp32", hx("d6 ff 00000001"), time.Unix(1, 0), nil, nil},
	{"timestamp64", hx("d7 ff 00000004 00000002"), time.Unix(2, 1), nil, nil},
	{"timestamp96", hx("c7 0c ff 00000005 ffffffffffffffff"), time.Unix(-1, 5), nil, nil},
	{"timestamp32 as ext8", hx("c7 04 ff 00000001"), time.Unix(1, 0), nil, nil},
	{"depth 63", nest(62, "90"), nestVal(63), nil, nil},

	{"unsupported fixext", hx("d4 07 00"), nil, mpack.ErrUnsupported, nil},
	{"uuid", hx("d8 01 018bcfe568007abc8def0123456789ab"), uuidv7.MustParse("018bcfe5-6800-7abc-8def-0123456789ab"), nil, nil},
	{"objectid", hx("c7 0c 02 507f1f77bcf86cd799439011"), objectid.MustParse("507f1f77bcf86cd799439011"), nil, nil},
	{"uuid of 8 bytes", hx("d7 01 0102030405060708"), nil, mpack.ErrMalformed, nil},
	{"objectid of 16 bytes", hx("d8 02 0102030405060708090a0b0c0d0e0f10"), nil, mpack.ErrMalformed, nil},
	{"unsupported ext16", hx("c8 0001 05 00"), nil, mpack.ErrUnsupported, nil},
	{"timestamp bad length", hx("d5 ff 0000"), nil, mpack.ErrMalformed, nil},
	{"timestamp nsec too big", hx("c7 0c ff 3b9aca00 0000000000000000"), nil, mpack.ErrMalformed, nil},
	{"timestamp64 nsec too big", hx("d7 ff ffffffff 00000000"), nil, mpack.ErrMalformed, nil},
	{"reserved c1", hx("c1"), nil, mpack.ErrMalformed, nil},
	{"empty input", nil, nil, mpack.ErrMalformed, nil},
	{"int key", hx("81 01 01"), nil, mpack.ErrMalformed, nil},
	{"bin key", hx("81 c4 0161 01"), nil, mpack.ErrMalformed, nil},
	{"nil key", hx("81 c0 01"), nil, mpack.ErrMalformed, nil},
	{"duplicate key", hx("82 a161 01 a161 02"), nil, mpack.ErrMalformed, nil},
	{"nested duplicate", hx("91 82 a162 01 a162 02"), nil, mpack.ErrMalformed, nil},
	{"depth 65", nest(64, "90"), nil, mpack.ErrTooDeep, nil},
	{"huge array", hx("dd ffffffff 01 02"), nil, mpack.ErrMalformed, nil},
	{"huge map", hx("df ffffffff a161 01"), nil, mpack.ErrMalformed, nil},
	{"map16 short", hx("de 0002 a161 01 a1"), nil, mpack.ErrMalformed, nil},
	{"huge str", hx("db ffffffff 61"), nil, mpack.ErrMalformed, nil},
	{"huge bin", hx("c6 ffffffff 61"), nil, mpack.ErrMalformed, nil},
	{"huge ext", hx("c9 ffffffff ff 00"), nil, mpack.ErrMalformed, nil},
	{"short uint64", hx("cf 0000"), nil, mpack.ErrMalformed, nil},
	{"short float32", hx("ca 3f"), nil, mpack.ErrMalformed, nil},
	{"fixext no type", hx("d6"), nil, mpack.ErrMalformed, nil},
	{"ext8 no type", hx("c7 04"), nil, mpack.ErrMalformed, nil},
	{"str8 no length", hx("d9"), nil, mpack.ErrMalformed, nil},
	{"array missing element", hx("92 01"), nil, mpack.ErrMalformed, nil},
}

func init() {
	// Skip is structural: it accepts what only the record rules reject.
	for i, tc := range codeTests {
		switch tc.name {
		case "unsupported fixext", "unsupported ext16", "timestamp bad length", "timestamp nsec too big",
			"uuid of 8 bytes", "objectid of 16 bytes",
			"timestamp64 nsec too big", "int key", "bin key", "nil key", "duplicate key", "nested duplicate":
			codeTests[i].skipErr = errSkipAccepts
		}
	}
}

var errSkipAccepts = errors.New("Skip accepts this")

func TestCodes(t *testing.T) {
	for _, tc := range codeTests {
		t.Run(tc.name, func(t *testing.T) {
			got, n, err := mpack.Decode(tc.in)
			if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Fatalf("Decode error = %v, want %v", err, tc.err)
			}
			skipN, skipErr := mpack.Skip(tc.in)
			switch {
			case tc.skipErr == errSkipAccepts:
				if skipErr != nil || skipN != len(tc.in) {
					t.Errorf("Skip = %d, %v; want %d, nil", skipN, skipErr, len(tc.in))
				}
			case !errors.Is(skipErr, tc.err) || (skipErr == nil) != (tc.err == nil):
				t.Errorf("Skip error = %v, want %v", skipErr, tc.err)
			}
			rec := record(tc.in)
			if verr := mpack.ValidateRecord(rec); !errors.Is(verr, tc.err) || (verr == nil) != (tc.err == nil) {
				t.Errorf("ValidateRecord error = %v, want %v", verr, tc.err)
			}
			if _, eerr := mpack.EqualRaw(tc.in, nil); !errors.Is(eerr, tc.err) || (eerr == nil) != (tc.err == nil) {
				t.Errorf("EqualRaw error = %v, want %v", eerr, tc.err)
			}
			if tc.err != nil {
				if err == nil || !strings.HasPrefix(err.Error(), "mpack: ") {
					t.Errorf("error %q lacks the package prefix", err)
				}
				return
			}
			if n != len(tc.in) || skipN != len(tc.in) {
				t.Errorf("consumed Decode %d Skip %d, want %d", n, skipN, len(tc.in))
			}
			if !same(got, tc.want) {
				t.Errorf("Decode = %#v, want %#v", got, tc.want)
			}
			eq, err := mpack.EqualRaw(tc.in, tc.want)
			if err != nil || eq == order.HasNaN(tc.want) {
				t.Errorf("EqualRaw(raw, want) = %v, %v", eq, err)
			}
			m, err := mpack.DecodeMap(rec)
			if err != nil || !same(m["v"], tc.want) {
				t.Errorf("DecodeMap = %#v, %v", m, err)
			}
			raw, ok, err := mpack.Field(rec, "v")
			if err != nil || !ok || !bytes.Equal(raw, tc.in) {
				t.Errorf("Field = %x, %v, %v", raw, ok, err)
			}
		})
	}
}

// sampleRecord is a realistic record as the engine would store it.
func sampleRecord(tb testing.TB) []byte {
	return encode(tb, map[string]any{
		"id":      "0190a5b2-7c3e-7d4f-8a1b-2c3d4e5f6a7b",
		"user":    "alice@example.com",
		"kind":    "order.created",
		"amount":  12999,
		"qty":     3,
		"price":   43.33,
		"paid":    true,
		"created": time.UnixMilli(1718000000123),
		"tags":    []string{"priority", "eu"},
		"addr":    map[string]any{"city": "Berlin", "zip": "10115", "country": "DE"},
	}, true)
}

func TestTruncatedRecord(t *testing.T) {
	rec := sampleRecord(t)
	for i := 0; i < len(rec); i++ {
		b := rec[:i]
		if err := mpack.ValidateRecord(b); !errors.Is(err, mpack.ErrMalformed) {
			t.Fatalf("ValidateRecord(rec[:%d]) = %v", i, err)
		}
		if _, err := mpack.DecodeMap(b); !errors.Is(err, mpack.ErrMalformed) {
			t.Fatalf("DecodeMap(rec[:%d]) = %v", i, err)
		}
		if _, _, err := mpack.Decode(b); !errors.Is(err, mpack.ErrMalformed) {
			t.Fatalf("Decode(rec[:%d]) = %v", i, err)
		}
		if _, err := mpack.Skip(b); !errors.Is(err, mpack.ErrMalformed) {
			t.Fatalf("Skip(rec[:%d]) = %v", i, err)
		}
		if _, err := mpack.EqualRaw(b, int64(1)); !errors.Is(err, mpack.ErrMalformed) {
			t.Fatalf("EqualRaw(rec[:%d]) = %v", i, err)
		}
		// Field reads only up to its key, so it may succeed on a prefix,
		// but what it returns must then be a complete value.
		if raw, ok, err := mpack.Field(b, "user"); err == nil && ok {
			if _, _, err := mpack.Decode(raw); err != nil {
				t.Fatalf("Field(rec[:%d]) returned an incomplete value: %v", i, err)
			}
		}
	}
	extra := append(append([]byte{}, rec...), 0xc0)
	if err := mpack.ValidateRecord(extra); !errors.Is(err, mpack.ErrMalformed) {
		t.Errorf("ValidateRecord with a trailing byte = %v", err)
	}
	if _, err := mpack.DecodeMap(extra); !errors.Is(err, mpack.ErrMalformed) {
		t.Errorf("DecodeMap with a trailing byte = %v", err)
	}
	if _, err := mpack.EqualRaw(hx("01 01"), int64(1)); !errors.Is(err, mpack.ErrMalformed) {
		t.Errorf("EqualRaw with a trailing byte = %v", err)
	}
	for _, notMap := range [][]byte{hx("91 01"), hx("c0"), hx("a1 61")} {
		if err := mpack.ValidateRecord(notMap); !errors.Is(err, mpack.ErrMalformed) {
			t.Errorf("ValidateRecord(%x) = %v", notMap, err)
		}
		if _, err := mpack.DecodeMap(notMap); !errors.Is(err, mpack.ErrMalformed) {
			t.Errorf("DecodeMap(%x) = %v", notMap, err)
		}
		if _, _, err := mpack.Field(notMap, "a"); !errors.Is(err, mpack.ErrMalformed) {
			t.Errorf("Field(%x) = %v", notMap, err)
		}
	}
}

func TestDepth(t *testing.T) {
	// The record's own map is level 1, so 63 nested arrays inside it fit.
	ok := record(nest(62, "90"))
	if err := mpack.ValidateRecord(ok); err != nil {
		t.Fatalf("63 levels below the record: %v", err)
	}
	deep := record(nest(63, "90"))
	if err := mpack.ValidateRecord(deep); !errors.Is(err, mpack.ErrTooDeep) {
		t.Fatalf("64 levels below the record: %v", err)
	}
	if _, err := mpack.DecodeMap(deep); !errors.Is(err, mpack.ErrTooDeep) {
		t.Fatalf("DecodeMap: %v", err)
	}
	if _, err := mpack.Skip(deep); !errors.Is(err, mpack.ErrTooDeep) {
		t.Fatalf("Skip: %v", err)
	}
	// Far deeper input must fail the same way, not exhaust the stack.
	huge := nest(1<<20, "c0")
	if _, _, err := mpack.Decode(huge); !errors.Is(err, mpack.ErrTooDeep) {
		t.Fatalf("Decode of 2^20 levels: %v", err)
	}
	if _, err := mpack.Skip(huge); !errors.Is(err, mpack.ErrTooDeep) {
		t.Fatalf("Skip of 2^20 levels: %v", err)
	}
}

func TestUnsortedKeys(t *testing.T) {
	// Above 32 keys an unsorted map is checked with a set rather than
	// pairwise; both paths must find duplicates anywhere.
	for _, n := range []int{2, 32, 33, 100} {
		keys := make([]byte, 0, n*4)
		for i := n - 1; i >= 0; i-- { // descending: never sorted
			keys = append(keys, 0xa2, byte('a'+i/26), byte('a'+i%26), 0xc0)
		}
		b := append(hx("de"), byte(n>>8), byte(n))
		if err := mpack.ValidateRecord(append(b, keys...)); err != nil {
			t.Errorf("n=%d distinct keys: %v", n, err)
		}
		dup := append([]byte{}, keys...)
		copy(dup[len(dup)-4:], dup[:4]) // last key repeats the first
		if err := mpack.ValidateRecord(append(b, dup...)); !errors.Is(err, mpack.ErrMalformed) {
			t.Errorf("n=%d duplicate key: %v", n, err)
		}
		if _, err := mpack.DecodeMap(append(b, dup...)); !errors.Is(err, mpack.ErrMalformed) {
			t.Errorf("n=%d DecodeMap duplicate key: %v", n, err)
		}
	}
}

func TestField(t *testing.T) {
	rec := hx("83 a161 01 a162 c0 a163 92 01 02")
	for _, tc := range []struct {
		key  string
		want []byte
		ok   bool
	}{
		{"a", hx("01"), true},
		{"b", hx("c0"), true}, // present and nil: not the same as missing
		{"c", hx("92 01 02"), true},
		{"d", nil, false},
		{"", nil, false},
	} {
		raw, ok, err := mpack.Field(rec, tc.key)
		if err != nil || ok != tc.ok || !bytes.Equal(raw, tc.want) {
			t.Errorf("Field(%q) = %x, %v, %v; want %x, %v", tc.key, raw, ok, err, tc.want, tc.ok)
		}
		if ok && cap(raw) != len(raw) {
			t.Errorf("Field(%q) capacity %d not clipped", tc.key, cap(raw))
		}
	}
}

func TestDecodeCopies(t *testing.T) {
	b := hx("82 a161 a178 a162 c4 01 79")
	m, err := mpack.DecodeMap(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if m["a"] != "x" || !bytes.Equal(m["b"].([]byte), []byte("y")) {
		t.Fatalf("decoded values alias the input: %#v", m)
	}
}

func TestAllocs(t *testing.T) {
	rec := sampleRecord(t)
	raw, _, _ := mpack.Field(rec, "amount")
	str, _, _ := mpack.Field(rec, "user")
	ts, _, _ := mpack.Field(rec, "created")
	var when any = time.UnixMilli(1718000000123) // boxed once, outside the measurement
	var want any = int64(12999)
	// A struct encodes its fields in declaration order: keys not sorted.
	unsorted := encode(t, struct {
		Zeta  string `msgpack:"zeta"`
		Alpha int    `msgpack:"alpha"`
		Mid   []int  `msgpack:"mid"`
	}{"z", 1, []int{2}}, true)
	for name, fn := range map[string]func(){
		"ValidateRecord": func() { _ = mpack.ValidateRecord(rec) },
		"ValidateRecord unsorted": func() {
			if mpack.ValidateRecord(unsorted) != nil {
				panic("invalid")
			}
		},
		"Field first":       func() { _, _, _ = mpack.Field(rec, "addr") },
		"Field last":        func() { _, _, _ = mpack.Field(rec, "user") },
		"Field missing":     func() { _, _, _ = mpack.Field(rec, "zzz") },
		"Skip":              func() { _, _ = mpack.Skip(rec) },
		"EqualRaw int":      func() { _, _ = mpack.EqualRaw(raw, want) },
		"EqualRaw string":   func() { _, _ = mpack.EqualRaw(str, "alice@example.com") },
		"EqualRaw mismatch": func() { _, _ = mpack.EqualRaw(str, 1.5) },
		"EqualRaw time":     func() { _, _ = mpack.EqualRaw(ts, when) },
	} {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocs, want 0", name, n)
		}
	}
}

// nestVal is the decoded form of nest(levels-1, "90").
func nestVal(levels int) any {
	v := []any{}
	for i := 1; i < levels; i++ {
		v = []any{v}
	}
	return v
}
