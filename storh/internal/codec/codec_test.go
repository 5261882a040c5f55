package codec_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"net/netip"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/internal/codec"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

func hx(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// enc encodes a record and checks it is one ValidateRecord accepts, with
// every map in order.
func enc(t testing.TB, v any) []byte {
	t.Helper()
	b, err := codec.AppendRecord(nil, v, 0)
	if err != nil {
		t.Fatalf("AppendRecord(%T): %v", v, err)
	}
	if sorted, err := mpack.ValidateRecordSorted(b); err != nil || !sorted {
		t.Fatalf("AppendRecord(%T) = %x: sorted %v, %v", v, b, sorted, err)
	}
	return b
}

// field encodes v as the value of field "v" and returns the value's bytes.
func field(t testing.TB, v any) []byte {
	t.Helper()
	b := enc(t, map[string]any{"v": v})
	return b[3:] // 81 a1 76
}

// tb is what the helpers need of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Fatal(args ...any)
}

// libBytes is the reference: the library with the engine's settings, then
// the record put in canonical form.
func libBytes(t tb, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	e.SetSortMapKeys(true)
	e.UseCompactInts(true)
	if err := e.Encode(v); err != nil {
		t.Fatalf("library: %v", err)
	}
	var s mpack.Sorter
	out, err := s.CanonicalRecord(nil, buf.Bytes())
	if err != nil {
		t.Fatalf("library output %x: %v", buf.Bytes(), err)
	}
	return out
}

func TestScalarEncodings(t *testing.T) {
	type (
		myString string
		myInt    int16
		myBytes  []byte
	)
	u := uuidv7.MustParse("018bcfe5-6800-7000-8000-000000000001")
	oid := objectid.MustParse("65a1b2c3d4e5f60718293a4b")
	for _, tc := range []struct {
		v    any
		want string
	}{
		{nil, "c0"},
		{true, "c3"},
		{false, "c2"},
		{0, "00"},
		{127, "7f"},
		{128, "cc80"},
		{-1, "ff"},
		{-32, "e0"},
		{-33, "d0df"},
		{int8(-128), "d080"},
		{uint64(math.MaxUint64), "cfffffffffffffffff"},
		{int64(math.MinInt64), "d38000000000000000"},
		{myInt(300), "cd012c"},
		{float32(1.5), "ca3fc00000"},
		{1.5, "cb3ff8000000000000"},
		{"", "a0"},
		{myString("ab"), "a26162"},
		{strings.Repeat("x", 32), "d920" + strings.Repeat("78", 32)},
		{[]byte(nil), "c0"},
		{[]byte{}, "c400"},
		{myBytes{1, 2}, "c4020102"},
		{[3]byte{1, 2, 3}, "c403010203"},
		{[0]byte{}, "c400"},
		{[2]int{1, 2}, "920102"},
		{[]int(nil), "c0"},
		{[]string{"a"}, "91a161"},
		{map[string]int(nil), "c0"},
		{(*int)(nil), "c0"},
		{time.Unix(1, 0), "d6ff00000001"},
		{time.Unix(1, 1), "d7ff0000000400000001"},
		{time.Unix(-1, 0), "c70cff00000000ffffffffffffffff"},
		{u, "d801" + hex.EncodeToString(u[:])},
		{&u, "d801" + hex.EncodeToString(u[:])},
		{(*uuidv7.UUID)(nil), "c0"},
		{oid, "c70c02" + hex.EncodeToString(oid[:])},
		{&oid, "c70c02" + hex.EncodeToString(oid[:])},
		{errors.New("boom"), "80"},                            // a *errors.errorString: a struct without exported fields
		{withErr{errors.New("boom")}, "81a145a4626f6f6d"},     // a field of type error: its text
		{netip.MustParseAddr("1.2.3.4"), "c404" + "01020304"}, // BinaryMarshaler before TextMarshaler
		{textOnly{"hi"}, "a26869"},                            // TextMarshaler: str
	} {
		if got := field(t, tc.v); !bytes.Equal(got, hx(tc.want)) {
			t.Errorf("%T %v: got %x, want %s", tc.v, tc.v, got, tc.want)
		}
	}
}

type withErr struct{ E error }

type textOnly struct{ s string }

func (x textOnly) MarshalText() ([]byte, error) { return []byte(x.s), nil }
func (x *textOnly) UnmarshalText(b []byte) error {
	x.s = string(b)
	return nil
}

// The generic map form is encoded without allocating once the pool is warm.
func TestMapAnyAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	m := map[string]any{"name": "ada", "n": 7, "tags": []any{"a", "b"}, "at": time.Unix(5, 0),
		"m": map[string]any{"k": 1.5}, "id": uuidv7.New(), "oid": objectid.New()}
	dst := make([]byte, 0, 4096)
	if allocs := testing.AllocsPerRun(200, func() { _, _ = codec.AppendRecord(dst[:0], m, 0) }); allocs != 0 {
		t.Errorf("AppendRecord(map[string]any) allocates %v times; want 0", allocs)
	}
}

func TestStructAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	p := samplePost()
	c := codec.For(reflect.TypeFor[post]())
	dst := make([]byte, 0, 4096)
	if allocs := testing.AllocsPerRun(200, func() { _, _ = c.AppendRecord(dst[:0], unsafePtr(&p), 0) }); allocs != 0 {
		t.Errorf("Codec.AppendRecord(struct) allocates %v times; want 0", allocs)
	}
	if allocs := testing.AllocsPerRun(200, func() { _, _ = codec.AppendRecord(dst[:0], &p, 0) }); allocs != 0 {
		t.Errorf("AppendRecord(&struct) allocates %v times; want 0", allocs)
	}
	b := enc(t, &p)
	var flat struct {
		Title string    `msgpack:"title"`
		Views int64     `msgpack:"views"`
		At    time.Time `msgpack:"created"`
		ID    uuidv7.UUID
		Score float64 `msgpack:"score"`
	}
	if allocs := testing.AllocsPerRun(200, func() { _ = codec.Decode(b, &flat) }); allocs != 1 {
		t.Errorf("Decode into a struct of scalars allocates %v times; want 1 (the strings' shared copy)", allocs)
	}
}

func TestFieldNames(t *testing.T) {
	type T struct {
		MsgTag   int `msgpack:"m"`
		JSONTag  int `json:"j"`
		Both     int `msgpack:"mb" json:"jb"`
		Plain    int
		Skipped  int `msgpack:"-"`
		JSkipped int `json:"-"`
		JDash    int `json:"-,"`
		NoName   int `msgpack:",omitempty"`
		JNoName  int `json:",omitempty"`
		hidden   int //nolint:unused
	}
	got := keys(t, T{MsgTag: 1, JSONTag: 1, Both: 1, Plain: 1, Skipped: 1, JSkipped: 1, JDash: 1, NoName: 1, JNoName: 1})
	want := "- JNoName NoName Plain j m mb"
	if got != want {
		t.Errorf("keys %q, want %q", got, want)
	}
	if got := keys(t, T{}); got != "- Plain j m mb" {
		t.Errorf("omitempty from either tag: keys %q", got)
	}
}

