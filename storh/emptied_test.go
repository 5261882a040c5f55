package storh_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Deleting every record of a collection in a transaction leaves bbolt's
// pages empty until the commit rebalances them, and bbolt's own cursor
// loops forever on Last over them and skips keys walking back across them.
// A put, a newest-first stream and a delete while walking, in the same
// transaction, must still see the collection as it is.
func TestEmptiedPagesInOneTransaction(t *testing.T) {
	db, err := storh.Open(filepath.Join(t.TempDir(), "e.db"))
	if err != nil {
		t.Fatal(err)
	}
	hung := false
	defer func() {
		if !hung { // Close would wait for the hung transaction
			db.Close()
		}
	}()
	docs, err := db.Docs("d")
	if err != nil {
		t.Fatal(err)
	}
	const n = 600 // several leaf pages
	items := make([]any, n)
	for i := range items {
		items[i] = storh.Map{"i": i, "pad": "0123456789012345678901234567890123456789"}
	}
	recs, err := docs.PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uuidv7.UUID, n)
	for i, r := range recs {
		ids[i] = r.ID
	}

	done := make(chan error, 1)
	go func() {
		done <- db.Update(func(tx *storh.Tx) error {
			d, err := tx.Docs("d")
			if err != nil {
				return err
			}
			// Empty the middle pages: a newest-first walk must step over
			// them to the records before.
			for _, id := range ids[100:500] {
				if err := d.Delete(id); err != nil {
					return err
				}
			}
			var got []uuidv7.UUID
			for r, err := range d.Stream(query.All().Reverse()) {
				if err != nil {
					return err
				}
				got = append(got, r.ID)
			}
			want := append(append([]uuidv7.UUID{}, ids[:100]...), ids[500:]...)
			if len(got) != len(want) {
				t.Errorf("newest-first over emptied pages: %d records, want %d", len(got), len(want))
			} else {
				for i := range got {
					if got[i] != want[len(want)-1-i] {
						t.Errorf("newest-first record %d: %s, want %s", i, got[i], want[len(want)-1-i])
						break
					}
				}
			}
			// Then all of them, and a put: the collection is empty.
			for _, id := range append(ids[:100:100], ids[500:]...) {
				if err := d.Delete(id); err != nil {
					return err
				}
			}
			_, err = d.Put(storh.Map{"after": true})
			return err
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		hung = true
		t.Fatal("the transaction hangs")
	}
	if n, err := docs.Count(); err != nil || n != 1 {
		t.Fatalf("after the transaction: %d records (%v), want 1", n, err)
	}
}
