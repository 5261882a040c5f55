package query

import (
	"errors"
	"fmt"
	"strings"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// ErrInvalidQuery is returned (as the first error of a stream, or by
// Validate) when a query cannot run: a limit below 1, an empty field name, or
// a WhereEqual value of a type that cannot be stored. The storh package
// re-exports it as storh.ErrInvalidQuery.
var ErrInvalidQuery = errors.New("storh: invalid query")

// MaxFieldLength bounds field names in conditions; longer names cannot match
// anything a user would store and are most likely a bug.
const MaxFieldLength = 1024

// op is the comparison operator of a condition.
type op uint8

const (
	// opEq matches records whose field is present and equal to the value
	// under strict typed equality (1 ≠ 1.0 ≠ "1").
	opEq op = iota + 1
)

func (o op) String() string {
	switch o {
	case opEq:
		return "="
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// condition is one filter on a top-level field. value holds the normalised
// form of what the user passed (see the mpack normalisation: integers as
// int64 or uint64, floats as float64, lists as []any, maps as map[string]any).
type condition struct {
	field string
	op    op
	value any
	err   error
}

// Query describes which records of one collection to read and in which order.
// The zero value is not valid: start from All.
type Query struct {
	after, before       uuidv7.UUID
	hasAfter, hasBefore bool

	fromMs, untilMs int64
	hasTime         bool

	limit    int
	hasLimit bool

	reverse bool
	conds   []condition
	onError func(id uuidv7.UUID, err error)
	valid   bool
}

// All returns the query matching every record, oldest first.
func All() Query { return Query{valid: true} }

// After restricts the query to ids strictly greater than id. Calling it again
// replaces the previous bound. It keeps its meaning under Reverse.
func (q Query) After(id uuidv7.UUID) Query {
	q.after, q.hasAfter = id, true
	return q
}

// Before restricts the query to ids strictly less than id. Calling it again
// replaces the previous bound. With Reverse, a newest-first page continues
// with Before(lastSeen).
func (q Query) Before(id uuidv7.UUID) Query {
	q.before, q.hasBefore = id, true
	return q
}

// TimeRangeMs restricts the query to records created between fromMs and
// untilMs, both inclusive, in Unix milliseconds. An end beyond the span ids
// can carry (0 to 2^48-1) is clamped, so math.MinInt64 and math.MaxInt64 give
// open ends; an inverted range, or one wholly outside that span, matches
// nothing.
func (q Query) TimeRangeMs(fromMs, untilMs int64) Query {
	q.fromMs, q.untilMs, q.hasTime = fromMs, untilMs, true
	return q
}

// WhereEqual keeps records whose top-level field equals value under strict
// typed equality: integers compare by value whatever their width, floats by
// value, but 1, 1.0 and "1" are three different values. A nil value matches a
// field that is present and null, never a missing field. Several conditions
// must all hold.
func (q Query) WhereEqual(field string, value any) Query {
	c := condition{field: field, op: opEq}
	switch {
	case field == "":
		c.err = fmt.Errorf("%w: WhereEqual needs a field name", ErrInvalidQuery)
	case len(field) > MaxFieldLength:
		c.err = fmt.Errorf("%w: field name is %d bytes, the limit is %d", ErrInvalidQuery, len(field), MaxFieldLength)
	default:
		v, err := mpack.Normalize(value)
		if err != nil {
			c.err = fmt.Errorf("%w: WhereEqual(%q): value of type %T cannot be stored, so cannot match", ErrInvalidQuery, field, value)
		}
		c.value = v
	}
	// Copy so that queries derived from a shared base never share a backing array.
	conds := make([]condition, len(q.conds), len(q.conds)+1)
	copy(conds, q.conds)
	q.conds = append(conds, c)
	return q
}

// Limit stops the query after n records. n < 1 makes the query invalid: it
// fails with ErrInvalidQuery when run.
func (q Query) Limit(n int) Query {
	q.limit, q.hasLimit = n, true
	return q
}

// Reverse returns records newest first. After, Before and TimeRangeMs keep
// their meaning.
func (q Query) Reverse() Query {
	q.reverse = true
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
	if !q.valid {
		return fmt.Errorf("%w: zero Query; start from query.All()", ErrInvalidQuery)
	}
	if q.hasLimit && q.limit < 1 {
		return fmt.Errorf("%w: Limit(%d): the limit must be at least 1", ErrInvalidQuery, q.limit)
	}
	for _, c := range q.conds {
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

// keyRange returns the inclusive key range [lo, hi] that holds every record
// the query can match, and false when the range is empty (so nothing is
// read).
func (q Query) keyRange() (lo, hi uuidv7.UUID, ok bool) {
	hi = maxKey
	if q.hasAfter {
		var more bool
		if lo, more = plan.Next(q.after); !more {
			return lo, hi, false
		}
	}
	if q.hasBefore {
		var more bool
		if hi, more = plan.Prev(q.before); !more {
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

// match reports whether a stored record payload (one msgpack map) satisfies
// every condition. It reads only the bytes of the fields it compares and
// allocates nothing for scalar values. An error means the payload is not
// well-formed msgpack.
func (q Query) match(payload []byte) (bool, error) {
	for i := range q.conds {
		c := &q.conds[i]
		raw, ok, err := mpack.Field(payload, c.field)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, nil
		}
		eq, err := mpack.EqualRaw(raw, c.value)
		if err != nil {
			return false, err
		}
		if !eq {
			return false, nil
		}
	}
	return true, nil
}

// String describes the query in a stable, readable form (used by Explain
// output and error messages).
func (q Query) String() string {
	var b strings.Builder
	b.WriteString("All()")
	if q.hasAfter {
		fmt.Fprintf(&b, ".After(%s)", q.after)
	}
	if q.hasBefore {
		fmt.Fprintf(&b, ".Before(%s)", q.before)
	}
	if q.hasTime {
		fmt.Fprintf(&b, ".TimeRangeMs(%d, %d)", q.fromMs, q.untilMs)
	}
	for _, c := range q.conds {
		fmt.Fprintf(&b, ".Where(%q %s %#v)", c.field, c.op, c.value)
	}
	if q.reverse {
		b.WriteString(".Reverse()")
	}
	if q.hasLimit {
		fmt.Fprintf(&b, ".Limit(%d)", q.limit)
	}
	return b.String()
}

var maxKey = uuidv7.UUID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

func init() { plan.Compile = compile }

// compile turns a Query into the plan the engine runs.
func compile(v any) (plan.Plan, error) {
	q, ok := v.(Query)
	if !ok {
		return plan.Plan{}, fmt.Errorf("%w: %T is not a query.Query", ErrInvalidQuery, v)
	}
	if err := q.Validate(); err != nil {
		return plan.Plan{}, err
	}
	p := plan.Plan{Reverse: q.reverse, OnError: q.onError}
	lo, hi, ok := q.keyRange()
	p.Lo, p.Hi, p.Empty = lo, hi, !ok
	if q.hasLimit {
		p.Limit = q.limit
	}
	if len(q.conds) > 0 {
		p.Match = q.match
	}
	return p, nil
}
