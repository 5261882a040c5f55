package plan_test

import (
	"slices"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/query"
)

func TestGroupCountAccess(t *testing.T) {
	defs := []plan.IndexDef{
		{Name: "status", Paths: [][]string{{"status"}}},
		{Name: "a,b", Paths: [][]string{{"a"}, {"b"}}},
		{Name: "items.sku", Paths: [][]string{{"items", "sku"}}, Fanned: []bool{true}},
		{Name: "n.x", Paths: [][]string{{"n", "x"}}, Fanned: []bool{false}},
	}
	for _, tc := range []struct {
		name    string
		q       query.Query
		groupBy []string
		index   string // "" for none; "-" for nothing to read
	}{
		{"no condition", query.All(), []string{"status"}, "status"},
		{"a time range: entries checked by id", query.All().TimeRangeMs(0, 5), []string{"status"}, "status"},
		{"equality on the index", query.All().Where(query.Field("status").Eq("paid")), []string{"status"}, "status"},
		{"range on the index", query.All().Where(query.Field("status").Gte("o")), []string{"status"}, "status"},
		{"contradiction", query.All().Where(query.Field("status").Eq("a"), query.Field("status").Eq("b")), []string{"status"}, "-"},
		{"compound, in order", query.All().Where(query.Field("a").Eq(1)), []string{"a", "b"}, "a,b"},
		{"unfanned dotted path", query.All(), []string{"n.x"}, "n.x"},
		{"null: the null entries hold missing fields too", query.All().Where(query.Field("status").Eq(nil)), []string{"status"}, ""},
		{"a condition on another field", query.All().Where(query.Field("other").Eq(1)), []string{"status"}, ""},
		{"a prefix: a range of keys", query.All().Where(query.Field("status").Prefix("p")), []string{"status"}, "status"},
		{"Not", query.All().Where(query.Not(query.Field("status").Eq("paid"))), []string{"status"}, ""},
		{"compound, other order", query.All(), []string{"b", "a"}, ""},
		{"part of a compound index", query.All(), []string{"a"}, ""},
		{"fanned: an entry per list value", query.All(), []string{"items.sku"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, a, err := plan.CompileAgg(tc.q, tc.groupBy, []query.Agg{query.Count("n")})
			if err != nil {
				t.Fatal(err)
			}
			acc, ok := plan.GroupCountAccess(spec, defs, a.GroupBy)
			switch {
			case tc.index == "":
				if ok {
					t.Fatalf("served by %+v", acc)
				}
			case tc.index == "-":
				if !ok || acc.Kind != plan.AccessNone {
					t.Fatalf("got %+v, %v; want nothing read", acc, ok)
				}
			default:
				if !ok || acc.Kind != plan.AccessIndex || defs[acc.Scans[0].Index].Name != tc.index {
					t.Fatalf("got %+v, %v; want index %s", acc, ok, tc.index)
				}
			}
		})
	}
}

func TestEndsIndexes(t *testing.T) {
	defs := []plan.IndexDef{
		{Name: "a,b", Paths: [][]string{{"a"}, {"b"}}},
		{Name: "b", Paths: [][]string{{"b"}}},
		{Name: "items.q", Paths: [][]string{{"items", "q"}}, Fanned: []bool{true}},
	}
	for _, tc := range []struct {
		name    string
		q       query.Query
		groupBy []string
		aggs    []query.Agg
		want    []string // nil: not served
	}{
		{"min and max", query.All(), nil, []query.Agg{query.Min("lo", "a"), query.Max("hi", "b")}, []string{"a,b", "b"}},
		{"grouped", query.All(), []string{"b"}, []query.Agg{query.Min("lo", "a")}, nil},
		{"a condition", query.All().Where(query.Field("a").Gt(1)), nil, []query.Agg{query.Min("lo", "a")}, nil},
		{"an id bound", query.All().TimeRangeMs(0, 10), nil, []query.Agg{query.Max("hi", "a")}, nil},
		{"with a count", query.All(), nil, []query.Agg{query.Min("lo", "a"), query.Count("n")}, nil},
		{"not a first path", query.All(), nil, []query.Agg{query.Min("lo", "c")}, nil},
		{"fanned", query.All(), nil, []query.Agg{query.Max("hi", "items.q")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, a, err := plan.CompileAgg(tc.q, tc.groupBy, tc.aggs)
			if err != nil {
				t.Fatal(err)
			}
			at, ok := plan.EndsIndexes(spec, defs, a)
			var got []string
			for _, i := range at {
				got = append(got, defs[i].Name)
			}
			if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, ok, tc.want)
			}
		})
	}
}
