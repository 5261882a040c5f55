package engine_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/api"

	"github.com/storhdb/storh-go/storh/internal/codec"
	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

func TestAppendValueRoundTrip(t *testing.T) {
	type tagged struct {
		Name string    `msgpack:"name"`
		Age  uint8     `msgpack:"age"`
		At   time.Time `msgpack:"at"`
		Omit string    `msgpack:"omit,omitempty"`
	}
	at := time.Date(2024, 2, 29, 12, 0, 0, 5, time.FixedZone("x", 3600))
	tests := []struct {
		name string
		data any
		want map[string]any
	}{
		{"empty map", map[string]any{}, map[string]any{}},
		{"scalars", map[string]any{"i": 1, "u": uint64(math.MaxUint64), "n": -3, "f": float32(0.5), "s": "x", "b": false, "z": nil},
			map[string]any{"i": int64(1), "u": uint64(math.MaxUint64), "n": int64(-3), "f": 0.5, "s": "x", "b": false, "z": nil}},
		{"nested", map[string]any{"l": []any{1, []int{2}}, "m": map[string]int{"k": 3}},
			map[string]any{"l": []any{int64(1), []any{int64(2)}}, "m": map[string]any{"k": int64(3)}}},
		{"typed map", map[string]string{"a": "b"}, map[string]any{"a": "b"}},
		{"struct", tagged{Name: "ada", Age: 36, At: at}, map[string]any{"name": "ada", "age": int64(36), "at": at.UTC()}},
		{"pointer to struct", &tagged{Name: "p"}, map[string]any{"name": "p", "age": int64(0), "at": time.Time{}.UTC()}},
		{"bytes", map[string]any{"bin": []byte{0, 1}}, map[string]any{"bin": []byte{0, 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte("prefix")
			v, err := appendSealed(prefix, tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(v, []byte("prefix")) {
				t.Fatalf("AppendValue lost its prefix: %q", v)
			}
			value := v[len(prefix):]
			p, err := engine.Payload(testKey[:], value)
			if err != nil {
				t.Fatal(err)
			}
			if len(p) != len(value)-engine.HeaderSize {
				t.Errorf("payload %d bytes of a %d-byte value", len(p), len(value))
			}
			if err := mpack.ValidateRecord(p); err != nil {
				t.Errorf("stored payload is not a valid record: %v", err)
			}
			got, err := engine.DecodeMap(p)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "pointer to struct" {
				// The zero time's encoding round-trips to a time, whatever its form.
				delete(got, "at")
				delete(tc.want, "at")
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decoded %#v\nwant    %#v", got, tc.want)
			}
			// Encoding is deterministic: map order does not leak into the bytes.
			again, _ := appendSealed(nil, tc.data)
			if !bytes.Equal(again, value) {
				t.Error("two encodings of the same data differ")
			}
		})
	}
}

func TestAppendValueFailureAppendsNothing(t *testing.T) {
	dst := make([]byte, 3, 64)
	copy(dst, "abc")
	for _, data := range []any{nil, 1, "s", []any{}, map[string]any(nil), map[int]any{}, make(chan int),
		map[string]any{"c": make(chan int)}, map[string]any{"z": 1i},
		map[string]any{"big": strings.Repeat("x", api.MaxRecordSize)}} {
		out, err := appendSealed(dst, data)
		if !errors.Is(err, errs.ErrInvalidData) {
			t.Errorf("AppendValue(%T) = %v; want ErrInvalidData", data, err)
		}
		if len(out) != 3 || string(out) != "abc" {
			t.Errorf("AppendValue(%T) failed but returned %q", data, out)
		}
		if !strings.HasPrefix(err.Error(), "storh: invalid data") {
			t.Errorf("message %q", err)
		}
	}
	// The largest record that fits is accepted.
	pad := api.MaxRecordSize - 16
	if _, err := appendSealed(nil, map[string]any{"b": make([]byte, pad)}); err != nil {
		t.Errorf("record just under the limit: %v", err)
	}
}

func TestPayloadDetectsEveryBitFlip(t *testing.T) {
	value, err := appendSealed(nil, map[string]any{"name": "ada", "n": 7, "l": []any{true, nil}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Payload(testKey[:], value); err != nil {
		t.Fatal(err)
	}
	for i := range value {
		for bit := range 8 {
			bad := append([]byte(nil), value...)
			bad[i] ^= 1 << bit
			if p, err := engine.Payload(testKey[:], bad); !errors.Is(err, errs.ErrCorrupt) {
				t.Fatalf("byte %d bit %d flipped: Payload = %x, %v; want ErrCorrupt", i, bit, p, err)
			}
		}
	}
	for n := range engine.HeaderSize {
		if _, err := engine.Payload(testKey[:], value[:n]); !errors.Is(err, errs.ErrCorrupt) {
			t.Errorf("%d-byte value: %v; want ErrCorrupt", n, err)
		}
	}
	if _, err := engine.Payload(testKey[:], value[:len(value)-1]); !errors.Is(err, errs.ErrCorrupt) {
		t.Errorf("truncated value: %v; want ErrCorrupt", err)
	}
}

func TestPayloadAllocatesNothing(t *testing.T) {
	value, err := appendSealed(nil, map[string]any{"name": "ada", "n": 7})
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), value...)
	bad[len(bad)-1] ^= 1
	if allocs := testing.AllocsPerRun(100, func() { _, _ = engine.Payload(testKey[:], value) }); allocs != 0 {
		t.Errorf("Payload allocates %v times per call; want 0", allocs)
	}
	_ = bad
}

func TestDecodeInto(t *testing.T) {
	value, _ := appendSealed(nil, map[string]any{"name": "ada", "n": 7})
	p, _ := engine.Payload(testKey[:], value)
	var s struct {
		Name string `msgpack:"name"`
		N    int    `msgpack:"n"`
	}
	if err := engine.DecodeInto(p, &s); err != nil || s.Name != "ada" || s.N != 7 {
		t.Errorf("DecodeInto(struct) = %+v, %v", s, err)
	}
	var m map[string]any
	if err := engine.DecodeInto(p, &m); err != nil || m["n"] != int64(7) {
		t.Errorf("DecodeInto(map) = %v, %v", m, err)
	}
	var a any
	if err := engine.DecodeInto(p, &a); err != nil || a.(map[string]any)["name"] != "ada" {
		t.Errorf("DecodeInto(any) = %v, %v", a, err)
	}
	if _, err := engine.DecodeMap([]byte{0x91, 0x01}); !errors.Is(err, errs.ErrCorrupt) {
		t.Errorf("DecodeMap(array) = %v; want ErrCorrupt", err)
	}
	if err := engine.DecodeInto([]byte{0xc1}, &m); !errors.Is(err, errs.ErrCorrupt) {
		t.Errorf("DecodeInto(&map, garbage) = %v; want ErrCorrupt", err)
	}
	// A struct: garbage is ErrCorrupt, a record that does not fit is
	// ErrType (naming the type and the field), and never the other way.
	if err := engine.DecodeInto([]byte{0x81, 0xa4, 'n', 'a', 'm', 'e'}, &s); !errors.Is(err, errs.ErrCorrupt) || errors.Is(err, codec.ErrType) {
		t.Errorf("DecodeInto(&struct, truncated) = %v; want ErrCorrupt", err)
	}
	var narrow struct {
		N int8 `msgpack:"n"`
	}
	big, _ := appendSealed(nil, map[string]any{"n": 300})
	p, _ = engine.Payload(testKey[:], big)
	err := engine.DecodeInto(p, &narrow)
	if !errors.Is(err, codec.ErrType) || errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), `field "n": 300 overflows int8`) {
		t.Errorf("DecodeInto(300 into int8) = %v; want ErrType", err)
	}
	if err := engine.DecodeInto(p, narrow); !errors.Is(err, codec.ErrType) {
		t.Errorf("DecodeInto(non-pointer) = %v; want ErrType", err)
	}
	// any fields get the normalised form, as DecodeMap gives it.
	var loose struct {
		N any            `msgpack:"n"`
		M map[string]any `msgpack:"m"`
	}
	small, _ := appendSealed(nil, map[string]any{"n": int8(3), "m": map[string]any{"f": float32(0.5), "t": time.Unix(1, 0).In(time.FixedZone("x", 60))}})
	p, _ = engine.Payload(testKey[:], small)
	if err := engine.DecodeInto(p, &loose); err != nil || loose.N != int64(3) || loose.M["f"] != 0.5 || loose.M["t"].(time.Time).Location() != time.UTC {
		t.Errorf("DecodeInto(any fields) = %#v, %v", loose, err)
	}
}

