package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// queryFlags are the selection flags of query, explain, export and count.
type queryFlags struct {
	after, before string
	from, until   string
	where         []string
	order         string
	limit         int
	reverse       bool
	requireIndex  bool

	// Set by build.
	conds             []query.Cond
	orderPath         []string
	afterID, beforeID uuidv7.UUID
	fromMs, untilMs   int64
	hasFrom, hasUntil bool
}

// register adds the flags to fs; count leaves out --limit and --reverse,
// which do not change what there is to count.
func (f *queryFlags) register(fs *pflag.FlagSet, count bool) {
	f.registerSelection(fs, "after `ID`: ids after it, or with --order the records after its position (the last id of the previous page)",
		"before `ID` (with --reverse: the next page going back)")
	fs.StringVar(&f.order, "order", "", "sort by `FIELD` (a dotted path) ascending, or by -FIELD descending; ties in id order")
	fs.BoolVar(&f.requireIndex, "require-index", false, "fail instead of reading the whole collection when no index serves the query")
	if !count {
		fs.IntVar(&f.limit, "limit", 0, "stop after `N` records (0: no limit)")
		fs.BoolVar(&f.reverse, "reverse", false, "last first: newest first, or with --order the order reversed")
	}
}

// registerSelection adds the flags that only select records, which
// aggregate takes too; after and before end their usage.
func (f *queryFlags) registerSelection(fs *pflag.FlagSet, after, before string) {
	fs.StringVar(&f.after, "after", "", "only records "+after)
	fs.StringVar(&f.before, "before", "", "only records "+before)
	fs.StringVar(&f.from, "from", "", "only records created at or after `T` (RFC 3339, Unix ms, or relative: -15m)")
	fs.StringVar(&f.until, "until", "", "only records created at or before `T` (inclusive, to the millisecond)")
	// StringArray, not StringSlice: a value such as tags=["a","b"] has commas.
	fs.StringArrayVar(&f.where, "where", nil, "keep records that match `EXPR`: level=error, n>=5, tags contains go, a=1 and (b=2 or c exists); repeat to AND")
}

// build turns the flags into a query; every mistake is a usage error.
func (f *queryFlags) build(now time.Time) (query.Query, error) {
	q := query.All()
	f.afterID, f.beforeID, f.hasFrom, f.hasUntil = uuidv7.UUID{}, uuidv7.UUID{}, false, false
	if f.after != "" {
		id, err := parseID("--after", f.after)
		if err != nil {
			return q, err
		}
		q = q.After(id)
		f.afterID = id
	}
	if f.before != "" {
		id, err := parseID("--before", f.before)
		if err != nil {
			return q, err
		}
		q = q.Before(id)
		f.beforeID = id
	}
	if f.from != "" || f.until != "" {
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if f.from != "" {
			t, err := parseTime(f.from, now)
			if err != nil {
				return q, usagef("--from: %v", err)
			}
			lo = t.UnixMilli()
			f.fromMs, f.hasFrom = lo, true
		}
		if f.until != "" {
			t, err := parseTime(f.until, now)
			if err != nil {
				return q, usagef("--until: %v", err)
			}
			hi = t.UnixMilli()
			f.untilMs, f.hasUntil = hi, true
		}
		if lo > hi {
			return q, usagef("--from %s is after --until %s: the window is empty", f.from, f.until)
		}
		q = q.TimeRangeMs(lo, hi)
	}
	f.conds = f.conds[:0]
	for _, w := range f.where {
		c, err := query.Parse(w)
		if err != nil {
			return q, usageError{flagError("--where "+quoteExpr(w), 0, err)}
		}
		f.conds = append(f.conds, c)
		q = q.Where(c)
	}
	if f.order != "" {
		path, desc, err := parseOrder(f.order)
		if err != nil {
			return q, usageError{err}
		}
		f.orderPath = path
		dir := query.Asc
		if desc {
			dir = query.Desc
		}
		q = q.OrderByField(query.FieldPath(path...), dir)
	}
	if f.limit < 0 {
		return q, usagef("--limit %d: must be 0 (no limit) or more", f.limit)
	}
	if f.limit > 0 {
		q = q.Limit(f.limit)
	}
	if f.reverse {
		q = q.Reverse()
	}
	if f.requireIndex {
		q = q.RequireIndex()
	}
	if err := q.Validate(); err != nil {
		return q, usageError{err}
	}
	return q, nil
}

