package engine_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

func openEngine(t *testing.T) *engine.DB {
	t.Helper()
	db, err := engine.Open(filepath.Join(t.TempDir(), "e.db"), engine.Options{UnsafeNoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// fill stores n records {"i": i} with ids at consecutive milliseconds.
func fill(t *testing.T, db *engine.DB, coll string, n int) []uuidv7.UUID {
	t.Helper()
	ids := make([]uuidv7.UUID, n)
	if err := db.Enter(); err != nil {
		t.Fatal(err)
	}
	defer db.Exit()
	err := db.Update(func(tx *engine.Tx) error {
		c, err := tx.Coll(coll, engine.KindLog, true)
		if err != nil {
			return err
		}
		for i := range ids {
			if ids[i], err = uuidv7.NewAt(int64(1000 + i)); err != nil {
				return err
			}
			v, err := engine.AppendValue(nil, map[string]any{"i": i})
			if err != nil {
				return err
			}
			if err := tx.Put(c, ids[i], v, true); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestScanChunksResume reads a range in chunks bounded both by records
// returned and by keys examined, and checks that the chunks join up: every
// selected record exactly once, in order, no chunk over its bounds.
func TestScanChunksResume(t *testing.T) {
	db := openEngine(t)
	all := fill(t, db, "c", 1000)
	every := func(n int) engine.Matcher {
		return func(p []byte) (bool, error) {
			raw, ok, err := mpack.Field(p, "i")
			if err != nil || !ok {
				return false, err
			}
			v, _, err := mpack.Decode(raw)
			return v.(int64)%int64(n) == 0, err
		}
	}
	for _, tc := range []struct {
		name        string
		q           query.Query
		match       int // keep every match-th record; 0 keeps all
		max, budget int
	}{
		{"all, small chunks", query.All(), 0, 7, 1000},
		{"all reversed", query.All().Reverse(), 0, 64, 1000},
		{"sparse filter, tight budget", query.All(), 97, 5, 30},
		{"sparse filter reversed", query.All().Reverse(), 97, 5, 30},
		{"window", query.All().TimeRangeMs(1100, 1199), 0, 9, 1000},
		{"window reversed with filter", query.All().TimeRangeMs(1100, 1199).Reverse(), 3, 4, 10},
		{"after and before", query.All().After(all[10]).Before(all[20]), 0, 1, 1},
		{"budget of one", query.All().Reverse().Before(all[50]), 0, 1, 1},
		{"empty range", query.All().After(all[999]), 0, 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := plan.Compile(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := p.Lo, p.Hi
			var want []uuidv7.UUID
			for i, id := range all {
				if id.Compare(lo) >= 0 && id.Compare(hi) <= 0 && (tc.match == 0 || i%tc.match == 0) {
					want = append(want, id)
				}
			}
			if p.Empty {
				want = nil
			}
			if p.Reverse {
				slices.Reverse(want)
			}
			var match engine.Matcher
			examined := 0
			if tc.match > 0 {
				inner := every(tc.match)
				match = func(p []byte) (bool, error) { examined++; return inner(p) }
			}
			cur := engine.NewCursor(p)
			var got []uuidv7.UUID
			for chunks := 0; !cur.Done; chunks++ {
				if chunks > 2000 {
					t.Fatal("the scan does not end")
				}
				examined = 0
				var items []engine.Item
				err := db.View(func(tx *engine.Tx) error {
					c, err := tx.Coll("c", engine.KindLog, false)
					if err != nil {
						return err
					}
					items = engine.ScanColl(c, &cur, match, tc.max, tc.budget, nil)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(items) > tc.max || examined > tc.budget {
					t.Fatalf("chunk %d: %d items (max %d), %d examined (budget %d)", chunks, len(items), tc.max, examined, tc.budget)
				}
				for _, it := range items {
					if it.Err != nil {
						t.Fatal(it.Err)
					}
					got = append(got, it.ID)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("got %d ids, want %d\n got %v\nwant %v", len(got), len(want), got, want)
			}
		})
	}
}

// TestScanPayloadsOutliveTheTransaction: items are copies, valid after the
// read transaction has closed and after later writes reuse the pages.
func TestScanPayloadsOutliveTheTransaction(t *testing.T) {
	db := openEngine(t)
	fill(t, db, "c", 300)
	if err := db.Enter(); err != nil {
		t.Fatal(err)
	}
	h, err := db.OpenHandle("c", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	items, err := db.RunChunk(h, engine.NewRun(allPlan(t)), 300, nil)
	db.Exit()
	if err != nil || len(items) != 300 {
		t.Fatalf("RunChunk: %d items, %v", len(items), err)
	}
	// Overwrite the pages: drop and refill the collection.
	if err := db.Enter(); err != nil {
		t.Fatal(err)
	}
	if err := db.DropColl("c"); err != nil {
		t.Fatal(err)
	}
	db.Exit()
	fill(t, db, "c2", 300)
	for i, it := range items {
		m, err := engine.DecodeMap(it.Payload)
		if err != nil || m["i"] != int64(i) {
			t.Fatalf("item %d after the tx: %v, %v", i, m, err)
		}
	}
	// A collection dropped after the handle was opened is ErrNotFound.
	if err := db.Enter(); err != nil {
		t.Fatal(err)
	}
	_, err = db.RunChunk(h, engine.NewRun(allPlan(t)), 10, nil)
	db.Exit()
	if !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("RunChunk of a dropped collection: %v; want ErrNotFound", err)
	}
	// One not created yet reads as empty.
	if err := db.Enter(); err != nil {
		t.Fatal(err)
	}
	run := engine.NewRun(allPlan(t))
	fresh, err := db.OpenHandle("not-yet", engine.KindDocs, false)
	if err == nil {
		items, err = db.RunChunk(fresh, run, 10, nil)
	}
	db.Exit()
	if err != nil || len(items) != 0 || !run.Done {
		t.Errorf("RunChunk of a collection not created yet: %d items, done %v, %v; want none", len(items), run.Done, err)
	}
}

// TestSubmitIsolatesFailures sends many single writes at once; the ones that
// must fail (duplicate log ids, wrong kind) fail alone.
func TestSubmitIsolatesFailures(t *testing.T) {
	db := openEngine(t)
	ids := fill(t, db, "log", 10)
	if err := db.Enter(); err != nil {
		t.Fatal(err)
	}
	logH, err := db.OpenHandle("log", engine.KindLog, false)
	if err != nil {
		t.Fatal(err)
	}
	docsH, err := db.OpenHandle("docs", engine.KindDocs, false)
	if err != nil {
		t.Fatal(err)
	}
	db.Exit()
	value, _ := engine.AppendValue(nil, map[string]any{"x": 1})
	const n = 200
	results := make([]error, n)
	fresh := make([]uuidv7.UUID, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		fresh[i] = uuidv7.New()
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := db.Enter(); err != nil {
				results[i] = err
				return
			}
			defer db.Exit()
			op := engine.NewWriteOp()
			defer op.Release()
			// Each op owns its value: Tx.Put seals the checksum for its id in place.
			op.Coll, op.ID, op.Value, op.InsertOnly = logH, fresh[i], bytes.Clone(value), true
			switch i % 10 {
			case 3:
				op.ID = ids[i%len(ids)] // duplicate
			case 7:
				op.Coll.Kind = engine.KindDocs // wrong kind
			case 9:
				op.Coll, op.InsertOnly = docsH, false
			}
			results[i] = db.Submit(op)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range results {
		var want error
		switch i % 10 {
		case 3:
			want = errs.ErrExists
		case 7:
			want = errs.ErrWrongKind
		}
		if (want == nil && err != nil) || (want != nil && !errors.Is(err, want)) {
			t.Errorf("op %d: %v; want %v", i, err, want)
		}
	}
	if err := db.Enter(); err != nil {
		t.Fatal(err)
	}
	defer db.Exit()
	err = db.View(func(tx *engine.Tx) error {
		l, err := tx.Coll("log", engine.KindLog, false)
		if err != nil {
			return err
		}
		d, err := tx.Coll("docs", engine.KindDocs, false)
		if err != nil {
			return err
		}
		if l.Count() != 10+n*7/10 || d.Count() != n/10 {
			t.Errorf("counts: log %d, docs %d; want %d, %d", l.Count(), d.Count(), 10+n*7/10, n/10)
		}
		for i, id := range fresh {
			c := l
			if i%10 == 9 {
				c = d
			}
			_, err := tx.Get(c, id)
			if stored := err == nil; stored != (i%10 != 3 && i%10 != 7) {
				t.Errorf("op %d: stored=%v (%v)", i, stored, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestEngineOpenOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "o.db")
	db, err := engine.Open(path, engine.Options{UnsafeNoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	o := db.Options()
	if o.LockTimeout != engine.DefaultLockTimeout || o.InitialMmapSize != engine.DefaultInitialMmapSize ||
		o.MaxBatch != engine.DefaultMaxBatch || o.FileMode != 0o600 {
		t.Errorf("defaults not applied: %+v", o)
	}
	if db.Path() != path {
		t.Error("Path")
	}
	if err := db.Enter(); err != nil {
		t.Fatalf("Enter on an open engine: %v", err)
	}
	db.Exit()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(db.Enter(), errs.ErrClosed) {
		t.Error("a closed engine lets operations in")
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close = %v; want nil", err)
	}
}

func allPlan(t *testing.T) *plan.Spec {
	t.Helper()
	p, err := plan.Compile(query.All())
	if err != nil {
		t.Fatal(err)
	}
	return p
}
