package storh_test

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TestExpirySweepNestedPathBounded: with an index on a dotted TTL path
// ("meta.exp"), a sweep's transaction reads about as many index keys as
// it deletes, a walk of the index in its order like a path of one field,
// instead of gathering every expired record's id in its first
// transaction. Once a record's values at the path go through a list
// (which has no order), the sweep seeks in id order instead, and still
// deletes exactly what has expired.
func TestExpirySweepNestedPathBounded(t *testing.T) {
	clk := newTestClock()
	db := openTemp(t, storh.WithClock(clk.Now), storh.WithoutBackground())
	d, err := db.Docs("sessions", storh.WithTTL("meta.exp"), storh.WithIndex(storh.Index("meta.exp")))
	if err != nil {
		t.Fatal(err)
	}
	const expired, live = 3000, 500
	past, future := clk.Now().Add(-time.Minute), clk.Now().Add(time.Hour)
	var items []any
	for i := range expired + live {
		exp := past
		if i >= expired {
			exp = future
		}
		items = append(items, storh.Map{"i": i, "meta": storh.Map{"exp": exp}})
	}
	recs, err := d.PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	const batch = 100
	step, err := storh.TTLFirstStep(d, batch)
	if err != nil {
		t.Fatal(err)
	}
	if step.Returned != batch || step.KeysRead > 2*batch || step.Sorted {
		t.Fatalf("the first step of the sweep read %d index keys and %d records to select %d (sorted %v); want about %d keys, in the index's order",
			step.KeysRead, step.RecordsRead, step.Returned, step.Sorted, batch)
	}
	p, err := storh.ExplainTTL(d)
	if err != nil {
		t.Fatal(err)
	}
	if p.Returned != expired || p.RecordsRead != expired || len(p.Indexes) == 0 {
		t.Fatalf("the sweep selects %d records reading %d through %v; want %d read and selected through the index", p.Returned, p.RecordsRead, p.Indexes, expired)
	}

	// A record whose meta is a list of maps expires at its earliest time:
	// the index can no longer be walked in order by the path.
	fanned, err := d.Put(storh.Map{"meta": []any{storh.Map{"exp": future}, storh.Map{"exp": past}}})
	if err != nil {
		t.Fatal(err)
	}
	if p, err = storh.ExplainTTL(d); err != nil || p.Returned != expired+1 {
		t.Fatalf("with a record through a list the sweep selects %d records (%v); want %d", p.Returned, err, expired+1)
	}
	n, err := d.ApplyTTL()
	if err != nil || n != expired+1 {
		t.Fatalf("ApplyTTL = %d, %v; want %d", n, err, expired+1)
	}
	plain, err := db.Docs("sessions")
	if err != nil {
		t.Fatal(err)
	}
	var keep []uuidv7.UUID
	for _, r := range recs[expired:] {
		keep = append(keep, r.ID)
	}
	if got := liveIDs(t, plain); !sameIDs(got, keep) || slices.Contains(got, fanned.ID) {
		t.Fatalf("after ApplyTTL %d records are stored, want the %d live ones", len(got), len(keep))
	}
}

// TestExpirySweepNestedPathListMidway: a record whose values at the dotted
// TTL path go through a list, written while a background sweep walks the
// index in order, does not fail the sweep: it goes on in id order and
// deletes every expired record, that one too, and none other.
func TestExpirySweepNestedPathListMidway(t *testing.T) {
	clk := newTestClock()
	db := openTemp(t, storh.WithClock(clk.Now), storh.WithSweepEvery(time.Millisecond))
	rounds := watchSweeps(db)
	d, err := db.Docs("sessions", storh.WithTTL("meta.exp"), storh.WithIndex(storh.Index("meta.exp")))
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	const expired, live = 4000, 300
	var items []any
	for i := range expired + live {
		exp := now.Add(time.Second)
		if i >= expired {
			exp = now.Add(time.Hour)
		}
		items = append(items, storh.Map{"i": i, "meta": storh.Map{"exp": exp}})
	}
	recs, err := d.PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	var keep []uuidv7.UUID
	for _, r := range recs[expired:] {
		keep = append(keep, r.ID)
	}
	// Its earliest time sorts after the others' (all at now+1s), ahead
	// of the walk, which meets it.
	putErr := make(chan error, 1)
	var once sync.Once
	storh.SetSweepPauseHook(db, func() {
		once.Do(func() { // once: mid-way through the first sweep
			_, err := d.Put(storh.Map{"meta": []any{storh.Map{"exp": now.Add(time.Hour)}, storh.Map{"exp": now.Add(1500 * time.Millisecond)}}})
			putErr <- err
		})
	})
	clk.Advance(2 * time.Second)
	for {
		r := nextRound(t, rounds)
		if r.err != nil {
			t.Fatalf("a sweep failed: %v", r.err)
		}
		if r.swept["sessions"] > 0 {
			if r.swept["sessions"] != expired+1 {
				t.Fatalf("the sweep deleted %d records, want %d", r.swept["sessions"], expired+1)
			}
			break
		}
	}
	if err := <-putErr; err != nil {
		t.Fatal(err)
	}
	plain, err := db.Docs("sessions")
	if err != nil {
		t.Fatal(err)
	}
	if got := liveIDs(t, plain); !sameIDs(got, keep) {
		t.Fatalf("after the sweep %d records are stored, want the %d live ones", len(got), len(keep))
	}
}

