package storh

import (
	"context"
	"fmt"
	"strings"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/query"
)

// Group is one group of an Aggregate: the records that share the values
// of the group-by paths.
type Group struct {
	// Key holds the values of the group-by paths, in order; nil for a
	// missing field (and for a null: they are one group).
	Key []any
	// Values maps each aggregate's name to its result.
	Values map[string]any
}

// Aggregate groups the records q selects by the values at the groupBy paths
// (dotted, as query.Field) and computes aggs over each group: "total per
// status" is
//
//	c.Aggregate(query.All(), []string{"status"}, query.Count("n"), query.Sum("total", "amount"))
//
// q selects records with its Where, After/Before and TimeRangeMs; OrderBy
// or Limit in q is ErrInvalidQuery. Groups come back sorted by Key in the
// total order OrderBy uses; an empty groupBy gives one group whose Key has
// length 0, and none when no record matches. docs/queries.md (Aggregation)
// defines each aggregate; a group-by path that goes through a list in a
// matching record is ErrInvalidQuery, as OrderBy's is.
//
// It is planned like a query (ExplainAggregate shows how): a condition on
// an indexed field seeks the index; Count grouped by an indexed path,
// filtered on that index alone, counts index entries and reads no record;
// Min and Max of an indexed path over the whole collection read one entry
// at each end. Every plan gives the same groups. All of it reads in one
// transaction, so the groups describe one snapshot of the collection; on a
// handle from a Tx, that transaction's.
func (c *coll) Aggregate(q query.Query, groupBy []string, aggs ...query.Agg) ([]Group, error) {
	return c.AggregateContext(context.Background(), q, groupBy, aggs...)
}

// AggregateContext is Aggregate that stops when ctx is done: between
// chunks of records (or of 4096 index keys), returning an error that wraps
// ctx.Err(), with no transaction left open.
func (c *coll) AggregateContext(ctx context.Context, q query.Query, groupBy []string, aggs ...query.Agg) ([]Group, error) {
	ag, err := c.aggregate(ctx, "aggregate", q, groupBy, aggs)
	if err != nil {
		return nil, err
	}
	out := make([]Group, len(ag.Groups))
	for i, g := range ag.Groups {
		values := make(map[string]any, len(g.Values))
		for j, d := range ag.Agg.Aggs {
			values[d.Name] = g.Values[j]
		}
		out[i] = Group{Key: g.Key, Values: values}
	}
	return out, nil
}

// ExplainAggregate runs Aggregate with the same arguments and reports how
// it read: the indexes, the index keys and records read (0 records for a
// count from index entries, or Min and Max from an index's ends), and the
// groups returned.
func (c *coll) ExplainAggregate(q query.Query, groupBy []string, aggs ...query.Agg) (Plan, error) {
	return c.ExplainAggregateContext(context.Background(), q, groupBy, aggs...)
}

// ExplainAggregateContext is ExplainAggregate that stops when ctx is done
// (see AggregateContext).
func (c *coll) ExplainAggregateContext(ctx context.Context, q query.Query, groupBy []string, aggs ...query.Agg) (Plan, error) {
	ag, err := c.aggregate(ctx, "explain aggregate", q, groupBy, aggs)
	if err != nil {
		return Plan{}, err
	}
	st := ag.Stats
	return Plan{Query: aggregateString(q, groupBy, aggs), Indexes: st.Indexes, Sorted: st.Sorted,
		KeysRead: st.KeysRead, RecordsRead: st.RecordsRead, Returned: st.Returned}, nil
}

func (c *coll) aggregate(ctx context.Context, op string, q query.Query, groupBy []string, aggs []query.Agg) (*engine.Aggregation, error) {
	op = c.opName(op)
	spec, a, err := plan.CompileAgg(q, groupBy, aggs)
	if err != nil {
		return nil, opErr(op, c.name, "", -1, err)
	}
	if c.expires() {
		c.liveSpec(spec, c.db.eng.Now())
	}
	if err := ctx.Err(); err != nil {
		return nil, opErr(op, c.name, "", -1, err)
	}
	ag := &engine.Aggregation{Spec: spec, Agg: a, Stop: ctx.Err}
	if err := c.read(func(_ *engine.Tx, ec *engine.Coll) error { return ag.Run(ec) }); err != nil {
		return nil, opErr(op, c.name, "", -1, err)
	}
	// Reported once the read is over: a callback never runs inside it.
	for _, it := range ag.Skipped {
		spec.OnError(it.ID, opErr(op, c.name, it.ID.String(), -1, it.Err))
	}
	return ag, nil
}

// aggregateString is what ExplainAggregate's Plan.Query says.
func aggregateString(q query.Query, groupBy []string, aggs []query.Agg) string {
	var b strings.Builder
	b.WriteString(q.String())
	b.WriteString(" group by [")
	for i, p := range groupBy {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", p)
	}
	b.WriteString("]")
	for _, a := range aggs {
		b.WriteString(" ")
		b.WriteString(a.String())
	}
	return b.String()
}

// Aggregate is Docs.Aggregate on the typed collection's records (see
// (*Docs).Aggregate).
func (t typed[T]) Aggregate(q query.Query, groupBy []string, aggs ...query.Agg) ([]Group, error) {
	return t.c.Aggregate(q, groupBy, aggs...)
}

// AggregateContext is Docs.AggregateContext.
func (t typed[T]) AggregateContext(ctx context.Context, q query.Query, groupBy []string, aggs ...query.Agg) ([]Group, error) {
	return t.c.AggregateContext(ctx, q, groupBy, aggs...)
}

// ExplainAggregate is Docs.ExplainAggregate.
func (t typed[T]) ExplainAggregate(q query.Query, groupBy []string, aggs ...query.Agg) (Plan, error) {
	return t.c.ExplainAggregate(q, groupBy, aggs...)
}

// ExplainAggregateContext is Docs.ExplainAggregateContext.
func (t typed[T]) ExplainAggregateContext(ctx context.Context, q query.Query, groupBy []string, aggs ...query.Agg) (Plan, error) {
	return t.c.ExplainAggregateContext(ctx, q, groupBy, aggs...)
}
