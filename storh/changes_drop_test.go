package storh_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
)

// TestChangesCollectionDropped: a reader following a collection's feed
// while the collection is dropped ends with ErrNotFound, and one whose
// collection is dropped and made again (its feed starts afresh at 1)
// ends with ErrChangesTrimmed, rather than wait for ever, or take the new
// feed's numbers for the old one's. On PostgreSQL another store makes it
// again, whose writes wake the reader; a drop alone wakes the readers of
// its own store.
func TestChangesCollectionDropped(t *testing.T) {
	for _, remade := range []bool{false, true} {
		name := "dropped"
		if remade {
			name = "made again"
		}
		t.Run(name, func(t *testing.T) {
			path := newPath(t)
			db := openAt(t, path)
			dropper := db
			if onPostgres && remade {
				dropper = openAt(t, path)
			}
			docs, err := db.Docs("followed", storh.WithChangeFeed(10))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, err := docs.Put(storh.Map{"n": i}); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Unbuffered: while the test holds the last change back, the
			// reader is in its yield, and reads again only after the drop
			// (and the new collection) when it has handed it over.
			got := make(chan storh.ChangeEvent)
			ended := make(chan error, 1)
			go func() {
				for ev, err := range docs.Changes(ctx, 0) {
					if err != nil {
						ended <- err
						return
					}
					got <- ev
				}
			}()
			held := 3
			if remade {
				held = 2
			}
			for range held {
				select {
				case <-got:
				case err := <-ended:
					t.Fatalf("the reader ended before the drop: %v", err)
				}
			}
			if err := dropper.Drop("followed"); err != nil {
				t.Fatal(err)
			}
			want := storh.ErrNotFound
			if remade {
				want = storh.ErrChangesTrimmed
				again, err := dropper.Docs("followed", storh.WithChangeFeed(10))
				if err != nil {
					t.Fatal(err)
				}
				for i := range 5 {
					if _, err := again.Put(storh.Map{"n": i}); err != nil {
						t.Fatal(err)
					}
				}
				if ev := <-got; ev.Seq != 3 {
					t.Fatalf("the change held back is seq %d, want 3", ev.Seq)
				}
			}
			select {
			case ev := <-got:
				t.Fatalf("after the drop the reader delivered seq %d", ev.Seq)
			case err := <-ended:
				if !errors.Is(err, want) {
					t.Fatalf("the reader ended with %v, want %v", err, want)
				}
			}
		})
	}
}
