package codec_test

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh/internal/codec"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
)

type (
	myString string
	myInt8   int8
	myUint   uint
	myBytes  []byte
	myFloat  float32
)

var scalarTypes = []reflect.Type{
	reflect.TypeFor[bool](), reflect.TypeFor[int](), reflect.TypeFor[int8](), reflect.TypeFor[int16](),
	reflect.TypeFor[int32](), reflect.TypeFor[int64](), reflect.TypeFor[uint](), reflect.TypeFor[uint8](),
	reflect.TypeFor[uint16](), reflect.TypeFor[uint32](), reflect.TypeFor[uint64](), reflect.TypeFor[float32](),
	reflect.TypeFor[float64](), reflect.TypeFor[string](), reflect.TypeFor[[]byte](), reflect.TypeFor[time.Time](),
	reflect.TypeFor[myString](), reflect.TypeFor[myInt8](), reflect.TypeFor[myUint](), reflect.TypeFor[myBytes](),
	reflect.TypeFor[myFloat](), reflect.TypeFor[[0]byte](), reflect.TypeFor[[3]byte](), reflect.TypeFor[any](),
}

// genType draws a Go type of the kinds records hold: scalars, slices,
// arrays, maps with string keys, pointers, interfaces and structs built
// with reflect.StructOf (msgpack tags, omitempty, skipped fields), nested a
// few levels. It has no json tags, no ids and no Marshalers: the types on
// which the codec and the library must agree byte for byte.
func genType(t *rapid.T, depth int) reflect.Type {
	n := 6
	if depth >= 3 {
		n = 1
	}
	switch rapid.IntRange(0, n).Draw(t, "typeKind") {
	case 0, 1:
		return rapid.SampledFrom(scalarTypes).Draw(t, "scalar")
	case 2:
		return reflect.SliceOf(genType(t, depth+1))
	case 3:
		return reflect.ArrayOf(rapid.IntRange(0, 3).Draw(t, "arrayLen"), genType(t, depth+1))
	case 4:
		return reflect.MapOf(reflect.TypeFor[string](), genType(t, depth+1))
	case 5:
		return reflect.PointerTo(genType(t, depth+1))
	}
	return genStruct(t, depth+1)
}

func genStruct(t *rapid.T, depth int) reflect.Type {
	n := rapid.IntRange(0, 6).Draw(t, "fields")
	used := map[string]bool{}
	var fields []reflect.StructField
	for i := range n {
		f := reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: genType(t, depth)}
		name := f.Name
		switch rapid.IntRange(0, 3).Draw(t, "tag") {
		case 0: // Go name
		case 1:
			f.Tag = `msgpack:"-"`
			name = ""
		default:
			name = rapid.StringMatching(`[a-zA-Z_][a-z0-9]{0,4}`).Draw(t, "name")
			f.Tag = reflect.StructTag(`msgpack:"` + name + `"`)
		}
		if name != "" && used[name] {
			continue
		}
		used[name] = true
		if name != "" && rapid.IntRange(0, 3).Draw(t, "omitempty") == 0 {
			if f.Tag == "" {
				f.Tag = `msgpack:",omitempty"`
			} else {
				f.Tag = reflect.StructTag(`msgpack:"` + name + `,omitempty"`)
			}
		}
		fields = append(fields, f)
	}
	return reflect.StructOf(fields)
}

