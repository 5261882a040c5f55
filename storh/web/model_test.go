package web_test

import (
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The query model test: random conditions are built twice, once with the
// query package and once as their JSON form; the first runs straight
// through storh, the second through the handler, paged, and both must
// select the same ids in the same order. A condition the query package
// refuses must get 400.

var (
	qmFields = [][]string{{"score"}, {"kind"}, {"ratio"}, {"tags"}, {"slug"}, {"author", "name"}, {"author"}, {"none"}}
	qmValues = []any{
		int64(0), int64(3), int64(7), int64(-1), int64(math.MaxInt64), uint64(math.MaxUint64), 3.0, 2.5, 0.25, math.Inf(1),
		"post", "page", "note", "all", "p00", "p010", "a0", "", "zzz",
		true, false, nil, []byte("x"), time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC),
		[]any{"page", "all"}, map[string]any{"name": "a0"},
	}
	qmStrings = []string{"", "p", "p0", "p01", "a", "x"}
)

// genCond draws a condition: the query package's, and its JSON.
func genCond(t *rapid.T, depth int) (query.Cond, string) {
	kind := rapid.IntRange(0, 9).Draw(t, "node")
	if depth < 3 && kind >= 8 {
		switch rapid.IntRange(0, 2).Draw(t, "combinator") {
		case 0:
			c, js := genCond(t, depth+1)
			return query.Not(c), `{"not":` + js + `}`
		default:
			n := rapid.IntRange(0, 3).Draw(t, "kids")
			conds := make([]query.Cond, n)
			texts := make([]string, n)
			for i := range n {
				conds[i], texts[i] = genCond(t, depth+1)
			}
			if kind == 8 {
				return query.And(conds...), `{"and":[` + strings.Join(texts, ",") + `]}`
			}
			return query.Or(conds...), `{"or":[` + strings.Join(texts, ",") + `]}`
		}
	}
	segs := rapid.SampledFrom(qmFields).Draw(t, "field")
	f, fjs := query.Field(strings.Join(segs, ".")), `"field":`+quote(strings.Join(segs, "."))
	if rapid.Bool().Draw(t, "as path") {
		f, fjs = query.FieldPath(segs...), `"path":`+jsonOf(t, toAny(segs))
	}
	val := func(label string) any { return rapid.SampledFrom(qmValues).Draw(t, label) }
	leaf := func(op string, v any) string {
		return `{` + fjs + `,"op":"` + op + `","value":` + jsonOf(t, v) + `}`
	}
	switch op := rapid.SampledFrom([]string{"eq", "neq", "in", "nin", "gt", "gte", "lt", "lte", "between", "exists", "missing", "prefix", "contains"}).Draw(t, "op"); op {
	case "eq":
		v := val("value")
		return f.Eq(v), leaf(op, v)
	case "neq":
		v := val("value")
		return f.Neq(v), leaf(op, v)
	case "contains":
		v := val("value")
		return f.Contains(v), leaf(op, v)
	case "in", "nin":
		vs := make([]any, rapid.IntRange(0, 3).Draw(t, "values"))
		for i := range vs {
			vs[i] = val("value")
		}
		if op == "in" {
			return f.In(vs...), leaf(op, vs)
		}
		return f.NotIn(vs...), leaf(op, vs)
	case "gt":
		v := val("bound")
		return f.Gt(v), leaf(op, v)
	case "gte":
		v := val("bound")
		return f.Gte(v), leaf(op, v)
	case "lt":
		v := val("bound")
		return f.Lt(v), leaf(op, v)
	case "lte":
		v := val("bound")
		return f.Lte(v), leaf(op, v)
	case "between":
		lo, hi := val("lo"), val("hi")
		return f.Between(lo, hi), leaf(op, []any{lo, hi})
	case "exists":
		return f.Exists(), `{` + fjs + `,"op":"exists"}`
	case "missing":
		return f.Missing(), `{` + fjs + `,"op":"missing"}`
	default:
		s := rapid.SampledFrom(qmStrings).Draw(t, "prefix")
		return f.Prefix(s), leaf(op, s)
	}
}

func jsonOf(t *rapid.T, v any) string {
	b, err := jsonl.AppendValue(nil, v)
	if err != nil {
		t.Fatalf("AppendValue(%#v): %v", v, err)
	}
	return string(b)
}

func quote(s string) string { return strconv.Quote(s) }

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func TestQueryModel(t *testing.T) {
	f := newFixture(t, 40, 0)
	c := f.serve(t)
	rapid.Check(t, func(rt *rapid.T) {
		cond, js := genCond(rt, 0)
		q := query.All().Where(cond)
		params := url.Values{"q": {js}}
		if rapid.Bool().Draw(rt, "ordered") {
			segs := rapid.SampledFrom(qmFields).Draw(rt, "order field")
			dir, sign := query.Asc, ""
			if rapid.Bool().Draw(rt, "desc") {
				dir, sign = query.Desc, "-"
			}
			q = q.OrderByField(query.FieldPath(segs...), dir)
			params.Set("order", sign+jsonOf(rt, toAny(segs)))
		}
		newest := rapid.Bool().Draw(rt, "newest")
		if newest {
			q = q.Reverse()
			params.Set("newest", "1")
		}
		limit := rapid.IntRange(1, 50).Draw(rt, "limit")
		params.Set("limit", strconv.Itoa(limit))

		if err := q.Validate(); err != nil {
			r := c.get("api/collections/posts/records?" + params.Encode())
			if r.status != 400 {
				rt.Fatalf("q=%s: storh refuses it (%v), the handler gives %d %s", js, err, r.status, r.body)
			}
			return
		}
		want := ids(t, f.posts, q)
		var got []uuidv7.UUID
		for pages := 0; ; pages++ {
			r := c.get("api/collections/posts/records?" + params.Encode())
			if r.status != 200 {
				rt.Fatalf("q=%s: %d %s", js, r.status, r.body)
			}
			var p pageJSON
			r.decode(t, &p)
			if len(p.Records) > limit || pages > len(want) {
				rt.Fatalf("q=%s: page of %d, limit %d, page %d", js, len(p.Records), limit, pages)
			}
			got = append(got, p.ids(t)...)
			if p.Next == "" {
				break
			}
			if newest {
				params.Set("before", p.Next)
			} else {
				params.Set("after", p.Next)
			}
		}
		if !slices.Equal(got, want) {
			rt.Fatalf("q=%s order=%s newest=%v:\nhandler %v\nstorh   %v", js, params.Get("order"), newest, got, want)
		}
	})
}
