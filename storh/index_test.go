package storh_test

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// emails returns the ids of the records whose email is e, through the
// index (and checks that the plan used it).
func byEmail(t *testing.T, c interface {
	Find(query.Query) ([]storh.Record, error)
	Explain(query.Query) (storh.Plan, error)
}, e any) []uuidv7.UUID {
	t.Helper()
	q := query.All().Where(query.Field("email").Eq(e))
	recs, err := c.Find(q)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := c.Explain(q); err != nil || !slices.Contains(p.Indexes, "email") {
		t.Fatalf("Explain = %v, %v; want the email index", p, err)
	}
	return ids(recs)
}

// TestUniqueViolationEveryWritePath: a value a unique index holds for one
// record cannot be written for another through any write path, and the
// failed write stores nothing: neither its record nor, for a batch or an
// Update that returns the error, any of its other writes.
func TestUniqueViolationEveryWritePath(t *testing.T) {
	for _, kind := range []string{"docs", "log"} {
		t.Run(kind, func(t *testing.T) {
			db := openTemp(t)
			type coll interface {
				Put(any) (storh.Record, error)
				PutMany([]any) ([]storh.Record, error)
				PutStream(iter.Seq[any]) (int, error)
				Find(query.Query) ([]storh.Record, error)
				Explain(query.Query) (storh.Plan, error)
			}
			idx := storh.WithIndex(storh.Index("email").Unique())
			open := func(tx *storh.Tx) coll {
				var c coll
				var err error
				switch {
				case tx != nil && kind == "docs":
					c, err = tx.Docs("users", idx)
				case tx != nil:
					c, err = tx.Log("users", idx)
				case kind == "docs":
					c, err = db.Docs("users", idx)
				default:
					c, err = db.Log("users", idx)
				}
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			users := open(nil)
			ada, err := users.Put(storh.Map{"email": "ada@example.com"})
			if err != nil {
				t.Fatal(err)
			}
			before := digest(t, db)
			dup := storh.Map{"email": "ada@example.com", "name": "impostor"}
			violations := map[string]error{
				"Put":     second(users.Put(dup)),
				"PutMany": second(users.PutMany([]any{storh.Map{"email": "new@example.com"}, dup})),
				"PutMany duplicate inside the batch": second(users.PutMany([]any{
					storh.Map{"email": "twin@example.com"}, storh.Map{"email": "twin@example.com"}})),
				"PutStream": second(users.PutStream(func(yield func(any) bool) {
					yield(storh.Map{"email": "first@example.com"})
					yield(dup)
				})),
				"Update": db.Update(func(tx *storh.Tx) error {
					u := open(tx)
					if _, err := u.Put(storh.Map{"email": "other@example.com"}); err != nil {
						return err
					}
					_, err := u.Put(dup)
					return err
				}),
			}
			if kind == "docs" {
				d, _ := db.Docs("users")
				other, err := d.Put(storh.Map{"email": "bob@example.com"})
				if err != nil {
					t.Fatal(err)
				}
				if err := d.Delete(other.ID); err != nil {
					t.Fatal(err)
				}
				before = digest(t, db)
				violations["PutWithID over another record"] = second(d.PutWithID(other.ID, dup))
			}
			for path, err := range violations {
				if !errors.Is(err, storh.ErrUniqueViolation) || !strings.Contains(err.Error(), `"email"`) ||
					!strings.Contains(err.Error(), "ada@example.com") && !strings.Contains(err.Error(), "twin@example.com") {
					t.Errorf("%s: %v; want ErrUniqueViolation naming the index and the value", path, err)
				}
			}
			if digest(t, db) != before {
				t.Error("a write that broke a unique index changed the database")
			}
			if got := byEmail(t, users, "ada@example.com"); !slices.Equal(got, []uuidv7.UUID{ada.ID}) {
				t.Errorf("the index holds %v for the value; want only %v", got, ada.ID)
			}
			// Group commit: concurrent Puts of the same new value, one wins.
			var wg sync.WaitGroup
			errs := make([]error, 16)
			for i := range errs {
				wg.Go(func() { _, errs[i] = users.Put(storh.Map{"email": "race@example.com", "i": i}) })
			}
			wg.Wait()
			won := 0
			for _, err := range errs {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, storh.ErrUniqueViolation):
					t.Errorf("concurrent Put: %v", err)
				}
			}
			if won != 1 || len(byEmail(t, users, "race@example.com")) != 1 {
				t.Errorf("%d concurrent Puts of one unique value succeeded; want 1", won)
			}
			if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
				t.Errorf("Verify: %+v, %v", rep, err)
			}
		})
	}
}

