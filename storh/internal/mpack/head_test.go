package mpack_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/mpack"
)

// TestReadHead checks the exported header reader against Decode on the
// decoding table: for every scalar Decode accepts, the header alone gives
// the same value and the whole length; for containers, the element count
// and header length; and every header error is ErrMalformed.
func TestReadHead(t *testing.T) {
	for _, tc := range codeTests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := mpack.ReadHead(tc.in, 0)
			if err != nil {
				if tc.err == nil || !errors.Is(err, mpack.ErrMalformed) {
					t.Fatalf("ReadHead error %v for input Decode accepts or rejects with %v", err, tc.err)
				}
				return
			}
			if tc.err != nil {
				return // the value's own rules, not its header, reject it
			}
			var got any
			switch h.Kind {
			case mpack.KindNil:
				got = nil
			case mpack.KindFalse, mpack.KindTrue:
				got = h.Kind == mpack.KindTrue
			case mpack.KindInt:
				got = int64(h.Bits)
			case mpack.KindUint:
				got = any(int64(h.Bits))
				if h.Bits > math.MaxInt64 {
					got = h.Bits
				}
			case mpack.KindFloat32:
				got = float64(math.Float32frombits(uint32(h.Bits)))
			case mpack.KindFloat64:
				got = math.Float64frombits(h.Bits)
			case mpack.KindStr:
				got = string(tc.in[h.Size : h.Size+h.N])
			case mpack.KindBin:
				got = tc.in[h.Size : h.Size+h.N]
			case mpack.KindExt:
				if h.Ext != -1 {
					return // storh's typed ids: no Timestamp to read
				}
				tm, err := h.Timestamp(tc.in, 0)
				if err != nil {
					t.Fatalf("Timestamp: %v", err)
				}
				got = tm
			case mpack.KindArray:
				if n := len(tc.want.([]any)); h.N != n {
					t.Fatalf("array count %d, want %d", h.N, n)
				}
				return
			case mpack.KindMap:
				if n := len(tc.want.(map[string]any)); h.N != n {
					t.Fatalf("map count %d, want %d", h.N, n)
				}
				return
			default:
				t.Fatalf("unknown kind %d", h.Kind)
			}
			if h.Size+h.N != len(tc.in) {
				t.Errorf("Size %d + N %d, want the whole %d bytes", h.Size, h.N, len(tc.in))
			}
			want := tc.want
			if tm, ok := want.(time.Time); ok {
				want = tm.UTC()
			}
			if !same(got, want) {
				t.Errorf("header value %#v, want %#v", got, want)
			}
		})
	}
}

// TestHeadTimestampErrors checks that Timestamp applies Decode's rules.
func TestHeadTimestampErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"d4 01 00", mpack.ErrUnsupported},
		{"d5 ff 0000", mpack.ErrMalformed},
		{"d7 ff ffffffff 00000000", mpack.ErrMalformed},
		{"c7 0c ff 3b9aca00 0000000000000000", mpack.ErrMalformed},
	} {
		in := hx(tc.in)
		h, err := mpack.ReadHead(in, 0)
		if err != nil {
			t.Fatalf("%s: ReadHead: %v", tc.in, err)
		}
		if _, err := h.Timestamp(in, 0); !errors.Is(err, tc.want) {
			t.Errorf("%s: Timestamp error %v, want %v", tc.in, err, tc.want)
		}
	}
}
