package query

import (
	"fmt"
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
// field, "author.name" the key "name" of the map under "author". A
// segment that meets a list goes on into each element that is a map, so
// "items.sku" reaches the sku of every item and a condition holds when
// some value it reaches passes (Neq, NotIn and Missing: when none passes
// Eq, In, Exists); through anything else (a scalar, a list in a list) the
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

func (f FieldRef) name() string { return pathText(f.path) }

// Path returns the field's path segments (a copy), and the error that makes
// the reference unusable (an empty name or segment), if any.
func (f FieldRef) Path() ([]string, error) { return append([]string(nil), f.path...), f.err }

// String writes the path as the text syntax does (see Parse): segments
// joined with dots, a segment that is not a bare name as a JSON string.
func (f FieldRef) String() string { return f.name() }

// Cond is a condition on a record's fields, made by the methods of FieldRef
// and combined with And, Or and Not. A Cond is an immutable value; the zero
// Cond is invalid.
type Cond struct {
	node *plan.Cond // what the engine runs
	src  *expr      // what was written, for String and MarshalJSON
	err  error
}

// expr is a condition as written: the operator and operands the engine's
// plan.Cond has lowered (Gt, Prefix and Between all become ranges there).
type expr struct {
	op    op
	path  []string // a leaf's field
	vals  []any    // a leaf's operands, normalised: see op.takes
	kids  []*expr  // and, or: any number; not: one
	depth int      // levels of nesting, a leaf being 1
	nodes int      // conditions in the tree, this one included
}

func (f FieldRef) leaf(o op, values ...any) Cond {
	if f.err != nil {
		return Cond{err: f.err}
	}
	norm := make([]any, len(values))
	for i, v := range values {
		n, err := mpack.Normalize(v)
		if err != nil {
			return Cond{err: fmt.Errorf("%w: %s on %q: a value of type %T cannot be stored, so cannot match", ErrInvalidQuery, o.goName(), f.name(), v)}
		}
		norm[i] = n
	}
	return f.made(o, norm, &plan.Cond{Op: o.planOp(), Path: f.path, Values: norm})
}

// made pairs the engine's node with the leaf as written; the node's Text,
// which Explain shows, is the leaf's text form.
func (f FieldRef) made(o op, vals []any, node *plan.Cond) Cond {
	src := &expr{op: o, path: f.path, vals: vals, depth: 1, nodes: 1}
	node.Text = src.String()
	return Cond{node: node, src: src}
}

// Eq matches records whose field is present and equal to v under strict,
// typed equality: integers compare by value whatever their width, floats by
// value, but 1, 1.0 and "1" are three different values; lists and maps
// compare deeply; Eq(nil) matches a present null only; NaN equals nothing.
func (f FieldRef) Eq(v any) Cond {
	c := f.leaf(opEq, v)
	if c.err == nil {
		if order.IsNaN(c.node.Values[0]) {
			c.node.Op = plan.OpFalse
		}
	}
	return c
}

// Neq matches records whose field is missing or not Eq to v.
func (f FieldRef) Neq(v any) Cond {
	return f.leaf(opNeq, v)
}

// In matches records whose field is Eq to one of vs. In() with no values
// matches nothing.
func (f FieldRef) In(vs ...any) Cond {
	c := f.leaf(opIn, vs...)
	if c.err == nil {
		if len(vs) == 0 {
			c.node.Op = plan.OpFalse
		}
	}
	return c
}

// NotIn matches records whose field is missing or Eq to none of vs. NotIn()
// with no values matches every record.
func (f FieldRef) NotIn(vs ...any) Cond {
	c := f.leaf(opNotIn, vs...)
	if c.err == nil {
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
func (f FieldRef) Gt(v any) Cond { return f.rangeCond(opGt, v, noBound, false, true) }

// Gte is Gt or equal in value (an integer 5 and a float 5.0 both match
// Gte(5)).
func (f FieldRef) Gte(v any) Cond { return f.rangeCond(opGte, v, noBound, true, true) }

// Lt matches records whose field is less than v, within v's type class (see
// Gt).
func (f FieldRef) Lt(v any) Cond { return f.rangeCond(opLt, noBound, v, true, false) }

// Lte is Lt or equal in value.
func (f FieldRef) Lte(v any) Cond { return f.rangeCond(opLte, noBound, v, true, true) }

// Between matches records whose field lies between lo and hi, both
// inclusive, within their type class (see Gt); lo and hi must be of the
// same class. Reversed bounds match nothing.
func (f FieldRef) Between(lo, hi any) Cond {
	return f.rangeCond(opBetween, lo, hi, true, true)
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
	return f.made(opPrefix, []any{s}, &plan.Cond{Op: plan.OpRange, Path: f.path, Values: []any{s}, Lo: lo, Hi: hi})
}

// Exists matches records in which the field is present, null included.
func (f FieldRef) Exists() Cond {
	if f.err != nil {
		return Cond{err: f.err}
	}
	return f.made(opExists, nil, &plan.Cond{Op: plan.OpExists, Path: f.path})
}

// Missing matches records in which the field is absent.
func (f FieldRef) Missing() Cond {
	if f.err != nil {
		return Cond{err: f.err}
	}
	return f.made(opMissing, nil, &plan.Cond{Op: plan.OpMissing, Path: f.path})
}

// Contains matches records whose field is a list holding an element Eq to
// v.
func (f FieldRef) Contains(v any) Cond {
	c := f.leaf(opContains, v)
	if c.err == nil {
		if order.IsNaN(c.node.Values[0]) {
			c.node.Op = plan.OpFalse
		}
	}
	return c
}

// ElemMatch matches records whose field is a list with an element that
// satisfies c on its own: c's paths start at the element, so
// Field("items").ElemMatch(And(Field("sku").Eq("X"), Field("qty").Gt(2)))
// needs one item with both, where Field("items.sku").Eq("X") and
// Field("items.qty").Gt(2) may hold for two different items. An element
// that is not a map has no fields (c sees every path missing).
func (f FieldRef) ElemMatch(c Cond) Cond {
	if f.err != nil {
		return Cond{err: f.err}
	}
	if err := c.check("ElemMatch"); err != nil {
		return Cond{err: err}
	}
	src := &expr{op: opElemMatch, path: f.path, kids: []*expr{c.src}, depth: c.src.depth + 1, nodes: c.src.nodes + 1}
	switch {
	case src.depth > MaxCondDepth:
		return Cond{err: fmt.Errorf("%w: conditions nest more than %d levels deep", ErrInvalidQuery, MaxCondDepth)}
	case src.nodes > MaxCondNodes:
		return Cond{err: fmt.Errorf("%w: more than %d conditions", ErrInvalidQuery, MaxCondNodes)}
	}
	node := &plan.Cond{Op: plan.OpElemMatch, Path: f.path, Kids: []*plan.Cond{c.node}, Text: src.String()}
	return Cond{node: node, src: src}
}

// with makes the field test o on operands as o takes them (see
// operands), so that the text and JSON forms build through the same
// builders as Go does.
func (f FieldRef) with(o op, vals []any) Cond {
	switch o {
	case opEq:
		return f.Eq(vals[0])
	case opNeq:
		return f.Neq(vals[0])
	case opGt:
		return f.Gt(vals[0])
	case opGte:
		return f.Gte(vals[0])
	case opLt:
		return f.Lt(vals[0])
	case opLte:
		return f.Lte(vals[0])
	case opPrefix:
		s, ok := vals[0].(string)
		if !ok {
			return Cond{err: fmt.Errorf("%w: Prefix on %q needs text, not %s", ErrInvalidQuery, f.name(), valueText(vals[0]))}
		}
		return f.Prefix(s)
	case opIn:
		return f.In(vals...)
	case opNotIn:
		return f.NotIn(vals...)
	case opContains:
		return f.Contains(vals[0])
	case opBetween:
		return f.Between(vals[0], vals[1])
	case opExists:
		return f.Exists()
	case opMissing:
		return f.Missing()
	}
	return Cond{err: fmt.Errorf("%w: %s is not a field test", ErrInvalidQuery, o.goName())}
}

// rangeCond compiles a range operator into the half-open interval of order
// keys it matches. lo or hi is noBound for an open end (nil is a bound,
// an invalid one); incLo and incHi say whether the bounds themselves match.
func (f FieldRef) rangeCond(o op, lo, hi any, incLo, incHi bool) Cond {
	if f.err != nil {
		return Cond{err: f.err}
	}
	name := o.goName()
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
			return Cond{err: fmt.Errorf("%w: %s on %q needs a number, string, bool, []byte, time.Time, uuidv7.UUID or objectid.ObjectID bound, not %s", ErrInvalidQuery, name, f.name(), valueText(n))}
		}
		vals = append(vals, n)
	}
	if o == opBetween && rangeClassOf(vals[0]) != rangeClassOf(vals[1]) {
		return Cond{err: fmt.Errorf("%w: Between on %q has bounds of two types, %s and %s", ErrInvalidQuery, f.name(), valueText(vals[0]), valueText(vals[1]))}
	}

	node := &plan.Cond{Op: plan.OpRange, Path: f.path, Values: vals}
	for _, v := range vals {
		if order.IsNaN(v) {
			node.Op = plan.OpFalse // NaN compares false with everything
			return f.made(o, vals, node)
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
	return f.made(o, vals, node)
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

// And matches records that satisfy every condition; And() matches all.
func And(conds ...Cond) Cond { return combine(opAnd, conds) }

// Or matches records that satisfy at least one condition; Or() matches
// none.
func Or(conds ...Cond) Cond { return combine(opOr, conds) }

// Not matches records that do not satisfy c (a missing field does not
// satisfy Eq, so Not(Field("f").Eq(1)) matches records without f).
func Not(c Cond) Cond {
	if err := c.check("Not"); err != nil {
		return Cond{err: err}
	}
	return nest(opNot, []Cond{c}, &plan.Cond{Op: plan.OpNot, Kids: []*plan.Cond{c.node}})
}

func combine(o op, conds []Cond) Cond {
	if len(conds) == 0 {
		node := &plan.Cond{Op: plan.OpTrue}
		if o == opOr {
			node.Op = plan.OpFalse
		}
		return Cond{node: node, src: &expr{op: o, depth: 1, nodes: 1}}
	}
	kids := make([]*plan.Cond, len(conds))
	for i, c := range conds {
		if err := c.check(o.goName()); err != nil {
			return Cond{err: err}
		}
		kids[i] = c.node
	}
	if len(kids) == 1 {
		return conds[0]
	}
	return nest(o, conds, &plan.Cond{Op: o.planOp(), Kids: kids})
}

// nest makes the combination of conds, within the limits of depth and
// size every entry point shares (MaxCondDepth, MaxCondNodes).
func nest(o op, conds []Cond, node *plan.Cond) Cond {
	src := &expr{op: o, kids: make([]*expr, len(conds)), depth: 1, nodes: 1}
	for i, c := range conds {
		src.kids[i] = c.src
		src.depth = max(src.depth, c.src.depth+1)
		src.nodes += c.src.nodes
	}
	switch {
	case src.depth > MaxCondDepth:
		return Cond{err: fmt.Errorf("%w: conditions nest more than %d levels deep", ErrInvalidQuery, MaxCondDepth)}
	case src.nodes > MaxCondNodes:
		return Cond{err: fmt.Errorf("%w: more than %d conditions", ErrInvalidQuery, MaxCondNodes)}
	}
	return Cond{node: node, src: src}
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

// String writes the condition in the text syntax Parse reads (see Parse),
// in a canonical form: one space around words and operators, values as
// JSON (typed ids as uuid: and oid:), and parentheses around every and or
// or inside another. Parse(c.String()) gives a condition equal to c. And()
// and Or() of no conditions have no text form: they are written "and()"
// and "or()", which Parse refuses. An invalid condition is written
// "invalid: " and its error.
func (c Cond) String() string {
	if c.err != nil {
		return "invalid: " + c.err.Error()
	}
	if c.node == nil {
		return "<zero Cond>"
	}
	return c.src.String()
}

// Conjuncts returns the conditions c ANDs together: the operands of nested
// ands, flattened, or c alone. With Op and Field it lets a program look
// into a condition, say to suggest an index for it.
func (c Cond) Conjuncts() []Cond {
	if c.src == nil || c.src.op != opAnd || len(c.src.kids) == 0 {
		return []Cond{c}
	}
	var out []Cond
	for i, k := range c.src.kids {
		out = append(out, Cond{node: c.node.Kids[i], src: k}.Conjuncts()...)
	}
	return out
}

// Op returns the operator of c as the text syntax writes it: "=", "!=",
// ">", ">=", "<", "<=", "^=", "in", "not in", "contains", "between",
// "exists", "missing", "and", "or" or "not"; "" for an invalid or zero
// Cond.
func (c Cond) Op() string {
	if c.check("Op") != nil {
		return ""
	}
	return c.src.op.text()
}

// Field returns the field a field test tests, and false for and, or, not
// and an invalid or zero Cond.
func (c Cond) Field() (FieldRef, bool) {
	if c.check("Field") != nil || c.src.op.takes() == combines {
		return FieldRef{}, false
	}
	return FieldRef{path: c.src.path}, true
}
