package storh_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/order"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The query model test: random records of mixed types in two collections,
// one with a random set of indexes (single, compound, unique) and one with
// none, driven by random writes (puts over new and existing ids, deletes,
// batches, transactions), reopens (with the same, no, or new index
// declarations) and index drops; after every step random queries run on
// both collections and must return exactly what a brute-force reference
// computes from the specification. The reference is written here, from the
// spec, and shares nothing with the engine but order.Compare, the reference
// definition of the total order (written independently of the key
// encoding), for OrderBy. Conditions include ElemMatch on lists, with
// conditions on the elements' paths (nested in And, Or, Not and ElemMatch
// both ways). Each run is a fresh store on the backend of the pass: a file,
// or a PostgreSQL schema with STORH_TEST_BACKEND=postgres.
//
// Every random choice comes from rapid, ids included (minted from drawn
// bits, never from the clock), so -rapid.seed replays a run exactly.

const qmBaseMs = 1_700_000_000_000

var (
	qmT0 = time.Date(2025, 6, 7, 8, 9, 10, 11, time.UTC)

	// Numbers at the edges: around ±2^53 where float64 loses integers, the
	// int64 and uint64 limits, zeros of both signs, tiny and huge floats.
	qmNumbers = []any{
		int64(0), int64(1), int64(-1), int64(2), int64(5), 0.5, 1.0, 2.0, math.Copysign(0, -1), 5.0,
		1e-300, 5e-324, -1e300, math.MaxFloat64, math.Inf(1), math.Inf(-1),
		p53, p53 + 1, -p53, -(p53 + 1), float64(p53), float64(p53) + 2, -float64(p53),
		int64(math.MaxInt64), int64(math.MinInt64), uint64(math.MaxUint64), uint64(1 << 63),
		float64(1 << 63), -float64(1 << 63),
	}
	// Strings with shared prefixes, a zero byte, case.
	qmStrings = []any{"", "a", "ab", "abc", "b", "a\x00", "A", "1"}
	qmOthers  = []any{true, false, nil, []byte{}, []byte("a"), []byte("ab"), qmT0, qmT0.Add(time.Nanosecond)}
)

func qmScalar(t *rapid.T, label string, withNaN bool) any {
	switch k := rapid.IntRange(0, 9).Draw(t, label+" kind"); {
	case k < 5:
		return rapid.SampledFrom(qmNumbers).Draw(t, label)
	case k < 7:
		return rapid.SampledFrom(qmStrings).Draw(t, label)
	case k < 9 || !withNaN:
		return rapid.SampledFrom(qmOthers).Draw(t, label)
	}
	return math.NaN()
}

// qmValue is a scalar, or a small list or map of values.
func qmValue(t *rapid.T, label string, depth int, withNaN bool) any {
	k := rapid.IntRange(0, 9).Draw(t, label+" shape")
	switch {
	case depth >= 2 || k < 7:
		return qmScalar(t, label, withNaN)
	case k < 9:
		n := rapid.IntRange(0, 3).Draw(t, label+" len")
		l := make([]any, n)
		for i := range l {
			l[i] = qmValue(t, label+" elem", depth+1, withNaN)
		}
		return l
	}
	m := map[string]any{}
	for _, key := range []string{"x", "y"} {
		if rapid.Bool().Draw(t, label+" has "+key) {
			m[key] = qmValue(t, label+" "+key, depth+1, withNaN)
		}
	}
	return m
}

// qmRecord draws one record. Unique indexes are declared only on a, b, n.x
// (and a,b), which never hold NaN: whether two NaNs are "the same value"
// for a unique index is left open by the spec.
func qmRecord(t *rapid.T) map[string]any {
	m := map[string]any{}
	if rapid.IntRange(0, 4).Draw(t, "has a") > 0 {
		m["a"] = qmValue(t, "a", 0, false)
	}
	if rapid.IntRange(0, 3).Draw(t, "has b") > 0 {
		m["b"] = qmScalar(t, "b", false)
	}
	if rapid.IntRange(0, 3).Draw(t, "has c") > 0 {
		m["c"] = qmValue(t, "c", 0, true)
	}
	switch rapid.IntRange(0, 5).Draw(t, "n shape") {
	case 0, 1:
		nm := map[string]any{}
		if rapid.IntRange(0, 4).Draw(t, "has n.x") > 0 {
			nm["x"] = qmScalar(t, "n.x", false)
		}
		if rapid.Bool().Draw(t, "has n.y") {
			nm["y"] = qmScalar(t, "n.y", true)
		}
		m["n"] = nm
	case 2:
		m["n"] = qmScalar(t, "n", true)
	case 3:
		m["n"] = []any{map[string]any{"x": qmScalar(t, "n.0.x", false)}}
	}
	switch rapid.IntRange(0, 4).Draw(t, "tags shape") {
	case 0, 1:
		n := rapid.IntRange(0, 4).Draw(t, "tags len")
		l := make([]any, n)
		for i := range l {
			l[i] = qmScalar(t, "tag", true)
		}
		m["tags"] = l
	case 2:
		m["tags"] = qmScalar(t, "tags", true)
	}
	if rapid.IntRange(0, 2).Draw(t, "has items") > 0 {
		m["items"] = qmItems(t)
	}
	if rapid.IntRange(0, 4).Draw(t, "has d.k") == 0 {
		m["d.k"] = qmScalar(t, "d.k", false)
	}
	if rapid.IntRange(0, 4).Draw(t, "has d") == 0 {
		m["d"] = map[string]any{"k": qmScalar(t, "d/k", false)}
	}
	return m
}

// qmItems draws a list of objects, as orders hold items: mostly maps with
// a sku and a qty (either may be missing, a sku may be a list), sometimes
// a scalar, a map without them or a list of maps, which paths do not
// descend into. No NaN: unique indexes are declared on items.sku.
func qmItems(t *rapid.T) any {
	if rapid.IntRange(0, 9).Draw(t, "items shape") == 0 {
		return qmScalar(t, "items", false)
	}
	skus := []any{"X", "Y", "Z", int64(1), nil}
	l := make([]any, rapid.IntRange(0, 3).Draw(t, "items len"))
	for i := range l {
		switch rapid.IntRange(0, 9).Draw(t, "item shape") {
		case 0:
			l[i] = qmScalar(t, "item", false)
		case 1:
			l[i] = []any{map[string]any{"sku": rapid.SampledFrom(skus).Draw(t, "nested sku")}}
		case 2:
			l[i] = map[string]any{"sku": []any{rapid.SampledFrom(skus).Draw(t, "sku elem")}}
		default:
			item := map[string]any{}
			if rapid.IntRange(0, 4).Draw(t, "has sku") > 0 {
				item["sku"] = rapid.SampledFrom(skus).Draw(t, "sku")
			}
			if rapid.IntRange(0, 3).Draw(t, "has qty") > 0 {
				item["qty"] = rapid.SampledFrom([]any{int64(0), int64(1), int64(2), 2.5, "2"}).Draw(t, "qty")
			}
			l[i] = item
		}
	}
	return l
}