// parseOrder reads --order: a field path, after - for descending (+ for
// ascending is allowed too).
func parseOrder(s string) (path []string, desc bool, err error) {
	rest, off := s, 0
	switch {
	case strings.HasPrefix(s, "-"):
		desc, rest, off = true, s[1:], 1
	case strings.HasPrefix(s, "+"):
		rest, off = s[1:], 1
	}
	f, err := query.ParseField(rest)
	if err != nil {
		return nil, false, flagError(fmt.Sprintf("--order %q", s), off, err)
	}
	path, _ = f.Path()
	return path, desc, nil
}

// flagError words an error of the query language for the flag or argument
// named by what: at its column when it has one, counted from the start of
// the flag's text (off characters before the part that was parsed).
func flagError(what string, off int, err error) error {
	var pe *query.ParseError
	if errors.As(err, &pe) && pe.Column > 0 {
		return fmt.Errorf("%s: at column %d: %s", what, pe.Column+off, pe.Reason)
	}
	return fmt.Errorf("%s: %s", what, strings.TrimPrefix(libMsg(err), "invalid query: "))
}

// exprShown is the longest expression a message shows whole.
const exprShown = 200

// quoteExpr quotes an expression for a message, cut to its first 160
// characters with its length when it is longer than exprShown.
func quoteExpr(s string) string {
	n := utf8.RuneCountInString(s)
	if n <= exprShown {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q (%s characters)", string([]rune(s)[:160])+"…", commas(int64(n)))
}

// selective reports whether the flags select less than the whole
// collection (so its count is not the number of records to expect).
func (f *queryFlags) selective() bool {
	return f.after != "" || f.before != "" || f.from != "" || f.until != "" || len(f.where) > 0 || f.limit > 0
}

// whereText is the --where flags as one expression, canonical.
func (f *queryFlags) whereText() string {
	if len(f.conds) == 0 {
		return ""
	}
	return query.And(f.conds...).String()
}

// orderText is --order as given back in its canonical form.
func (f *queryFlags) orderText() string {
	if f.orderPath == nil {
		return ""
	}
	s := pathString(f.orderPath)
	if strings.HasPrefix(f.order, "-") {
		return "-" + s
	}
	return s
}

// pathString writes a field path as --where does.
func pathString(path []string) string { return query.FieldPath(path...).String() }

// suggestIndex names a field path an index could serve the query on: the
// first condition ANDed at the top that an index can seek, else the order.
func (f *queryFlags) suggestIndex() string {
	for _, c := range query.And(f.conds...).Conjuncts() {
		field, ok := c.Field()
		if !ok {
			continue
		}
		path, _ := field.Path()
		switch c.Op() {
		case "=", "in":
			if f.orderPath != nil && !slices.Equal(f.orderPath, path) {
				// Equality, then the order: a compound index serves both.
				return field.String() + "," + pathString(f.orderPath)
			}
			return field.String()
		case ">", ">=", "<", "<=", "between", "^=", "contains":
			return field.String()
		}
	}
	if f.orderPath != nil {
		return pathString(f.orderPath)
	}
	return ""
}

// runError words the errors of running the query in the command's terms.
func (f *queryFlags) runError(err error, coll string) error {
	switch {
	case errors.Is(err, storh.ErrNoIndex):
		msg := fmt.Sprintf("--require-index: no index of %s serves this query, and without one it reads every record", qname(coll))
		if s := f.suggestIndex(); s != "" {
			msg += fmt.Sprintf("; create one with 'storh index create %s %s',", shellQuote(coll), shellQuote(s))
		} else {
			msg += fmt.Sprintf("; create one with 'storh index create %s FIELD',", shellQuote(coll))
		}
		return errors.New(msg + " or bound the query by id or time (--after/--before, --from/--until)")
	case errors.Is(err, storh.ErrCursorNotFound):
		flag, id := "--after", strings.ToLower(f.after)
		if f.before != "" && strings.Contains(err.Error(), strings.ToLower(f.before)) {
			flag, id = "--before", strings.ToLower(f.before)
		}
		return fmt.Errorf("%s %s: with --order, %s continues from that record's place in the order, and %s has no record %s (any more)", flag, id, flag, qname(coll), id)
	}
	return err
}

// nextPage is the hint for the page after one that ended with last.
func (f *queryFlags) nextPage(last uuidv7.UUID) string {
	flag := "--after"
	if f.reverse {
		flag = "--before"
	}
	hint := flag + " " + last.String()
	if f.order != "" {
		hint = "--order " + shellQuote(f.order) + " " + hint
	}
	return hint
}

const whereHelp = `--where EXPR keeps the records that match EXPR; several --where must all match.
A condition is FIELD OP VALUE; spaces around operators are optional:

  level=error       status!=200     n>5  n>=5  n<5  n<=5     path^=/api
  level in [error, warn]            level not in [debug]     tags contains go
  n between 1 and 5                 email exists             deleted missing

Combine with and, or, not and parentheses; not binds tightest, then and,
then or:  level=error and (status>=500 or path^=/api)

FIELD is a dotted path into nested objects (user.name); quote a key that
holds a dot or an operator as a JSON string ("http.status"=200, "a=b"=1).
VALUE is JSON (5 is an integer, 5.0 a float, "5" text, true, null, [1, 2],
{"$date":"2024-05-01T12:00:00Z"} a time), or a bare word, which is text
(level=error). Quote text with spaces or ( ) [ ] { } , " in it:
msg="hello world". Matching is strictly typed: n=5 does not match 5.0 or
"5"; > >= < <= between compare within one type (numbers, text, booleans,
times, bytes); != and not in also match records without the field. In the
shell, put the expression in single quotes: < > ( ) and spaces are special
there.`

const orderHelp = `--order FIELD sorts by a field, --order -FIELD descending, in one order over
all types: missing and null, false, true, numbers, text, bytes, times, lists,
objects; records with equal values in id order. --after and --before then
continue from a record's place in that order (keyset pages): pass the last
id of a page, with the same --order, for the next one. Without --order they
bound ids.`

func (a *app) queryCmd() *cobra.Command {
	var f queryFlags
	cmd := &cobra.Command{
		Use:   "query COLL",
		Short: "Print the records conditions, an order, an id range and a time window select",
		Long: `Query prints the records of COLL as JSON lines, oldest first (--reverse: newest
first). Ids sort by creation time, so --after/--before (cursor pagination) and
--from/--until (creation-time window) are one range seek: a page costs the same
in a small or a huge collection.

` + whereHelp + `

` + orderHelp + `

When --limit is reached, stderr names the flags for the next page.
An index ('storh index create') makes conditions and orders on its field a
seek; 'storh explain' shows what a query reads. --require-index fails
instead of reading the whole collection.

Times (T) are RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01, UTC), Unix
milliseconds, now, or relative to now (-15m, -2h, -7d).`,
		Example: `  storh query events --limit 100
  storh query events --after 0190a4f4-5c3b-7def-8123-456789abcdef --limit 100
  storh query events --from -15m
  storh query events --from 2024-05-01T12:00:00Z --until 2024-05-01T13:00:00Z --reverse
  storh query pages --where kind=post --where published=true
  storh query events --where 'level=error and (status>=500 or path^=/api)'
  storh query users --where 'address.city in [Oslo, Bergen]' --where 'email exists'
  storh query posts --where 'tags contains go' --order -score --limit 10
  storh query posts --order -score --limit 10 --after 0190a4f4-5c3b-7def-8123-456789abcdef`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := f.build(a.now())
			if err != nil {
				return err
			}
			s, cs, err := a.openStoreReader(args[0])
			if err != nil {
				return err
			}
			defer s.close()
			p := a.newPrinter()
			var last uuidv7.UUID
			for rec, err := range s.stream(a.ctx, cs.Name, &f, q) {
				if err == nil {
					err = p.printLine(rec.Line)
				}
				if err == nil {
					err = a.ctx.Err()
				}
				if err != nil {
					p.flush()
					return f.runError(err, cs.Name)
				}
				last = rec.ID
			}
			if err := p.flush(); err != nil {
				return err
			}
			if f.limit > 0 && p.n == f.limit {
				a.diag("storh: %s (the limit); next page: %s", plural(int64(p.n), "record"), f.nextPage(last))
			}
			return nil
		},
	}
	f.register(cmd.Flags(), false)
	return cmd
}

