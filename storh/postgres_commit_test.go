package storh_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// A Put whose connection is lost after the server committed it succeeds,
// as the server says when asked: the record is stored once, and the
// watchers of the writing DB get it as they get every commit of theirs
// (so do another DB's, through the server's notification).
func TestPostgresCommitLostAfterCommit(t *testing.T) {
	skipUnderInvariants(t)
	url := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, url)
	db, other := openPostgres(t, proxy.URL), openPostgres(t, url)
	docs, err := db.Docs("notes")
	if err != nil {
		t.Fatal(err)
	}
	otherDocs, err := other.Docs("notes")
	if err != nil {
		t.Fatal(err)
	}
	// The watches start after a first record, and follow the commits
	// once they have caught up with a second.
	first, err := docs.Put(storh.Map{"mark": 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	own, theirs := newCollected(), newCollected()
	go watchInto(ctx, docs, first.ID, own, nil)
	go watchInto(ctx, otherDocs, first.ID, theirs, nil)
	mark, err := docs.Put(storh.Map{"mark": 2})
	if err != nil {
		t.Fatal(err)
	}
	own.waitFor(t, map[uuidv7.UUID]bool{mark.ID: true})
	theirs.waitFor(t, map[uuidv7.UUID]bool{mark.ID: true})

	proxy.Arm(pgtest.AfterCommit, false)
	rec, err := docs.Put(storh.Map{"n": 1})
	if proxy.Cuts() != 1 {
		t.Fatalf("the proxy cut %d connections, want 1 (Put: %v)", proxy.Cuts(), err)
	}
	if err != nil {
		t.Fatalf("Put whose commit the server made = %v, want success", err)
	}
	if n := mustCount(t, otherDocs); n != 3 {
		t.Errorf("Count = %d, want 3: the marks and the record, once", n)
	}
	if got, err := otherDocs.Get(rec.ID); err != nil || got.Data()["n"] != int64(1) {
		t.Errorf("Get from another DB = %v, %v", got.Data(), err)
	}
	want := map[uuidv7.UUID]bool{mark.ID: true, rec.ID: true}
	own.waitFor(t, want)
	theirs.waitFor(t, want)
}

// A Put whose COMMIT never reached the server fails with an ordinary error
// (not ErrCommitUnknown), stores nothing, and can be run again.
func TestPostgresCommitLostBeforeCommit(t *testing.T) {
	skipUnderInvariants(t)
	url := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, url)
	db := openPostgres(t, proxy.URL)
	docs, err := db.Docs("notes")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := docs.Put(storh.Map{"mark": true}); err != nil {
		t.Fatal(err)
	}
	for _, cut := range []pgtest.Cut{pgtest.BeforeCommit, pgtest.BeforeCommitServerWaits} {
		id := uuidv7.New()
		proxy.Arm(cut, false)
		_, err := docs.PutWithID(id, storh.Map{"n": 1})
		if err == nil || errors.Is(err, storh.ErrCommitUnknown) {
			t.Fatalf("Put whose COMMIT was lost = %v, want the connection's error", err)
		}
		if _, err := docs.Get(id); !errors.Is(err, storh.ErrNotFound) {
			t.Fatalf("Get after the lost COMMIT = %v, want ErrNotFound", err)
		}
		if _, err := docs.PutWithID(id, storh.Map{"n": 1}); err != nil {
			t.Fatalf("Put again: %v", err)
		}
	}
	if n := mustCount(t, docs); n != 3 {
		t.Errorf("Count = %d, want 3", n)
	}
}

// When the server cannot be asked how a commit ended, every Put of the
// group commit that carried it gets ErrCommitUnknown, naming its record
// (which is stored, since the server committed it), and no other Put
// does: one that fails otherwise stored nothing. (How the concurrent Puts
// fall into group commits varies; TestCommitUnknownIsNotRunAgain in the
// engine checks a batch of many.)
func TestPostgresCommitUnknown(t *testing.T) {
	skipUnderInvariants(t)
	url := pgtest.URL(t)
	proxy := pgtest.NewProxy(t, url)
	db, other := openPostgres(t, proxy.URL), openPostgres(t, url)
	docs, err := db.Docs("notes")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := docs.Put(storh.Map{"mark": true}); err != nil {
		t.Fatal(err)
	}
	proxy.Arm(pgtest.AfterCommit, true)
	const n = 8
	ids, errs := make([]uuidv7.UUID, n), make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		ids[i] = uuidv7.New()
		wg.Go(func() {
			<-start
			_, errs[i] = docs.PutWithID(ids[i], storh.Map{"n": i})
		})
	}
	close(start)
	wg.Wait()
	if proxy.Cuts() != 1 {
		t.Fatalf("the proxy cut %d connections, want 1", proxy.Cuts())
	}
	otherDocs, err := other.Docs("notes")
	if err != nil {
		t.Fatal(err)
	}
	unknown := 0
	for i, err := range errs {
		_, gerr := otherDocs.Get(ids[i])
		stored := gerr == nil
		if gerr != nil && !errors.Is(gerr, storh.ErrNotFound) {
			t.Fatalf("Get %d: %v", i, gerr)
		}
		switch {
		case errors.Is(err, storh.ErrCommitUnknown):
			unknown++
			var e *storh.Error
			if !errors.As(err, &e) || e.ID != ids[i].String() {
				t.Errorf("Put %d: the error does not name the record's id: %v", i, err)
			}
			if !stored {
				t.Errorf("Put %d = %v, and the record is not stored: its commit was made", i, err)
			}
		case err == nil:
			t.Errorf("Put %d succeeded through a proxy that refuses every connection", i)
		case stored:
			t.Errorf("Put %d = %v, an ordinary error, and the record is stored", i, err)
		}
	}
	if unknown == 0 {
		t.Errorf("no Put returned ErrCommitUnknown: %v", errs)
	}
	t.Logf("%d of %d Puts were in the group commit whose outcome is unknown", unknown, n)
}
