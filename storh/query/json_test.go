package query_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TestCondUnmarshalJSON checks the JSON form of docs/web.md against the
// conditions built in Go, and that each writes back to JSON that reads as
// the same condition.
func TestCondUnmarshalJSON(t *testing.T) {
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
		{`{"field":"items","op":"elemMatch","cond":{"and":[{"field":"sku","op":"eq","value":"X"},{"field":"qty","op":"gt","value":2}]}}`,
			query.Field("items").ElemMatch(query.And(query.Field("sku").Eq("X"), query.Field("qty").Gt(2)))},
		{`{"path":["o","items"],"op":"elemMatch","cond":{"not":{"field":"sku","op":"exists"}}}`,
			query.Field("o.items").ElemMatch(query.Not(query.Field("sku").Exists()))},
		{`{"and":[]}`, query.And()},
		{`{"or":[]}`, query.Or()},
		{` {"and":[{"field":"a","op":"eq","value":1},{"or":[{"field":"b","op":"exists"},{"not":{"field":"c","op":"missing"}}]}]} `,
			query.And(query.Field("a").Eq(1), query.Or(query.Field("b").Exists(), query.Not(query.Field("c").Missing())))},
	} {
		var got query.Cond
		if err := json.Unmarshal([]byte(tc.in), &got); err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if !query.Equal(got, tc.want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
		checkJSONRoundTrip(t, got)
	}
}

// TestCondMarshalJSON checks the JSON written for conditions whose types
// JSON alone would lose.
func TestCondMarshalJSON(t *testing.T) {
	oid := objectid.MustParse("5f1a2b3c4d5e6f7a8b9c0d1e")
	for _, tc := range []struct {
		c    query.Cond
		want string
	}{
		{query.Field("a.b").Eq(5), `{"field":"a.b","op":"eq","value":5}`},
		{query.Field("a").Eq(5.0), `{"field":"a","op":"eq","value":5.0}`},
		{query.FieldPath("a.b", "c").In(1, "x", nil), `{"path":["a.b","c"],"op":"in","value":[1,"x",null]}`},
		{query.Field("t").Between(time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 5, 2, 0, 0, 0, 0, time.UTC)),
			`{"field":"t","op":"between","value":[{"$date":"2024-05-01T00:00:00Z"},{"$date":"2024-05-02T00:00:00Z"}]}`},
		{query.Field("o").Eq(oid), `{"field":"o","op":"eq","value":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d1e"}}`},
		{query.Field("f").Gt(math.NaN()), `{"field":"f","op":"gt","value":{"$numberDouble":"NaN"}}`},
		{query.Not(query.Or(query.Field("a").Exists(), query.Field("b").Prefix("x"))),
			`{"not":{"or":[{"field":"a","op":"exists"},{"field":"b","op":"prefix","value":"x"}]}}`},
		{query.And(), `{"and":[]}`},
	} {
		b, err := json.Marshal(tc.c)
		if err != nil || string(b) != tc.want {
			t.Errorf("%s: %s %v\nwant %s", tc.c, b, err, tc.want)
		}
		checkJSONRoundTrip(t, tc.c)
	}
	for _, bad := range []query.Cond{{}, query.Field("").Eq(1), query.Field("a").Gt(nil)} {
		if b, err := json.Marshal(bad); err == nil || !errors.Is(err, query.ErrInvalidQuery) {
			t.Errorf("%s: marshalled as %s, %v; want ErrInvalidQuery", bad, b, err)
		}
	}
}

func TestCondUnmarshalJSONErrors(t *testing.T) {
	deep := strings.Repeat(`{"not":`, query.MaxCondDepth) + `{"field":"a","op":"exists"}` + strings.Repeat(`}`, query.MaxCondDepth)
	many := `{"and":[` + strings.Repeat(`{"field":"a","op":"exists"},`, query.MaxCondNodes) + `{"field":"a","op":"exists"}]}`
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
		{`{"field":"a","op":"in","value":[{"x":1e999}]}`, "$", "not JSON"},
		{`{"field":"a","op":"prefix","value":1}`, "$", "takes a string"},
		{`{"field":"a","op":"eq","value":1,"x":2}`, "$", `unknown key "x"`},
		{`{"and":{}}`, "$", "takes a list"},
		{`{"and":[],"or":[]}`, "$", `found also "or"`},
		{`{"not":[]}`, "$.not", "a JSON object"},
		{`{"and":[{"field":"a","op":"exists"},{"or":[{"field":"b","op":"eqq","value":1}]}]}`, "$.and[1].or[0]", `"eqq"`},
		{`{"not":{"not":{"field":"a","op":"gt","value":true,"extra":1}}}`, "$.not.not", `unknown key "extra"`},
		{deep, strings.Repeat(".not", query.MaxCondDepth), "nest more than 64 levels"},
		{many, "$.and[1023]", "more than 1024 conditions"},
		{`"` + strings.Repeat("x", query.MaxCondBytes) + `"`, "$", "bytes of JSON"},
	} {
		var c query.Cond
		err := c.UnmarshalJSON([]byte(tc.in))
		var pe *query.ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%.60s: %v, want a *ParseError", tc.in, err)
			continue
		}
		node := tc.node
		if !strings.HasPrefix(node, "$") {
			node = "$" + node
		}
		if pe.Node != node || !strings.Contains(pe.Reason, tc.reason) {
			t.Errorf("%.60s:\n got at %s: %s\nwant at %s: ...%s...", tc.in, pe.Node, pe.Reason, node, tc.reason)
		}
		if !errors.Is(err, query.ErrInvalidQuery) || !strings.HasPrefix(err.Error(), "storh: invalid query: condition at "+node+": ") {
			t.Errorf("%.60s: %q does not wrap ErrInvalidQuery or name its node", tc.in, err)
		}
	}
	var c query.Cond
	if err := c.UnmarshalJSON([]byte(`{`)); !errors.Is(err, jsonl.ErrSyntax) {
		t.Errorf("syntax error %v does not wrap jsonl.ErrSyntax", err)
	}
}

