package mpack_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/mpack"
)

var (
	nan    = math.NaN()
	maxU64 = uint64(math.MaxUint64)
)

// zone is a fixed zone other than UTC: the same instant in another zone.
var zone = time.FixedZone("UTC+1", 3600)

func TestEqualRawStrictTyping(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  []byte
		want any
		eq   bool
	}{
		{"int 1 vs int 1", hx("01"), int64(1), true},
		{"int 1 vs float 1.0", hx("01"), 1.0, false},
		{"int 1 vs string 1", hx("01"), "1", false},
		{"int 1 vs true", hx("01"), true, false},
		{"int 1 vs uint64 1", hx("01"), uint64(1), true},
		{"float64 1.0 vs int 1", hx("cb 3ff0000000000000"), int64(1), false},
		{"float64 1.0 vs float 1.0", hx("cb 3ff0000000000000"), 1.0, true},
		{"float32 1.0 widened", hx("ca 3f800000"), 1.0, true},
		{"float32 0.1 is not float64 0.1", hx("ca 3dcccccd"), 0.1, false},
		{"float32 0.1 vs its widened self", hx("ca 3dcccccd"), float64(float32(0.1)), true},
		{"float NaN vs NaN", hx("cb 7ff8000000000000"), nan, false},
		{"float32 NaN vs NaN", hx("ca 7fc00000"), nan, false},
		{"float 0 vs -0", hx("cb 8000000000000000"), 0.0, true},
		{"str 1 vs str 1", hx("a1 31"), "1", true},
		{"str 1 vs bin 1", hx("a1 31"), []byte("1"), false},
		{"bin 1 vs bin 1", hx("c4 01 31"), []byte("1"), true},
		{"bin 1 vs str 1", hx("c4 01 31"), "1", false},
		{"str8 vs fixstr form", hx("d9 01 31"), "1", true},
		{"uint64 max vs -1", hx("cf ffffffffffffffff"), int64(-1), false},
		{"uint64 max vs uint64 max", hx("cf ffffffffffffffff"), maxU64, true},
		{"int8 -1 vs -1", hx("d0 ff"), int64(-1), true},
		{"int8 -1 vs uint64 max", hx("d0 ff"), maxU64, false},
		{"int64 form 5 vs 5", hx("d3 0000000000000005"), int64(5), true},
		{"int64 form 5 vs uint64 5", hx("d3 0000000000000005"), uint64(5), true},
		{"uint64 form 5 vs 5", hx("cf 0000000000000005"), int64(5), true},
		{"uint16 300 vs 300", hx("cd 012c"), int64(300), true},
		{"uint16 300 vs 44", hx("cd 012c"), int64(44), false},
		{"nil vs nil", hx("c0"), nil, true},
		{"nil vs false", hx("c0"), false, false},
		{"nil vs 0", hx("c0"), int64(0), false},
		{"nil vs empty string", hx("c0"), "", false},
		{"false vs nil", hx("c2"), nil, false},
		{"false vs false", hx("c2"), false, true},
		{"true vs false", hx("c3"), false, false},
		{"time vs same instant elsewhere", hx("d6 ff 00000001"), time.Unix(1, 0).In(zone), true},
		{"time vs other instant", hx("d6 ff 00000001"), time.Unix(1, 1), false},
		{"time vs its seconds", hx("d6 ff 00000001"), int64(1), false},
		{"array equal", hx("92 01 a161"), []any{int64(1), "a"}, true},
		{"array element type", hx("92 01 a161"), []any{1.0, "a"}, false},
		{"array shorter", hx("92 01 a161"), []any{int64(1)}, false},
		{"array vs string", hx("92 01 a161"), "a", false},
		{"map equal", hx("82 a161 01 a162 c0"), map[string]any{"b": nil, "a": int64(1)}, true},
		{"map other key", hx("81 a161 01"), map[string]any{"b": int64(1)}, false},
		{"map more keys", hx("81 a161 01"), map[string]any{"a": int64(1), "b": int64(2)}, false},
		{"map fewer keys", hx("81 a161 01"), map[string]any{}, false},
		{"map value differs", hx("81 a161 01"), map[string]any{"a": "1"}, false},
		{"empty map vs empty map", hx("80"), map[string]any{}, true},
		{"empty map vs nil", hx("80"), nil, false},
		{"non-normalised int", hx("01"), 1, true},
		{"non-normalised uint8 vs -1", hx("ff"), uint8(255), false},
		{"non-normalised nested", hx("92 01 ca 3fc00000"), []any{int8(1), float32(1.5)}, true},
		{"non-normalised slice", hx("92 01 02"), []int{1, 2}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eq, err := mpack.EqualRaw(tc.raw, tc.want)
			if err != nil || eq != tc.eq {
				t.Fatalf("EqualRaw = %v, %v; want %v", eq, err, tc.eq)
			}
			// Equal must agree on normalised values.
			got, _, _ := mpack.Decode(tc.raw)
			want, _ := mpack.Normalize(tc.want)
			if mpack.Equal(got, want) != tc.eq || mpack.Equal(want, got) != tc.eq {
				t.Fatalf("Equal(%#v, %#v) disagrees", got, want)
			}
		})
	}
	if _, err := mpack.EqualRaw(hx("01"), struct{}{}); !errors.Is(err, mpack.ErrUnsupported) {
		t.Errorf("EqualRaw with a struct want: %v", err)
	}
}

