package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/web"
)

// aggFlags are aggregate's aggregate flags, one per op of web.Aggregation.
var aggFlags = []struct{ op, usage string }{
	{"count", "count the records of each group, as the column `NAME`"},
	{"sum", "sum the numbers at PATH in each group, as the column NAME (`NAME=PATH`)"},
	{"avg", "average the numbers at PATH in each group, as the column NAME (`NAME=PATH`)"},
	{"min", "the least value at PATH in each group, as the column NAME (`NAME=PATH`)"},
	{"max", "the greatest value at PATH in each group, as the column NAME (`NAME=PATH`)"},
}

// aggArg is one aggregate flag as given, kept until the command runs.
type aggArg struct{ op, arg string }

// aggFlag is an aggregate flag's pflag.Value. Every aggregate flag appends
// to the one list, so the columns keep the command line's order across
// flags.
type aggFlag struct {
	op   string
	args *[]aggArg
}

func (f aggFlag) String() string { return "" }

func (f aggFlag) Type() string {
	if f.op == "count" {
		return "name"
	}
	return "name=path"
}

func (f aggFlag) Set(arg string) error {
	*f.args = append(*f.args, aggArg{f.op, arg})
	return nil
}

// parseAgg reads the argument of an aggregate flag: NAME for --count,
// NAME=PATH for the others. The name ends at the first '=', so a path may
// hold '=' and a name may not. The op's own rules are checked here, so a
// mistake names its flag before anything is opened; storh checks the path
// and duplicate names when the aggregate runs.
func parseAgg(op, arg string) (web.Aggregation, error) {
	a := web.Aggregation{Op: op, Name: arg}
	if op == "count" {
		if arg == "" {
			return a, usagef("--count %q: give the NAME of the count's column, such as --count n", arg)
		}
		return a, nil
	}
	name, path, ok := strings.Cut(arg, "=")
	switch {
	case !ok:
		return a, usagef("--%s %q: give NAME=PATH, the column's name and the path it reads, such as --%s %s", op, arg, op, shellQuote(op+"_"+arg+"="+arg))
	case name == "":
		return a, usagef("--%s %q: the name before '=' is empty", op, arg)
	case path == "":
		return a, usagef("--%s %q: the path after '=' is empty", op, arg)
	}
	a.Name, a.Path = name, path
	if _, err := a.Agg(); err != nil {
		return a, usagef("--%s %q: %s", op, arg, libMsg(err))
	}
	return a, nil
}

// localAggregate runs run on the collection coll with aggs as
// query.Aggs.
func (s *localStore) localAggregate(coll string, aggs []web.Aggregation, run func(storh.Collection, []query.Agg) error) error {
	r, err := s.reader(coll)
	if err != nil {
		return err
	}
	qaggs := make([]query.Agg, len(aggs))
	for i, a := range aggs {
		if qaggs[i], err = a.Agg(); err != nil {
			return err
		}
	}
	return run(r, qaggs)
}

func (s *localStore) aggregate(ctx context.Context, coll string, _ *queryFlags, q query.Query, groupBy []string, aggs []web.Aggregation) (groups []storh.Group, err error) {
	err = s.localAggregate(coll, aggs, func(c storh.Collection, qaggs []query.Agg) error {
		groups, err = c.AggregateContext(ctx, q, groupBy, qaggs...)
		return err
	})
	return groups, err
}

func (s *localStore) explainAggregate(ctx context.Context, coll string, _ *queryFlags, q query.Query, groupBy []string, aggs []web.Aggregation) (plan storh.Plan, err error) {
	err = s.localAggregate(coll, aggs, func(c storh.Collection, qaggs []query.Agg) error {
		plan, err = c.ExplainAggregateContext(ctx, q, groupBy, qaggs...)
		return err
	})
	return plan, err
}

func (s *httpStore) aggregate(ctx context.Context, coll string, f *queryFlags, _ query.Query, groupBy []string, aggs []web.Aggregation) ([]storh.Group, error) {
	groups, err := s.client.Aggregate(s.a.ctx, coll, f.selection(), groupBy, aggs)
	return groups, s.fail(s.a.ctx, err)
}

func (s *httpStore) explainAggregate(ctx context.Context, coll string, f *queryFlags, _ query.Query, groupBy []string, aggs []web.Aggregation) (storh.Plan, error) {
	out, err := s.client.ExplainAggregate(s.a.ctx, coll, f.selection(), groupBy, aggs)
	if err != nil {
		return storh.Plan{}, s.fail(s.a.ctx, err)
	}
	return planOfWeb(out), nil
}

// aggregateJSON is aggregate's --json: the groups as the HTTP API writes
// them, values in the import mapping.
type aggregateJSON struct {
	Collection string               `json:"collection"`
	GroupBy    []string             `json:"group_by"`
	Groups     []web.AggregateGroup `json:"groups"`
}