// checkJSONRoundTrip checks that c's JSON reads back as an equal
// condition, and that so does its text.
func checkJSONRoundTrip(t *testing.T, c query.Cond) {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatalf("%s: MarshalJSON: %v", c, err)
	}
	var again query.Cond
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatalf("%s: its JSON %s does not read back: %v", c, b, err)
	}
	if !query.Equal(again, c) {
		t.Fatalf("%s: its JSON %s reads back as %s", c, b, again)
	}
}

// FuzzCondJSON checks that any bytes give a usable condition or a
// *ParseError, never a panic, and that a condition read from JSON writes
// JSON, and text, that read back as an equal condition.
func FuzzCondJSON(f *testing.F) {
	for _, s := range []string{
		`{"field":"a.b","op":"eq","value":1}`,
		`{"path":["a.b","c"],"op":"between","value":[1,{"$numberDouble":"NaN"}]}`,
		`{"and":[{"field":"a","op":"in","value":[1,"x",null]},{"not":{"field":"b","op":"missing"}}]}`,
		`{"or":[{"field":"t","op":"gte","value":{"$date":"2024-05-01T12:00:00Z"}},{"field":"p","op":"prefix","value":""}]}`,
		`{"field":"a","op":"contains","value":{"$oid":"5f1a2b3c4d5e6f7a8b9c0d1e"}}`,
		`{"not":{"not":{"not":{}}}}`,
		`[`,
		`{"field":"items","op":"elemMatch","cond":{"field":"sku","op":"eq","value":"X"}}`,
		`{"field":"items","op":"elemMatch","value":1}`,
		`{"field":"items","op":"eq","value":1,"cond":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c query.Cond
		if err := c.UnmarshalJSON(b); err != nil {
			var pe *query.ParseError
			if !errors.As(err, &pe) || !errors.Is(err, query.ErrInvalidQuery) {
				t.Fatalf("%q: %v is not a *ParseError", b, err)
			}
			return
		}
		if err := query.All().Where(c).Validate(); err != nil {
			t.Fatalf("%q read as a condition that does not run: %v", b, err)
		}
		checkJSONRoundTrip(t, c)
		if s := c.String(); !strings.HasSuffix(s, "()") {
			again, err := query.Parse(s)
			if err != nil || !query.Equal(again, c) {
				t.Fatalf("%q: text %q parses as %s, %v", b, s, again, err)
			}
		}
	})
}

// TestQueryJSON checks that a whole query travels as one JSON value: what
// reads back is the same query, by its String and by what it compiles to.
func TestQueryJSON(t *testing.T) {
	id := uuidv7.MustParse("018bcfe5-6800-7abc-8def-0123456789ab")
	day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, q := range []query.Query{
		query.All(),
		query.All().Reverse().Limit(10),
		query.All().After(id).Before(id).TimeRangeMs(-5, math.MaxInt64).RequireIndex(),
		query.All().Where(query.Field("level").Eq("error")).Where(query.Or(query.Field("n").Gte(5), query.FieldPath("a.b").Missing())).
			OrderBy("at", query.Desc).AfterValue(day, id).BeforeValue(day.Add(time.Hour), id).Limit(3),
		query.All().OrderByField(query.FieldPath("a.b", "c"), query.Asc).After(id),
	} {
		b, err := json.Marshal(q)
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		var got query.Query
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("%s: its JSON %s does not read back: %v", q, b, err)
			continue
		}
		if got.String() != q.String() {
			t.Errorf("JSON %s\n reads as %s\n     want %s", b, got, q)
		}
	}
	if _, err := json.Marshal(query.All().Limit(0)); !errors.Is(err, query.ErrInvalidQuery) {
		t.Errorf("a query that cannot run marshalled: %v", err)
	}
	for _, tc := range []struct{ in, msg string }{
		{`[]`, "a query is a JSON object"},
		{`{"limit":0}`, "limit must be at least 1"},
		{`{"limit":"5"}`, `condition at $.limit: "limit" is an integer`},
		{`{"from_ms":1}`, "together"},
		{`{"where":[{"field":"a","op":"eqq","value":1}]}`, `condition at $.where[0]: op "eqq"`},
		{`{"where":{"field":"a","op":"exists"}}`, "is a list of conditions"},
		{`{"order":{"path":["a"],"dir":"up"}}`, `unknown key "dir"`},
		{`{"order":{"path":[]}}`, "non-empty list"},
		{`{"after":{"id":"x"}}`, "condition at $.after.id"},
		{`{"after":{"id":"018bcfe5-6800-7abc-8def-0123456789ab","value":1}}`, "add OrderBy"},
		{`{"reverse":1}`, `"reverse" is true or false`},
		{`{"limt":5}`, `unknown key "limt"`},
	} {
		q := query.All().Limit(7)
		err := json.Unmarshal([]byte(tc.in), &q)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || !errors.Is(err, query.ErrInvalidQuery) {
			t.Errorf("%s: %v, want ErrInvalidQuery and %q", tc.in, err, tc.msg)
		}
		if q.String() != query.All().Limit(7).String() {
			t.Errorf("%s: the failed read changed the query to %s", tc.in, q)
		}
	}
}
