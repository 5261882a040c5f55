package postgres

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/kv"
)

// A read-only transaction takes a top-level bucket's subtree from the
// store's cache and checks it with its first statement. Another store of
// the database (another process) changes the subtree between two reads;
// the second read either gives what a fresh lookup would have, or, when
// the caller had already acted on a bucket that is gone, fails with
// kv.ErrStale. Never a stale answer.
func TestCachedSubtree(t *testing.T) {
	type reader func(t *testing.T, tx kv.Tx) error
	get := func(path ...string) func(t *testing.T, tx kv.Tx) ([]byte, error) {
		return func(t *testing.T, tx kv.Tx) ([]byte, error) {
			b := tx.Bucket([]byte("c"))
			for _, p := range path {
				if b == nil {
					break
				}
				b = b.Bucket([]byte(p))
			}
			if b == nil {
				return nil, tx.Err()
			}
			return b.Get([]byte("k")), tx.Err()
		}
	}
	wantValue := func(path []string, want string) reader {
		return func(t *testing.T, tx kv.Tx) error {
			v, err := get(path...)(t, tx)
			if err == nil && string(v) != want {
				t.Errorf("Get %v/k = %q, want %q", path, v, want)
			}
			return err
		}
	}
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, tx kv.Tx)
		read   reader
		stale  bool
		after  reader // a fresh read after it: must not fail
	}{
		{
			name:   "unchanged",
			change: func(*testing.T, kv.Tx) {},
			read:   wantValue(nil, "v1"),
		},
		{
			name:   "nested bucket added, found after the read",
			change: func(t *testing.T, tx kv.Tx) { create(t, tx.Bucket([]byte("c")), "y") },
			read: func(t *testing.T, tx kv.Tx) error {
				c := tx.Bucket([]byte("c"))
				if v := c.Get([]byte("k")); string(v) != "v1" {
					t.Errorf("Get = %q", v)
				}
				if c.Bucket([]byte("y")) == nil {
					t.Errorf("the new nested bucket is missing after the first read")
				}
				return tx.Err()
			},
		},
		{
			name:   "nested bucket added, looked up before the read",
			change: func(t *testing.T, tx kv.Tx) { create(t, tx.Bucket([]byte("c")), "y") },
			read:   wantValue([]string{"y"}, ""),
			stale:  true, // the cache said y is not there; the caller acted on it
			after: func(t *testing.T, tx kv.Tx) error {
				if tx.Bucket([]byte("c")).Bucket([]byte("y")) == nil {
					t.Errorf("y is still missing")
				}
				return tx.Err()
			},
		},
		{
			name: "made again with the same shape",
			change: func(t *testing.T, tx kv.Tx) {
				must(t, tx.DeleteBucket([]byte("c")))
				c := create(t, tx, "c")
				must(t, create(t, c, "x").Put([]byte("k"), []byte("x2")))
				must(t, c.Put([]byte("k"), []byte("v2")))
			},
			read: func(t *testing.T, tx kv.Tx) error {
				c := tx.Bucket([]byte("c"))
				x := c.Bucket([]byte("x"))
				if v := x.Get([]byte("k")); string(v) != "x2" {
					t.Errorf("x/k = %q, want x2", v)
				}
				if v := c.Get([]byte("k")); string(v) != "v2" {
					t.Errorf("k = %q, want v2", v)
				}
				return tx.Err()
			},
		},
		{
			name: "made again after its id was read",
			change: func(t *testing.T, tx kv.Tx) {
				must(t, tx.DeleteBucket([]byte("c")))
				must(t, create(t, tx, "c").Put([]byte("k"), []byte("v2")))
			},
			read: func(t *testing.T, tx kv.Tx) error {
				c := tx.Bucket([]byte("c"))
				_ = c.(kv.Identifier).ID()
				c.Get([]byte("k"))
				return tx.Err()
			},
			stale: true,
			after: wantValue(nil, "v2"),
		},
		{
			name:   "deleted",
			change: func(t *testing.T, tx kv.Tx) { must(t, tx.DeleteBucket([]byte("c"))) },
			read:   wantValue(nil, ""),
			stale:  true,
			after: func(t *testing.T, tx kv.Tx) error {
				if tx.Bucket([]byte("c")) != nil {
					t.Errorf("c is still there")
				}
				return tx.Err()
			},
		},
		{
			name:   "deleted, and the caller only looked it up",
			change: func(t *testing.T, tx kv.Tx) { must(t, tx.DeleteBucket([]byte("c"))) },
			read: func(t *testing.T, tx kv.Tx) error {
				if tx.Bucket([]byte("c")) == nil {
					t.Errorf("the cached bucket is missing")
				}
				return tx.Err() // the check goes now, on its own
			},
			stale: true,
		},
		{
			name:   "deleted, and the caller only looked it up and rolled back",
			change: func(t *testing.T, tx kv.Tx) { must(t, tx.DeleteBucket([]byte("c"))) },
			read: func(t *testing.T, tx kv.Tx) error {
				tx.Bucket([]byte("c"))
				return tx.Rollback()
			},
			stale: true,
		},
		{
			name:   "a nested bucket deleted, walked over",
			change: func(t *testing.T, tx kv.Tx) { must(t, tx.Bucket([]byte("c")).DeleteBucket([]byte("x"))) },
			read: func(t *testing.T, tx kv.Tx) error {
				var keys []string
				cur := tx.Bucket([]byte("c")).Cursor()
				for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
					keys = append(keys, string(k))
				}
				if fmt.Sprint(keys) != "[k]" {
					t.Errorf("keys %q, want [k]", keys)
				}
				if tx.Bucket([]byte("c")).Bucket([]byte("x")) != nil {
					t.Errorf("the deleted nested bucket is still there")
				}
				return tx.Err()
			},
		},
		{
			name:   "a bucket added two levels down",
			change: func(t *testing.T, tx kv.Tx) { create(t, tx.Bucket([]byte("c")).Bucket([]byte("x")), "z") },
			read: func(t *testing.T, tx kv.Tx) error {
				x := tx.Bucket([]byte("c")).Bucket([]byte("x"))
				if v := x.Get([]byte("k")); string(v) != "x1" {
					t.Errorf("x/k = %q", v)
				}
				if x.Bucket([]byte("z")) == nil {
					t.Errorf("z is missing")
				}
				return tx.Err()
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := pgtest.URL(t)
			a, b := openURL(t, url), openURL(t, url)
			setup := begin(t, b, true)
			c := create(t, setup, "c")
			must(t, c.Put([]byte("k"), []byte("v1")))
			must(t, create(t, c, "x").Put([]byte("k"), []byte("x1")))
			commit(t, setup)

			warm := begin(t, a, false)
			if v := warm.Bucket([]byte("c")).Get([]byte("k")); string(v) != "v1" {
				t.Fatalf("first read: %q, %v", v, warm.Err())
			}
			must(t, warm.Rollback())
			if _, cached := a.trees.Load("c"); !cached {
				t.Fatal("a read-only lookup did not cache the subtree")
			}

			change := begin(t, b, true)
			tc.change(t, change)
			commit(t, change)

			tx := begin(t, a, false)
			err := tc.read(t, tx)
			tx.Rollback()
			if tc.stale != errors.Is(err, kv.ErrStale) {
				t.Fatalf("read: %v, want ErrStale: %v", err, tc.stale)
			}
			if err != nil && !tc.stale {
				t.Fatal(err)
			}
			if tc.after != nil {
				tx := begin(t, a, false)
				if err := tc.after(t, tx); err != nil {
					t.Errorf("the read after: %v", err)
				}
				tx.Rollback()
			}
		})
	}
}