func (a *app) explainCmd() *cobra.Command {
	var f queryFlags
	cmd := &cobra.Command{
		Use:   "explain COLL",
		Short: "Show how a query runs: the index it reads, what it reads and returns",
		Long: `Explain runs the query the same flags give 'storh query' (without printing
the records) and shows how it ran:

  plan          the plan on one line
  where         the --where conditions as understood (canonical form)
  order         the --order
  query         the query as the library writes it
  indexes       the indexes read; none: the records were read in id order
  sorted        yes when no index gives the order, so the matches were
                sorted in memory
  keys read     index keys examined
  records read  records fetched and checked against the conditions
  returned      records the query returns

Records read well above returned means the index (or the scan) yields many
records the conditions reject: an index on the fields of the conditions
(equalities first) fixes that. When no index serves a query on a field, a
note on stderr says which 'storh index create' would. With --json the plan
is one JSON object. See 'storh query --help' for the flags.`,
		Example: `  storh explain posts --where 'slug=hello'
  storh explain events --where level=error --order -ms --limit 10
  storh --json explain posts --where 'tags contains go' --order -score --limit 10`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := f.build(a.now())
			if err != nil {
				return err
			}
			st, cs, err := a.openStoreReader(args[0])
			if err != nil {
				return err
			}
			defer st.close()
			plan, err := st.explain(a.ctx, cs.Name, &f, q)
			if err != nil {
				return f.runError(err, cs.Name)
			}
			if a.jsonOut {
				err = a.printJSON(explainJSON{Collection: cs.Name, Plan: plan.String(), Where: f.whereText(), Order: f.orderText(),
					Query: plan.Query, Indexes: append([]string{}, plan.Indexes...), Sorted: plan.Sorted,
					KeysRead: plan.KeysRead, RecordsRead: plan.RecordsRead, Returned: plan.Returned})
			} else {
				err = a.printPlan(f, plan)
			}
			if err != nil {
				return err
			}
			if len(plan.Indexes) == 0 && plan.RecordsRead > plan.Returned && (len(f.conds) > 0 || f.orderPath != nil) {
				if s := f.suggestIndex(); s != "" && !hasIndexOn(st, cs.Name, s) {
					a.diag("storh: no index serves this query; 'storh index create %s %s' would make it a seek", shellQuote(cs.Name), shellQuote(s))
				}
			}
			return nil
		},
	}
	f.register(cmd.Flags(), false)
	return cmd
}

