//go:build !storh_invariants

package reliability

import (
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/engine"
)

// TestInvariantsOffLetsBrokenCounterThrough is the control for
// invariants_on_test.go: without the storh_invariants tag the same write
// into a collection with a wrong counter commits (the counter stays wrong),
// so it is the tag's check that refuses it there. Verify still finds the
// counter problem and Repair fixes it.
func TestInvariantsOffLetsBrokenCounterThrough(t *testing.T) {
	if engine.Invariants {
		t.Fatal("built without storh_invariants but engine.Invariants is true")
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
	if _, err := docs.Put(content("inv.put")); err != nil {
		t.Fatalf("Put without the invariants tag: %v", err)
	}
	if n, _ := docs.Count(); n != 21+1+5 { // 20 + "last" + the new one, off by the broken 5
		t.Errorf("Count = %d, want the broken counter carried forward (27)", n)
	}
	var found []storh.Problem
	rep, err := db.Verify(func(p storh.Problem) { found = append(found, p) })
	if err != nil || rep.Problems != 1 || len(found) != 1 || found[0].Kind != "counter" {
		t.Errorf("Verify = %+v, %v, %v; want the one counter problem", rep, err, found)
	}
	if rep, err := db.Repair(nil); err != nil || rep.Recounted != 1 {
		t.Fatalf("Repair = %+v, %v", rep, err)
	}
	if n, _ := docs.Count(); n != 22 {
		t.Errorf("Count after Repair = %d, want 22", n)
	}
}