func (a *app) aggregateCmd() *cobra.Command {
	var f queryFlags
	var groupBy []string
	var given []aggArg
	var explain bool
	cmd := &cobra.Command{
		Use:   "aggregate COLL",
		Short: "Count, sum, average, min and max the records per group: total per status",
		Long: `Aggregate groups the records of COLL that the selection flags pick by the
values at the --group paths, and prints one row per group: the group's
values, then each aggregate, in the order of the flags.

  --group PATH        group by the value at PATH (repeat for more paths);
                      none: one group of every record selected
  --count NAME        the records in the group
  --sum NAME=PATH     the sum of the numbers at PATH (an integer while every
                      one is; non-numbers are skipped)
  --avg NAME=PATH     their mean
  --min NAME=PATH     the least value at PATH (any type, in the order of
                      --order), missing fields skipped
  --max NAME=PATH     the greatest

PATH is a dotted path ("author.name"); NAME names the column and ends at
the first '='. Groups come sorted by their values: a missing field is the
group null, first. A cell is the value as --where reads it: a bare word is
text, "quoted" text is text that would read as something else, and other
values are JSON in the import mapping (5 an integer, 5.0 a float,
{"$date":…} a time); null when a group has no value for it. With --json,
one object holds the groups as the HTTP API writes them.

--where, --after, --before, --from and --until select the records as for
'storh query'. An index on the --group path (exactly those paths, in
order) makes --count read its entries, not the records; --explain shows
how the aggregate reads instead of printing the groups. docs/queries.md
("Aggregation") defines each aggregate.`,
		Example: `  storh aggregate orders --group status --count n --sum total=amount
  storh aggregate orders --group status --group currency --count n --avg mean=amount --max largest=amount
  storh aggregate events --where level=error --from -1d --group path --count n
  storh aggregate orders --min first=paid_at --max last=paid_at
  storh aggregate orders --group status --count n --explain
  storh --json aggregate orders --group status --sum total=amount`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := f.build(a.now())
			if err != nil {
				return err
			}
			if len(given) == 0 {
				return usagef("aggregate needs at least one aggregate: --count NAME, --sum NAME=PATH, --avg, --min or --max")
			}
			aggs := make([]web.Aggregation, len(given))
			for i, g := range given {
				if aggs[i], err = parseAgg(g.op, g.arg); err != nil {
					return err
				}
			}
			s, cs, err := a.openStoreReader(args[0])
			if err != nil {
				return err
			}
			defer s.close()
			if explain {
				plan, err := s.explainAggregate(a.ctx, cs.Name, &f, q, groupBy, aggs)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(explainJSON{Collection: cs.Name, Plan: plan.String(), Where: f.whereText(),
						Query: plan.Query, Indexes: append([]string{}, plan.Indexes...), Sorted: plan.Sorted,
						KeysRead: plan.KeysRead, RecordsRead: plan.RecordsRead, Returned: plan.Returned})
				}
				return a.printPlan(f, plan)
			}
			groups, err := s.aggregate(a.ctx, cs.Name, &f, q, groupBy, aggs)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printAggregateJSON(cs.Name, groupBy, groups)
			}
			if len(groups) == 0 {
				a.diag("storh: no record of %s is selected: no groups", qname(cs.Name))
			}
			return a.printGroups(groupBy, aggs, groups)
		},
	}
	fs := cmd.Flags()
	f.registerSelection(fs, "after `ID` (ids after it)", "before `ID` (ids before it)")
	fs.StringArrayVar(&groupBy, "group", nil, "group by the value at `PATH` (a dotted path); repeat for more paths")
	for _, af := range aggFlags {
		fs.Var(aggFlag{op: af.op, args: &given}, af.op, af.usage)
	}
	fs.BoolVar(&explain, "explain", false, "show how the aggregate reads (indexes, keys and records read), not the groups")
	return cmd
}

func (a *app) printAggregateJSON(coll string, groupBy []string, groups []storh.Group) error {
	out := aggregateJSON{Collection: coll, GroupBy: groupBy, Groups: make([]web.AggregateGroup, len(groups))}
	if out.GroupBy == nil {
		out.GroupBy = []string{}
	}
	for i, g := range groups {
		key := g.Key
		if key == nil {
			key = []any{}
		}
		var err error
		if out.Groups[i].Key, err = jsonl.AppendValue(nil, key); err != nil {
			return err
		}
		if out.Groups[i].Values, err = jsonl.AppendValue(nil, g.Values); err != nil {
			return err
		}
	}
	return a.printJSON(out)
}

// printGroups prints the groups as a table: a column per group-by path,
// then one per aggregate.
func (a *app) printGroups(groupBy []string, aggs []web.Aggregation, groups []storh.Group) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	row := make([]string, 0, len(groupBy)+len(aggs))
	line := func() {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
		row = row[:0]
	}
	for _, p := range groupBy {
		row = append(row, cellText(p))
	}
	for _, ag := range aggs {
		row = append(row, cellText(ag.Name))
	}
	line()
	for _, g := range groups {
		for _, v := range g.Key {
			row = append(row, cellValue(v))
		}
		for _, ag := range aggs {
			row = append(row, cellValue(g.Values[ag.Name]))
		}
		line()
	}
	return tw.Flush()
}

// cellValue writes a value for a table cell as --where would read it back:
// text bare when it is one plain word that reads as nothing else, every
// other value as JSON in the import mapping.
func cellValue(v any) string {
	if s, ok := v.(string); ok {
		return cellText(s)
	}
	b, err := jsonl.AppendValue(nil, v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// cellText is s bare, or quoted when bare it would be empty, hold space or
// a tab, or read as JSON (null, 5, true, "x", [...]).
func cellText(s string) string {
	plain := s != "" && strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) < 0
	if plain {
		if _, err := jsonl.DecodeValue([]byte(s)); err != nil {
			return s
		}
	}
	b, _ := json.Marshal(s)
	return string(b)
}
