package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/internal/api"

	bolt "go.etcd.io/bbolt"
)

// doneAfterN is a context whose Err reports context.Canceled from its
// (n+1)th call on.
type doneAfterN struct {
	context.Context
	n, calls int
}

func (c *doneAfterN) Err() error {
	c.calls++
	if c.calls > c.n {
		return context.Canceled
	}
	return nil
}

// TestPageCheckDrainsOnCancel: when the context is done while bbolt's page
// check is reporting (a badly damaged file reports many findings), pageCheck
// stops reporting at the next check but reads the channel to its end, so
// the sending goroutine finishes (bbolt's would otherwise block forever,
// holding the transaction's pages), and returns the context's error.
func TestPageCheckDrainsOnCancel(t *testing.T) {
	const findings = 3*paceKeys + 10
	ch := make(chan error) // unbuffered, as bbolt's
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer close(ch)
		for i := range findings {
			ch <- fmt.Errorf("page %d: unreachable unfreed", i)
		}
	}()
	ctx := &doneAfterN{Context: context.Background(), n: 1}
	emitted := 0
	err := pageCheck(ch, func(api.Problem) { emitted++ }, newPace(ctx))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("pageCheck = %v; want context.Canceled", err)
	}
	if emitted != 2*paceKeys-1 || ctx.calls != 2 {
		t.Errorf("emitted %d findings asking %d times; want %d (up to the second check), asking twice", emitted, ctx.calls, 2*paceKeys-1)
	}
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("the checking goroutine is still blocked: pageCheck stopped reading")
	}
	// A live context reports everything; a nil pace too.
	for _, p := range []*pace{newPace(context.Background()), nil} {
		ch := make(chan error, 3)
		for i := range 3 {
			ch <- fmt.Errorf("finding %d", i)
		}
		close(ch)
		emitted = 0
		if err := pageCheck(ch, func(api.Problem) { emitted++ }, p); err != nil || emitted != 3 {
			t.Errorf("pageCheck with a live context = %v, %d findings; want nil, 3", err, emitted)
		}
	}
}

// TestCompactIntoCopiesEverything: the compaction walk copies every bucket
// of any depth with its sequence, values (empty ones too), empty and inline
// buckets and a top-level value, across many small transactions, and packs
// pages full except an index's entries, which keep indexFillPercent.
func TestCompactIntoCopiesEverything(t *testing.T) {
	dir := t.TempDir()
	src, err := bolt.Open(filepath.Join(dir, "src.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const n = 6000
	if err := src.Update(func(tx *bolt.Tx) error {
		if err := tx.Cursor().Bucket().Put([]byte("\x01top-value"), []byte("stray")); err != nil {
			return err
		}
		coll, err := tx.CreateBucket([]byte("coll"))
		if err != nil {
			return err
		}
		_ = coll.SetSequence(7)
		recs, _ := coll.CreateBucket(bucketRecords)
		_ = recs.SetSequence(11)
		recs.FillPercent = 1
		entries, _ := coll.CreateBucket(bucketIndexEntries)
		ix, _ := entries.CreateBucket([]byte("n"))
		_ = ix.SetSequence(13)
		for i := range n {
			if err := recs.Put(fmt.Appendf(nil, "%016d", i), []byte(strings.Repeat("v", 40))); err != nil {
				return err
			}
			if err := ix.Put(fmt.Appendf(nil, "%08d-%016d", i%977, i), nil); err != nil {
				return err
			}
		}
		deep := coll
		for d := range 4 {
			if deep, err = deep.CreateBucket(fmt.Appendf(nil, "deep%d", d)); err != nil {
				return err
			}
			_ = deep.SetSequence(uint64(100 + d))
			_ = deep.Put([]byte("k"), []byte{byte(d)})
			_ = deep.Put([]byte("empty"), []byte{})
		}
		_, err = tx.CreateBucket([]byte("empty-bucket"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	dst, err := bolt.Open(filepath.Join(dir, "dst.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	txid := func(db *bolt.DB) (id int) {
		_ = db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil })
		return id
	}
	before := txid(dst)
	if err := compactInto(dst, src, 16<<10, nil); err != nil {
		t.Fatal(err)
	}
	if commits := txid(dst) - before; commits < 10 {
		t.Fatalf("%d commits; want many transactions of at most 16 KiB", commits)
	}
	var want, got string
	_ = src.View(func(tx *bolt.Tx) error { want = dumpBolt(tx); return nil })
	_ = dst.View(func(tx *bolt.Tx) error { got = dumpBolt(tx); return nil })
	if got != want {
		t.Fatalf("the copy differs from its source:\n%.2000s\nwant\n%.2000s", got, want)
	}
	_ = dst.View(func(tx *bolt.Tx) error {
		coll := tx.Bucket([]byte("coll"))
		fill := func(b *bolt.Bucket) float64 {
			st := b.Stats()
			return float64(st.LeafInuse) / float64(st.LeafAlloc)
		}
		if f := fill(coll.Bucket(bucketRecords)); f < 0.9 {
			t.Errorf("records pages %.2f full; want packed", f)
		}
		if f := fill(coll.Bucket(bucketIndexEntries).Bucket([]byte("n"))); f < 0.55 || f > 0.8 {
			t.Errorf("index pages %.2f full; want about indexFillPercent, %.2f", f, indexFillPercent)
		}
		return nil
	})

	// A done context stops the walk with its error, after some commits.
	out, err := bolt.Open(filepath.Join(dir, "cancelled.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ctx := &doneAfterN{Context: context.Background(), n: 2}
	if err := compactInto(out, src, 16<<10, newPace(ctx)); !errors.Is(err, context.Canceled) || ctx.calls != 3 {
		t.Errorf("compactInto with a context done after 2 checks = %v after %d checks", err, ctx.calls)
	}
	if err := out.Update(func(tx *bolt.Tx) error { return nil }); err != nil {
		t.Errorf("a write after the cancelled walk: %v", err)
	}
}

// dumpBolt renders every bucket (with its sequence), key and value of tx.
func dumpBolt(tx *bolt.Tx) string {
	var b strings.Builder
	var walk func(bk *bolt.Bucket, depth int)
	walk = func(bk *bolt.Bucket, depth int) {
		c := bk.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if v != nil {
				fmt.Fprintf(&b, "%*s%q=%q\n", depth, "", k, v)
				continue
			}
			child := bk.Bucket(k)
			fmt.Fprintf(&b, "%*s%q seq %d {\n", depth, "", k, child.Sequence())
			walk(child, depth+1)
			fmt.Fprintf(&b, "%*s}\n", depth, "")
		}
	}
	walk(tx.Cursor().Bucket(), 0)
	return b.String()
}
