package storh_test

import (
	"context"
	"fmt"

	"github.com/storhdb/storh-go/storh"
)

// A typed collection's feed yields its changes with the records decoded:
// a reader keeps the Seq of the last one it handled and resumes after it.
func ExampleTypedDocs_Changes() {
	db, done := exampleDB()
	defer done()

	posts, err := storh.DocsOf[Post](db, "posts", storh.WithChangeFeed(10_000))
	if err != nil {
		panic(err)
	}
	hello, _ := posts.Put(Post{Title: "Hello", Views: 1})
	posts.PutWithID(hello.ID, Post{Title: "Hello, again", Views: 2})
	posts.Delete(hello.ID)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last uint64 // kept by the reader, e.g. next to what it updates
	for ch, err := range posts.Changes(ctx, last) {
		if err != nil {
			panic(err)
		}
		switch ch.Op {
		case storh.OpPut:
			fmt.Println(ch.Seq, ch.Op, ch.Value.Title, ch.Value.Views)
		case storh.OpDelete:
			fmt.Println(ch.Seq, ch.Op, ch.ID == hello.ID)
		}
		last = ch.Seq
		if last == 3 {
			break // a real reader goes on: Changes waits for the next commit
		}
	}
	// Output:
	// 1 put Hello 1
	// 2 put Hello, again 2
	// 3 delete true
}
