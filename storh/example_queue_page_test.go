package storh_test

import (
	"fmt"
	"time"

	"github.com/storhdb/storh-go/storh"
)

// A listing a page at a time, as a server answers one: each page is one
// read transaction, and its cursor is where the next starts, even after
// the job it ended on was claimed.
func ExampleQueue_JobsPage() {
	db, done := exampleDB()
	defer done()
	q, err := db.Queue("emails")
	if err != nil {
		panic(err)
	}
	for i := range 5 {
		if _, err := q.Enqueue(storh.Map{"n": i}); err != nil {
			panic(err)
		}
	}
	after := ""
	for page := 1; ; page++ {
		jobs, next, err := q.JobsPage(storh.JobPending, after, 2)
		if err != nil {
			panic(err)
		}
		var ns []any
		for _, j := range jobs {
			full, err := q.Lookup(j.ID) // pages list no payloads
			if err != nil {
				panic(err)
			}
			ns = append(ns, full.Data()["n"])
		}
		fmt.Println("page", page, ns)
		if next == "" {
			break
		}
		if page == 1 {
			// The first two jobs leave: the next page starts after them
			// all the same.
			if _, err := q.ClaimMany(2, time.Minute); err != nil {
				panic(err)
			}
		}
		after = next
	}
	// Output:
	// page 1 [0 1]
	// page 2 [2 3]
	// page 3 [4]
}

// A large purge in bounded steps, each a transaction of its own, all by
// one cutoff: jobs done after it stay for the next purge.
func ExampleQueue_PurgeDoneBefore() {
	db, done := exampleDB()
	defer done()
	q, err := db.Queue("emails")
	if err != nil {
		panic(err)
	}
	if _, err := q.EnqueueMany([]any{storh.Map{"n": 1}, storh.Map{"n": 2}, storh.Map{"n": 3}}); err != nil {
		panic(err)
	}
	jobs, err := q.ClaimMany(3, time.Minute)
	if err != nil {
		panic(err)
	}
	for _, j := range jobs {
		if err := q.Complete(j.ID); err != nil {
			panic(err)
		}
	}
	cutoff := q.Now().Add(time.Second) // every job done so far
	total := 0
	for {
		n, more, err := q.PurgeDoneBefore(cutoff, 2)
		if err != nil {
			panic(err)
		}
		total += n
		fmt.Println("step purged", n, "more:", more)
		if !more {
			break
		}
	}
	fmt.Println("purged", total)
	// Output:
	// step purged 2 more: true
	// step purged 1 more: false
	// purged 3
}