// FuzzValueRoundTrip: any payload the decoder accepts is data that encodes;
// its encoding passes the read checks and is a fixed point of decode+encode.
func FuzzValueRoundTrip(f *testing.F) {
	for _, m := range []map[string]any{
		{},
		{"a": 1, "b": "x", "c": []any{1.5, nil, true}},
		{"t": time.Unix(1_700_000_000, 123).UTC(), "bin": []byte{1, 2}, "m": map[string]any{"k": -1}},
		{"u": uint64(math.MaxUint64), "f32": float32(0.25), "nan": math.NaN()},
	} {
		v, err := appendSealed(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v[engine.HeaderSize:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := mpack.DecodeMap(b)
		if err != nil {
			if mpack.ValidateRecord(b) == nil {
				t.Fatalf("DecodeMap rejects what ValidateRecord accepts: %v", err)
			}
			return
		}
		v1, err := appendSealed(nil, m)
		if err != nil {
			if errors.Is(err, errs.ErrInvalidData) && len(b) > api.MaxRecordSize/2 {
				return
			}
			t.Fatalf("AppendValue(decoded %x): %v", b, err)
		}
		p1, err := engine.Payload(testKey[:], v1)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := engine.DecodeMap(p1)
		if err != nil {
			t.Fatalf("DecodeMap of our own encoding: %v", err)
		}
		v2, err := appendSealed(nil, m2)
		if err != nil || !bytes.Equal(v1, v2) {
			t.Fatalf("encode(decode(encode(x))) differs from encode(x): %x vs %x (%v)", v1, v2, err)
		}
	})
}

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"users", true},
		{"a", true},
		{"with space", true},
		{"ünïcödé-名前", true},
		{"dots.and/slashes", true},
		{strings.Repeat("n", api.MaxNameLength), true},
		{strings.Repeat("n", api.MaxNameLength+1), false},
		{strings.Repeat("é", api.MaxNameLength/2+1), false}, // bytes, not runes
		{"", false},
		{"\x00storh", false},
		{"tab\there", false},
		{"new\nline", false},
		{"bell\a", false},
		{"del\x7f", false},
		{"bad\xffutf8", false},
		{"\u200b", false}, // zero-width space: not printable
	} {
		err := engine.ValidateName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v; want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errs.ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v; want ErrInvalidName", tc.name, err)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	e := &errs.Error{Op: "put", Collection: "users", ID: "018bcfe5-6800-7abc-8def-0123456789ab", Index: 3,
		Err: errs.ErrExists, Hint: "use a Docs collection"}
	want := `storh: put "users" item 3 id 018bcfe5-6800-7abc-8def-0123456789ab: record already exists (use a Docs collection)`
	if e.Error() != want {
		t.Errorf("Error() = %s\nwant      %s", e.Error(), want)
	}
	if !errors.Is(e, errs.ErrExists) || errors.Is(e, errs.ErrNotFound) {
		t.Error("errors.Is does not follow Err")
	}
	e2 := &errs.Error{Op: "open", Path: "/x.db", Index: -1, Err: errs.ErrLocked}
	if got := e2.Error(); got != "storh: open /x.db: database is locked" {
		t.Errorf("Error() = %s", got)
	}
}

