package query

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/storhdb/storh-go/storh/internal/jsonv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// MarshalJSON writes the condition in its JSON form, the one the HTTP API
// takes (docs/web.md, "Conditions"):
//
//	{"field":"a.b","op":"eq","value":1}
//	{"path":["a.b","c"],"op":"in","value":[1,2]}
//	{"and":[…]}  {"or":[…]}  {"not":{…}}
//	{"field":"items","op":"elemMatch","cond":{"field":"sku","op":"eq","value":"X"}}
//
// A field whose segments hold no dot is written as "field", any other as
// "path". Values are written with the value mapping of JSON lines, which
// keeps their types (5, 5.0, {"$date":…}, {"$uuid":…}, {"$oid":…}).
// An invalid or zero Cond has no JSON form: its error is returned.
func (c Cond) MarshalJSON() ([]byte, error) {
	if err := c.check("MarshalJSON"); err != nil {
		return nil, err
	}
	return c.src.appendJSON(nil)
}

func (e *expr) appendJSON(b []byte) ([]byte, error) {
	var err error
	switch e.op {
	case opAnd, opOr:
		b = append(b, `{"`+ops[e.op].json+`":[`...)
		for i, k := range e.kids {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = k.appendJSON(b); err != nil {
				return nil, err
			}
		}
		return append(b, "]}"...), nil
	case opNot:
		b = append(b, `{"not":`...)
		if b, err = e.kids[0].appendJSON(b); err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	}
	if b, err = appendField(b, e.path); err != nil {
		return nil, err
	}
	b = append(b, `,"op":"`+ops[e.op].json+`"`...)
	var v any
	switch e.op.takes() {
	case noValue:
		return append(b, '}'), nil
	case oneCond:
		b = append(b, `,"cond":`...)
		if b, err = e.kids[0].appendJSON(b); err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	case valueList, twoValues:
		v = e.vals
	default:
		v = e.vals[0]
	}
	b = append(b, `,"value":`...)
	if b, err = jsonv.AppendValue(b, v); err != nil {
		return nil, fmt.Errorf("%w: a value has no JSON form: %v", ErrInvalidQuery, err)
	}
	return append(b, '}'), nil
}

