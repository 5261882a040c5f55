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
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Two DBs on one PostgreSQL database are two writers the way two
// processes are: their own connections and their own in-memory state.

// watchPair is two DBs on one fresh PostgreSQL database, each with a
// handle on collection name: one to watch, one to write.
type watchPair struct {
	watcherDB, writerDB *storh.DB
	watched, written    *storh.Docs
	url                 string
}

func newWatchPair(t *testing.T, name string) watchPair {
	t.Helper()
	skipUnderInvariants(t)
	p := watchPair{url: pgtest.URL(t)}
	p.watcherDB, p.writerDB = openPostgres(t, p.url), openPostgres(t, p.url)
	var err error
	if p.watched, err = p.watcherDB.Docs(name); err == nil {
		p.written, err = p.writerDB.Docs(name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newCollected() *collected {
	return &collected{seen: map[uuidv7.UUID]int{}, data: map[uuidv7.UUID]any{}}
}

// collect gathers what a Watch yields, counting each id, until stop.
type collected struct {
	mu   sync.Mutex
	seen map[uuidv7.UUID]int
	data map[uuidv7.UUID]any
	err  error
}

func watchInto(ctx context.Context, c storh.Collection, from uuidv7.UUID, into *collected, started chan<- uuidv7.UUID) {
	first := true
	for r, err := range c.Watch(ctx, from) {
		if first && started != nil {
			started <- r.ID
			first = false
		}
		into.mu.Lock()
		if err != nil {
			into.err = err
			into.mu.Unlock()
			return
		}
		into.seen[r.ID]++
		m, derr := r.DataErr()
		if derr != nil {
			into.err = derr
		}
		into.data[r.ID] = m
		into.mu.Unlock()
	}
}

// markUntilWatched writes marks with c until a watch from now, which
// sends the id of the first record it yields on started, yields one: it
// has subscribed then. A mark written before that may or may not be
// delivered (its transaction may have written before the watch began);
// the marks it returns, from the first it yielded on, are delivered.
func markUntilWatched(t *testing.T, c storh.Collection, started <-chan uuidv7.UUID) []uuidv7.UUID {
	t.Helper()
	var marks []uuidv7.UUID
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		r, err := c.Put(storh.Map{"mark": len(marks)})
		if err != nil {
			t.Fatal(err)
		}
		marks = append(marks, r.ID)
		select {
		case first := <-started:
			for i, id := range marks {
				if id == first {
					return marks[i:]
				}
			}
			t.Fatalf("the watch began with %s, not a mark", first)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatal("the watch yielded none of the marks in 30 s")
	return nil
}

// waitFor waits until every id in want has been seen, and reports ids
// seen twice or not wanted.
func (c *collected) waitFor(t *testing.T, want map[uuidv7.UUID]bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c.mu.Lock()
		missing := 0
		for id := range want {
			if c.seen[id] == 0 {
				missing++
			}
		}
		err := c.err
		c.mu.Unlock()
		if err != nil {
			t.Fatalf("watch ended: %v", err)
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records never reached the watcher", missing, len(want))
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // time for a duplicate to show
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, n := range c.seen {
		if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
		if !want[id] {
			t.Errorf("%s delivered, not written after the start", id)
		}
	}
}

// A watcher in one DB sees the records another DB commits (single puts
// from many goroutines, a PutMany too long for one notification, an
// Update across two collections), and its own DB's, each exactly once,
// with their data.
func TestPostgresWatchAcrossStores(t *testing.T) {
	p := newWatchPair(t, "feed")
	wd, d, writerDB := p.watched, p.written, p.writerDB
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := newCollected()
	started := make(chan uuidv7.UUID, 1)
	go watchInto(ctx, wd, uuidv7.UUID{}, got, started)
	// The watch starts from now once it is subscribed: a record written
	// by the watcher's DB marks that point.
	want := map[uuidv7.UUID]bool{}
	for _, id := range markUntilWatched(t, wd, started) {
		want[id] = true
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				r, err := d.Put(storh.Map{"g": g, "i": i})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want[r.ID] = true
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		items := make([]any, 700)
		for i := range items {
			items[i] = storh.Map{"bulk": i}
		}
		rs, err := d.PutMany(items)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		for _, r := range rs {
			want[r.ID] = true
		}
		mu.Unlock()
	})
	wg.Wait()
	var both uuidv7.UUID
	if err := writerDB.Update(func(tx *storh.Tx) error {
		other, err := tx.Docs("other")
		if err != nil {
			return err
		}
		if _, err := other.Put(storh.Map{"elsewhere": 1}); err != nil {
			return err
		}
		feed, err := tx.Docs("feed")
		if err != nil {
			return err
		}
		r, err := feed.Put(storh.Map{"together": 1})
		both = r.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	want[both] = true
	own, err := wd.Put(storh.Map{"own": 1})
	if err != nil {
		t.Fatal(err)
	}
	want[own.ID] = true

	got.waitFor(t, want)
	if m, ok := got.data[both].(storh.Map); !ok || m["together"] == nil {
		t.Errorf("the record of the two-collection Update came as %#v", got.data[both])
	}
}

// A watcher that catches up from a cursor while another DB's writers
// commit records with interleaving ids gets every record after the cursor
// exactly once: those in its catch-up snapshots from the catch-up, the
// rest from the feed.
func TestPostgresWatchFromCursorAcrossStores(t *testing.T) {
	p := newWatchPair(t, "d")
	d := p.written
	for i := range 300 {
		if _, err := d.Put(storh.Map{"before": i}); err != nil {
			t.Fatal(err)
		}
	}
	cursor, err := d.First(query.All())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := d.Put(storh.Map{"during": 1}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wd := p.watched
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := newCollected()
	go watchInto(ctx, wd, cursor.ID, got, nil)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	after, err := d.Find(query.All().After(cursor.ID))
	if err != nil {
		t.Fatal(err)
	}
	want := map[uuidv7.UUID]bool{}
	for _, r := range after {
		want[r.ID] = true
	}
	got.waitFor(t, want)
	t.Logf("%d records after the cursor, each delivered once", len(want))
}

// A watch whose listener loses its connection ends with ErrWatchLost, and
// a new watch on the same DB starts a new listener that delivers each
// record of another DB once.
func TestPostgresWatchLost(t *testing.T) {
	p := newWatchPair(t, "feed")
	wd, d, url := p.watched, p.written, p.url
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	started := make(chan uuidv7.UUID, 1)
	go func() {
		first := true
		for r, err := range wd.Watch(ctx, uuidv7.UUID{}) {
			if first {
				started <- r.ID
				first = false
			}
			if err != nil {
				ended <- err
				return
			}
		}
	}()
	// The first record tells the watch has subscribed.
	markUntilWatched(t, wd, started)

	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var killed int
	if err := conn.QueryRow(context.Background(),
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND "+
			"(query LIKE 'LISTEN %' OR query LIKE 'SELECT pg_advisory_lock_shared(%' OR query LIKE 'SELECT pg_advisory_unlock_shared(%')").Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listeners, %v; want 1", killed, err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, storh.ErrWatchLost) {
			t.Fatalf("the watch ended with %v, want ErrWatchLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the watch went on after its listener died")
	}

	got := newCollected()
	again := make(chan uuidv7.UUID, 1)
	go watchInto(ctx, wd, uuidv7.UUID{}, got, again)
	want := map[uuidv7.UUID]bool{}
	for _, id := range markUntilWatched(t, wd, again) {
		want[id] = true
	}
	for i := range 20 {
		r, err := d.Put(storh.Map{"after": i})
		if err != nil {
			t.Fatal(err)
		}
		want[r.ID] = true
	}
	got.waitFor(t, want)
}
