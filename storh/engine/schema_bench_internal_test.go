package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/testkit"
)

// benchCheckPayload returns a whole value (AppendValue), header and all.
func benchCheckPayload(b *testing.B, i int) []byte {
	value, err := AppendValue(nil, map[string]any{
		"user": fmt.Sprintf("user-%06d", i), "email": fmt.Sprintf("user%06d@example.com", i),
		"age": 20 + i%50, "score": float64(i) * 1.5, "active": i%2 == 0,
		"city": "Amsterdam", "country": "NL", "tags": []any{"alpha", "beta"},
		"created": time.UnixMilli(1_750_000_000_000 + int64(i)).UTC(), "note": "a small record of ten fields",
	})
	if err != nil {
		b.Fatal(err)
	}
	return value
}

// BenchmarkSchemaCheck: the CPU of validating one ten-field record against
// a ten-rule schema, whole and in its two steps: mapping the stored record
// to JSON values, and the validator's work on them.
func BenchmarkSchemaCheck(b *testing.B) {
	s, err := CompileSchema(testkit.BenchSchema)
	if err != nil {
		b.Fatal(err)
	}
	payload := benchCheckPayload(b, 7)[HeaderSize:]
	b.Run("step=check", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Check(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	values := make([][]byte, 1000)
	for i := range values {
		values[i] = benchCheckPayload(b, i)
	}
	b.Run("step=batch1000/serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if p := s.precheck(values, &mpack.Slab{}); p.err != nil {
				b.Fatal(p.err)
			}
		}
	})
	b.Run("step=batch1000/precheck", func(b *testing.B) {
		var db DB
		db.colls.schemas.Store("c", s)
		b.ReportAllocs()
		for b.Loop() {
			if p := db.Precheck("c", values); p.schema != s || p.err != nil {
				b.Fatal(p.err)
			}
		}
	})
	b.Run("step=map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := SchemaValue(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("step=validate", func(b *testing.B) {
		v, err := SchemaValue(payload)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := s.compiled.Validate(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
