package storh_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/storhdb/storh-go/storh"
)

// Sessions that expire: a record whose "expires" time has come vanishes
// from reads at once, and the database deletes it in the background. The
// clock is a fake one here (WithClock), so that time passes on command.
func ExampleWithTTL() {
	dir, err := os.MkdirTemp("", "storh-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }

	db, err := storh.Open(filepath.Join(dir, "app.db"), storh.WithClock(clock))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	sessions, err := db.Docs("sessions",
		storh.WithTTL("expires"),
		storh.WithIndex(storh.Index("expires"))) // the sweep seeks instead of reading everything
	if err != nil {
		panic(err)
	}
	short, _ := sessions.Put(storh.Map{"user": "ada", "expires": now.Add(time.Minute)})
	long, _ := sessions.Put(storh.Map{"user": "bob", "expires": now.Add(time.Hour).Format(time.RFC3339)})

	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()

	_, err = sessions.Get(short.ID)
	fmt.Println("ada's session:", errors.Is(err, storh.ErrNotFound))
	rec, _ := sessions.Get(long.ID)
	fmt.Println("bob's session:", rec.Data()["user"])
	// Output:
	// ada's session: true
	// bob's session: bob
}

// An application that runs expiry itself opens the database
// WithoutBackground and calls ApplyTTL (or a log's ApplyRetention) when it
// suits it.
func ExampleDocs_ApplyTTL() {
	dir, err := os.MkdirTemp("", "storh-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := storh.Open(filepath.Join(dir, "app.db"), storh.WithoutBackground())
	if err != nil {
		panic(err)
	}
	defer db.Close()
	tokens, err := db.Docs("tokens", storh.WithTTL("until"))
	if err != nil {
		panic(err)
	}
	tokens.Put(storh.Map{"until": time.Now().Add(-time.Second)}) // expired already
	tokens.Put(storh.Map{"until": time.Now().Add(time.Hour)})
	tokens.Put(storh.Map{"note": "no until: never expires"})

	stored, _ := tokens.Count() // the stored count: expired records until deleted
	n, err := tokens.ApplyTTL()
	if err != nil {
		panic(err)
	}
	left, _ := tokens.Count()
	fmt.Println(stored, "stored,", n, "deleted,", left, "left")
	// Output: 3 stored, 1 deleted, 2 left
}

// A sweep every second, for a database whose records must go within a
// second or two of their expiry.
func ExampleWithSweepEvery() {
	dir, err := os.MkdirTemp("", "storh-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := storh.Open(filepath.Join(dir, "app.db"), storh.WithSweepEvery(time.Second))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	events, err := db.Log("events", storh.WithRetention(24*time.Hour))
	if err != nil {
		panic(err)
	}
	events.Put(storh.Map{"msg": "kept for a day, then swept"})
	n, _ := events.Count()
	fmt.Println(n)
	// Output: 1
}
