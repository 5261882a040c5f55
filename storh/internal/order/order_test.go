package order_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
)

func f64(b uint64) float64 { return math.Float64frombits(b) }

var (
	negZero = math.Copysign(0, -1)
	zone    = time.FixedZone("UTC-7", -7*3600)
	// The extremes of time.Time: its seconds since year 1 are an int64,
	// which Unix seconds (since 1970) overflow at the low end.
	minTime = time.Unix(math.MaxInt64-order.UnixToInternal+1, 0)
	maxTime = time.Unix(math.MaxInt64-order.UnixToInternal, 999_999_999)
)

// orderGroups lists values in ascending order: the values of one group are
// equal in the order (one key), each group is below the next. It visits
// every boundary the package doc names.
var orderGroups = [][]any{
	// null and missing (AppendRaw(nil), checked apart), nil Go containers
	{nil, []any(nil), map[string]any(nil), []byte(nil), []int(nil), (*int)(nil)},
	{false},
	{true},

	// NaN, every bit pattern, below every number
	{math.NaN(), f64(0x7FF0000000000001), f64(0xFFF8000000000000), f64(0xFFFFFFFFFFFFFFFF), float32(math.NaN())},
	{math.Inf(-1), float32(math.Inf(-1))},
	{-math.MaxFloat64},
	{-0x1p64},
	{-0x1p63 - 2048},
	{int64(math.MinInt64), int(math.MinInt64)},
	{-0x1p63},
	{int64(math.MinInt64 + 1)},
	{int64(math.MinInt64 + 1023)},
	{int64(math.MinInt64 + 1024)},
	{-0x1p63 + 1024},
	{int64(math.MinInt64 + 1025)},
	{int64(-(1 << 53) - 3)},
	{int64(-(1 << 53) - 2)},
	{-0x1p53 - 2},
	{int64(-(1 << 53) - 1)},
	{int64(-(1 << 53))},
	{-0x1p53},
	{int64(-(1 << 53) + 1)},
	{-0x1p53 + 1},
	{int64(-2)},
	{-2.0},
	{-1.5},
	{int64(-1), int8(-1), int32(-1), int(-1)},
	{-1.0, float32(-1)},
	{math.Nextafter(-1, 0)},
	{-0.5},
	{-math.SmallestNonzeroFloat64},
	{int64(0), uint64(0), uint8(0), int(0)},
	{0.0, negZero, float32(0), float32(negZero)},
	{math.SmallestNonzeroFloat64},
	{f64(0x0010000000000000)}, // the smallest normal
	{0.1},
	{float32(0.1)}, // widened exactly: 0.100000001490116...
	{0.5},
	{math.Nextafter(1, 0)},
	{int64(1), uint64(1), uint8(1), uint16(1), uint32(1), uint(1), int16(1)},
	{1.0, float32(1)},
	{math.Nextafter(1, 2)},
	{1.5},
	{int64(2)},
	{2.0},
	{int64(1<<53 - 1)},
	{0x1p53 - 1},
	{int64(1 << 53), uint64(1 << 53)},
	{0x1p53},
	{int64(1<<53 + 1)},
	{int64(1<<53 + 2)},
	{0x1p53 + 2},
	{int64(1<<53 + 3)},
	{int64(1<<62 - 1)},
	{int64(1 << 62)},
	{0x1p62},
	{int64(math.MaxInt64 - 1024)},
	{int64(math.MaxInt64 - 1023)},
	{0x1p63 - 1024},
	{int64(math.MaxInt64 - 1022)},
	{int64(math.MaxInt64 - 1)},
	{int64(math.MaxInt64), uint64(math.MaxInt64)},
	{uint64(1 << 63)},
	{0x1p63},
	{uint64(1<<63 + 1)},
	{uint64(1<<63 + 2047)},
	{uint64(1<<63 + 2048)},
	{0x1p63 + 2048},
	{uint64(1<<63 + 2049)},
	{uint64(math.MaxUint64 - 2048)},
	{uint64(math.MaxUint64 - 2047)},
	{0x1p64 - 2048},
	{uint64(math.MaxUint64 - 2046)},
	{uint64(math.MaxUint64)},
	{0x1p64},
	{math.MaxFloat64},
	{math.Inf(1), float32(math.Inf(1))},

	// strings, bytewise, 0x00 and 0xFF included
	{""},
	{"\x00"},
	{"\x00\x00"},
	{"\x00\x01"},
	{"\x00\xff"},
	{"\x00\xff\x00"},
	{"\x01"},
	{"a"},
	{"a\x00"},
	{"a\x00\x00"},
	{"a\x00\x01"},
	{"a\x00b"},
	{"a\x01"},
	{"ab"},
	{"a\xff"},
	{"b"},
	{"\xff"},
	{"\xff\x00"},
	{"\xff\xff"},

	// bytes, the same way
	{[]byte{}},
	{[]byte{0}},
	{[]byte{0, 0}},
	{[]byte{0, 1}},
	{[]byte{0, 0xff}},
	{[]byte{1}},
	{[]byte("a"), [1]byte{'a'}},
	{[]byte("a\x00")},
	{[]byte("a\x00b")},
	{[]byte("ab")},
	{[]byte{0xff}},
	{[]byte{0xff, 0xff}},

	// times, chronologically, across all of time.Time's range
	{minTime},
	{time.Unix(math.MaxInt64, 0)}, // wraps: time.Time holds it far before year 1
	{time.Unix(math.MaxInt64, 1)},
	{time.Unix(math.MinInt64, 0)},
	{time.Date(-1_000_000, 1, 1, 0, 0, 0, 0, time.UTC)},
	{time.Time{}}, // 0001-01-01
	{time.Unix(-1<<34, 0)},
	{time.Date(1677, 9, 21, 0, 12, 43, 145224191, time.UTC)}, // before UnixNano's range
	{time.Unix(-1, 999_999_999)},
	{time.Unix(0, 0), time.Unix(0, 0).In(zone)},
	{time.Unix(0, 1)},
	{time.Unix(1, 0)},
	{time.Unix(1<<32-1, 0)}, // the largest 4-byte timestamp
	{time.Unix(1<<32, 0)},
	{time.Date(2262, 4, 11, 23, 47, 16, 854775808, time.UTC)}, // after UnixNano's range
	{time.Unix(1<<34-1, 999_999_999)},                         // the largest 8-byte one
	{time.Unix(1<<34, 0)},
	{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	{time.Date(1_000_000_000, 1, 1, 0, 0, 0, 0, time.UTC)},
	{maxTime},

	// lists, element by element, a proper prefix first
	{[]any{}, []int{}},
	{[]any{nil}},
	{[]any{nil, nil}},
	{[]any{false}},
	{[]any{true}},
	{[]any{math.NaN()}},
	{[]any{math.Inf(-1)}},
	{[]any{int64(1)}, []int{1}, []any{uint8(1)}},
	{[]any{int64(1), nil}},
	{[]any{int64(1), int64(2)}, []int64{1, 2}},
	{[]any{int64(1), int64(2), int64(0)}},
	{[]any{1.0}},
	{[]any{int64(2)}},
	{[]any{""}},
	{[]any{"a"}, []string{"a"}},
	{[]any{"a", ""}},
	{[]any{"a\x00"}},
	{[]any{[]byte{}}},
	{[]any{time.Unix(0, 0)}},
	{[]any{[]any{}}},
	{[]any{[]any{}, []any{}}},
	{[]any{[]any{nil}}},
	{[]any{[]any{int64(1)}}},
	{[]any{map[string]any{}}},
	{[]any{map[string]any{"a": nil}}},

	// maps, entries in key order, by key then value, a proper prefix first
	{map[string]any{}, map[string]int{}},
	{map[string]any{"": nil}},
	{map[string]any{"": int64(1)}},
	{map[string]any{"": int64(1), "a": nil}},
	{map[string]any{"\x00": nil}},
	{map[string]any{"a": nil}},
	{map[string]any{"a": false}},
	{map[string]any{"a": int64(1)}, map[string]int{"a": 1}, map[string]uint8{"a": 1}},
	{map[string]any{"a": int64(1), "b": int64(0)}},
	{map[string]any{"a": int64(1), "b": int64(1)}},
	{map[string]any{"a": 1.0}},
	{map[string]any{"a": int64(2)}},
	{map[string]any{"a": "x"}},
	{map[string]any{"a": []any{}}},
	{map[string]any{"a": map[string]any{}}},
	{map[string]any{"a": map[string]any{"": nil}}},
	{map[string]any{"a\x00": int64(0)}},
	{map[string]any{"a\x00": int64(0), "b": nil}},
	{map[string]any{"a\x00b": int64(0)}},
	{map[string]any{"a\x01": int64(0)}},
	{map[string]any{"ab": int64(0)}},
	{map[string]any{"b": int64(0)}},
	{map[string]any{"b": int64(0), "c": int64(0)}},
	{map[string]any{"\xff": nil}},
}

// TestOrderTable checks Compare and the keys on every pair of the table,
// in both directions, and that a missing field keys as null.
func TestOrderTable(t *testing.T) {
	type item struct {
		group int
		v     any
		key   []byte
	}
	var items []item
	for g, vals := range orderGroups {
		for _, v := range vals {
			items = append(items, item{g, v, key(t, v)})
		}
	}
	for _, a := range items {
		for _, b := range items {
			want := sign(a.group - b.group)
			if got := order.Compare(a.v, b.v); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", show(a.v), show(b.v), got, want)
			}
			if got := sign(bytes.Compare(a.key, b.key)); got != want {
				t.Errorf("keys of %s and %s compare %d, want %d\n%x\n%x", show(a.v), show(b.v), got, want, a.key, b.key)
			}
		}
	}
	if missing := rawKey(t, nil); !bytes.Equal(missing, key(t, nil)) {
		t.Errorf("missing field key %x, null key %x", missing, key(t, nil))
	}
}

