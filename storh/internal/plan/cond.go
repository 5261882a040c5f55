package plan

import (
	"fmt"
	"strings"
)

// Op is the operator of a condition node.
type Op uint8

const (
	OpTrue  Op = iota + 1 // matches every record: And() with no conditions
	OpFalse               // matches none: Or(), In(), a reversed Between, Eq(NaN)
	OpAnd
	OpOr
	OpNot
	OpEq       // the field is present and equal to Values[0] (strict, typed)
	OpNeq      // not OpEq: a missing field matches
	OpIn       // OpEq for one of Values
	OpNotIn    // not OpIn: a missing field matches
	OpRange    // the field's order key k satisfies Lo <= k < Hi (Gt, Gte, Lt, Lte, Between, Prefix)
	OpExists   // the field is present (a null counts)
	OpMissing  // the field is absent
	OpContains // the field is a list holding an element equal to Values[0]
	// OpElemMatch: the field is a list with an element that satisfies
	// Kids[0], whose paths start at the element.
	OpElemMatch
	// OpExpired: the field holds a time (a timestamp, or a string in RFC
	// 3339) at or before Values[0], a time.Time. OpLive is its negation:
	// a missing field, or one that holds no such time, is live. Neither
	// comes from a query: the store adds them for a collection with a
	// time to live (storh.WithTTL), and no index decides them.
	OpExpired
	OpLive
)

// Cond is one node of a compiled condition tree. Values are in mpack's
// normalised form; Lo and Hi are order keys (package order) of the range's
// bounds, the half-open interval of field values that match. A leaf's Path
// may reach several values, through lists (mpack.PathValues): a leaf holds
// when some value passes its test, and OpNeq, OpNotIn and OpMissing when
// none passes OpEq, OpIn and OpExists.
type Cond struct {
	Op     Op
	Path   []string
	Values []any
	Lo, Hi []byte
	Kids   []*Cond
	// Text is how the user wrote a leaf, for String and Explain.
	Text string
}

// String renders the condition for people: `status = "open"`,
// `(score > 5 or tags contains "go")`.
func (c *Cond) String() string {
	switch c.Op {
	case OpTrue:
		return "true"
	case OpFalse:
		if c.Text != "" {
			return c.Text
		}
		return "false"
	case OpAnd, OpOr:
		sep := " and "
		if c.Op == OpOr {
			sep = " or "
		}
		parts := make([]string, len(c.Kids))
		for i, k := range c.Kids {
			parts[i] = k.String()
		}
		return "(" + strings.Join(parts, sep) + ")"
	case OpNot:
		return "not " + c.Kids[0].String()
	}
	return c.Text
}

// PathString renders a field path: segments joined with dots, a segment
// that holds a dot or is empty quoted.
func PathString(path []string) string {
	parts := make([]string, len(path))
	for i, s := range path {
		if s == "" || strings.ContainsAny(s, ". \t\"") {
			parts[i] = fmt.Sprintf("%q", s)
		} else {
			parts[i] = s
		}
	}
	return strings.Join(parts, ".")
}

// Conjuncts returns the conditions c ANDs together: the children of nested
// ANDs, flattened (which keeps the meaning), or c alone.
func Conjuncts(c *Cond) []*Cond {
	if c == nil {
		return nil
	}
	if c.Op != OpAnd {
		return []*Cond{c}
	}
	var out []*Cond
	for _, k := range c.Kids {
		out = append(out, Conjuncts(k)...)
	}
	return out
}