// keys returns the top-level keys of v's encoding, space-separated, in
// stored order.
func keys(t testing.TB, v any) string {
	t.Helper()
	m, err := mpack.DecodeMap(enc(t, v))
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	// stored order is sorted; so is this
	sortStrings(ks)
	return strings.Join(ks, " ")
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

type Base struct {
	ID   int    `msgpack:"id"`
	Kind string `msgpack:"kind"`
}

type Extra struct {
	Note string `msgpack:"note"`
	Kind string `msgpack:"kind"`
}

type base2 struct {
	Hidden string `msgpack:"hidden"`
}

type Named struct {
	X int `msgpack:"x"`
}

func TestEmbedding(t *testing.T) {
	type outer struct {
		Base
		*Extra
		base2                // unexported embedded struct: its exported fields are promoted
		Named `json:"named"` // a json tag name: a field
		Kind  string         `msgpack:"kind"` // shallower: wins over Base.Kind and Extra.Kind
	}
	v := outer{Base: Base{1, "b"}, Extra: &Extra{"n", "e"}, base2: base2{"h"}, Named: Named{3}, Kind: "o"}
	b := enc(t, v)
	m, _ := mpack.DecodeMap(b)
	want := map[string]any{"id": int64(1), "kind": "o", "note": "n", "hidden": "h", "named": map[string]any{"x": int64(3)}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got %#v\nwant %#v", m, want)
	}
	var back outer
	if err := codec.Decode(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Extra == nil || back.Note != "n" || back.ID != 1 || back.Kind != "o" || back.Hidden != "h" || back.Named.X != 3 {
		t.Errorf("decoded %+v (Extra %+v)", back, back.Extra)
	}
	// A nil embedded pointer contributes nothing.
	v.Extra = nil
	if got := keys(t, v); got != "hidden id kind named" {
		t.Errorf("nil embedded pointer: keys %q", got)
	}

	// Same depth, both tagged: both dropped. Tagged beats untagged.
	type A struct {
		Dup  int `msgpack:"dup"`
		Pick int `msgpack:"Pick"`
	}
	type B struct {
		Dup  int `msgpack:"dup"`
		Pick int
	}
	type conflict struct {
		A
		B
	}
	if got := keys(t, conflict{A{1, 2}, B{3, 4}}); got != "Pick" {
		t.Errorf("conflicts: keys %q, want Pick (A's, tagged)", got)
	}
	m, _ = mpack.DecodeMap(enc(t, conflict{A{1, 2}, B{3, 4}}))
	if m["Pick"] != int64(2) {
		t.Errorf("Pick = %v, want A's 2", m["Pick"])
	}

	// noinline keeps an embedded struct a field; an msgpack tag name does not.
	type tags struct {
		Base  `msgpack:"b,noinline"`
		Named `msgpack:"nm"`
	}
	if got := keys(t, tags{}); got != "b x" {
		t.Errorf("noinline/named: keys %q, want \"b x\"", got)
	}

	// An embedded type with its own encoding is a field named after it.
	type withTime struct {
		time.Time
		N int `msgpack:"n"`
	}
	_ = withTime{}
	type withText struct {
		textOnly `msgpack:"t"`
	}
	if got := field(t, withText{textOnly{"q"}}); !bytes.Equal(got, hx("a171")) {
		// textOnly's promoted MarshalText makes withText itself a TextMarshaler.
		t.Errorf("withText = %x", got)
	}
}

func TestOmitEmpty(t *testing.T) {
	type inner struct {
		A int `msgpack:"a,omitempty"`
	}
	type T struct {
		_msgpack struct{} `msgpack:",omitempty"`
		S        string
		I        int
		F        float64
		B        bool
		P        *int
		M        map[string]int
		L        []int
		Arr      [0]int
		T        time.Time
		U        uuidv7.UUID
		In       inner
		Any      any
		AnyZero  any
		NonEmpty inner `msgpack:"ne"`
	}
	got := keys(t, T{AnyZero: 0, M: map[string]int{}, L: []int{}, NonEmpty: inner{1}})
	if got != "ne" {
		t.Errorf("keys %q, want ne", got)
	}
	type Z struct {
		F  float64   `json:"f,omitzero"`
		NF float64   `json:"nf,omitzero"`
		T  time.Time `json:"t,omitzero"`
		L  []int     `json:"l,omitzero"`
		E  []int     `json:"e,omitzero"`
		S  struct{ A int }
		SZ struct{ A int } `json:"sz,omitzero"`
	}
	if got := keys(t, Z{NF: math.Copysign(0, -1), E: []int{}}); got != "S e nf" {
		t.Errorf("omitzero: keys %q, want \"S e nf\"", got)
	}
}

func TestAliasAndUnknownKeys(t *testing.T) {
	type T struct {
		Name string `msgpack:"name,alias:title"`
	}
	var v T
	if err := codec.Decode(enc(t, map[string]any{"title": "x", "z": []any{1, map[string]any{"q": 2}}, "a": 1}), &v); err != nil || v.Name != "x" {
		t.Errorf("alias: %+v, %v", v, err)
	}
	// A field named by its json tag still reads the Go name, under which
	// the library (which ignores json tags) stored it; unless another field
	// has that name.
	type J struct {
		UserID string `json:"user_id"`
		Count  int    `json:"count"`
	}
	var j J
	if err := codec.Decode(libBytes(t, J{UserID: "u", Count: 3}), &j); err != nil || j != (J{UserID: "u", Count: 3}) {
		t.Errorf("json-named fields from the library's records: %+v, %v", j, err)
	}
	type K struct {
		A string `json:"B"`
		B string `json:"b"`
	}
	var k K
	if err := codec.Decode(enc(t, map[string]any{"B": "to A", "b": "to B"}), &k); err != nil || k != (K{"to A", "to B"}) {
		t.Errorf("a real name wins over a Go-name alias: %+v, %v", k, err)
	}
}

// The library's precedence: CustomEncoder, Marshaler, BinaryMarshaler,
// TextMarshaler, on the type, then on its pointer.
type prec1 struct{}

func (prec1) EncodeMsgpack(e *msgpack.Encoder) error { return e.EncodeString("custom") }
func (prec1) MarshalMsgpack() ([]byte, error)        { return []byte{0xa1, 'm'}, nil }
func (prec1) MarshalText() ([]byte, error)           { return []byte("text"), nil }

type prec2 struct{}

func (prec2) MarshalText() ([]byte, error)     { return []byte("text"), nil }
func (*prec2) MarshalMsgpack() ([]byte, error) { return []byte{0xa1, 'm'}, nil }

// precTop is a record whose pointer type encodes it (a map), while the
// value type only has MarshalText: as a top-level *precTop, the pointer's
// method wins.
type precTop struct{}

func (precTop) MarshalText() ([]byte, error)     { return []byte("text"), nil }
func (*precTop) MarshalMsgpack() ([]byte, error) { return []byte{0x81, 0xa1, 'k', 0x01}, nil }

// binID is a foreign id type with its own binary form: it decodes from
// storh's UUID extension too.
type binID [16]byte

func (b binID) MarshalBinary() ([]byte, error) { return b[:], nil }
func (b *binID) UnmarshalBinary(p []byte) error {
	if len(p) != 16 {
		return errors.New("binID: not 16 bytes")
	}
	copy(b[:], p)
	return nil
}

type asArray struct {
	_msgpack struct{} `msgpack:",as_array"`
	A        int
	B        string
}

type prec3 struct{ N int }

func (p *prec3) MarshalMsgpack() ([]byte, error) {
	return msgpack.Marshal(map[string]any{"z": p.N, "a": []any{map[string]any{"y": 1, "b": 2}}})
}

func TestUserEncoders(t *testing.T) {
	if got := field(t, prec1{}); !bytes.Equal(got, hx("a6637573746f6d")) {
		t.Errorf("prec1 = %x, want the CustomEncoder's", got)
	}
	if got := field(t, prec2{}); !bytes.Equal(got, hx("a474657874")) {
		t.Errorf("prec2 = %x, want the value's MarshalText before the pointer's MarshalMsgpack", got)
	}
	if got := field(t, &prec2{}); !bytes.Equal(got, hx("a16d")) {
		t.Errorf("*prec2 = %x, want the pointer's MarshalMsgpack", got)
	}
	// A Marshaler's output is put in canonical form, in a struct field, a
	// slice element, an interface (not addressable: copied).
	type T struct {
		P  prec3   `msgpack:"p"`
		L  []prec3 `msgpack:"l"`
		A  any     `msgpack:"a"`
		Pp *prec3  `msgpack:"pp"`
	}
	b := enc(t, T{P: prec3{1}, L: []prec3{{2}}, A: prec3{3}, Pp: nil})
	m, _ := mpack.DecodeMap(b)
	if m["p"].(map[string]any)["z"] != int64(1) || m["pp"] != nil || m["a"].(map[string]any)["z"] != int64(3) {
		t.Errorf("decoded %v", m)
	}
	if got := enc(t, &precTop{}); !bytes.Equal(got, hx("81a16b01")) {
		t.Errorf("&precTop = %x, want the pointer's MarshalMsgpack", got)
	}
	if _, err := codec.AppendRecord(nil, precTop{}, 0); !errors.Is(err, codec.ErrUnsupported) {
		t.Errorf("precTop (text, not a map) as a record: %v", err)
	}
}

func TestUserDecoders(t *testing.T) {
	type T struct {
		Raw msgpack.RawMessage `msgpack:"raw"`
		ID  binID              `msgpack:"id"`
		Arr asArray            `msgpack:"arr"`
		Txt *textOnly          `msgpack:"txt"`
	}
	u := uuidv7.New()
	v := T{Raw: msgpack.RawMessage{0x92, 0x01, 0xa1, 'x'}, ID: binID(u), Arr: asArray{A: 1, B: "b"}, Txt: &textOnly{"t"}}
	b := enc(t, v)
	m, _ := mpack.DecodeMap(b)
	want := map[string]any{"raw": []any{int64(1), "x"}, "id": u[:], "arr": []any{int64(1), "b"}, "txt": "t"}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("encoded %#v\nwant %#v", m, want)
	}
	var back T
	if err := codec.Decode(b, &back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Raw, v.Raw) || back.ID != v.ID || back.Arr.A != 1 || back.Arr.B != "b" || back.Txt == nil || back.Txt.s != "t" {
		t.Errorf("decoded %+v", back)
	}
	// omitempty on an as_array struct follows its fields, as the library's.
	type holder struct {
		Arr asArray `msgpack:"arr,omitempty"`
	}
	if got := keys(t, holder{}); got != "arr" {
		t.Errorf("as_array struct with fields that are not omitempty was omitted: keys %q", got)
	}
	if got, want := enc(t, holder{asArray{A: 1}}), libBytes(t, holder{asArray{A: 1}}); !bytes.Equal(got, want) {
		t.Errorf("as_array: %x, library %x", got, want)
	}
	// A BinaryUnmarshaler reads storh's id extension's bytes.
	if err := codec.Decode(enc(t, map[string]any{"id": u}), &back); err != nil || back.ID != binID(u) {
		t.Errorf("binID from the UUID extension: %v, %v", back.ID, err)
	}
	// nil gives the zero value without calling the method.
	back.Txt = &textOnly{"old"}
	if err := codec.Decode(enc(t, map[string]any{"txt": nil, "raw": nil}), &back); err != nil || back.Txt != nil || back.Raw != nil {
		t.Errorf("nil: %+v, %v", back, err)
	}
}

type badMarshal struct{ mode int }

func (b badMarshal) MarshalMsgpack() ([]byte, error) {
	switch b.mode {
	case 0:
		return nil, errors.New("no")
	case 1:
		panic("oops")
	case 2:
		return []byte{1, 2}, nil // two values
	case 3:
		return []byte{0xd4, 0x05, 0x00}, nil // an extension records may not hold
	}
	return []byte{0x82, 0xa1, 'a', 1, 0xa1, 'a', 2}, nil // duplicate keys
}

func TestEncodeErrors(t *testing.T) {
	type deep struct {
		Next *deep `msgpack:"next,omitempty"`
	}
	chain := func(n int) *deep {
		var d *deep
		for range n {
			d = &deep{d}
		}
		return d
	}
	cyc := &deep{}
	cyc.Next = cyc
	selfMap := map[string]any{}
	selfMap["self"] = selfMap
	var selfAny any
	selfAny = &selfAny
	shared := []any{1}
	for range 40 { // 2^40 nodes through sharing, 41 levels deep
		shared = []any{shared, shared}
	}
	for _, tc := range []struct {
		v    any
		is   error
		want string
	}{
		{nil, codec.ErrUnsupported, "data is nil; pass a map or a struct"},
		{map[string]any(nil), codec.ErrUnsupported, "data is a nil map"},
		{(*deep)(nil), codec.ErrUnsupported, "data is a nil *codec_test.deep"},
		{42, codec.ErrUnsupported, "data must be a map or a struct, got int"},
		{[]any{1}, codec.ErrUnsupported, "data must be a map or a struct, got []interface {}"},
		{map[int]any{}, codec.ErrUnsupported, "map keys must be strings, got int"},
		{map[string]any{"m": map[int]int{1: 2}}, codec.ErrUnsupported, `field "m": map keys must be strings, got int`},
		{map[string]any{"m": map[int]int{}, "n": map[int]int(nil)}, nil, ""}, // as the library wrote them
		{map[string]any{"c": make(chan int)}, codec.ErrUnsupported, `field "c": cannot encode chan int`},
		{map[string]any{"f": func() {}}, codec.ErrUnsupported, "func()"},
		{map[string]any{"l": []any{1, 2i}}, codec.ErrUnsupported, `field "l[1]": cannot encode complex128`},
		{chain(mpack.MaxDepth), nil, ""},
		{chain(mpack.MaxDepth + 1), mpack.ErrTooDeep, "nested deeper than 64 levels, or cyclic"},
		{cyc, mpack.ErrTooDeep, "cyclic"},
		{selfMap, mpack.ErrTooDeep, "cyclic"},
		{map[string]any{"x": selfAny}, mpack.ErrTooDeep, "cyclic"},
		{map[string]any{"s": shared}, codec.ErrTooLarge, "the limit is 1000"},
		{map[string]any{"b": badMarshal{0}}, codec.ErrUnsupported, `field "b": codec_test.badMarshal.MarshalMsgpack: no`},
		{map[string]any{"b": badMarshal{1}}, codec.ErrUnsupported, "panicked: oops"},
		{map[string]any{"b": badMarshal{2}}, codec.ErrUnsupported, "not write exactly one msgpack value"},
		{map[string]any{"b": badMarshal{3}}, mpack.ErrUnsupported, "invalid record"},
		{map[string]any{"b": badMarshal{4}}, mpack.ErrMalformed, "duplicate"},
	} {
		dst := []byte("abc")
		out, err := codec.AppendRecord(dst, tc.v, 1000)
		if tc.is == nil {
			if err != nil {
				t.Errorf("%T: %v", tc.v, err)
			}
			continue
		}
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%T: error %v; want %v containing %q", tc.v, err, tc.is, tc.want)
		}
		if string(out) != "abc" {
			t.Errorf("%T: failed but returned %q", tc.v, out)
		}
	}
	if _, err := codec.AppendRecord(nil, map[string]any{"b": make([]byte, 100)}, 100); !errors.Is(err, codec.ErrTooLarge) ||
		err.Error() != "record is at least 105 bytes encoded; the limit is 100" {
		t.Errorf("size: %v", err)
	}
	if _, err := codec.AppendRecord(nil, struct{ B [100]byte }{}, 100); !errors.Is(err, codec.ErrTooLarge) ||
		err.Error() != "record is at least 105 bytes encoded; the limit is 100" {
		t.Errorf("size: %v", err)
	}
	if _, err := codec.AppendRecord(nil, struct{ B [95]byte }{}, 100); err != nil {
		t.Errorf("100 bytes: %v", err)
	}
}