// TestTableAppendRaw checks that every value of the table has the same
// key from its msgpack encodings as from Append, and that the key decodes
// back to the value.
func TestTableAppendRaw(t *testing.T) {
	for _, vals := range orderGroups {
		for _, v := range vals {
			want := key(t, v)
			for _, compactInts := range []bool{false, true} {
				for _, float32s := range []bool{false, true} {
					for _, sorted := range []bool{false, true} {
						raw := encodeLib(t, v, compactInts, float32s, sorted)
						if got := rawKey(t, raw); !bytes.Equal(got, want) {
							t.Errorf("%s encoded %x: AppendRaw %x, Append %x", show(v), raw, got, want)
						}
					}
				}
			}
			back, n, err := decodeKey(append(want, 0xAB))
			if err != nil || n != len(want) {
				t.Fatalf("decodeKey(%x) = %d, %v", want, n, err)
			}
			if order.Compare(back, v) != 0 || !bytes.Equal(key(t, back), want) {
				t.Errorf("key %x of %s decodes to %s", want, show(v), show(back))
			}
		}
	}
}

// TestEncodingVectors pins the layout byte for byte.
func TestEncodingVectors(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{nil, "01"},
		{false, "02"},
		{true, "03"},
		{int64(0), "04 8000000000000000 0000 00"},
		{0.0, "04 8000000000000000 0000 01"},
		{negZero, "04 8000000000000000 0000 01"},
		{int64(1), "04 bff0000000000000 0000 00"},
		{1.0, "04 bff0000000000000 0000 01"},
		{-1.0, "04 400fffffffffffff 0000 01"},
		{math.NaN(), "04 0000000000000000 0000 01"},
		{math.Inf(-1), "04 000fffffffffffff 0000 01"},
		{math.Inf(1), "04 fff0000000000000 0000 01"},
		{int64(1<<53 + 1), "04 c340000000000000 0001 00"},
		{uint64(math.MaxUint64), "04 c3efffffffffffff 07ff 00"},
		{int64(math.MinInt64), "04 3c1fffffffffffff 0000 00"},
		{int64(math.MinInt64 + 1), "04 3c1fffffffffffff 0001 00"},
		{"", "05 0001"},
		{"a\x00b", "05 61 00ff 62 0001"},
		{[]byte{}, "06 0001"},
		{[]byte{0}, "06 00ff 0001"},
		{time.Time{}, "07 8000000000000000 00000000"},
		{time.Unix(0, 0), "07 8000000e7791f700 00000000"},
		{time.Unix(1, 5), "07 8000000e7791f701 00000005"},
		{[]any{}, "08 00"},
		{[]any{int64(1), "a"}, "08 04bff0000000000000000000 05610001 00"},
		{map[string]any{}, "09 00"},
		{map[string]any{"b": true, "a": nil}, "09 01 610001 01 01 620001 03 00"},
		{map[string]any{"": []any{}}, "09 01 0001 0800 00"},
	} {
		if got, want := key(t, tc.v), hx(tc.want); !bytes.Equal(got, want) {
			t.Errorf("Append(%s) = %x, want %x", show(tc.v), got, want)
		}
	}
}

