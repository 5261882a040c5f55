package storh_test

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Aggregates run beside writers see one snapshot: every writer commits a
// pair of records at once, one in group "a" with v = 1 and one in group
// "b" with v = -1, so in any committed state the two groups have equal
// counts and the sum of v is 0. The records span many read chunks (a
// stream's chunks would each be a transaction of their own), and both the
// record scan (Sum) and the index-only count (on the indexed copy) are
// checked, on every backend.
const aggSnapshotMs = 1_700_000_000_000

func TestAggregateSnapshotUnderWriters(t *testing.T) {
	db := openTemp(t)
	plain, err := db.Docs("plain")
	if err != nil {
		t.Fatal(err)
	}
	indexed, err := db.Docs("indexed", storh.WithIndex(storh.Index("g")))
	if err != nil {
		t.Fatal(err)
	}
	const writers, pairs = 4, 150 // 1200 records in each: several read chunks
	var wg sync.WaitGroup
	var done atomic.Int32
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done.Add(1)
			for i := 0; i < pairs; i++ {
				// Ids spread over a span of time, so that a pair's two
				// records land on both sides of where a reader is.
				var pair []any
				for _, rec := range []map[string]any{{"g": "a", "v": 1}, {"g": "b", "v": -1}} {
					id, err := uuidv7.NewAt(aggSnapshotMs + rand.Int64N(10_000))
					if err != nil {
						t.Error(err)
						return
					}
					pair = append(pair, storh.Entry{ID: id, Data: rec})
				}
				for _, d := range []*storh.Docs{plain, indexed} {
					if _, err := d.PutMany(pair); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	check := func(d *storh.Docs, aggs ...query.Agg) int64 {
		groups, err := d.Aggregate(query.All(), []string{"g"}, aggs...)
		if err != nil {
			t.Fatal(err)
		}
		if len(groups) == 0 {
			return 0
		}
		if len(groups) != 2 || groups[0].Key[0] != "a" || groups[1].Key[0] != "b" {
			t.Fatalf("%s: groups %v", d.Name(), groups)
		}
		a, b := groups[0].Values, groups[1].Values
		if a["n"] != b["n"] {
			t.Fatalf("%s: a torn snapshot: %v records in a, %v in b", d.Name(), a["n"], b["n"])
		}
		if s, ok := a["s"]; ok && s.(int64)+b["s"].(int64) != 0 {
			t.Fatalf("%s: a torn snapshot: sums %v and %v", d.Name(), s, b["s"])
		}
		return a["n"].(int64)
	}
	checks := 0
	var last [2]int64
	for done.Load() < writers || checks == 0 {
		for i, d := range []*storh.Docs{plain, indexed} {
			aggs := []query.Agg{query.Count("n"), query.Sum("s", "v")}
			if d == indexed {
				aggs = aggs[:1] // counted from index entries alone
			}
			n := check(d, aggs...)
			if n < last[i] {
				t.Fatalf("%s: count went back from %d to %d", d.Name(), last[i], n)
			}
			last[i] = n
		}
		checks++
	}
	wg.Wait()
	if p, err := indexed.ExplainAggregate(query.All(), []string{"g"}, query.Count("n")); err != nil || p.RecordsRead != 0 {
		t.Fatalf("the indexed count read records: %v, %v", p, err)
	}
	for _, d := range []*storh.Docs{plain, indexed} {
		if n := check(d, query.Count("n")); n != writers*pairs {
			t.Fatalf("%s: %d pairs at the end, want %d", d.Name(), n, writers*pairs)
		}
	}
	t.Logf("%d checks during the writes", checks)
}
