package storh_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
)

// dropWait bounds how long a reader may take to end once its collection
// is dropped: it is woken by the drop, so it ends within milliseconds,
// and a reader nothing wakes fails the test here instead of hanging it.
const dropWait = 20 * time.Second

// TestChangesCollectionDropped: a reader following a collection's feed
// while the collection is dropped ends with ErrNotFound, and one whose
// collection is dropped and made again (its feed starts afresh at 1)
// ends with ErrChangesTrimmed, rather than wait for ever, or take the new
// feed's numbers for the old one's. The drop comes from the reader's own
// store, on either backend, and on PostgreSQL from another store on the
// same schema and from another OS process, whose drop's notice wakes the
// reader: nothing is written after the drop there (a collection made
// again is only made, with its feed), so no other notice can.
func TestChangesCollectionDropped(t *testing.T) {
	if os.Getenv(dropChildEnv) != "" {
		t.Skip("the child's own run")
	}
	for _, by := range []string{"this store", "another store", "another process"} {
		for _, remade := range []bool{false, true} {
			name := by + "/dropped"
			if remade {
				name = by + "/made again"
			}
			t.Run(name, func(t *testing.T) {
				var path string
				if by == "this store" {
					path = newPath(t)
				} else {
					path = pgURL(t) // other stores and processes: PostgreSQL's
				}
				db := openAt(t, path)
				docs, err := db.Docs("followed", storh.WithChangeFeed(10))
				if err != nil {
					t.Fatal(err)
				}
				for i := range 3 {
					if _, err := docs.Put(storh.Map{"n": i}); err != nil {
						t.Fatal(err)
					}
				}
				var other *storh.DB
				if by == "another store" {
					other = openAt(t, path)
				}
				ctx, cancel := context.WithTimeout(context.Background(), dropWait)
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
						select {
						case got <- ev:
						case <-ctx.Done():
							return
						}
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
				switch by {
				case "this store":
					// A store's own writes wake its readers too: written
					// after it is made again, the new feed's numbers must
					// not pass for the old one's.
					dropAndMake(t, db, remade, 5)
				case "another store":
					dropAndMake(t, other, remade, 0)
				case "another process":
					dropInChild(t, path, remade)
				}
				want := storh.ErrNotFound
				if remade {
					want = storh.ErrChangesTrimmed
					if ev := <-got; ev.Seq != 3 {
						t.Fatalf("the change held back is seq %d, want 3", ev.Seq)
					}
				}
				select {
				case ev := <-got:
					t.Fatalf("after the drop the reader delivered seq %d", ev.Seq)
				case err := <-ended:
					if errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("the reader still waited %v after the drop (%s): nothing woke it", dropWait, by)
					}
					if !errors.Is(err, want) {
						t.Fatalf("the reader ended with %v, want %v", err, want)
					}
				}
			})
		}
	}
}

// dropAndMake drops "followed" through db and, if remade, makes it again
// with its feed and writes n records there.
func dropAndMake(t *testing.T, db *storh.DB, remade bool, n int) {
	t.Helper()
	if err := dropAndMakeErr(db, remade, n); err != nil {
		t.Fatal(err)
	}
}

func dropAndMakeErr(db *storh.DB, remade bool, n int) error {
	if err := db.Drop("followed"); err != nil {
		return err
	}
	if !remade {
		return nil
	}
	again, err := db.Docs("followed", storh.WithChangeFeed(10))
	if err != nil {
		return err
	}
	for i := range n {
		if _, err := again.Put(storh.Map{"n": i}); err != nil {
			return err
		}
	}
	return nil
}

// dropChildEnv gives TestChangesDropChild its store and its part:
// "<URL>|drop" drops "followed", "<URL>|remake" drops it and makes it
// again, with its feed and no record; the child prints "done" after.
const dropChildEnv = "STORH_DROP_CHILD"

// TestChangesDropChild is the child of TestChangesCollectionDropped.
func TestChangesDropChild(t *testing.T) {
	spec := os.Getenv(dropChildEnv)
	if spec == "" {
		t.Skip("run by TestChangesCollectionDropped")
	}
	url, part, _ := strings.Cut(spec, "|")
	db, err := storh.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := dropAndMakeErr(db, part == "remake", 0); err != nil {
		t.Fatal(err)
	}
	fmt.Println("done")
}

// dropInChild runs TestChangesDropChild on url and waits for it to end.
func dropInChild(t *testing.T, url string, remade bool) {
	t.Helper()
	part := "drop"
	if remade {
		part = "remake"
	}
	cmd, in, out := startChild(t, "TestChangesDropChild", dropChildEnv+"="+url+"|"+part)
	in.Close()
	done := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		switch sc.Text() {
		case "done":
			done = true
		case "PASS": // the test framework's
		default:
			fmt.Fprintln(os.Stderr, "child:", sc.Text())
		}
	}
	if err := cmd.Wait(); err != nil || !done {
		t.Fatalf("the child that drops the collection failed (%v)", err)
	}
}
