package storh_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

type typedNote struct {
	Text  string `json:"text"`
	Stars int    `json:"stars"`
}

// typedChange is what a test expects of one ChangeOf[typedNote].
type typedChange struct {
	seq  uint64
	op   storh.ChangeOp
	id   uuidv7.UUID
	note typedNote
	bad  bool // ErrTypeMismatch
}

func (c typedChange) String() string {
	return fmt.Sprintf("%d:%s %s %+v bad=%v", c.seq, c.op, c.id, c.note, c.bad)
}

// readTyped reads n changes (errors of a record that does not fit
// included, as bad changes) from Changes after after.
func readTyped(t *testing.T, notes *storh.TypedDocs[typedNote], after uint64, n int) []typedChange {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []typedChange
	for ch, err := range notes.Changes(ctx, after) {
		c := typedChange{seq: ch.Seq, op: ch.Op, id: ch.ID, note: ch.Value}
		if err != nil {
			if !errors.Is(err, storh.ErrTypeMismatch) {
				t.Fatalf("Changes(%d) after %d changes: %v", after, len(out), err)
			}
			if ch.Seq == 0 || ch.Value != (typedNote{}) {
				t.Fatalf("a mismatch yields its change's seq and the zero value, got %v", c)
			}
			c.bad = true
		}
		out = append(out, c)
		if len(out) == n {
			break
		}
	}
	return out
}