type explainJSON struct {
	Collection  string   `json:"collection"`
	Plan        string   `json:"plan"`
	Where       string   `json:"where,omitempty"`
	Order       string   `json:"order,omitempty"`
	Query       string   `json:"query"`
	Indexes     []string `json:"indexes"`
	Sorted      bool     `json:"sorted"`
	KeysRead    int      `json:"keys_read"`
	RecordsRead int      `json:"records_read"`
	Returned    int      `json:"returned"`
}

func (a *app) printPlan(f queryFlags, p storh.Plan) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "plan\t%s\n", p)
	if w := f.whereText(); w != "" {
		fmt.Fprintf(tw, "where\t%s\n", w)
	}
	if o := f.orderText(); o != "" {
		fmt.Fprintf(tw, "order\t%s\n", o)
	}
	fmt.Fprintf(tw, "query\t%s\n", p.Query)
	idx := "none (records read in id order)"
	if len(p.Indexes) > 0 {
		idx = strings.Join(p.Indexes, ", ")
	}
	fmt.Fprintf(tw, "indexes\t%s\n", idx)
	sorted := "no"
	if p.Sorted {
		sorted = "yes (in memory)"
	}
	fmt.Fprintf(tw, "sorted\t%s\n", sorted)
	fmt.Fprintf(tw, "keys read\t%s\n", commas(int64(p.KeysRead)))
	fmt.Fprintf(tw, "records read\t%s\n", commas(int64(p.RecordsRead)))
	fmt.Fprintf(tw, "returned\t%s\n", commas(int64(p.Returned)))
	return tw.Flush()
}

// hasIndexOn reports whether the collection has an index whose first path
// is path (as the CLI writes it).
func hasIndexOn(st store, coll, path string) bool {
	infos, err := st.indexes(coll)
	if err != nil {
		return false
	}
	for _, ix := range infos {
		if len(ix.Paths) > 0 && pathString(ix.Paths[0]) == path {
			return true
		}
	}
	return false
}
