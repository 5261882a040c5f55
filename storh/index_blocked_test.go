package storh_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The blocked layout of a bbolt file's indexes (storh/engine/internal/blockindex/block.go):
// entries in blocks, new changes in a journal that folds into them. These
// tests use tiny blocks and folds so that every few writes fold.
const tinyFolds = "layout=blocks,block=96,foldmin=4,foldmax=16,step=200"

// findIDs returns the ids Find(q) returns, in order.
func findIDs(t testing.TB, c interface {
	Find(query.Query) ([]storh.Record, error)
}, q query.Query) []uuidv7.UUID {
	t.Helper()
	recs, err := c.Find(q)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uuidv7.UUID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// TestBlockedIndexSnapshotAcrossFolds: a read transaction that began before
// other writers committed and folded its index (once: the view from before
// the fold serves it; three times: it decodes its own snapshot's journal)
// reads the index as it was when it began, and a new one reads it as it is.
func TestBlockedIndexSnapshotAcrossFolds(t *testing.T) {
	fileOnly(t)
	tuneFor(t, tinyFolds)
	for _, rounds := range []int{1, 3} {
		t.Run(fmt.Sprintf("folds=%d", rounds), func(t *testing.T) {
			db := openTemp(t)
			c, err := db.Docs("c", storh.WithIndex(storh.Index("n")))
			if err != nil {
				t.Fatal(err)
			}
			items := make([]any, 120)
			for i := range items {
				items[i] = storh.Map{"n": i % 6}
			}
			recs, err := c.PutMany(items)
			if err != nil {
				t.Fatal(err)
			}
			q := query.All().Where(query.Field("n").Eq(3))
			before := findIDs(t, c, q)
			begun, written := make(chan struct{}), make(chan error, 1)
			go func() {
				<-begun
				for round := range rounds {
					// Moves records out of n = 3 and adds new ones: every
					// commit brings a fold due.
					var more []any
					for range 30 {
						more = append(more, storh.Map{"n": 3, "round": round})
					}
					if _, err := c.PutMany(more); err != nil {
						written <- err
						return
					}
					for _, r := range recs[3+round*6 : 3+round*6+1] {
						if _, err := c.PutWithID(r.ID, storh.Map{"n": 4}); err != nil {
							written <- err
							return
						}
					}
				}
				written <- nil
			}()
			err = db.View(func(tx *storh.Tx) error {
				d, err := tx.Docs("c")
				if err != nil {
					return err
				}
				if _, err := d.Get(recs[0].ID); err != nil { // the snapshot is taken, the index not read yet
					return err
				}
				close(begun)
				if err := <-written; err != nil {
					return err
				}
				got := findIDs(t, d, q)
				if !slices.Equal(got, before) {
					t.Errorf("inside the old transaction: %d ids, want the %d it began with", len(got), len(before))
				}
				if n, err := d.CountMatching(q); err != nil || n != len(before) {
					t.Errorf("CountMatching inside = %d, %v; want %d", n, err, len(before))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := len(before) + 30*rounds - rounds
			if got := findIDs(t, c, q); len(got) != want {
				t.Errorf("after: %d ids, want %d", len(got), want)
			}
			if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
				t.Errorf("Verify = %+v, %v", rep, err)
			}
		})
	}
}

// TestBlockedIndexAgreesWithScanUnderLoad: while writers insert, update
// and delete in group commits and batches (folding all the time), every
// read transaction finds through each index exactly what a scan of the
// records finds in the same transaction.
func TestBlockedIndexAgreesWithScanUnderLoad(t *testing.T) {
	fileOnly(t)
	tuneFor(t, tinyFolds)
	db := openTemp(t)
	c, err := db.Docs("c", storh.WithIndex(storh.Index("n")), storh.WithIndex(storh.Index("u").Unique()),
		storh.WithIndex(storh.Index("tags")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(storh.Map{"n": 1, "u": int64(0)}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var writers sync.WaitGroup
	defer func() {
		close(stop)
		writers.Wait()
	}()
	var ids sync.Map
	var seq int64
	var writes atomic.Int64
	var mu sync.Mutex
	nextU := func() int64 { mu.Lock(); defer mu.Unlock(); seq++; return seq }
	for w := range 3 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				writes.Add(1)
				rec := storh.Map{"n": rng.IntN(5), "u": nextU(), "tags": []any{fmt.Sprint("t", rng.IntN(4)), "all"}}
				switch rng.IntN(4) {
				case 0:
					batch := []any{rec, storh.Map{"n": rng.IntN(5), "u": nextU()}}
					rs, err := c.PutMany(batch)
					if err != nil {
						t.Error(err)
						return
					}
					for _, r := range rs {
						ids.Store(r.ID, true)
					}
				case 1:
					var victim uuidv7.UUID
					ids.Range(func(k, _ any) bool { victim = k.(uuidv7.UUID); return rng.IntN(3) != 0 })
					if !victim.IsZero() {
						if err := c.Delete(victim); err != nil && !errors.Is(err, storh.ErrNotFound) {
							t.Error(err)
							return
						}
						ids.Delete(victim)
					}
				default:
					r, err := c.Put(rec)
					if err != nil {
						t.Error(err)
						return
					}
					ids.Store(r.ID, true)
				}
			}
		}()
	}
	num := func(m storh.Map, k string) int64 { n, _ := m[k].(int64); return n }
	has := func(m storh.Map, tag string) bool {
		l, _ := m["tags"].([]any)
		return slices.Contains(l, any(tag))
	}
	conds := []struct {
		cond query.Cond
		want func(storh.Map) bool
	}{
		{query.Field("n").Eq(2), func(m storh.Map) bool { return num(m, "n") == 2 }},
		{query.Field("n").Gte(3), func(m storh.Map) bool { return num(m, "n") >= 3 }},
		{query.Field("u").Gt(int64(50)), func(m storh.Map) bool { return num(m, "u") > 50 }},
		{query.Field("tags").Contains("t1"), func(m storh.Map) bool { return has(m, "t1") }},
		{query.Or(query.Field("n").Eq(0), query.Field("tags").Contains("t3")), func(m storh.Map) bool { return num(m, "n") == 0 || has(m, "t3") }},
	}
	// Rounds go on until the writers have done a few thousand writes (a few
	// hundred folds at these sizes), so reads overlap folds of every kind.
	// Outside the long run a third of them does, and the storh_invariants
	// build, which checks every index against the records at each commit
	// (quadratic writes), a fifth: either still folds a hundred times.
	goal := int64(testkit.Size(3000, 1000))
	if engine.Invariants {
		goal = 600
	}
	for round := 0; round < 20 || writes.Load() < goal; round++ {
		err := db.View(func(tx *storh.Tx) error {
			d, err := tx.Docs("c")
			if err != nil {
				return err
			}
			var all []storh.Record
			for r, err := range d.Stream(query.All()) {
				if err != nil {
					return err
				}
				all = append(all, r)
			}
			for _, cc := range conds {
				q := query.All().Where(cc.cond)
				if p, err := d.Explain(q); err != nil || len(p.Indexes) == 0 {
					t.Fatalf("%v: Explain = %v, %v; want an index", cc.cond, p, err)
				}
				indexed := findIDs(t, d, q)
				var scanned []uuidv7.UUID
				for _, r := range all {
					if cc.want(r.Data()) {
						scanned = append(scanned, r.ID)
					}
				}
				if !slices.Equal(indexed, scanned) {
					t.Errorf("round %d, %v: the index finds %d records, a scan %d", round, cc.cond, len(indexed), len(scanned))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	writers.Wait()
	stop = make(chan struct{})
	if rep, err := db.Verify(func(p storh.Problem) { t.Errorf("Verify: %v", p) }); err != nil || rep.Problems != 0 {
		t.Errorf("Verify = %+v, %v", rep, err)
	}
}

// TestBlockedIndexDamage: a damaged block or journal record makes the
// queries that read it fail with ErrCorrupt (never a wrong answer), Verify
// names the index, and Repair rebuilds it.
func TestBlockedIndexDamage(t *testing.T) {
	fileOnly(t)
	tuneFor(t, tinyFolds)
	for _, where := range []string{"i", "l"} {
		t.Run(map[string]string{"i": "block", "l": "journal"}[where], func(t *testing.T) {
			path := newPath(t)
			db := openAt(t, path)
			c, _ := db.Docs("c", storh.WithIndex(storh.Index("n")))
			for i := range 50 {
				if _, err := c.Put(storh.Map{"n": i % 5}); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			bdb, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = bdb.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("c")).Bucket([]byte(where)).Bucket([]byte("n"))
				k, v := b.Cursor().First()
				if k == nil {
					return fmt.Errorf("bucket %s/n is empty", where)
				}
				bad := slices.Clone(v)
				bad[len(bad)-1] ^= 0x40
				return b.Put(slices.Clone(k), bad)
			})
			bdb.Close()
			if err != nil {
				t.Fatal(err)
			}
			db = openAt(t, path)
			c, _ = db.Docs("c")
			q := query.All().Where(query.Field("n").Gte(0))
			if _, err := c.Find(q); !errors.Is(err, storh.ErrCorrupt) {
				t.Errorf("Find over the damage = %v; want ErrCorrupt", err)
			}
			var found []storh.Problem
			if _, err := db.Verify(func(p storh.Problem) { found = append(found, p) }); err != nil {
				t.Fatal(err)
			}
			if len(found) == 0 || found[0].Kind != "index" {
				t.Errorf("Verify found %v; want an index problem", found)
			}
			if rep, err := db.Repair(nil); err != nil || rep.Reindexed != 1 {
				t.Errorf("Repair = %+v, %v; want the index rebuilt", rep, err)
			}
			if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
				t.Errorf("Verify after Repair = %+v, %v", rep, err)
			}
			if n, err := c.CountMatching(q); err != nil || n != 50 {
				t.Errorf("CountMatching after Repair = %d, %v; want 50", n, err)
			}
		})
	}
}

// TestIndexLayoutByBackend: a database file's new indexes are blocked, a
// PostgreSQL store's keep a key per entry (docs/indexes.md says why), and
// both answer alike.
func TestIndexLayoutByBackend(t *testing.T) {
	tuneFor(t, "layout=,foldmin=4096,foldmax=131072") // the backend's layout; no fold: the 30 changes stay journaled
	db := openTemp(t)
	c, err := db.Docs("c", storh.WithIndex(storh.Index("n")))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := c.Put(storh.Map{"n": i % 3}); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := c.Indexes()
	if err != nil || len(infos) != 1 {
		t.Fatalf("Indexes = %v, %v", infos, err)
	}
	want, journaled := "blocks", 30
	if onPostgres {
		want, journaled = "keys", 0
	}
	if infos[0].Layout != want || infos[0].Journaled != journaled || infos[0].Entries != 30 {
		t.Errorf("Indexes = %+v; want layout %s, %d journaled, 30 entries", infos[0], want, journaled)
	}
	if n, err := c.CountMatching(query.All().Where(query.Field("n").Eq(1))); err != nil || n != 10 {
		t.Errorf("CountMatching = %d, %v; want 10", n, err)
	}
}
