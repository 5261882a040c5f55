package storh_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
)

// aggOrders is a small shop: statuses, amounts of both number types, a
// string where a number belongs, missing fields and lists of items.
var aggOrders = []map[string]any{
	{"status": "paid", "amount": 10, "items": []any{map[string]any{"sku": "A", "qty": 1}, map[string]any{"sku": "B", "qty": 2}}},
	{"status": "paid", "amount": 2.5, "items": []any{map[string]any{"sku": "A", "qty": 3}}},
	{"status": "open", "amount": 7},
	{"status": "open", "amount": "n/a"},
	{"amount": 1},
	{"status": "void", "tags": []any{"x", "y"}},
}

func putAll(t *testing.T, d *storh.Docs, recs []map[string]any) {
	t.Helper()
	for _, r := range recs {
		if _, err := d.Put(r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAggregateRules(t *testing.T) {
	db := openTemp(t)
	plain, err := db.Docs("plain")
	if err != nil {
		t.Fatal(err)
	}
	indexed, err := db.Docs("indexed", storh.WithIndex(storh.Index("status")), storh.WithIndex(storh.Index("amount")))
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, plain, aggOrders)
	putAll(t, indexed, aggOrders)

	for _, tc := range []struct {
		name    string
		q       query.Query
		groupBy []string
		aggs    []query.Agg
		want    []storh.Group
	}{
		{"count per status, missing first", query.All(), []string{"status"}, []query.Agg{query.Count("n")}, []storh.Group{
			{Key: []any{nil}, Values: map[string]any{"n": int64(1)}},
			{Key: []any{"open"}, Values: map[string]any{"n": int64(2)}},
			{Key: []any{"paid"}, Values: map[string]any{"n": int64(2)}},
			{Key: []any{"void"}, Values: map[string]any{"n": int64(1)}},
		}},
		{"sum: int64 while all integers, else float64; strings skipped; none sums to 0", query.All(), []string{"status"}, []query.Agg{query.Sum("s", "amount")}, []storh.Group{
			{Key: []any{nil}, Values: map[string]any{"s": int64(1)}},
			{Key: []any{"open"}, Values: map[string]any{"s": int64(7)}},
			{Key: []any{"paid"}, Values: map[string]any{"s": 12.5}},
			{Key: []any{"void"}, Values: map[string]any{"s": int64(0)}},
		}},
		{"avg: float64, nil without a number", query.All(), []string{"status"}, []query.Agg{query.Avg("a", "amount")}, []storh.Group{
			{Key: []any{nil}, Values: map[string]any{"a": 1.0}},
			{Key: []any{"open"}, Values: map[string]any{"a": 7.0}},
			{Key: []any{"paid"}, Values: map[string]any{"a": 6.25}},
			{Key: []any{"void"}, Values: map[string]any{"a": nil}},
		}},
		{"min and max by the total order: numbers below strings", query.All(), nil, []query.Agg{query.Min("lo", "amount"), query.Max("hi", "amount"), query.Count("n")}, []storh.Group{
			{Key: []any{}, Values: map[string]any{"lo": int64(1), "hi": "n/a", "n": int64(6)}},
		}},
		{"min and max alone: nil when no value", query.All(), nil, []query.Agg{query.Min("lo", "nope"), query.Max("hi", "nope")}, []storh.Group{
			{Key: []any{}, Values: map[string]any{"lo": nil, "hi": nil}},
		}},
		{"a path through a list takes every value", query.All(), []string{"status"}, []query.Agg{query.Sum("qty", "items.qty"), query.Min("first", "items.sku"), query.Max("last", "items.sku")}, []storh.Group{
			{Key: []any{nil}, Values: map[string]any{"qty": int64(0), "first": nil, "last": nil}},
			{Key: []any{"open"}, Values: map[string]any{"qty": int64(0), "first": nil, "last": nil}},
			{Key: []any{"paid"}, Values: map[string]any{"qty": int64(6), "first": "A", "last": "B"}},
			{Key: []any{"void"}, Values: map[string]any{"qty": int64(0), "first": nil, "last": nil}},
		}},
		{"group by a whole list value", query.All().Where(query.Field("tags").Exists()), []string{"tags"}, []query.Agg{query.Count("n")}, []storh.Group{
			{Key: []any{[]any{"x", "y"}}, Values: map[string]any{"n": int64(1)}},
		}},
		{"a filter selects, on an indexed field too", query.All().Where(query.Field("status").In("open", "void")), []string{"status"}, []query.Agg{query.Count("n")}, []storh.Group{
			{Key: []any{"open"}, Values: map[string]any{"n": int64(2)}},
			{Key: []any{"void"}, Values: map[string]any{"n": int64(1)}},
		}},
		{"two group-by paths", query.All().Where(query.Field("status").Eq("paid")), []string{"status", "amount"}, []query.Agg{query.Count("n")}, []storh.Group{
			{Key: []any{"paid", 2.5}, Values: map[string]any{"n": int64(1)}},
			{Key: []any{"paid", int64(10)}, Values: map[string]any{"n": int64(1)}},
		}},
		{"nothing matches: no group, even ungrouped", query.All().Where(query.Field("status").Eq("gone")), nil, []query.Agg{query.Count("n")}, []storh.Group{}},
	} {
		for _, d := range []*storh.Docs{plain, indexed} {
			t.Run(tc.name+"/"+d.Name(), func(t *testing.T) {
				got, err := d.Aggregate(tc.q, tc.groupBy, tc.aggs...)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
					t.Fatalf("got  %v\nwant %v", got, tc.want)
				}
			})
		}
	}
}

func TestAggregateInvalid(t *testing.T) {
	db := openTemp(t)
	d, err := db.Docs("orders")
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, d, aggOrders)
	for _, tc := range []struct {
		name    string
		q       query.Query
		groupBy []string
		aggs    []query.Agg
	}{
		{"OrderBy", query.All().OrderBy("amount", query.Asc), nil, []query.Agg{query.Count("n")}},
		{"Limit", query.All().Limit(3), nil, []query.Agg{query.Count("n")}},
		{"no aggregate", query.All(), []string{"status"}, nil},
		{"duplicate names", query.All(), nil, []query.Agg{query.Count("n"), query.Sum("n", "amount")}},
		{"empty name", query.All(), nil, []query.Agg{query.Count("")}},
		{"empty path", query.All(), nil, []query.Agg{query.Sum("s", "")}},
		{"empty segment", query.All(), nil, []query.Agg{query.Max("m", "a..b")}},
		{"zero Agg", query.All(), nil, []query.Agg{{}}},
		{"empty group-by path", query.All(), []string{""}, []query.Agg{query.Count("n")}},
		{"zero query", query.Query{}, nil, []query.Agg{query.Count("n")}},
		{"group by a path through a list", query.All(), []string{"items.sku"}, []query.Agg{query.Count("n")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Aggregate(tc.q, tc.groupBy, tc.aggs...)
			if !errors.Is(err, storh.ErrInvalidQuery) {
				t.Fatalf("got %v, want ErrInvalidQuery", err)
			}
			var se *storh.Error
			if !errors.As(err, &se) || se.Op != "aggregate" || se.Collection != "orders" {
				t.Fatalf("error %v does not name its op and collection", err)
			}
		})
	}
}

