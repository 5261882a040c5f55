package storh_test

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TestTypeTable pins the table of docs/types.md: what each Go type written
// into a record comes back as from Data, and from Decode into a field of
// its own type and into an any field. Each row stores {"v": in} and reads
// the field back three ways.
func TestTypeTable(t *testing.T) {
	when := time.Date(2024, 5, 1, 12, 0, 0, 123_456_789, time.FixedZone("CEST", 2*3600))
	u := uuidv7.MustParse("0190a4f4-5c3b-7def-8123-456789abcdef")
	v4, err := uuidv7.ParseAny("73ffd264-44b3-4c69-90e8-e7d1dfc035d4")
	if err != nil {
		t.Fatal(err)
	}
	oid := objectid.MustParse("5f1a2b3c4d5e6f7a8b9c0d1e")
	type inner struct {
		A int `msgpack:"a"`
	}
	rows := []struct {
		name string
		in   any // written as the field v of a Map
		data any // Data()["v"], and Decode into an any field
	}{
		{"int", 42, int64(42)},
		{"int8", int8(-5), int64(-5)},
		{"int16", int16(300), int64(300)},
		{"int32", int32(-70000), int64(-70000)},
		{"int64 min", int64(math.MinInt64), int64(math.MinInt64)},
		{"uint", uint(7), int64(7)},
		{"uint8", uint8(255), int64(255)},
		{"uint32", uint32(math.MaxUint32), int64(math.MaxUint32)},
		{"uint64 small", uint64(9), int64(9)},
		{"uint64 max", uint64(math.MaxUint64), uint64(math.MaxUint64)},
		{"float64", 1.5, 1.5},
		{"float32", float32(0.5), 0.5},
		{"float64 integral", 2.0, 2.0},
		{"string", "héllo", "héllo"},
		{"bool", true, true},
		{"nil", nil, nil},
		{"[]byte", []byte{1, 2}, []byte{1, 2}},
		{"[4]byte", [4]byte{1, 2, 3, 4}, []byte{1, 2, 3, 4}},
		{"time", when, when.UTC()},
		{"uuidv7.UUID", u, u},
		{"other UUID version", v4, v4},
		{"objectid.ObjectID", oid, oid},
		{"[]string", []string{"a", "b"}, []any{"a", "b"}},
		{"[]int", []int{1, 2}, []any{int64(1), int64(2)}},
		{"empty slice", []int{}, []any{}},
		{"nil slice", []int(nil), nil},
		{"map[string]int", map[string]int{"x": 1}, map[string]any{"x": int64(1)}},
		{"nil map", map[string]int(nil), nil},
		{"struct", inner{A: 3}, map[string]any{"a": int64(3)}},
		{"pointer", &inner{A: 4}, map[string]any{"a": int64(4)}},
		{"nil pointer", (*inner)(nil), nil},
	}
	db := openTemp(t)
	docs, err := db.Docs("types")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			rec, err := docs.Put(storh.Map{"v": row.in})
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.Data()["v"]; !reflect.DeepEqual(got, row.data) {
				t.Errorf("Data = %#v (%T), want %#v (%T)", got, got, row.data, row.data)
			}
			var anyField struct {
				V any `msgpack:"v"`
			}
			if err := rec.Decode(&anyField); err != nil || !reflect.DeepEqual(anyField.V, row.data) {
				t.Errorf("Decode into any = %#v, %v; want %#v", anyField.V, err, row.data)
			}
			if row.in == nil {
				return
			}
			// Decode into a field of the type written gives the value back.
			typ := reflect.TypeOf(row.in)
			dst := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "V", Type: typ, Tag: `msgpack:"v"`}}))
			if err := rec.Decode(dst.Interface()); err != nil {
				t.Fatalf("Decode into %s: %v", typ, err)
			}
			got := dst.Elem().Field(0).Interface()
			want := row.in
			if tm, ok := want.(time.Time); ok {
				want = tm.UTC() // times come back in UTC
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Decode into %s = %#v, want %#v", typ, got, want)
			}
		})
	}
}

