package storh_test

import (
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TestExpirySweepCollectedKeepsRePut: a sweep whose TTL path goes through
// a list in some record has no order to walk, and gathers its candidates
// in its first transaction; a record put again with a later time while
// the sweep pauses between two transactions is kept, though the sweep
// gathered it as expired.
func TestExpirySweepCollectedKeepsRePut(t *testing.T) {
	clk := newTestClock()
	db := openTemp(t, storh.WithClock(clk.Now), storh.WithSweepEvery(time.Millisecond))
	rounds := watchSweeps(db)
	d, err := db.Docs("sessions", storh.WithTTL("meta.exp"), storh.WithIndex(storh.Index("meta.exp")))
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	// A live record whose path goes through a list: the sweep seeks the
	// index's ranges and sorts what it finds by id.
	if _, err := d.Put(storh.Map{"meta": []any{storh.Map{"exp": now.Add(time.Hour)}}}); err != nil {
		t.Fatal(err)
	}
	const expired = 4000 // more than a sweep's first transaction deletes
	var items []any
	for i := range expired {
		items = append(items, storh.Map{"i": i, "meta": storh.Map{"exp": now.Add(time.Second)}})
	}
	recs, err := d.PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	last := recs[expired-1].ID // deleted last, in id order
	putErr := make(chan error, 1)
	var once sync.Once
	storh.SetSweepPauseHook(db, func() {
		once.Do(func() {
			_, err := d.PutWithID(last, storh.Map{"i": -1, "meta": storh.Map{"exp": now.Add(time.Hour)}})
			putErr <- err
		})
	})
	clk.Advance(2 * time.Second)
	for {
		r := nextRound(t, rounds)
		if n := r.swept["sessions"]; n > 0 {
			if n != expired-1 {
				t.Errorf("the sweep deleted %d records, want %d", n, expired-1)
			}
			break
		}
	}
	select {
	case err := <-putErr:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("the sweep never paused: it ran in one transaction")
	}
	if _, err := d.Get(last); err != nil {
		t.Fatalf("the record put again with a later time: %v", err)
	}
	plain, err := db.Docs("sessions")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := plain.Count(); err != nil || n != 2 {
		t.Fatalf("Count = %d, %v; want 2", n, err)
	}
	verifyClean(t, db)
}

// TestTTLModelStores drives the TTL model (see ttlModel) through two
// stores on one PostgreSQL schema, each of them writing and deleting the
// expired records (in transactions of a few records, so that deletions
// span several), with an index on the TTL path or not: every deletion
// removes exactly the records that have expired by then, a record put
// again with a later time lives by it, index lookups find exactly the
// live records, and Verify finds every index entry and counter exact. It
// also runs on a file, with one store. The file pass runs both, and the
// PostgreSQL pass skips it: it would run the PostgreSQL case twice.
func TestTTLModelStores(t *testing.T) {
	skipOnPostgresPass(t)
	defer func(b int) { tune.MatchingBatch = b }(tune.MatchingBatch)
	tune.MatchingBatch = 7
	t.Run("file", func(t *testing.T) { testTTLModelStores(t, newPath, false) })
	t.Run("postgres", func(t *testing.T) {
		testTTLModelStores(t, func(t testing.TB) string { return pgURL(t.(*testing.T)) }, true)
	})
}

func testTTLModelStores(t *testing.T, newPath func(testing.TB) string, shared bool) {
	rapid.Check(t, func(rt *rapid.T) {
		m := &ttlModel{path: newPath(t), clk: newTestClock(), index: rapid.Bool().Draw(rt, "index"),
			nested: rapid.Bool().Draw(rt, "nested"), stored: map[uuidv7.UUID]ttlRef{}}
		stamped := map[uuidv7.UUID]bool{} // exp holds timestamps, which Lte on a time finds
		n := 1
		if shared {
			n = 2
		}
		dbs, docs := make([]*storh.DB, n), make([]*storh.Docs, n)
		for i := range n {
			m.open(rt)
			dbs[i], docs[i] = m.db, m.docs
		}
		defer func() {
			for _, db := range dbs {
				db.Close()
			}
		}()
		pick := func(t *rapid.T) int {
			i := rapid.IntRange(0, n-1).Draw(t, "store")
			m.db, m.docs = dbs[i], docs[i]
			return i
		}
		putDrawn := func(t *rapid.T, id uuidv7.UUID) {
			pick(t)
			exp, ref := m.drawExp(t)
			m.put(t, id, exp, ref)
			if id.IsZero() {
				id = m.ever[len(m.ever)-1]
			}
			_, isTime := exp.(time.Time)
			stamped[id] = isTime || ref.nested != nil
		}
		rt.Repeat(map[string]func(*rapid.T){
			"put": func(t *rapid.T) { putDrawn(t, uuidv7.UUID{}) },
			"put again": func(t *rapid.T) {
				if len(m.ever) == 0 {
					t.Skip("nothing put yet")
				}
				putDrawn(t, rapid.SampledFrom(m.ever).Draw(t, "id"))
			},
			"put many": func(t *rapid.T) {
				for range rapid.IntRange(2, 30).Draw(t, "records") {
					putDrawn(t, uuidv7.UUID{})
				}
			},
			"advance": func(t *rapid.T) {
				m.clk.Advance(time.Duration(rapid.Int64Range(0, 2000).Draw(t, "advance ms")) * time.Millisecond)
			},
			"apply": func(t *rapid.T) {
				pick(t)
				want := 0
				for id, r := range m.stored {
					if m.expired(r) {
						delete(m.stored, id)
						want++
					}
				}
				got, err := m.docs.ApplyTTL()
				if err != nil || got != want {
					t.Fatalf("ApplyTTL = %d, %v; want %d", got, err, want)
				}
			},
			"lookup": func(t *rapid.T) {
				// Lte on the TTL path: an index on it decides the
				// candidates; the expired ones are skipped.
				pick(t)
				at := m.clk.Now().Add(time.Duration(rapid.Int64Range(-3000, 3000).Draw(t, "bound ms")) * time.Millisecond)
				recs, err := m.docs.Find(query.All().Where(query.Field(m.ttlPath()).Lte(at)))
				if err != nil {
					t.Fatal(err)
				}
				var want []uuidv7.UUID
				for id, r := range m.stored {
					if stamped[id] && !m.expired(r) && !r.at.After(at) {
						want = append(want, id)
					}
				}
				if got := ids(recs); !sameIDs(got, sortIDs(want)) {
					t.Fatalf("Find(%s <= %s): %v, want %v", m.ttlPath(), at, got, want)
				}
			},
			"count": func(t *rapid.T) {
				pick(t)
				if got, err := m.docs.Count(); err != nil || got != len(m.stored) {
					t.Fatalf("Count = %d, %v; want %d stored", got, err, len(m.stored))
				}
				if got, want := liveIDsRapid(t, m.docs), m.live(); !sameIDs(got, want) {
					t.Fatalf("Find: %v, want %v", got, want)
				}
			},
			"verify": func(t *rapid.T) {
				var problems []string
				if _, err := dbs[pick(t)].Verify(func(p storh.Problem) { problems = append(problems, p.String()) }); err != nil || len(problems) > 0 {
					t.Fatalf("Verify: %v %q", err, problems)
				}
			},
		})
	})
}

func liveIDsRapid(t *rapid.T, d *storh.Docs) []uuidv7.UUID {
	recs, err := d.Find(query.All())
	if err != nil {
		t.Fatal(err)
	}
	return ids(recs)
}

// TestExpirySweepConcurrentRePut: while the background sweeper of one
// store deletes thousands of expired records, another writer (a second
// store on the same PostgreSQL schema, or a goroutine on the same file)
// puts some of them again with a later time. Each such record is there
// afterwards with its new value, whether its new write came before or
// after the sweep reached it; every other expired record is gone; the
// index and counters stay exact. The file pass runs both, and the
// PostgreSQL pass skips it: it would add only one store on PostgreSQL.
func TestExpirySweepConcurrentRePut(t *testing.T) {
	skipOnPostgresPass(t)
	t.Run("file", func(t *testing.T) { testSweepConcurrentRePut(t, newPath(t), false) })
	t.Run("postgres", func(t *testing.T) { testSweepConcurrentRePut(t, pgURL(t), true) })
}

func testSweepConcurrentRePut(t *testing.T, path string, twoStores bool) {
	clk := newTestClock()
	ttl := []storh.CollectionOption{storh.WithTTL("exp"), storh.WithIndex(storh.Index("exp"))}
	seed := openAt(t, path, storh.WithClock(clk.Now), storh.WithoutBackground())
	d, err := seed.Docs("sessions", ttl...)
	if err != nil {
		t.Fatal(err)
	}
	now := clk.Now()
	const expired = 6000
	var items []any
	for i := range expired {
		items = append(items, storh.Map{"i": i, "exp": now.Add(time.Second)})
	}
	recs, err := d.PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	writer := d
	if !twoStores {
		seed.Close()
	}
	sweeper := openAt(t, path, storh.WithClock(clk.Now), storh.WithSweepEvery(time.Millisecond))
	rounds := watchSweeps(sweeper)
	if _, err := sweeper.Docs("sessions", ttl...); err != nil {
		t.Fatal(err)
	}
	if !twoStores {
		if writer, err = sweeper.Docs("sessions", ttl...); err != nil {
			t.Fatal(err)
		}
	}
	// Every tenth record, in the order the sweep walks them (by time,
	// then id), is put again with a time an hour on, from the start of
	// the sweep to past its end.
	kept := map[uuidv7.UUID]bool{}
	var again []uuidv7.UUID
	for i := 0; i < expired; i += 10 {
		again = append(again, recs[i].ID)
		kept[recs[i].ID] = true
	}
	clk.Advance(2 * time.Second)
	done := make(chan error, 1)
	go func() {
		for i, id := range again {
			if _, err := writer.PutWithID(id, storh.Map{"i": -i - 1, "exp": now.Add(time.Hour)}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	// The sweep is over once the writer is done and a whole round that
	// began after it finds nothing to delete. A record deleted before its
	// new write was made again by it: the sweep counts it.
	swept := 0
	var writeErr error
	writing := true
	for {
		r := nextRound(t, rounds)
		swept += r.swept["sessions"]
		if !writing && r.swept["sessions"] == 0 {
			break
		}
		if writing {
			select {
			case writeErr = <-done:
				writing = false
				swept += nextRound(t, rounds).swept["sessions"] // a round that may have begun before
			default:
			}
		}
	}
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	plain, err := sweeper.Docs("sessions")
	if err != nil {
		t.Fatal(err)
	}
	all, err := plain.Find(query.All())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(again) || swept < expired-len(again) || swept > expired {
		t.Fatalf("after the sweep %d records are stored (%d swept), want the %d put again", len(all), swept, len(again))
	}
	for _, rec := range all {
		var v struct {
			I int `msgpack:"i"`
		}
		if err := rec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if !kept[rec.ID] || v.I > 0 {
			t.Fatalf("record %s (i %d) is stored, not one put again", rec.ID, v.I)
		}
	}
	verifyClean(t, sweeper)
}