// A writer that changes a subtree drops it from its own store's cache.
func TestCachedSubtreeForgotten(t *testing.T) {
	s := openStore(t)
	fill(t, s, "c", 1)
	tx := begin(t, s, false)
	tx.Bucket([]byte("c"))
	must(t, tx.Rollback())
	if _, cached := s.trees.Load("c"); !cached {
		t.Fatal("not cached")
	}
	w := begin(t, s, true)
	create(t, w.Bucket([]byte("c")), "n")
	commit(t, w)
	if _, cached := s.trees.Load("c"); cached {
		t.Error("a commit that made a nested bucket left the cached subtree")
	}
}

// A store made before the registry had generations gains the column when
// it is opened, and reads it as before.
func TestRegistryWithoutGenerations(t *testing.T) {
	url := pgtest.URL(t)
	s := openURL(t, url)
	fill(t, s, "c", 2)
	if _, err := s.pool.Exec(ctx, "ALTER TABLE storh_buckets DROP COLUMN gen"); err != nil {
		t.Fatal(err)
	}
	s = openURL(t, url)
	tx := begin(t, s, false)
	if v := tx.Bucket([]byte("c")).Get(key(1)); string(v) != "v1" {
		t.Errorf("Get = %q, %v", v, tx.Err())
	}
}

