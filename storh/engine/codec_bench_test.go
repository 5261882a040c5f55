package engine_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// BenchmarkAppendValue: encoding one ~200-byte record from a generic map,
// from a struct whose fields are declared in key order and from one
// declared out of order (the codec writes both in one pass; the library,
// measured alongside, wrote declaration order and needed a sort), and
// through a TypedCodec.
func BenchmarkAppendValue(b *testing.B) {
	type sortedFields struct {
		Amount  int64     `msgpack:"amount"`
		Created time.Time `msgpack:"created"`
		Note    string    `msgpack:"note"`
		Status  string    `msgpack:"status"`
		Tags    []string  `msgpack:"tags"`
		User    string    `msgpack:"user"`
	}
	type unsortedFields struct {
		User    string    `msgpack:"user"`
		Status  string    `msgpack:"status"`
		Amount  int64     `msgpack:"amount"`
		Tags    []string  `msgpack:"tags"`
		Note    string    `msgpack:"note"`
		Created time.Time `msgpack:"created"`
	}
	at := time.UnixMilli(1_718_000_000_123).UTC()
	note := "a note long enough to make the record about two hundred bytes in all, like most records here"
	tags := []string{"alpha", "beta", "gamma"}
	unsorted := unsortedFields{"u-12345", "paid", 12999, tags, note, at}
	for _, tc := range []struct {
		name string
		data any
	}{
		{"map", map[string]any{"user": "u-12345", "status": "paid", "amount": int64(12999), "tags": []any{"alpha", "beta", "gamma"}, "note": note, "created": at}},
		{"struct-sorted", sortedFields{12999, at, note, "paid", tags, "u-12345"}},
		{"struct-unsorted", unsorted},
		{"struct-pointer", &unsorted},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 1024)
			for b.Loop() {
				var err error
				if buf, err = engine.AppendValue(buf[:0], tc.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("struct-typed", func(b *testing.B) {
		b.ReportAllocs()
		tc, err := engine.NewTypedCodec[unsortedFields]()
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			if buf, err = tc.AppendValue(buf[:0], &unsorted); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("struct-unsorted-library+sort", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		enc := msgpack.NewEncoder(&buf)
		enc.SetSortMapKeys(true)
		enc.UseCompactInts(true)
		var s mpack.Sorter
		var sorted []byte
		for b.Loop() {
			buf.Reset()
			if err := enc.Encode(&unsorted); err != nil {
				b.Fatal(err)
			}
			var err error
			if sorted, err = s.CanonicalRecord(sorted[:0], buf.Bytes()); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchPost is a realistic typed record: strings, ints, a float, a bool, a
// time, a UUID, a []string, a nested struct and a map[string]any.
type benchPost struct {
	ID      uuidv7.UUID    `msgpack:"id"`
	Title   string         `msgpack:"title"`
	Body    string         `msgpack:"body"`
	Author  benchAuthor    `msgpack:"author"`
	Tags    []string       `msgpack:"tags"`
	Views   int64          `msgpack:"views"`
	Score   float64        `msgpack:"score"`
	Draft   bool           `msgpack:"draft"`
	Created time.Time      `msgpack:"created"`
	Meta    map[string]any `msgpack:"meta"`
}

type benchAuthor struct {
	Name  string `msgpack:"name"`
	Email string `msgpack:"email"`
	Karma int32  `msgpack:"karma"`
}

func benchPostPayload(b *testing.B) []byte {
	p := benchPost{
		ID: uuidv7.MustParse("018bcfe5-6800-7abc-8def-0123456789ab"), Title: "Canonical msgpack in one pass",
		Body:   "Struct fields are compiled into a table sorted by name, so the record comes out in order.",
		Author: benchAuthor{"Ada", "ada@example.com", 1815}, Tags: []string{"go", "msgpack", "storage"},
		Views: 12345, Score: 4.75, Created: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		Meta: map[string]any{"lang": "en", "words": 1200},
	}
	// As the library stored it (the UUID as bin): both decoders read it.
	v, err := engine.AppendValue(nil, map[string]any{
		"id": p.ID[:], "title": p.Title, "body": p.Body, "author": map[string]any{"name": "Ada", "email": "ada@example.com", "karma": 1815},
		"tags": []any{"go", "msgpack", "storage"}, "views": p.Views, "score": p.Score, "draft": false, "created": p.Created, "meta": p.Meta,
	})
	if err != nil {
		b.Fatal(err)
	}
	return v[engine.HeaderSize:]
}

// BenchmarkDecodeInto: reading one stored record into a struct through
// DecodeInto (the codec), through a TypedCodec, and, in the same run,
// through msgpack.Unmarshal (what DecodeInto did before) and into the
// generic map (DecodeMap).
func BenchmarkDecodeInto(b *testing.B) {
	payload := benchPostPayload(b)
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p benchPost
			if err := engine.DecodeInto(payload, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		tc, err := engine.NewTypedCodec[benchPost]()
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			var p benchPost
			if err := tc.Decode(payload, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("library.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p benchPost
			if err := msgpack.Unmarshal(payload, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeMap", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := engine.DecodeMap(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
