package plan

import (
	"bytes"
	"slices"

	"github.com/storhdb/storh-go/storh/internal/order"
)

// IndexDef is one ready index of a collection, as the planner sees it.
type IndexDef struct {
	Name   string
	Paths  [][]string
	Unique bool
	// Fanned says, per path (nil: none), that some record reaches several
	// values there, through lists: the index holds an entry per value, so
	// a record may have several entries in a range, and two conditions on
	// the path may hold for different values.
	Fanned []bool
}

// fanned reports whether path p of d reaches several values in a record.
func (d IndexDef) fanned(p int) bool { return d.Fanned != nil && d.Fanned[p] }

// KeyRange is a half-open range [Lo, Hi) of index value keys: the order keys
// of an entry's value(s), without the record id that ends every index key.
// A nil Lo has no lower end, a nil Hi no upper end. The bounds are such that
// the same range over whole index keys (value keys followed by more bytes)
// holds exactly the entries whose value keys are in range. Point marks the
// range of one whole value key, [k, PrefixEnd(k)), whose entries are in id
// order.
type KeyRange struct {
	Lo, Hi []byte
	Point  bool
}

// Scan reads one index over some ranges of value keys. Element scans read
// the entries a single-field index holds for each element of a list value
// (for Contains) instead of the one entry per record for the whole value.
type Scan struct {
	Index   int // position in the IndexDefs given to Choose
	Element bool
	Ranges  []KeyRange // ascending, not overlapping
	// Exact means every record with an entry in the ranges matches the
	// conditions the scan was made for, so its keys can be counted.
	Exact bool
	// Repeats: a record may have several entries in the ranges (its
	// values went through a list), so readers must keep distinct ids.
	Repeats bool
}

// AccessKind is how a plan finds its candidate records.
type AccessKind uint8

const (
	AccessIDs   AccessKind = iota + 1 // the records in the id range, in id order
	AccessIndex                       // one index scan
	AccessUnion                       // the union of several index scans (an Or)
	AccessNone                        // nothing can match: read nothing
)

// Access is the planner's choice. Every candidate it yields is still checked
// against the whole condition, so an index narrows what is read and never
// changes a result.
type Access struct {
	Kind  AccessKind
	Scans []Scan
	// Ordered: the one index scan walks in the Order sequence (value, then
	// id), so no sort is needed and a Limit can stop the walk early.
	Ordered bool
	// OrderPrefix is, for an ordered scan, the value keys of the equalities
	// that precede the order path in the index: an entry's position in the
	// order is its key after this prefix.
	OrderPrefix []byte
	// Exact: the scans' keys alone decide the whole condition: counting
	// needs no record, only distinct ids.
	Exact bool
}

// ReadsAll reports whether running s through a reads the whole collection:
// no index and no id bound. RequireIndex refuses such plans.
func (a Access) ReadsAll(s *Spec) bool {
	return a.Kind == AccessIDs && s.Lo.IsZero() && s.Hi == maxID
}

var maxID = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// maxRanges bounds how many ranges an In (or several, on a compound index)
// may expand into before the planner prefers another access.
const maxRanges = 1024

// Choose picks how to read the records of s from a collection with the
// given ready indexes. It has no statistics, so it ranks by shape: an
// equality on every path of a unique index first, then the most leading
// equalities of a compound index (plus a range on the next path), a range,
// Contains; an index that walks in the query's order wins whenever the
// query has a Limit (it can stop early). An Or whose every branch has an
// index becomes a union when nothing better exists. Anything else reads the
// id range.
func Choose(s *Spec, defs []IndexDef) Access {
	if s.Empty {
		return Access{Kind: AccessNone}
	}
	var conj []*Cond
	for _, c := range Conjuncts(s.Cond) {
		switch c.Op {
		case OpFalse:
			return Access{Kind: AccessNone}
		case OpTrue:
		default:
			conj = append(conj, c)
		}
	}
	best, bestScore := Access{Kind: AccessIDs}, 0
	for i, d := range defs {
		a, score := indexAccess(s, conj, i, d)
		if score > bestScore {
			best, bestScore = a, score
		}
	}
	if bestScore >= minIndexScore {
		return best
	}
	if u, ok := unionAccess(s, conj, defs); ok {
		return u
	}
	return Access{Kind: AccessIDs}
}

// minIndexScore is the least score for which an index scan beats reading
// the id range: an index that narrows nothing and gives no order is worse.
const minIndexScore = 10

