package codec_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/internal/codec"
	"github.com/storhdb/storh-go/storh/internal/mpack"
)

// The benchmarks encode and decode post (12 fields: strings, ints, a float,
// a bool, a time, a UUID, a []string, a nested struct, a map[string]any,
// two omitempty fields) with the codec and with the msgpack library in the
// same run:
//
//	go test ./storh/internal/codec -run XXX -bench . -benchmem
//
// Encoding through the library is what the engine did before the codec:
// a reused Encoder with SetSortMapKeys and UseCompactInts, then
// mpack.Sorter to put the struct's fields in order.

func BenchmarkEncode(b *testing.B) {
	p := samplePost()
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			var err error
			if buf, err = codec.AppendRecord(buf[:0], &p, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec-typed", func(b *testing.B) {
		b.ReportAllocs()
		c := codec.For(reflect.TypeFor[post]())
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			var err error
			if buf, err = c.AppendRecord(buf[:0], unsafePtr(&p), 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library+sort", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		enc.SetSortMapKeys(true)
		enc.UseCompactInts(true)
		var s mpack.Sorter
		var sorted []byte
		for b.Loop() {
			buf.Reset()
			if err := enc.Encode(&p); err != nil {
				b.Fatal(err)
			}
			var err error
			if sorted, err = s.CanonicalRecord(sorted[:0], buf.Bytes()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := msgpack.Marshal(&p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	p := samplePost()
	// The library's own encoding (the UUID as bin), which both decode.
	payload := libBytes(b, &p)
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v post
			if err := codec.Decode(payload, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec-typed", func(b *testing.B) {
		b.ReportAllocs()
		c := codec.For(reflect.TypeFor[post]())
		for b.Loop() {
			var v post
			if err := c.DecodeRecord(payload, unsafePtr(&v)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v post
			if err := msgpack.Unmarshal(payload, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library-reused-decoder", func(b *testing.B) {
		b.ReportAllocs()
		r := bytes.NewReader(payload)
		dec := msgpack.NewDecoder(r)
		for b.Loop() {
			r.Reset(payload)
			dec.Reset(r)
			var v post
			if err := dec.Decode(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mpack.DecodeMap", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := mpack.DecodeMap(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeScalars decodes a struct of scalar fields only, where the
// per-field cost shows.
func BenchmarkDecodeScalars(b *testing.B) {
	type flat struct {
		A, B, C, D int64
		E, F       string
		G          float64
		H          bool
	}
	payload := libBytes(b, flat{1, 2000, -3, 1 << 40, "alpha", "beta", 1.5, true})
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v flat
			if err := codec.Decode(payload, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v flat
			if err := msgpack.Unmarshal(payload, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
