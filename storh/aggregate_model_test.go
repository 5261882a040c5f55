package storh_test

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/order"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The aggregation model test: random records (the query model's: numbers
// at the edges, strings, missing fields, lists of objects), random
// selections (the query model's conditions, time ranges), group-by paths and
// aggregates, on a collection without indexes and on one with a random set
// of them. Both must give exactly what a reference computes from a full
// Find of all records: the selection by the query model's evaluator, the
// groups and the aggregates from the definitions in docs/queries.md,
// restated here over decoded values (exact sums in math/big, the total
// order by order.Compare, its reference definition). Every plan, index-only
// ones included, must agree with it.

var amPaths = []string{"a", "b", "c", "n", "n.x", "tags", "items", "items.sku", "items.qty", "zz"}

var amIndexPool = []mIndex{
	{name: "a", paths: []string{"a"}},
	{name: "b", paths: []string{"b"}},
	{name: "c", paths: []string{"c"}},
	{name: "n.x", paths: []string{"n.x"}},
	{name: "tags", paths: []string{"tags"}},
	{name: "a,b", paths: []string{"a", "b"}},
	{name: "b,a", paths: []string{"b", "a"}},
	{name: "items.sku", paths: []string{"items.sku"}},
	{name: "items.qty,b", paths: []string{"items.qty", "b"}},
}

type amAgg struct {
	kind, name, path string
}

func (a amAgg) build() query.Agg {
	switch a.kind {
	case "count":
		return query.Count(a.name)
	case "sum":
		return query.Sum(a.name, a.path)
	case "avg":
		return query.Avg(a.name, a.path)
	case "min":
		return query.Min(a.name, a.path)
	}
	return query.Max(a.name, a.path)
}

func TestAggregateModel(t *testing.T) {
	// Both index layouts: a key per entry (PostgreSQL's, and a file's when
	// forced), and a file's blocks with their journal, folded often.
	layouts := []string{"layout=keys"}
	if !onPostgres {
		layouts = append(layouts, "layout=blocks,block=128,foldmin=4,foldmax=16")
	}
	for _, layout := range layouts {
		t.Run(layout, func(t *testing.T) {
			tuneFor(t, layout)
			db := openTemp(t)
			run, indexOnly := 0, 0
			rapid.Check(t, func(t *rapid.T) {
				run++
				indexOnly += aggregateModelRun(t, db, run)
			})
			// The index-only plans must have been among those checked.
			if run >= 100 && indexOnly == 0 {
				t.Fatalf("%d runs, no aggregate read index entries alone", run)
			}
			t.Logf("%d runs, %d aggregates answered without a record", run, indexOnly)
		})
	}
}