func TestAggregateSumOverflow(t *testing.T) {
	db := openTemp(t)
	d, err := db.Docs("n")
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, d, []map[string]any{{"g": "over", "v": int64(math.MaxInt64)}, {"g": "over", "v": 1},
		{"g": "back", "v": int64(math.MaxInt64)}, {"g": "back", "v": 1}, {"g": "back", "v": -2},
		{"g": "under", "v": int64(math.MinInt64)}, {"g": "under", "v": -1},
		{"g": "big", "v": uint64(math.MaxUint64)}, {"g": "big", "v": int64(math.MinInt64)},
		{"g": "float", "v": int64(math.MaxInt64)}, {"g": "float", "v": int64(math.MaxInt64)}, {"g": "float", "v": 0.5}})
	sum := func(g string) (any, error) {
		groups, err := d.Aggregate(query.All().Where(query.Field("g").Eq(g)), nil, query.Sum("s", "v"))
		if err != nil {
			return nil, err
		}
		return groups[0].Values["s"], nil
	}
	for _, g := range []string{"over", "under"} {
		if v, err := sum(g); !errors.Is(err, storh.ErrInvalidQuery) {
			t.Errorf("%s: got %v, %v; want ErrInvalidQuery", g, v, err)
		}
	}
	// Whether a sum fits is decided on the total, not on the way there.
	for g, want := range map[string]any{"back": int64(math.MaxInt64 - 1), "big": int64(math.MaxInt64), "float": 0x1p64} {
		if v, err := sum(g); err != nil || v != want {
			t.Errorf("%s: got %v (%T), %v; want %v", g, v, v, err, want)
		}
	}
}

