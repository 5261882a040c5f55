package order_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/order"
)

// rawScalars are stored scalars of every kind and form, as AppendRaw
// meets them.
var rawScalars = []struct{ name, raw string }{
	{"nil", "c0"},
	{"true", "c3"},
	{"fixint", "2a"},
	{"negative fixint", "e0"},
	{"int64", "d3 fff0000000000001"},
	{"uint64 max", "cf ffffffffffffffff"},
	{"float32", "ca 3fc00000"},
	{"float64", "cb 400921fb54442d18"},
	{"float64 NaN", "cb 7ff8000000000001"},
	{"fixstr", "a5 68656c6c6f"},
	{"str8 with zeros", "d9 21 " + "61006200" + "6364656667686970717273747576777879" + "7a3031323334353637383900"},
	{"bin8", "c4 04 00ff0001"},
	{"timestamp32", "d6 ff 5f5e1000"},
	{"timestamp64", "d7 ff 00000004 5f5e1000"},
	{"timestamp96", "c7 0c ff 00000005 ffffffff00000000"},
}

// TestAppendRawAllocs: AppendRaw of a scalar into a buffer with room
// allocates nothing; nor does a map whose keys are sorted, as stored, or
// a list.
func TestAppendRawAllocs(t *testing.T) {
	cases := append(rawScalars[:len(rawScalars):len(rawScalars)],
		struct{ name, raw string }{"sorted map", "83 a161 01 a162 a178 a163 92 c3 cb3ff8000000000000"},
		struct{ name, raw string }{"list", "93 01 a3616263 d6ff00000001"},
	)
	buf := make([]byte, 0, 256)
	for _, tc := range cases {
		raw := hx(tc.raw)
		if _, err := order.AppendRaw(buf[:0], raw); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			buf, _ = order.AppendRaw(buf[:0], raw)
		})
		if allocs != 0 {
			t.Errorf("AppendRaw(%s) allocates %v times", tc.name, allocs)
		}
	}
}

// TestAppendAllocs: Append of a normalised scalar, already in an
// interface, into a buffer with room allocates nothing; nor do the
// bounds.
func TestAppendAllocs(t *testing.T) {
	buf := make([]byte, 0, 256)
	for _, v := range []any{nil, true, int64(-7), uint64(math.MaxUint64), 2.5, "a\x00b", []byte("xy"), time.Unix(1, 2), int(3), float32(1.5)} {
		if allocs := testing.AllocsPerRun(100, func() { buf, _ = order.Append(buf[:0], v) }); allocs != 0 {
			t.Errorf("Append(%s) allocates %v times", show(v), allocs)
		}
		if allocs := testing.AllocsPerRun(100, func() { buf, _ = order.Bound(buf[:0], v, true) }); allocs != 0 {
			t.Errorf("Bound(%s) allocates %v times", show(v), allocs)
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { buf = order.StringPrefix(buf[:0], "ab\x00") }); allocs != 0 {
		t.Errorf("StringPrefix allocates %v times", allocs)
	}
}

func BenchmarkAppendRaw(b *testing.B) {
	cases := append(rawScalars[:len(rawScalars):len(rawScalars)],
		struct{ name, raw string }{"sorted map of 3", "83 a161 01 a162 a178 a163 92 c3 cb3ff8000000000000"},
		struct{ name, raw string }{"unsorted map of 3", "83 a163 92 c3 cb3ff8000000000000 a162 a178 a161 01"},
	)
	for _, tc := range cases {
		raw := hx(tc.raw)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 256)
			for b.Loop() {
				buf, _ = order.AppendRaw(buf[:0], raw)
			}
		})
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"int64", int64(-7)},
		{"float64", math.Pi},
		{"string", "hello"},
		{"time", time.Unix(1<<31, 5)},
		{"map of 3", map[string]any{"a": int64(1), "b": "x", "c": []any{true, 1.5}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 256)
			for b.Loop() {
				buf, _ = order.Append(buf[:0], tc.v)
			}
		})
	}
}

// BenchmarkCompareKeys sets comparing two keys against the reference
// Compare, to show what the encoding buys.
func BenchmarkCompareKeys(b *testing.B) {
	x, y := any(int64(1<<53+1)), any(0x1p53)
	kx, ky := key(b, x), key(b, y)
	b.Run("bytes.Compare", func(b *testing.B) {
		for b.Loop() {
			if bytes.Compare(kx, ky) <= 0 {
				b.Fatal("order")
			}
		}
	})
	b.Run("Compare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if order.Compare(x, y) <= 0 {
				b.Fatal("order")
			}
		}
	})
}