// aggregateModelRun checks one random collection, returning how many of
// its aggregates read no record although some were selected.
func aggregateModelRun(t *rapid.T, db *storh.DB, run int) (indexOnly int) {
	var declared []storh.CollectionOption
	var ixs []mIndex
	for _, ix := range amIndexPool {
		if rapid.IntRange(0, 2).Draw(t, "declare "+ix.name) == 0 {
			declared = append(declared, storh.WithIndex(ix.spec()))
			ixs = append(ixs, ix)
		}
	}
	plain, err := db.Docs(fmt.Sprint("plain", run))
	if err != nil {
		t.Fatal(err)
	}
	indexed, err := db.Docs(fmt.Sprint("indexed", run), declared...)
	if err != nil {
		t.Fatal(err)
	}
	model := map[uuidv7.UUID]map[string]any{}
	s := &qmState{model: model}
	for range rapid.IntRange(0, 25).Draw(t, "records") {
		rec := qmRecord(t)
		id := s.mint(t)
		if _, err := plain.PutWithID(id, rec); err != nil {
			t.Fatal(err)
		}
		if _, err := indexed.PutWithID(id, rec); err != nil {
			t.Fatal(err)
		}
		model[id] = rec
	}
	all, err := plain.Find(query.All())
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		q := query.All()
		var cond *mCond
		var fromMs, untilMs int64 = math.MinInt64, math.MaxInt64
		var groupBy []string
		var aggs []amAgg
		// Besides random shapes, the shapes index-only plans serve: a count
		// grouped by an index's paths, filtered on its first path or not,
		// and Min and Max of an index's first path over everything.
		shape := rapid.IntRange(0, 3).Draw(t, "shape")
		if len(ixs) == 0 {
			shape = 0
		}
		switch shape {
		case 1:
			ix := rapid.SampledFrom(ixs).Draw(t, "group by index")
			groupBy = ix.paths
			for i := range rapid.IntRange(1, 2).Draw(t, "counts") {
				aggs = append(aggs, amAgg{kind: "count", name: fmt.Sprint("n", i)})
			}
			if rapid.Bool().Draw(t, "filter on the index") {
				path := strings.Split(ix.paths[0], ".")
				cond = &mCond{op: rapid.SampledFrom([]string{"eq", "in", "gte", "lt", "between"}).Draw(t, "index op"), path: path, dotted: true}
				switch cond.op {
				case "eq":
					cond.vals = []any{s.drawValue(t, path)}
				case "in":
					cond.vals = []any{s.drawValue(t, path), s.drawValue(t, path)}
				case "between":
					cond.vals = []any{s.drawBound(t, path), s.drawBound(t, path)}
				default:
					cond.vals = []any{s.drawBound(t, path)}
				}
				cond.widen = cond.vals
			}
		case 2:
			ix := rapid.SampledFrom(ixs).Draw(t, "ends of index")
			for i := range rapid.IntRange(1, 2).Draw(t, "ends") {
				aggs = append(aggs, amAgg{kind: rapid.SampledFrom([]string{"min", "max"}).Draw(t, "end"), name: fmt.Sprint("e", i), path: ix.paths[0]})
			}
		default:
			if rapid.Bool().Draw(t, "where") {
				cond = s.drawCond(t, 0, nil)
			}
			if rapid.IntRange(0, 3).Draw(t, "time range") == 0 {
				fromMs = qmBaseMs + rapid.Int64Range(-1, 5).Draw(t, "from")
				untilMs = qmBaseMs + rapid.Int64Range(-1, 5).Draw(t, "until")
				q = q.TimeRangeMs(fromMs, untilMs)
			}
			for range rapid.IntRange(0, 2).Draw(t, "group-by paths") {
				groupBy = append(groupBy, rapid.SampledFrom(amPaths).Draw(t, "group by"))
			}
			for i := range rapid.IntRange(1, 4).Draw(t, "aggregates") {
				a := amAgg{kind: rapid.SampledFrom([]string{"count", "count", "sum", "avg", "min", "max"}).Draw(t, "kind"), name: fmt.Sprint("v", i)}
				if a.kind != "count" {
					a.path = rapid.SampledFrom(amPaths).Draw(t, "agg path")
				}
				aggs = append(aggs, a)
			}
		}
		if cond != nil {
			q = q.Where(cond.build())
		}
		built := make([]query.Agg, len(aggs))
		for i, a := range aggs {
			built[i] = a.build()
		}

		invalid := cond != nil && cond.invalid()
		var selected []storh.Record
		for _, r := range all {
			if invalid {
				break
			}
			if ms := r.ID.Time().UnixMilli(); ms < fromMs || ms > untilMs {
				continue
			}
			if cond == nil || cond.eval(amData(r)) {
				selected = append(selected, r)
			}
		}
		want, wantErr := amReference(selected, groupBy, aggs)
		if invalid {
			want, wantErr = nil, storh.ErrInvalidQuery
		}
		for _, d := range []*storh.Docs{plain, indexed} {
			got, err := d.Aggregate(q, groupBy, built...)
			label := fmt.Sprintf("%s: %v group by %q %v", d.Name(), q, groupBy, built)
			if wantErr != nil {
				if !errors.Is(err, wantErr) {
					t.Fatalf("%s: got %v, %v; want %v", label, got, err, wantErr)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", label, err)
			}
			if !sameGroups(got, want) {
				t.Fatalf("%s:\ngot  %#v\nwant %#v", label, got, want)
			}
			p, err := d.ExplainAggregate(q, groupBy, built...)
			if err != nil || p.Returned != len(want) {
				t.Fatalf("%s: ExplainAggregate %v, %v", label, p, err)
			}
			if p.RecordsRead == 0 && len(selected) > 0 {
				indexOnly++
			}
		}
	}
	return indexOnly
}