// TestAppendRawEncodings feeds AppendRaw hand-written msgpack of the same
// values in every form the format allows.
func TestAppendRawEncodings(t *testing.T) {
	for _, tc := range []struct {
		v    any
		raws []string
	}{
		{int64(5), []string{"05", "cc05", "cd0005", "ce00000005", "cf0000000000000005", "d005", "d10005", "d200000005", "d30000000000000005"}},
		{int64(-1), []string{"ff", "d0ff", "d1ffff", "d2ffffffff", "d3ffffffffffffffff"}},
		{1.5, []string{"ca3fc00000", "cb3ff8000000000000"}},
		{negZero, []string{"ca80000000", "cb8000000000000000", "ca00000000"}},
		{math.NaN(), []string{"ca7fc00000", "caffc00001", "cb7ff8000000000000", "cbfff0000000000001"}},
		{"abc", []string{"a3616263", "d903616263", "da0003616263", "db00000003616263"}},
		{[]byte{1, 2}, []string{"c4020102", "c5000201 02", "c600000002 0102"}},
		{time.Unix(1, 0), []string{"d6ff00000001", "d7ff0000000000000001", "c70cff000000000000000000000001", "c704ff00000001"}},
		{[]any{int64(1)}, []string{"9101", "dc000101", "dd0000000101"}},
		{map[string]any{"a": int64(1), "b": nil}, []string{"82a16101a162c0", "82a162c0a16101", "de0002a162c0a16101", "df00000002a16101a162c0", "82d90161 01 da000162c0"}},
		{map[string]any{"a": map[string]any{"x": int64(1), "y": int64(2)}, "b": []any{map[string]any{"p": nil, "q": true}}},
			[]string{"82 a161 82 a17801 a17902 a162 91 82 a170c0 a171c3", "82 a162 91 82 a171c3 a170c0 a161 82 a17902 a17801"}},
	} {
		want := key(t, tc.v)
		for _, r := range tc.raws {
			if got := rawKey(t, hx(r)); !bytes.Equal(got, want) {
				t.Errorf("AppendRaw(%s) = %x, want %x (%s)", r, got, want, show(tc.v))
			}
		}
	}
}

