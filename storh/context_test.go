package storh_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
)

// afterChecks is a context that is done after it has been asked n times:
// a deterministic "cancelled mid-way", whatever the machine's speed.
type afterChecks struct {
	context.Context
	left atomic.Int32
}

func cancelAfter(n int) *afterChecks {
	c := &afterChecks{Context: context.Background()}
	c.left.Store(int32(n))
	return c
}

func (c *afterChecks) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestCancelledQueries: a query over many records that match nothing, a
// count by scan, an Explain and a PutStream each stop when their context is
// done, with an error wrapping context.Canceled, having done a bounded part
// of the work, and leave the database usable (no transaction open).
func TestCancelledQueries(t *testing.T) {
	db := openTemp(t, storh.WithoutSync())
	c, _ := db.Docs("c")
	items := make([]any, 20_000)
	for i := range items {
		items[i] = storh.Map{"n": i}
	}
	if _, err := c.PutMany(items); err != nil {
		t.Fatal(err)
	}
	none := query.All().Where(query.Field("n").Eq("never"))
	check := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s = %v; want an error wrapping context.Canceled", name, err)
		}
	}
	var streamErr error
	seen := 0
	for _, err := range c.StreamContext(cancelAfter(2), none) {
		seen++
		streamErr = err
	}
	check("StreamContext", streamErr)
	if seen != 1 {
		t.Errorf("StreamContext yielded %d times; want the one error", seen)
	}
	_, err := c.FindContext(cancelAfter(1), none)
	check("FindContext", err)
	_, err = c.FirstContext(cancelAfter(1), none)
	check("FirstContext", err)
	_, err = c.CountMatchingContext(cancelAfter(2), none)
	check("CountMatchingContext", err)
	_, err = c.ExplainContext(cancelAfter(2), none)
	check("ExplainContext", err)

	// PutStream keeps the batches it committed and drops the rest.
	n, err := c.PutStreamContext(cancelAfter(storh.StreamBatch+10), func(yield func(any) bool) {
		for i := range 3 * storh.StreamBatch {
			if !yield(storh.Map{"more": i}) {
				return
			}
		}
	})
	check("PutStreamContext", err)
	if n != storh.StreamBatch {
		t.Errorf("PutStreamContext committed %d; want one batch, %d", n, storh.StreamBatch)
	}
	if got := mustCount(t, c); got != len(items)+n {
		t.Errorf("Count = %d; want %d", got, len(items)+n)
	}
	// Nothing was left open: a write and a Close go through.
	if _, err := c.Put(storh.Map{"after": true}); err != nil {
		t.Fatal(err)
	}
	// A live context changes nothing.
	got, err := c.CountMatchingContext(context.Background(), query.All().Where(query.Field("n").Lt(10)))
	if err != nil || got != 10 {
		t.Errorf("CountMatchingContext with a live context = %d, %v", got, err)
	}
}

// TestCollectionsAndWithoutCreate: Collections lists what exists; a handle
// opened WithoutCreate on a missing collection is ErrNotFound, on an existing
// one it works; the Collection interface serves either kind.
func TestCollectionsAndWithoutCreate(t *testing.T) {
	db := openTemp(t)
	docs, _ := db.Docs("docs")
	log, _ := db.Log("log")
	if _, err := db.Docs("opened-only"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []storh.Collection{docs, log} {
		if _, err := c.Put(storh.Map{"kind": c.Kind()}); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := db.Collections()
	if err != nil || len(infos) != 2 || infos[0].Name != "docs" || infos[0].Kind != "docs" || infos[1].Kind != "log" ||
		infos[0].Records != 1 || infos[0].FirstTime().IsZero() {
		t.Fatalf("Collections = %+v, %v; want docs and log, one record each", infos, err)
	}
	_, err = db.Docs("missing", storh.WithoutCreate())
	checkErr(t, err, storh.ErrNotFound, `"missing"`)
	_, err = db.Docs("opened-only", storh.WithoutCreate())
	checkErr(t, err, storh.ErrNotFound, `"opened-only"`)
	if d, err := db.Docs("docs", storh.WithoutCreate()); err != nil || mustCount(t, d) != 1 {
		t.Errorf("WithoutCreate on an existing collection = %v", err)
	}
	err = db.Update(func(tx *storh.Tx) error {
		_, err := tx.Log("missing", storh.WithoutCreate())
		return err
	})
	checkErr(t, err, storh.ErrNotFound, `"missing"`)
}