// post is a realistic record: the benchmarks use it too.
type post struct {
	ID       uuidv7.UUID    `msgpack:"id"`
	Title    string         `msgpack:"title"`
	Body     string         `msgpack:"body"`
	Author   author         `msgpack:"author"`
	Tags     []string       `msgpack:"tags"`
	Views    int64          `msgpack:"views"`
	Score    float64        `msgpack:"score"`
	Draft    bool           `msgpack:"draft"`
	Created  time.Time      `msgpack:"created"`
	Meta     map[string]any `msgpack:"meta"`
	Rating   int8           `msgpack:"rating,omitempty"`
	Modified *time.Time     `msgpack:"modified,omitempty"`
}

type author struct {
	Name  string `msgpack:"name"`
	Email string `msgpack:"email"`
	Karma int32  `msgpack:"karma"`
}

func samplePost() post {
	return post{
		ID:      uuidv7.MustParse("018bcfe5-6800-7abc-8def-0123456789ab"),
		Title:   "Canonical msgpack in one pass",
		Body:    "Struct fields are compiled into a table sorted by name, so the record comes out in order.",
		Author:  author{"Ada", "ada@example.com", 1815},
		Tags:    []string{"go", "msgpack", "storage"},
		Views:   12345,
		Score:   4.75,
		Created: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		Meta:    map[string]any{"lang": "en", "words": 1200},
		Rating:  4,
	}
}

