package main

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/storhdb/storh-go/storh/jsonl"
)

// The --where operators as the conditions of the HTTP API name them
// (docs/web.md, "Conditions").
var apiOps = map[string]string{
	opEq: "eq", opNeq: "neq", opGt: "gt", opGte: "gte", opLt: "lt", opLte: "lte",
	opPrefix: "prefix", opIn: "in", opNotIn: "nin", opContains: "contains",
	opBetween: "between", opExists: "exists", opMissing: "missing",
}

// condJSON writes parsed --where expressions as one condition in the JSON
// form of the HTTP API: several expressions are ANDed, as the flags are.
// Paths are written as lists of literal segments ("path"), so a key that
// holds a dot stays one key; values with the JSON lines value mapping,
// which keeps their types (5, 5.0, {"$date":…}, {"$uuid":…}, {"$oid":…}).
func condJSON(conds []*whereNode) ([]byte, error) {
	if len(conds) == 1 {
		return conds[0].appendJSON(nil)
	}
	b := []byte(`{"and":[`)
	for i, c := range conds {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = c.appendJSON(b); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

func (n *whereNode) appendJSON(b []byte) ([]byte, error) {
	var err error
	switch n.op {
	case opAnd, opOr:
		b = append(b, `{"`+n.op+`":[`...)
		for i, k := range n.kids {
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
		if b, err = n.kids[0].appendJSON(b); err != nil {
			return nil, err
		}
		return append(b, '}'), nil
	}
	op, ok := apiOps[n.op]
	if !ok {
		return nil, fmt.Errorf("--where: the operator %s has no JSON form", n.op)
	}
	b = append(b, `{"path":[`...)
	for i, seg := range n.path {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = jsonl.AppendValue(b, seg); err != nil {
			return nil, err
		}
	}
	b = append(b, `],"op":"`+op+`"`...)
	var v any
	switch n.op {
	case opExists, opMissing:
		return append(b, '}'), nil
	case opIn, opNotIn:
		v = n.vals
		if n.vals == nil {
			v = []any{}
		}
	case opBetween:
		v = []any{n.vals[0], n.vals[1]}
	default:
		v = n.vals[0]
	}
	b = append(b, `,"value":`...)
	if b, err = jsonl.AppendValue(b, v); err != nil {
		return nil, fmt.Errorf("--where: a value has no JSON form: %w", err)
	}
	return append(b, '}'), nil
}

// apiParams gives the parameters of the records, count and export
// endpoints that select what the flags select (without limit, which each
// caller sets as its endpoint takes it). build must have run.
func (f *queryFlags) apiParams() (url.Values, error) {
	vals := url.Values{}
	if !f.afterID.IsZero() {
		vals.Set("after", f.afterID.String())
	}
	if !f.beforeID.IsZero() {
		vals.Set("before", f.beforeID.String())
	}
	if f.hasFrom {
		vals.Set("from", strconv.FormatInt(f.fromMs, 10))
	}
	if f.hasUntil {
		vals.Set("until", strconv.FormatInt(f.untilMs, 10))
	}
	if len(f.conds) > 0 {
		q, err := condJSON(f.conds)
		if err != nil {
			return nil, err
		}
		vals.Set("q", string(q))
	}
	if f.orderPath != nil {
		segs := make([]any, len(f.orderPath))
		for i, s := range f.orderPath {
			segs[i] = s
		}
		o, err := jsonl.AppendValue(nil, segs)
		if err != nil {
			return nil, err
		}
		if len(f.order) > 0 && f.order[0] == '-' {
			o = append([]byte{'-'}, o...)
		}
		vals.Set("order", string(o))
	}
	if f.reverse {
		vals.Set("newest", "1")
	}
	if f.requireIndex {
		vals.Set("require_index", "1")
	}
	return vals, nil
}
