package storh_test

import (
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
)

// TestExpirySweepCollectedKeepsRePut: a sweep whose TTL path goes through
// a list in some record has no order to walk, and gathers its candidates
// in its first transaction; a record put again with a later time while
// the sweep pauses between two transactions is kept, though the sweep
// gathered it as expired.
func TestExpirySweepCollectedKeepsRePut(t *testing.T) {
	clk := newTestClock()
	db := openTemp(t, storh.WithClock(clk.Now), storh.WithSweepEvery(time.Millisecond))
	rounds := watchSweeps(db)
	d, err := db.Docs("sessions", storh.WithTTL("meta.exp"), storh.WithIndex(storh.Index("meta.exp")))
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	// A live record whose path goes through a list: the sweep seeks the
	// index's ranges and sorts what it finds by id.
	if _, err := d.Put(storh.Map{"meta": []any{storh.Map{"exp": now.Add(time.Hour)}}}); err != nil {
		t.Fatal(err)
	}
	const expired = 4000 // more than a sweep's first transaction deletes
	var items []any
	for i := range expired {
		items = append(items, storh.Map{"i": i, "meta": storh.Map{"exp": now.Add(time.Second)}})
	}
	recs, err := d.PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	last := recs[expired-1].ID // deleted last, in id order
	putErr := make(chan error, 1)
	var once sync.Once
	storh.SetSweepPauseHook(db, func() {
		once.Do(func() {
			_, err := d.PutWithID(last, storh.Map{"i": -1, "meta": storh.Map{"exp": now.Add(time.Hour)}})
			putErr <- err
		})
	})
	clk.Advance(2 * time.Second)
	for {
		r := nextRound(t, rounds)
		if n := r.swept["sessions"]; n > 0 {
			if n != expired-1 {
				t.Errorf("the sweep deleted %d records, want %d", n, expired-1)
			}
			break
		}
	}
	select {
	case err := <-putErr:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("the sweep never paused: it ran in one transaction")
	}
	if _, err := d.Get(last); err != nil {
		t.Fatalf("the record put again with a later time: %v", err)
	}
	plain, err := db.Docs("sessions")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := plain.Count(); err != nil || n != 2 {
		t.Fatalf("Count = %d, %v; want 2", n, err)
	}
	verifyClean(t, db)
}