// genValue draws a value of type typ.
func genValue(t *rapid.T, typ reflect.Type, depth int) reflect.Value {
	v := reflect.New(typ).Elem()
	if typ == reflect.TypeFor[time.Time]() {
		var tm time.Time
		switch rapid.IntRange(0, 3).Draw(t, "timeForm") {
		case 0:
			tm = time.Unix(rapid.Int64Range(0, 1<<32-1).Draw(t, "sec"), 0)
		case 1:
			tm = time.Unix(rapid.Int64Range(0, 1<<34-1).Draw(t, "sec"), rapid.Int64Range(0, 999_999_999).Draw(t, "nsec"))
		case 2:
			tm = time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, "sec"), rapid.Int64Range(0, 999_999_999).Draw(t, "nsec"))
		}
		if rapid.Bool().Draw(t, "zoned") {
			tm = tm.In(time.FixedZone("z", 3600))
		}
		v.Set(reflect.ValueOf(tm))
		return v
	}
	switch typ.Kind() {
	case reflect.Bool:
		v.SetBool(rapid.Bool().Draw(t, "bool"))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := typ.Bits()
		n := rapid.Int64Range(-1<<(bits-1), 1<<(bits-1)-1).Draw(t, "int")
		if rapid.IntRange(0, 2).Draw(t, "small") == 0 {
			n = rapid.Int64Range(-40, 300).Draw(t, "smallInt") % (1 << (bits - 1))
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n := rapid.Uint64().Draw(t, "uint")
		if rapid.IntRange(0, 2).Draw(t, "small") == 0 {
			n = rapid.Uint64Range(0, 300).Draw(t, "smallUint")
		}
		if typ.Bits() < 64 {
			n &= 1<<typ.Bits() - 1
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f := rapid.Float64().Draw(t, "float")
		switch rapid.IntRange(0, 4).Draw(t, "special") {
		case 0:
			f = rapid.SampledFrom([]float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 1}).Draw(t, "f")
		case 1:
			f = float64(rapid.Int64Range(-1000, 1000).Draw(t, "integral"))
		}
		v.SetFloat(f)
	case reflect.String:
		v.SetString(rapid.SampledFrom([]string{"", "a", "zz"}).Draw(t, "s") + rapid.String().Draw(t, "str"))
	case reflect.Slice:
		if rapid.IntRange(0, 5).Draw(t, "nilSlice") == 0 {
			return v
		}
		n := rapid.IntRange(0, 3).Draw(t, "len")
		v.Set(reflect.MakeSlice(typ, n, n))
		for i := range n {
			v.Index(i).Set(genValue(t, typ.Elem(), depth+1))
		}
	case reflect.Array:
		for i := range typ.Len() {
			v.Index(i).Set(genValue(t, typ.Elem(), depth+1))
		}
	case reflect.Map:
		if rapid.IntRange(0, 5).Draw(t, "nilMap") == 0 {
			return v
		}
		v.Set(reflect.MakeMap(typ))
		for range rapid.IntRange(0, 4).Draw(t, "mapLen") {
			v.SetMapIndex(reflect.ValueOf(rapid.StringN(0, 4, -1).Draw(t, "key")).Convert(typ.Key()), genValue(t, typ.Elem(), depth+1))
		}
	case reflect.Pointer:
		if rapid.IntRange(0, 3).Draw(t, "nilPtr") == 0 {
			return v
		}
		p := reflect.New(typ.Elem())
		p.Elem().Set(genValue(t, typ.Elem(), depth+1))
		v.Set(p)
	case reflect.Interface:
		if rapid.IntRange(0, 4).Draw(t, "nilAny") == 0 || depth > 4 {
			return v
		}
		v.Set(genValue(t, genType(t, 3), depth+1))
	case reflect.Struct:
		for i := range typ.NumField() {
			v.Field(i).Set(genValue(t, typ.Field(i).Type, depth+1))
		}
	}
	return v
}

