package storh_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

func TestUpdateIsAtomicAcrossCollections(t *testing.T) {
	db := openTemp(t)
	orders, _ := db.Docs("orders")
	audit, _ := db.Log("audit")
	seed, err := orders.Put(storh.Map{"seed": true})
	if err != nil {
		t.Fatal(err)
	}

	// write puts an order, an audit entry and deletes the seed, all in tx.
	write := func(tx *storh.Tx) (storh.Record, storh.Record) {
		t.Helper()
		o, err := tx.Docs("orders")
		if err != nil {
			t.Fatal(err)
		}
		a, err := tx.Log("audit")
		if err != nil {
			t.Fatal(err)
		}
		or, err := o.Put(storh.Map{"total": 10})
		if err != nil {
			t.Fatal(err)
		}
		ar, err := a.Put(storh.Map{"order": or.ID.String()})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Delete(seed.ID); err != nil {
			t.Fatal(err)
		}
		// A new collection created inside the transaction.
		n, err := tx.Docs("created-in-tx")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.Put(storh.Map{"x": 1}); err != nil {
			t.Fatal(err)
		}
		return or, ar
	}

	t.Run("error rolls back", func(t *testing.T) {
		before := digest(t, db)
		boom := errors.New("boom")
		err := db.Update(func(tx *storh.Tx) error {
			write(tx)
			return boom
		})
		if err != boom {
			t.Fatalf("Update = %v; want the callback's error itself", err)
		}
		if digest(t, db) != before {
			t.Error("a failed Update changed the database")
		}
	})

	t.Run("panic rolls back and propagates", func(t *testing.T) {
		before := digest(t, db)
		func() {
			defer func() {
				if r := recover(); r != "kaboom" {
					t.Errorf("recovered %v; want the callback's panic", r)
				}
			}()
			_ = db.Update(func(tx *storh.Tx) error {
				write(tx)
				panic("kaboom")
			})
			t.Error("Update returned after a panic")
		}()
		if digest(t, db) != before {
			t.Error("a panicking Update changed the database")
		}
		// The database is still usable: no lock or callback marker leaked.
		if _, err := orders.Put(storh.Map{"after": "panic"}); err != nil {
			t.Fatalf("Put after a panicking Update: %v", err)
		}
		if err := orders.Delete(mustLast(t, orders)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("success commits both", func(t *testing.T) {
		var or, ar storh.Record
		if err := db.Update(func(tx *storh.Tx) error {
			or, ar = write(tx)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := orders.Get(or.ID); err != nil {
			t.Errorf("order: %v", err)
		}
		if _, err := audit.Get(ar.ID); err != nil {
			t.Errorf("audit: %v", err)
		}
		_, err := orders.Get(seed.ID)
		checkErr(t, err, storh.ErrNotFound, seed.ID.String())
		if n := mustCount(t, orders); n != 1 {
			t.Errorf("orders Count = %d; want 1", n)
		}
		if n := mustCount(t, audit); n != 1 {
			t.Errorf("audit Count = %d; want 1", n)
		}
		if _, err := db.Docs("created-in-tx"); err != nil {
			t.Error(err)
		}
	})
}

func mustLast(t *testing.T, d *storh.Docs) uuidv7.UUID {
	t.Helper()
	recs := collect(t, d.Stream(query.All().Reverse().Limit(1)))
	if len(recs) != 1 {
		t.Fatal("empty collection")
	}
	return recs[0].ID
}

func TestTxStreamSeesOwnWrites(t *testing.T) {
	db := openTemp(t)
	docs, _ := db.Docs("d")
	committed, err := docs.PutWithID(idAt(t, 100), storh.Map{"v": "committed"})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("d")
		if err != nil {
			return err
		}
		// Enough records to span several chunks of a stream.
		var items []any
		for i := range 600 {
			items = append(items, storh.Entry{ID: idAt(t, int64(200+i)), Data: storh.Map{"i": i}})
		}
		if _, err := d.PutMany(items); err != nil {
			return err
		}
		if _, err := d.PutWithID(committed.ID, storh.Map{"v": "replaced"}); err != nil {
			return err
		}
		recs, err := streamErr(d.Stream(query.All()))
		if err != nil {
			return err
		}
		if len(recs) != 601 || recs[0].Data()["v"] != "replaced" {
			return fmt.Errorf("tx stream saw %d records, first %v", len(recs), recs[0].Data())
		}
		if n, err := d.Count(); err != nil || n != 601 {
			return fmt.Errorf("tx Count = %d, %v", n, err)
		}
		if g, err := d.Get(committed.ID); err != nil || g.Data()["v"] != "replaced" {
			return fmt.Errorf("tx Get = %v, %v", g.Data(), err)
		}
		// Filtered, reversed, limited, inside the transaction.
		recs, err = streamErr(d.Stream(query.All().WhereEqual("i", 599).Reverse()))
		if err != nil || len(recs) != 1 {
			return fmt.Errorf("filtered tx stream: %d records, %v", len(recs), err)
		}
		// Deleting inside the transaction hides the record from the stream.
		if err := d.Delete(committed.ID); err != nil {
			return err
		}
		if recs, _ := streamErr(d.Stream(query.All().Limit(1))); len(recs) != 1 || recs[0].ID == committed.ID {
			return fmt.Errorf("deleted record still streamed")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := mustCount(t, docs); n != 600 {
		t.Errorf("Count after commit = %d; want 600", n)
	}
}

func TestViewIsASnapshot(t *testing.T) {
	db := openTemp(t)
	docs, _ := db.Docs("d")
	for i := range 3 {
		if _, err := docs.Put(storh.Map{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	inView := make(chan struct{})
	written := make(chan error)
	go func() {
		<-inView
		_, err := docs.Put(storh.Map{"i": 3})
		written <- err
	}()
	err := db.View(func(tx *storh.Tx) error {
		if tx.Writable() {
			t.Error("View's tx is writable")
		}
		d, err := tx.Docs("d")
		if err != nil {
			return err
		}
		// On PostgreSQL the snapshot is taken by the View's first read,
		// and opening a handle may read nothing (the DB remembers the
		// collection): a Get does.
		if _, err := d.Get(uuidv7.New()); !errors.Is(err, storh.ErrNotFound) {
			t.Errorf("Get of a missing id: %v", err)
		}
		close(inView)
		// The concurrent write commits while this View is open: bbolt lets
		// writers proceed alongside a reader (the file fits in the mmap).
		if err := <-written; err != nil {
			return err
		}
		if n, _ := d.Count(); n != 3 {
			t.Errorf("View Count = %d after a concurrent write; want the snapshot's 3", n)
		}
		if recs, _ := streamErr(d.Stream(query.All())); len(recs) != 3 {
			t.Errorf("View stream = %d records; want 3", len(recs))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := mustCount(t, docs); n != 4 {
		t.Errorf("Count after View = %d; want 4", n)
	}
	// View returns the callback's error as is.
	sentinel := errors.New("mine")
	if err := db.View(func(*storh.Tx) error { return sentinel }); err != sentinel {
		t.Errorf("View = %v; want the callback's error", err)
	}
	// A missing collection cannot be created in a View.
	err = db.View(func(tx *storh.Tx) error {
		_, err := tx.Docs("missing")
		return err
	})
	checkErr(t, err, storh.ErrNotFound, `"missing"`)
}

// TestPutStreamInUpdateSpanningBatches writes more than StreamBatch records
// with PutStream inside one Update. bbolt keeps a reference to every value
// until the transaction commits, so the encoded values of earlier batches
// must stay untouched while later batches are encoded.
func TestPutStreamInUpdateSpanningBatches(t *testing.T) {
	db := openTemp(t)
	const n = 2*storh.StreamBatch + 100
	err := db.Update(func(tx *storh.Tx) error {
		l, err := tx.Log("ingest")
		if err != nil {
			return err
		}
		got, err := l.PutStream(func(yield func(any) bool) {
			for i := range n {
				if !yield(storh.Entry{ID: idAt(t, int64(10_000+i)), Data: storh.Map{"i": i, "pad": fmt.Sprint(i * 7919)}}) {
					return
				}
			}
		})
		if err != nil || got != n {
			return fmt.Errorf("PutStream = %d, %v", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	log, _ := db.Log("ingest")
	i := 0
	for rec, err := range log.Stream(query.All()) {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if d := rec.Data(); d["i"] != int64(i) || d["pad"] != fmt.Sprint(i*7919) {
			t.Fatalf("record %d holds %v", i, d)
		}
		i++
	}
	if i != n {
		t.Fatalf("read %d records; want %d", i, n)
	}
}

func TestPutManyAndPutStreamAllOrNothing(t *testing.T) {
	db := openTemp(t)
	log, _ := db.Log("l")
	existing, err := log.PutWithID(idAt(t, 50), storh.Map{"x": 1})
	if err != nil {
		t.Fatal(err)
	}
	before := digest(t, db)

	// A bad item in the middle: nothing written, the error names it.
	_, err = log.PutMany([]any{storh.Map{"a": 1}, storh.Map{"b": 2}, 42, storh.Map{"c": 3}})
	checkErr(t, err, storh.ErrInvalidData, `"l"`, "item 2")
	var se *storh.Error
	if !errors.As(err, &se) || se.Index != 2 || se.Collection != "l" {
		t.Errorf("error %#v; want *storh.Error with Index 2", err)
	}
	// A duplicate id in the middle of a log batch: nothing written.
	_, err = log.PutMany([]any{storh.Map{"a": 1}, storh.Entry{ID: existing.ID, Data: storh.Map{"b": 2}}, storh.Map{"c": 3}})
	checkErr(t, err, storh.ErrExists, existing.ID.String(), "item 1")
	// The same id twice in one batch.
	dup := idAt(t, 60)
	_, err = log.PutMany([]any{storh.Entry{ID: dup, Data: storh.Map{}}, storh.Entry{ID: dup, Data: storh.Map{}}})
	checkErr(t, err, storh.ErrExists, dup.String(), "item 1")
	// A v4 id in an Entry.
	_, err = log.PutMany([]any{storh.Map{"a": 1}, storh.Entry{ID: v4ID, Data: storh.Map{}}})
	checkErr(t, err, storh.ErrInvalidID, "item 1")
	_, err = log.PutMany([]any{(*storh.Entry)(nil)})
	checkErr(t, err, storh.ErrInvalidData, "item 0")
	if digest(t, db) != before {
		t.Fatal("a failed PutMany changed the database")
	}

	// PutStream: the failing batch is rolled back, earlier batches stay, and
	// the count returned is exact.
	const good = storh.StreamBatch + 10
	maxRead := -1
	n, err := log.PutStream(func(yield func(any) bool) {
		for i := range 2*storh.StreamBatch + 5 {
			maxRead = i
			item := any(storh.Map{"i": i})
			if i == good {
				item = storh.Entry{ID: existing.ID, Data: storh.Map{"dup": true}}
			}
			if !yield(item) {
				return
			}
		}
	})
	// The second batch (items StreamBatch..2*StreamBatch-1) holds the
	// duplicate: it fails when flushed, before anything after it is read.
	if maxRead != 2*storh.StreamBatch-1 {
		t.Errorf("PutStream read up to item %d; want %d", maxRead, 2*storh.StreamBatch-1)
	}
	checkErr(t, err, storh.ErrExists, existing.ID.String(), fmt.Sprintf("item %d", good))
	if n != storh.StreamBatch {
		t.Errorf("PutStream committed %d; want %d", n, storh.StreamBatch)
	}
	if c := mustCount(t, log); c != 1+storh.StreamBatch {
		t.Errorf("Count = %d; want %d", c, 1+storh.StreamBatch)
	}
	// A bad item stops the stream at once; what was committed stays.
	n, err = log.PutStream(func(yield func(any) bool) {
		yield(storh.Map{"ok": 1})
		if !yield(make(chan int)) {
			return
		}
		t.Error("PutStream read on after a bad item")
	})
	checkErr(t, err, storh.ErrInvalidData, "item 1")
	if n != 0 {
		t.Errorf("PutStream after a bad item = %d; want 0", n)
	}
	if c := mustCount(t, log); c != 1+storh.StreamBatch {
		t.Errorf("Count = %d; want %d", c, 1+storh.StreamBatch)
	}
}

func TestDocsUpsertAndDelete(t *testing.T) {
	db := openTemp(t)
	docs, _ := db.Docs("d")
	id := idAt(t, 1234)
	if _, err := docs.PutWithID(id, storh.Map{"v": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := docs.PutWithID(id, storh.Map{"v": 2, "w": "x"}); err != nil {
		t.Fatal(err)
	}
	r, err := docs.Get(id)
	if err != nil || r.Data()["v"] != int64(2) {
		t.Fatalf("Get after upsert: %v, %v", r.Data(), err)
	}
	st, err := docs.Stats()
	if err != nil || st.Records != 1 || st.FirstID != id || st.LastID != id || st.Kind != "docs" || st.Bytes <= 0 {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	if err := docs.Delete(id); err != nil {
		t.Fatal(err)
	}
	if err := docs.Delete(id); err != nil {
		t.Errorf("deleting a missing id: %v; want nil", err)
	}
	_, err = docs.Get(id)
	checkErr(t, err, storh.ErrNotFound, `"d"`, id.String())
	st, err = docs.Stats()
	if err != nil || st.Records != 0 || st.Bytes != 0 || !st.FirstID.IsZero() || !st.FirstTime().IsZero() {
		t.Errorf("Stats after delete = %+v, %v", st, err)
	}
}

// TestCallbackErrorsComeBackUnchanged: whatever a callback returns is what
// Update and View return, the same value: never translated because its text
// looks like a file-system error, never re-wrapped so its chain is cut.
func TestCallbackErrorsComeBackUnchanged(t *testing.T) {
	db := openTemp(t)
	docs, _ := db.Docs("d")
	if _, err := docs.Put(storh.Map{"x": 1}); err != nil {
		t.Fatal(err)
	}
	before := digest(t, db)
	mine := []error{
		errors.New("file too large"),
		errors.New("no space left on device"),
		errors.New("database not open"),
		fmt.Errorf("my quota: %w", syscall.ENOSPC),
		fmt.Errorf("my limit: %w", syscall.EFBIG),
		&fs.PathError{Op: "write", Path: "elsewhere", Err: syscall.ENOSPC},
		fmt.Errorf("mine: %w", berrors.ErrTxClosed),
		fmt.Errorf("mine: %w", berrors.ErrMaxSizeReached),
		fmt.Errorf("mine: %w", storh.ErrNotFound),
	}
	for _, want := range mine {
		t.Run(want.Error(), func(t *testing.T) {
			err := db.Update(func(tx *storh.Tx) error {
				d, err := tx.Docs("d")
				if err != nil {
					return err
				}
				if _, err := d.Put(storh.Map{"rolled": "back"}); err != nil {
					return err
				}
				return want
			})
			if err != want {
				t.Errorf("Update = %#v; want the callback's error itself, %#v", err, want)
			}
			if err := db.View(func(*storh.Tx) error { return want }); err != want {
				t.Errorf("View = %#v; want the callback's error itself, %#v", err, want)
			}
		})
	}
	// An error of the library returned by the callback is also passed on as
	// it is, with its operation and collection.
	err := db.Update(func(tx *storh.Tx) error {
		d, _ := tx.Docs("d")
		_, err := d.PutWithID(uuidv7.UUID{}, storh.Map{})
		return err
	})
	var se *storh.Error
	if !errors.As(err, &se) || !errors.Is(err, storh.ErrInvalidID) || se.Collection != "d" {
		t.Errorf("Update = %v; want the *storh.Error of the failed PutWithID", err)
	}
	if digest(t, db) != before {
		t.Error("a failed Update changed the database")
	}
}

// TestRecordsFromTxOwnTheirBytes: a Record returned by a write inside Update
// does not share memory with the write bbolt holds until commit: changing
// its Raw bytes before the commit must not change what is stored.
func TestRecordsFromTxOwnTheirBytes(t *testing.T) {
	db := openTemp(t)
	var one storh.Record
	var many []storh.Record
	err := db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("d")
		if err != nil {
			return err
		}
		if one, err = d.Put(storh.Map{"name": "one"}); err != nil {
			return err
		}
		if many, err = d.PutMany([]any{storh.Map{"name": "two"}, storh.Map{"name": "three"}}); err != nil {
			return err
		}
		for _, r := range append([]storh.Record{one}, many...) {
			raw := r.Raw()
			for i := range raw {
				raw[i] ^= 0xff // a careless caller scribbles over the bytes
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := db.Docs("d")
	for _, want := range []struct {
		id   uuidv7.UUID
		name string
	}{{one.ID, "one"}, {many[0].ID, "two"}, {many[1].ID, "three"}} {
		r, err := d.Get(want.id)
		if err != nil {
			t.Fatalf("Get %s: %v (the scribble reached the stored value)", want.id, err)
		}
		if got := r.Data()["name"]; got != want.name {
			t.Errorf("stored %v; want %q", got, want.name)
		}
	}
	rep, err := db.Verify(nil)
	if err != nil || rep.Problems != 0 {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
	// Records returned outside a transaction were never shared: their bytes
	// are theirs as well, and equal to what Get reads.
	r, err := d.Put(storh.Map{"name": "four"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := d.Get(r.ID)
	if !bytes.Equal(got.Raw(), r.Raw()) {
		t.Error("Put's record differs from the stored one")
	}
}
