package query

import (
	"fmt"
	"strings"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// ErrInvalidQuery is returned, by every terminal that runs the query and by
// Validate, when a query cannot run: a limit below 1, an empty field name or
// path, a value that cannot be stored, a range bound of a type ranges do not
// compare, an unknown direction; and, while it runs, an OrderBy path that
// goes through a list in a matching record. The storh package re-exports
// it as storh.ErrInvalidQuery.
var ErrInvalidQuery = plan.ErrInvalidQuery

// MaxFieldLength bounds field names and paths in conditions; longer names
// cannot match anything a user would store and are most likely a bug.
const MaxFieldLength = 1024

// The limits of a condition, the same whether it is built in Go, parsed
// from text or read from JSON, so that a condition one entry point takes
// every other takes too. They bound the work a request can ask of a
// parser and of the planner; real conditions are far smaller.
const (
	// MaxCondBytes bounds the text or JSON of a condition.
	MaxCondBytes = 64 << 10
	// MaxCondDepth bounds how deeply and, or and not nest: a lone field
	// test is 1 level deep, not a=1 is 2.
	MaxCondDepth = 64
	// MaxCondNodes bounds the conditions in one: field tests, and, or
	// and not.
	MaxCondNodes = 1024
)

// Direction is the direction of OrderBy.
type Direction uint8

const (
	// Asc sorts ascending by the total order of values (see OrderBy).
	Asc Direction = iota + 1
	// Desc sorts descending: the exact reverse of Asc, ties included.
	Desc
)

func (d Direction) String() string {
	switch d {
	case Asc:
		return "Asc"
	case Desc:
		return "Desc"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// cursor is a keyset position given to After, Before, AfterValue or
// BeforeValue.
type cursor struct {
	id       uuidv7.UUID
	value    any
	hasValue bool
	set      bool
	err      error
}

// Query describes which records of one collection to read and in which order.
// It is an immutable value: every modifier returns a changed copy. The zero
// value is not valid: start from All.
type Query struct {
	after, before cursor

	fromMs, untilMs int64
	hasTime         bool

	limit    int
	hasLimit bool

	reverse bool
	conds   []Cond

	orderPath FieldRef
	orderText string
	dir       Direction
	hasOrder  bool

	requireIndex bool
	onError      func(id uuidv7.UUID, err error)
	valid        bool
}

// All returns the query matching every record, oldest first.
func All() Query { return Query{valid: true} }

// After restricts the query to records after id. In id order (no OrderBy)
// that is ids strictly greater than id, whatever the direction of reading.
// With OrderBy it is the records after that record's position in the sort
// order (its current field value, then its id): a keyset cursor, so pages of
// Limit(n) that continue After the last record of the previous page walk the
// whole sequence with no gaps or repeats. A cursor record that no longer
// exists fails the query with ErrNotFound. Calling it again replaces the
// bound.
func (q Query) After(id uuidv7.UUID) Query {
	q.after = cursor{id: id, set: true}
	return q
}

// Before restricts the query to records before id, the mirror of After.
// With Reverse in id order, a newest-first page continues with
// Before(lastSeen).
func (q Query) Before(id uuidv7.UUID) Query {
	q.before = cursor{id: id, set: true}
	return q
}

// AfterValue is After with the cursor record's field value given, so no
// lookup is needed (and the record need not exist any more): the records
// after (value, id) in the OrderBy sequence. It needs OrderBy.
func (q Query) AfterValue(value any, id uuidv7.UUID) Query {
	q.after = valueCursor("AfterValue", value, id)
	return q
}

// BeforeValue is Before with the cursor record's field value given.
func (q Query) BeforeValue(value any, id uuidv7.UUID) Query {
	q.before = valueCursor("BeforeValue", value, id)
	return q
}

func valueCursor(name string, value any, id uuidv7.UUID) cursor {
	c := cursor{id: id, set: true, hasValue: true}
	n, err := mpack.Normalize(value)
	if err != nil {
		c.err = fmt.Errorf("%w: %s: a value of type %T cannot be stored", ErrInvalidQuery, name, value)
	}
	c.value = n
	return c
}

// TimeRangeMs restricts the query to records created between fromMs and
// untilMs, both inclusive, in Unix milliseconds, in any order. An end beyond
// the span ids can carry (0 to 2^48-1) is clamped, so math.MinInt64 and
// math.MaxInt64 give open ends; an inverted range, or one wholly outside
// that span, matches nothing.
func (q Query) TimeRangeMs(fromMs, untilMs int64) Query {
	q.fromMs, q.untilMs, q.hasTime = fromMs, untilMs, true
	return q
}

// Where keeps records that satisfy every one of conds, in addition to the
// conditions already on the query.
func (q Query) Where(conds ...Cond) Query {
	// Copy so that queries derived from a shared base never share a backing array.
	all := make([]Cond, len(q.conds), len(q.conds)+len(conds))
	copy(all, q.conds)
	q.conds = append(all, conds...)
	return q
}

// WhereEqual keeps records whose top-level field, named literally (a dot is
// part of the name), equals value under strict typed equality. It is
// Where(FieldPath(field).Eq(value)).
func (q Query) WhereEqual(field string, value any) Query {
	return q.Where(FieldPath(field).Eq(value))
}

// OrderBy sorts the results by the field at a dotted path (as Field), in
// one total order over all values: missing = null < false < true < numbers
// (by exact numeric value; an integer before a float of the same value;
// NaN first) < strings (bytewise) < bytes < times < lists (element by
// element) < maps (entry by entry, keys in order). Ties are broken by id, in
// the direction of the sort, so Desc is the exact reverse of Asc. Without
// OrderBy results are in id order. Calling it again replaces the order.
func (q Query) OrderBy(path string, d Direction) Query {
	q.orderPath, q.orderText, q.dir, q.hasOrder = Field(path), path, d, true
	return q
}

// OrderByField is OrderBy for a field given as a FieldRef, such as
// FieldPath("a.b") for a top-level key that contains a dot.
func (q Query) OrderByField(f FieldRef, d Direction) Query {
	q.orderPath, q.orderText, q.dir, q.hasOrder = f, f.name(), d, true
	if len(f.path) == 0 {
		q.orderText = ""
	}
	return q
}

// Limit stops the query after n records. n < 1 makes the query invalid: it
// fails with ErrInvalidQuery when run.
func (q Query) Limit(n int) Query {
	q.limit, q.hasLimit = n, true
	return q
}

// Reverse returns the sequence last to first: newest first in id order, the
// opposite direction of OrderBy's. After, Before and TimeRangeMs keep their
// meaning; Limit counts from the new first record.
func (q Query) Reverse() Query {
	q.reverse = true
	return q
}

// RequireIndex makes the query fail with storh.ErrNoIndex rather than read
// the whole collection: it must be answered through an index, or be bounded
// by id or creation time.
func (q Query) RequireIndex() Query {
	q.requireIndex = true
	return q
}

// ContinueOnError makes a stream skip records that cannot be read (a failed
// checksum or decode) and report each to fn instead of stopping with the
// error. fn runs on the consuming goroutine, between records.
func (q Query) ContinueOnError(fn func(id uuidv7.UUID, err error)) Query {
	q.onError = fn
	return q
}

// Validate reports why the query cannot run, or nil.
func (q Query) Validate() error {
	_, err := q.compile()
	return err
}

func init() { plan.Compile = compileAny }

func compileAny(v any) (*plan.Spec, error) {
	q, ok := v.(Query)
	if !ok {
		return nil, fmt.Errorf("%w: %T is not a query.Query", ErrInvalidQuery, v)
	}
	return q.compile()
}

// compile validates the query and turns it into the Spec the engine runs.
func (q Query) compile() (*plan.Spec, error) {
	if !q.valid {
		return nil, fmt.Errorf("%w: zero Query; start from query.All()", ErrInvalidQuery)
	}
	if q.hasLimit && q.limit < 1 {
		return nil, fmt.Errorf("%w: Limit(%d): the limit must be at least 1", ErrInvalidQuery, q.limit)
	}
	s := &plan.Spec{Reverse: q.reverse, OnError: q.onError, RequireIndex: q.requireIndex}
	if q.hasLimit {
		s.Limit = q.limit
	}
	kids := make([]*plan.Cond, 0, len(q.conds))
	for _, c := range q.conds {
		if err := c.check("Where"); err != nil {
			return nil, err
		}
		kids = append(kids, c.node)
	}
	switch len(kids) {
	case 0:
	case 1:
		s.Cond = kids[0]
	default:
		s.Cond = &plan.Cond{Op: plan.OpAnd, Kids: kids}
	}
	if q.hasOrder {
		switch {
		case q.orderText == "":
			return nil, fmt.Errorf("%w: OrderBy needs a field name", ErrInvalidQuery)
		case q.orderPath.err != nil:
			return nil, fmt.Errorf("%w (in OrderBy)", q.orderPath.err)
		case q.dir != Asc && q.dir != Desc:
			return nil, fmt.Errorf("%w: OrderBy(%q, %v): the direction must be query.Asc or query.Desc", ErrInvalidQuery, q.orderText, q.dir)
		}
		s.Order, s.Desc = q.orderPath.path, q.dir == Desc
	}
	for _, c := range []*cursor{&q.after, &q.before} {
		if c.err != nil {
			return nil, c.err
		}
		if c.hasValue && !q.hasOrder {
			return nil, fmt.Errorf("%w: AfterValue and BeforeValue position a cursor in an OrderBy sequence; add OrderBy, or use After/Before for ids", ErrInvalidQuery)
		}
	}
	lo, hi, ok := q.keyRange()
	s.Lo, s.Hi, s.Empty = lo, hi, !ok
	if q.hasOrder {
		var err error
		if s.After, err = q.after.spec(); err == nil {
			s.Before, err = q.before.spec()
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (c cursor) spec() (*plan.Cursor, error) {
	if !c.set {
		return nil, nil
	}
	pc := &plan.Cursor{ID: c.id, Lookup: !c.hasValue}
	if c.hasValue {
		k, err := order.Append(nil, c.value)
		if err != nil {
			return nil, fmt.Errorf("%w: cursor value: %v", ErrInvalidQuery, err)
		}
		pc.Key = k
	}
	return pc, nil
}

// keyRange returns the inclusive id range [lo, hi] that holds every record
// the query can match, and false when the range is empty (so nothing is
// read). After and Before narrow it only in id order; with OrderBy they are
// cursors in the sort order instead.
func (q Query) keyRange() (lo, hi uuidv7.UUID, ok bool) {
	hi = maxKey
	if q.after.set && !q.hasOrder {
		var more bool
		if lo, more = plan.Next(q.after.id); !more {
			return lo, hi, false
		}
	}
	if q.before.set && !q.hasOrder {
		var more bool
		if hi, more = plan.Prev(q.before.id); !more {
			return lo, hi, false
		}
	}
	if q.hasTime {
		if q.fromMs > q.untilMs || q.untilMs < 0 || q.fromMs > uuidv7.MaxTimestampMs {
			// Inverted, or wholly outside the ids' time span: clamping
			// would turn it into a window at one end.
			return lo, hi, false
		}
		if min := uuidv7.MinForTimestampMs(q.fromMs); min.Compare(lo) > 0 {
			lo = min
		}
		if max := uuidv7.MaxForTimestampMs(q.untilMs); max.Compare(hi) < 0 {
			hi = max
		}
	}
	return lo, hi, lo.Compare(hi) <= 0
}

// String describes the query in a stable, readable form (used by Explain
// output and error messages).
func (q Query) String() string {
	var b strings.Builder
	b.WriteString("All()")
	for _, c := range []struct {
		name string
		c    cursor
	}{{"After", q.after}, {"Before", q.before}} {
		switch {
		case !c.c.set:
		case c.c.hasValue:
			fmt.Fprintf(&b, ".%sValue(%s, %s)", c.name, valueText(c.c.value), c.c.id)
		default:
			fmt.Fprintf(&b, ".%s(%s)", c.name, c.c.id)
		}
	}
	if q.hasTime {
		fmt.Fprintf(&b, ".TimeRangeMs(%d, %d)", q.fromMs, q.untilMs)
	}
	for _, c := range q.conds {
		fmt.Fprintf(&b, ".Where(%s)", c)
	}
	if q.hasOrder {
		fmt.Fprintf(&b, ".OrderBy(%q, %v)", q.orderText, q.dir)
	}
	if q.reverse {
		b.WriteString(".Reverse()")
	}
	if q.hasLimit {
		fmt.Fprintf(&b, ".Limit(%d)", q.limit)
	}
	if q.requireIndex {
		b.WriteString(".RequireIndex()")
	}
	return b.String()
}

var maxKey = uuidv7.UUID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