// Random changes by one store, reads by another: every read agrees with
// a model of the buckets, or fails with kv.ErrStale when a bucket it
// used changed since the reader last looked, and the read again agrees.
func TestCachedSubtreeModel(t *testing.T) {
	url := pgtest.URL(t)
	reader, writer := openURL(t, url), openURL(t, url)
	tops := []string{"t0", "t1"}
	nested := []string{"n0", "n1"}
	round := 0
	rapid.Check(t, func(rt *rapid.T) {
		round++
		// The model: which buckets exist and their value of key k.
		model := map[string]string{}
		// Start clean: drop what the last run left.
		w := begin(t, writer, true)
		for _, top := range tops {
			if w.Bucket([]byte(top)) != nil {
				must(t, w.DeleteBucket([]byte(top)))
			}
		}
		commit(t, w)
		for step := range rapid.IntRange(1, 30).Draw(rt, "steps") {
			top := rapid.SampledFrom(tops).Draw(rt, "top")
			sub := rapid.SampledFrom(append([]string{""}, nested...)).Draw(rt, "nested")
			path := top
			if sub != "" {
				path += "/" + sub
			}
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0: // make the bucket (and its parent), put k
				v := fmt.Sprintf("%d.%d", round, step)
				w := begin(t, writer, true)
				b, err := w.CreateBucketIfNotExists([]byte(top))
				must(t, err)
				model[top] = model[top] // exists
				if sub != "" {
					b, err = b.CreateBucketIfNotExists([]byte(sub))
					must(t, err)
				}
				must(t, b.Put([]byte("k"), []byte(v)))
				commit(t, w)
				model[path] = v
			case 1: // delete it
				w := begin(t, writer, true)
				parent := kv.Bucket(nil)
				if sub != "" {
					parent = w.Bucket([]byte(top))
				}
				var err error
				switch {
				case sub == "":
					err = w.DeleteBucket([]byte(top))
				case parent != nil:
					err = parent.DeleteBucket([]byte(sub))
				default:
					err = kv.ErrBucketNotFound
				}
				if _, there := model[path]; there != (err == nil) {
					rt.Fatalf("delete %s: %v, model has it: %v", path, err, there)
				}
				commit(t, w)
				for p := range model {
					if p == path || len(p) > len(path) && p[:len(path)+1] == path+"/" {
						delete(model, p)
					}
				}
			default: // read it, twice if the first is stale
				for attempt := 1; ; attempt++ {
					tx := begin(t, reader, false)
					got, there := "", false
					if b := tx.Bucket([]byte(top)); b != nil {
						if sub != "" {
							b = b.Bucket([]byte(sub))
						}
						if b != nil {
							got, there = string(b.Get([]byte("k"))), true
						}
					}
					err := tx.Err()
					tx.Rollback()
					if errors.Is(err, kv.ErrStale) && attempt == 1 {
						continue
					}
					if err != nil {
						rt.Fatalf("read %s (attempt %d): %v", path, attempt, err)
					}
					want, wantThere := model[path]
					if there != wantThere || got != want {
						rt.Fatalf("read %s: %q (there %v), model %q (there %v)", path, got, there, want, wantThere)
					}
					break
				}
			}
		}
	})
}