// TestTypedChanges: a typed collection's Changes yields every put and
// delete with the record decoded into T, resumes after a Seq, yields a
// record that does not fit T as ErrTypeMismatch with its Seq and goes on.
func TestTypedChanges(t *testing.T) {
	db := openTemp(t)
	notes, err := storh.DocsOf[typedNote](db, "notes", storh.WithChangeFeed(100))
	if err != nil {
		t.Fatal(err)
	}
	a, err := notes.Put(typedNote{Text: "a", Stars: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := notes.Put(typedNote{Text: "b", Stars: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notes.PutWithID(a.ID, typedNote{Text: "a2", Stars: 3}); err != nil {
		t.Fatal(err)
	}
	if err := notes.Delete(b.ID); err != nil {
		t.Fatal(err)
	}
	// Written untyped: stars is not an int.
	bad, err := notes.Untyped().Put(storh.Map{"text": "x", "stars": "many"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notes.Untyped().Patch(a.ID, storh.Inc("stars", 1)); err != nil {
		t.Fatal(err)
	}
	want := []typedChange{
		{1, storh.OpPut, a.ID, typedNote{"a", 1}, false},
		{2, storh.OpPut, b.ID, typedNote{"b", 2}, false},
		{3, storh.OpPut, a.ID, typedNote{"a2", 3}, false},
		{4, storh.OpDelete, b.ID, typedNote{}, false},
		{5, storh.OpPut, bad.ID, typedNote{}, true},
		{6, storh.OpPut, a.ID, typedNote{"a2", 4}, false},
	}
	if got := readTyped(t, notes, 0, len(want)); !slices.Equal(got, want) {
		t.Fatalf("Changes(0):\n got %v\nwant %v", got, want)
	}
	// Resumed after 3: the rest, nothing repeated.
	if got := readTyped(t, notes, 3, 3); !slices.Equal(got, want[3:]) {
		t.Fatalf("Changes(3):\n got %v\nwant %v", got, want[3:])
	}
	seq, err := notes.LastSeq()
	if err != nil || seq != 6 {
		t.Fatalf("LastSeq = %d, %v; want 6", seq, err)
	}
	// The same feed through a log of T.
	events, err := storh.LogOf[typedNote](db, "events", storh.WithChangeFeed(10))
	if err != nil {
		t.Fatal(err)
	}
	e, err := events.Put(typedNote{Text: "e"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ch, err := range events.Changes(ctx, 0) {
		if err != nil || ch.Seq != 1 || ch.Op != storh.OpPut || ch.Item() != e {
			t.Fatalf("log Changes: %+v, %v; want seq 1, put %+v", ch, err, e)
		}
		break
	}
}

// TestTypedChangesErrors: a collection without a feed is ErrNotFound, a
// trimmed Seq ErrChangesTrimmed, a handle of a transaction ErrNestedTx,
// and each ends the iteration.
func TestTypedChangesErrors(t *testing.T) {
	db := openTemp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	only := func(seq func(func(storh.ChangeOf[typedNote], error) bool)) error {
		var errs []error
		for _, err := range seq {
			errs = append(errs, err)
		}
		if len(errs) != 1 || errs[0] == nil {
			t.Fatalf("yielded %v; want one error", errs)
		}
		return errs[0]
	}
	plain, err := storh.DocsOf[typedNote](db, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Put(typedNote{Text: "p"}); err != nil {
		t.Fatal(err)
	}
	checkErr(t, only(plain.Changes(ctx, 0)), storh.ErrNotFound, "no change feed")

	short, err := storh.DocsOf[typedNote](db, "short", storh.WithChangeFeed(2))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 80 {
		if _, err := short.Put(typedNote{Stars: i}); err != nil {
			t.Fatal(err)
		}
	}
	checkErr(t, only(short.Changes(ctx, 1)), storh.ErrChangesTrimmed)

	err = db.View(func(tx *storh.Tx) error {
		in, err := storh.DocsOf[typedNote](tx, "short")
		if err != nil {
			return err
		}
		checkErr(t, only(in.Changes(ctx, 0)), storh.ErrNestedTx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTypedChangesWait: a typed Changes waiting past the last change is
// woken by the next commit, and ends with ctx's error.
func TestTypedChangesWait(t *testing.T) {
	db := openTemp(t)
	notes, err := storh.DocsOf[typedNote](db, "notes", storh.WithChangeFeed(100))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan storh.ChangeOf[typedNote])
	ended := make(chan error, 1)
	go func() {
		for ch, err := range notes.Changes(ctx, 0) {
			if err != nil {
				ended <- err
				return
			}
			got <- ch
		}
	}()
	for i := range 3 {
		it, err := notes.Put(typedNote{Text: "w", Stars: i})
		if err != nil {
			t.Fatal(err)
		}
		ch := <-got
		if ch.Seq != uint64(i+1) || ch.Item() != it {
			t.Fatalf("change %d: %+v; want %+v", i+1, ch, it)
		}
	}
	cancel()
	checkErr(t, <-ended, context.Canceled)
}

// TestTypedWatch: a typed Watch catches up after an id and follows new
// records decoded into T; a record that does not fit is ErrTypeMismatch
// and the watch goes on.
func TestTypedWatch(t *testing.T) {
	db := openTemp(t)
	notes, err := storh.LogOf[typedNote](db, "notes")
	if err != nil {
		t.Fatal(err)
	}
	first, err := notes.Put(typedNote{Text: "first"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := notes.Put(typedNote{Text: "second", Stars: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type seen struct {
		it  storh.Item[typedNote]
		err error
	}
	got := make(chan seen)
	go func() {
		for it, err := range notes.Watch(ctx, first.ID) {
			got <- seen{it, err}
			if err != nil && !errors.Is(err, storh.ErrTypeMismatch) {
				return
			}
		}
	}()
	// The catch-up yields second; the watch has subscribed before it
	// read, so what is written after arrives too.
	if s := <-got; s.err != nil || s.it != second {
		t.Fatalf("catch-up: %+v, %v; want %+v", s.it, s.err, second)
	}
	bad, err := notes.Untyped().Put(storh.Map{"stars": []any{1}})
	if err != nil {
		t.Fatal(err)
	}
	if s := <-got; !errors.Is(s.err, storh.ErrTypeMismatch) || s.it.ID != bad.ID {
		t.Fatalf("mismatch: %+v, %v; want ErrTypeMismatch of %s", s.it, s.err, bad.ID)
	}
	third, err := notes.Put(typedNote{Text: "third", Stars: 3})
	if err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.err != nil || s.it != third {
		t.Fatalf("after the mismatch: %+v, %v; want %+v", s.it, s.err, third)
	}
	cancel()
	if s := <-got; !errors.Is(s.err, context.Canceled) {
		t.Fatalf("after cancel: %v", s.err)
	}
}

// TestFeedInfo: Feed tells a collection with a feed from one without,
// reading its keep and last Seq.
func TestFeedInfo(t *testing.T) {
	db := openTemp(t)
	plain, err := db.Docs("plain")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Put(storh.Map{"n": 1}); err != nil {
		t.Fatal(err)
	}
	fed, err := db.Log("fed", storh.WithChangeFeed(50))
	if err != nil {
		t.Fatal(err)
	}
	unborn, err := db.Docs("unborn", storh.WithoutCreate())
	if err == nil {
		fi, err := unborn.Feed()
		if err != nil || fi != (storh.FeedInfo{}) {
			t.Fatalf("Feed of a collection not created: %+v, %v", fi, err)
		}
	}
	check := func(c interface {
		Feed() (storh.FeedInfo, error)
	}, want storh.FeedInfo) {
		t.Helper()
		fi, err := c.Feed()
		if err != nil || fi != want {
			t.Fatalf("Feed = %+v, %v; want %+v", fi, err, want)
		}
	}
	check(plain, storh.FeedInfo{})
	check(fed, storh.FeedInfo{Keep: 50, LastSeq: 0})
	for range 3 {
		if _, err := fed.Put(storh.Map{"n": 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fed.DeleteBefore(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	check(fed, storh.FeedInfo{Keep: 50, LastSeq: 6})
	typedFed, err := storh.LogOf[typedNote](db, "fed")
	if err != nil {
		t.Fatal(err)
	}
	check(typedFed, storh.FeedInfo{Keep: 50, LastSeq: 6})
	n, err := fed.CountMatching(query.All())
	if err != nil || n != 0 {
		t.Fatalf("count after DeleteBefore = %d, %v", n, err)
	}
}

// TestTypedWatchReady: a typed watch from now calls ready once it has
// subscribed, and a record written after ready arrives decoded.
func TestTypedWatchReady(t *testing.T) {
	db := openTemp(t)
	notes, err := storh.DocsOf[typedNote](db, "notes")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ready := make(chan struct{})
	got := make(chan storh.Item[typedNote], 1)
	go func() {
		for it, err := range notes.WatchReady(ctx, uuidv7.UUID{}, func() { close(ready) }) {
			if err == nil {
				got <- it
			}
			return
		}
	}()
	<-ready
	it, err := notes.Put(typedNote{Text: "after ready", Stars: 5})
	if err != nil {
		t.Fatal(err)
	}
	if w := <-got; w != it {
		t.Fatalf("WatchReady yielded %+v; want %+v", w, it)
	}
}