// referenceAggregate is amReference over what Find(q) returns, for tests
// whose selection is not the point.
func referenceAggregate(t *testing.T, d *storh.Docs, q query.Query, groupBy []string, aggs []query.Agg) []storh.Group {
	t.Helper()
	recs, err := d.Find(q)
	if err != nil {
		t.Fatal(err)
	}
	var am []amAgg
	for _, a := range aggs {
		// Count("n"), Sum("s", "amount"): the kind and the quoted arguments.
		kind, args, _ := strings.Cut(strings.TrimSuffix(a.String(), ")"), "(")
		var name, path string
		if _, err := fmt.Sscanf(strings.ReplaceAll(args, ",", " "), "%q %q", &name, &path); err != nil && kind != "Count" {
			t.Fatalf("%s: %v", a, err)
		}
		if kind == "Count" {
			fmt.Sscanf(args, "%q", &name)
		}
		am = append(am, amAgg{kind: strings.ToLower(kind), name: name, path: path})
	}
	groups, err := amReference(recs, groupBy, am)
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

// amReference groups recs and computes aggs as the docs define them.
func amReference(recs []storh.Record, groupBy []string, aggs []amAgg) ([]storh.Group, error) {
	type refGroup struct {
		key  []any
		recs []map[string]any
	}
	var groups []*refGroup
	for _, r := range recs {
		rec := amData(r)
		key := make([]any, len(groupBy))
		for i, p := range groupBy {
			vals, fanned := qmReach(rec, strings.Split(p, "."))
			if fanned {
				return nil, storh.ErrInvalidQuery
			}
			if len(vals) > 0 {
				key[i] = vals[0]
			}
		}
		at := slices.IndexFunc(groups, func(g *refGroup) bool { return amCompareKeys(g.key, key) == 0 })
		if at < 0 {
			groups = append(groups, &refGroup{key: key})
			at = len(groups) - 1
		}
		groups[at].recs = append(groups[at].recs, rec)
	}
	slices.SortFunc(groups, func(a, b *refGroup) int { return amCompareKeys(a.key, b.key) })
	out := []storh.Group{}
	for _, g := range groups {
		values := map[string]any{}
		for _, a := range aggs {
			var reached []any
			for _, rec := range g.recs {
				if a.path != "" {
					vals, _ := qmReach(rec, strings.Split(a.path, "."))
					reached = append(reached, vals...)
				}
			}
			switch a.kind {
			case "count":
				values[a.name] = int64(len(g.recs))
			case "sum", "avg":
				v, err := amSum(reached, a.kind == "avg")
				if err != nil {
					return nil, err
				}
				values[a.name] = v
			default:
				var best any
				for _, v := range reached {
					if v == nil {
						continue
					}
					if c := order.Compare(v, best); best == nil || (a.kind == "min" && c < 0) || (a.kind == "max" && c > 0) {
						best = v
					}
				}
				values[a.name] = best
			}
		}
		out = append(out, storh.Group{Key: g.key, Values: values})
	}
	return out, nil
}

// amSum is Sum (or Avg) over the numbers among vals: an exact sum in
// math/big, an int64 while every number is an integer (else
// ErrInvalidQuery when it does not fit), otherwise the exact sum rounded
// once; Avg divides that by the count of numbers.
func amSum(vals []any, avg bool) (any, error) {
	exact := new(big.Rat)
	var n int64
	floats, nan, pinf, ninf := false, false, false, false
	for _, v := range vals {
		switch x := v.(type) {
		case int64:
			exact.Add(exact, new(big.Rat).SetInt64(x))
		case uint64:
			exact.Add(exact, new(big.Rat).SetInt(new(big.Int).SetUint64(x)))
		case float64:
			floats = true
			switch {
			case x != x:
				nan = true
			case math.IsInf(x, 1):
				pinf = true
			case math.IsInf(x, -1):
				ninf = true
			default:
				exact.Add(exact, new(big.Rat).SetFloat64(x))
			}
		default:
			continue
		}
		n++
	}
	if avg && n == 0 {
		return nil, nil
	}
	if !floats && !avg {
		if !exact.Num().IsInt64() {
			return nil, storh.ErrInvalidQuery
		}
		return exact.Num().Int64(), nil
	}
	var f float64
	switch {
	case nan || pinf && ninf:
		f = math.NaN()
	case pinf:
		f = math.Inf(1)
	case ninf:
		f = math.Inf(-1)
	default:
		f, _ = exact.Float64()
	}
	if avg {
		return f / float64(n), nil
	}
	return f, nil
}

// amData is the record's data with its empty lists and maps as the empty
// values they are stored as: Record.Data decodes them as nil slices and
// maps, which the order (as Go values) takes for null.
func amData(r storh.Record) map[string]any {
	return amEmpties(map[string]any(r.Data())).(map[string]any)
}

func amEmpties(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = amEmpties(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = amEmpties(e)
		}
		return out
	}
	return v
}

func amCompareKeys(a, b []any) int {
	for i := range a {
		if c := order.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// sameGroups compares groups by the total order's equality, which tells
// 1 from 1.0, and float results by value (NaN equal to NaN).
func sameGroups(got, want []storh.Group) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if len(got[i].Key) != len(want[i].Key) || amCompareKeys(got[i].Key, want[i].Key) != 0 || len(got[i].Values) != len(want[i].Values) {
			return false
		}
		for name, w := range want[i].Values {
			g, ok := got[i].Values[name]
			if !ok {
				return false
			}
			if gf, isFloat := g.(float64); isFloat {
				wf, ok := w.(float64)
				if !ok || gf != wf && !(gf != gf && wf != wf) {
					return false
				}
				continue
			}
			if (g == nil) != (w == nil) || g != nil && (order.Class(g) != order.Class(w) || order.Compare(g, w) != 0 || fmt.Sprintf("%T", g) != fmt.Sprintf("%T", w)) {
				return false
			}
		}
	}
	return true
}
