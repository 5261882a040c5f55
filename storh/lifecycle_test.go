package storh_test

import (
	"errors"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
)

// collectionNames lists the collections in the file.
func collectionNames(t *testing.T, db *storh.DB) []string {
	t.Helper()
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range st.Collections {
		names = append(names, c.Name)
	}
	return names
}

// TestCollectionCreatedByFirstWrite: opening a handle writes nothing; the
// collection appears in the same transaction as its first record, so a
// failed first write, a crash before it, or a handle that is only read
// leaves nothing behind.
func TestCollectionCreatedByFirstWrite(t *testing.T) {
	db := openTemp(t)
	before := digest(t, db)
	docs, err := db.Docs("docs")
	if err != nil {
		t.Fatal(err)
	}
	log, err := db.Log("log")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Queue("queue"); err != nil {
		t.Fatal(err)
	}
	// Reads see the collections empty.
	if n := mustCount(t, docs); n != 0 {
		t.Errorf("Count = %d", n)
	}
	if recs := collect(t, log.Stream(query.All())); len(recs) != 0 {
		t.Errorf("Stream = %d records", len(recs))
	}
	if _, err := docs.Get(idAt(t, 1)); !errors.Is(err, storh.ErrNotFound) {
		t.Errorf("Get = %v; want ErrNotFound", err)
	}
	if st, err := docs.Stats(); err != nil || st.Name != "docs" || st.Kind != "docs" || st.Records != 0 {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	if err := docs.Delete(idAt(t, 1)); err != nil {
		t.Errorf("Delete in a collection not created yet = %v; want nil", err)
	}
	// Failed writes: bad data, a bad batch, an empty stream.
	if _, err := docs.Put(nil); !errors.Is(err, storh.ErrInvalidData) {
		t.Fatalf("Put(nil) = %v", err)
	}
	if _, err := log.PutMany([]any{storh.Map{"ok": 1}, 42}); !errors.Is(err, storh.ErrInvalidData) {
		t.Fatalf("PutMany = %v", err)
	}
	if n, err := log.PutStream(func(func(any) bool) {}); n != 0 || err != nil {
		t.Fatalf("PutStream(empty) = %d, %v", n, err)
	}
	// Inside transactions: a handle only read, and one written then rolled back.
	if err := db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("tx-read")
		if err != nil {
			return err
		}
		_, err = d.Count()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := db.Update(func(tx *storh.Tx) error {
		d, _ := tx.Docs("tx-rolled-back")
		if _, err := d.Put(storh.Map{"x": 1}); err != nil {
			return err
		}
		return boom
	}); err != boom {
		t.Fatal(err)
	}
	if digest(t, db) != before {
		t.Fatalf("opening handles and failed writes changed the file; collections: %v", collectionNames(t, db))
	}

	// The first write creates the collection with its kind.
	if _, err := docs.Put(storh.Map{"x": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := log.PutMany([]any{storh.Map{"x": 1}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *storh.Tx) error {
		d, _ := tx.Docs("tx-written")
		_, err := d.Put(storh.Map{"x": 1})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	st, _ := db.Stats()
	got := map[string]string{}
	for _, c := range st.Collections {
		got[c.Name] = c.Kind
	}
	want := map[string]string{"docs": "docs", "log": "log", "tx-written": "docs"}
	if len(got) != len(want) || got["docs"] != "docs" || got["log"] != "log" || got["tx-written"] != "docs" {
		t.Errorf("collections %v; want %v", got, want)
	}
	// The kind a handle was opened as holds before the first write too.
	if _, err := db.Docs("queue"); !errors.Is(err, storh.ErrWrongKind) {
		t.Errorf("Docs on a name opened as a queue = %v; want ErrWrongKind", err)
	}
	// A View cannot create, so there a missing collection is not found.
	err = db.View(func(tx *storh.Tx) error {
		_, err := tx.Docs("never")
		return err
	})
	checkErr(t, err, storh.ErrNotFound, `"never"`)
}

// TestDroppedCollectionHandles: every operation through a handle opened
// before Drop fails with ErrNotFound (a write must not resurrect the
// collection), while a handle opened after Drop starts it afresh.
func TestDroppedCollectionHandles(t *testing.T) {
	db := openTemp(t)
	docs, _ := db.Docs("d")
	log, _ := db.Log("l")
	r, err := docs.Put(storh.Map{"x": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.Put(storh.Map{"x": 1}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"d", "l"} {
		if err := db.Drop(name); err != nil {
			t.Fatal(err)
		}
	}
	before := digest(t, db)
	for name, err := range map[string]error{
		"Delete":    docs.Delete(r.ID),
		"Put":       second(docs.Put(storh.Map{"x": 2})),
		"PutWithID": second(docs.PutWithID(r.ID, storh.Map{"x": 2})),
		"PutMany":   second(docs.PutMany([]any{storh.Map{"x": 2}})),
		"Get":       second(docs.Get(r.ID)),
		"Count":     second(docs.Count()),
		"log Put":   second(log.Put(storh.Map{"x": 2})),
		"Stream":    second(streamErr(docs.Stream(query.All()))),
	} {
		if !errors.Is(err, storh.ErrNotFound) {
			t.Errorf("%s through a handle opened before Drop = %v; want ErrNotFound", name, err)
		}
	}
	if digest(t, db) != before {
		t.Errorf("a handle opened before Drop brought the collection back: %v", collectionNames(t, db))
	}
	// A handle opened inside a transaction after the Drop is a new handle:
	// deleting from the missing collection is a no-op and creates nothing.
	err = db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("d")
		if err != nil {
			return err
		}
		return d.Delete(r.ID)
	})
	if err != nil || digest(t, db) != before {
		t.Errorf("Delete of a missing collection inside Update = %v (or it changed the file); want a no-op", err)
	}
	fresh, err := db.Docs("d")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Put(storh.Map{"x": 3}); err != nil {
		t.Errorf("Put through a handle opened after Drop = %v", err)
	}
	if n := mustCount(t, fresh); n != 1 {
		t.Errorf("Count after recreating = %d; want 1", n)
	}
}

func second[T any](_ T, err error) error { return err }
