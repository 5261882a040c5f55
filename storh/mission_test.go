package storh_test

import (
	"errors"
	"fmt"
	"iter"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The examples of the mission statement, as tests.

func TestTimeRangeMsIsInclusive(t *testing.T) {
	db := openTemp(t)
	events, err := db.Log("events")
	if err != nil {
		t.Fatal(err)
	}
	const from, until = 1_700_000_000_100, 1_700_000_000_200
	// Each ms gets two ids so both the smallest and the largest id of an edge
	// millisecond are exercised.
	byMs := map[int64][]uuidv7.UUID{}
	for _, ms := range []int64{from - 2, from - 1, from, from + 1, from + 50, until - 1, until, until + 1, until + 2} {
		for range 2 {
			id := idAt(t, ms)
			if _, err := events.PutWithID(id, storh.Map{"ms": ms}); err != nil {
				t.Fatal(err)
			}
			byMs[ms] = append(byMs[ms], id)
		}
	}
	var want []uuidv7.UUID
	for _, ms := range []int64{from, from + 1, from + 50, until - 1, until} {
		want = append(want, byMs[ms]...)
	}
	got := ids(collect(t, events.Stream(query.All().TimeRangeMs(from, until))))
	if !sameIDs(got, want) {
		t.Fatalf("TimeRangeMs(%d, %d) = %v\nwant %v", from, until, got, want)
	}
	for _, r := range collect(t, events.Stream(query.All().TimeRangeMs(from, until))) {
		if ms := r.Data()["ms"].(int64); ms < from || ms > until || ms != r.ID.TimestampMs() || r.Time().UnixMilli() != ms {
			t.Errorf("record %v: ms field %d, id ms %d, Time %v", r.ID, ms, r.ID.TimestampMs(), r.Time())
		}
	}

	// Single-millisecond window, and the window newest first.
	got = ids(collect(t, events.Stream(query.All().TimeRangeMs(until, until))))
	if !sameIDs(got, byMs[until]) {
		t.Errorf("TimeRangeMs(until, until) = %v; want %v", got, byMs[until])
	}
	got = ids(collect(t, events.Stream(query.All().TimeRangeMs(from, until).Reverse())))
	for i, j := 0, len(want)-1; i < len(got) && j >= 0; i, j = i+1, j-1 {
		if got[i] != want[j] {
			t.Fatalf("reverse window differs at %d: %v", i, got)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("reverse window has %d records; want %d", len(got), len(want))
	}
	// Inverted window: nothing.
	if got := collect(t, events.Stream(query.All().TimeRangeMs(until, from))); len(got) != 0 {
		t.Errorf("inverted window returned %d records", len(got))
	}
}

func TestAfterExcludesItsID(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("docs")
	if err != nil {
		t.Fatal(err)
	}
	var all []uuidv7.UUID
	for i := range 5 {
		rec, err := docs.PutWithID(idAt(t, int64(1000+i)), storh.Map{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rec.ID)
	}
	for i, id := range all {
		got := ids(collect(t, docs.Stream(query.All().After(id))))
		if !sameIDs(got, all[i+1:]) {
			t.Errorf("After(#%d) = %v; want %v", i, got, all[i+1:])
		}
		got = ids(collect(t, docs.Stream(query.All().Before(id))))
		if !sameIDs(got, all[:i]) {
			t.Errorf("Before(#%d) = %v; want %v", i, got, all[:i])
		}
	}
}

func TestPagination(t *testing.T) {
	db := openTemp(t)
	log, err := db.Log("pages")
	if err != nil {
		t.Fatal(err)
	}
	const n, page = 1000, 100
	items := make([]any, n)
	for i := range items {
		// Ten records per millisecond: pages must split milliseconds cleanly.
		items[i] = storh.Entry{ID: idAt(t, int64(1_000_000+i/10)), Data: storh.Map{"i": i}}
	}
	written, err := log.PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	if c := mustCount(t, log); c != n {
		t.Fatalf("Count = %d; want %d", c, n)
	}

	check := func(t *testing.T, base query.Query, next func(query.Query, uuidv7.UUID) query.Query, wantAt func(int) int) {
		seen := 0
		q := base.Limit(page)
		for pages := 0; ; pages++ {
			if pages > n/page+1 {
				t.Fatal("pagination does not end")
			}
			recs := collect(t, log.Stream(q))
			if len(recs) == 0 {
				break
			}
			if len(recs) > page {
				t.Fatalf("page of %d records; limit %d", len(recs), page)
			}
			for _, r := range recs {
				w := wantAt(seen)
				if r.ID != written[w].ID {
					t.Fatalf("record %d is %v; want %v (#%d)", seen, r.ID, written[w].ID, w)
				}
				if got := r.Data()["i"]; got != int64(w) {
					t.Fatalf("record %d has i=%v; want %d", seen, got, w)
				}
				seen++
			}
			q = next(base.Limit(page), recs[len(recs)-1].ID)
		}
		if seen != n {
			t.Fatalf("saw %d records; want %d", seen, n)
		}
	}
	t.Run("oldest first", func(t *testing.T) {
		check(t, query.All(), query.Query.After, func(i int) int { return i })
	})
	t.Run("newest first", func(t *testing.T) {
		check(t, query.All().Reverse(), query.Query.Before, func(i int) int { return n - 1 - i })
	})
}

func TestExplicitInvalidIDWritesNothing(t *testing.T) {
	db := openTemp(t)
	for _, kind := range []string{"docs", "log"} {
		t.Run(kind, func(t *testing.T) {
			var put func(uuidv7.UUID, any) (storh.Record, error)
			var c interface{ Count() (int, error) }
			if kind == "docs" {
				d, err := db.Docs("c-" + kind)
				if err != nil {
					t.Fatal(err)
				}
				put, c = d.PutWithID, d
			} else {
				l, err := db.Log("c-" + kind)
				if err != nil {
					t.Fatal(err)
				}
				put, c = l.PutWithID, l
			}
			if _, err := put(idAt(t, 5), storh.Map{"ok": true}); err != nil {
				t.Fatal(err)
			}
			before := digest(t, db)
			_, err := put(v4ID, storh.Map{"a": 1})
			checkErr(t, err, storh.ErrInvalidID, "c-"+kind, v4ID.String(), "version 4")
			if after := digest(t, db); after != before {
				t.Error("the database changed")
			}
			if n := mustCount(t, c); n != 1 {
				t.Errorf("Count = %d; want 1", n)
			}
		})
	}
}

func TestGeneratorInvalidIDWritesNothing(t *testing.T) {
	db := openTemp(t)
	bad := func() uuidv7.UUID { return v4ID }
	docs, err := db.Docs("gen", storh.WithIDGenerator(bad))
	if err != nil {
		t.Fatal(err)
	}
	log, err := db.Log("genlog", storh.WithIDGenerator(bad))
	if err != nil {
		t.Fatal(err)
	}
	before := digest(t, db)
	_, err = docs.Put(storh.Map{"a": 1})
	checkErr(t, err, storh.ErrInvalidID, `"gen"`, "generator")
	_, err = log.Put(storh.Map{"a": 1})
	checkErr(t, err, storh.ErrInvalidID, `"genlog"`, "generator")
	_, err = docs.PutMany([]any{storh.Map{"a": 1}})
	checkErr(t, err, storh.ErrInvalidID, `"gen"`, "generator")
	_, err = log.PutStream(func(yield func(any) bool) { yield(storh.Map{"a": 1}) })
	checkErr(t, err, storh.ErrInvalidID, `"genlog"`, "generator")
	if after := digest(t, db); after != before {
		t.Error("the database changed")
	}
	for _, c := range []interface{ Count() (int, error) }{docs, log} {
		if n := mustCount(t, c); n != 0 {
			t.Errorf("Count = %d; want 0", n)
		}
	}

	// A generator that turns bad halfway through a batch fails the batch.
	calls := 0
	flaky := func() uuidv7.UUID {
		calls++
		if calls == 3 {
			return uuidv7.UUID{}
		}
		return uuidv7.New()
	}
	flakyDocs, err := db.Docs("gen", storh.WithIDGenerator(flaky))
	if err != nil {
		t.Fatal(err)
	}
	_, err = flakyDocs.PutMany([]any{storh.Map{"a": 1}, storh.Map{"a": 2}, storh.Map{"a": 3}, storh.Map{"a": 4}})
	checkErr(t, err, storh.ErrInvalidID, "item 2")
	if after := digest(t, db); after != before {
		t.Error("the database changed")
	}
}

// putDeterministic fills a fresh database through WithDeterministicIDs and
// returns the ids and the raw digest.
func putDeterministic(t *testing.T, opt storh.CollectionOption) ([]uuidv7.UUID, string) {
	db := openTemp(t)
	log, err := db.Log("det", opt)
	if err != nil {
		t.Fatal(err)
	}
	var out []uuidv7.UUID
	for i := range 10 {
		rec, err := log.Put(storh.Map{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec.ID)
	}
	recs, err := log.PutMany([]any{storh.Map{"i": 10}, storh.Map{"i": 11}})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, ids(recs)...)
	return out, digest(t, db)
}

func TestDeterministicIDs(t *testing.T) {
	const start = 1_700_000_000_000
	a, da := putDeterministic(t, storh.WithDeterministicIDs(42, start))
	b, db := putDeterministic(t, storh.WithDeterministicIDs(42, start))
	if !sameIDs(a, b) {
		t.Fatalf("same seed, different ids:\n%v\n%v", a, b)
	}
	// On PostgreSQL, counters sit in slots named by each DB's own random
	// id (engine/slots.go): the stores hold the same records, not the same
	// rows.
	if da != db && !onPostgres {
		t.Error("same seed and data, different files")
	}
	for i, id := range a {
		if !id.IsV7() || id.TimestampMs() != start+int64(i) {
			t.Errorf("id %d = %v (ms %d); want a UUIDv7 at %d", i, id, id.TimestampMs(), start+int64(i))
		}
		if i > 0 && a[i-1].Compare(id) >= 0 {
			t.Errorf("ids not increasing at %d", i)
		}
	}
	c, _ := putDeterministic(t, storh.WithDeterministicIDs(43, start))
	if sameIDs(a, c) {
		t.Error("different seeds gave the same ids")
	}
	// The generator type itself gives the same ids through WithIDGenerator.
	g1 := uuidv7.NewDeterministic(7, start, 1)
	g2 := uuidv7.NewDeterministic(7, start, 1)
	x, _ := putDeterministic(t, storh.WithIDGenerator(g1.New))
	y, _ := putDeterministic(t, storh.WithIDGenerator(g2.New))
	if !sameIDs(x, y) {
		t.Error("NewDeterministic through WithIDGenerator: ids differ")
	}
}

func TestDeterministicIDsOptionValidation(t *testing.T) {
	db := openTemp(t)
	for _, ms := range []int64{-1, uuidv7.MaxTimestampMs + 1} {
		_, err := db.Docs("x", storh.WithDeterministicIDs(1, ms))
		if !errors.Is(err, uuidv7.ErrTimestampRange) {
			t.Errorf("WithDeterministicIDs(1, %d): %v; want ErrTimestampRange", ms, err)
		}
	}
	if _, err := db.Docs("x", storh.WithIDGenerator(nil)); err == nil {
		t.Error("WithIDGenerator(nil) accepted")
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	path := newPath(t)
	type snapshot struct {
		ids   []uuidv7.UUID
		data  []string
		count int
	}
	snap := func(t *testing.T, c interface {
		Count() (int, error)
		Stream(query.Query) iter.Seq2[storh.Record, error]
	}) snapshot {
		var s snapshot
		for _, r := range collect(t, c.Stream(query.All())) {
			s.ids = append(s.ids, r.ID)
			s.data = append(s.data, fmt.Sprintf("%#v", r.Data()))
		}
		s.count = mustCount(t, c)
		return s
	}

	db, err := storh.Open(path) // durable: this test is about what survives
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := db.Docs("users")
	log, _ := db.Log("events")
	if _, err := db.Queue("jobs"); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := docs.Put(storh.Map{"name": fmt.Sprint("u", i), "n": i, "f": 1.5, "ok": i%2 == 0, "nil": nil,
			"list": []any{1, "two", 3.0}, "nested": storh.Map{"x": int8(-3)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := log.PutWithID(idAt(t, int64(5000+i)), storh.Map{"i": uint16(i)}); err != nil {
			t.Fatal(err)
		}
	}
	recs := collect(t, docs.Stream(query.All().Limit(3)))
	if err := docs.Delete(recs[1].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := docs.PutWithID(recs[2].ID, storh.Map{"replaced": true}); err != nil {
		t.Fatal(err)
	}
	wantDocs, wantLog := snap(t, docs), snap(t, log)
	if wantDocs.count != 19 || wantLog.count != 20 {
		t.Fatalf("counts %d, %d; want 19, 20", wantDocs.count, wantLog.count)
	}
	wantDigest := digest(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("a second Close = %v; want nil", err)
	}

	db = openAt(t, path)
	if digest(t, db) != wantDigest {
		t.Error("file changed across close and open")
	}
	docs2, err := db.Docs("users")
	if err != nil {
		t.Fatal(err)
	}
	log2, err := db.Log("events")
	if err != nil {
		t.Fatal(err)
	}
	if got := snap(t, docs2); fmt.Sprint(got) != fmt.Sprint(wantDocs) {
		t.Errorf("docs after reopen:\n%v\nwant\n%v", got, wantDocs)
	}
	if got := snap(t, log2); fmt.Sprint(got) != fmt.Sprint(wantLog) {
		t.Errorf("log after reopen:\n%v\nwant\n%v", got, wantLog)
	}
	// Kinds survive: each name only opens as what it was created as.
	_, err = db.Log("users")
	checkErr(t, err, storh.ErrWrongKind, `"users"`)
	_, err = db.Docs("events")
	checkErr(t, err, storh.ErrWrongKind, `"events"`)
	// A handle opened but never written through left nothing in the file
	// (collections are created by their first write); within one process
	// the kind it was opened as still holds.
	jobs, err := db.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	if n := mustCount(t, jobs); n != 0 || jobs.Name() != "jobs" {
		t.Errorf("queue %q Count = %d; want 0", jobs.Name(), n)
	}
	_, err = db.Docs("jobs")
	checkErr(t, err, storh.ErrWrongKind, `"jobs"`)
	// The log is still immutable.
	_, err = log2.PutWithID(wantLog.ids[0], storh.Map{"i": 99})
	checkErr(t, err, storh.ErrExists, wantLog.ids[0].String())

	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, c := range st.Collections {
		kinds[c.Name] = c.Kind
	}
	if fmt.Sprint(kinds) != "map[events:log users:docs]" {
		t.Errorf("kinds after reopen: %v", kinds)
	}
}

func TestDataTypesRoundTrip(t *testing.T) {
	db := openTemp(t)
	docs, _ := db.Docs("types")
	type inner struct {
		X int `msgpack:"x"`
	}
	type rec struct {
		Name  string   `msgpack:"name"`
		Age   uint8    `msgpack:"age"`
		Score float32  `msgpack:"score"`
		Tags  []string `msgpack:"tags"`
		In    inner    `msgpack:"in"`
		Skip  string   `msgpack:"-"`
	}
	in := rec{Name: "ada", Age: 36, Score: 0.5, Tags: []string{"a", "b"}, In: inner{X: -7}, Skip: "gone"}
	r, err := docs.Put(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := docs.Get(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := "map[string]interface {}{\"age\":36, \"in\":map[string]interface {}{\"x\":-7}, \"name\":\"ada\", \"score\":0.5, \"tags\":[]interface {}{\"a\", \"b\"}}"
	if s := fmt.Sprintf("%#v", got.Data()); s != want {
		t.Errorf("Data() = %s\nwant %s", s, want)
	}
	var back rec
	if err := got.Decode(&back); err != nil {
		t.Fatal(err)
	}
	in.Skip = ""
	if fmt.Sprint(back) != fmt.Sprint(in) {
		t.Errorf("Decode = %+v; want %+v", back, in)
	}
	var m storh.Map
	if err := got.Decode(&m); err != nil || m["age"] != int64(36) {
		t.Errorf("Decode(&Map) = %v, %v", m, err)
	}
	if got.Size() != len(got.Raw()) || got.Size() == 0 {
		t.Errorf("Size %d, Raw %d bytes", got.Size(), len(got.Raw()))
	}
	if string(r.Raw()) != string(got.Raw()) {
		t.Error("Put's record and Get's record differ")
	}
	// A pointer to a map and to a struct are data too.
	if _, err := docs.Put(&in); err != nil {
		t.Errorf("Put(&struct): %v", err)
	}
	mm := map[string]int{"a": 1}
	if _, err := docs.Put(&mm); err != nil {
		t.Errorf("Put(&map): %v", err)
	}
}
