//go:build !storh_nopostgres

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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	own, theirs := newCollected(), newCollected()
	ownStarted, theirsStarted := make(chan struct{}), make(chan struct{})
	go watchInto(ctx, docs, uuidv7.UUID{}, own, ownStarted)
	go watchInto(ctx, otherDocs, uuidv7.UUID{}, theirs, theirsStarted)
	// The watches follow the commits once a first record reaches them.
	mark, err := docs.Put(storh.Map{"mark": true})
	if err != nil {
		t.Fatal(err)
	}
	<-ownStarted
	<-theirsStarted

	proxy.Arm(pgtest.AfterCommit, false)
	rec, err := docs.Put(storh.Map{"n": 1})
	if proxy.Cuts() != 1 {
		t.Fatalf("the proxy cut %d connections, want 1 (Put: %v)", proxy.Cuts(), err)
	}
	if err != nil {
		t.Fatalf("Put whose commit the server made = %v, want success", err)
	}
	if n := mustCount(t, otherDocs); n != 2 {
		t.Errorf("Count = %d, want 2: the mark and the record, once", n)
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
// group commit that carried it gets ErrCommitUnknown (the records are
// stored, since the server committed them), and no other Put does: one
// that fails otherwise stored nothing.
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
	// The Puts queue behind an Update that holds the writer (and, doing
	// nothing, sends no COMMIT), so that most go in one group commit.
	release, held := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := db.Update(func(*storh.Tx) error { close(held); <-release; return nil }); err != nil {
			t.Errorf("the holding Update: %v", err)
		}
	})
	<-held
	proxy.Arm(pgtest.AfterCommit, true)
	const n = 8
	ids, errs := make([]uuidv7.UUID, n), make([]error, n)
	var submitted sync.WaitGroup
	for i := range n {
		ids[i] = uuidv7.New()
		submitted.Add(1)
		wg.Go(func() {
			submitted.Done()
			_, errs[i] = docs.PutWithID(ids[i], storh.Map{"n": i})
		})
	}
	submitted.Wait()
	close(release)
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
