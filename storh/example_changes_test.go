package storh_test

import (
	"context"
	"fmt"

	"github.com/storhdb/storh-go/storh"
)

// A consumer of a collection's changes that resumes where it stopped: it
// keeps the Seq of the last change it handled (here in a variable; in use,
// stored with what it did, in the same place) and reads on from it.
func ExampleDocs_Changes() {
	db, done := exampleDB()
	defer done()

	users, err := db.Docs("users", storh.WithChangeFeed(10_000))
	if err != nil {
		panic(err)
	}
	ada, err := users.Put(storh.Map{"name": "Ada"})
	if err != nil {
		panic(err)
	}
	if _, err := users.Patch(ada.ID, storh.Set("name", "Ada Lovelace")); err != nil {
		panic(err)
	}
	if err := users.Delete(ada.ID); err != nil {
		panic(err)
	}

	var last uint64 // the consumer's position: 0 reads from the first change
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for ev, err := range users.Changes(ctx, last) {
		if err != nil {
			panic(err) // ErrChangesTrimmed: resync from a Stream of the collection
		}
		switch ev.Op {
		case storh.OpPut:
			fmt.Println(ev.Seq, ev.Op, ev.Record.Data()["name"])
		case storh.OpDelete:
			fmt.Println(ev.Seq, ev.Op)
		}
		last = ev.Seq
		if last == 3 {
			break // a real consumer keeps waiting for the next change
		}
	}
	seq, _ := users.LastSeq()
	fmt.Println("last", seq)
	// Output:
	// 1 put Ada
	// 2 put Ada Lovelace
	// 3 delete
	// last 3
}