func TestRoundTrip(t *testing.T) {
	p := samplePost()
	mod := p.Created.Add(time.Hour)
	p.Modified = &mod
	b := enc(t, &p)
	if want := libRoundTrip(t, p); !bytes.Equal(b, want) {
		t.Errorf("codec %x\nlib   %x", b, want)
	}
	var back post
	if err := codec.Decode(b, &back); err != nil {
		t.Fatal(err)
	}
	p.Meta = map[string]any{"lang": "en", "words": int64(1200)}
	if !reflect.DeepEqual(back, p) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, p)
	}
}

// libRoundTrip is libBytes with the uuid written as the codec writes it:
// the library would write bin.
func libRoundTrip(t *testing.T, p post) []byte {
	m := map[string]any{}
	b := libBytes(t, p)
	if err := msgpack.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["id"] = p.ID
	return enc(t, m)
}

func TestDecodeRules(t *testing.T) {
	type ints struct {
		I8  int8    `msgpack:"i8"`
		U8  uint8   `msgpack:"u8"`
		I64 int64   `msgpack:"i64"`
		U64 uint64  `msgpack:"u64"`
		F32 float32 `msgpack:"f32"`
		I   int     `msgpack:"i"`
	}
	var v ints
	ok := map[string]any{"i8": -128, "u8": 255, "i64": float32(-3), "u64": uint64(math.MaxUint64), "f32": 7, "i": 2.0}
	if err := codec.Decode(enc(t, ok), &v); err != nil || v != (ints{-128, 255, -3, math.MaxUint64, 7, 2}) {
		t.Errorf("in range: %+v, %v", v, err)
	}
	for _, tc := range []struct {
		rec  map[string]any
		want string
	}{
		{map[string]any{"i8": 300}, `decode into codec_test.ints: field "i8": 300 overflows int8`},
		{map[string]any{"i8": -129}, `field "i8": -129 overflows int8`},
		{map[string]any{"u8": -1}, `field "u8": -1 overflows uint8`},
		{map[string]any{"u8": 256}, `field "u8": 256 overflows uint8`},
		{map[string]any{"i64": uint64(math.MaxUint64)}, `18446744073709551615 overflows int64`},
		{map[string]any{"i64": 1.5}, `field "i64": 1.5 is not an integer`},
		{map[string]any{"i64": math.Inf(1)}, `+Inf overflows int64`},
		{map[string]any{"i64": 9.3e18}, `9.3e+18 overflows int64`},
		{map[string]any{"i64": math.NaN()}, `NaN is not an integer`},
		{map[string]any{"f32": 1e300}, `1e+300 overflows float32`},
		{map[string]any{"i": "7"}, `field "i": cannot decode string into int`},
		{map[string]any{"u64": true}, `cannot decode bool into uint64`},
	} {
		err := codec.Decode(enc(t, tc.rec), &v)
		if !errors.Is(err, codec.ErrType) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want ErrType containing %q", tc.rec, err, tc.want)
		}
	}

	type misc struct {
		S   string            `msgpack:"s"`
		SB  string            `msgpack:"sb"`
		B   []byte            `msgpack:"b"`
		BS  []byte            `msgpack:"bs"`
		A4  [4]byte           `msgpack:"a4"`
		Arr [3]int            `msgpack:"arr"`
		U   uuidv7.UUID       `msgpack:"u"`
		UB  uuidv7.UUID       `msgpack:"ub"`
		O   objectid.ObjectID `msgpack:"o"`
		OB  objectid.ObjectID `msgpack:"ob"`
		T   time.Time         `msgpack:"t"`
		Any any               `msgpack:"any"`
		M   map[string]any    `msgpack:"m"`
		L   []any             `msgpack:"l"`
		MS  map[string]int8   `msgpack:"ms"`
		P   *int              `msgpack:"p"`
		PP  **string          `msgpack:"pp"`
		N   *int              `msgpack:"n"`
		Txt textOnly          `msgpack:"txt"`
		Err error             `msgpack:"err"`
	}
	u := uuidv7.New()
	oid := objectid.New()
	foreign := [16]byte{0xff, 1, 2} // not a UUIDv7: a foreign key is any 16 bytes
	zone := time.FixedZone("x", 3600)
	rec := map[string]any{
		"s": "str", "sb": []byte("bin"), "b": []byte{1}, "bs": "txt", "a4": []byte{1, 2, 3, 4}, "arr": []any{1, 2},
		"u": u, "ub": foreign[:], "o": oid, "ob": oid[:], "t": time.Date(2024, 1, 2, 3, 4, 5, 6, zone),
		"any": map[string]any{"i": int8(1), "f": float32(0.5), "u": u, "t": time.Unix(0, 0).In(zone)},
		"m":   map[string]any{"x": uint16(9)}, "l": []any{int8(-1), "s"}, "ms": map[string]any{"a": 1, "b": -2},
		"p": 5, "pp": "deep", "n": nil, "txt": []byte("bin text"), "err": "failed",
	}
	payload := enc(t, rec)
	var m misc
	m.N = new(int)
	m.Arr = [3]int{7, 7, 7}
	if err := codec.Decode(payload, &m); err != nil {
		t.Fatal(err)
	}
	if m.S != "str" || m.SB != "bin" || !bytes.Equal(m.B, []byte{1}) || string(m.BS) != "txt" || m.A4 != [4]byte{1, 2, 3, 4} ||
		m.Arr != [3]int{1, 2, 0} || m.U != u || m.UB != uuidv7.UUID(foreign) || m.O != oid || m.OB != oid ||
		!m.T.Equal(time.Date(2024, 1, 2, 3, 4, 5, 6, zone)) || m.T.Location() != time.UTC ||
		*m.P != 5 || **m.PP != "deep" || m.N != nil || m.Txt.s != "bin text" || m.Err == nil || m.Err.Error() != "failed" {
		t.Errorf("decoded %+v", m)
	}
	wantAny := map[string]any{"i": int64(1), "f": 0.5, "u": u, "t": time.Unix(0, 0).UTC()}
	if !reflect.DeepEqual(m.Any, wantAny) || !reflect.DeepEqual(m.M, map[string]any{"x": int64(9)}) ||
		!reflect.DeepEqual(m.L, []any{int64(-1), "s"}) || !reflect.DeepEqual(m.MS, map[string]int8{"a": 1, "b": -2}) {
		t.Errorf("normalised: any %#v m %#v l %#v ms %#v", m.Any, m.M, m.L, m.MS)
	}
	// Nothing decoded aliases the payload.
	for i := range payload {
		payload[i] = 0
	}
	if m.B[0] != 1 || string(m.BS) != "txt" || m.S != "str" {
		t.Errorf("decoded values alias the payload: %+v", m)
	}

	for _, tc := range []struct {
		rec  map[string]any
		want string
	}{
		{map[string]any{"a4": []byte{1, 2, 3}}, `field "a4": cannot decode binary of 3 bytes into [4]uint8`},
		{map[string]any{"arr": []any{1, 2, 3, 4}}, `field "arr": cannot decode an array of 4 elements into [3]int`},
		{map[string]any{"u": []byte{1}}, `field "u": cannot decode binary of 1 bytes into uuidv7.UUID`},
		{map[string]any{"o": u}, `field "o": cannot decode extension of 16 bytes into objectid.ObjectID`},
		{map[string]any{"t": 5}, `field "t": cannot decode integer into time.Time`},
		{map[string]any{"m": []any{}}, `field "m": cannot decode array into map[string]interface {}`},
		{map[string]any{"ms": map[string]any{"k": "v"}}, `field "ms.k": cannot decode string into int8`},
		{map[string]any{"l": map[string]any{}}, `field "l": cannot decode map into []interface {}`},
		{map[string]any{"pp": 1}, `field "pp": cannot decode integer into string`},
		{map[string]any{"txt": 1}, `field "txt": cannot decode integer into codec_test.textOnly`},
	} {
		var m misc
		err := codec.Decode(enc(t, tc.rec), &m)
		if !errors.Is(err, codec.ErrType) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want ErrType containing %q", tc.rec, err, tc.want)
		}
	}

	type nested struct {
		Items []struct {
			Tags map[string][]int8 `msgpack:"tags"`
		} `msgpack:"items"`
	}
	var n nested
	err := codec.Decode(enc(t, map[string]any{"items": []any{map[string]any{}, map[string]any{"tags": map[string]any{"k": []any{1, 1000}}}}}), &n)
	if !errors.Is(err, codec.ErrType) || !strings.Contains(err.Error(), `field "items[1].tags.k[1]": 1000 overflows int8`) {
		t.Errorf("path: %v", err)
	}
}