// A writer takes a top-level bucket's subtree from the cache too, and
// sends its lock and a check of the subtree with its first statement: a
// writer that reads nothing commits in two round trips, its writes and
// then the COMMIT (once it knows its id). When another
// store changed the subtree since it was cached, the check fails the
// writer with kv.ErrConflict before anything it wrote reaches a table,
// and the next run looks the subtree up afresh.
func TestWriterCachedSubtree(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, tx kv.Tx)
		stale  bool
	}{
		{name: "unchanged", change: func(*testing.T, kv.Tx) {}},
		{
			name:   "nested bucket added",
			change: func(t *testing.T, tx kv.Tx) { create(t, tx.Bucket([]byte("c")), "y") },
			stale:  true,
		},
		{
			name: "made again",
			change: func(t *testing.T, tx kv.Tx) {
				must(t, tx.DeleteBucket([]byte("c")))
				create(t, create(t, tx, "c"), "x")
			},
			stale: true,
		},
		{
			name:   "nested bucket deleted",
			change: func(t *testing.T, tx kv.Tx) { must(t, tx.Bucket([]byte("c")).DeleteBucket([]byte("x"))) },
			stale:  true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := pgtest.URL(t)
			a, rt := openCounted(t, url)
			b := openURL(t, url)
			setup := begin(t, b, true)
			c := create(t, setup, "c")
			must(t, c.Put([]byte("k"), []byte("v1")))
			create(t, c, "x")
			commit(t, setup)

			// Warm a's cache and its connection's prepared statements.
			warm := begin(t, a, true)
			must(t, warm.Bucket([]byte("c")).Put([]byte("k"), []byte("v1")))
			commit(t, warm)
			if _, cached := a.trees.Load("c"); !cached {
				t.Fatal("a writer's lookup did not cache the subtree")
			}

			change := begin(t, b, true)
			tc.change(t, change)
			commit(t, change)

			before := rt.n.Load()
			w := begin(t, a, true)
			must(t, w.Bucket([]byte("c")).Put([]byte("k"), []byte("v2")))
			err := w.Commit()
			if trips := rt.n.Load() - before; !tc.stale && trips != 1 {
				t.Errorf("a put on a cached subtree: %d round trips, want 1", trips)
			}
			if tc.stale != errors.Is(err, kv.ErrConflict) {
				t.Fatalf("commit: %v, want ErrConflict: %v", err, tc.stale)
			}
			if err != nil && !tc.stale {
				t.Fatal(err)
			}
			r := begin(t, b, false)
			want := "v2"
			if tc.stale {
				want = "v1" // untouched; made again: a new bucket, without k
				if tc.name == "made again" {
					want = ""
				}
			}
			if v := r.Bucket([]byte("c")).Get([]byte("k")); string(v) != want {
				t.Errorf("after the commit, k = %q, want %q", v, want)
			}
			must(t, r.Rollback())
			if !tc.stale {
				return
			}
			again := begin(t, a, true)
			must(t, again.Bucket([]byte("c")).Put([]byte("k"), []byte("v3")))
			commit(t, again)
		})
	}
}