// indexAccess is the best scan of index i for the conjuncts, and its score.
func indexAccess(s *Spec, conj []*Cond, i int, d IndexDef) (Access, int) {
	// Value ranges per path of the index, from the conjuncts on it.
	used := make([]bool, len(conj))
	prefixes := [][]byte{nil} // value-key prefixes of the equality paths so far
	points, exact := 0, true
	var next []KeyRange // ranges on the path after the equalities
	nextPath := -1
	repeats := false
	for p := range d.Paths {
		repeats = repeats || d.fanned(p)
	}
	for p, path := range d.Paths {
		rs, ok, ex := pathRanges(conj, path, used, false, d.fanned(p))
		if !ok {
			break
		}
		if len(rs) == 0 {
			// The conditions on this path contradict each other (n > 5 and
			// n < 3, two different equalities): nothing can match.
			return Access{Kind: AccessNone}, 2000
		}
		if allPoints(rs) && len(prefixes)*len(rs) <= maxRanges {
			exact = exact && ex
			prefixes = product(prefixes, rs)
			points++
			continue
		}
		next, nextPath = rs, p
		exact = exact && ex
		break
	}
	if points == 0 && nextPath < 0 && len(d.Paths) == 1 {
		// A Contains on a single-field index reads its element entries.
		if rs, ok, ex := pathRanges(conj, d.Paths[0], used, true, d.fanned(0)); ok {
			a := Access{Kind: AccessIndex, Scans: []Scan{{Index: i, Element: true, Ranges: rs, Exact: ex && allUsed(used)}}}
			a.Exact = a.Scans[0].Exact
			return a, 25
		}
	}
	var ranges []KeyRange
	for _, pre := range prefixes {
		if next != nil {
			for _, r := range next {
				lo, hi := concat(pre, r.Lo), order.PrefixEnd(pre)
				if r.Hi != nil {
					hi = concat(pre, r.Hi)
				}
				ranges = append(ranges, KeyRange{Lo: lo, Hi: hi, Point: r.Point})
			}
		} else if pre != nil {
			ranges = append(ranges, KeyRange{Lo: pre, Hi: order.PrefixEnd(pre), Point: points == len(d.Paths)})
		}
	}
	if ranges == nil {
		ranges = []KeyRange{{}} // the whole index
	}
	// The walk is in the query's order when the order path comes right
	// after a single combination of equalities, and is the index's last
	// path (a path after it would order ties by its value, not by id).
	orderAt := points
	// A path that reaches several values in some record has no order: the
	// query fails on such a record, which only reading every match finds.
	ordered := s.Order != nil && len(prefixes) == 1 && orderAt == len(d.Paths)-1 &&
		slices.Equal(d.Paths[orderAt], s.Order) && (nextPath < 0 || nextPath == orderAt) && !d.fanned(orderAt)
	score := 0
	switch {
	case points == len(d.Paths) && d.Unique && len(prefixes) == 1:
		score = 1000
	case points > 0 || nextPath >= 0:
		score = minIndexScore + 20*points
		if nextPath >= 0 {
			score += 10
		}
	}
	if ordered {
		score++ // a whole-index walk in order beats a scan and a sort
		if score < minIndexScore {
			score = minIndexScore
		}
		if s.Limit > 0 {
			score += 300
		}
	}
	if score == 0 {
		return Access{}, 0
	}
	slices.SortFunc(ranges, func(a, b KeyRange) int { return bytes.Compare(a.Lo, b.Lo) })
	scan := Scan{Index: i, Ranges: ranges, Exact: exact && allUsed(used) && (points > 0 || nextPath >= 0), Repeats: repeats}
	a := Access{Kind: AccessIndex, Scans: []Scan{scan}, Ordered: ordered, Exact: scan.Exact}
	if ordered {
		a.OrderPrefix = prefixes[0]
	}
	return a, score
}

// unionAccess serves a query whose only conjunct is an Or, each branch by
// its own index scan.
func unionAccess(s *Spec, conj []*Cond, defs []IndexDef) (Access, bool) {
	if len(conj) != 1 || conj[0].Op != OpOr {
		return Access{}, false
	}
	u := Access{Kind: AccessUnion, Exact: true}
	for _, branch := range conj[0].Kids {
		sub := &Spec{Lo: s.Lo, Hi: s.Hi, Cond: branch}
		best, bestScore := Access{}, 0
		for i, d := range defs {
			if a, score := indexAccess(sub, Conjuncts(branch), i, d); score > bestScore {
				best, bestScore = a, score
			}
		}
		if bestScore < minIndexScore {
			return Access{}, false
		}
		if best.Kind == AccessNone {
			continue // a branch that matches nothing adds nothing
		}
		u.Scans = append(u.Scans, best.Scans[0])
		u.Exact = u.Exact && best.Exact
	}
	return u, true
}