func TestKind(t *testing.T) {
	for k, want := range map[engine.Kind]string{engine.KindDocs: "docs", engine.KindLog: "log", engine.KindQueue: "queue"} {
		if s := k.String(); s != want {
			t.Errorf("Kind(%d) = %q; want %q", k, s, want)
		}
	}
	if s := engine.Kind(9).String(); s != "kind(9)" {
		t.Errorf("Kind(9) = %q", s)
	}
}

// testKey is the id the codec tests store their values under: the checksum
// covers it.
var testKey = uuidv7.MustParse("018bcfe5-6800-7000-8000-000000000001")

// appendSealed encodes like engine.AppendValue and seals the value for
// testKey, as Tx.Put does when it writes.
func appendSealed(dst []byte, data any) ([]byte, error) {
	out, err := engine.AppendValue(dst, data)
	if err == nil {
		engine.SealValue(out[len(dst):], testKey[:])
	}
	return out, err
}

func TestPayloadCoversTheKey(t *testing.T) {
	value, err := appendSealed(nil, map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range testKey {
		for bit := range 8 {
			other := testKey
			other[i] ^= 1 << bit
			if _, err := engine.Payload(other[:], value); !errors.Is(err, errs.ErrCorrupt) {
				t.Fatalf("key byte %d bit %d flipped: %v; want ErrCorrupt", i, bit, err)
			}
		}
	}
	unsealed, _ := engine.AppendValue(nil, map[string]any{"n": 1})
	if _, err := engine.Payload(testKey[:], unsealed); !errors.Is(err, errs.ErrCorrupt) {
		t.Errorf("an unsealed value passed its checksum: %v", err)
	}
}

// TestEqualDataEqualBytes: a record's bytes depend on its data, never on the
// Go type that carried it. A struct (fields declared out of order, nested
// structs and pointers), typed maps of every kind, and the generic map with
// the same keys and values all store the same payload, sorted at every
// depth, and a record written twice gives the same bytes twice (typed maps
// iterate in random order).
func TestEqualDataEqualBytes(t *testing.T) {
	type inner struct {
		Zeta  string `msgpack:"zeta"`
		Alpha int64  `msgpack:"alpha"`
	}
	type record struct {
		Title  string              `msgpack:"title"`
		Counts map[string]int      `msgpack:"counts"`
		Tags   map[string][]string `msgpack:"tags"`
		Inner  inner               `msgpack:"inner"`
		Ptr    *inner              `msgpack:"ptr"`
		Score  float32             `msgpack:"score"`
		At     time.Time           `msgpack:"at"`
		Blob   []byte              `msgpack:"blob"`
		List   []inner             `msgpack:"list"`
		Flags  map[string]bool     `msgpack:"flags"`
	}
	at := time.Date(2025, 3, 1, 12, 0, 0, 7, time.UTC)
	counts := map[string]int{"z": 26, "a": 1, "m": 13, "b": 2, "y": 25, "c": 3, "x": 24, "d": 4}
	st := record{
		Title: "t", Counts: counts, Tags: map[string][]string{"go": {"b", "a"}, "db": nil, "api": {}},
		Inner: inner{"z", -1}, Ptr: &inner{"p", 2}, Score: 1.5, At: at, Blob: []byte{1, 2},
		List: []inner{{"l", 3}}, Flags: map[string]bool{"on": true, "off": false, "maybe": true},
	}
	generic := map[string]any{
		"title":  "t",
		"counts": map[string]any{"z": 26, "a": 1, "m": 13, "b": 2, "y": 25, "c": 3, "x": 24, "d": 4},
		"tags":   map[string]any{"go": []any{"b", "a"}, "db": nil, "api": []any{}},
		"inner":  map[string]any{"zeta": "z", "alpha": int64(-1)},
		"ptr":    map[string]any{"zeta": "p", "alpha": 2},
		"score":  float32(1.5),
		"at":     at,
		"blob":   []byte{1, 2},
		"list":   []any{map[string]any{"zeta": "l", "alpha": 3}},
		"flags":  map[string]any{"on": true, "off": false, "maybe": true},
	}
	want := valueOf(t, generic)
	if sorted, err := mpack.ValidateRecordSorted(want); err != nil || !sorted {
		t.Fatalf("the generic map's payload is not sorted: %v, %v", sorted, err)
	}
	for name, data := range map[string]any{
		"struct":         st,
		"pointer":        &st,
		"typed top map":  map[string]map[string]int{"counts": counts},
		"typed ints":     counts,
		"generic again":  generic,
		"struct in map":  map[string]any{"rec": st},
		"typed map any":  map[string]any{"counts": counts, "flags": st.Flags},
		"struct again 1": st,
		"struct again 2": st,
	} {
		t.Run(name, func(t *testing.T) {
			got := valueOf(t, data)
			if sorted, err := mpack.ValidateRecordSorted(got); err != nil || !sorted {
				t.Fatalf("payload of %T is not sorted at every depth: %v, %v\n%x", data, sorted, err, got)
			}
			switch name {
			case "struct", "pointer", "generic again", "struct again 1", "struct again 2":
				if !bytes.Equal(got, want) {
					t.Errorf("payload of %T differs from the equal generic map:\n got %x\nwant %x", data, got, want)
				}
			}
			for range 20 {
				if again := valueOf(t, data); !bytes.Equal(again, got) {
					t.Fatalf("writing the same %T twice gave different bytes", data)
				}
			}
		})
	}
}

func valueOf(t *testing.T, data any) []byte {
	t.Helper()
	v, err := engine.AppendValue(nil, data)
	if err != nil {
		t.Fatalf("AppendValue(%T): %v", data, err)
	}
	return v[engine.HeaderSize:]
}