// TestUniqueViolationThenItsValueMoves: a put that takes a value another
// record holds is refused even when a later write of the same batch or
// transaction moves that value on (the holder gives it up, or the
// refused record takes another): on PostgreSQL, where a put claims its
// value without looking first, such later writes must neither hide the
// refusal nor drop the holder's claim, which would let a duplicate in
// afterwards. A transaction that rolls back sees the refusal too.
func TestUniqueViolationThenItsValueMoves(t *testing.T) {
	errDryRun := errors.New("dry run")
	idx := storh.WithIndex(storh.Index("email").Unique())
	for _, tc := range []struct {
		name string
		// run writes newcomer (and may move holder's value), and returns
		// whether a put inside it was refused with ErrUniqueViolation and
		// what the write path returned.
		run       func(db *storh.DB, holder, newcomer uuidv7.UUID) (refusedInside bool, err error)
		wantErr   error // nil: the write path succeeds
		unchanged bool  // the database is as before
	}{
		{name: "PutMany: the holder gives the value up later in the batch",
			run: func(db *storh.DB, holder, newcomer uuidv7.UUID) (bool, error) {
				users, _ := db.Docs("users", idx)
				_, err := users.PutMany([]any{
					storh.Entry{ID: newcomer, Data: storh.Map{"email": "ada@example.com"}},
					storh.Entry{ID: holder, Data: storh.Map{"email": "moved@example.com"}},
				})
				return false, err
			},
			wantErr: storh.ErrUniqueViolation, unchanged: true},
		{name: "Update: the refused record is then written with another value",
			run: func(db *storh.DB, _, newcomer uuidv7.UUID) (bool, error) {
				refused := false
				err := db.Update(func(tx *storh.Tx) error {
					users, err := tx.Docs("users", idx)
					if err != nil {
						return err
					}
					_, err = users.PutWithID(newcomer, storh.Map{"email": "ada@example.com"})
					if refused = errors.Is(err, storh.ErrUniqueViolation); err != nil && !refused {
						return err
					}
					_, err = users.PutWithID(newcomer, storh.Map{"email": "other@example.com"})
					return err
				})
				return refused, err
			}},
		{name: "Update: the refused record is then deleted",
			run: func(db *storh.DB, _, newcomer uuidv7.UUID) (bool, error) {
				refused := false
				err := db.Update(func(tx *storh.Tx) error {
					users, err := tx.Docs("users", idx)
					if err != nil {
						return err
					}
					_, err = users.PutWithID(newcomer, storh.Map{"email": "ada@example.com"})
					if refused = errors.Is(err, storh.ErrUniqueViolation); err != nil && !refused {
						return err
					}
					return users.Delete(newcomer)
				})
				return refused, err
			}},
		{name: "Update that rolls back",
			run: func(db *storh.DB, _, newcomer uuidv7.UUID) (bool, error) {
				refused := false
				err := db.Update(func(tx *storh.Tx) error {
					users, err := tx.Docs("users", idx)
					if err != nil {
						return err
					}
					_, err = users.PutWithID(newcomer, storh.Map{"email": "ada@example.com"})
					refused = errors.Is(err, storh.ErrUniqueViolation)
					return errDryRun
				})
				return refused, err
			},
			wantErr: errDryRun, unchanged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTemp(t)
			users, err := db.Docs("users", idx)
			if err != nil {
				t.Fatal(err)
			}
			holder, err := users.Put(storh.Map{"email": "ada@example.com"})
			if err != nil {
				t.Fatal(err)
			}
			before := digest(t, db)
			refusedInside, err := tc.run(db, holder.ID, uuidv7.New())
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("write: %v", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("write: %v; want %v", err, tc.wantErr)
			case tc.wantErr != storh.ErrUniqueViolation && !refusedInside:
				t.Error("the put of the held value inside the transaction was not refused")
			}
			if tc.unchanged && digest(t, db) != before {
				t.Error("a refused write changed the database")
			}
			// The holder's claim is whole: a later duplicate is refused.
			if _, err := users.Put(storh.Map{"email": "ada@example.com"}); !errors.Is(err, storh.ErrUniqueViolation) {
				t.Errorf("a later Put of the held value: %v; want ErrUniqueViolation", err)
			}
			if got := byEmail(t, users, "ada@example.com"); !slices.Equal(got, []uuidv7.UUID{holder.ID}) {
				t.Errorf("the index holds %v for the value; want only %v", got, holder.ID)
			}
			if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
				t.Errorf("Verify: %+v, %v", rep, err)
			}
		})
	}
}

