package web

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
)

// Limits of a condition in its JSON form. They bound the work a request
// can ask of the parser; real conditions are far smaller.
const (
	// MaxCondBytes bounds the JSON text of a condition.
	MaxCondBytes = 64 << 10
	// MaxCondDepth bounds how deeply and, or and not nest.
	MaxCondDepth = 32
	// MaxCondNodes bounds the number of conditions (leaves, and, or, not).
	MaxCondNodes = 1024
)

// CondError says why a condition's JSON was refused, and where: Node is
// the place of the node at fault, "$" for the whole condition, "$.and[2]"
// for the third condition of a top-level and, "$.not.or[0]" and so on.
// It wraps query.ErrInvalidQuery (so storh.ErrInvalidQuery too) and, for
// JSON that does not decode, the *jsonl.Error.
type CondError struct {
	Node   string
	Reason string
	Err    error
}

func (e *CondError) Error() string {
	return "web: condition at " + e.Node + ": " + e.Reason
}

func (e *CondError) Unwrap() []error {
	if e.Err == nil {
		return []error{query.ErrInvalidQuery}
	}
	return []error{query.ErrInvalidQuery, e.Err}
}

// ParseCond reads a condition in its JSON form (docs/web.md):
//
//	{"field":"a.b","op":"eq","value":1}
//	{"path":["a.b","c"],"op":"in","value":[1,2]}
//	{"and":[…]}  {"or":[…]}  {"not":{…}}
//
// Values are read with the value mapping of package jsonl, so 5 is an
// integer, 5.0 a float and {"$date":"…"} a time, as in a JSON lines export.
// Every error is a *CondError.
func ParseCond(b []byte) (query.Cond, error) {
	if len(b) > MaxCondBytes {
		return query.Cond{}, &CondError{Node: "$", Reason: fmt.Sprintf("%d bytes of JSON; the limit is %d", len(b), MaxCondBytes)}
	}
	v, err := jsonl.DecodeValue(b)
	if err != nil {
		return query.Cond{}, &CondError{Node: "$", Reason: "not JSON of the value mapping: " + err.Error(), Err: err}
	}
	p := condParser{}
	return p.node(v, "$", 1)
}

type condParser struct {
	nodes int
}

// The operators of a leaf, as the JSON names them.
var condOps = []string{"eq", "neq", "in", "nin", "gt", "gte", "lt", "lte", "between", "exists", "missing", "prefix", "contains"}

func (p *condParser) fail(at, format string, args ...any) error {
	return &CondError{Node: at, Reason: fmt.Sprintf(format, args...)}
}

func (p *condParser) node(v any, at string, depth int) (query.Cond, error) {
	p.nodes++
	if p.nodes > MaxCondNodes {
		return query.Cond{}, p.fail(at, "more than %d conditions", MaxCondNodes)
	}
	if depth > MaxCondDepth {
		return query.Cond{}, p.fail(at, "conditions nest more than %d levels deep", MaxCondDepth)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return query.Cond{}, p.fail(at, "a condition is a JSON object, not %s", describe(v))
	}
	for _, k := range []string{"and", "or", "not"} {
		kid, ok := m[k]
		if !ok {
			continue
		}
		if len(m) != 1 {
			return query.Cond{}, p.fail(at, "%q takes the object to itself; found also %s", k, keyList(m, k))
		}
		if k == "not" {
			c, err := p.node(kid, at+".not", depth+1)
			if err != nil {
				return c, err
			}
			return query.Not(c), nil
		}
		list, ok := kid.([]any)
		if !ok {
			return query.Cond{}, p.fail(at, "%q takes a list of conditions, not %s", k, describe(kid))
		}
		conds := make([]query.Cond, len(list))
		for i, kv := range list {
			c, err := p.node(kv, at+"."+k+"["+strconv.Itoa(i)+"]", depth+1)
			if err != nil {
				return c, err
			}
			conds[i] = c
		}
		if k == "and" {
			return query.And(conds...), nil
		}
		return query.Or(conds...), nil
	}
	return p.leaf(m, at)
}

