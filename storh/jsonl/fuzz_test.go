package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/storhdb/storh-go/storh/objectid"
)

// The seed corpora live in testdata/fuzz/<target>/; go test runs them as
// regression tests, go test -fuzz=FuzzDecodeRow explores from them.

// FuzzDecodeRow checks the row decoder against encoding/json: it accepts
// only valid JSON, rejects (as a syntax error) only invalid JSON, agrees on
// the values when no wrapper is involved, and what it decodes writes back
// to JSON that decodes to the same values.
func FuzzDecodeRow(f *testing.F) {
	f.Add([]byte(`{"id":"0190a4f4-5c3b-7def-8123-456789abcdef","data":{"a":1}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var d Decoder
		row, err := d.DecodeRow(line)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			// encoding/json accepts bytes that are not UTF-8 (and turns
			// them into U+FFFD); the decoder refuses them.
			if errors.Is(err, ErrSyntax) && json.Valid(line) && utf8.Valid(line) && !strings.Contains(e.Reason, "nested deeper") &&
				!strings.Contains(e.Reason, "empty line") {
				t.Fatalf("syntax error %q for valid JSON %q", err, line)
			}
			return
		}
		if !json.Valid(line) {
			t.Fatalf("accepted invalid JSON %q", line)
		}
		checkRewrite(t, row.Data)

		// Without wrappers, the values are encoding/json's, typed by the
		// number rules.
		obj, err := d.DecodeObject(line)
		if err != nil {
			t.Fatalf("DecodeRow accepted %q but DecodeObject fails: %v", line, err)
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var std any
		if err := dec.Decode(&std); err != nil {
			t.Fatalf("encoding/json rejects %q: %v", line, err)
		}
		if hasDollarKey(std) {
			return
		}
		if want, ok := typed(std); ok && !reflect.DeepEqual(any(obj), want) {
			t.Fatalf("%q\n  decoded %#v\n  encoding/json %#v", line, obj, want)
		}
	})
}

// FuzzDecodeMongo checks that the Extended JSON decoder never panics,
// accepts only valid JSON, and decodes to values that write back to JSON
// and read back the same.
func FuzzDecodeMongo(f *testing.F) {
	f.Add([]byte(`{"_id":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d1e"},"n":{"$numberLong":"7"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		row, err := DecodeMongo(line)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		if !json.Valid(line) {
			t.Fatalf("accepted invalid JSON %q", line)
		}
		if row.ForeignID && !row.ID.IsZero() {
			t.Fatalf("a foreign _id with an id: %+v", row)
		}
		if !row.ID.IsZero() {
			if _, ok := row.Data["_oid"].(objectid.ObjectID); !ok {
				t.Fatalf("ObjectID row without _oid: %+v", row)
			}
		}
		checkRewrite(t, row.Data)
	})
}

// FuzzAppendPayload feeds arbitrary bytes to the msgpack transcoder: it
// must fail cleanly or write valid JSON.
func FuzzAppendPayload(f *testing.F) {
	f.Add([]byte{0x81, 0xa1, 'a', 0x01})
	f.Add([]byte{0x82, 0xa1, 'b', 0xc4, 0x01, 0xff, 0xa1, 't', 0xd6, 0xff, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, p []byte) {
		out, err := AppendPayload(nil, p)
		if err != nil {
			if !errors.Is(err, ErrPayload) {
				t.Fatalf("error %v is not ErrPayload", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%x → invalid JSON %s", p, out)
		}
	})
}

// checkRewrite writes data with AppendValue and reads it back.
func checkRewrite(t *testing.T, data map[string]any) {
	t.Helper()
	js, err := AppendValue(nil, data)
	if err != nil {
		t.Fatalf("AppendValue(%#v): %v", data, err)
	}
	if !json.Valid(js) {
		t.Fatalf("AppendValue wrote invalid JSON %s", js)
	}
	back, err := DecodeRow(append(append([]byte(`{"data":`), js...), '}'))
	if err != nil {
		t.Fatalf("reading back %s: %v", js, err)
	}
	if !sameValue(back.Data, data) {
		t.Fatalf("round trip changed the data:\n  before %#v\n  after  %#v\n  via %s", data, back.Data, js)
	}
}

// sameValue is reflect.DeepEqual with NaN equal to NaN, times compared as
// instants (to the millisecond outside the years 0–9999, as written).
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && (x == y && math.Signbit(x) == math.Signbit(y) || math.IsNaN(x) && math.IsNaN(y))
	case time.Time:
		y, ok := b.(time.Time)
		if !ok {
			return false
		}
		if yr := y.Year(); yr < 0 || yr > 9999 {
			return x.UnixMilli() == y.UnixMilli()
		}
		return x.Equal(y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func hasDollarKey(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if strings.HasPrefix(k, "$") || hasDollarKey(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasDollarKey(e) {
				return true
			}
		}
	}
	return false
}

// typed converts encoding/json's UseNumber output by the package's number
// rules; false when a number is beyond float64 (the decoder rejects it).
func typed(v any) (any, bool) {
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n, true
			}
			if n, err := strconv.ParseUint(s, 10, 64); err == nil {
				return n, true
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil || !math.IsInf(f, 0)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			var ok bool
			if out[i], ok = typed(e); !ok {
				return nil, false
			}
		}
		return out, true
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			var ok bool
			if out[k], ok = typed(e); !ok {
				return nil, false
			}
		}
		return out, true
	}
	return v, true
}
