package engine

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/tune"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Counter slots, written by queue workers beside each other on a shared
// store, may reach a file through a copy: counts add them to the base
// counters, Verify checks the sum and the slots' shape, and Repair folds
// them away.
func TestQueueCounterSlots(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	db, err := Open(path, Options{UnsafeNoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	update := func(fn func(*Tx, *Coll) error) {
		t.Helper()
		if err := db.Update(func(tx *Tx) error {
			c, err := tx.Coll("q", KindQueue, true)
			if err != nil {
				return err
			}
			return fn(tx, c)
		}); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() (n [5]int64) {
		t.Helper()
		if err := db.View(func(tx *Tx) error {
			c, err := tx.Coll("q", KindQueue, false)
			n = tx.JobCounts(c)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	problems := func() (found []string) {
		t.Helper()
		if _, err := db.Verify(context.Background(), nil, func(p api.Problem) { found = append(found, p.Detail) }); err != nil {
			t.Fatal(err)
		}
		return found
	}
	slot := func(pending, claimed, done, dead int64) []byte {
		var v []byte
		for _, d := range []int64{pending, claimed, done, dead} {
			v = binary.BigEndian.AppendUint64(v, uint64(d))
		}
		return v
	}

	update(func(tx *Tx, c *Coll) error {
		for range 3 {
			v, err := AppendValue(nil, map[string]any{"n": 1})
			if err != nil {
				return err
			}
			if err := tx.Enqueue(c, uuidv7.New(), v, 1000, 1000); err != nil {
				return err
			}
		}
		return nil
	})
	// As two workers would leave it: one claim in each of two slots, the
	// base counters as the enqueues left them.
	update(func(tx *Tx, c *Coll) error {
		if _, err := tx.Claim(c, 2000, 60_000, 2, QueueRule{MaxAttempts: 3}); err != nil {
			return err
		}
		c.jobDelta = [5]int64{}
		if err := c.meta.Put([]byte("qs:aaaaaaaa"), slot(-1, 1, 0, 0)); err != nil {
			return err
		}
		return c.meta.Put([]byte("qs:bbbbbbbb"), slot(-1, 1, 0, 0))
	})
	if got := counts(); got != [5]int64{0, 1, 2, 0, 0} {
		t.Fatalf("counts with slots = %v, want 1 pending, 2 claimed", got)
	}
	if p := problems(); len(p) != 0 {
		t.Fatalf("Verify of sound slots: %q", p)
	}
	slotsLeft := func() int {
		t.Helper()
		n := 0
		if err := db.View(func(tx *Tx) error {
			c, err := tx.Coll("q", KindQueue, false)
			n = len(readSlotRows(c.meta))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A write that holds the queue alone folds the slots into the base.
	update(func(tx *Tx, c *Coll) error {
		v, err := AppendValue(nil, map[string]any{"n": 4})
		if err != nil {
			return err
		}
		return tx.Enqueue(c, uuidv7.New(), v, 3000, 3000)
	})
	if got, left := counts(), slotsLeft(); got != [5]int64{0, 2, 2, 0, 0} || left != 0 {
		t.Fatalf("after an enqueue: counts %v, %d slots; want 2 pending, 2 claimed, no slot", got, left)
	}

	// A slot that does not add up, and one of the wrong size, written
	// behind the engine's back (under storh_invariants it refuses them).
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte("q")).Bucket(bucketMeta)
		if err := meta.Put([]byte("qs:cccccccc"), slot(0, 0, 5, 0)); err != nil {
			return err
		}
		return meta.Put([]byte("qs:dddddddd"), []byte("short"))
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	if db, err = Open(path, Options{UnsafeNoSync: true}); err != nil {
		t.Fatal(err)
	}
	p := strings.Join(problems(), "\n")
	if !strings.Contains(p, "the done counter says 5, the states 0") || !strings.Contains(p, "counter slot 71733a6464646464646464 is not 32 bytes") {
		t.Fatalf("Verify of bad slots:\n%s", p)
	}
	if _, err := db.Repair(context.Background(), nil, func(api.Problem) {}); err != nil {
		t.Fatal(err)
	}
	if p := problems(); len(p) != 0 {
		t.Fatalf("Verify after Repair: %q", p)
	}
	if got, left := counts(), slotsLeft(); got != [5]int64{0, 2, 2, 0, 0} || left != 0 {
		t.Fatalf("after Repair: counts %v, %d slots; want 2 pending, 2 claimed, no slot", got, left)
	}
}

// The record and index entry counter slots that writers beside each other
// leave on a shared store may reach a file through a copy: Count, Bytes
// and an index's Entries add them, Verify checks the sums and the slots'
// shape, and Repair recounts and rebuilds them away.
func TestCounterSlotsOnAFile(t *testing.T) {
	restore, err := tune.Set("layout=keys") // a shared store's layout
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	path := filepath.Join(t.TempDir(), "d.db")
	db, err := Open(path, Options{UnsafeNoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	h := Handle{Name: "d", Kind: KindDocs, Indexes: []IndexSpec{{Name: "tag", Paths: [][]string{{"tag"}}}}}
	var size int64
	if err := db.Update(func(tx *Tx) error {
		c, err := tx.Use(h, true)
		if err != nil {
			return err
		}
		for i := range 3 {
			v, err := AppendValue(nil, map[string]any{"tag": i})
			if err != nil {
				return err
			}
			size += int64(len(v))
			if err := tx.Put(c, uuidv7.New(), v, false); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ints := func(ns ...int64) []byte {
		var v []byte
		for _, n := range ns {
			v = binary.BigEndian.AppendUint64(v, uint64(n))
		}
		return v
	}
	// As two DBs would leave them: the base counts one record of the
	// three, the slots the others; the index's slots add up to nothing.
	rewrite := func(fn func(meta *bolt.Bucket) error) {
		t.Helper()
		bdb, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = bdb.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket([]byte("d")).Bucket(bucketMeta)) })
		bdb.Close()
		if err != nil {
			t.Fatal(err)
		}
		if db, err = Open(path, Options{UnsafeNoSync: true}); err != nil {
			t.Fatal(err)
		}
	}
	rewrite(func(meta *bolt.Bucket) error {
		for k, v := range map[string][]byte{
			"count": ints(1), "bytes": ints(size - 100),
			"cs:aaaaaaaa": ints(1, 60), "cs:bbbbbbbb": ints(1, 40),
			"xs:tag\x00aaaaaaaa": ints(2), "xs:tag\x00bbbbbbbb": ints(-2),
		} {
			if err := meta.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	check := func(when string, count, bytes, entries int64) {
		t.Helper()
		if err := db.View(func(tx *Tx) error {
			c, err := tx.Use(h, false)
			if err != nil {
				return err
			}
			infos, err := c.Indexes()
			if err != nil {
				return err
			}
			if c.Count() != count || c.Bytes() != bytes || len(infos) != 1 || int64(infos[0].Entries) != entries {
				t.Errorf("%s: count %d, bytes %d, indexes %+v; want %d, %d and %d entries", when, c.Count(), c.Bytes(), infos, count, bytes, entries)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	problems := func() (found []string) {
		t.Helper()
		if _, err := db.Verify(context.Background(), nil, func(p api.Problem) { found = append(found, p.Detail) }); err != nil {
			t.Fatal(err)
		}
		return found
	}
	check("with sound slots", 3, size, 3)
	if p := problems(); len(p) != 0 {
		t.Fatalf("Verify of sound slots: %q", p)
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rewrite(func(meta *bolt.Bucket) error {
		if err := meta.Put([]byte("cs:cccccccc"), []byte("short")); err != nil {
			return err
		}
		return meta.Put([]byte("xs:tag\x00cccccccc"), ints(5))
	})
	p := strings.Join(problems(), "\n")
	for _, want := range []string{"counter slot 63733a6363636363636363 is not 16 bytes", "count 8 entries, the index holds 3"} {
		if !strings.Contains(p, want) {
			t.Errorf("Verify of bad slots: no %q in\n%s", want, p)
		}
	}
	if _, err := db.Repair(context.Background(), nil, func(api.Problem) {}); err != nil {
		t.Fatal(err)
	}
	if p := problems(); len(p) != 0 {
		t.Fatalf("Verify after Repair: %q", p)
	}
	check("after Repair", 3, size, 3)
	if err := db.View(func(tx *Tx) error {
		c, err := tx.Use(h, false)
		if n := len(readSlotRows(c.meta)); err == nil && n != 0 {
			t.Errorf("%d slots after Repair, want none", n)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