// TestUniqueRules: what conflicts and what does not.
func TestUniqueRules(t *testing.T) {
	db := openTemp(t)
	c, err := db.Docs("c", storh.WithIndex(storh.Index("k").Unique()), storh.WithIndex(storh.Index("a", "b").Unique().Named("pair")))
	if err != nil {
		t.Fatal(err)
	}
	mustPut := func(m storh.Map) storh.Record {
		t.Helper()
		r, err := c.Put(m)
		if err != nil {
			t.Fatalf("Put(%v): %v", m, err)
		}
		return r
	}
	mustFail := func(m storh.Map) {
		t.Helper()
		if _, err := c.Put(m); !errors.Is(err, storh.ErrUniqueViolation) {
			t.Errorf("Put(%v) = %v; want ErrUniqueViolation", m, err)
		}
	}
	// Missing and null never conflict, with each other or themselves.
	mustPut(storh.Map{})
	mustPut(storh.Map{})
	mustPut(storh.Map{"k": nil})
	mustPut(storh.Map{"k": nil})
	// Values are typed and case-sensitive; integer width does not matter.
	one := mustPut(storh.Map{"k": 1})
	mustPut(storh.Map{"k": "1"})
	mustPut(storh.Map{"k": 1.0})
	mustPut(storh.Map{"k": "Ada"})
	mustPut(storh.Map{"k": "ada"})
	mustFail(storh.Map{"k": uint8(1)})
	mustFail(storh.Map{"k": "ada"})
	mustPut(storh.Map{"k": []any{1, 2}})
	mustFail(storh.Map{"k": []any{1, 2}})
	mustPut(storh.Map{"k": []any{2, 1}})
	// Rewriting a record with its own value is fine; a delete frees it.
	if _, err := c.PutWithID(one.ID, storh.Map{"k": 1, "more": true}); err != nil {
		t.Errorf("rewriting a record with its own value: %v", err)
	}
	if err := c.Delete(one.ID); err != nil {
		t.Fatal(err)
	}
	mustPut(storh.Map{"k": 1})
	// A compound unique index: the pair must be unique; a null part
	// exempts the pair.
	mustPut(storh.Map{"a": 1, "b": 1})
	mustPut(storh.Map{"a": 1, "b": 2})
	mustFail(storh.Map{"a": 1, "b": 1})
	mustPut(storh.Map{"a": 1})
	mustPut(storh.Map{"a": 1})
	mustPut(storh.Map{"a": 1, "b": nil})
	mustPut(storh.Map{"a": 1, "b": nil})
	if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
}