// TestDecodeConversions pins the conversions Decode makes between stored
// values and field types other than the ones written: allowed where no
// information is lost, ErrTypeMismatch otherwise.
func TestDecodeConversions(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("conv")
	if err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		name   string
		stored any
		field  any // a pointer to the field's zero value
		want   any // the field after Decode; nil for ErrTypeMismatch
	}{
		{"int into int8", 100, new(int8), int8(100)},
		{"int into int8 overflow", 300, new(int8), nil},
		{"negative into uint", -1, new(uint), nil},
		{"uint64 into int64 overflow", uint64(math.MaxUint64), new(int64), nil},
		{"int into float64", 3, new(float64), 3.0},
		{"integral float into int", 4.0, new(int), 4},
		{"fractional float into int", 4.5, new(int), nil},
		{"float64 into float32", 0.25, new(float32), float32(0.25)},
		{"huge float64 into float32", math.MaxFloat64, new(float32), nil},
		{"string into []byte", "ab", new([]byte), []byte("ab")},
		{"bytes into string", []byte("ab"), new(string), "ab"},
		{"string into int", "5", new(int), nil},
		{"int into string", 5, new(string), nil},
		{"list into struct", []any{1}, new(struct{}), nil},
		{"bytes into [2]byte", []byte{1, 2}, new([2]byte), [2]byte{1, 2}},
		{"bytes into [3]byte", []byte{1, 2}, new([3]byte), nil},
		{"16 bytes into uuidv7.UUID", make([]byte, 16), new(uuidv7.UUID), uuidv7.UUID{}},
		{"ObjectID into uuidv7.UUID", objectid.ObjectID{}, new(uuidv7.UUID), nil},
		{"time into string", time.Unix(0, 0), new(string), nil},
		{"null into int", nil, new(int), 0},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			rec, err := docs.Put(storh.Map{"v": row.stored})
			if err != nil {
				t.Fatal(err)
			}
			typ := reflect.TypeOf(row.field).Elem()
			dst := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "V", Type: typ, Tag: `msgpack:"v"`}}))
			err = rec.Decode(dst.Interface())
			if row.want == nil {
				if !errors.Is(err, storh.ErrTypeMismatch) {
					t.Fatalf("Decode into %s = %v, want ErrTypeMismatch", typ, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode into %s: %v", typ, err)
			}
			if got := dst.Elem().Field(0).Interface(); !reflect.DeepEqual(got, row.want) {
				t.Errorf("Decode into %s = %#v, want %#v", typ, got, row.want)
			}
		})
	}
}

// TestFieldNames pins how struct fields are named on disk: msgpack tag,
// else json tag, else the Go name; "-" and unexported fields skipped;
// omitempty from whichever tag named the field; embedded structs inlined.
func TestFieldNames(t *testing.T) {
	type Base struct {
		Created time.Time `json:"created"`
	}
	type doc struct {
		Base
		Title   string `msgpack:"title" json:"ignored"`
		Body    string `json:"body,omitempty"`
		Plain   int
		Skipped string `msgpack:"-"`
		Empty   string `msgpack:"empty,omitempty"`
		hidden  int
	}
	db := openTemp(t)
	docs, err := db.Docs("names")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	rec, err := docs.Put(doc{Base: Base{Created: at}, Title: "t", Plain: 1, Skipped: "x", hidden: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := storh.Map{"created": at, "title": "t", "Plain": int64(1)}
	if got := rec.Data(); !reflect.DeepEqual(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	var back doc
	if err := rec.Decode(&back); err != nil || back.Created != at || back.Title != "t" || back.Plain != 1 || back.Skipped != "" {
		t.Fatalf("Decode = %+v, %v", back, err)
	}
}