// Add sums 8-byte integers on the server: into a missing key, after a
// put or a delete of the key in the same transaction, and across
// transactions; a value of another length is replaced.
func TestAdd(t *testing.T) {
	s := openStore(t)
	fill(t, s, "b", 0)
	ints := func(ns ...int64) []byte {
		var v []byte
		for _, n := range ns {
			v = binary.BigEndian.AppendUint64(v, uint64(n))
		}
		return v
	}
	type write struct {
		put, add []byte
		del      bool
		read     bool // a Get of another key, which sends what is buffered
	}
	for _, tc := range []struct {
		name string
		txs  [][]write
		want []byte
	}{
		{"into a missing key", [][]write{{{add: ints(3, -2)}}}, ints(3, -2)},
		{"twice in a transaction", [][]write{{{add: ints(3, 1)}, {add: ints(4, -5)}}}, ints(7, -4)},
		{"across transactions", [][]write{{{add: ints(3, 1)}}, {{add: ints(-3, 9)}}}, ints(0, 10)},
		{"after a put", [][]write{{{put: ints(10, 10)}, {add: ints(1, 2)}}}, ints(11, 12)},
		{"after a delete", [][]write{{{put: ints(10, 10)}}, {{del: true}, {add: ints(1, 2)}}}, ints(1, 2)},
		{"then a put", [][]write{{{add: ints(1, 2)}, {put: ints(5, 5)}}}, ints(5, 5)},
		{"then a delete", [][]write{{{add: ints(1, 2)}, {del: true}}}, nil},
		{"sent, then more", [][]write{{{add: ints(1, 2)}, {read: true}, {add: ints(1, 2)}}}, ints(2, 4)},
		{"onto another length", [][]write{{{put: []byte("xyz")}}, {{add: ints(1, 2)}}}, ints(1, 2)},
		// One key's add of up to four integers has a statement of its own
		// per length; longer ones go as several keys' do.
		{"one integer", [][]write{{{add: ints(5)}}, {{add: ints(-7)}}}, ints(-2)},
		{"four integers", [][]write{{{add: ints(1, 2, 3, 4)}}, {{add: ints(10, -20, 30, -1<<62)}}}, ints(11, -18, 33, 4-1<<62)},
		{"five integers", [][]write{{{add: ints(1, 2, 3, 4, 5)}}, {{add: ints(1, 1, 1, 1, -10)}}}, ints(2, 3, 4, 5, -5)},
		{"onto a shorter value", [][]write{{{add: ints(1)}}, {{add: ints(1, 2, 3, 4)}}}, ints(1, 2, 3, 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := []byte(tc.name)
			for _, writes := range tc.txs {
				tx := begin(t, s, true)
				b := tx.Bucket([]byte("b"))
				for _, w := range writes {
					switch {
					case w.add != nil:
						must(t, b.(kv.Adder).Add(k, w.add))
					case w.put != nil:
						must(t, b.Put(k, w.put))
					case w.del:
						must(t, b.Delete(k))
					case w.read:
						b.Get([]byte("other"))
					}
				}
				commit(t, tx)
			}
			r := begin(t, s, false)
			defer r.Rollback()
			if got := r.Bucket([]byte("b")).Get(k); !bytes.Equal(got, tc.want) {
				t.Errorf("value %x, want %x (%v)", got, tc.want, r.Err())
			}
		})
	}

	// Writers that add to one key at once lose nothing.
	const workers, each = 4, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				tx := begin(t, s, true)
				must(t, tx.Bucket([]byte("b")).(kv.Adder).Add([]byte("shared"), ints(1, 2)))
				commit(t, tx)
			}
		})
	}
	wg.Wait()
	r := begin(t, s, false)
	defer r.Rollback()
	if got := r.Bucket([]byte("b")).Get([]byte("shared")); !bytes.Equal(got, ints(workers*each, 2*workers*each)) {
		t.Errorf("after concurrent adds: %x", got)
	}

	// Several keys' adds in one transaction go in one statement.
	for range 2 {
		tx := begin(t, s, true)
		b := tx.Bucket([]byte("b")).(kv.Adder)
		must(t, b.Add([]byte("many/1"), ints(1, 2)))
		must(t, b.Add([]byte("many/2"), ints(3)))
		must(t, b.Add([]byte("many/3"), ints(4, 5, 6, 7, 8)))
		commit(t, tx)
	}
	r = begin(t, s, false)
	defer r.Rollback()
	for k, want := range map[string][]byte{"many/1": ints(2, 4), "many/2": ints(6), "many/3": ints(8, 10, 12, 14, 16)} {
		if got := r.Bucket([]byte("b")).Get([]byte(k)); !bytes.Equal(got, want) {
			t.Errorf("%s: %x, want %x", k, got, want)
		}
	}

	tx := begin(t, s, true)
	defer tx.Rollback()
	if err := tx.Bucket([]byte("b")).(kv.Adder).Add([]byte("k"), []byte("abc")); !errors.Is(err, kv.ErrIncompatibleValue) {
		t.Errorf("Add of 3 bytes: %v, want ErrIncompatibleValue", err)
	}
}
