package engine_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TestReadsWithoutDirectPath: a file whose layout Open's check does not
// recognise (forced here) is read through bbolt's buckets, and Stats says
// why. Its reads give what the direct path gives on the same file: point
// reads, ranged reads forwards and backwards, counts, in a large
// collection with values past a page, a small one kept inline and a log,
// before and after more writes.
func TestReadsWithoutDirectPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fallback.db")
	model := map[string]map[uuidv7.UUID]string{}
	write := func(db *storh.DB, round int) {
		t.Helper()
		big, err := db.Docs("big")
		if err != nil {
			t.Fatal(err)
		}
		small, err := db.Docs("small")
		if err != nil {
			t.Fatal(err)
		}
		events, err := db.Log("events")
		if err != nil {
			t.Fatal(err)
		}
		for name, c := range map[string]storh.Collection{"big": big, "small": small, "events": events} {
			if model[name] == nil {
				model[name] = map[uuidv7.UUID]string{}
			}
			n := map[string]int{"big": 1500, "small": 3, "events": 300}[name]
			items := make([]any, n)
			for i := range items {
				size := 10 + i%300
				if name == "big" && i%101 == 0 {
					size = 9000 // past a page: overflow pages
				}
				items[i] = storh.Map{"v": strings.Repeat(fmt.Sprint(round), size)}
			}
			recs, err := c.PutMany(items)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range recs {
				model[name][r.ID] = items[i].(storh.Map)["v"].(string)
			}
		}
		// Deletes empty some of big's leaves.
		for i, id := range sortedIDs(model["big"]) {
			if i%7 == 3 {
				if err := big.Delete(id); err != nil {
					t.Fatal(err)
				}
				delete(model["big"], id)
			}
		}
	}
	check := func(db *storh.DB, wantOff string) {
		t.Helper()
		st, err := db.Stats()
		if err != nil || st.DirectReadsOff != wantOff {
			t.Fatalf("Stats: DirectReadsOff %q, %v; want %q", st.DirectReadsOff, err, wantOff)
		}
		for name, recs := range model {
			var c storh.Collection
			var err error
			if name == "events" {
				if _, err := db.Docs(name); !errors.Is(err, storh.ErrWrongKind) {
					t.Fatalf("a Docs handle of the log: %v, want ErrWrongKind", err)
				}
				c, err = db.Log(name)
			} else {
				c, err = db.Docs(name)
			}
			if err != nil {
				t.Fatal(err)
			}
			checkColl(t, name, c, recs)
		}
	}

	db, err := storh.Open(path, storh.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	write(db, 1)
	check(db, "")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	const why = "the test forces the fallback"
	restore := engine.ForceLayoutMismatch(why)
	defer restore()
	db, err = storh.Open(path, storh.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check(db, why)
	write(db, 2)
	check(db, why)
}

// checkColl compares every read of c with recs.
func checkColl(t *testing.T, name string, c storh.Collection, recs map[uuidv7.UUID]string) {
	t.Helper()
	ids := sortedIDs(recs)
	for _, id := range ids {
		r, err := c.Get(id)
		if err != nil || r.Data()["v"] != recs[id] {
			t.Fatalf("%s: Get %s: %v", name, id, err)
		}
	}
	if n, err := c.Count(); err != nil || n != len(ids) {
		t.Fatalf("%s: Count = %d, %v; want %d", name, n, err, len(ids))
	}
	mid := ids[len(ids)/2]
	for _, q := range []struct {
		q    query.Query
		want []uuidv7.UUID
	}{
		{query.All(), ids},
		{query.All().Reverse(), reversed(ids)},
		{query.All().After(mid).Limit(50), ids[len(ids)/2+1 : min(len(ids), len(ids)/2+51)]},
		{query.All().Before(mid).Reverse(), reversed(ids[:len(ids)/2])},
	} {
		got, err := c.Find(q.q)
		if err != nil {
			t.Fatalf("%s: Find(%v): %v", name, q.q, err)
		}
		gotIDs := make([]uuidv7.UUID, len(got))
		for i, r := range got {
			gotIDs[i] = r.ID
			if r.Data()["v"] != recs[r.ID] {
				t.Fatalf("%s: Find(%v): record %s holds another value", name, q.q, r.ID)
			}
		}
		if !slices.Equal(gotIDs, q.want) {
			t.Fatalf("%s: Find(%v): %d ids, want %d", name, q.q, len(gotIDs), len(q.want))
		}
	}
}

func sortedIDs(m map[uuidv7.UUID]string) []uuidv7.UUID {
	ids := make([]uuidv7.UUID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b uuidv7.UUID) int { return a.Compare(b) })
	return ids
}

func reversed(ids []uuidv7.UUID) []uuidv7.UUID {
	out := slices.Clone(ids)
	slices.Reverse(out)
	return out
}