type failUnmarshal struct{}

func (*failUnmarshal) UnmarshalMsgpack([]byte) error { return errors.New("refused") }

type panicUnmarshal struct{}

func (*panicUnmarshal) UnmarshalText([]byte) error { panic("bang") }

func TestDecodeErrors(t *testing.T) {
	var s struct {
		A int `msgpack:"a"`
	}
	for _, tc := range []struct {
		in   []byte
		is   error
		want string
	}{
		{nil, mpack.ErrMalformed, "truncated"},
		{hx("81a161"), mpack.ErrMalformed, "truncated"},
		{hx("81a161c1"), mpack.ErrMalformed, "reserved code"},
		{hx("8101 01"), mpack.ErrMalformed, "not a string"},
		{hx("80 00"), mpack.ErrMalformed, "trailing"},
		{hx("81a162 d40500"), nil, ""},                                  // an unknown key is skipped, whatever it holds
		{hx("81a161 d40500"), codec.ErrType, "cannot decode extension"}, // a known one must fit
		{hx("91 01"), codec.ErrType, "cannot decode array into struct"},
	} {
		err := codec.Decode(tc.in, &s)
		if tc.is == nil {
			if err != nil {
				t.Errorf("%x: %v", tc.in, err)
			}
			continue
		}
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%x: %v; want %v containing %q", tc.in, err, tc.is, tc.want)
		}
		if tc.is != codec.ErrType && errors.Is(err, codec.ErrType) {
			t.Errorf("%x: malformed input reported as a type error: %v", tc.in, err)
		}
	}
	for _, target := range []any{nil, s, (*struct{})(nil)} {
		if err := codec.Decode(hx("80"), target); !errors.Is(err, codec.ErrType) || !strings.Contains(err.Error(), "non-nil pointer") {
			t.Errorf("Decode into %T: %v", target, err)
		}
	}
	var f struct {
		F failUnmarshal  `msgpack:"f"`
		P panicUnmarshal `msgpack:"p"`
	}
	if err := codec.Decode(enc(t, map[string]any{"f": 1}), &f); !errors.Is(err, codec.ErrType) || !strings.Contains(err.Error(), `field "f": codec_test.failUnmarshal.UnmarshalMsgpack: refused`) {
		t.Errorf("failing unmarshaler: %v", err)
	}
	if err := codec.Decode(enc(t, map[string]any{"p": "x"}), &f); !errors.Is(err, codec.ErrType) || !strings.Contains(err.Error(), "panicked: bang") {
		t.Errorf("panicking unmarshaler: %v", err)
	}
	// Too deep: a recursive type fed a deep record.
	type tree struct {
		Kids []tree `msgpack:"k"`
	}
	deep := []byte{}
	for range 70 {
		deep = append(deep, 0x81, 0xa1, 'k', 0x91)
	}
	deep = append(deep, 0x80)
	var tr tree
	if err := codec.Decode(deep, &tr); !errors.Is(err, mpack.ErrTooDeep) {
		t.Errorf("deep: %v", err)
	}
}