// A float sum is exact, rounded once: the order the records are read in
// (by id, or through an index) cannot change it.
func TestAggregateFloatSumIsExact(t *testing.T) {
	db := openTemp(t)
	d, err := db.Docs("f", storh.WithIndex(storh.Index("k")))
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, d, []map[string]any{{"k": 3, "v": 1e16}, {"k": 1, "v": 1.0}, {"k": 2, "v": -1e16}, {"k": 0, "v": 1.0}})
	for _, q := range []query.Query{query.All(), query.All().Where(query.Field("k").Gte(0))} {
		groups, err := d.Aggregate(q, nil, query.Sum("s", "v"), query.Avg("a", "v"))
		if err != nil {
			t.Fatal(err)
		}
		if s, a := groups[0].Values["s"], groups[0].Values["a"]; s != 2.0 || a != 0.5 {
			t.Fatalf("%v: sum %v avg %v, want 2 and 0.5", q, s, a)
		}
	}
}

func TestAggregateLogTypedAndTx(t *testing.T) {
	db := openTemp(t)
	l, err := db.Log("events")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"a", "b", "a"} {
		if _, err := l.Put(map[string]any{"kind": kind}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.Aggregate(query.All(), []string{"kind"}, query.Count("n"))
	want := []storh.Group{{Key: []any{"a"}, Values: map[string]any{"n": int64(2)}}, {Key: []any{"b"}, Values: map[string]any{"n": int64(1)}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("log: %v, %v", got, err)
	}
	if _, err := l.Aggregate(query.All().Limit(1), nil, query.Count("n")); !errors.Is(err, storh.ErrInvalidQuery) {
		t.Fatalf("log with Limit: %v", err)
	}

	type order struct {
		Status string `msgpack:"status"`
		Amount int    `msgpack:"amount"`
	}
	td, err := storh.DocsOf[order](db, "typed", storh.WithIndex(storh.Index("status")))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []order{{"paid", 3}, {"open", 4}, {"paid", 5}} {
		if _, err := td.Put(o); err != nil {
			t.Fatal(err)
		}
	}
	got, err = td.Aggregate(query.All(), []string{"status"}, query.Sum("total", "amount"))
	want = []storh.Group{{Key: []any{"open"}, Values: map[string]any{"total": int64(4)}}, {Key: []any{"paid"}, Values: map[string]any{"total": int64(8)}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("typed: %v, %v", got, err)
	}

	// Inside a transaction the aggregate sees the transaction's own writes.
	err = db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("typed")
		if err != nil {
			return err
		}
		if _, err := d.Put(map[string]any{"status": "open", "amount": 10}); err != nil {
			return err
		}
		got, err := d.Aggregate(query.All(), []string{"status"}, query.Count("n"))
		want := []storh.Group{{Key: []any{"open"}, Values: map[string]any{"n": int64(2)}}, {Key: []any{"paid"}, Values: map[string]any{"n": int64(2)}}}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("in Update: %v, %v", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The index-only plans read no record, and give what a scan gives.
func TestExplainAggregateIndexOnly(t *testing.T) {
	db := openTemp(t)
	d, err := db.Docs("o", storh.WithIndex(storh.Index("status")), storh.WithIndex(storh.Index("amount")))
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, d, aggOrders)
	for _, tc := range []struct {
		name    string
		q       query.Query
		groupBy []string
		aggs    []query.Agg
		index   string
		records bool
	}{
		{"grouped count", query.All(), []string{"status"}, []query.Agg{query.Count("n"), query.Count("m")}, "status", false},
		{"grouped count, filtered on the index", query.All().Where(query.Field("status").In("open", "paid")), []string{"status"}, []query.Agg{query.Count("n")}, "status", false},
		{"grouped count, filtered by range", query.All().Where(query.Field("status").Gte("p")), []string{"status"}, []query.Agg{query.Count("n")}, "status", false},
		{"ungrouped count, filtered on the index", query.All().Where(query.Field("status").Eq("paid")), nil, []query.Agg{query.Count("n")}, "status", false},
		{"ungrouped count that matches nothing", query.All().Where(query.Field("status").Eq("gone")), nil, []query.Agg{query.Count("n")}, "status", false},
		{"min and max from the ends", query.All(), nil, []query.Agg{query.Min("lo", "amount"), query.Max("hi", "amount")}, "amount", false},
		{"grouped count filtered on another field reads records", query.All().Where(query.Field("amount").Gt(1)), []string{"status"}, []query.Agg{query.Count("n")}, "amount", true},
		{"sum reads records", query.All(), []string{"status"}, []query.Agg{query.Sum("s", "amount")}, "", true},
		{"min with a filter reads records", query.All().Where(query.Field("status").Eq("paid")), nil, []query.Agg{query.Min("lo", "amount")}, "status", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := d.ExplainAggregate(tc.q, tc.groupBy, tc.aggs...)
			if err != nil {
				t.Fatal(err)
			}
			if (p.RecordsRead > 0) != tc.records || tc.index != "" && !reflect.DeepEqual(p.Indexes, []string{tc.index}) {
				t.Fatalf("plan %v", p)
			}
			got, err := d.Aggregate(tc.q, tc.groupBy, tc.aggs...)
			if err != nil {
				t.Fatal(err)
			}
			if p.Returned != len(got) {
				t.Fatalf("plan returned %d, Aggregate %d groups", p.Returned, len(got))
			}
			want := referenceAggregate(t, d, tc.q, tc.groupBy, tc.aggs)
			if !sameGroups(got, want) {
				t.Fatalf("got  %v\nwant %v", got, want)
			}
		})
	}
}

// An aggregate allocates per group and per chunk of records, never per
// record: reading the paths out of each record's bytes decodes nothing.
// Four times the records cost at most a few allocations per chunk more.
func TestAggregateAllocatesPerChunkNotPerRecord(t *testing.T) {
	fileOnly(t) // the PostgreSQL driver allocates per row it reads
	db := openTemp(t)
	aggs := []query.Agg{query.Count("n"), query.Sum("s", "v"), query.Avg("a", "f"), query.Max("m", "items.q")}
	allocs := map[int]float64{}
	for _, n := range []int{1000, 4000} {
		d, err := db.Docs(fmt.Sprint("c", n))
		if err != nil {
			t.Fatal(err)
		}
		recs := make([]any, n)
		for i := range recs {
			recs[i] = map[string]any{"g": fmt.Sprint("g", i%4), "v": i, "f": 0.5, "items": []any{map[string]any{"q": i}}}
		}
		if _, err := d.PutMany(recs); err != nil {
			t.Fatal(err)
		}
		allocs[n] = testing.AllocsPerRun(5, func() {
			if _, err := d.Aggregate(query.All(), []string{"g"}, aggs...); err != nil {
				t.Fatal(err)
			}
		})
	}
	if extra := allocs[4000] - allocs[1000]; extra > 200 {
		t.Fatalf("3000 more records cost %.0f more allocations (%v): some are per record", extra, allocs)
	}
}

// AggregateContext stops between chunks of records, and of index keys, with
// an error wrapping ctx.Err(), and leaves no transaction open.
func TestAggregateContextCancelled(t *testing.T) {
	db := openTemp(t)
	d, err := db.Docs("c", storh.WithIndex(storh.Index("g")))
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]any, 10_000)
	for i := range recs {
		recs[i] = map[string]any{"g": i % 3, "v": i}
	}
	if _, err := d.PutMany(recs); err != nil {
		t.Fatal(err)
	}
	for name, aggs := range map[string][]query.Agg{
		"records":    {query.Sum("s", "v")},
		"index keys": {query.Count("n")},
	} {
		// The first check is before the read; the third is inside it.
		if _, err := d.AggregateContext(cancelAfter(2), query.All(), []string{"g"}, aggs...); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v; want an error wrapping context.Canceled", name, err)
		}
		if _, err := d.ExplainAggregateContext(cancelAfter(0), query.All(), []string{"g"}, aggs...); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: ExplainAggregateContext: %v", name, err)
		}
	}
	typedDocs, err := storh.DocsOf[struct {
		G int `msgpack:"g"`
	}](db, "c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := typedDocs.ExplainAggregateContext(cancelAfter(0), query.All(), []string{"g"}, query.Count("n")); !errors.Is(err, context.Canceled) {
		t.Errorf("typed ExplainAggregateContext: %v", err)
	}
	if _, err := d.Put(map[string]any{"g": 0}); err != nil {
		t.Fatal(err) // a transaction left open would block or fail the write on some backends
	}
	groups, err := d.AggregateContext(context.Background(), query.All(), []string{"g"}, query.Count("n"))
	if err != nil || len(groups) != 3 || groups[0].Values["n"] != int64(3335) {
		t.Fatalf("with a live context: %v, %v", groups, err)
	}
}
