package main

import (
	"math"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// queryFlags are the selection flags of query and export.
type queryFlags struct {
	after, before string
	from, until   string
	where         []string
	limit         int
	reverse       bool
}

func (f *queryFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.after, "after", "", "only ids after `ID` (cursor pagination: pass the last id of the previous page)")
	fs.StringVar(&f.before, "before", "", "only ids before `ID` (with --reverse: the next page going back)")
	fs.StringVar(&f.from, "from", "", "only records created at or after `T` (RFC 3339, Unix ms, or relative: -15m)")
	fs.StringVar(&f.until, "until", "", "only records created at or before `T` (inclusive, to the millisecond)")
	// StringArray, not StringSlice: a value such as tags=["a","b"] has commas.
	fs.StringArrayVar(&f.where, "where", nil, "keep records whose top-level field matches: `field=value` (value is JSON if it parses, else text); repeat to AND")
	fs.IntVar(&f.limit, "limit", 0, "stop after `N` records (0: no limit)")
	fs.BoolVar(&f.reverse, "reverse", false, "newest first")
}

// build turns the flags into a query; every mistake is a usage error.
func (f *queryFlags) build(now time.Time) (query.Query, error) {
	q := query.All()
	if f.after != "" {
		id, err := parseID("--after", f.after)
		if err != nil {
			return q, err
		}
		q = q.After(id)
	}
	if f.before != "" {
		id, err := parseID("--before", f.before)
		if err != nil {
			return q, err
		}
		q = q.Before(id)
	}
	if f.from != "" || f.until != "" {
		lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
		if f.from != "" {
			t, err := parseTime(f.from, now)
			if err != nil {
				return q, usagef("--from: %v", err)
			}
			lo = t.UnixMilli()
		}
		if f.until != "" {
			t, err := parseTime(f.until, now)
			if err != nil {
				return q, usagef("--until: %v", err)
			}
			hi = t.UnixMilli()
		}
		if lo > hi {
			return q, usagef("--from %s is after --until %s: the window is empty", f.from, f.until)
		}
		q = q.TimeRangeMs(lo, hi)
	}
	for _, w := range f.where {
		c, err := parseWhere(w)
		if err != nil {
			return q, usageError{err}
		}
		q = q.WhereEqual(c.Field, c.Value)
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
	if err := q.Validate(); err != nil {
		return q, usageError{err}
	}
	return q, nil
}

// selective reports whether the flags select less than the whole
// collection (so its count is not the number of records to expect).
func (f *queryFlags) selective() bool {
	return f.after != "" || f.before != "" || f.from != "" || f.until != "" || len(f.where) > 0 || f.limit > 0
}

func (a *app) queryCmd() *cobra.Command {
	var f queryFlags
	cmd := &cobra.Command{
		Use:   "query COLL",
		Short: "Print the records an id range, a time window and field filters select",
		Long: `Query prints the records of COLL as JSON lines, oldest first (--reverse: newest
first). Ids sort by creation time, so --after/--before (cursor pagination) and
--from/--until (creation-time window) are one range seek: a page costs the same
in a small or a huge collection. --where filters on top-level fields with
strict types: n=5 matches the integer 5, not 5.0 or "5".

Times (T) are RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01, UTC), Unix
milliseconds, now, or relative to now (-15m, -2h, -7d).

--where takes field=value; the value is JSON when it parses (n=5, ok=true,
name="5", at={"$date":"2024-05-01T12:00:00Z"}), else text (status=active).
The operators != > >= < <= ^= are reserved and arrive in a later release.`,
		Example: `  storh query events --limit 100
  storh query events --after 0190a4f4-5c3b-7def-8123-456789abcdef --limit 100
  storh query events --from -15m
  storh query events --from 2024-05-01T12:00:00Z --until 2024-05-01T13:00:00Z --reverse
  storh query pages --where kind=post --where published=true`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := f.build(a.now())
			if err != nil {
				return err
			}
			db, r, _, err := a.openReader(args[0])
			if err != nil {
				return err
			}
			defer db.Close()
			p := a.newPrinter()
			var last uuidv7.UUID
			for rec, err := range r.Stream(q) {
				if err == nil {
					err = p.print(rec)
				}
				if err == nil {
					err = a.ctx.Err()
				}
				if err != nil {
					p.flush()
					return err
				}
				last = rec.ID
			}
			if err := p.flush(); err != nil {
				return err
			}
			if f.limit > 0 && p.n == f.limit {
				flag := "--after"
				if f.reverse {
					flag = "--before"
				}
				a.diag("storh: %s (the limit); next page: %s %s", plural(int64(p.n), "record"), flag, last)
			}
			return nil
		},
	}
	f.register(cmd.Flags())
	return cmd
}