// Values that decode keep their types' encoding: decode(encode(v)) encodes
// to the same bytes.
func TestDecodeInPlace(t *testing.T) {
	type T struct {
		A int            `msgpack:"a"`
		B string         `msgpack:"b"`
		M map[string]int `msgpack:"m"`
		L []int          `msgpack:"l"`
		P *author        `msgpack:"p"`
	}
	keepP := &author{Name: "keep", Karma: 3}
	v := T{A: 1, B: "old", M: map[string]int{"old": 1}, L: []int{9, 9, 9}, P: keepP}
	l := v.L
	if err := codec.Decode(enc(t, map[string]any{"a": 2, "m": map[string]any{"new": 2}, "l": []any{1}, "p": map[string]any{"email": "e"}}), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != 2 || v.B != "old" || !reflect.DeepEqual(v.M, map[string]int{"new": 2}) || !reflect.DeepEqual(v.L, []int{1}) || l[0] != 9 ||
		v.P != keepP || v.P.Name != "keep" || v.P.Email != "e" {
		t.Errorf("in place: %+v (P %+v)", v, v.P)
	}
}

func TestTopLevelTypes(t *testing.T) {
	var m map[string]int8
	if err := codec.Decode(enc(t, map[string]int{"a": 1}), &m); err != nil || m["a"] != 1 {
		t.Errorf("map: %v %v", m, err)
	}
	var a any
	if err := codec.Decode(enc(t, map[string]any{"a": int8(1)}), &a); err != nil || !reflect.DeepEqual(a, map[string]any{"a": int64(1)}) {
		t.Errorf("any: %#v %v", a, err)
	}
	pp := &author{Name: "x"}
	b := enc(t, &pp)
	if want := enc(t, author{Name: "x"}); !bytes.Equal(b, want) {
		t.Errorf("**author: %x", b)
	}
	type one struct{ P *int } // pointer-shaped: held in the interface itself
	n := 3
	if got := enc(t, one{&n}); !bytes.Equal(got, hx("81a15003")) {
		t.Errorf("one = %x", got)
	}
	typed := map[string]int{"b": 2, "a": 1, "c": 3}
	for range 10 {
		if got := enc(t, typed); !bytes.Equal(got, hx("83a16101a16202a16303")) {
			t.Fatalf("typed map = %x", got)
		}
	}
	if err := codec.For(reflect.TypeFor[[]int]()).CheckRecordType(); !errors.Is(err, codec.ErrUnsupported) {
		t.Errorf("CheckRecordType([]int) = %v", err)
	}
	for _, ok := range []reflect.Type{reflect.TypeFor[post](), reflect.TypeFor[*post](), reflect.TypeFor[map[string]int]()} {
		if err := codec.For(ok).CheckRecordType(); err != nil {
			t.Errorf("CheckRecordType(%s) = %v", ok, err)
		}
	}
}

// Concurrent first use of a type builds its codec once; every goroutine
// sees a complete one.
func TestConcurrentBuild(t *testing.T) {
	type fresh struct {
		A    int              `msgpack:"a"`
		Self *fresh           `msgpack:"self"`
		M    map[string]fresh `msgpack:"m"`
	}
	done := make(chan []byte)
	for range 8 {
		go func() {
			b, err := codec.AppendRecord(nil, fresh{A: 1, Self: &fresh{A: 2}}, 0)
			if err != nil {
				panic(err)
			}
			done <- b
		}()
	}
	first := <-done
	for range 7 {
		if b := <-done; !bytes.Equal(b, first) {
			t.Errorf("%x != %x", b, first)
		}
	}
}

// TestEncodingKeepsNoValueAlive: the generic map form is sorted with its
// values beside the keys, in scratch that goes back to a pool; the values
// are cleared from it, so that a record encoded, and one whose encoding
// failed half way, does not stay in memory through the pool.
func TestEncodingKeepsNoValueAlive(t *testing.T) {
	for name, rest := range map[string]any{
		"encoded": "fine",
		"failed":  make(chan int), // after "a" in key order: fails once a is written
	} {
		t.Run(name, func(t *testing.T) {
			big := new([4096]byte)
			gone := weak.Make(big)
			m := map[string]any{"a": map[string]any{"big": big[:]}, "b": rest}
			if _, err := codec.AppendRecord(nil, m, 0); (err != nil) != (name == "failed") {
				t.Fatalf("AppendRecord: %v", err)
			}
			big, m = nil, nil
			// One collection: the pool keeps its states through it.
			runtime.GC()
			if gone.Value() != nil {
				t.Error("the encoded value is still reachable after the encoding")
			}
		})
	}
}
