package storh_test

import (
	"context"
	"iter"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
)

// Records the sweep of a TTL or a retention deletes are deletes like any
// other: each is in the collection's change feed, as OpDelete, after the
// put that stored it.
func TestExpiryDeletesAreChanges(t *testing.T) {
	now := time.Now() // log ids take the real time: retention compares them with the clock
	clock := func() time.Time { return now }
	db := openTemp(t, storh.WithClock(clock), storh.WithoutBackground())
	d, err := db.Docs("sessions", storh.WithTTL("expires"), storh.WithChangeFeed(100))
	if err != nil {
		t.Fatal(err)
	}
	soon, err := d.Put(storh.Map{"expires": now.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(storh.Map{"expires": now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	l, err := db.Log("events", storh.WithRetention(time.Minute), storh.WithChangeFeed(100))
	if err != nil {
		t.Fatal(err)
	}
	old, err := l.Put(storh.Map{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if n, err := d.ApplyTTL(); err != nil || n != 1 {
		t.Fatalf("ApplyTTL = %d, %v; want 1", n, err)
	}
	if n, err := l.ApplyRetention(); err != nil || n != 1 {
		t.Fatalf("ApplyRetention = %d, %v; want 1", n, err)
	}
	check := func(name string, changes func(context.Context, uint64) iter.Seq2[storh.ChangeEvent, error], wantLen int, deleted storh.Record) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var got []storh.ChangeEvent
		for ev, err := range changes(ctx, 0) {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got = append(got, ev)
			if len(got) == wantLen {
				break
			}
		}
		last := got[len(got)-1]
		if last.Op != storh.OpDelete || last.ID != deleted.ID || last.Seq != uint64(wantLen) {
			t.Fatalf("%s: last change %+v; want the delete of %v at seq %d", name, last, deleted.ID, wantLen)
		}
	}
	// sessions: two puts, then the sweep's delete; events: a put, a delete.
	check("the TTL sweep", d.Changes, 3, soon)
	check("the retention sweep", l.Changes, 2, old)
}