// TestIndexLifecycle: definitions persist and are used without the option;
// a new index on existing data is built (across several transactions) and
// then used; a unique index over duplicates is refused and leaves nothing;
// a conflicting redeclaration fails; DropIndex removes one.
func TestIndexLifecycle(t *testing.T) {
	path := newPath(t)
	db := openAt(t, path)
	c, err := db.Docs("c", storh.WithIndex(storh.Index("kind")))
	if err != nil {
		t.Fatal(err)
	}
	const n = 12_000 // more than one build transaction
	items := make([]any, n)
	for i := range items {
		items[i] = storh.Map{"kind": fmt.Sprint("k", i%7), "n": i, "dup": i % 2}
	}
	if _, err := c.PutMany(items); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openAt(t, path)
	c, err = db.Docs("c") // no option: the definition persists
	if err != nil {
		t.Fatal(err)
	}
	q := query.All().Where(query.Field("kind").Eq("k3"))
	if p, err := c.Explain(q); err != nil || !slices.Equal(p.Indexes, []string{"kind"}) || p.Returned != n/7 || p.RecordsRead != n/7 {
		t.Errorf("Explain after reopen = %v, %v; want the kind index reading only its matches", p, err)
	}
	// A new index on the existing records is built before Docs returns.
	c, err = db.Docs("c", storh.WithIndex(storh.Index("n")))
	if err != nil {
		t.Fatal(err)
	}
	infos, err := c.Indexes()
	if err != nil || len(infos) != 2 || infos[1].Name != "n" || infos[1].Entries != n || infos[1].Building {
		t.Fatalf("Indexes = %+v, %v; want kind and a built n with %d entries", infos, err, n)
	}
	rng := query.All().Where(query.Field("n").Gte(100), query.Field("n").Lt(110))
	if p, err := c.Explain(rng); err != nil || !slices.Equal(p.Indexes, []string{"n"}) || p.Returned != 10 || p.KeysRead != 10 {
		t.Errorf("Explain of a range on the new index = %v, %v", p, err)
	}
	// A unique index over duplicates is refused and leaves no trace.
	before := digest(t, db)
	_, err = db.Docs("c", storh.WithIndex(storh.Index("dup").Unique()))
	checkErr(t, err, storh.ErrUniqueViolation, `"dup"`)
	if digest(t, db) != before {
		t.Error("a refused unique index left something behind")
	}
	// The same name with another definition is refused.
	_, err = db.Docs("c", storh.WithIndex(storh.Index("n").Unique().Named("n")))
	checkErr(t, err, storh.ErrInvalidIndex, `"n"`)
	_, err = db.Docs("c", storh.WithIndex(storh.Index("kind", "n").Named("kind")))
	checkErr(t, err, storh.ErrInvalidIndex, `"kind"`)
	// DropIndex removes it; queries fall back to a scan with the same result.
	want, _ := c.Find(rng)
	if err := c.DropIndex("n"); err != nil {
		t.Fatal(err)
	}
	checkErr(t, c.DropIndex("n"), storh.ErrNotFound, `"n"`)
	got, _ := c.Find(rng)
	if !sameIDs(ids(got), ids(want)) || len(got) != 10 {
		t.Errorf("after DropIndex the range gives %d records; want the same %d", len(got), len(want))
	}
	if p, _ := c.Explain(rng); len(p.Indexes) != 0 {
		t.Errorf("Explain after DropIndex uses %v", p.Indexes)
	}
	if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
}