// TestAgreesWithLibrary: on the types where both must agree, the codec
// writes exactly what the library writes (SetSortMapKeys, UseCompactInts)
// once mpack.Sorter has put the library's output in order; the output is a
// valid, sorted record; decoding it with the codec and with the library
// gives values that encode back to the same bytes.
func TestAgreesWithLibrary(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		typ := genStruct(t, 1)
		v := genValue(t, typ, 0)
		want := libBytes(t, v.Interface())
		got, err := codec.AppendRecord(nil, v.Interface(), 0)
		if err != nil {
			t.Fatalf("AppendRecord(%s): %v", typ, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("type %s\ncodec   %x\nlibrary %x", typ, got, want)
		}
		if sorted, err := mpack.ValidateRecordSorted(got); err != nil || !sorted {
			t.Fatalf("ValidateRecordSorted = %v, %v", sorted, err)
		}
		// The typed entry writes the same.
		p := reflect.New(typ)
		p.Elem().Set(v)
		typed, err := codec.For(typ).AppendRecord([]byte("x"), p.UnsafePointer(), 0)
		if err != nil || !bytes.Equal(typed[1:], got) {
			t.Fatalf("Codec.AppendRecord = %x, %v", typed, err)
		}

		ours := reflect.New(typ)
		if err := codec.Decode(got, ours.Interface()); err != nil {
			t.Fatalf("Decode into %s: %v", typ, err)
		}
		theirs := reflect.New(typ)
		if err := msgpack.Unmarshal(got, theirs.Interface()); err != nil {
			t.Fatalf("library Unmarshal into %s: %v", typ, err)
		}
		// The two decoders agree: what they decode encodes to the same
		// bytes. Values in an interface come back in the normalised form
		// from the codec and in the library's own types, so those compare
		// normalised. (encode(decode(b)) need not be b: a pointer to a nil
		// slice comes back as a nil pointer, which omitempty then omits.)
		again, err := codec.AppendRecord(nil, ours.Interface(), 0)
		if err != nil {
			t.Fatalf("encode(decode(b)): %v", err)
		}
		lib, err := codec.AppendRecord(nil, theirs.Interface(), 0)
		if err != nil {
			t.Fatalf("encode(library decode(b)): %v", err)
		}
		same := bytes.Equal
		if hasInterface(typ, map[reflect.Type]bool{}) {
			same = func(x, y []byte) bool { return normalised(t, x) == normalised(t, y) }
		}
		if !same(again, lib) {
			t.Fatalf("b = %x\nencode(decode(b))         = %x\nencode(library decode(b)) = %x", got, again, lib)
		}
		// And once decoded, a value is a fixed point.
		twice := reflect.New(typ)
		if err := codec.Decode(again, twice.Interface()); err != nil {
			t.Fatal(err)
		}
		if b, err := codec.AppendRecord(nil, twice.Interface(), 0); err != nil || !same(b, again) {
			t.Fatalf("not a fixed point: %x then %x (%v)", again, b, err)
		}
	})
}

func hasInterface(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return hasInterface(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if hasInterface(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// normalised is the record's normalised decode, printed: NaN equals NaN.
func normalised(t *rapid.T, b []byte) string {
	m, err := mpack.DecodeMap(b)
	if err != nil {
		t.Fatalf("DecodeMap(%x): %v", b, err)
	}
	return fmt.Sprintf("%#v", m)
}

// TestAnyFieldsNormalised: whatever went into an any field, the codec gives
// it back as mpack.Decode does.
func TestAnyFieldsNormalised(t *testing.T) {
	type holder struct {
		V any            `msgpack:"v"`
		M map[string]any `msgpack:"m"`
		L []any          `msgpack:"l"`
	}
	rapid.Check(t, func(t *rapid.T) {
		typ := genType(t, 1)
		v := genValue(t, typ, 1).Interface()
		b, err := codec.AppendRecord(nil, map[string]any{"v": v, "m": map[string]any{"k": v}, "l": []any{v}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		raw, _, _ := mpack.Field(b, "v")
		want, _, err := mpack.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		var h holder
		if err := codec.Decode(b, &h); err != nil {
			t.Fatal(err)
		}
		if !mpack.Equal(h.V, want) && !order.HasNaN(want) || !reflect.DeepEqual(fmt.Sprintf("%#v", h.V), fmt.Sprintf("%#v", want)) {
			t.Fatalf("any field %#v, mpack %#v", h.V, want)
		}
		if fmt.Sprintf("%#v", h.M["k"]) != fmt.Sprintf("%#v", want) || fmt.Sprintf("%#v", h.L[0]) != fmt.Sprintf("%#v", want) {
			t.Fatalf("nested any %#v / %#v, mpack %#v", h.M["k"], h.L[0], want)
		}
	})
}