// qmWiden gives a normalised value another Go type of the same value, as a
// user might write it: integer widths and signedness, float32, typed
// slices and maps. Storing and querying must not care.
func qmWiden(t *rapid.T, v any) any {
	switch x := v.(type) {
	case int64:
		choices := []any{x}
		if x >= math.MinInt8 && x <= math.MaxInt8 {
			choices = append(choices, int8(x), int(x))
		}
		if x >= 0 {
			choices = append(choices, uint64(x))
			if x <= math.MaxUint16 {
				choices = append(choices, uint16(x))
			}
		}
		return rapid.SampledFrom(choices).Draw(t, "widen int")
	case float64:
		if x == x && float64(float32(x)) == x && !math.IsInf(x, 0) && rapid.Bool().Draw(t, "float32") {
			return float32(x)
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = qmWiden(t, e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range slices.Sorted(mapsKeys(x)) {
			out[k] = qmWiden(t, x[k])
		}
		return out
	}
	return v
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ---- The reference: the spec, restated over decoded values. ----

// qmReach walks a path as the spec says: a segment that meets a map goes
// on into it, one that meets a list goes on into each element that is a
// map; anything else reaches nothing. It returns every value reached, and
// whether the walk met a list before the last segment.
func qmReach(v any, path []string) (vals []any, fanned bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	next, ok := m[path[0]]
	switch {
	case !ok:
		return nil, false
	case len(path) == 1:
		return []any{next}, false
	}
	switch x := next.(type) {
	case map[string]any:
		return qmReach(x, path[1:])
	case []any:
		for _, e := range x {
			vs, _ := qmReach(e, path[1:])
			vals = append(vals, vs...)
		}
		return vals, true
	}
	return nil, false
}

// qmLookup is the one value a path reaches when it meets no list.
func qmLookup(rec map[string]any, path []string) (any, bool) {
	vals, fanned := qmReach(rec, path)
	if fanned || len(vals) == 0 {
		return nil, false
	}
	return vals[0], true
}

func qmIsInt(v any) bool {
	switch v.(type) {
	case int64, uint64:
		return true
	}
	return false
}

func qmExact(v any) *big.Float {
	switch x := v.(type) {
	case int64:
		return new(big.Float).SetInt64(x)
	case uint64:
		return new(big.Float).SetUint64(x)
	}
	return new(big.Float).SetFloat64(v.(float64))
}

// qmEq is strict typed equality: integers by value whatever their width,
// floats by value (NaN equals nothing), never an integer and a float;
// lists and maps deeply.
func qmEq(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case int64, uint64:
		return qmIsInt(b) && qmExact(a).Cmp(qmExact(b)) == 0
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !qmEq(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !qmEq(xv, yv) {
				return false
			}
		}
		return true
	}
	panic(fmt.Sprintf("qmEq: %T", a))
}

// qmClass is a value's class for ranges, 0 for values ranges never match.
func qmClass(v any) int {
	switch x := v.(type) {
	case bool:
		return 1
	case int64, uint64:
		return 2
	case float64:
		if x != x {
			return 0 // NaN
		}
		return 2
	case string:
		return 3
	case []byte:
		return 4
	case time.Time:
		return 5
	}
	return 0
}

// qmCmp compares two values of one range class.
func qmCmp(a, b any) int {
	switch x := a.(type) {
	case bool:
		y := b.(bool)
		if x == y {
			return 0
		}
		if !x {
			return -1
		}
		return 1
	case string:
		return strings.Compare(x, b.(string))
	case []byte:
		return bytes.Compare(x, b.([]byte))
	case time.Time:
		return x.Compare(b.(time.Time))
	}
	return qmExact(a).Cmp(qmExact(b))
}

// qmSame compares stored data with the model's, exactly (float bits,
// NaN equal to NaN).
func qmSame(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && (math.Float64bits(x) == math.Float64bits(y) || x != x && y != y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !qmSame(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			if yv, ok := y[k]; !ok || !qmSame(xv, yv) {
				return false
			}
		}
		return true
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	case int64, uint64:
		return qmIsInt(b) && qmEq(a, b)
	}
	return a == b
}

// mCond is a condition as the test draws it: it builds the query.Cond and
// evaluates the spec on a record.
type mCond struct {
	op     string // eq neq in notin gt gte lt lte between prefix exists missing contains elemmatch and or not true
	path   []string
	vals   []any // normalised
	widen  []any // as passed to the builder
	prefix string
	kids   []*mCond // and, or, not; elemmatch: its one condition, on paths from the element
	dotted bool     // written Field("a.b") rather than FieldPath("a", "b")
}

func (c *mCond) field() query.FieldRef {
	for _, s := range c.path {
		if strings.Contains(s, ".") {
			return query.FieldPath(c.path...)
		}
	}
	if c.dotted {
		return query.Field(strings.Join(c.path, "."))
	}
	return query.FieldPath(c.path...) // segments walk like a dotted Field
}

func (c *mCond) build() query.Cond {
	switch c.op {
	case "and", "or":
		kids := make([]query.Cond, len(c.kids))
		for i, k := range c.kids {
			kids[i] = k.build()
		}
		if c.op == "and" {
			return query.And(kids...)
		}
		return query.Or(kids...)
	case "not":
		return query.Not(c.kids[0].build())
	}
	f := c.field()
	switch c.op {
	case "eq":
		return f.Eq(c.widen[0])
	case "neq":
		return f.Neq(c.widen[0])
	case "in":
		return f.In(c.widen...)
	case "notin":
		return f.NotIn(c.widen...)
	case "gt":
		return f.Gt(c.widen[0])
	case "gte":
		return f.Gte(c.widen[0])
	case "lt":
		return f.Lt(c.widen[0])
	case "lte":
		return f.Lte(c.widen[0])
	case "between":
		return f.Between(c.widen[0], c.widen[1])
	case "prefix":
		return f.Prefix(c.prefix)
	case "exists":
		return f.Exists()
	case "missing":
		return f.Missing()
	case "contains":
		return f.Contains(c.widen[0])
	case "elemmatch":
		return f.ElemMatch(c.kids[0].build())
	}
	panic(c.op)
}

// invalid reports whether the spec makes the condition ErrInvalidQuery.
func (c *mCond) invalid() bool {
	class := func(v any) int {
		if qmNaN(v) {
			return 2 // NaN is a number: it matches nothing, but its class is numbers
		}
		return qmClass(v)
	}
	if c.op == "between" && class(c.vals[0]) != class(c.vals[1]) {
		return true
	}
	for _, k := range c.kids {
		if k.invalid() {
			return true
		}
	}
	return false
}

func qmNaN(v any) bool { f, ok := v.(float64); return ok && f != f }

func (c *mCond) eval(rec map[string]any) bool {
	switch c.op {
	case "and":
		for _, k := range c.kids {
			if !k.eval(rec) {
				return false
			}
		}
		return true
	case "or":
		for _, k := range c.kids {
			if k.eval(rec) {
				return true
			}
		}
		return false
	case "not":
		return !c.kids[0].eval(rec)
	}
	// Some value the path reaches passes the test; neq, notin and missing
	// are the negations of eq, in and exists.
	positive := map[string]string{"neq": "eq", "notin": "in", "missing": "exists"}[c.op]
	if positive == "" {
		positive = c.op
	}
	vals, _ := qmReach(rec, c.path)
	some := slices.ContainsFunc(vals, func(v any) bool { return c.test(positive, v) })
	return some == (positive == c.op)
}

// test is the positive operator op on one value a path reached.
func (c *mCond) test(op string, v any) bool {
	switch op {
	case "exists":
		return true
	case "eq":
		return qmEq(v, c.vals[0])
	case "in":
		return slices.ContainsFunc(c.vals, func(w any) bool { return qmEq(v, w) })
	case "contains":
		l, isList := v.([]any)
		return isList && slices.ContainsFunc(l, func(e any) bool { return qmEq(e, c.vals[0]) })
	case "elemmatch":
		l, isList := v.([]any)
		return isList && slices.ContainsFunc(l, func(e any) bool {
			m, isMap := e.(map[string]any)
			if !isMap {
				m = map[string]any{} // an element that is not a map has no fields
			}
			return c.kids[0].eval(m)
		})
	case "prefix":
		s, isStr := v.(string)
		return isStr && strings.HasPrefix(s, c.prefix)
	}
	// Ranges: only within the bound's class; NaN, null, missing never.
	for _, b := range c.vals {
		if qmNaN(b) {
			return false
		}
	}
	if qmClass(v) == 0 || qmClass(v) != qmClass(c.vals[0]) {
		return false
	}
	switch op {
	case "gt":
		return qmCmp(v, c.vals[0]) > 0
	case "gte":
		return qmCmp(v, c.vals[0]) >= 0
	case "lt":
		return qmCmp(v, c.vals[0]) < 0
	case "lte":
		return qmCmp(v, c.vals[0]) <= 0
	case "between":
		return qmCmp(v, c.vals[0]) >= 0 && qmCmp(v, c.vals[1]) <= 0
	}
	panic(c.op)
}

func (c *mCond) String() string {
	switch c.op {
	case "and", "or":
		parts := make([]string, len(c.kids))
		for i, k := range c.kids {
			parts[i] = k.String()
		}
		return c.op + "(" + strings.Join(parts, ", ") + ")"
	case "not":
		return "not(" + c.kids[0].String() + ")"
	case "prefix":
		return fmt.Sprintf("%q prefix %q", c.path, c.prefix)
	case "elemmatch":
		return fmt.Sprintf("%q elemmatch(%s)", c.path, c.kids[0])
	}
	return fmt.Sprintf("%q %s %#v", c.path, c.op, c.widen)
}

// mQuery is a drawn query.
type mQuery struct {
	where    []*mCond
	equal    bool // the first where is an eq on a top-level field, written WhereEqual
	order    []string
	orderRaw string
	desc     bool
	after    *mCursor
	before   *mCursor
	time     bool
	from, to int64
	limit    int
	reverse  bool
}

type mCursor struct {
	id       uuidv7.UUID
	value    any // normalised; with hasValue
	widen    any
	hasValue bool
	own      bool // the value is the record's own, filled in by drawQuery
}

func (q *mQuery) build() query.Query {
	out := query.All()
	for i, c := range q.where {
		if i == 0 && q.equal {
			out = out.WhereEqual(c.path[0], c.widen[0])
			continue
		}
		out = out.Where(c.build())
	}
	if q.order != nil {
		dir := query.Asc
		if q.desc {
			dir = query.Desc
		}
		out = out.OrderBy(q.orderRaw, dir)
	}
	if c := q.after; c != nil {
		if c.hasValue {
			out = out.AfterValue(c.widen, c.id)
		} else {
			out = out.After(c.id)
		}
	}
	if c := q.before; c != nil {
		if c.hasValue {
			out = out.BeforeValue(c.widen, c.id)
		} else {
			out = out.Before(c.id)
		}
	}
	if q.time {
		out = out.TimeRangeMs(q.from, q.to)
	}
	if q.limit > 0 {
		out = out.Limit(q.limit)
	}
	if q.reverse {
		out = out.Reverse()
	}
	return out
}

// run computes the spec's answer over the model: the ids in order, or the
// error the query must fail with.
func (q *mQuery) run(model map[uuidv7.UUID]map[string]any) ([]uuidv7.UUID, error) {
	for _, c := range q.where {
		if c.invalid() {
			return nil, storh.ErrInvalidQuery
		}
	}
	type pos struct {
		v  any
		id uuidv7.UUID
	}
	cursor := func(c *mCursor) (pos, error) {
		if c.hasValue {
			return pos{c.value, c.id}, nil
		}
		rec, ok := model[c.id]
		if !ok {
			return pos{}, storh.ErrNotFound
		}
		if _, fanned := qmReach(rec, q.order); fanned {
			return pos{}, storh.ErrInvalidQuery // the cursor's record has no position
		}
		v, _ := qmLookup(rec, q.order)
		return pos{v, c.id}, nil
	}
	// seq compares two positions in the output sequence before Reverse.
	seq := func(a, b pos) int {
		c := 0
		if q.order != nil {
			c = order.Compare(a.v, b.v)
		}
		if c == 0 {
			c = a.id.Compare(b.id)
		}
		if q.desc {
			c = -c
		}
		return c
	}
	var after, before *pos
	if q.order != nil {
		for _, p := range []struct {
			c   *mCursor
			out **pos
		}{{q.after, &after}, {q.before, &before}} {
			if p.c != nil {
				ps, err := cursor(p.c)
				if err != nil {
					return nil, err
				}
				*p.out = &ps
			}
		}
	}
	var hits []pos
	for id, rec := range model {
		if q.order == nil && (q.after != nil && id.Compare(q.after.id) <= 0 || q.before != nil && id.Compare(q.before.id) >= 0) {
			continue
		}
		if ms := id.TimestampMs(); q.time && (ms < q.from || ms > q.to) {
			continue
		}
		ok := true
		for _, c := range q.where {
			ok = ok && c.eval(rec)
		}
		if !ok {
			continue
		}
		var v any
		if q.order != nil {
			if _, fanned := qmReach(rec, q.order); fanned {
				return nil, storh.ErrInvalidQuery // a match with no single order value
			}
			v, _ = qmLookup(rec, q.order)
		}
		p := pos{v, id}
		if after != nil && seq(p, *after) <= 0 || before != nil && seq(p, *before) >= 0 {
			continue
		}
		hits = append(hits, p)
	}
	slices.SortFunc(hits, seq)
	if q.reverse {
		slices.Reverse(hits)
	}
	if q.limit > 0 && len(hits) > q.limit {
		hits = hits[:q.limit]
	}
	out := make([]uuidv7.UUID, len(hits))
	for i, h := range hits {
		out[i] = h.id
	}
	return out, nil
}

func (q *mQuery) String() string { return q.build().String() }

// ---- Indexes. ----

type mIndex struct {
	name   string
	paths  []string // dotted
	unique bool
}

func (ix mIndex) spec() storh.IndexSpec {
	s := storh.Index(ix.paths...)
	if ix.unique {
		s = s.Unique().Named(ix.name)
	}
	return s
}

var qmIndexPool = []mIndex{
	{name: "a", paths: []string{"a"}},
	{name: "b", paths: []string{"b"}},
	{name: "c", paths: []string{"c"}},
	{name: "n", paths: []string{"n"}},
	{name: "n.x", paths: []string{"n.x"}},
	{name: "tags", paths: []string{"tags"}},
	{name: "d.k", paths: []string{"d.k"}},
	{name: "a,b", paths: []string{"a", "b"}},
	{name: "b,a", paths: []string{"b", "a"}},
	{name: "n.x,a", paths: []string{"n.x", "a"}},
	{name: "c,tags", paths: []string{"c", "tags"}},
	{name: "tags,b", paths: []string{"tags", "b"}},
	{name: "ua", paths: []string{"a"}, unique: true},
	{name: "ub", paths: []string{"b"}, unique: true},
	{name: "uab", paths: []string{"a", "b"}, unique: true},
	{name: "unx", paths: []string{"n.x"}, unique: true},
	{name: "items.sku", paths: []string{"items.sku"}},
	{name: "items.sku,b", paths: []string{"items.sku", "b"}},
	{name: "b,items.qty", paths: []string{"b", "items.qty"}},
	{name: "n.x,items.sku", paths: []string{"n.x", "items.sku"}}, // two lists in one record: refused
	{name: "uisku", paths: []string{"items.sku"}, unique: true},
}

// qmTuples is what rec holds at the paths of ix: the tuple of one value per
// path, or one per distinct value of the one path that goes through a list
// (a missing value as nil). fanned counts the paths that went through a
// list; more than one makes the record impossible to index.
func qmTuples(ix mIndex, rec map[string]any) (tuples [][]any, fanned int) {
	tuples = [][]any{nil}
	for _, p := range ix.paths {
		vals, through := qmReach(rec, strings.Split(p, "."))
		if !through {
			v := any(nil)
			if len(vals) > 0 {
				v = vals[0]
			}
			for i := range tuples {
				tuples[i] = append(tuples[i], v)
			}
			continue
		}
		fanned++
		var distinct []any
		for _, v := range vals {
			if !slices.ContainsFunc(distinct, func(d any) bool { return order.Compare(d, v) == 0 }) {
				distinct = append(distinct, v)
			}
		}
		if len(distinct) == 0 {
			distinct = []any{nil}
		}
		var out [][]any
		for _, t := range tuples {
			for _, v := range distinct {
				out = append(out, append(slices.Clone(t), v))
			}
		}
		tuples = out
	}
	return tuples, fanned
}

// qmRefused returns the errors a write of rec under id may fail with,
// given the other records: ErrInvalidIndex when rec goes through lists on
// two paths of one index, ErrUniqueViolation when a tuple of a unique
// index without a null in it is another record's too (a record may repeat
// a value within its own lists). nil: the write succeeds.
func qmRefused(ixs []mIndex, model map[uuidv7.UUID]map[string]any, id uuidv7.UUID, rec map[string]any) []error {
	var errs []error
	for _, ix := range ixs {
		mine, fanned := qmTuples(ix, rec)
		if fanned > 1 {
			errs = append(errs, storh.ErrInvalidIndex)
			continue
		}
		if !ix.unique {
			continue
		}
		constrained := func(t []any) bool { return !slices.Contains(t, nil) }
	others:
		for other, r := range model {
			if other == id {
				continue
			}
			theirs, _ := qmTuples(ix, r)
			for _, a := range mine {
				for _, b := range theirs {
					if constrained(a) && constrained(b) && qmEq(a, b) {
						errs = append(errs, storh.ErrUniqueViolation)
						break others
					}
				}
			}
		}
	}
	return errs
}

// qmEntries is how many entries the spec gives an index: per record one
// per tuple (qmTuples) and a mark when a path went through a list, plus,
// for a single-field index, one per distinct element (in the total order)
// of the list values it reaches.
func qmEntries(ix mIndex, model map[uuidv7.UUID]map[string]any) int64 {
	n := int64(0)
	for _, r := range model {
		tuples, fanned := qmTuples(ix, r)
		n += int64(len(tuples) + fanned)
		if len(ix.paths) != 1 {
			continue
		}
		vals, _ := qmReach(r, strings.Split(ix.paths[0], "."))
		var distinct []any
		for _, v := range vals {
			l, _ := v.([]any)
			for _, e := range l {
				if !slices.ContainsFunc(distinct, func(d any) bool { return order.Compare(d, e) == 0 }) {
					distinct = append(distinct, e)
				}
			}
		}
		n += int64(len(distinct))
	}
	return n
}

// ---- The state machine. ----

type qmState struct {
	path    string
	db      *storh.DB
	ix      *storh.Docs // with the indexes
	plain   *storh.Docs // without any
	indexes []mIndex    // the indexes ix has, as the model predicts
	model   map[uuidv7.UUID]map[string]any
	gone    []uuidv7.UUID // deleted ids, for cursors
	minted  uint64
	genIDs  []uuidv7.UUID // ids the generator hands out next
	queries int
	// lastPath is the path of the query's last leaf so far.
	lastPath []string
}

// mint draws a fresh UUIDv7 at one of a few milliseconds.
func (s *qmState) mint(t *rapid.T) uuidv7.UUID {
	ms := qmBaseMs + rapid.Int64Range(0, 4).Draw(t, "ms")
	s.minted++
	var id uuidv7.UUID
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(ms))
	copy(id[:6], b[2:])
	r := rapid.Uint16().Draw(t, "rand_a")
	id[6] = 0x70 | byte(r>>8)&0x0f
	id[7] = byte(r)
	binary.BigEndian.PutUint64(id[8:], s.minted)
	id[8] = 0x80 | id[8]&0x3f
	return id
}

func (s *qmState) nextGen() uuidv7.UUID {
	if len(s.genIDs) == 0 {
		panic("qmState: generator called more often than the test planned")
	}
	id := s.genIDs[0]
	s.genIDs = s.genIDs[1:]
	return id
}

func (s *qmState) sortedIDs() []uuidv7.UUID {
	out := make([]uuidv7.UUID, 0, len(s.model))
	for id := range s.model {
		out = append(out, id)
	}
	slices.SortFunc(out, uuidv7.UUID.Compare)
	return out
}

func (s *qmState) openColls(t *rapid.T, declare []mIndex) error {
	var opts []storh.CollectionOption
	for _, ix := range declare {
		opts = append(opts, storh.WithIndex(ix.spec()))
	}
	opts = append(opts, storh.WithIDGenerator(s.nextGen))
	ix, err := s.db.Docs("ix", opts...)
	if err != nil {
		return err
	}
	if s.plain, err = s.db.Docs("plain", storh.WithIDGenerator(s.nextGen)); err != nil {
		t.Fatalf("Docs(plain): %v", err)
	}
	s.ix = ix
	return nil
}

func (s *qmState) open(t *rapid.T) {
	db, err := storh.Open(s.path, storh.WithoutSync())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	s.db = db
}

// drawRecordID is an existing id (an update) or a fresh one.
func (s *qmState) drawRecordID(t *rapid.T, ids []uuidv7.UUID) uuidv7.UUID {
	if len(ids) > 0 && rapid.IntRange(0, 2).Draw(t, "existing id") == 0 {
		return rapid.SampledFrom(ids).Draw(t, "id")
	}
	return s.mint(t)
}

// write is one drawn write: a record under an id (generated when gen), or
// a delete.
type mWrite struct {
	id     uuidv7.UUID
	gen    bool
	del    bool
	data   map[string]any // normalised
	stored any            // as written
}

func (s *qmState) drawWrite(t *rapid.T, allowDelete bool) mWrite {
	ids := s.sortedIDs()
	if allowDelete && rapid.IntRange(0, 4).Draw(t, "delete") == 0 {
		id := s.mint(t)
		if len(ids) > 0 && rapid.IntRange(0, 3).Draw(t, "delete existing") > 0 {
			id = rapid.SampledFrom(ids).Draw(t, "delete id")
		}
		return mWrite{id: id, del: true}
	}
	w := mWrite{data: qmRecord(t)}
	w.stored = qmWiden(t, w.data)
	w.id = s.drawRecordID(t, ids)
	return w
}

// apply applies writes to a copy of the model, one after another, and
// returns the errors one may be refused with (then nothing applies).
func (s *qmState) apply(ws []mWrite) (map[uuidv7.UUID]map[string]any, []uuidv7.UUID, []error) {
	next := make(map[uuidv7.UUID]map[string]any, len(s.model))
	for id, r := range s.model {
		next[id] = r
	}
	var gone []uuidv7.UUID
	for _, w := range ws {
		if w.del {
			if _, ok := next[w.id]; ok {
				gone = append(gone, w.id)
			}
			delete(next, w.id)
			continue
		}
		if refused := qmRefused(s.indexes, next, w.id, w.data); refused != nil {
			return nil, nil, refused
		}
		next[w.id] = w.data
	}
	return next, gone, nil
}

func (s *qmState) commit(next map[uuidv7.UUID]map[string]any, gone []uuidv7.UUID) {
	s.model = next
	s.gone = append(s.gone, gone...)
}

func (s *qmState) wantRefused(t *rapid.T, op string, err error, refused []error) {
	t.Helper()
	switch {
	case refused != nil && !slices.ContainsFunc(refused, func(want error) bool { return errors.Is(err, want) }):
		t.Fatalf("%s = %v; want one of %v", op, err, refused)
	case refused == nil && err != nil:
		t.Fatalf("%s: %v", op, err)
	case refused != nil:
		// Nothing half-written: the records are checked against the model
		// after the step; the index entries against the records here.
		if rep, err := s.db.Verify(nil); err != nil || rep.Problems != 0 {
			t.Fatalf("after a refused %s: Verify: %+v, %v", op, rep, err)
		}
	}
}

func (s *qmState) put(t *rapid.T) { s.write(t, false) }

func (s *qmState) update(t *rapid.T) {
	if len(s.model) == 0 {
		t.Skip("empty")
	}
	s.write(t, true)
}

func (s *qmState) write(t *rapid.T, existing bool) {
	w := s.drawWrite(t, false)
	gen := !existing && rapid.IntRange(0, 3).Draw(t, "generated id") == 0
	if existing {
		w.id = rapid.SampledFrom(s.sortedIDs()).Draw(t, "update id")
	}
	if gen {
		w.id = s.mint(t)
		s.genIDs = []uuidv7.UUID{w.id}
	}
	next, gone, refused := s.apply([]mWrite{w})
	var rec storh.Record
	var err error
	if gen {
		rec, err = s.ix.Put(w.stored)
	} else {
		rec, err = s.ix.PutWithID(w.id, w.stored)
	}
	s.wantRefused(t, fmt.Sprintf("Put(%v, %#v)", w.id, w.data), err, refused)
	if err != nil {
		s.genIDs = nil
		return
	}
	if rec.ID != w.id {
		t.Fatalf("Put stored %v; want %v", rec.ID, w.id)
	}
	if _, err := s.plain.PutWithID(w.id, w.stored); err != nil {
		t.Fatalf("plain PutWithID: %v", err)
	}
	s.commit(next, gone)
}

func (s *qmState) del(t *rapid.T) {
	w := s.drawWrite(t, true)
	if !w.del {
		w = mWrite{id: w.id, del: true}
	}
	next, gone, _ := s.apply([]mWrite{w})
	for _, c := range []*storh.Docs{s.ix, s.plain} {
		if err := c.Delete(w.id); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	s.commit(next, gone)
}

func (s *qmState) putMany(t *rapid.T) {
	n := rapid.IntRange(1, 5).Draw(t, "batch")
	var ws []mWrite
	var items []any
	s.genIDs = nil
	for range n {
		w := s.drawWrite(t, false)
		switch k := rapid.IntRange(0, 5).Draw(t, "batch id"); {
		case k == 0 && len(ws) > 0: // the same id twice in one batch
			w.id = rapid.SampledFrom(ws).Draw(t, "repeat").id
		case k == 1:
			w.id, w.gen = s.mint(t), true
			s.genIDs = append(s.genIDs, w.id)
		}
		ws = append(ws, w)
		if w.gen {
			items = append(items, w.stored)
		} else {
			items = append(items, storh.Entry{ID: w.id, Data: w.stored})
		}
	}
	next, gone, refused := s.apply(ws)
	recs, err := s.ix.PutMany(items)
	s.wantRefused(t, "PutMany", err, refused)
	if err != nil {
		return
	}
	var mirror []any
	for i, r := range recs {
		if r.ID != ws[i].id {
			t.Fatalf("PutMany item %d stored under %v; want %v", i, r.ID, ws[i].id)
		}
		mirror = append(mirror, storh.Entry{ID: r.ID, Data: ws[i].stored})
	}
	if _, err := s.plain.PutMany(mirror); err != nil {
		t.Fatalf("plain PutMany: %v", err)
	}
	s.commit(next, gone)
}

// tx writes through the handles of one Update, queries in it (which must
// see its own writes), and commits or rolls back.
func (s *qmState) tx(t *rapid.T) {
	n := rapid.IntRange(1, 3).Draw(t, "tx writes")
	var ws []mWrite
	for range n {
		ws = append(ws, s.drawWrite(t, true))
	}
	q := s.drawQuery(t)
	rollback := rapid.IntRange(0, 3).Draw(t, "rollback") == 0
	next, gone, refused := s.apply(ws)
	errRollback := errors.New("roll back")
	var failure error
	err := s.db.Update(func(tx *storh.Tx) error {
		ix, err := tx.Docs("ix")
		if err != nil {
			return err
		}
		plain, err := tx.Docs("plain")
		if err != nil {
			return err
		}
		for _, w := range ws {
			if w.del {
				if err := ix.Delete(w.id); err != nil {
					return err
				}
				if err := plain.Delete(w.id); err != nil {
					return err
				}
				continue
			}
			if _, err := ix.PutWithID(w.id, w.stored); err != nil {
				return err
			}
			if _, err := plain.PutWithID(w.id, w.stored); err != nil {
				return err
			}
		}
		if refused == nil {
			failure = s.checkQuery(t, q, next, ix, plain)
		}
		if failure != nil || rollback {
			return errRollback
		}
		return nil
	})
	if failure != nil {
		t.Fatalf("in Update: %v", failure)
	}
	switch {
	case refused != nil:
		s.wantRefused(t, "Update", err, refused)
	case rollback:
		if !errors.Is(err, errRollback) {
			t.Fatalf("Update = %v; want the callback's error", err)
		}
	case err != nil:
		t.Fatalf("Update: %v", err)
	default:
		s.commit(next, gone)
	}
}

// reopen closes and opens the database: declaring the same indexes, none
// (definitions persist), or one more, which is built over the data (and
// refused, leaving nothing behind, when it is unique and the data holds
// duplicates).
func (s *qmState) reopen(t *rapid.T) {
	if err := s.db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s.open(t)
	switch rapid.IntRange(0, 2).Draw(t, "reopen declares") {
	case 0:
		if err := s.openColls(t, s.indexes); err != nil {
			t.Fatalf("reopen with the same indexes: %v", err)
		}
	case 1:
		if err := s.openColls(t, nil); err != nil {
			t.Fatalf("reopen without indexes: %v", err)
		}
	case 2:
		var fresh []mIndex
		for _, ix := range qmIndexPool {
			if !slices.ContainsFunc(s.indexes, func(x mIndex) bool { return x.name == ix.name }) {
				fresh = append(fresh, ix)
			}
		}
		if len(fresh) == 0 {
			if err := s.openColls(t, nil); err != nil {
				t.Fatal(err)
			}
			return
		}
		add := rapid.SampledFrom(fresh).Draw(t, "new index")
		var refused []error
		for id, r := range s.model {
			others := map[uuidv7.UUID]map[string]any{}
			for o, rr := range s.model {
				if o.Compare(id) < 0 {
					others[o] = rr
				}
			}
			refused = append(refused, qmRefused([]mIndex{add}, others, id, r)...)
		}
		err := s.openColls(t, append(slices.Clone(s.indexes), add))
		s.wantRefused(t, fmt.Sprintf("declaring %v over the data", add.spec()), err, refused)
		if err != nil {
			if err := s.openColls(t, nil); err != nil {
				t.Fatal(err)
			}
			return
		}
		s.indexes = append(s.indexes, add)
	}
}

func (s *qmState) dropIndex(t *rapid.T) {
	if len(s.indexes) == 0 {
		t.Skip("no index")
	}
	i := rapid.IntRange(0, len(s.indexes)-1).Draw(t, "drop")
	if err := s.ix.DropIndex(s.indexes[i].name); err != nil {
		t.Fatalf("DropIndex(%s): %v", s.indexes[i].name, err)
	}
	s.indexes = slices.Delete(slices.Clone(s.indexes), i, i+1)
}

// ---- Queries. ----

var qmPaths = [][]string{{"a"}, {"b"}, {"c"}, {"n"}, {"n", "x"}, {"n", "y"}, {"tags"}, {"d.k"}, {"d", "k"}, {"zz"},
	{"items"}, {"items", "sku"}, {"items", "qty"}}

// qmListPaths are the paths ElemMatch is drawn on: lists of maps (items, n
// when it is one), of scalars (tags, a sku that is a list), and whatever
// else a record holds there; qmElemPaths are its condition's paths, from
// the element.
var (
	qmListPaths = [][]string{{"items"}, {"items"}, {"n"}, {"tags"}, {"items", "sku"}, {"a"}, {"zz"}}
	qmElemPaths = [][]string{{"sku"}, {"qty"}, {"x"}, {"zz"}}
)

func (s *qmState) drawValue(t *rapid.T, path []string) any {
	if len(s.model) > 0 && rapid.IntRange(0, 2).Draw(t, "value from a record") == 0 {
		ids := s.sortedIDs()
		rec := s.model[rapid.SampledFrom(ids).Draw(t, "value record")]
		if vals, _ := qmReach(rec, path); len(vals) > 0 {
			v := vals[rapid.IntRange(0, len(vals)-1).Draw(t, "reached value")]
			if l, isList := v.([]any); isList && len(l) > 0 && rapid.Bool().Draw(t, "an element") {
				return l[rapid.IntRange(0, len(l)-1).Draw(t, "element")]
			}
			return v
		}
	}
	return qmValue(t, "query value", 1, true)
}

func (s *qmState) drawBound(t *rapid.T, path []string) any {
	for range 4 {
		if v := s.drawValue(t, path); qmClass(v) != 0 || qmNaN(v) {
			return v
		}
	}
	return rapid.SampledFrom(qmNumbers).Draw(t, "bound")
}

// drawCond draws a condition; within is the path of the list an ElemMatch
// around it is on (nil at the top), whose elements its paths start from.
func (s *qmState) drawCond(t *rapid.T, depth int, within []string) *mCond {
	if depth < 3 && rapid.IntRange(0, 9).Draw(t, "composite") < 3 {
		switch op := rapid.SampledFrom([]string{"and", "or", "not", "elemmatch"}).Draw(t, "logic"); op {
		case "not":
			return &mCond{op: op, kids: []*mCond{s.drawCond(t, depth+1, within)}}
		case "elemmatch":
			paths := qmListPaths
			if within != nil {
				paths = qmElemPaths
			}
			path := rapid.SampledFrom(paths).Draw(t, "list path")
			c := &mCond{op: op, path: path, dotted: rapid.Bool().Draw(t, "dotted")}
			c.kids = []*mCond{s.drawCond(t, depth+1, slices.Concat(within, path))}
			return c
		default:
			n := rapid.IntRange(0, 3).Draw(t, "kids")
			c := &mCond{op: op}
			for range n {
				c.kids = append(c.kids, s.drawCond(t, depth+1, within))
			}
			return c
		}
	}
	var path []string
	if within == nil {
		path = rapid.SampledFrom(qmPaths).Draw(t, "path")
		if s.lastPath != nil && rapid.IntRange(0, 2).Draw(t, "same path") == 0 {
			path = s.lastPath // several conditions on one field
		}
		s.lastPath = path
	} else {
		path = rapid.SampledFrom(qmElemPaths).Draw(t, "element path")
	}
	// Values are drawn from what the records hold there: through the
	// lists an ElemMatch is on, for a condition on their elements.
	from := slices.Concat(within, path)
	c := &mCond{op: rapid.SampledFrom([]string{"eq", "neq", "in", "notin", "gt", "gte", "lt", "lte", "between", "prefix", "exists", "missing", "contains"}).Draw(t, "op"), path: path}
	c.dotted = rapid.Bool().Draw(t, "dotted")
	switch c.op {
	case "eq", "neq", "contains":
		c.vals = []any{s.drawValue(t, from)}
	case "in", "notin":
		for range rapid.IntRange(0, 3).Draw(t, "in values") {
			c.vals = append(c.vals, s.drawValue(t, from))
		}
	case "gt", "gte", "lt", "lte":
		c.vals = []any{s.drawBound(t, from)}
	case "between":
		c.vals = []any{s.drawBound(t, from), s.drawBound(t, from)}
	case "prefix":
		c.prefix = rapid.SampledFrom([]string{"", "a", "ab", "abc", "b", "a\x00", "A", "1"}).Draw(t, "prefix")
	}
	for _, v := range c.vals {
		c.widen = append(c.widen, qmWiden(t, v))
	}
	return c
}

func (s *qmState) drawCursor(t *rapid.T, ordered bool) *mCursor {
	c := &mCursor{}
	ids := s.sortedIDs()
	switch k := rapid.IntRange(0, 9).Draw(t, "cursor id"); {
	case k < 6 && len(ids) > 0:
		c.id = rapid.SampledFrom(ids).Draw(t, "cursor existing")
	case k < 8 && len(s.gone) > 0:
		c.id = rapid.SampledFrom(s.gone).Draw(t, "cursor deleted")
	case k == 8:
		c.id = rapid.SampledFrom([]uuidv7.UUID{{}, maxUUID}).Draw(t, "cursor edge")
	default:
		c.id = s.mint(t)
	}
	if ordered && rapid.IntRange(0, 2).Draw(t, "cursor value") == 0 {
		c.hasValue = true
		if _, ok := s.model[c.id]; ok && rapid.Bool().Draw(t, "its own value") {
			c.own = true
			return c
		}
		c.value = qmValue(t, "cursor value", 1, true)
		c.widen = qmWiden(t, c.value)
	}
	return c
}

func (s *qmState) drawQuery(t *rapid.T) *mQuery {
	q := &mQuery{}
	s.lastPath = nil
	for range rapid.IntRange(0, 2).Draw(t, "wheres") {
		q.where = append(q.where, s.drawCond(t, 0, nil))
	}
	if len(q.where) > 0 && q.where[0].op == "eq" && len(q.where[0].path) == 1 && rapid.Bool().Draw(t, "WhereEqual") {
		q.equal = true
	}
	if rapid.Bool().Draw(t, "ordered") {
		q.order = rapid.SampledFrom(qmPaths).Draw(t, "order path")
		q.orderRaw = strings.Join(q.order, ".")
		if q.orderRaw == "d.k" {
			q.order = []string{"d", "k"} // OrderBy splits dots, as Field does
		}
		q.desc = rapid.Bool().Draw(t, "desc")
	}
	if rapid.IntRange(0, 2).Draw(t, "after") == 0 {
		q.after = s.drawCursor(t, q.order != nil)
	}
	if rapid.IntRange(0, 3).Draw(t, "before") == 0 {
		q.before = s.drawCursor(t, q.order != nil)
	}
	// A value cursor of a record's own value: fill it in now that the
	// order path is known.
	for _, c := range []*mCursor{q.after, q.before} {
		if c != nil && c.own {
			v, _ := qmLookup(s.model[c.id], q.order)
			c.value, c.widen = v, qmWiden(t, v)
		}
	}
	if rapid.IntRange(0, 4).Draw(t, "time") == 0 {
		q.time = true
		q.from = qmBaseMs + rapid.Int64Range(-1, 5).Draw(t, "from")
		q.to = qmBaseMs + rapid.Int64Range(-1, 5).Draw(t, "until")
	}
	if rapid.Bool().Draw(t, "limit") {
		q.limit = rapid.IntRange(1, 6).Draw(t, "limit n")
	}
	q.reverse = rapid.Bool().Draw(t, "reverse")
	return q
}

// checkQuery runs q on both collections, through every terminal, and
// compares with the model; it returns the first disagreement.
func (s *qmState) checkQuery(t *rapid.T, q *mQuery, model map[uuidv7.UUID]map[string]any, colls ...*storh.Docs) error {
	s.queries++
	want, wantErr := q.run(model)
	built := q.build()
	for i, c := range colls {
		label := []string{"indexed", "plain"}[i]
		recs, err := streamErr(c.Stream(built))
		if wantErr != nil {
			if !errors.Is(err, wantErr) {
				return fmt.Errorf("%s: %v: Stream = %d records, %v; want %v", label, built, len(recs), err, wantErr)
			}
			for _, run := range []func() error{
				func() error { _, err := c.Find(built); return err },
				func() error { _, err := c.First(built); return err },
				func() error { _, err := c.CountMatching(built); return err },
			} {
				if err := run(); !errors.Is(err, wantErr) {
					return fmt.Errorf("%s: %v: %v; want %v", label, built, err, wantErr)
				}
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %v: Stream: %v", label, built, err)
		}
		if got := ids(recs); !sameIDs(got, want) {
			return fmt.Errorf("%s: %v:\n got  %v\n want %v", label, built, qmShort(got), qmShort(want))
		}
		for _, r := range recs {
			if !qmSame(map[string]any(r.Data()), model[r.ID]) {
				return fmt.Errorf("%s: %v: record %v is %#v; want %#v", label, built, r.ID, r.Data(), model[r.ID])
			}
		}
		n, err := c.CountMatching(built)
		if err != nil || n != len(want) {
			return fmt.Errorf("%s: %v: CountMatching = %d, %v; want %d", label, built, n, err, len(want))
		}
		first, err := c.First(built)
		switch {
		case len(want) == 0 && !errors.Is(err, storh.ErrNotFound):
			return fmt.Errorf("%s: %v: First = %v, %v; want ErrNotFound", label, built, first.ID, err)
		case len(want) > 0 && (err != nil || first.ID != want[0]):
			return fmt.Errorf("%s: %v: First = %v, %v; want %v", label, built, first.ID, err, want[0])
		}
	}
	return nil
}

func qmShort(ids []uuidv7.UUID) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		s := id.String()
		parts[i] = s[len(s)-6:]
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// checkAll compares every record of both collections with the model, and
// the indexes with the model's.
func (s *qmState) checkAll(t *rapid.T) {
	want := s.sortedIDs()
	for i, c := range []*storh.Docs{s.ix, s.plain} {
		recs, err := streamErr(c.Stream(query.All()))
		if err != nil {
			t.Fatalf("Stream(All): %v", err)
		}
		if !sameIDs(ids(recs), want) {
			t.Fatalf("collection %d holds %v; want %v", i, qmShort(ids(recs)), qmShort(want))
		}
		for _, r := range recs {
			if !qmSame(map[string]any(r.Data()), s.model[r.ID]) {
				t.Fatalf("collection %d: record %v is %#v; want %#v", i, r.ID, r.Data(), s.model[r.ID])
			}
		}
	}
	infos, err := s.ix.Indexes()
	if err != nil {
		t.Fatalf("Indexes: %v", err)
	}
	if len(infos) != len(s.indexes) {
		t.Fatalf("Indexes = %v; want %v", infos, s.indexes)
	}
	for _, ix := range s.indexes {
		i := slices.IndexFunc(infos, func(in storh.IndexInfo) bool { return in.Name == ix.name })
		if i < 0 {
			t.Fatalf("index %s missing from %v", ix.name, infos)
		}
		in := infos[i]
		if in.Unique != ix.unique || in.Building || len(in.Paths) != len(ix.paths) {
			t.Fatalf("index %s: %+v", ix.name, in)
		}
		for j, p := range ix.paths {
			if !slices.Equal(in.Paths[j], strings.Split(p, ".")) {
				t.Fatalf("index %s: paths %v", ix.name, in.Paths)
			}
		}
		if want := qmEntries(ix, s.model); int64(in.Entries) != want {
			t.Fatalf("index %s has %d entries; want %d", ix.name, in.Entries, want)
		}
	}
}

func TestQueryModel(t *testing.T) {
	dir := t.TempDir()
	run := 0
	queries := 0
	outer := t
	rapid.Check(t, func(t *rapid.T) {
		run++
		s := &qmState{path: filepath.Join(dir, fmt.Sprintf("qm-%d.db", run)), model: map[uuidv7.UUID]map[string]any{}}
		if onPostgres {
			s.path = pgtest.SchemaURL(outer) // a fresh schema for each run
		}
		defer os.Remove(s.path)
		s.open(t)
		defer func() { s.db.Close() }()
		defer func() { queries += s.queries }()

		// A random index set, declared before any record exists (shrinking
		// towards none).
		for _, ix := range qmIndexPool {
			p := 4
			if ix.unique {
				p = 6
			}
			if rapid.IntRange(0, p-1).Draw(t, "declare "+ix.name) == p-1 {
				s.indexes = append(s.indexes, ix)
			}
		}
		if err := s.openColls(t, s.indexes); err != nil {
			t.Fatalf("Docs: %v", err)
		}
		// An empty record, which no index refuses, so that the collections
		// exist; then a first batch.
		first := s.mint(t)
		for _, c := range []*storh.Docs{s.ix, s.plain} {
			if _, err := c.PutWithID(first, map[string]any{}); err != nil {
				t.Fatalf("PutWithID(%v, {}): %v", first, err)
			}
		}
		s.model[first] = map[string]any{}
		for range rapid.IntRange(1, 8).Draw(t, "initial") {
			s.put(t)
		}

		t.Repeat(map[string]func(*rapid.T){
			"put":        s.put,
			"update":     s.update,
			"delete":     s.del,
			"put many":   s.putMany,
			"tx":         s.tx,
			"reopen":     s.reopen,
			"drop index": s.dropIndex,
			"": func(t *rapid.T) {
				s.checkAll(t)
				for range 3 {
					if err := s.checkQuery(t, s.drawQuery(t), s.model, s.ix, s.plain); err != nil {
						t.Fatal(err)
					}
				}
			},
		})
		rep, err := s.db.Verify(nil)
		if err != nil || rep.Problems != 0 {
			t.Fatalf("Verify: %+v, %v", rep, err)
		}
	})
	t.Logf("%d queries checked against the model", queries)
}
