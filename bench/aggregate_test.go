package bench

import (
	"database/sql"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
)

// Aggregation (issue 30) against SQLite's GROUP BY on the query fixture's
// JSON documents (sqliteQuery: the same records, with an expression index
// on json_extract(doc, '$.status')), in the same run:
//
//   - count: the records per status. storh's Aggregate grouped by the
//     indexed path counts the status index's entries and reads no record
//     (ExplainAggregate confirms it); SQLite walks its expression index in
//     order (EXPLAIN QUERY PLAN: SCAN q USING INDEX q_status, no temporary
//     B-tree).
//   - sum: the sum of visits per country, a path no index holds on either
//     side: storh reads every record's bytes, SQLite json_extracts every
//     document and groups in a temporary B-tree.
//
// Both sides hand back every group with its values as Go values (storh
// []storh.Group, SQLite rows scanned into a slice), checked against a
// brute-force computation over the fixture after the timed loop. ns/op is
// per aggregate; records/s is n per second.

const (
	sqlAggCount = `SELECT json_extract(doc, '$.status'), count(*) FROM q
		GROUP BY json_extract(doc, '$.status') ORDER BY json_extract(doc, '$.status')`
	sqlAggSum = `SELECT json_extract(doc, '$.country'), sum(json_extract(doc, '$.visits')) FROM q
		GROUP BY json_extract(doc, '$.country') ORDER BY json_extract(doc, '$.country')`
)

// aggRow is one group as both sides are checked: its key and its value.
type aggRow struct {
	key   string
	value int64
}

// aggWant computes the groups by brute force: value(i) summed per key(i),
// sorted by key.
func aggWant(n int, key func(i int) string, value func(i int) int64) []aggRow {
	sums := map[string]int64{}
	for i := range n {
		sums[key(i)] += value(i)
	}
	out := make([]aggRow, 0, len(sums))
	for k, v := range sums {
		out = append(out, aggRow{k, v})
	}
	slices.SortFunc(out, func(a, b aggRow) int { return strings.Compare(a.key, b.key) })
	return out
}

// storhAggRows reads groups of one string key and one int64 value.
func storhAggRows(tb testing.TB, groups []storh.Group, name string) []aggRow {
	out := make([]aggRow, len(groups))
	for i, g := range groups {
		k, ok1 := g.Key[0].(string)
		v, ok2 := g.Values[name].(int64)
		if !ok1 || !ok2 {
			tb.Fatalf("group %d: %#v", i, g)
		}
		out[i] = aggRow{k, v}
	}
	return out
}

// sqliteAggRows runs a GROUP BY of one key and one integer into rows.
func sqliteAggRows(st *sql.Stmt, out []aggRow) ([]aggRow, error) {
	out = out[:0]
	rows, err := st.Query()
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var r aggRow
		if err := rows.Scan(&r.key, &r.value); err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func BenchmarkAggregate(b *testing.B) {
	for _, n := range sizes() {
		f := getQFixture(b, n)
		for _, tc := range []struct {
			name    string
			groupBy string
			agg     query.Agg
			sql     sqliteFind
			want    func() []aggRow
			indexed bool
		}{
			{
				name: "count", groupBy: "status", agg: query.Count("n"), indexed: true,
				sql:  sqliteFind{query: sqlAggCount, index: "q_status"},
				want: func() []aggRow { return aggWant(n, qStatus, func(int) int64 { return 1 }) },
			},
			{
				name: "sum", groupBy: "country", agg: query.Sum("n", "visits"),
				sql: sqliteFind{query: sqlAggSum},
				want: func() []aggRow {
					return aggWant(n, func(i int) string { return qrec(i).Country }, func(i int) int64 { return qrec(i).Visits })
				},
			},
		} {
			b.Run("agg="+tc.name+"/"+sizeName(n), func(b *testing.B) {
				want := tc.want()
				b.Run("impl=storh", func(b *testing.B) {
					// The file with the three indexes: status, user, score.
					_, docs := f.storh(b, 3)
					p, err := docs.ExplainAggregate(query.All(), []string{tc.groupBy}, tc.agg)
					if err != nil {
						b.Fatal(err)
					}
					if tc.indexed && (p.RecordsRead != 0 || !slices.Equal(p.Indexes, []string{tc.groupBy})) {
						b.Fatalf("plan %s: want the %s index's entries alone", p, tc.groupBy)
					}
					if !tc.indexed && p.RecordsRead != n {
						b.Fatalf("plan %s: want every record read", p)
					}
					var groups []storh.Group
					b.ReportAllocs()
					for b.Loop() {
						if groups, err = docs.Aggregate(query.All(), []string{tc.groupBy}, tc.agg); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					if got := storhAggRows(b, groups, "n"); !reflect.DeepEqual(got, want) {
						b.Fatalf("groups %v, want %v", got, want)
					}
					reportRate(b, n*b.N)
				})
				b.Run("impl=sqlite", func(b *testing.B) {
					db := sqliteQuery(b, f)
					if tc.indexed {
						checkSQLitePlan(b, db, tc.sql)
					}
					st := sqlitePrepare(b, db, tc.sql.query)
					var got []aggRow
					var err error
					b.ReportAllocs()
					for b.Loop() {
						if got, err = sqliteAggRows(st, got); err != nil {
							b.Fatal(err)
						}
					}
					b.StopTimer()
					if !reflect.DeepEqual(got, want) {
						b.Fatalf("groups %v, want %v", got, want)
					}
					reportRate(b, n*b.N)
				})
			})
		}
	}
}
