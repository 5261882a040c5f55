package mpack_test

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/internal/mpack"
)

// stored encodes a record the way the engine does.
func stored(v any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// A WhereEqual filter probes one field on the raw payload and decodes the
// record only when it matches.
func ExampleField() {
	payload := stored(map[string]any{"status": "paid", "total": 120, "items": []string{"a", "b"}})

	want, _ := mpack.Normalize("paid")
	raw, ok, err := mpack.Field(payload, "status")
	if err != nil || !ok {
		fmt.Println("no status:", err)
		return
	}
	match, _ := mpack.EqualRaw(raw, want)
	fmt.Printf("raw % x, match %v\n", raw, match)

	_, ok, _ = mpack.Field(payload, "missing")
	fmt.Println("missing present:", ok)
	// Output:
	// raw a4 70 61 69 64, match true
	// missing present: false
}

// Decoded values come back in one Go type per kind, whatever width the
// encoder chose.
func ExampleDecodeMap() {
	payload := stored(map[string]any{"small": uint8(7), "big": int64(1) << 40, "ratio": float32(0.5), "tags": []string{"x"}})
	m, err := mpack.DecodeMap(payload)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, k := range []string{"big", "ratio", "small", "tags"} {
		fmt.Printf("%s: %T %v\n", k, m[k], m[k])
	}
	// Output:
	// big: int64 1099511627776
	// ratio: float64 0.5
	// small: int64 7
	// tags: []interface {} [x]
}

// Comparison is strictly typed: 1, 1.0 and "1" are different values.
func ExampleEqualRaw() {
	raw := stored(1) // a single positive fixint: 0x01
	for _, want := range []any{int64(1), uint64(1), 1.0, "1"} {
		eq, _ := mpack.EqualRaw(raw, want)
		fmt.Printf("%T(%v): %v\n", want, want, eq)
	}
	// Output:
	// int64(1): true
	// uint64(1): true
	// float64(1): false
	// string(1): false
}

func ExampleValidateRecord() {
	fmt.Println(mpack.ValidateRecord(stored(map[string]any{"a": 1})))
	fmt.Println(mpack.ValidateRecord(stored(map[int]any{1: "a"})))
	fmt.Println(mpack.ValidateRecord(stored([]any{1})))
	// Output:
	// <nil>
	// mpack: malformed msgpack: map key at offset 1 is not a string
	// mpack: malformed msgpack: record is not a map (code 0x91)
}