// pathRanges intersects the value ranges the conjuncts put on path, marking
// the conjuncts it used. ok is false when none constrains the path. With
// elements it looks at Contains (for element entries) instead of the
// whole-value operators. exact is false when the ranges hold values the
// conditions do not match (a null range also holds missing fields; NaN is
// equal to nothing), so records must be checked. On a fanned path (one
// that reaches several values in some record) two conditions may hold for
// two different values, so ranges are not intersected: the first condition
// alone picks the entries, and the record check decides the others.
func pathRanges(conj []*Cond, path []string, used []bool, elements, fanned bool) (rs []KeyRange, ok, exact bool) {
	exact = true
	for i, c := range conj {
		if !slices.Equal(c.Path, path) || ok && fanned {
			continue
		}
		var cr []KeyRange
		ex := true
		switch {
		case elements && c.Op == OpContains:
			if ok {
				continue // two elements of one list: not one range; the record check decides
			}
			cr, ex = pointRanges(c.Values[:1])
		case !elements && (c.Op == OpEq || c.Op == OpIn):
			cr, ex = pointRanges(c.Values)
		case !elements && c.Op == OpRange:
			cr = []KeyRange{{Lo: c.Lo, Hi: c.Hi}}
		default:
			continue
		}
		if cr == nil {
			continue // a value with no key: leave it to the record check
		}
		used[i] = true
		exact = exact && ex
		if !ok {
			rs, ok = cr, true
		} else {
			rs = intersect(rs, cr)
		}
	}
	return rs, ok, exact
}

// pointRanges is one range per distinct value, holding exactly the entries
// equal to it.
func pointRanges(values []any) ([]KeyRange, bool) {
	exact := true
	var rs []KeyRange
	for _, v := range values {
		k, err := order.Append(nil, v)
		if err != nil {
			return nil, false
		}
		if v == nil || order.HasNaN(v) {
			exact = false // the null entry also holds missing fields; NaN equals nothing
		}
		rs = append(rs, KeyRange{Lo: k, Hi: order.PrefixEnd(k), Point: true})
	}
	slices.SortFunc(rs, func(a, b KeyRange) int { return bytes.Compare(a.Lo, b.Lo) })
	rs = slices.CompactFunc(rs, func(a, b KeyRange) bool { return bytes.Equal(a.Lo, b.Lo) })
	return rs, exact
}

// allPoints reports whether every range holds one value key exactly.
func allPoints(rs []KeyRange) bool {
	for _, r := range rs {
		if !r.Point {
			return false
		}
	}
	return len(rs) > 0
}

// product extends every prefix with every point's value key.
func product(prefixes [][]byte, points []KeyRange) [][]byte {
	out := make([][]byte, 0, len(prefixes)*len(points))
	for _, p := range prefixes {
		for _, r := range points {
			out = append(out, concat(p, r.Lo))
		}
	}
	return out
}

func concat(a, b []byte) []byte {
	return append(append(make([]byte, 0, len(a)+len(b)), a...), b...)
}

// intersect returns the ranges both a and b cover (both ascending, not
// overlapping).
func intersect(a, b []KeyRange) []KeyRange {
	var out []KeyRange
	for _, x := range a {
		for _, y := range b {
			lo := x.Lo
			if bytes.Compare(y.Lo, lo) > 0 {
				lo = y.Lo
			}
			hi := x.Hi
			if hi == nil || (y.Hi != nil && bytes.Compare(y.Hi, hi) < 0) {
				hi = y.Hi
			}
			if hi == nil || bytes.Compare(lo, hi) < 0 {
				r := KeyRange{Lo: lo, Hi: hi}
				r.Point = x.Point && bytes.Equal(lo, x.Lo) && bytes.Equal(hi, x.Hi) ||
					y.Point && bytes.Equal(lo, y.Lo) && bytes.Equal(hi, y.Hi)
				out = append(out, r)
			}
		}
	}
	return out
}

func allUsed(used []bool) bool {
	for _, u := range used {
		if !u {
			return false
		}
	}
	return true
}
