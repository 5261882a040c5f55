package mpack_test

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/internal/mpack"
)

// The record is sampleRecord: 195 bytes, 10 fields (strings, ints, a float,
// a bool, a timestamp, a nested map and an array), keys sorted as stored.

func BenchmarkDecodeMap(b *testing.B) {
	rec := sampleRecord(b)
	b.Run("mpack", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := mpack.DecodeMap(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("msgpack.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := msgpack.Unmarshal(rec, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("msgpack.Decoder-reused", func(b *testing.B) {
		b.ReportAllocs()
		r := bytes.NewReader(rec)
		dec := msgpack.NewDecoder(r)
		for b.Loop() {
			r.Reset(rec)
			dec.Reset(r)
			if _, err := dec.DecodeMap(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkField(b *testing.B) {
	rec := sampleRecord(b)
	for _, key := range []string{"addr", "kind", "user", "missing"} {
		b.Run(key, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := mpack.Field(rec, key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("then-EqualRaw", func(b *testing.B) {
		b.ReportAllocs()
		var want any = "order.created"
		for b.Loop() {
			raw, _, _ := mpack.Field(rec, "kind")
			if eq, err := mpack.EqualRaw(raw, want); !eq || err != nil {
				b.Fatal(eq, err)
			}
		}
	})
	b.Run("msgpack.Decoder.Query", func(b *testing.B) {
		b.ReportAllocs()
		r := bytes.NewReader(rec)
		dec := msgpack.NewDecoder(r)
		for b.Loop() {
			r.Reset(rec)
			dec.Reset(r)
			if _, err := dec.Query("kind"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkValidateRecord(b *testing.B) {
	rec := sampleRecord(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := mpack.ValidateRecord(rec); err != nil {
			b.Fatal(err)
		}
	}
}
