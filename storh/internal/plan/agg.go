package plan

import (
	"errors"
	"slices"
)

// AggKind is what one aggregate computes.
type AggKind uint8

const (
	AggCount AggKind = iota + 1
	AggSum
	AggAvg
	AggMin
	AggMax
)

// AggDef is one compiled query.Agg: its result's name, what it computes and
// the path it reads (none for AggCount).
type AggDef struct {
	Name string
	Kind AggKind
	Path []string
}

// AggSpec is a compiled aggregation: the paths records are grouped by, in
// order, and the aggregates computed per group.
type AggSpec struct {
	GroupBy [][]string
	Aggs    []AggDef
}

// CountsOnly reports whether every aggregate is a Count, which the entries
// of an index can answer without a record.
func (a *AggSpec) CountsOnly() bool {
	for _, d := range a.Aggs {
		if d.Kind != AggCount {
			return false
		}
	}
	return true
}

// CompileAgg validates an aggregation (q a query.Query, aggs a
// []query.Agg) and compiles it with its query. Package query sets it.
var CompileAgg = func(q any, groupBy []string, aggs any) (*Spec, *AggSpec, error) {
	return nil, nil, errors.New("storh: internal error: package query is not linked in")
}

// GroupCountAccess is the read of index entries alone that answers Count
// grouped by the group-by paths: an index whose paths are exactly those,
// none of them fanned (a record with an entry per list value would count
// once per value), and whose keys decide the whole selection of s (no
// condition, or conditions on that index alone that its keys answer
// exactly). ok is false when no index can; an Access of AccessNone means
// nothing can match.
func GroupCountAccess(s *Spec, defs []IndexDef, groupBy [][]string) (Access, bool) {
	if s.Empty {
		return Access{Kind: AccessNone}, true
	}
	var conj []*Cond
	for _, c := range Conjuncts(s.Cond) {
		switch c.Op {
		case OpFalse:
			return Access{Kind: AccessNone}, true
		case OpTrue:
		default:
			conj = append(conj, c)
		}
	}
	for i, d := range defs {
		if !slices.EqualFunc(d.Paths, groupBy, slices.Equal) || slices.Contains(d.Fanned, true) {
			continue
		}
		if len(conj) == 0 {
			scan := Scan{Index: i, Ranges: []KeyRange{{}}, Exact: true}
			return Access{Kind: AccessIndex, Scans: []Scan{scan}, Exact: true}, true
		}
		a, _ := indexAccess(s, conj, i, d)
		switch {
		case a.Kind == AccessNone:
			return a, true
		case a.Kind == AccessIndex && a.Exact && !a.Scans[0].Element && !a.Scans[0].Repeats:
			return a, true
		}
	}
	return Access{}, false
}

// EndsIndexes answers an aggregation of Min and Max alone, not grouped,
// over every record (no condition, no id bound), from the ends of indexes:
// per aggregate, the index whose first entry past the nulls and whose last
// entry hold the least and the greatest value at its path. Such an index
// has that path first and does not fan out there, so that each entry holds
// one record's whole value at the path. ok is false unless every aggregate
// has one.
func EndsIndexes(s *Spec, defs []IndexDef, a *AggSpec) ([]int, bool) {
	if len(a.GroupBy) > 0 || s.Cond != nil || !(Access{Kind: AccessIDs}).ReadsAll(s) || s.Empty {
		return nil, false
	}
	out := make([]int, len(a.Aggs))
	for j, g := range a.Aggs {
		if g.Kind != AggMin && g.Kind != AggMax {
			return nil, false
		}
		i := slices.IndexFunc(defs, func(d IndexDef) bool { return slices.Equal(d.Paths[0], g.Path) && !d.fanned(0) })
		if i < 0 {
			return nil, false
		}
		out[j] = i
	}
	return out, true
}