// TestIndexBuildResumes: a build interrupted after some of its transactions
// (as by a crash) is finished by the next open, whatever options it gives.
func TestIndexBuildResumes(t *testing.T) {
	fileOnly(t)
	tuneFor(t, "layout=keys") // the damage below is to a key per entry
	path := newPath(t)
	db := openAt(t, path)
	c, _ := db.Docs("c", storh.WithIndex(storh.Index("n")))
	items := make([]any, 9000)
	for i := range items {
		items[i] = storh.Map{"n": i % 100}
	}
	recs, err := c.PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Turn the finished index back into one interrupted after 3000
	// records: mark its definition building, and drop the later entries.
	mark := recs[2999].ID
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket([]byte("c"))
		entries := root.Bucket([]byte("i")).Bucket([]byte("n"))
		var later [][]byte
		cur := entries.Cursor()
		for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
			if string(k[len(k)-16:]) > string(mark[:]) {
				later = append(later, append([]byte(nil), k...))
			}
		}
		for _, k := range later {
			if err := entries.Delete(k); err != nil {
				return err
			}
		}
		def, err := msgpack.Marshal(map[string]any{"paths": [][]string{{"n"}}, "unique": false, "building": true,
			"mark": mark[:], "built": 3000, "entries": 9000 - len(later)})
		if err != nil {
			return err
		}
		return root.Bucket([]byte("x")).Put([]byte("n"), def)
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	// A read-only open leaves the build for a writer: the collection reads,
	// queries do not use the unfinished index, and Indexes shows it.
	ro := openAt(t, path, storh.WithReadOnly())
	rc, err := ro.Docs("c")
	if err != nil {
		t.Fatalf("read-only open with a build pending: %v", err)
	}
	if infos, _ := rc.Indexes(); len(infos) != 1 || !infos[0].Building || infos[0].Built != 3000 {
		t.Errorf("Indexes while building = %+v; want building, 3000 records done", infos)
	}
	q42 := query.All().Where(query.Field("n").Eq(42))
	if p, err := rc.Explain(q42); err != nil || len(p.Indexes) != 0 || p.Returned != 90 {
		t.Errorf("Explain while building = %v, %v; want a scan returning 90", p, err)
	}
	ro.Close()
	db = openAt(t, path)
	c, err = db.Docs("c")
	if err != nil {
		t.Fatal(err)
	}
	infos, _ := c.Indexes()
	if len(infos) != 1 || infos[0].Building || infos[0].Entries != 9000 {
		t.Errorf("Indexes after the resumed build = %+v", infos)
	}
	if n, err := c.CountMatching(query.All().Where(query.Field("n").Eq(42))); err != nil || n != 90 {
		t.Errorf("CountMatching after the resumed build = %d, %v; want 90", n, err)
	}
	if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
}

// TestIndexDamageVerifyRepair: an entry removed, an entry added for nothing
// and a counter changed behind storh's back are each reported by Verify as
// index problems, and Repair rebuilds the index.
func TestIndexDamageVerifyRepair(t *testing.T) {
	fileOnly(t)
	tuneFor(t, "layout=keys") // the damage below is to a key per entry
	path := newPath(t)
	db := openAt(t, path)
	c, _ := db.Docs("c", storh.WithIndex(storh.Index("n")), storh.WithIndex(storh.Index("u").Unique()))
	var recs []storh.Record
	for i := range 50 {
		r, err := c.Put(storh.Map{"n": i % 5, "u": i})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		entries := tx.Bucket([]byte("c")).Bucket([]byte("i")).Bucket([]byte("n"))
		k, _ := entries.Cursor().First()
		k = append([]byte(nil), k...)
		if err := entries.Delete(k); err != nil { // a missing entry
			return err
		}
		ghost := idAt(t, 5)
		phantom := append(append([]byte(nil), k[:len(k)-16]...), ghost[:]...)
		return entries.Put(phantom, nil) // an entry for a record that does not exist
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path)
	var found []storh.Problem
	if _, err := db.Verify(func(p storh.Problem) { found = append(found, p) }); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, p := range found {
		kinds[string(p.Kind)]++
	}
	if kinds["index"] < 2 || len(kinds) != 1 {
		t.Errorf("Verify found %v:\n%v\nwant index problems only (a missing and a phantom entry)", kinds, found)
	}
	rep, err := db.Repair(nil)
	if err != nil || rep.Reindexed != 1 {
		t.Errorf("Repair = %+v, %v; want the index rebuilt", rep, err)
	}
	if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
		t.Errorf("Verify after Repair = %+v, %v", rep, err)
	}
	c, _ = db.Docs("c")
	if n, _ := c.CountMatching(query.All().Where(query.Field("n").Eq(0))); n != 10 {
		t.Errorf("CountMatching after Repair = %d; want 10", n)
	}
}

