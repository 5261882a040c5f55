package storh_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

func verifyClean(t testing.TB, db *storh.DB) {
	t.Helper()
	var problems []string
	if _, err := db.Verify(func(p storh.Problem) { problems = append(problems, p.String()) }); err != nil || len(problems) > 0 {
		t.Fatalf("Verify: %v %q", err, problems)
	}
}

// TestDeleteBefore trims a log at cutoffs around its records' times: only
// records created strictly before the cutoff go, counters and the index
// follow, and the rest read back unchanged.
func TestDeleteBefore(t *testing.T) {
	base := int64(1_700_000_000_000)
	for _, tc := range []struct {
		name   string
		cutoff time.Time
		want   int // records deleted, of 10 at base, base+1, … base+9 ms
	}{
		{"before every record", time.UnixMilli(base - 1), 0},
		{"at the first record's millisecond", time.UnixMilli(base), 0},
		{"half a millisecond past the first", time.UnixMilli(base).Add(500 * time.Microsecond), 1},
		{"at the fifth", time.UnixMilli(base + 4), 4},
		{"past the last", time.UnixMilli(base + 10), 10},
		{"the epoch", time.UnixMilli(0), 0},
		{"before the epoch", time.Unix(-5, 0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTemp(t)
			l, err := db.Log("events", storh.WithIndex(storh.Index("n")))
			if err != nil {
				t.Fatal(err)
			}
			var written []uuidv7.UUID
			for i := range 10 {
				id := idAt(t, base+int64(i))
				if _, err := l.PutWithID(id, storh.Map{"n": i % 3}); err != nil {
					t.Fatal(err)
				}
				written = append(written, id)
			}
			n, err := l.DeleteBefore(tc.cutoff)
			if err != nil || n != tc.want {
				t.Fatalf("DeleteBefore(%v) = %d, %v; want %d", tc.cutoff, n, err, tc.want)
			}
			if got := ids(collect(t, l.Stream(all()))); !sameIDs(got, written[tc.want:]) {
				t.Fatalf("left %v, want %v", got, written[tc.want:])
			}
			if c := mustCount(t, l); c != 10-tc.want {
				t.Fatalf("Count %d after deleting %d of 10", c, tc.want)
			}
			verifyClean(t, db)
		})
	}
}