func TestNormalize(t *testing.T) {
	type myString string
	type myInt int16
	type myByte uint8
	n := 7
	var nilPtr *int
	when := time.Date(2024, 6, 1, 12, 0, 0, 5, zone)
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"nil", nil, nil},
		{"int", 1, int64(1)},
		{"int8", int8(-8), int64(-8)},
		{"int16", int16(-16), int64(-16)},
		{"int32", int32(-32), int64(-32)},
		{"int64", int64(-64), int64(-64)},
		{"uint", uint(1), int64(1)},
		{"uint8", uint8(8), int64(8)},
		{"uint16", uint16(16), int64(16)},
		{"uint32", uint32(32), int64(32)},
		{"uint64 small", uint64(64), int64(64)},
		{"uint64 above MaxInt64", maxU64, maxU64},
		{"float32", float32(1.5), 1.5},
		{"float64", 2.5, 2.5},
		{"string", "s", "s"},
		{"named string", myString("s"), "s"},
		{"named int", myInt(3), int64(3)},
		{"bool", true, true},
		{"bytes", []byte("ab"), []byte("ab")},
		{"nil bytes", []byte(nil), nil},
		{"byte array", [2]byte{1, 2}, []byte{1, 2}},
		{"named byte slice", []myByte{1, 2}, []byte{1, 2}},
		{"time to UTC", when, when.UTC()},
		{"pointer", &n, int64(7)},
		{"nil pointer", nilPtr, nil},
		{"[]any", []any{1, "a", nil}, []any{int64(1), "a", nil}},
		{"nil []any", []any(nil), nil},
		{"[]int", []int{1, 2}, []any{int64(1), int64(2)}},
		{"[]string", []string{"a"}, []any{"a"}},
		{"map[string]any", map[string]any{"a": uint8(1)}, map[string]any{"a": int64(1)}},
		{"map[string]int", map[string]int{"a": 1}, map[string]any{"a": int64(1)}},
		{"named key map", map[myString]float32{"k": 0.5}, map[string]any{"k": 0.5}},
		{"nil map", map[string]any(nil), nil},
	} {
		got, err := mpack.Normalize(tc.in)
		if err != nil || !same(got, tc.want) {
			t.Errorf("%s: Normalize(%#v) = %#v, %v; want %#v", tc.name, tc.in, got, err, tc.want)
		}
	}
	b := []byte("x")
	if got, _ := mpack.Normalize(b); &got.([]byte)[0] == &b[0] {
		t.Error("Normalize([]byte) aliases its input")
	}

	cyclic := []any{nil}
	cyclic[0] = cyclic
	for _, tc := range []struct {
		name string
		in   any
		err  error
	}{
		{"struct", struct{ A int }{1}, mpack.ErrUnsupported},
		{"chan", make(chan int), mpack.ErrUnsupported},
		{"func", func() {}, mpack.ErrUnsupported},
		{"complex", complex(1, 2), mpack.ErrUnsupported},
		{"int-keyed map", map[int]string{1: "a"}, mpack.ErrUnsupported},
		{"struct inside slice", []any{1, struct{}{}}, mpack.ErrUnsupported},
		{"cyclic", cyclic, mpack.ErrTooDeep},
	} {
		if _, err := mpack.Normalize(tc.in); !errors.Is(err, tc.err) {
			t.Errorf("%s: Normalize error = %v, want %v", tc.name, err, tc.err)
		}
	}
}

func TestEqual(t *testing.T) {
	for _, tc := range []struct {
		a, b any
		eq   bool
	}{
		{nil, nil, true},
		{int64(5), uint64(5), true},
		{int64(-1), maxU64, false},
		{nan, nan, false},
		{1.0, int64(1), false},
		{"a", []byte("a"), false},
		{[]byte{}, []byte(nil), true},
		{time.Unix(5, 0), time.Unix(5, 0).In(zone), true},
		{[]any{int64(1)}, []any{uint64(1)}, true},
		{map[string]any{"a": nil}, map[string]any{"b": nil}, false},
		{map[string]any{"a": nil}, map[string]any{}, false},
		{1, 1, false}, // not normalised: never equal
		{nil, false, false},
	} {
		if got := mpack.Equal(tc.a, tc.b); got != tc.eq {
			t.Errorf("Equal(%#v, %#v) = %v, want %v", tc.a, tc.b, got, tc.eq)
		}
	}
}
