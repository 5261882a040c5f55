package query

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/order"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// FieldRef addresses one field of a record, possibly inside nested maps.
// Get one from Field or FieldPath; its methods make conditions.
type FieldRef struct {
	path []string
	err  error
}

// Field addresses the field at a dotted path: "status" is a top-level
// field, "author.name" the key "name" of the map under "author". A path
// only walks maps: through a list, or through anything but a map, the
// field is missing. For keys that contain a dot, use FieldPath.
func Field(path string) FieldRef {
	return fieldRef(strings.Split(path, "."), path)
}

// FieldPath addresses a field by its literal path segments, for keys that
// contain dots: FieldPath("a.b") is the top-level key "a.b", FieldPath("a",
// "b") is the same as Field("a.b").
func FieldPath(segments ...string) FieldRef {
	return fieldRef(append([]string(nil), segments...), strings.Join(segments, "."))
}

func fieldRef(path []string, text string) FieldRef {
	f := FieldRef{path: path}
	size := 0
	for _, s := range path {
		size += len(s)
	}
	switch {
	case len(path) == 0 || size == 0:
		f.err = fmt.Errorf("%w: a condition needs a field name", ErrInvalidQuery)
	case size > MaxFieldLength:
		f.err = fmt.Errorf("%w: field name %.40q... is %d bytes, the limit is %d", ErrInvalidQuery, text, size, MaxFieldLength)
	case len(path) > mpack.MaxDepth:
		f.err = fmt.Errorf("%w: field path %.40q... has %d segments; records nest at most %d levels", ErrInvalidQuery, text, len(path), mpack.MaxDepth)
	default:
		for _, s := range path {
			if s == "" {
				f.err = fmt.Errorf("%w: field path %q has an empty segment", ErrInvalidQuery, text)
				break
			}
		}
	}
	return f
}

func (f FieldRef) name() string { return plan.PathString(f.path) }

// Path returns the field's path segments (a copy), and the error that makes
// the reference unusable (an empty name or segment), if any.
func (f FieldRef) Path() ([]string, error) { return append([]string(nil), f.path...), f.err }

// String renders the path: segments joined with dots, a segment that holds
// a dot quoted.
func (f FieldRef) String() string { return f.name() }

// Cond is a condition on a record's fields, made by the methods of FieldRef
// and combined with And, Or and Not. A Cond is an immutable value; the zero
// Cond is invalid.
type Cond struct {
	node *plan.Cond
	err  error
}

func (f FieldRef) leaf(op plan.Op, text string, values ...any) Cond {
	if f.err != nil {
		return Cond{err: f.err}
	}
	norm := make([]any, len(values))
	for i, v := range values {
		n, err := mpack.Normalize(v)
		if err != nil {
			return Cond{err: fmt.Errorf("%w: %s on %q: a value of type %T cannot be stored, so cannot match", ErrInvalidQuery, text, f.name(), v)}
		}
		norm[i] = n
	}
	return Cond{node: &plan.Cond{Op: op, Path: f.path, Values: norm}}
}

// Eq matches records whose field is present and equal to v under strict,
// typed equality: integers compare by value whatever their width, floats by
// value, but 1, 1.0 and "1" are three different values; lists and maps
// compare deeply; Eq(nil) matches a present null only; NaN equals nothing.
func (f FieldRef) Eq(v any) Cond {
	c := f.leaf(plan.OpEq, "Eq", v)
	if c.err == nil {
		c.node.Text = f.name() + " = " + show(c.node.Values[0])
		if isNaN(c.node.Values[0]) {
			c.node.Op = plan.OpFalse
		}
	}
	return c
}

// Neq matches records whose field is missing or not Eq to v.
func (f FieldRef) Neq(v any) Cond {
	c := f.leaf(plan.OpNeq, "Neq", v)
	if c.err == nil {
		c.node.Text = f.name() + " != " + show(c.node.Values[0])
	}
	return c
}

// In matches records whose field is Eq to one of vs. In() with no values
// matches nothing.
func (f FieldRef) In(vs ...any) Cond {
	c := f.leaf(plan.OpIn, "In", vs...)
	if c.err == nil {
		c.node.Text = f.name() + " in " + showList(c.node.Values)
		if len(vs) == 0 {
			c.node.Op = plan.OpFalse
		}
	}
	return c
}

// NotIn matches records whose field is missing or Eq to none of vs. NotIn()
// with no values matches every record.
func (f FieldRef) NotIn(vs ...any) Cond {
	c := f.leaf(plan.OpNotIn, "NotIn", vs...)
	if c.err == nil {
		c.node.Text = f.name() + " not in " + showList(c.node.Values)
		if len(vs) == 0 {
			c.node.Op = plan.OpTrue
		}
	}
	return c
}