// TestDeleteBeforeInBatches: a trim larger than one batch commits in
// several transactions, and a retention follows the database's clock.
func TestDeleteBeforeInBatches(t *testing.T) {
	now := time.UnixMilli(1_700_000_100_000)
	db := openTemp(t, storh.WithClock(func() time.Time { return now }), storh.WithoutSync())
	l, err := db.Log("events", storh.WithRetention(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 12_000)
	for i := range items {
		items[i] = storh.Entry{ID: idAt(t, now.Add(-2*time.Hour).UnixMilli()+int64(i)), Data: storh.Map{"i": i}}
	}
	if _, err := l.PutMany(items); err != nil {
		t.Fatal(err)
	}
	fresh, err := l.PutWithID(idAt(t, now.Add(-time.Minute).UnixMilli()), storh.Map{"fresh": true})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := db.Stats()
	n, err := l.ApplyRetention()
	if err != nil || n != len(items) {
		t.Fatalf("ApplyRetention = %d, %v; want %d", n, err, len(items))
	}
	after, _ := db.Stats()
	if commits := after.Commits - before.Commits; commits < 3 {
		t.Fatalf("%d records deleted in %d commits; want transactions of a few thousand", n, commits)
	}
	if !onPostgres && after.FreeBytes <= before.FreeBytes { // a file's free pages
		t.Fatalf("free bytes %d → %d after deleting %d records; want more free pages", before.FreeBytes, after.FreeBytes, n)
	}
	if got := ids(collect(t, l.Stream(all()))); !sameIDs(got, []uuidv7.UUID{fresh.ID}) {
		t.Fatalf("left %v; want only the record newer than the retention", got)
	}
	if n, err := l.ApplyRetention(); n != 0 || err != nil {
		t.Fatalf("a second ApplyRetention = %d, %v", n, err)
	}
	verifyClean(t, db)
}

func TestRetentionOptions(t *testing.T) {
	db := openTemp(t)
	if _, err := db.Docs("d", storh.WithRetention(time.Hour)); !errors.Is(err, storh.ErrInvalidOption) {
		t.Fatalf("WithRetention on Docs: %v", err)
	}
	if _, err := db.Log("l", storh.WithRetention(0)); !errors.Is(err, storh.ErrInvalidOption) {
		t.Fatalf("WithRetention(0): %v", err)
	}
	l, err := db.Log("l")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := l.ApplyRetention(); n != 0 || err != nil {
		t.Fatalf("ApplyRetention without a retention = %d, %v", n, err)
	}
}

// TestDeleteMatchingModel deletes by random conditions, with and without
// an index on the field, and checks what is left against a brute-force
// reference: an index changes the cost of a deletion, never its result.
func TestDeleteMatchingModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		indexed := rapid.Bool().Draw(rt, "indexed")
		var opts []storh.CollectionOption
		if indexed {
			opts = append(opts, storh.WithIndex(storh.Index("n")))
		}
		db := openTemp(t, storh.WithoutSync())
		defer db.Close()
		d, err := db.Docs("d", opts...)
		if err != nil {
			rt.Fatal(err)
		}
		model := map[uuidv7.UUID]int{}
		count := rapid.IntRange(0, 300).Draw(rt, "records")
		items := make([]any, count)
		for i := range items {
			items[i] = storh.Map{"n": rapid.IntRange(0, 9).Draw(rt, "n"), "s": strings.Repeat("x", i%5)}
		}
		recs, err := d.PutMany(items)
		if err != nil {
			rt.Fatal(err)
		}
		for i, r := range recs {
			model[r.ID] = items[i].(storh.Map)["n"].(int)
		}
		for range rapid.IntRange(1, 4).Draw(rt, "deletions") {
			lo := rapid.IntRange(0, 9).Draw(rt, "lo")
			var cond query.Cond
			var match func(int) bool
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0:
				cond, match = query.Field("n").Eq(lo), func(n int) bool { return n == lo }
			case 1:
				cond, match = query.Field("n").Gte(lo), func(n int) bool { return n >= lo }
			case 2:
				cond, match = query.Field("n").In(lo, (lo+3)%10), func(n int) bool { return n == lo || n == (lo+3)%10 }
			default:
				cond, match = query.Not(query.Field("n").Lt(lo)), func(n int) bool { return n >= lo }
			}
			q := query.All().Where(cond)
			want := 0
			limit := 0
			if rapid.Bool().Draw(rt, "limited") {
				limit = rapid.IntRange(1, 20).Draw(rt, "limit")
				q = q.Limit(limit)
			}
			var doomed []uuidv7.UUID
			for id, n := range model {
				if match(n) {
					doomed = append(doomed, id)
				}
			}
			slices.SortFunc(doomed, uuidv7.UUID.Compare)
			if limit > 0 && len(doomed) > limit {
				doomed = doomed[:limit] // id order: the query's own order
			}
			want = len(doomed)
			got, err := d.DeleteMatching(q)
			if err != nil || got != want {
				rt.Fatalf("DeleteMatching(%v) = %d, %v; want %d", cond, got, err, want)
			}
			for _, id := range doomed {
				delete(model, id)
			}
			left := ids(collect(t, d.Stream(all())))
			var wantLeft []uuidv7.UUID
			for id := range model {
				wantLeft = append(wantLeft, id)
			}
			slices.SortFunc(wantLeft, uuidv7.UUID.Compare)
			if !sameIDs(left, wantLeft) {
				rt.Fatalf("after deleting %v: %d records left, want %d", cond, len(left), len(wantLeft))
			}
		}
		var problems []string
		if _, err := db.Verify(func(p storh.Problem) { problems = append(problems, p.String()) }); err != nil || len(problems) > 0 {
			rt.Fatalf("Verify: %v %q", err, problems)
		}
	})
}

// TestDeleteMatchingOrdered deletes the top scores by an order and limit,
// and inside a transaction that rolls back nothing is deleted.
func TestDeleteMatchingOrdered(t *testing.T) {
	db := openTemp(t)
	d, err := db.Docs("d", storh.WithIndex(storh.Index("score")))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := d.Put(storh.Map{"score": (i * 7) % 20}); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	err = db.Update(func(tx *storh.Tx) error {
		td, err := tx.Docs("d")
		if err != nil {
			return err
		}
		if n, err := td.DeleteMatching(query.All()); n != 20 || err != nil {
			t.Fatalf("in a transaction: %d, %v", n, err)
		}
		return boom
	})
	if err != boom || mustCount(t, d) != 20 {
		t.Fatalf("a rolled back deletion: %v, %d left", err, mustCount(t, d))
	}
	n, err := d.DeleteMatching(query.All().OrderBy("score", query.Desc).Limit(5))
	if err != nil || n != 5 {
		t.Fatalf("DeleteMatching top 5 = %d, %v", n, err)
	}
	var scores []int
	for r, err := range d.Stream(query.All().OrderBy("score", query.Desc)) {
		if err != nil {
			t.Fatal(err)
		}
		scores = append(scores, int(r.Data()["score"].(int64)))
	}
	if len(scores) != 15 || scores[0] != 14 {
		t.Fatalf("left %v; want the 15 lowest, 14 first", scores)
	}
	verifyClean(t, db)
}
