package engine_test

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/api"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// libEncode is the reference: the msgpack library configured as the engine
// used to configure it (the codec writes the same bytes for the generic
// form).
func libEncode(t interface{ Fatal(...any) }, v any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The codec's generic-map path must write exactly the library's bytes:
// stored records are deterministic whichever path encoded them.
func TestFastEncoderMatchesLibrary(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := testkit.GoMap(t, 1)
		v, err := engine.AppendValue(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := v[engine.HeaderSize:], libEncode(t, m); !bytes.Equal(got, want) {
			t.Fatalf("fast encoder differs from the library:\n got %x\nwant %x", got, want)
		}
	})
}

func TestFastEncoderEdges(t *testing.T) {
	big := map[string]any{}
	for i := range 70000 {
		big[string(rune('a'+i%26))+string(rune(i))] = i
	}
	for name, m := range map[string]map[string]any{
		"int limits":   {"a": math.MinInt64, "b": math.MaxInt64, "c": -32, "d": -33, "e": 127, "f": 128, "g": -129, "h": 256, "i": 65536, "j": -32769, "k": uint64(math.MaxUint64), "l": -2147483649},
		"nil values":   {"n": nil, "m": map[string]any(nil), "s": []any(nil), "b": []byte(nil)},
		"times":        {"zero": time.Time{}, "epoch": time.Unix(0, 0), "ns": time.Unix(1, 1), "far": time.Unix(1<<35, 5), "neg": time.Unix(-5, 0)},
		"floats":       {"nan": math.NaN(), "inf": math.Inf(1), "neg0": math.Copysign(0, -1), "f32": float32(0.1)},
		"16 keys map":  {"0": 0, "1": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": 9, "a": 10, "b": 11, "c": 12, "d": 13, "e": 14, "f": 15},
		"65536+ keys":  big,
		"empty nested": {"m": map[string]any{}, "a": []any{}},
	} {
		v, err := engine.AppendValue(nil, m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got, want := v[engine.HeaderSize:], libEncode(t, m); !bytes.Equal(got, want) {
			t.Errorf("%s: fast encoder differs from the library", name)
		}
	}
	// A type the generic path does not know goes through its compiled
	// codec, inside the same record.
	type point struct{ X, Y int }
	m := map[string]any{"p": point{1, 2}, "n": 1}
	v, err := engine.AppendValue(nil, m)
	if err != nil || !bytes.Equal(v[engine.HeaderSize:], libEncode(t, m)) {
		t.Errorf("fallback: %x, %v", v, err)
	}
	// Depth: MaxDepth nested maps holding a scalar are fine, one more is not.
	deep := map[string]any{"x": 1}
	for range api.MaxDepth - 1 {
		deep = map[string]any{"n": deep}
	}
	if _, err := engine.AppendValue(nil, deep); err != nil {
		t.Errorf("api.MaxDepth levels: %v", err)
	}
	if _, err := engine.AppendValue(nil, map[string]any{"n": deep}); !errors.Is(err, errs.ErrInvalidData) {
		t.Errorf("api.MaxDepth+1 levels: %v; want ErrInvalidData", err)
	}
	list := []any{1}
	for range api.MaxDepth - 2 {
		list = []any{list}
	}
	if _, err := engine.AppendValue(nil, map[string]any{"l": list}); err != nil {
		t.Errorf("api.MaxDepth levels of lists: %v", err)
	}
	if _, err := engine.AppendValue(nil, map[string]any{"l": []any{list}}); !errors.Is(err, errs.ErrInvalidData) {
		t.Errorf("api.MaxDepth+1 levels of lists: %v; want ErrInvalidData", err)
	}
}

func TestFastEncoderAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	m := map[string]any{"name": "ada", "n": 7, "tags": []any{"a", "b"}, "at": time.Unix(5, 0), "m": map[string]any{"k": 1.5}}
	dst := make([]byte, 0, 4096)
	if allocs := testing.AllocsPerRun(200, func() { _, _ = engine.AppendValue(dst[:0], m) }); allocs != 0 {
		t.Errorf("AppendValue into a buffer with room allocates %v times; want 0", allocs)
	}
	if allocs := testing.AllocsPerRun(200, func() { _, _ = engine.AppendValue(nil, m) }); allocs != 1 {
		t.Errorf("AppendValue(nil) allocates %v times; want 1 (the result)", allocs)
	}
}

// Ids in a record are storh's msgpack extensions, wherever they sit: in a
// generic map, a struct field, behind a pointer. The library would have
// written them as bin (MarshalBinary); reading a record written that way
// still gives the id back.
func TestAppendValueIDs(t *testing.T) {
	u := uuidv7.MustParse("018bcfe5-6800-7abc-8def-0123456789ab")
	o := objectid.MustParse("65a1b2c3d4e5f60718293a4b")
	type rec struct {
		U  uuidv7.UUID        `msgpack:"u"`
		PU *uuidv7.UUID       `msgpack:"pu"`
		O  objectid.ObjectID  `msgpack:"o"`
		PO *objectid.ObjectID `msgpack:"po"`
	}
	want := append(append(append(append([]byte{0x84, 0xa1, 'o', 0xc7, 12, 2}, o[:]...), 0xa2, 'p', 'o', 0xc7, 12, 2), o[:]...),
		0xa2, 'p', 'u', 0xd8, 1)
	want = append(append(append(want, u[:]...), 0xa1, 'u', 0xd8, 1), u[:]...)
	for _, data := range []any{rec{u, &u, o, &o}, &rec{u, &u, o, &o}, map[string]any{"u": u, "pu": &u, "o": o, "po": &o}} {
		v, err := engine.AppendValue(nil, data)
		if err != nil {
			t.Fatal(err)
		}
		if got := v[engine.HeaderSize:]; !bytes.Equal(got, want) {
			t.Errorf("%T:\n got %x\nwant %x", data, got, want)
		}
	}
	old := libEncode(t, map[string]any{"u": u[:], "pu": u[:], "o": o[:], "po": o[:]})
	var back rec
	if err := engine.DecodeInto(old, &back); err != nil || back.U != u || back.PU == nil || *back.PU != u || back.O != o || back.PO == nil || *back.PO != o {
		t.Errorf("decoding ids stored as bin: %+v, %v", back, err)
	}
}

func TestTypedCodec(t *testing.T) {
	type post struct {
		Title string    `msgpack:"title"`
		Views int64     `msgpack:"views"`
		At    time.Time `msgpack:"at"`
		Tags  []string  `msgpack:"tags"`
	}
	tc, err := engine.NewTypedCodec[post]()
	if err != nil {
		t.Fatal(err)
	}
	p := post{"t", 3, time.Unix(9, 0), []string{"a"}}
	got, err := tc.AppendValue([]byte("x"), &p)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := engine.AppendValue([]byte("x"), &p)
	if !bytes.Equal(got, want) {
		t.Errorf("TypedCodec.AppendValue = %x, AppendValue = %x", got, want)
	}
	var back post
	if err := tc.Decode(got[1+engine.HeaderSize:], &back); err != nil || back.Title != "t" || back.Views != 3 || !back.At.Equal(p.At) || back.Tags[0] != "a" {
		t.Errorf("Decode = %+v, %v", back, err)
	}
	if _, err := tc.AppendValue(nil, nil); !errors.Is(err, errs.ErrInvalidData) {
		t.Errorf("AppendValue(nil) = %v", err)
	}
	if !raceEnabled {
		dst := make([]byte, 0, 1024)
		if allocs := testing.AllocsPerRun(200, func() { _, _ = tc.AppendValue(dst[:0], &p) }); allocs != 0 {
			t.Errorf("TypedCodec.AppendValue into a buffer with room allocates %v times; want 0", allocs)
		}
		if allocs := testing.AllocsPerRun(200, func() { _, _ = tc.AppendValue(nil, &p) }); allocs != 1 {
			t.Errorf("TypedCodec.AppendValue(nil) allocates %v times; want 1", allocs)
		}
	}
	for _, bad := range []error{
		func() error { _, err := engine.NewTypedCodec[int](); return err }(),
		func() error { _, err := engine.NewTypedCodec[[]post](); return err }(),
		func() error { _, err := engine.NewTypedCodec[map[int]string](); return err }(),
	} {
		if !errors.Is(bad, errs.ErrInvalidData) {
			t.Errorf("NewTypedCodec of a non-record type: %v", bad)
		}
	}
	if _, err := engine.NewTypedCodec[*post](); err != nil {
		t.Errorf("NewTypedCodec[*post]: %v", err)
	}
	if _, err := engine.NewTypedCodec[map[string]any](); err != nil {
		t.Errorf("NewTypedCodec[map[string]any]: %v", err)
	}
}