// appendField writes `{"field":…` or `{"path":[…]`.
func appendField(b []byte, path []string) ([]byte, error) {
	dotted := true
	for _, s := range path {
		dotted = dotted && s != "" && !strings.Contains(s, ".")
	}
	var err error
	if dotted {
		b = append(b, `{"field":`...)
		return jsonv.AppendValue(b, strings.Join(path, "."))
	}
	b = append(b, `{"path":[`...)
	for i, s := range path {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = jsonv.AppendValue(b, s); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads a condition in its JSON form (see MarshalJSON). It
// takes "field" (a dotted path) or "path" (literal segments), and reads
// values with the value mapping of JSON lines, so 5 is an integer, 5.0 a
// float and {"$date":"…"} a time, as in an export. Every error is a
// *ParseError that names the node at fault; on error c is left unchanged.
func (c *Cond) UnmarshalJSON(b []byte) error {
	v, err := decodeJSON(b)
	if err != nil {
		return err
	}
	got, err := new(condReader).node(v, "$", 1)
	if err != nil {
		return err
	}
	*c = got
	return nil
}

// decodeJSON decodes a condition's or a query's JSON within MaxCondBytes.
func decodeJSON(b []byte) (any, error) {
	if len(b) > MaxCondBytes {
		return nil, &ParseError{Node: "$", Reason: fmt.Sprintf("%d bytes of JSON; the limit is %d", len(b), MaxCondBytes)}
	}
	v, err := jsonv.DecodeValue(b)
	if err != nil {
		return nil, &ParseError{Node: "$", Reason: "not JSON of the value mapping: " + err.Error(), Err: err}
	}
	return v, nil
}

// condReader reads the decoded JSON of a condition.
type condReader struct {
	nodes int
}

func fail(at, format string, args ...any) error {
	return &ParseError{Node: at, Reason: fmt.Sprintf(format, args...)}
}

// libFail is an error of the builders, at the node at.
func libFail(at string, err error) error {
	return &ParseError{Node: at, Reason: strings.TrimPrefix(err.Error(), ErrInvalidQuery.Error()+": ")}
}

func (r *condReader) node(v any, at string, depth int) (Cond, error) {
	r.nodes++
	if r.nodes > MaxCondNodes {
		return Cond{}, fail(at, "more than %d conditions", MaxCondNodes)
	}
	if depth > MaxCondDepth {
		return Cond{}, fail(at, "conditions nest more than %d levels deep", MaxCondDepth)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Cond{}, fail(at, "a condition is a JSON object, not %s", describe(v))
	}
	for _, o := range []op{opAnd, opOr, opNot} {
		k := ops[o].json
		kid, ok := m[k]
		if !ok {
			continue
		}
		if len(m) != 1 {
			return Cond{}, fail(at, "%q takes the object to itself; found also %s", k, keyList(m, k))
		}
		var c Cond
		if o == opNot {
			kc, err := r.node(kid, at+".not", depth+1)
			if err != nil {
				return Cond{}, err
			}
			c = Not(kc)
		} else {
			list, ok := kid.([]any)
			if !ok {
				return Cond{}, fail(at, "%q takes a list of conditions, not %s", k, describe(kid))
			}
			conds := make([]Cond, len(list))
			for i, kv := range list {
				kc, err := r.node(kv, at+"."+k+"["+strconv.Itoa(i)+"]", depth+1)
				if err != nil {
					return Cond{}, err
				}
				conds[i] = kc
			}
			c = combine(o, conds)
		}
		if c.err != nil {
			return Cond{}, libFail(at, c.err)
		}
		return c, nil
	}
	return r.leaf(m, at, depth)
}

func (r *condReader) leaf(m map[string]any, at string, depth int) (Cond, error) {
	for k := range m {
		switch k {
		case "field", "path", "op", "value", "cond":
		default:
			return Cond{}, fail(at, "unknown key %q: a condition has field (or path), op and value (or cond, for elemMatch), or is {\"and\":[…]}, {\"or\":[…]} or {\"not\":{…}}", k)
		}
	}
	f, err := fieldJSON(m, at)
	if err != nil {
		return Cond{}, err
	}
	opv, ok := m["op"]
	if !ok {
		return Cond{}, fail(at, "no \"op\": use one of %s", jsonOpList())
	}
	name, _ := opv.(string)
	o, ok := opNamed(name)
	if !ok {
		return Cond{}, fail(at, "op %s is not one of %s", show(opv), jsonOpList())
	}
	kid, hasCond := m["cond"]
	if hasCond != (o.takes() == oneCond) {
		if hasCond {
			return Cond{}, fail(at, "op %q takes no cond; only elemMatch does", name)
		}
		return Cond{}, fail(at, "op %q needs a cond, the condition an element must satisfy", name)
	}
	if hasCond {
		if _, hasVal := m["value"]; hasVal {
			return Cond{}, fail(at, "op %q takes a cond, not a value", name)
		}
		kc, err := r.node(kid, at+".cond", depth+1)
		if err != nil {
			return Cond{}, err
		}
		c := f.ElemMatch(kc)
		if c.err != nil {
			return Cond{}, libFail(at, c.err)
		}
		return c, nil
	}
	val, hasVal := m["value"]
	switch {
	case o.takes() == noValue && hasVal:
		return Cond{}, fail(at, "op %q takes no value", name)
	case o.takes() != noValue && !hasVal:
		return Cond{}, fail(at, "op %q needs a value", name)
	}
	var vals []any
	switch o.takes() {
	case valueList:
		list, ok := val.([]any)
		if !ok {
			return Cond{}, fail(at, "op %q takes a list of values, not %s", name, describe(val))
		}
		vals = list
	case twoValues:
		list, ok := val.([]any)
		if !ok || len(list) != 2 {
			return Cond{}, fail(at, "op %q takes a list of two values [lo, hi], not %s", name, describe(val))
		}
		vals = list
	case oneValue:
		if _, ok := val.(string); o == opPrefix && !ok {
			return Cond{}, fail(at, "op \"prefix\" takes a string, not %s", describe(val))
		}
		vals = []any{val}
	}
	c := f.with(o, vals)
	if c.err != nil {
		return Cond{}, &ParseError{Node: at, Reason: strings.TrimPrefix(c.err.Error(), ErrInvalidQuery.Error()+": "), Err: c.err}
	}
	return c, nil
}

// fieldJSON reads the field of a leaf: "field" is a dotted path, "path" a
// list of literal segments (for keys that hold a dot).
func fieldJSON(m map[string]any, at string) (FieldRef, error) {
	fv, hasField := m["field"]
	pv, hasPath := m["path"]
	var f FieldRef
	switch {
	case hasField && hasPath:
		return FieldRef{}, fail(at, "give \"field\" or \"path\", not both")
	case hasField:
		s, ok := fv.(string)
		if !ok {
			return FieldRef{}, fail(at, "\"field\" is a string (a dotted path), not %s", describe(fv))
		}
		f = Field(s)
	case hasPath:
		list, ok := pv.([]any)
		if !ok || len(list) == 0 {
			return FieldRef{}, fail(at, "\"path\" is a non-empty list of strings, not %s", describe(pv))
		}
		segs := make([]string, len(list))
		for i, s := range list {
			if segs[i], ok = s.(string); !ok {
				return FieldRef{}, fail(at, "\"path\"[%d] is %s; segments are strings", i, describe(s))
			}
		}
		f = FieldPath(segs...)
	case len(m) == 0:
		return FieldRef{}, fail(at, "an empty object; a condition has field (or path), op and value")
	default:
		return FieldRef{}, fail(at, "no \"field\" (or \"path\") to test")
	}
	if f.err != nil {
		return FieldRef{}, libFail(at, f.err)
	}
	return f, nil
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

// MarshalJSON writes the query as one JSON object, so that a whole query
// travels as one value:
//
//	{"where":[{"field":"level","op":"eq","value":"error"}],
//	 "order":{"path":["at"],"desc":true},
//	 "after":{"id":"0190a4f4-…","value":{"$date":"…"}},
//	 "before":{"id":"0190a4f4-…"},
//	 "from_ms":1714521600000,"until_ms":1714608000000,
//	 "limit":100,"reverse":true,"require_index":true}
//
// Every member is optional: {} is All(). "where" lists the conditions of
// each Where, in their JSON form (see Cond.MarshalJSON); "order" is
// OrderBy's field as literal segments; a cursor's "value" is that of
// AfterValue or BeforeValue, written with the value mapping of JSON lines.
// ContinueOnError's function does not travel. A query that fails Validate
// has no JSON form: its error is returned.
func (q Query) MarshalJSON() ([]byte, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	b := []byte{'{'}
	member := func(name string) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `"`+name+`":`...)
	}
	var err error
	if len(q.conds) > 0 {
		member("where")
		b = append(b, '[')
		for i, c := range q.conds {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = c.src.appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if q.hasOrder {
		member("order")
		segs := make([]any, len(q.orderPath.path))
		for i, s := range q.orderPath.path {
			segs[i] = s
		}
		b = append(b, `{"path":`...)
		if b, err = jsonv.AppendValue(b, segs); err != nil {
			return nil, err
		}
		if q.dir == Desc {
			b = append(b, `,"desc":true`...)
		}
		b = append(b, '}')
	}
	for _, c := range []struct {
		name string
		c    cursor
	}{{"after", q.after}, {"before", q.before}} {
		if !c.c.set {
			continue
		}
		member(c.name)
		b = append(b, `{"id":"`+c.c.id.String()+`"`...)
		if c.c.hasValue {
			b = append(b, `,"value":`...)
			if b, err = jsonv.AppendValue(b, c.c.value); err != nil {
				return nil, fmt.Errorf("%w: the cursor value has no JSON form: %v", ErrInvalidQuery, err)
			}
		}
		b = append(b, '}')
	}
	if q.hasTime {
		member("from_ms")
		b = strconv.AppendInt(b, q.fromMs, 10)
		member("until_ms")
		b = strconv.AppendInt(b, q.untilMs, 10)
	}
	if q.hasLimit {
		member("limit")
		b = strconv.AppendInt(b, int64(q.limit), 10)
	}
	if q.reverse {
		member("reverse")
		b = append(b, "true"...)
	}
	if q.requireIndex {
		member("require_index")
		b = append(b, "true"...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads a query in its JSON form (see MarshalJSON) into a
// query built from All. Errors are *ParseError naming the member at fault
// ("$.where[1].and[0]", "$.limit"); on error q is left unchanged.
func (q *Query) UnmarshalJSON(b []byte) error {
	v, err := decodeJSON(b)
	if err != nil {
		return err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fail("$", "a query is a JSON object, not %s", describe(v))
	}
	got := All()
	for _, k := range sortedKeys(m) {
		at, val := "$."+k, m[k]
		switch k {
		case "where":
			list, ok := val.([]any)
			if !ok {
				return fail(at, "\"where\" is a list of conditions, not %s", describe(val))
			}
			r := &condReader{}
			for i, cv := range list {
				c, err := r.node(cv, at+"["+strconv.Itoa(i)+"]", 1)
				if err != nil {
					return err
				}
				got = got.Where(c)
			}
		case "order":
			om, ok := val.(map[string]any)
			if !ok {
				return fail(at, "\"order\" is {\"path\":[…],\"desc\":true}, not %s", describe(val))
			}
			f, err := fieldJSON(only(om, "path"), at)
			if err != nil {
				return err
			}
			desc, err := boolMember(om, "desc", at)
			if err != nil {
				return err
			}
			if err := unknownKeys(om, at, "path", "desc"); err != nil {
				return err
			}
			dir := Asc
			if desc {
				dir = Desc
			}
			got = got.OrderByField(f, dir)
		case "after", "before":
			cm, ok := val.(map[string]any)
			if !ok {
				return fail(at, "a cursor is {\"id\":\"…\"} or {\"id\":\"…\",\"value\":…}, not %s", describe(val))
			}
			if err := unknownKeys(cm, at, "id", "value"); err != nil {
				return err
			}
			s, _ := cm["id"].(string)
			id, err := uuidv7.Parse(s)
			if err != nil {
				return fail(at+".id", "the cursor's id is a UUID string: %v", err)
			}
			value, hasValue := cm["value"]
			switch {
			case k == "after" && hasValue:
				got = got.AfterValue(value, id)
			case k == "after":
				got = got.After(id)
			case hasValue:
				got = got.BeforeValue(value, id)
			default:
				got = got.Before(id)
			}
		case "from_ms", "until_ms", "limit":
			if _, ok := val.(int64); !ok {
				return fail(at, "%q is an integer, not %s", k, describe(val))
			}
		case "reverse", "require_index":
			on, err := boolMember(m, k, "$")
			if err != nil {
				return err
			}
			if on && k == "reverse" {
				got = got.Reverse()
			} else if on {
				got = got.RequireIndex()
			}
		default:
			return fail("$", "unknown key %q: a query has where, order, after, before, from_ms, until_ms, limit, reverse and require_index", k)
		}
	}
	from, hasFrom := m["from_ms"].(int64)
	until, hasUntil := m["until_ms"].(int64)
	if hasFrom != hasUntil {
		return fail("$", "give from_ms and until_ms together (TimeRangeMs has both ends)")
	}
	if hasFrom {
		got = got.TimeRangeMs(from, until)
	}
	if n, ok := m["limit"].(int64); ok {
		if int64(int(n)) != n {
			return fail("$.limit", "%d is beyond an int", n)
		}
		got = got.Limit(int(n))
	}
	if err := got.Validate(); err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			return err
		}
		return libFail("$", err)
	}
	*q = got
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// only is m with just the key k, so that fieldJSON reads "path" alone.
func only(m map[string]any, k string) map[string]any {
	if v, ok := m[k]; ok {
		return map[string]any{k: v}
	}
	return map[string]any{}
}

func boolMember(m map[string]any, k, at string) (bool, error) {
	v, ok := m[k]
	if !ok {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, fail(at+"."+k, "%q is true or false, not %s", k, describe(v))
	}
	return b, nil
}

func unknownKeys(m map[string]any, at string, known ...string) error {
	for _, k := range sortedKeys(m) {
		if !slices.Contains(known, k) {
			return fail(at, "unknown key %q; this takes %s", k, strings.Join(known, ", "))
		}
	}
	return nil
}
