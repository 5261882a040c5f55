package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
)

// The parameters of the aggregate endpoint: the selection of a page
// without its order, direction or limit, which an aggregate refuses
// (groups have their own order and it reads every record selected), and
// without require_index, which Aggregate does not take.
var aggregateParams = []string{"after", "before", "from", "until", "q", "group", "agg", "explain"}

// Agg gives the query.Agg that a describes. An op that is not one of the
// five, a count with a path or another op without one is
// storh.ErrInvalidQuery; a bad path or name is left to Aggregate, which
// reports it as ErrInvalidQuery too.
func (a Aggregation) Agg() (query.Agg, error) {
	switch a.Op {
	case "count":
		if a.Path != "" {
			return query.Agg{}, fmt.Errorf("%w: count %q counts records and takes no path (got %q)", storh.ErrInvalidQuery, a.Name, a.Path)
		}
		return query.Count(a.Name), nil
	case "sum", "avg", "min", "max":
		if a.Path == "" {
			return query.Agg{}, fmt.Errorf("%w: %s %q needs the path of the values it aggregates", storh.ErrInvalidQuery, a.Op, a.Name)
		}
	default:
		return query.Agg{}, fmt.Errorf(`%w: aggregate op %q is not one of "count", "sum", "avg", "min", "max"`, storh.ErrInvalidQuery, a.Op)
	}
	return map[string]func(name, path string) query.Agg{
		"sum": query.Sum, "avg": query.Avg, "min": query.Min, "max": query.Max,
	}[a.Op](a.Name, a.Path), nil
}

// aggsOf gives the query.Agg of each of aggs, in order.
func aggsOf(aggs []Aggregation) ([]query.Agg, error) {
	out := make([]query.Agg, len(aggs))
	for i, a := range aggs {
		var err error
		if out[i], err = a.Agg(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// param gives the agg parameter of a: the short OP:NAME[:PATH] when it
// reads back as a, else the JSON object, which holds any name.
func (a Aggregation) param() string {
	if !strings.Contains(a.Name, ":") && (a.Op == "count") == (a.Path == "") {
		s := a.Op + ":" + a.Name
		if a.Path != "" {
			s += ":" + a.Path
		}
		return s
	}
	b, _ := json.Marshal(a) // three strings always marshal
	return string(b)
}

// parseAggParam reads an agg parameter: OP:NAME for count, OP:NAME:PATH
// for the others (the name ends at its first ':', the path is the rest,
// colons and all), or the JSON object of an Aggregation for a name that
// holds a ':'. The op, path and name are checked by Agg.
func parseAggParam(s string) (Aggregation, error) {
	var a Aggregation
	if strings.HasPrefix(s, "{") {
		d := json.NewDecoder(strings.NewReader(s))
		d.DisallowUnknownFields()
		if err := d.Decode(&a); err != nil || d.More() {
			return a, fmt.Errorf(`%w: web: parameter agg=%q: a JSON aggregate is one object {"op":…,"name":…,"path":…} of strings`, storh.ErrInvalidQuery, s)
		}
		return a, nil
	}
	op, rest, ok := strings.Cut(s, ":")
	if !ok {
		return a, fmt.Errorf("%w: web: parameter agg=%q: give OP:NAME for a count (agg=count:n) or OP:NAME:PATH for sum, avg, min and max (agg=sum:total:amount)", storh.ErrInvalidQuery, s)
	}
	a.Op = op
	a.Name, a.Path, _ = strings.Cut(rest, ":")
	return a, nil
}

// aggregate serves GET api/collections/{name}/aggregate: Aggregate over
// what the selection parameters select, grouped by each group parameter's
// path in order, computing each agg parameter's aggregate; with explain=1,
// ExplainAggregate's plan instead of the groups.
func (h *handler) aggregate(w http.ResponseWriter, r *http.Request) {
	c, err := h.collection(r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	q, groupBy, aggs, explain, err := h.parseAggregate(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	if explain {
		plan, err := c.ExplainAggregateContext(r.Context(), q, groupBy, aggs...)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, planOf(plan))
		return
	}
	groups, err := c.AggregateContext(r.Context(), q, groupBy, aggs...)
	if err != nil {
		writeError(w, err)
		return
	}
	out := AggregateResult{Groups: make([]AggregateGroup, len(groups))}
	for i, g := range groups {
		key := g.Key
		if key == nil {
			key = []any{}
		}
		if out.Groups[i].Key, err = jsonl.AppendValue(nil, key); err == nil {
			out.Groups[i].Values, err = jsonl.AppendValue(nil, g.Values)
		}
		if err != nil {
			// Aggregate gives only values a record holds, which all write.
			writeError(w, fmt.Errorf("web: aggregate: group %d: %w", i, err))
			return
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// parseAggregate reads the aggregate endpoint's parameters.
func (h *handler) parseAggregate(vals url.Values) (q query.Query, groupBy []string, aggs []query.Agg, explain bool, err error) {
	for k := range vals {
		if !slices.Contains(aggregateParams, k) {
			return q, nil, nil, false, badRequest(fmt.Sprintf("web: unknown parameter %q; the parameters of aggregate are %s", k, strings.Join(aggregateParams, ", ")))
		}
	}
	groupBy, params := vals["group"], vals["agg"]
	if len(vals["explain"]) > 1 {
		return q, nil, nil, false, badRequest(fmt.Sprintf("web: parameter \"explain\" is given %d times; give it once", len(vals["explain"])))
	}
	if explain, err = flag(vals, "explain"); err != nil {
		return q, nil, nil, false, err
	}
	sel := url.Values{}
	for k, vs := range vals {
		if k != "group" && k != "agg" && k != "explain" {
			sel[k] = vs
		}
	}
	// What is left is a subset of a page's parameters, without a limit.
	p, err := h.parseWhole(sel)
	if err != nil {
		return q, nil, nil, false, err
	}
	if len(params) == 0 {
		return q, nil, nil, false, fmt.Errorf("%w: web: aggregate needs at least one agg parameter: agg=count:n, agg=sum:total:amount, avg, min or max", storh.ErrInvalidQuery)
	}
	specs := make([]Aggregation, len(params))
	for i, s := range params {
		if specs[i], err = parseAggParam(s); err != nil {
			return q, nil, nil, false, err
		}
	}
	if aggs, err = aggsOf(specs); err != nil {
		return q, nil, nil, false, fmt.Errorf("web: parameter agg: %w", err)
	}
	return p.q, groupBy, aggs, explain, nil
}
