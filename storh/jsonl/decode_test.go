package jsonl

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

const testID = "0190a4f4-5c3b-7def-8123-456789abcdef"

func TestDecodeRowForms(t *testing.T) {
	id := uuidv7.MustParse(testID)
	tests := []struct {
		name   string
		line   string
		wantID uuidv7.UUID
		want   map[string]any
	}{
		{"export row", `{"id":"` + testID + `","data":{"a":1}}`, id, map[string]any{"a": int64(1)}},
		{"upper-case id", `{"id":"` + strings.ToUpper(testID) + `","data":{"a":1}}`, id, map[string]any{"a": int64(1)}},
		{"query output", `{"id":"` + testID + `","time":"2024-07-01T12:00:00.000Z","data":{"a":1}}`, id, map[string]any{"a": int64(1)}},
		{"data only", `{"data":{"a":"x"}}`, uuidv7.UUID{}, map[string]any{"a": "x"}},
		{"null id", `{"id":null,"data":{}}`, uuidv7.UUID{}, map[string]any{}},
		{"bare", `{"a":1,"b":[true,null]}`, uuidv7.UUID{}, map[string]any{"a": int64(1), "b": []any{true, nil}}},
		{"bare with id field", `{"id":7,"name":"x"}`, uuidv7.UUID{}, map[string]any{"id": int64(7), "name": "x"}},
		{"bare with data and more", `{"data":{"a":1},"kind":"x"}`, uuidv7.UUID{}, map[string]any{"data": map[string]any{"a": int64(1)}, "kind": "x"}},
		{"whitespace", " \t{ \"a\" : 1 } \r", uuidv7.UUID{}, map[string]any{"a": int64(1)}},
		{"empty object", `{}`, uuidv7.UUID{}, map[string]any{}},
		{"same key in different objects", `{"a":{"a":1},"b":[{"a":2},{"a":3}]}`, uuidv7.UUID{},
			map[string]any{"a": map[string]any{"a": int64(1)}, "b": []any{map[string]any{"a": int64(2)}, map[string]any{"a": int64(3)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row, err := DecodeRow([]byte(tt.line))
			if err != nil {
				t.Fatal(err)
			}
			if row.ID != tt.wantID {
				t.Errorf("ID = %v, want %v", row.ID, tt.wantID)
			}
			if !reflect.DeepEqual(row.Data, tt.want) {
				t.Errorf("Data = %#v, want %#v", row.Data, tt.want)
			}
		})
	}
}

func TestDecodeRowErrors(t *testing.T) {
	tests := []struct {
		line string
		is   error
		msg  string // substring of the message
	}{
		{``, ErrSyntax, "empty line"},
		{`   `, ErrSyntax, "empty line"},
		{`[1,2]`, ErrRow, "a row must be a JSON object, got an array"},
		{`"x"`, ErrRow, "got a string"},
		{`42`, ErrRow, "got a number"},
		{`{"a":1} {"b":2}`, ErrSyntax, "column 9: unexpected '{' after the object"},
		{`{"a":1`, ErrSyntax, "end of line inside an object"},
		{`{"a" 1}`, ErrSyntax, `column 6: expected ':' after the object key "a"`},
		{`{a:1}`, ErrSyntax, "column 2: unexpected 'a', expected a string key"},
		{`{"a":1,}`, ErrSyntax, "expected a string key"},
		{`{"a":[1,]}`, ErrSyntax, "unexpected ']', expected a value"},
		{`{"a":[1 2]}`, ErrSyntax, "expected ',' or ']'"},
		{`{"a":tru}`, ErrSyntax, "expected true"},
		{`{"a":nul}`, ErrSyntax, "expected null"},
		{`{"a":01}`, ErrSyntax, "expected ',' or '}'"},
		{`{"a":1.}`, ErrSyntax, "digit after '.'"},
		{`{"a":1e}`, ErrSyntax, "digit in the exponent"},
		{`{"a":-}`, ErrSyntax, "expected a digit"},
		{`{"a":+1}`, ErrSyntax, "unexpected '+'"},
		{`{"a":.5}`, ErrSyntax, "unexpected '.'"},
		{`{"a":1e400}`, ErrRow, "beyond the range of a float64"},
		{`{"a":"x` + "\x01" + `"}`, ErrSyntax, "control character 0x01"},
		{`{"a":"x\q"}`, ErrSyntax, `invalid escape "\\q"`},
		{`{"a":"\u12"}`, ErrSyntax, `invalid \u escape`},
		{`{"a":"abc`, ErrSyntax, "unterminated string"},
		{`{"a":"ab\`, ErrSyntax, "unterminated string"},
		{`{"id":"nope","data":{}}`, ErrRow, `in field id: invalid UUIDv7`},
		{`{"id":5,"data":{}}`, ErrRow, "in field id: must be a UUIDv7 string, got a number"},
		{`{"id":"` + testID + `","data":[1]}`, ErrRow, "in field data: must be a JSON object, got an array"},
		{`{"data":"x"}`, ErrRow, "in field data: must be a JSON object, got a string"},
		{`{"a":{"b":[1,{"$date":"yesterday"}]}}`, ErrRow, `in field a.b[1]: $date "yesterday" is not an RFC 3339 time`},
		{`{"$oid":"5f1a2b3c4d5e6f7a8b9c0d1e"}`, ErrRow, "a row must be a JSON object, not an Extended JSON wrapper (this one is an ObjectID)"},
		{`{"$date":"2024-05-01T00:00:00Z"}`, ErrRow, "(this one is a date)"},
		{`{"id":"` + testID + `","data":{"$binary":{"base64":"AQI=","subType":"00"}}}`, ErrRow, "in field data: must be a JSON object, got binary data"},
		// Duplicate keys: JSON allows them, storh can keep only one value.
		{`{"a":1,"a":2}`, ErrRow, `at column 8: duplicate key "a": the object already has it at column 2`},
		{`{"a":1,"b":2,"a":3}`, ErrRow, `column 14: duplicate key "a"`},
		{`{"x":{"y":[{"k":1,"k":1}]}}`, ErrRow, `at column 19 in field x.y[0]: duplicate key "k"`},
		{`{"a":1,"\u0061":2}`, ErrRow, `duplicate key "a"`},
		{`{"id":"` + testID + `","id":"` + testID + `","data":{}}`, ErrRow, `duplicate key "id"`},
		{`{"data":{"n":1},"data":{"n":2}}`, ErrRow, `duplicate key "data"`},
		{`{"t":{"$date":"2024-05-01T00:00:00Z","$date":"2024-05-02T00:00:00Z"}}`, ErrRow, `in field t: duplicate key "$date"`},
		{`{"b":{"$binary":{"base64":"AQI=","base64":"AQI="}}}`, ErrRow, `in field b.$binary: duplicate key "base64"`},
		{`{"b":{"$binary":"AQI=","$binary":"AQI="}}`, ErrRow, `in field b: duplicate key "$binary"`},
		// Text that is not UTF-8, and escapes of half a surrogate pair.
		{"{\"a\":\"bad \xff byte\"}", ErrSyntax, "at column 11 in field a: invalid UTF-8 in a string: byte 0xff at byte offset 10"},
		{"{\"k\xc3\":1}", ErrSyntax, "at column 4: invalid UTF-8 in a key: byte 0xc3 at byte offset 3"},
		{`{"a":"\ud83d"}`, ErrRow, `column 7 in field a: \ud83d is half of a UTF-16 surrogate pair without the other half`},
		{`{"a":"x\ude00\ud83d\ude00"}`, ErrRow, `\ude00 is half of a UTF-16 surrogate pair`},
		{`{"a":"\ud83d\u0041"}`, ErrRow, `\ud83d is half`},
		{`{"a":` + strings.Repeat("[", MaxNesting+1) + strings.Repeat("]", MaxNesting+1) + `}`, ErrSyntax, "nested deeper than 1000 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.line[:min(len(tt.line), 40)], func(t *testing.T) {
			_, err := DecodeRow([]byte(tt.line))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %q is not %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), "jsonl: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestNumbers(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{"0", int64(0)},
		{"-0", int64(0)},
		{"42", int64(42)},
		{"-42", int64(-42)},
		{"9223372036854775807", int64(math.MaxInt64)},
		{"-9223372036854775808", int64(math.MinInt64)},
		{"9223372036854775808", uint64(1 << 63)},
		{"18446744073709551615", uint64(math.MaxUint64)},
		{"18446744073709551616", 18446744073709551616.0},
		{"-9223372036854775809", -9223372036854775809.0},
		{"123456789012345678901234567890", 123456789012345678901234567890.0},
		{"1.0", 1.0},
		{"-0.0", math.Copysign(0, -1)},
		{"1e2", 100.0},
		{"1E+2", 100.0},
		{"-1.5e-3", -0.0015},
		{"0.1", 0.1},
		{"1e-400", 0.0}, // underflow rounds to zero, as encoding/json
	}
	for _, tt := range tests {
		got, err := DecodeValue([]byte(tt.in))
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if reflect.TypeOf(got) != reflect.TypeOf(tt.want) || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s = %#v (%T), want %#v (%T)", tt.in, got, got, tt.want, tt.want)
		}
		if f, ok := tt.want.(float64); ok && math.Signbit(f) != math.Signbit(got.(float64)) {
			t.Errorf("%s: sign of zero lost", tt.in)
		}
	}
}

func TestStrings(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"plain"`, "plain"},
		{`""`, ""},
		{`"a\"b\\c\/d"`, `a"b\c/d`},
		{`"\b\f\n\r\t"`, "\b\f\n\r\t"},
		{`"\u00e9\u4e2d"`, "é中"},
		{`"\ud83d\ude00"`, "😀"},
		{`"\uD83D\uDE00x"`, "😀x"},
		{"\"caf\xc3\xa9\"", "café"},
		{`"\u2028"`, "\u2028"},
	}
	for _, tt := range tests {
		got, err := DecodeValue([]byte(tt.in))
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%s = %q, want %q", tt.in, got, tt.want)
		}
		// encoding/json decodes the same text the same way.
		var std string
		if err := json.Unmarshal([]byte(tt.in), &std); err != nil || std != tt.want {
			t.Errorf("%s: encoding/json gives %q, %v", tt.in, std, err)
		}
	}
}

func TestWrappers(t *testing.T) {
	day := time.Date(2020, 7, 24, 10, 20, 30, 123_000_000, time.UTC)
	tests := []struct {
		name string
		in   string
		want any
	}{
		{"date relaxed", `{"$date":"2020-07-24T10:20:30.123Z"}`, day},
		{"date offset", `{"$date":"2020-07-24T12:20:30.123+02:00"}`, day},
		{"date offset without colon", `{"$date":"2020-07-24T12:20:30.123+0200"}`, day},
		{"date nanoseconds", `{"$date":"2020-07-24T10:20:30.123456789Z"}`, day.Add(456789)},
		{"date canonical", `{"$date":{"$numberLong":"1595586030123"}}`, day},
		{"date legacy ms", `{"$date":1595586030123}`, day},
		{"date before 1970", `{"$date":{"$numberLong":"-1000"}}`, time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)},
		{"numberLong", `{"$numberLong":"-9007199254740993"}`, int64(-9007199254740993)},
		{"numberInt", `{"$numberInt":"42"}`, int64(42)},
		{"numberDouble", `{"$numberDouble":"1.5"}`, 1.5},
		{"numberDouble integral", `{"$numberDouble":"-1.0E+3"}`, -1000.0},
		{"numberDouble inf", `{"$numberDouble":"Infinity"}`, math.Inf(1)},
		{"numberDouble -inf", `{"$numberDouble":"-Infinity"}`, math.Inf(-1)},
		{"numberDecimal", `{"$numberDecimal":"19.990"}`, "19.990"},
		{"numberDecimal exponent", `{"$numberDecimal":"-1.5E+10"}`, "-1.5E+10"},
		{"numberDecimal 34 digits", `{"$numberDecimal":"1234567890123456789012345678901234"}`, "1234567890123456789012345678901234"},
		{"numberDecimal NaN", `{"$numberDecimal":"NaN"}`, "NaN"},
		{"numberDecimal -Infinity", `{"$numberDecimal":"-Infinity"}`, "-Infinity"},
		{"uuid", `{"$uuid":"73FFD264-44b3-4c69-90e8-e7d1dfc035d4"}`, anyUUID("73ffd264-44b3-4c69-90e8-e7d1dfc035d4")},
		{"timestamp limits", `{"$timestamp":{"t":4294967295,"i":0}}`, map[string]any{"t": int64(4294967295), "i": int64(0)}},
		{"binary", `{"$binary":{"base64":"AAEC/w==","subType":"00"}}`, []byte{0, 1, 2, 255}},
		{"binary uuid", `{"$binary":{"base64":"AZCk9Fw7fe+BI0VniavN7w==","subType":"04"}}`, uuidv7.MustParse(testID)},
		{"binary legacy", `{"$binary":"AAE=","$type":"0"}`, []byte{0, 1}},
		{"binary empty", `{"$binary":{"base64":"","subType":"80"}}`, []byte{}},
		{"oid", `{"$oid":"5F1A2B3C4D5E6F7A8B9C0D1E"}`, objectid.MustParse("5f1a2b3c4d5e6f7a8b9c0d1e")},
		{"timestamp", `{"$timestamp":{"t":1595586030,"i":7}}`, map[string]any{"t": int64(1595586030), "i": int64(7)}},
		{"regex", `{"$regularExpression":{"pattern":"^a.*","options":"i"}}`, "/^a.*/i"},
		{"regex legacy", `{"$regex":"^a","$options":""}`, "/^a/"},
		{"symbol", `{"$symbol":"sym"}`, "sym"},
		{"code", `{"$code":"x=1"}`, "x=1"},
		{"undefined", `{"$undefined":true}`, nil},
		{"unknown $ key stays", `{"$foo":1}`, map[string]any{"$foo": int64(1)}},
		{"two members stay", `{"$date":"x","note":1}`, map[string]any{"$date": "x", "note": int64(1)}},
		{"dbref stays", `{"$ref":"users","$id":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d1e"}}`, map[string]any{"$ref": "users", "$id": objectid.MustParse("5f1a2b3c4d5e6f7a8b9c0d1e")}},
		{"in array", `[{"$numberLong":"1"},{"$oid":"5f1a2b3c4d5e6f7a8b9c0d1e"}]`, []any{int64(1), objectid.MustParse("5f1a2b3c4d5e6f7a8b9c0d1e")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeValue([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v (%T), want %#v (%T)", got, got, tt.want, tt.want)
			}
		})
	}
	nan, err := DecodeValue([]byte(`{"$numberDouble":"NaN"}`))
	if f, ok := nan.(float64); err != nil || !ok || !math.IsNaN(f) {
		t.Errorf("NaN wrapper = %v, %v", nan, err)
	}
}

func TestWrapperErrors(t *testing.T) {
	tests := []struct{ in, msg string }{
		{`{"$date":true}`, "$date must hold an RFC 3339 string"},
		{`{"$date":"2020-07-24T10:20:30"}`, "is not an RFC 3339 time"},
		{`{"$numberLong":12}`, "$numberLong must hold a string of digits, got a number"},
		{`{"$numberLong":"1.5"}`, `$numberLong "1.5" is not a 64-bit integer`},
		{`{"$numberInt":"3000000000"}`, "is not a 32-bit integer"},
		{`{"$numberDouble":"0x1p3"}`, "is not a number"},
		{`{"$numberDouble":"inf"}`, "is not a number"},
		{`{"$numberDouble":"1e999"}`, "is not a number"},
		{`{"$numberDecimal":1}`, "$numberDecimal must hold a string"},
		{`{"$binary":"AAE="}`, `$binary must hold {"base64"`},
		{`{"$binary":{"base64":"!!","subType":"00"}}`, "not standard base64"},
		{`{"$binary":{"base64":"AA==","subType":"zz"}}`, "not one or two hex digits"},
		{`{"$binary":{"base64":"AA==","subType":"100"}}`, "not one or two hex digits"},
		{`{"$oid":"xyz"}`, `$oid "xyz" is not an ObjectID`},
		{`{"$oid":1}`, "$oid must hold a string"},
		{`{"$timestamp":{"t":1}}`, "$timestamp must hold"},
		{`{"$regularExpression":"x"}`, "$regularExpression must hold"},
		{`{"$regex":1,"$options":""}`, "needs a pattern string"},
		{`{"$minKey":1}`, "$minKey has no storh equivalent"},
		{`{"$code":"f()","$scope":{"x":1}}`, "code with scope) has no storh equivalent"},
		{`{"$timestamp":{"t":4294967296,"i":1}}`, "each from 0 to 4294967295"},
		{`{"$timestamp":{"t":-1,"i":1}}`, "each from 0 to 4294967295"},
		{`{"$undefined":false}`, "$undefined must hold true"},
		{`{"$numberDecimal":"abc"}`, "is not a Decimal128: not a number"},
		{`{"$numberDecimal":"1.2345678901234567890123456789012345678"}`, "38 significant digits"},
		{`{"$numberDecimal":"1E99999"}`, "out of range"},
		{`{"$uuid":"not-a-uuid"}`, "$uuid must hold a UUID"},
		{`{"$uuid":12}`, "$uuid must hold a UUID"},
		{`{"$maxKey":1}`, "$maxKey has no storh equivalent"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := DecodeRow([]byte(`{"f":` + tt.in + `}`))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrRow) || !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), "in field f") {
				t.Errorf("error %q: want ErrRow in field f containing %q", err, tt.msg)
			}
		})
	}
}