// Gt matches records whose field is greater than v, compared only within
// v's type class: numbers (ints, uints and floats by exact numeric value),
// strings (bytewise), booleans (false < true), bytes (bytewise) or times.
// Values of other classes, null and a missing field never match, nor does
// NaN. v itself must be of one of those classes.
func (f FieldRef) Gt(v any) Cond { return f.rangeCond("Gt", ">", v, noBound, false, true) }

// Gte is Gt or equal in value (an integer 5 and a float 5.0 both match
// Gte(5)).
func (f FieldRef) Gte(v any) Cond { return f.rangeCond("Gte", ">=", v, noBound, true, true) }

// Lt matches records whose field is less than v, within v's type class (see
// Gt).
func (f FieldRef) Lt(v any) Cond { return f.rangeCond("Lt", "<", noBound, v, true, false) }

// Lte is Lt or equal in value.
func (f FieldRef) Lte(v any) Cond { return f.rangeCond("Lte", "<=", noBound, v, true, true) }

// Between matches records whose field lies between lo and hi, both
// inclusive, within their type class (see Gt); lo and hi must be of the
// same class. Reversed bounds match nothing.
func (f FieldRef) Between(lo, hi any) Cond {
	return f.rangeCond("Between", "between", lo, hi, true, true)
}

// Prefix matches records whose field is a string starting with s (bytewise).
// Prefix("") matches every string.
func (f FieldRef) Prefix(s string) Cond {
	if f.err != nil {
		return Cond{err: f.err}
	}
	lo := order.StringPrefix(nil, s)
	hi := order.PrefixEnd(lo)
	if hi == nil {
		hi = order.ClassStart(nil, order.TagString+1)
	}
	return Cond{node: &plan.Cond{Op: plan.OpRange, Path: f.path, Values: []any{s}, Lo: lo, Hi: hi,
		Text: f.name() + " prefix " + strconv.Quote(s)}}
}

// Exists matches records in which the field is present, null included.
func (f FieldRef) Exists() Cond {
	if f.err != nil {
		return Cond{err: f.err}
	}
	return Cond{node: &plan.Cond{Op: plan.OpExists, Path: f.path, Text: f.name() + " exists"}}
}

// Missing matches records in which the field is absent.
func (f FieldRef) Missing() Cond {
	if f.err != nil {
		return Cond{err: f.err}
	}
	return Cond{node: &plan.Cond{Op: plan.OpMissing, Path: f.path, Text: f.name() + " missing"}}
}

// Contains matches records whose field is a list holding an element Eq to
// v.
func (f FieldRef) Contains(v any) Cond {
	c := f.leaf(plan.OpContains, "Contains", v)
	if c.err == nil {
		c.node.Text = f.name() + " contains " + show(c.node.Values[0])
		if isNaN(c.node.Values[0]) {
			c.node.Op = plan.OpFalse
		}
	}
	return c
}

// rangeCond compiles a range operator into the half-open interval of order
// keys it matches. lo or hi is noBound for an open end (nil is a bound,
// an invalid one); incLo and incHi say whether the bounds themselves match.
func (f FieldRef) rangeCond(name, sym string, lo, hi any, incLo, incHi bool) Cond {
	if f.err != nil {
		return Cond{err: f.err}
	}
	var vals []any
	for _, v := range []any{lo, hi} {
		if v == noBound {
			continue
		}
		n, err := mpack.Normalize(v)
		if err != nil {
			return Cond{err: fmt.Errorf("%w: %s on %q: a value of type %T cannot be stored, so cannot match", ErrInvalidQuery, name, f.name(), v)}
		}
		if !rangeClass(n) {
			return Cond{err: fmt.Errorf("%w: %s on %q needs a number, string, bool, []byte, time.Time, uuidv7.UUID or objectid.ObjectID bound, not %s", ErrInvalidQuery, name, f.name(), show(n))}
		}
		vals = append(vals, n)
	}

	node := &plan.Cond{Op: plan.OpRange, Path: f.path, Values: vals}
	if name == "Between" {
		node.Text = fmt.Sprintf("%s between %s and %s", f.name(), show(vals[0]), show(vals[1]))
		if rangeClassOf(vals[0]) != rangeClassOf(vals[1]) {
			return Cond{err: fmt.Errorf("%w: Between on %q has bounds of two types, %s and %s", ErrInvalidQuery, f.name(), show(vals[0]), show(vals[1]))}
		}
	} else {
		node.Text = f.name() + " " + sym + " " + show(vals[0])
	}
	for _, v := range vals {
		if isNaN(v) {
			node.Op = plan.OpFalse // NaN compares false with everything
			return Cond{node: node}
		}
	}
	var err error
	if lo != noBound {
		node.Lo, err = order.Bound(nil, vals[0], !incLo)
	} else {
		node.Lo = classStart(vals[0])
	}
	if err == nil {
		if hi != noBound {
			node.Hi, err = order.Bound(nil, vals[len(vals)-1], incHi)
		} else {
			node.Hi = classEnd(vals[0])
		}
	}
	if err != nil {
		return Cond{err: fmt.Errorf("%w: %s on %q: %v", ErrInvalidQuery, name, f.name(), err)}
	}
	if lo != noBound && hi != noBound && string(node.Lo) >= string(node.Hi) {
		node.Op = plan.OpFalse // reversed bounds match nothing
	}
	return Cond{node: node}
}

