package storh_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// A point read on a file searches the records bucket's pages from a root
// found once per commit and kept in the handle. These tests hold one
// handle across many commits, as an application does, and check every
// read against what was written: a root kept past the commit that moved
// it would read a tree that is no longer the collection's.

// TestPointReadsFollowCommits: random inserts, rewrites and deletes, with
// values from a few bytes to several pages, so that the records bucket
// goes from inline in its parent's page to a tree of several levels and
// back; after each step Get and GetRaw through the one handle agree with
// a map of what is there, present or not, and so do ranged Streams (see
// checkRanges). Reopening the file in the
// middle gives a new handle on a file whose transaction ids go on.
func TestPointReadsFollowCommits(t *testing.T) {
	fileOnly(t)
	rapid.Check(t, func(rt *rapid.T) {
		path := newPath(t)
		db := openAt(t, path)
		docs, err := db.Docs("c")
		if err != nil {
			rt.Fatal(err)
		}
		model := map[uuidv7.UUID]string{}
		var gone []uuidv7.UUID
		ms := int64(1_700_000_000_000)
		value := func(label string) string {
			size := rapid.SampledFrom([]int{1, 30, 300, 5000, 20000}).Draw(rt, label)
			return strings.Repeat(fmt.Sprint(len(model)%10), size)
		}
		existing := func(label string) (uuidv7.UUID, bool) {
			if len(model) == 0 {
				return uuidv7.UUID{}, false
			}
			ids := make([]uuidv7.UUID, 0, len(model))
			for id := range model {
				ids = append(ids, id)
			}
			slices.SortFunc(ids, func(a, b uuidv7.UUID) int { return a.Compare(b) })
			return rapid.SampledFrom(ids).Draw(rt, label), true
		}
		// check reads the records a step may have moved: all of them at
		// the end, else a sample (rapid picks which).
		check := func(step int, all bool) {
			for id, want := range model {
				if !all && len(model) > 32 && !rapid.Bool().Draw(rt, "read") {
					continue
				}
				r, err := docs.Get(id)
				if err != nil {
					rt.Fatalf("step %d: Get %s: %v", step, id, err)
				}
				if got, _ := r.Data()["v"].(string); got != want {
					rt.Fatalf("step %d: Get %s: %d bytes, want %d", step, id, len(got), len(want))
				}
				var lent int
				if err := docs.GetRaw(id, func(raw []byte) error { lent = len(raw); return nil }); err != nil || lent != len(r.Raw()) {
					rt.Fatalf("step %d: GetRaw %s: %d bytes, %v; Get has %d", step, id, lent, err, len(r.Raw()))
				}
			}
			for i, id := range gone {
				if !all && i%16 != step%16 {
					continue
				}
				if _, err := docs.Get(id); !errors.Is(err, storh.ErrNotFound) {
					rt.Fatalf("step %d: Get of deleted %s: %v, want ErrNotFound", step, id, err)
				}
			}
			checkRanges(rt, step, docs, model, ms)
		}
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for step := range steps {
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op < 4: // a batch of new records
				n := rapid.SampledFrom([]int{1, 10, 150}).Draw(rt, "batch")
				items, ids := make([]any, n), make([]uuidv7.UUID, n)
				for i := range items {
					ms++
					ids[i] = idAt(t, ms)
					items[i] = storh.Map{"v": value("size")}
				}
				if err := db.Update(func(tx *storh.Tx) error {
					d, err := tx.Docs("c")
					if err != nil {
						return err
					}
					for i, id := range ids {
						if _, err := d.PutWithID(id, items[i]); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					rt.Fatal(err)
				}
				for i, id := range ids {
					model[id] = items[i].(storh.Map)["v"].(string)
				}
			case op < 6: // a rewrite, often to another size
				id, ok := existing("rewrite")
				if !ok {
					continue
				}
				v := value("size")
				if _, err := docs.PutWithID(id, storh.Map{"v": v}); err != nil {
					rt.Fatal(err)
				}
				model[id] = v
			case op < 9: // deletes, down to an empty collection at times
				for range rapid.SampledFrom([]int{1, 50, 1000}).Draw(rt, "deletes") {
					id, ok := existing("delete")
					if !ok {
						break
					}
					if err := docs.Delete(id); err != nil {
						rt.Fatal(err)
					}
					delete(model, id)
					gone = append(gone, id)
				}
			default:
				if err := db.Close(); err != nil {
					rt.Fatal(err)
				}
				db = openAt(t, path)
				if docs, err = db.Docs("c"); err != nil {
					rt.Fatal(err)
				}
			}
			check(step, false)
		}
		check(steps, true)
		if err := db.Close(); err != nil {
			rt.Fatal(err)
		}
	})
}

// checkRanges reads id ranges of docs (everything, after or before an id
// of the model or one between them, a time window, forwards and in
// reverse, with and without a limit) and checks each against the model,
// whose ids were made at milliseconds up to lastMs. Such reads walk the
// records bucket's leaves from the root kept in the handle.
func checkRanges(rt *rapid.T, step int, docs *storh.Docs, model map[uuidv7.UUID]string, lastMs int64) {
	ids := make([]uuidv7.UUID, 0, len(model))
	for id := range model {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b uuidv7.UUID) int { return a.Compare(b) })
	bound := func(label string) uuidv7.UUID {
		if len(ids) > 0 && rapid.Bool().Draw(rt, label+" present") {
			return rapid.SampledFrom(ids).Draw(rt, label)
		}
		return uuidv7.MinForTimestampMs(rapid.Int64Range(1_700_000_000_000, lastMs+1).Draw(rt, label+" ms"))
	}
	for range rapid.IntRange(1, 3).Draw(rt, "ranges") {
		q, want := query.All(), slices.Clone(ids)
		switch rapid.IntRange(0, 3).Draw(rt, "range") {
		case 1:
			after := bound("after")
			q = q.After(after)
			want = slices.DeleteFunc(want, func(id uuidv7.UUID) bool { return id.Compare(after) <= 0 })
		case 2:
			before := bound("before")
			q = q.Before(before)
			want = slices.DeleteFunc(want, func(id uuidv7.UUID) bool { return id.Compare(before) >= 0 })
		case 3:
			from := rapid.Int64Range(1_700_000_000_000, lastMs+1).Draw(rt, "from")
			until := from + rapid.Int64Range(0, 400).Draw(rt, "width")
			q = q.TimeRangeMs(from, until)
			want = slices.DeleteFunc(want, func(id uuidv7.UUID) bool { return id.Time().UnixMilli() < from || id.Time().UnixMilli() > until })
		}
		if rapid.Bool().Draw(rt, "reverse") {
			q = q.Reverse()
			slices.Reverse(want)
		}
		if limit := rapid.SampledFrom([]int{0, 1, 100, 300}).Draw(rt, "limit"); limit > 0 {
			q = q.Limit(limit)
			want = want[:min(limit, len(want))]
		}
		var got []uuidv7.UUID
		for r, err := range docs.Stream(q) {
			if err != nil {
				rt.Fatalf("step %d: %s: %v", step, q, err)
			}
			if v, _ := r.Data()["v"].(string); v != model[r.ID] {
				rt.Fatalf("step %d: %s: record %s has %d bytes, want %d", step, q, r.ID, len(v), len(model[r.ID]))
			}
			got = append(got, r.ID)
		}
		if !slices.Equal(got, want) {
			rt.Fatalf("step %d: %s: %d records, want %d (first difference at %d)", step, q, len(got), len(want), firstDiff(got, want))
		}
	}
}

