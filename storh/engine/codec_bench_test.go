package engine_test

import (
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/engine"
)

// BenchmarkAppendValue: encoding one ~200-byte record from a generic map
// (the one-pass encoder), from a struct whose fields are declared in key
// order (the library, already canonical) and from one declared out of
// order (the library, then sorted).
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
	for _, tc := range []struct {
		name string
		data any
	}{
		{"map", map[string]any{"user": "u-12345", "status": "paid", "amount": int64(12999), "tags": []any{"alpha", "beta", "gamma"}, "note": note, "created": at}},
		{"struct-sorted", sortedFields{12999, at, note, "paid", tags, "u-12345"}},
		{"struct-unsorted", unsortedFields{"u-12345", "paid", 12999, tags, note, at}},
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
}