func (p *condParser) leaf(m map[string]any, at string) (query.Cond, error) {
	for k := range m {
		switch k {
		case "field", "path", "op", "value":
		default:
			return query.Cond{}, p.fail(at, "unknown key %q: a condition has field (or path), op and value, or is {\"and\":[…]}, {\"or\":[…]} or {\"not\":{…}}", k)
		}
	}
	f, err := p.field(m, at)
	if err != nil {
		return query.Cond{}, err
	}
	opv, ok := m["op"]
	if !ok {
		return query.Cond{}, p.fail(at, "no \"op\": use one of %s", strings.Join(condOps, ", "))
	}
	op, ok := opv.(string)
	if !ok || !slices.Contains(condOps, op) {
		return query.Cond{}, p.fail(at, "op %s is not one of %s", show(opv), strings.Join(condOps, ", "))
	}
	val, hasVal := m["value"]
	switch op {
	case "exists", "missing":
		if hasVal {
			return query.Cond{}, p.fail(at, "op %q takes no value", op)
		}
	default:
		if !hasVal {
			return query.Cond{}, p.fail(at, "op %q needs a value", op)
		}
	}
	var c query.Cond
	switch op {
	case "eq":
		c = f.Eq(val)
	case "neq":
		c = f.Neq(val)
	case "in", "nin":
		list, ok := val.([]any)
		if !ok {
			return query.Cond{}, p.fail(at, "op %q takes a list of values, not %s", op, describe(val))
		}
		if op == "in" {
			c = f.In(list...)
		} else {
			c = f.NotIn(list...)
		}
	case "gt":
		c = f.Gt(val)
	case "gte":
		c = f.Gte(val)
	case "lt":
		c = f.Lt(val)
	case "lte":
		c = f.Lte(val)
	case "between":
		list, ok := val.([]any)
		if !ok || len(list) != 2 {
			return query.Cond{}, p.fail(at, "op \"between\" takes a list of two values [lo, hi], not %s", describe(val))
		}
		c = f.Between(list[0], list[1])
	case "exists":
		c = f.Exists()
	case "missing":
		c = f.Missing()
	case "prefix":
		s, ok := val.(string)
		if !ok {
			return query.Cond{}, p.fail(at, "op \"prefix\" takes a string, not %s", describe(val))
		}
		c = f.Prefix(s)
	case "contains":
		c = f.Contains(val)
	}
	// The query package checks values (a range bound of a type ranges do
	// not compare, a Between of two types) when a query is validated; do
	// it here so that the error names the node.
	if err := query.All().Where(c).Validate(); err != nil {
		return query.Cond{}, &CondError{Node: at, Reason: strings.TrimPrefix(err.Error(), query.ErrInvalidQuery.Error()+": "), Err: err}
	}
	return c, nil
}

// field reads the field of a leaf: "field" is a dotted path, "path" a list
// of literal segments (for keys that hold a dot).
func (p *condParser) field(m map[string]any, at string) (query.FieldRef, error) {
	fv, hasField := m["field"]
	pv, hasPath := m["path"]
	switch {
	case hasField && hasPath:
		return query.FieldRef{}, p.fail(at, "give \"field\" or \"path\", not both")
	case hasField:
		s, ok := fv.(string)
		if !ok {
			return query.FieldRef{}, p.fail(at, "\"field\" is a string (a dotted path), not %s", describe(fv))
		}
		return query.Field(s), nil
	case hasPath:
		list, ok := pv.([]any)
		if !ok || len(list) == 0 {
			return query.FieldRef{}, p.fail(at, "\"path\" is a non-empty list of strings, not %s", describe(pv))
		}
		segs := make([]string, len(list))
		for i, s := range list {
			if segs[i], ok = s.(string); !ok {
				return query.FieldRef{}, p.fail(at, "\"path\"[%d] is %s; segments are strings", i, describe(s))
			}
		}
		return query.FieldPath(segs...), nil
	}
	if len(m) == 0 {
		return query.FieldRef{}, p.fail(at, "an empty object; a condition has field (or path), op and value")
	}
	return query.FieldRef{}, p.fail(at, "no \"field\" (or \"path\") to test")
}

// describe names the JSON type of a decoded value, for errors.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, uint64, float64:
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}

// show quotes a short string, and describes anything else.
func show(v any) string {
	if s, ok := v.(string); ok {
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return strconv.Quote(s)
	}
	return describe(v)
}

// keyList lists the keys of m other than skip, sorted, for errors.
func keyList(m map[string]any, skip string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != skip {
			keys = append(keys, strconv.Quote(k))
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
