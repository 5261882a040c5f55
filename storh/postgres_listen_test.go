package storh_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
)

// A DB on PostgreSQL listens for other processes' commits on one
// connection, whatever follows them: with a queue's ClaimWait and a
// Changes reader running at once, one backend holds the watch locks of
// both topics (a listener holds them for the topics it watches), and it
// wakes both. Each kind of follower once had a listener of its own.
func TestPostgresOneListener(t *testing.T) {
	skipOnPostgresPass(t)
	url := pgURL(t)
	db := openPostgres(t, url)
	other := openPostgres(t, url) // another store: its commits come by notice
	q, err := db.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := db.Docs("feed", storh.WithChangeFeed(10))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The queue is watched from a ClaimWait's first claim on, for good:
	// a ClaimWait that returned a job had watched it.
	oq, err := other.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oq.Enqueue(storh.Map{"n": 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.ClaimWait(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The reader watches its collection while it runs: one that has
	// delivered a change watches.
	events := make(chan storh.ChangeEvent)
	readerDone := make(chan error, 1)
	go func() {
		for ev, err := range docs.Changes(ctx, 0) {
			if err != nil {
				readerDone <- err
				return
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	od, err := other.Docs("feed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := od.Put(storh.Map{"n": 0}); err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.Seq != 1 {
		t.Fatalf("the reader's first change is seq %d, want 1", ev.Seq)
	}
	claimed := make(chan error, 1)
	go func() {
		_, err := q.ClaimWait(ctx, time.Minute)
		claimed <- err
	}()

	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var listeners, backends int
	// Session-level advisory locks held shared are the listeners' watch
	// locks: a writer's advisory locks are transaction-level, and none is
	// open now.
	if err := admin.QueryRow(ctx, `SELECT count(DISTINCT l.pid) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE a.datname = current_database() AND l.locktype = 'advisory' AND l.mode = 'ShareLock' AND l.granted`).Scan(&listeners); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&backends); err != nil {
		t.Fatal(err)
	}
	t.Logf("two stores: %d backends, %d of them listeners", backends, listeners)
	// The other store follows nothing: the listener is db's.
	if listeners != 1 {
		t.Fatalf("%d backends hold watch locks for one DB's ClaimWait and Changes reader; want 1", listeners)
	}

	// The one listener wakes both followers.
	if _, err := oq.Enqueue(storh.Map{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := od.Put(storh.Map{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if err := <-claimed; err != nil {
		t.Fatalf("the waiting ClaimWait: %v", err)
	}
	select {
	case ev := <-events:
		if ev.Seq != 2 {
			t.Fatalf("the reader's second change is seq %d, want 2", ev.Seq)
		}
	case err := <-readerDone:
		t.Fatalf("the reader ended: %v", err)
	}
	cancel()
	if err := <-readerDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the reader ended with %v, want context.Canceled", err)
	}
}

// BenchmarkPostgresNoticeWake: how long another store's commit takes to
// reach a follower through the DB's listener, on PostgreSQL. op=claim:
// one op is an Enqueue in one store and its ClaimWait (and Complete) in
// the other, which also runs an idle Changes reader, so that the queue
// and the feed share its listener. op=drop: one op is a Drop in one store
// and the end of a Changes reader of that collection in the other (the
// collection's re-creation and the reader's start are not timed).
func BenchmarkPostgresNoticeWake(b *testing.B) {
	url := pgtest.URL(b)
	open := func() *storh.DB {
		db, err := storh.Open(url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		return db
	}
	follower, writer := open(), open()

	b.Run("op=claim", func(b *testing.B) {
		// The framework runs this more than once: each run's waiter and
		// reader end with it, or the next run's jobs could go to them.
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		idle, err := follower.Docs("idle", storh.WithChangeFeed(10))
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			for range idle.Changes(ctx, 0) {
			}
		})
		q, err := follower.Queue("jobs")
		if err != nil {
			b.Fatal(err)
		}
		wq, err := writer.Queue("jobs")
		if err != nil {
			b.Fatal(err)
		}
		claimed := make(chan error)
		wg.Go(func() {
			for {
				j, err := q.ClaimWait(ctx, time.Minute)
				if err == nil {
					err = q.Complete(j.ID)
				}
				select {
				case claimed <- err:
				case <-ctx.Done():
					return
				}
			}
		})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := wq.Enqueue(storh.Map{"n": 1}); err != nil {
				b.Fatal(err)
			}
			if err := <-claimed; err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("op=drop", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			d, err := follower.Docs("dropped", storh.WithChangeFeed(10))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := d.Put(storh.Map{"n": 1}); err != nil {
				b.Fatal(err)
			}
			ended := make(chan error, 1)
			delivered := make(chan struct{})
			go func() {
				for _, err := range d.Changes(ctx, 0) {
					if err != nil {
						ended <- err
						return
					}
					close(delivered) // the reader follows the collection
				}
			}()
			<-delivered
			b.StartTimer()
			if err := writer.Drop("dropped"); err != nil {
				b.Fatal(err)
			}
			if err := <-ended; !errors.Is(err, storh.ErrNotFound) {
				b.Fatalf("the reader ended with %v, want ErrNotFound", err)
			}
		}
	})
}