// TestBadIndexDeclarations: each bad declaration is ErrInvalidIndex with a
// message that names the problem, and changes nothing.
func TestBadIndexDeclarations(t *testing.T) {
	db := openTemp(t)
	c, _ := db.Docs("c")
	if _, err := c.Put(storh.Map{"a": 1}); err != nil {
		t.Fatal(err)
	}
	before := digest(t, db)
	for _, tc := range []struct {
		name    string
		opts    []storh.CollectionOption
		mention string
	}{
		{"no paths", []storh.CollectionOption{storh.WithIndex(storh.Index())}, "at least one"},
		{"empty path", []storh.CollectionOption{storh.WithIndex(storh.Index(""))}, "empty segment"},
		{"empty segment", []storh.CollectionOption{storh.WithIndex(storh.Index("a..b"))}, "empty segment"},
		{"path twice", []storh.CollectionOption{storh.WithIndex(storh.Index("a", "a"))}, "twice"},
		{"empty name", []storh.CollectionOption{storh.WithIndex(storh.Index("a").Named(""))}, "empty"},
		{"bad name", []storh.CollectionOption{storh.WithIndex(storh.Index("a").Named("bad\nname"))}, "non-printable"},
		{"two of one name", []storh.CollectionOption{storh.WithIndex(storh.Index("a")), storh.WithIndex(storh.Index("b").Named("a"))}, "two indexes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.Docs("c", tc.opts...)
			checkErr(t, err, storh.ErrInvalidIndex, tc.mention)
		})
	}
	if digest(t, db) != before {
		t.Error("a bad index declaration changed the database")
	}
}

// TestIndexedValueTooLarge: a value too large to be an index key fails its
// write with ErrInvalidData and stores nothing; unindexed, the same value
// is fine.
func TestIndexedValueTooLarge(t *testing.T) {
	db := openTemp(t)
	c, _ := db.Docs("c", storh.WithIndex(storh.Index("s")))
	before := digest(t, db)
	big := strings.Repeat("x", 5000)
	_, err := c.Put(storh.Map{"s": big})
	checkErr(t, err, storh.ErrInvalidData, `index "s"`)
	if digest(t, db) != before {
		t.Error("a refused write changed the database")
	}
	if _, err := c.Put(storh.Map{"other": big}); err != nil {
		t.Errorf("an unindexed large value: %v", err)
	}
}

// TestIndexErrorsAndDottedKeys: a unique violation is a typed error with
// the index, the values and the record that holds them; a keyset cursor
// that is gone is ErrCursorNotFound (an ErrNotFound); a top-level key with a
// dot in it can be ordered by and indexed through a FieldRef.
func TestIndexErrorsAndDottedKeys(t *testing.T) {
	db := openTemp(t)
	c, err := db.Docs("c", storh.WithIndex(storh.Index("email", "org").Unique()),
		storh.WithIndex(storh.IndexFields(query.FieldPath("http.status"))))
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Put(storh.Map{"email": "a@x", "org": 7, "http.status": 200})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Put(storh.Map{"email": "a@x", "org": 7})
	var uv *storh.UniqueViolation
	if !errors.As(err, &uv) || !errors.Is(err, storh.ErrUniqueViolation) || uv.Index != "email,org" ||
		uv.Existing != first.ID || len(uv.Values) != 2 || uv.Values[0] != "a@x" || uv.Values[1] != int64(7) {
		t.Errorf("unique violation = %#v (%v); want the typed error with index, values and the existing id", uv, err)
	}
	for _, s := range []int{404, 500, 200, 301} {
		if _, err := c.Put(storh.Map{"http.status": s}); err != nil {
			t.Fatal(err)
		}
	}
	q := query.All().OrderByField(query.FieldPath("http.status"), query.Desc).Limit(3)
	recs, err := c.Find(q)
	var got []any
	for _, r := range recs {
		got = append(got, r.Data()["http.status"])
	}
	if err != nil || fmt.Sprint(got) != "[500 404 301]" {
		t.Errorf("OrderByField on a dotted key = %v, %v; want [500 404 301]", got, err)
	}
	if p, _ := c.Explain(q); !slices.Equal(p.Indexes, []string{`"http.status"`}) {
		t.Errorf("Explain = %v; want the index on the dotted key", p)
	}
	gone, _ := c.Put(storh.Map{"http.status": 250})
	if err := c.Delete(gone.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.Find(q.After(gone.ID))
	if !errors.Is(err, storh.ErrCursorNotFound) || !errors.Is(err, storh.ErrNotFound) {
		t.Errorf("a cursor record that is gone = %v; want ErrCursorNotFound, an ErrNotFound", err)
	}
}