// TestExpiryTxHandleSwept: a collection whose only handles with a time to
// live (or a retention) were opened inside transactions, tx.Docs and
// tx.Log, is swept by the background sweeper like one opened on the DB:
// the expiry is the collection's rule, however the handle was opened.
func TestExpiryTxHandleSwept(t *testing.T) {
	clk := newTestClock()
	db := openTemp(t, storh.WithClock(clk.Now), storh.WithSweepEvery(time.Millisecond))
	rounds := watchSweeps(db)
	now := clk.Now()
	var keep []uuidv7.UUID
	err := db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("sessions", storh.WithTTL("exp"))
		if err != nil {
			return err
		}
		for i := range 300 {
			exp := now.Add(time.Second)
			if i%3 == 0 {
				exp = now.Add(time.Hour)
			}
			r, err := d.Put(storh.Map{"i": i, "exp": exp})
			if err != nil {
				return err
			}
			if i%3 == 0 {
				keep = append(keep, r.ID)
			}
		}
		l, err := tx.Log("events")
		if err != nil {
			return err
		}
		for m := range 10 {
			if _, err := l.PutWithID(idAt(t, now.Add(time.Duration(m-9)*time.Hour).UnixMilli()), storh.Map{"m": m}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The log's retention is asked for by a handle of a View alone.
	err = db.View(func(tx *storh.Tx) error {
		_, err := tx.Log("events", storh.WithRetention(90*time.Minute))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !storh.SweeperStarted(db) {
		t.Fatal("handles with a TTL and a retention opened inside transactions started no sweeper")
	}
	clk.Advance(2 * time.Second)
	fullRound(t, rounds)
	sessions, err := db.Docs("sessions")
	if err != nil {
		t.Fatal(err)
	}
	if got := liveIDs(t, sessions); !sameIDs(got, keep) {
		t.Fatalf("after a sweep %d sessions are stored, want the %d live ones", len(got), len(keep))
	}
	events, err := db.Log("events")
	if err != nil {
		t.Fatal(err)
	}
	if n := mustCount(t, events); n != 2 {
		t.Fatalf("after a sweep the log holds %d records, want the 2 of the last 90 minutes", n)
	}
}

// sweepForgets hears the collections db's sweeper stops sweeping.
func sweepForgets(db *storh.DB) <-chan string {
	ch := make(chan string, 64)
	storh.SetSweepForgetHook(db, func(name string) {
		select {
		case ch <- name:
		default:
		}
	})
	return ch
}

// TestExpirySweepFollowsCollection: a handle's time to live is for the
// collection it was opened on. Dropped and made again without one, by
// the same DB, by another store on the same PostgreSQL schema, or by a
// second process, the collection of that name is not the handle's: the
// sweeper stops sweeping it and deletes nothing there, though its records
// carry expired times at the path. A handle opened with a TTL on the new
// collection has it swept again.
func TestExpirySweepFollowsCollection(t *testing.T) {
	cases := []struct {
		name string
		url  func(t *testing.T) string
		// recreate drops "sessions" and makes it again without a TTL,
		// with n records whose "exp" has passed.
		recreate func(t *testing.T, url string, db *storh.DB, n int)
	}{
		{"same DB", newPathT, func(t *testing.T, _ string, db *storh.DB, n int) {
			recreateSessions(t, db, n)
		}},
		{"another store", pgURL, func(t *testing.T, url string, _ *storh.DB, n int) {
			recreateSessions(t, openAt(t, url, storh.WithoutBackground()), n)
		}},
		{"another process", pgURL, func(t *testing.T, url string, _ *storh.DB, n int) {
			child := startExpiryChild(t, url)
			if _, err := child.call("recreate " + strconv.Itoa(n)); err != nil {
				t.Fatal(err)
			}
		}},
		{"dropped only", newPathT, func(t *testing.T, _ string, db *storh.DB, _ int) {
			if err := db.Drop("sessions"); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url(t)
			clk := newTestClock()
			db := openAt(t, url, storh.WithClock(clk.Now), storh.WithSweepEvery(time.Millisecond))
			rounds, forgets := watchSweeps(db), sweepForgets(db)
			d, err := db.Docs("sessions", storh.WithTTL("exp"), storh.WithIndex(storh.Index("exp")))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.PutMany([]any{storh.Map{"exp": clk.Now().Add(-time.Second)}, storh.Map{"exp": clk.Now().Add(time.Hour)}}); err != nil {
				t.Fatal(err)
			}
			fullRound(t, rounds)
			if c := mustCount(t, d); c != 1 {
				t.Fatalf("after a sweep %d records are stored, want the 1 live one", c)
			}

			const n = 50
			tc.recreate(t, url, db, n)
			// Rounds that ended before the collection was made again (the
			// sweeper runs every millisecond: a loaded machine buffers
			// dozens) say nothing of it. One in flight now may still end
			// on the old collection; every round after begins by finding
			// the new one.
			for drained := false; !drained; {
				select {
				case <-rounds:
				default:
					drained = true
				}
			}
			stop := make(chan struct{})
			select {
			case name := <-forgets:
				if name != "sessions" {
					t.Fatalf("the sweeper stopped sweeping %q, want sessions", name)
				}
			case r := <-waitRounds(rounds, 3, stop):
				t.Fatalf("three rounds after the collection was made again the sweeper still sweeps it (last round swept %v)", r.swept)
			}
			close(stop)
			if targets := storh.SweepTargets(db); len(targets) != 0 {
				t.Fatalf("the sweeper still sweeps %v", targets)
			}
			fullRound(t, rounds)
			plain, err := db.Docs("sessions")
			if err != nil && !errors.Is(err, storh.ErrNotFound) {
				t.Fatal(err)
			}
			if tc.name == "dropped only" {
				return
			}
			if c := mustCount(t, plain); c != n {
				t.Fatalf("the collection made again holds %d records, want its %d: the sweep of the old one deleted some", c, n)
			}
			// Asked again on the new collection, the sweep comes back.
			if _, err := db.Docs("sessions", storh.WithTTL("exp")); err != nil {
				t.Fatal(err)
			}
			fullRound(t, rounds)
			if c := mustCount(t, plain); c != 0 {
				t.Fatalf("a sweep asked for on the new collection left %d of its %d expired records", c, n)
			}
		})
	}
}

// waitRounds delivers the round that ends k rounds after the call, unless
// stop closes first (or no round comes in a minute).
func waitRounds(rounds <-chan sweepRound, k int, stop <-chan struct{}) <-chan sweepRound {
	out := make(chan sweepRound, 1)
	go func() {
		var r sweepRound
		for range k {
			select {
			case r = <-rounds:
			case <-stop:
				return
			case <-time.After(time.Minute):
				return
			}
		}
		out <- r
	}()
	return out
}

func newPathT(t *testing.T) string { return newPath(t) }

// pgURL is a fresh PostgreSQL schema for what only PostgreSQL has (other
// stores, other processes), in the file pass only.
func pgURL(t *testing.T) string {
	skipOnPostgresPass(t)
	return pgtest.URL(t)
}

// recreateSessions drops "sessions" through db and makes it again without
// a TTL, with n records whose "exp" passed long ago.
func recreateSessions(t testing.TB, db *storh.DB, n int) {
	t.Helper()
	if err := recreateSessionsErr(db, n); err != nil {
		t.Fatal(err)
	}
}

func recreateSessionsErr(db *storh.DB, n int) error {
	if err := db.Drop("sessions"); err != nil {
		return err
	}
	d, err := db.Docs("sessions")
	if err != nil {
		return err
	}
	var items []any
	for i := range n {
		items = append(items, storh.Map{"i": i, "exp": time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)})
	}
	_, err = d.PutMany(items)
	return err
}

// TestExpiryRegisterWhileSweeping: handles with a time to live opened in
// many Updates and on the DB at once, while the sweeper sweeps, leave it
// sweeping the one collection, and every record written expired is
// deleted, and no other. Run with -race: registrations meet the sweeper's
// goroutine (which of them meet depends on timing).
func TestExpiryRegisterWhileSweeping(t *testing.T) {
	clk := newTestClock()
	db := openTemp(t, storh.WithClock(clk.Now), storh.WithSweepEvery(time.Millisecond))
	rounds := watchSweeps(db)
	now := clk.Now()
	const writers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	var mu sync.Mutex
	var keep []uuidv7.UUID
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				err := db.Update(func(tx *storh.Tx) error {
					d, err := tx.Docs("sessions", storh.WithTTL("exp"))
					if err != nil {
						return err
					}
					_, err = d.PutMany([]any{storh.Map{"exp": now.Add(-time.Second)}, storh.Map{"w": w, "i": i}})
					return err
				})
				if err == nil && i%5 == 0 {
					var d *storh.Docs
					if d, err = db.Docs("sessions", storh.WithTTL("exp")); err == nil {
						var r storh.Record
						if r, err = d.Put(storh.Map{"exp": now.Add(time.Hour)}); err == nil {
							mu.Lock()
							keep = append(keep, r.ID)
							mu.Unlock()
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fullRound(t, rounds)
	sessions, err := db.Docs("sessions")
	if err != nil {
		t.Fatal(err)
	}
	got, err := sessions.Find(query.All().Where(query.Field("exp").Exists()))
	if err != nil {
		t.Fatal(err)
	}
	if !sameIDs(sortIDs(ids(got)), sortIDs(keep)) {
		t.Fatalf("after the sweep %d records with a time are stored, want the %d live ones", len(got), len(keep))
	}
	if n := mustCount(t, sessions); n != len(keep)+writers*each {
		t.Fatalf("after the sweep %d records are stored, want %d", n, len(keep)+writers*each)
	}
	if targets := storh.SweepTargets(db); !slices.Equal(targets, []string{"sessions"}) {
		t.Fatalf("the sweeper sweeps %v, want sessions", targets)
	}
}
