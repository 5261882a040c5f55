package order_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
)

// FuzzAppendRaw checks AppendRaw on arbitrary bytes: it never panics; it
// fails, with one of mpack's sentinels and dst untouched, exactly when
// mpack.Decode fails or leaves bytes over; otherwise its key is Append's
// for the decoded value, starts with ClassOfRaw's tag and decodes back
// from its own bytes.
func FuzzAppendRaw(f *testing.F) {
	for _, v := range []any{
		nil, true, int64(-1), int64(1<<53 + 1), uint64(math.MaxUint64), math.NaN(), 1.5, math.Copysign(0, -1),
		"a\x00b", []byte{0, 0xff}, time.Unix(1, 5), time.Unix(math.MaxInt64, 999_999_999), time.Unix(-1<<40, 0),
		[]any{int64(1), "a", []any{}}, map[string]any{"b": true, "a": map[string]any{"z": nil, "y": 2.5}},
	} {
		f.Add(encodeLib(f, v, true, false, true))
	}
	for _, s := range []string{
		"82 a162 01 a161 02",                                     // unsorted map
		"83 a162 01 a161 02 a162 03",                             // duplicate key, unsorted
		"82 a161 91 82 a17a 01 a179 c0 a160 d3 8000000000000000", // unsorted, nested
		"ca 7fc00000", "cb fff0000000000001", "d7 ff 00000004 00000002", "c7 0c ff 00000005 ffffffffffffffff",
		"d4 01 00", "c1", "0101", "dd ffffffff 01", "81 01 01",
	} {
		f.Add(hx(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if raw == nil {
			raw = []byte{} // nil means a missing field; arbitrary input is never missing
		}
		dst := []byte("dst")
		got, err := order.AppendRaw(dst, raw)
		v, n, derr := mpack.Decode(raw)
		decodes := derr == nil && n == len(raw)
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("AppendRaw error %v is not an mpack sentinel", err)
			}
			if decodes {
				t.Fatalf("AppendRaw rejects what Decode accepts (%s): %v", show(v), err)
			}
			if string(got) != "dst" {
				t.Fatalf("dst is %q after an error", got)
			}
			return
		}
		if !decodes {
			t.Fatalf("AppendRaw accepts what Decode rejects (%v, %d of %d bytes)", derr, n, len(raw))
		}
		want, err := order.Append([]byte("dst"), v)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("AppendRaw %x, Append(%s) = %x, %v", got, show(v), want, err)
		}
		k := got[3:]
		if c, err := order.ClassOfRaw(raw); err != nil || c != k[0] {
			t.Fatalf("ClassOfRaw = %#x, %v; key starts %#x", c, err, k[0])
		}
		if _, n, err := decodeKey(append(k, 0x00, 0xFF)); err != nil || n != len(k) {
			t.Fatalf("decodeKey(key + tail) = %d, %v; key has %d bytes", n, err, len(k))
		}
	})
}
