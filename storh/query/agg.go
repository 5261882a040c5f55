package query

import (
	"fmt"

	"github.com/storhdb/storh-go/storh/internal/plan"
)

// Agg is one aggregate of an Aggregate call: a named result computed over
// the records of each group. Make one with Count, Sum, Avg, Min or Max; the
// zero Agg is invalid.
type Agg struct {
	kind plan.AggKind
	name string
	path FieldRef
	text string // the path as written
}

// Count counts the records of each group.
func Count(name string) Agg { return Agg{kind: plan.AggCount, name: name} }

// Sum adds the numbers at path (a dotted path, as Field) over each group's
// records. It is an int64 while every value summed is an integer, and an
// integer sum outside int64's range fails the aggregation with
// ErrInvalidQuery rather than wrap; once a float is among them it is a
// float64, the exact sum rounded once, so it does not depend on the order
// the records are read in. Values that are not numbers, and missing
// fields, are skipped; a group with no number sums to int64(0). A path
// through a list adds every value it reaches.
func Sum(name, path string) Agg { return pathAgg(plan.AggSum, name, path) }

// Avg is the mean of the numbers at path, as a float64 (the exact sum,
// rounded once, over the count of numbers); nil when the group has no
// number there. Non-numbers and missing fields are skipped, as by Sum.
func Avg(name, path string) Agg { return pathAgg(plan.AggAvg, name, path) }

// Min is the least value at path over each group's records, in the total
// order OrderBy sorts by (numbers below strings, and so on); nil when no
// record has a value there. Missing fields and nulls are skipped (null is
// the least value of the order, so a null could only ever be the answer
// when there is no other). A path through a list takes every value it
// reaches.
func Min(name, path string) Agg { return pathAgg(plan.AggMin, name, path) }

// Max is Min's mirror: the greatest value at path.
func Max(name, path string) Agg { return pathAgg(plan.AggMax, name, path) }

func pathAgg(kind plan.AggKind, name, path string) Agg {
	return Agg{kind: kind, name: name, path: Field(path), text: path}
}

// Name returns the name the aggregate's result has in a group.
func (a Agg) Name() string { return a.name }

// String writes the aggregate as it is made: Count("n"), Sum("total", "amount").
func (a Agg) String() string {
	var fn string
	switch a.kind {
	case plan.AggCount:
		return fmt.Sprintf("Count(%q)", a.name)
	case plan.AggSum:
		fn = "Sum"
	case plan.AggAvg:
		fn = "Avg"
	case plan.AggMin:
		fn = "Min"
	case plan.AggMax:
		fn = "Max"
	default:
		return "Agg{}"
	}
	return fmt.Sprintf("%s(%q, %q)", fn, a.name, a.text)
}

func init() { plan.CompileAgg = compileAgg }

// compileAgg checks an aggregation and compiles it with the query that
// selects its records.
func compileAgg(qv any, groupBy []string, aggsv any) (*plan.Spec, *plan.AggSpec, error) {
	q, ok := qv.(Query)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %T is not a query.Query", ErrInvalidQuery, qv)
	}
	aggs, ok := aggsv.([]Agg)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %T is not a []query.Agg", ErrInvalidQuery, aggsv)
	}
	spec, err := q.compile()
	if err != nil {
		return nil, nil, err
	}
	switch {
	case q.hasOrder:
		return nil, nil, fmt.Errorf("%w: Aggregate: the query has OrderBy(%q); groups come back sorted by their key, so the query only selects records (Where, After, Before, TimeRangeMs)", ErrInvalidQuery, q.orderText)
	case q.hasLimit:
		return nil, nil, fmt.Errorf("%w: Aggregate: the query has Limit(%d); an aggregate reads every record the query selects, so bound it with Where, After, Before or TimeRangeMs", ErrInvalidQuery, q.limit)
	case len(aggs) == 0:
		return nil, nil, fmt.Errorf("%w: Aggregate needs at least one aggregate (query.Count, Sum, Avg, Min or Max)", ErrInvalidQuery)
	}
	a := &plan.AggSpec{}
	for _, g := range groupBy {
		f := Field(g)
		if f.err != nil {
			return nil, nil, fmt.Errorf("%w (in the group-by path %q)", f.err, g)
		}
		a.GroupBy = append(a.GroupBy, f.path)
	}
	names := make(map[string]bool, len(aggs))
	for i, g := range aggs {
		switch {
		case g.kind == 0:
			return nil, nil, fmt.Errorf("%w: aggregate %d is the zero query.Agg; make it with query.Count, Sum, Avg, Min or Max", ErrInvalidQuery, i)
		case g.name == "":
			return nil, nil, fmt.Errorf("%w: %s needs a name for its result", ErrInvalidQuery, g)
		case names[g.name]:
			return nil, nil, fmt.Errorf("%w: two aggregates are named %q; each result needs its own name", ErrInvalidQuery, g.name)
		case g.kind != plan.AggCount && g.path.err != nil:
			return nil, nil, fmt.Errorf("%w (in %s)", g.path.err, g)
		}
		names[g.name] = true
		a.Aggs = append(a.Aggs, plan.AggDef{Name: g.name, Kind: g.kind, Path: g.path.path})
	}
	return spec, a, nil
}