func TestDecodeMongo(t *testing.T) {
	oid := objectid.MustParse("5f1a2b3c4d5e6f7a8b9c0d1e")
	wantID := uuidv7.UUID(oid.UUIDv7())
	row, err := DecodeMongo([]byte(`{"_id":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d1e"},"name":"ana","ref":{"_id":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d1f"}},"n":{"$numberInt":"3"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if row.ID != wantID || row.ForeignID {
		t.Errorf("ID = %v (foreign %v), want %v", row.ID, row.ForeignID, wantID)
	}
	want := map[string]any{"_oid": oid, "name": "ana", "ref": map[string]any{"_id": objectid.MustParse("5f1a2b3c4d5e6f7a8b9c0d1f")}, "n": int64(3)}
	if !reflect.DeepEqual(row.Data, want) {
		t.Errorf("Data = %#v, want %#v", row.Data, want)
	}
	if row.ID.TimestampMs() != oid.Timestamp().UnixMilli() {
		t.Errorf("the id's time %v is not the ObjectID's second %v", row.ID.Time(), oid.Timestamp())
	}

	row, err = DecodeMongo([]byte(`{"_id":"user-7","name":"bo"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !row.ID.IsZero() || !row.ForeignID || row.Data["_id"] != "user-7" {
		t.Errorf("foreign _id: %+v", row)
	}

	row, err = DecodeMongo([]byte(`{"name":"no id"}`))
	if err != nil || !row.ID.IsZero() || row.ForeignID {
		t.Errorf("no _id: %+v, %v", row, err)
	}

	_, err = DecodeMongo([]byte(`{"_id":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d1e"},"_oid":"x"}`))
	if !errors.Is(err, ErrRow) || !strings.Contains(err.Error(), "already has an _oid field") {
		t.Errorf("_oid clash: %v", err)
	}

	// The plain decoder keeps an ObjectID _id as a typed field.
	plain, err := DecodeRow([]byte(`{"_id":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d1e"}}`))
	if err != nil || plain.Data["_id"] != oid || !plain.ID.IsZero() {
		t.Errorf("plain decode of a Mongo row: %+v, %v", plain, err)
	}
}

// TestDecoderReuse checks that interned keys and remembered map sizes do not
// leak between rows of different shapes.
func TestDecoderReuse(t *testing.T) {
	var d Decoder
	lines := []string{
		`{"a":1,"b":{"c":2,"d":3,"e":4}}`,
		`{"x":"y"}`,
		`{"a":1,"b":{"c":2}}`,
		`{"id":"` + testID + `","data":{"a":1}}`,
	}
	for _, l := range lines {
		got, err := d.DecodeRow([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := DecodeRow([]byte(l))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: reused decoder %+v, fresh %+v", l, got, want)
		}
	}
}

func TestDecodeAllocs(t *testing.T) {
	var d Decoder
	line := []byte(`{"level":"info","service":"api","status":200,"ok":true,"tags":["a","b"]}`)
	if _, err := d.DecodeRow(line); err != nil {
		t.Fatal(err)
	}
	// One map, its five values and the array; keys are interned.
	allocs := testing.AllocsPerRun(100, func() { d.DecodeRow(line) })
	if allocs > 12 {
		t.Errorf("DecodeRow: %.0f allocations, want at most 12", allocs)
	}
}

func BenchmarkDecodeRow(b *testing.B) {
	line := []byte(`{"level":"info","service":"api","path":"/pages/582","status":200,"ms":84.74337369372327,"user":"u1033","ok":true,"n":12345,"tags":["a","b"]}`)
	var d Decoder
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.DecodeRow(line); err != nil {
			b.Fatal(err)
		}
	}
}

// TestKeepInvalidUTF8 checks the option that keeps strings that are not
// UTF-8 as their bytes: values only, escapes decoded, keys still refused.
func TestKeepInvalidUTF8(t *testing.T) {
	d := Decoder{KeepInvalidUTF8: true}
	m, err := d.DecodeObject([]byte("{\"a\":\"ok\",\"b\":\"\\u00e9\xff\\n\",\"c\":[\"\xc3\"]}"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": "ok", "b": []byte{0xc3, 0xa9, 0xff, '\n'}, "c": []any{[]byte{0xc3}}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got %#v, want %#v", m, want)
	}
	if _, err := d.DecodeObject([]byte("{\"k\xff\":1}")); err == nil || !strings.Contains(err.Error(), "invalid UTF-8 in a key") || InvalidUTF8(err) {
		t.Errorf("a key that is not UTF-8: %v (InvalidUTF8 %v)", err, InvalidUTF8(err))
	}
	if _, err := new(Decoder).DecodeObject([]byte("{\"a\":\"\xff\"}")); !InvalidUTF8(err) {
		t.Errorf("InvalidUTF8(%v) = false", err)
	}
	if _, err := d.DecodeObject([]byte(`{"a":"\ud83d"}`)); err == nil {
		t.Error("half a surrogate pair accepted")
	}
	// Written back, the bytes are a $binary wrapper, which reads back the same.
	js, err := AppendValue(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	back, err := new(Decoder).DecodeObject(js)
	if err != nil || !reflect.DeepEqual(back, want) {
		t.Errorf("%s read back as %#v, %v", js, back, err)
	}
}

// TestDecodeValuePrefix checks that a value inside a longer text is decoded
// up to its end, and errors count columns from the start of the text.
func TestDecodeValuePrefix(t *testing.T) {
	tests := []struct {
		in   string
		want any
		n    int
	}{
		{`"a b" and x`, "a b", 5},
		{`  {"k":[1,2]})`, map[string]any{"k": []any{int64(1), int64(2)}}, 13},
		{`{"$date":"2024-05-01T12:00:00Z"}]`, time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), 32},
		{`5)`, int64(5), 1},
		{`[1, "x"], 2`, []any{int64(1), "x"}, 8},
	}
	for _, tt := range tests {
		v, n, err := new(Decoder).DecodeValuePrefix([]byte(tt.in))
		if err != nil || n != tt.n || !reflect.DeepEqual(v, tt.want) {
			t.Errorf("%s: %#v, %d, %v; want %#v, %d", tt.in, v, n, err, tt.want, tt.n)
		}
	}
	_, _, err := new(Decoder).DecodeValuePrefix([]byte(`{"k":1,"k":2}`))
	var e *Error
	if !errors.As(err, &e) || e.Column != 8 || !errors.Is(err, ErrRow) {
		t.Errorf("duplicate key: %v", err)
	}
	_, _, err = new(Decoder).DecodeValuePrefix([]byte(`"open`))
	if !errors.As(err, &e) || !errors.Is(err, ErrSyntax) {
		t.Errorf("unterminated string: %v", err)
	}
}

// anyUUID parses a UUID of any version.
func anyUUID(s string) uuidv7.UUID {
	u, err := uuidv7.ParseAny(s)
	if err != nil {
		panic(err)
	}
	return u
}
