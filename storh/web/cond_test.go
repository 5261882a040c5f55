package web

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

func TestParseCond(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	id := uuidv7.MustParse("0190a4f4-5c3b-7def-8123-456789abcdef")
	for _, tc := range []struct {
		in   string
		want query.Cond
	}{
		{`{"field":"a.b","op":"eq","value":1}`, query.Field("a.b").Eq(1)},
		{`{"field":"a","op":"eq","value":1.0}`, query.Field("a").Eq(1.0)},
		{`{"field":"a","op":"eq","value":"1"}`, query.Field("a").Eq("1")},
		{`{"field":"a","op":"eq","value":null}`, query.Field("a").Eq(nil)},
		{`{"field":"a","op":"eq","value":{"x":[1,true]}}`, query.Field("a").Eq(map[string]any{"x": []any{1, true}})},
		{`{"path":["a.b","c"],"op":"neq","value":true}`, query.FieldPath("a.b", "c").Neq(true)},
		{`{"field":"a","op":"in","value":[1,"x"]}`, query.Field("a").In(1, "x")},
		{`{"field":"a","op":"in","value":[]}`, query.Field("a").In()},
		{`{"field":"a","op":"nin","value":[2]}`, query.Field("a").NotIn(2)},
		{`{"field":"a","op":"gt","value":5}`, query.Field("a").Gt(5)},
		{`{"field":"a","op":"gte","value":{"$date":"2024-05-01T12:00:00Z"}}`, query.Field("a").Gte(at)},
		{`{"field":"a","op":"lt","value":{"$uuid":"0190a4f4-5c3b-7def-8123-456789abcdef"}}`, query.Field("a").Lt(id)},
		{`{"field":"a","op":"lte","value":{"$binary":{"base64":"aGk=","subType":"00"}}}`, query.Field("a").Lte([]byte("hi"))},
		{`{"field":"a","op":"between","value":[1,2.5]}`, query.Field("a").Between(1, 2.5)},
		{`{"field":"a","op":"exists"}`, query.Field("a").Exists()},
		{`{"field":"a","op":"missing"}`, query.Field("a").Missing()},
		{`{"field":"a","op":"prefix","value":"ab"}`, query.Field("a").Prefix("ab")},
		{`{"field":"tags","op":"contains","value":"go"}`, query.Field("tags").Contains("go")},
		{`{"and":[]}`, query.And()},
		{`{"or":[]}`, query.Or()},
		{` {"and":[{"field":"a","op":"eq","value":1},{"or":[{"field":"b","op":"exists"},{"not":{"field":"c","op":"missing"}}]}]} `,
			query.And(query.Field("a").Eq(1), query.Or(query.Field("b").Exists(), query.Not(query.Field("c").Missing())))},
	} {
		got, err := ParseCond([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got.String() != tc.want.String() {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

func TestParseCondErrors(t *testing.T) {
	deep := strings.Repeat(`{"not":`, MaxCondDepth) + `{"field":"a","op":"exists"}` + strings.Repeat(`}`, MaxCondDepth)
	many := `{"and":[` + strings.Repeat(`{"field":"a","op":"exists"},`, MaxCondNodes) + `{"field":"a","op":"exists"}]}`
	for _, tc := range []struct {
		in, node, reason string
	}{
		{``, "$", "not JSON"},
		{`{"field":"a"`, "$", "not JSON"},
		{`{"field":"a","field":"b","op":"exists"}`, "$", "not JSON"},
		{`[]`, "$", "a JSON object, not a list"},
		{`"a"`, "$", "not a string"},
		{`{"$date":"2024-05-01T12:00:00Z"}`, "$", "not a time.Time"},
		{`{}`, "$", "an empty object"},
		{`{"op":"eq","value":1}`, "$", `no "field"`},
		{`{"field":"a","path":["a"],"op":"exists"}`, "$", "not both"},
		{`{"field":1,"op":"exists"}`, "$", `"field" is a string`},
		{`{"field":"","op":"exists"}`, "$", "needs a field name"},
		{`{"field":"a..b","op":"exists"}`, "$", "empty segment"},
		{`{"path":[],"op":"exists"}`, "$", "non-empty list"},
		{`{"path":"a","op":"exists"}`, "$", "non-empty list"},
		{`{"path":["a",2],"op":"exists"}`, "$", `"path"[1]`},
		{`{"field":"a"}`, "$", `no "op"`},
		{`{"field":"a","op":"like","value":1}`, "$", `op "like" is not one of`},
		{`{"field":"a","op":3,"value":1}`, "$", `op a number is not one of`},
		{`{"field":"a","op":"eq"}`, "$", "needs a value"},
		{`{"field":"a","op":"exists","value":1}`, "$", "takes no value"},
		{`{"field":"a","op":"in","value":1}`, "$", "takes a list"},
		{`{"field":"a","op":"between","value":[1]}`, "$", "two values"},
		{`{"field":"a","op":"between","value":[1,"b"]}`, "$", "bounds of two types"},
		{`{"field":"a","op":"gt","value":null}`, "$", "needs a number"},
		{`{"field":"a","op":"lt","value":[1]}`, "$", "needs a number"},
		{`{"field":"a","op":"prefix","value":1}`, "$", "takes a string"},
		{`{"field":"a","op":"eq","value":1,"x":2}`, "$", `unknown key "x"`},
		{`{"and":{}}`, "$", "takes a list"},
		{`{"and":[],"or":[]}`, "$", `found also "or"`},
		{`{"not":[]}`, "$.not", "a JSON object"},
		{`{"and":[{"field":"a","op":"exists"},{"or":[{"field":"b","op":"eqq","value":1}]}]}`, "$.and[1].or[0]", `"eqq"`},
		{`{"not":{"not":{"field":"a","op":"gt","value":true,"extra":1}}}`, "$.not.not", `unknown key "extra"`},
		{deep, strings.Repeat(".not", MaxCondDepth), "nest more than"},
		{many, "$.and[1023]", "more than 1024 conditions"},
		{`"` + strings.Repeat("x", MaxCondBytes) + `"`, "$", "bytes of JSON"},
	} {
		_, err := ParseCond([]byte(tc.in))
		var ce *CondError
		if !errors.As(err, &ce) {
			t.Errorf("%.60s: %v, want a *CondError", tc.in, err)
			continue
		}
		node := tc.node
		if !strings.HasPrefix(node, "$") {
			node = "$" + node
		}
		if ce.Node != node || !strings.Contains(ce.Reason, tc.reason) {
			t.Errorf("%.60s:\n got at %s: %s\nwant at %s: ...%s...", tc.in, ce.Node, ce.Reason, node, tc.reason)
		}
		if !errors.Is(err, query.ErrInvalidQuery) || !strings.HasPrefix(err.Error(), "web: condition at "+node+": ") {
			t.Errorf("%.60s: %q does not wrap ErrInvalidQuery or name its node", tc.in, err)
		}
	}
	var ce *CondError
	if _, err := ParseCond([]byte(`{`)); !errors.As(err, &ce) || !errors.Is(err, jsonl.ErrSyntax) {
		t.Errorf("syntax error %v does not wrap jsonl.ErrSyntax", err)
	}
}

// FuzzParseCond checks that any input gives a usable condition or a
// *CondError, and never a panic.
func FuzzParseCond(f *testing.F) {
	for _, s := range []string{
		`{"field":"a.b","op":"eq","value":1}`,
		`{"path":["a.b","c"],"op":"between","value":[1,{"$numberDouble":"NaN"}]}`,
		`{"and":[{"field":"a","op":"in","value":[1,"x",null]},{"not":{"field":"b","op":"missing"}}]}`,
		`{"or":[{"field":"t","op":"gte","value":{"$date":"2024-05-01T12:00:00Z"}},{"field":"p","op":"prefix","value":""}]}`,
		`{"field":"a","op":"contains","value":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d1e"}}`,
		`{"not":{"not":{"not":{}}}}`,
		`[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCond(b)
		if err != nil {
			var ce *CondError
			if !errors.As(err, &ce) || !errors.Is(err, query.ErrInvalidQuery) {
				t.Fatalf("%q: %v is not a *CondError", b, err)
			}
			return
		}
		if err := query.All().Where(c).Validate(); err != nil {
			t.Fatalf("%q parsed to a condition that does not run: %v", b, err)
		}
	})
}
