package order_test

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
	"pgregory.net/rapid"
)

// TestDecodeInvertsKeys checks Decode against mpack.Decode: the key of any
// stored value decodes to what the record would decode to, with the
// losses the order makes (every NaN is one, -0.0 is 0.0), and keys
// concatenated as a compound index writes them decode one after another.
func TestDecodeInvertsKeys(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genValue(t, 3), genValue(t, 2)
		raw := writeMsgpack(t, nil, a)
		want, _, err := mpack.Decode(raw)
		if err != nil {
			t.Fatalf("mpack.Decode: %v", err)
		}
		k := append(rawKey(t, raw), key(t, b)...)
		got, rest, err := order.Decode(k)
		if err != nil {
			t.Fatalf("Decode(%x): %v", k, err)
		}
		if !sameValue(got, want) {
			t.Fatalf("Decode of the key of %#v = %#v", want, got)
		}
		if !bytes.Equal(rest, key(t, b)) {
			t.Fatalf("rest after %#v = %x, want the key of %#v", want, rest, b)
		}
		if again := key(t, got); !bytes.Equal(again, k[:len(k)-len(rest)]) {
			t.Fatalf("the key of the decoded %#v differs", got)
		}
	})
}

// sameValue is reflect.DeepEqual up to what keys do not keep.
func sameValue(got, want any) bool {
	switch w := want.(type) {
	case float64:
		g, ok := got.(float64)
		return ok && (g == w || math.IsNaN(g) && math.IsNaN(w))
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !sameValue(g[i], w[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, v := range w {
			if gv, ok := g[k]; !ok || !sameValue(gv, v) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

func TestDecodeRejectsBrokenKeys(t *testing.T) {
	for _, k := range [][]byte{nil, {0x00}, {order.TagNumber, 1, 2}, {order.TagString, 'a'}, {order.TagString, 0, 7}, {order.TagList, order.TagTrue}, {order.TagMap, 0x07}, {0x7f}} {
		if _, _, err := order.Decode(k); err == nil {
			t.Errorf("Decode(%x) took a broken key", k)
		}
	}
}