// TestAppendRawErrors checks that input Decode rejects is an error of the
// same sentinel, and that dst comes back at its original length.
func TestAppendRawErrors(t *testing.T) {
	deep := bytes.Repeat([]byte{0x91}, mpack.MaxDepth)
	deep = append(deep, 0x90)
	for _, tc := range []struct {
		name, raw string
		err       error
	}{
		{"empty", "", mpack.ErrMalformed},
		{"reserved c1", "c1", mpack.ErrMalformed},
		{"trailing bytes", "0101", mpack.ErrMalformed},
		{"short int", "cd00", mpack.ErrMalformed},
		{"short str", "a3 6162", mpack.ErrMalformed},
		{"array missing element", "92 01", mpack.ErrMalformed},
		{"int key", "81 01 01", mpack.ErrMalformed},
		{"nil key", "81 c0 01", mpack.ErrMalformed},
		{"duplicate key, sorted", "82 a161 01 a161 02", mpack.ErrMalformed},
		{"duplicate key, unsorted", "83 a162 01 a161 02 a162 03", mpack.ErrMalformed},
		{"nested duplicate", "91 82 a162 01 a162 02", mpack.ErrMalformed},
		{"bad value in unsorted map", "82 a162 01 a161 c1", mpack.ErrMalformed},
		{"truncated value in map", "82 a161 01 a162", mpack.ErrMalformed},
		{"unsupported ext", "d4 01 00", mpack.ErrUnsupported},
		{"unsupported ext in list", "91 d4 01 00", mpack.ErrUnsupported},
		{"timestamp bad length", "d5 ff 0000", mpack.ErrMalformed},
		{"timestamp nsec too big", "d7 ff ffffffff 00000000", mpack.ErrMalformed},
		{"too deep", hex.EncodeToString(deep), mpack.ErrTooDeep},
		{"too deep in a map", "81 a161 " + hex.EncodeToString(deep[1:]), mpack.ErrTooDeep},
	} {
		dst := []byte("keep")
		got, err := order.AppendRaw(dst, hx(tc.raw))
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.err)
		}
		if string(got) != "keep" {
			t.Errorf("%s: dst %q after the error", tc.name, got)
		}
		if _, _, derr := mpack.Decode(hx(tc.raw)); derr == nil && tc.name != "trailing bytes" {
			t.Errorf("%s: mpack.Decode accepts it", tc.name)
		}
	}
	// One level less deep is fine, as for Decode.
	if _, err := order.AppendRaw(nil, deep[1:]); err != nil {
		t.Errorf("MaxDepth levels: %v", err)
	}
}