// noBound marks the open end of a one-sided range.
var noBound any = struct{ open bool }{true}

// classStart is the first order key of v's range class: for numbers the
// first one after NaN, which compares false with everything; false and true
// have a tag each but are one class.
func classStart(v any) []byte {
	switch c := order.Class(v); c {
	case order.TagNumber:
		return order.AfterNaN(nil)
	case order.TagTrue:
		return order.ClassStart(nil, order.TagFalse)
	default:
		return order.ClassStart(nil, c)
	}
}

// classEnd is the first order key after v's range class.
func classEnd(v any) []byte {
	if order.Class(v) == order.TagFalse {
		return order.ClassStart(nil, order.TagTrue+1)
	}
	return order.ClassStart(nil, order.Class(v)+1)
}

// rangeClassOf is v's class for range comparisons: false and true are one.
func rangeClassOf(v any) order.Tag {
	if c := order.Class(v); c != order.TagTrue {
		return c
	}
	return order.TagFalse
}

func rangeClass(v any) bool {
	switch v.(type) {
	case int64, uint64, float64, string, bool, []byte, time.Time, uuidv7.UUID, objectid.ObjectID:
		return true
	}
	return false
}

func isNaN(v any) bool {
	f, ok := v.(float64)
	return ok && f != f
}

// And matches records that satisfy every condition; And() matches all.
func And(conds ...Cond) Cond { return combine(plan.OpAnd, "And", conds) }

// Or matches records that satisfy at least one condition; Or() matches
// none.
func Or(conds ...Cond) Cond { return combine(plan.OpOr, "Or", conds) }

// Not matches records that do not satisfy c (a missing field does not
// satisfy Eq, so Not(Field("f").Eq(1)) matches records without f).
func Not(c Cond) Cond {
	if err := c.check("Not"); err != nil {
		return Cond{err: err}
	}
	return Cond{node: &plan.Cond{Op: plan.OpNot, Kids: []*plan.Cond{c.node}}}
}

func combine(op plan.Op, name string, conds []Cond) Cond {
	if len(conds) == 0 {
		if op == plan.OpAnd {
			return Cond{node: &plan.Cond{Op: plan.OpTrue}}
		}
		return Cond{node: &plan.Cond{Op: plan.OpFalse}}
	}
	kids := make([]*plan.Cond, len(conds))
	for i, c := range conds {
		if err := c.check(name); err != nil {
			return Cond{err: err}
		}
		kids[i] = c.node
	}
	if len(kids) == 1 {
		return Cond{node: kids[0]}
	}
	return Cond{node: &plan.Cond{Op: op, Kids: kids}}
}

func (c Cond) check(where string) error {
	if c.err != nil {
		return c.err
	}
	if c.node == nil {
		return fmt.Errorf("%w: %s got a zero Cond; make conditions with query.Field", ErrInvalidQuery, where)
	}
	return nil
}

// String renders the condition for people, as Explain shows it.
func (c Cond) String() string {
	if c.err != nil {
		return "invalid: " + c.err.Error()
	}
	if c.node == nil {
		return "<zero Cond>"
	}
	return c.node.String()
}

// show renders a normalised value in query text.
func show(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case []byte:
		return fmt.Sprintf("bytes(%x)", x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case uuidv7.UUID:
		return "uuid:" + x.String() // as the CLI's --where writes typed ids
	case objectid.ObjectID:
		return "oid:" + x.Hex()
	case []any:
		return showList(x)
	case map[string]any:
		return fmt.Sprint(x)
	}
	return fmt.Sprint(v)
}

func showList(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = show(v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
