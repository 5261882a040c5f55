//go:build storh_invariants

package reliability

import (
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TestInvariantsCatchBrokenCounter proves the storh_invariants check fires:
// with a counter made wrong behind the engine's back (raw bbolt), every
// write transaction touching that collection must fail its commit and
// change nothing, while other collections stay writable; once Repair fixes
// the counter, writes succeed again. invariants_off_test.go shows the same
// write going through without the tag.
func TestInvariantsCatchBrokenCounter(t *testing.T) {
	if !engine.Invariants {
		t.Fatal("built with storh_invariants but engine.Invariants is false")
	}
	path := scratch(t, "inv.db")
	buildDB(t, path, 20, 0, 0)
	breakCounter(t, path, "docs", 5)

	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	docs, _ := db.Docs("docs")
	events, _ := db.Log("events")
	before := digestOpen(t, db)
	writes := map[string]func() error{
		"Put":       func() error { _, err := docs.Put(content("inv.put")); return err },
		"PutWithID": func() error { _, err := docs.PutWithID(uuidv7.New(), content("inv.pwi")); return err },
		"PutMany":   func() error { _, err := docs.PutMany([]any{content("inv.m1"), content("inv.m2")}); return err },
		"Update": func() error {
			return db.Update(func(tx *storh.Tx) error {
				d, err := tx.Docs("docs")
				if err == nil {
					_, err = d.Put(content("inv.upd"))
				}
				return err
			})
		},
	}
	for name, write := range writes {
		err := write()
		if err == nil || !strings.Contains(err.Error(), "invariant") || !strings.Contains(err.Error(), "counters say") {
			t.Errorf("%s into a collection with a wrong counter: %v; want the commit to fail the invariant check", name, err)
		}
		if after := digestOpen(t, db); after != before {
			t.Fatalf("%s: the failed commit changed the database", name)
		}
	}
	if _, err := events.Put(content("inv.other")); err != nil {
		t.Errorf("a write to an untouched collection failed: %v", err)
	}
	if rep, err := db.Repair(nil); err != nil || rep.Recounted != 1 {
		t.Fatalf("Repair = %+v, %v; want one collection recounted", rep, err)
	}
	for name, write := range writes {
		if err := write(); err != nil {
			t.Errorf("%s after Repair: %v", name, err)
		}
	}
}