// TestAppendErrors checks the values Append refuses.
func TestAppendErrors(t *testing.T) {
	cyclic := []any{nil}
	cyclic[0] = cyclic
	deepMap := map[string]any{}
	for m, i := deepMap, 0; i < mpack.MaxDepth; i++ {
		next := map[string]any{}
		m["x"] = next
		m = next
	}
	for _, tc := range []struct {
		v   any
		err error
	}{
		{struct{}{}, mpack.ErrUnsupported},
		{make(chan int), mpack.ErrUnsupported},
		{map[int]any{1: 2}, mpack.ErrUnsupported},
		{[]any{1, struct{}{}}, mpack.ErrUnsupported},
		{complex(1, 2), mpack.ErrUnsupported},
		{cyclic, mpack.ErrTooDeep},
		{deepMap, mpack.ErrTooDeep},
	} {
		got, err := order.Append([]byte("keep"), tc.v)
		if !errors.Is(err, tc.err) || string(got) != "keep" {
			t.Errorf("Append(%T) = %q, %v; want %v", tc.v, got, err, tc.err)
		}
	}
}

// TestClass checks that Class and ClassOfRaw give the key's first byte.
func TestClass(t *testing.T) {
	for _, vals := range orderGroups {
		for _, v := range vals {
			k := key(t, v)
			if got := order.Class(v); got != k[0] {
				t.Errorf("Class(%s) = %#x, key starts %#x", show(v), got, k[0])
			}
			raw := encodeLib(t, v, true, false, true)
			if got, err := order.ClassOfRaw(raw); err != nil || got != k[0] {
				t.Errorf("ClassOfRaw(%x) = %#x, %v; key starts %#x", raw, got, err, k[0])
			}
		}
	}
	if got, err := order.ClassOfRaw(nil); got != order.TagNull || err != nil {
		t.Errorf("ClassOfRaw(nil) = %#x, %v", got, err)
	}
	if got := order.Class(struct{}{}); got != 0 {
		t.Errorf("Class(struct{}{}) = %#x, want 0", got)
	}
	type myInt int
	if got := order.Class(myInt(3)); got != order.TagNumber {
		t.Errorf("Class(myInt) = %#x", got)
	}
	for _, bad := range []string{"", "c1", "d4 01 00", "d5 ff 0000", "cd00"} {
		if _, err := order.ClassOfRaw(hx(bad)); !isSentinel(err) {
			t.Errorf("ClassOfRaw(%s) error %v", bad, err)
		}
	}
}