func firstDiff(a, b []uuidv7.UUID) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestPointReadsDuringCommits (run it with -race): readers keep reading
// through one shared handle while a writer rewrites every record with a
// rising version and inserts more, splitting pages and moving the
// records bucket's root at every commit. A read sees a whole record of
// one committed version, never an older version than the same reader saw
// before, and never fails.
func TestPointReadsDuringCommits(t *testing.T) {
	fileOnly(t)
	db := openTemp(t)
	docs, err := db.Docs("c")
	if err != nil {
		t.Fatal(err)
	}
	const records = 300
	ids := make([]uuidv7.UUID, records)
	for i := range ids {
		ids[i] = idAt(t, 1_700_000_000_000+int64(i))
		if _, err := docs.PutWithID(ids[i], storh.Map{"version": 0, "pad": strings.Repeat("x", 100)}); err != nil {
			t.Fatal(err)
		}
	}
	commits := 200
	if !testkit.Long() {
		commits = 60
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := make([]int64, records)
			for i := 0; !done.Load(); i += 7 {
				k := i % records
				r, err := docs.Get(ids[k])
				if err != nil {
					errs <- fmt.Errorf("Get %s: %w", ids[k], err)
					return
				}
				m := r.Data()
				v, _ := m["version"].(int64)
				if pad, _ := m["pad"].(string); len(pad) != 100+int(v)%50 || v < seen[k] {
					errs <- fmt.Errorf("Get %s: version %d with %d bytes of pad after version %d", ids[k], v, len(pad), seen[k])
					return
				}
				seen[k] = v
			}
		}()
	}
	next := int64(1_800_000_000_000)
	for v := 1; v <= commits; v++ {
		err := db.Update(func(tx *storh.Tx) error {
			d, err := tx.Docs("c")
			if err != nil {
				return err
			}
			for _, id := range ids {
				if _, err := d.PutWithID(id, storh.Map{"version": v, "pad": strings.Repeat("x", 100+v%50)}); err != nil {
					return err
				}
			}
			for range 20 {
				next++
				if _, err := d.PutWithID(idAt(t, next), storh.Map{"filler": strings.Repeat("y", 200)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReadsCheckKindOfCollectionCreatedLater: a Docs handle opened while
// its collection did not exist, and a Log of that name created afterwards
// through a transaction: every read through the Docs handle, point reads
// and ranged reads (which on a file read the pages directly) as well as
// counts, is refused with ErrWrongKind, a small log (kept inline in its
// parent's page) and a large one alike, and reads through a Log handle
// see its records.
func TestReadsCheckKindOfCollectionCreatedLater(t *testing.T) {
	for _, n := range []int{1, 400} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			db := openTemp(t)
			docs, err := db.Docs("x")
			if err != nil {
				t.Fatal(err)
			}
			var ids []uuidv7.UUID
			if err := db.Update(func(tx *storh.Tx) error {
				log, err := tx.Log("x")
				if err != nil {
					return err
				}
				for i := range n {
					r, err := log.Put(storh.Map{"i": i, "pad": strings.Repeat("p", 100)})
					if err != nil {
						return err
					}
					ids = append(ids, r.ID)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			// Each read twice: the first finds the collection's root, the
			// second reads it from the handle's cache.
			for range 2 {
				_, err := docs.Get(ids[0])
				checkErr(t, err, storh.ErrWrongKind)
				err = docs.GetRaw(ids[n-1], func([]byte) error { return nil })
				checkErr(t, err, storh.ErrWrongKind)
				_, err = docs.Find(all())
				checkErr(t, err, storh.ErrWrongKind)
				_, err = streamErr(docs.Stream(query.All().After(ids[0]).Limit(10)))
				checkErr(t, err, storh.ErrWrongKind)
				_, err = docs.Count()
				checkErr(t, err, storh.ErrWrongKind)
			}
			log, err := db.Log("x")
			if err != nil {
				t.Fatal(err)
			}
			if got, err := log.Find(all()); err != nil || len(got) != n {
				t.Fatalf("Log handle: Find(All) = %d records, %v; want %d", len(got), err, n)
			}
		})
	}
}
