package storh_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The schema differential: random schemas over random records of every
// stored type. Put accepts a record exactly when the validator, given the
// record's JSON mapping as docs/schemas.md's table states it, written here
// as JSON text and parsed back (sharing no code with the engine's mapping,
// which works on the stored bytes), accepts it; a refused Put stores
// nothing.
func TestSchemaMatchesReference(t *testing.T) {
	db := openTemp(t)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		schema := schemaGen().Draw(rt, "schema")
		ref := compileReference(rt, schema)
		name := fmt.Sprintf("c%d", n)
		d, err := db.Docs(name, storh.WithSchema([]byte(schema)))
		if err != nil {
			rt.Fatalf("WithSchema(%s): %v", schema, err)
		}
		stored := 0
		for i := range rapid.IntRange(1, 12).Draw(rt, "records") {
			rec := recordGen().Draw(rt, fmt.Sprintf("record%d", i))
			want := ref.Validate(referenceValue(rt, rec)) == nil
			_, err := d.Put(rec)
			switch {
			case want && err != nil:
				rt.Fatalf("schema %s: Put(%v) = %v; the reference accepts it", schema, rec, err)
			case !want && !errors.Is(err, storh.ErrSchema):
				rt.Fatalf("schema %s: Put(%v) = %v; the reference refuses it", schema, rec, err)
			case err == nil:
				stored++
			}
		}
		if got, err := d.Count(); err != nil || got != stored {
			rt.Fatalf("Count = %d, %v; want the %d records accepted", got, err, stored)
		}
	})
}

// compileReference compiles schema as the store documents it: draft
// 2020-12, formats asserted.
func compileReference(t *rapid.T, schema string) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("ref.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("ref.json")
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	return s
}

// referenceValue writes rec as JSON text by docs/schemas.md's table and
// parses it back as the validator's own reader does (numbers exact).
func referenceValue(t *rapid.T, rec storh.Map) any {
	var b bytes.Buffer
	writeReference(&b, rec)
	v, err := jsonschema.UnmarshalJSON(&b)
	if err != nil {
		t.Fatalf("reference JSON of %v: %v", rec, err)
	}
	return v
}

func writeReference(b *bytes.Buffer, v any) {
	str := func(s string) {
		q, _ := json.Marshal(s)
		b.Write(q)
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		fmt.Fprint(b, x)
	case int64:
		fmt.Fprint(b, x)
	case uint64:
		fmt.Fprint(b, x)
	case float64:
		switch {
		case math.IsNaN(x):
			str("NaN")
		case math.IsInf(x, 1):
			str("Infinity")
		case math.IsInf(x, -1):
			str("-Infinity")
		default:
			q, _ := json.Marshal(x)
			b.Write(q)
		}
	case string:
		str(x)
	case time.Time:
		str(x.UTC().Format(time.RFC3339Nano))
	case uuidv7.UUID:
		str(x.String())
	case objectid.ObjectID:
		str(x.Hex())
	case []byte:
		str(base64.StdEncoding.EncodeToString(x))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeReference(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('{')
		first := true
		for k, e := range x {
			if !first {
				b.WriteByte(',')
			}
			first = false
			str(k)
			b.WriteByte(':')
			writeReference(b, e)
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("no reference mapping for %T", v))
	}
}

var schemaFields = []string{"a", "b", "c"}

// scalarGen draws a value of every kind the store keeps, with edges:
// integers at the ends of int64 and uint64, integral floats, NaN and the
// infinities, times with and without fractions, valid and odd strings.
func scalarGen() *rapid.Generator[any] {
	return rapid.OneOf(
		rapid.Map(rapid.Int64Range(-5, 5), func(i int64) any { return i }),
		rapid.Map(rapid.SampledFrom([]int64{math.MinInt64, math.MaxInt64, 9007199254740993}), func(i int64) any { return i }),
		rapid.Map(rapid.SampledFrom([]uint64{math.MaxUint64, 1 << 63}), func(u uint64) any { return u }),
		rapid.Map(rapid.SampledFrom([]float64{0.5, -2.5, 2.0, 1e300, math.NaN(), math.Inf(1), math.Inf(-1), 0.1}), func(f float64) any { return f }),
		rapid.Map(rapid.SampledFrom([]string{"", "abc", "ABC", "2024-05-06T07:08:09Z", "0190f3c4-5a6b-7c8d-9e0f-a1b2c3d4e5f6", "héllo", "NaN"}), func(s string) any { return s }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Just[any](nil),
		rapid.Map(rapid.SampledFrom([]int64{0, 1_714_564_800_123, 1_714_564_800_000}), func(ms int64) any { return time.UnixMilli(ms).UTC() }),
		rapid.Map(rapid.Int64Range(0, 999), func(ns int64) any { return time.Unix(1_714_564_800, ns).UTC() }),
		rapid.Just[any](uuidv7.MustParse("0190f3c4-5a6b-7c8d-9e0f-a1b2c3d4e5f6")),
		rapid.Just[any](objectid.ObjectID{0x66, 0x32, 0x24, 0xa0, 0xe1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07, 0x18}),
		rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 4), func(b []byte) any { return b }),
	)
}

func valueGen() *rapid.Generator[any] {
	return rapid.OneOf(
		scalarGen(), scalarGen(), scalarGen(),
		rapid.Map(rapid.SliceOfN(scalarGen(), 0, 3), func(l []any) any { return l }),
		rapid.Map(rapid.MapOfN(rapid.SampledFrom(schemaFields), scalarGen(), 0, 2), func(m map[string]any) any { return m }),
	)
}

func recordGen() *rapid.Generator[storh.Map] {
	return rapid.Custom(func(t *rapid.T) storh.Map {
		m := storh.Map{}
		for _, f := range schemaFields {
			if rapid.Bool().Draw(t, "has "+f) {
				m[f] = valueGen().Draw(t, f)
			}
		}
		return m
	})
}

// ruleGen draws one rule of the kinds a schema for these records holds.
func ruleGen() *rapid.Generator[string] {
	return rapid.SampledFrom([]string{
		`"type":"integer"`, `"type":"number"`, `"type":"string"`, `"type":"array"`, `"type":"object"`, `"type":"null"`, `"type":"boolean"`,
		`"minimum":0`, `"maximum":9007199254740992`, `"exclusiveMinimum":-1`, `"multipleOf":0.5`, `"minimum":18446744073709551615`,
		`"format":"date-time"`, `"format":"uuid"`, `"pattern":"^[a-z]*$"`, `"maxLength":3`, `"minLength":1`,
		`"const":"NaN"`, `"enum":[1,"abc",null,true]`, `"items":{"type":"string"}`, `"maxItems":1`,
		`"required":["a"]`, `"properties":{"a":{"type":"integer"}}`, `"additionalProperties":false`,
		`"contentEncoding":"base64"`,
	})
}

func schemaGen() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		var props []string
		for _, f := range schemaFields {
			if rules := rapid.SliceOfNDistinct(ruleGen(), 0, 3, rapid.ID[string]).Draw(t, "rules "+f); len(rules) > 0 {
				props = append(props, fmt.Sprintf("%q:{%s}", f, strings.Join(rules, ",")))
			}
		}
		top := []string{`"properties":{` + strings.Join(props, ",") + `}`}
		if rapid.Bool().Draw(t, "required") {
			top = append(top, `"required":["a"]`)
		}
		return "{" + strings.Join(top, ",") + "}"
	})
}
