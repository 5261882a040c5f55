package storh_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// fillDocs writes n records {"i": i, "pad": …} with ascending ids and
// returns the ids.
func fillDocs(t testing.TB, docs *storh.Docs, n int) []uuidv7.UUID {
	t.Helper()
	items := make([]any, n)
	for i := range items {
		items[i] = storh.Map{"i": i, "pad": fmt.Sprintf("%0*d", 20+i%50, i)}
	}
	recs, err := docs.PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uuidv7.UUID, n)
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// TestGetAfterDropAndRecreate: a point read through a handle opened before
// its collection was dropped takes the checked path, so it never reads
// the records of a collection made again under the same name.
func TestGetAfterDropAndRecreate(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("c")
	if err != nil {
		t.Fatal(err)
	}
	r, err := docs.Put(storh.Map{"x": 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Drop("c"); err != nil {
		t.Fatal(err)
	}
	log, err := db.Log("c")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.PutWithID(r.ID, storh.Map{"x": 2}); err != nil {
		t.Fatal(err)
	}
	_, err = docs.Get(r.ID)
	if !errors.Is(err, storh.ErrWrongKind) && !errors.Is(err, storh.ErrNotFound) {
		t.Fatalf("Get through the handle of the dropped docs collection = %v; want ErrWrongKind or ErrNotFound", err)
	}
	got, err := log.Get(r.ID)
	if err != nil || got.Data()["x"] != int64(2) {
		t.Fatalf("Get through the new handle = %v, %v; want x=2", got.Data(), err)
	}
}

// TestGetOwnsItsBytes: a record from Get keeps its bytes after later reads
// and writes reuse whatever memory the read went through.
func TestGetOwnsItsBytes(t *testing.T) {
	db := openTemp(t)
	docs, _ := db.Docs("c")
	ids := fillDocs(t, docs, 50)
	first, err := docs.Get(ids[0])
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(first.Raw())
	for i := range 200 {
		if _, err := docs.PutWithID(ids[i%50], storh.Map{"i": -i}); err != nil {
			t.Fatal(err)
		}
		if _, err := docs.Get(ids[(i+1)%50]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(first.Raw(), want) {
		t.Fatal("a record's bytes changed after later reads and writes")
	}
}

// TestGetAllocations: a point read allocates what bbolt's read transaction
// and its two bucket look-ups need, plus the record's one copy (13 on a
// two-level tree). The bound catches a return to the full collection open
// (27).
func TestGetAllocations(t *testing.T) {
	fileOnly(t)
	db := openTemp(t)
	docs, _ := db.Docs("c")
	ids := fillDocs(t, docs, 2000)
	i := 0
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := docs.Get(ids[i%len(ids)]); err != nil {
			t.Fatal(err)
		}
		i += 37
	})
	// bbolt's read transaction allocates 5 times, the record's copy once.
	if allocs > 6 {
		t.Errorf("Get allocates %.1f times; want at most 6", allocs)
	}
}

// TestStreamPageAllocations: a page of 100 records after an id, records
// owning their bytes, allocates a fixed handful of times whatever its
// records: the read transaction, the query's plan and run, the page
// cursor, the chunk's slab and one arena for every payload. The bound
// catches a return to opening the collection per chunk (28 before pages
// were walked from the mapping) or to an allocation per record.
func TestStreamPageAllocations(t *testing.T) {
	fileOnly(t)
	db := openTemp(t)
	docs, _ := db.Docs("c")
	ids := fillDocs(t, docs, 2000)
	q := query.All().After(ids[1000]).Limit(100)
	allocs := testing.AllocsPerRun(100, func() {
		n := 0
		for r, err := range docs.Stream(q) {
			if err != nil || len(r.Raw()) == 0 {
				t.Fatalf("Stream: %v", err)
			}
			n++
		}
		if n != 100 {
			t.Fatalf("Stream: %d records, want 100", n)
		}
	})
	if allocs > 12 {
		t.Errorf("a page of 100 allocates %.1f times; want at most 12", allocs)
	}
}

// TestGetRaw: GetRaw lends what Get returns; fn's error comes back as it
// is; Get's errors are GetRaw's; inside a transaction it reads the
// transaction's snapshot.
func TestGetRaw(t *testing.T) {
	db := openTemp(t)
	docs, _ := db.Docs("c")
	ids := fillDocs(t, docs, 300)
	for _, id := range ids[:50] {
		rec, err := docs.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		if err := docs.GetRaw(id, func(raw []byte) error {
			calls++
			if !bytes.Equal(raw, rec.Raw()) {
				t.Errorf("GetRaw(%s) lent %x; Get has %x", id, raw, rec.Raw())
			}
			return nil
		}); err != nil || calls != 1 {
			t.Fatalf("GetRaw(%s) = %v after %d calls", id, err, calls)
		}
	}
	stop := errors.New("stop")
	if err := docs.GetRaw(ids[0], func([]byte) error { return stop }); err != stop {
		t.Errorf("GetRaw with a failing fn = %v; want fn's error as it is", err)
	}
	never := func([]byte) error { t.Error("fn called for a record that is not there"); return nil }
	checkErr(t, docs.GetRaw(uuidv7.New(), never), storh.ErrNotFound)
	checkErr(t, docs.GetRaw(badVariantID(t), never), storh.ErrInvalidID)
	err := db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("c")
		if err != nil {
			return err
		}
		if _, err := d.PutWithID(ids[1], storh.Map{"i": "changed"}); err != nil {
			return err
		}
		return d.GetRaw(ids[1], func(raw []byte) error {
			if !bytes.Contains(raw, []byte("changed")) {
				t.Errorf("GetRaw inside Update does not see the transaction's write: %x", raw)
			}
			return stop
		})
	})
	if err != stop {
		t.Errorf("Update returning GetRaw's fn error = %v; want it as it is", err)
	}
}

// TestGetRawAllocations: a lent point read allocates only what bbolt's
// read transaction does: the buckets on the way are not opened.
func TestGetRawAllocations(t *testing.T) {
	fileOnly(t)
	db := openTemp(t)
	docs, _ := db.Docs("c")
	ids := fillDocs(t, docs, 2000)
	i := 0
	fn := func(raw []byte) error { i += len(raw) & 1; return nil }
	allocs := testing.AllocsPerRun(200, func() {
		if err := docs.GetRaw(ids[(i*37)%len(ids)], fn); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs > 5 {
		t.Errorf("GetRaw allocates %.1f times; want at most 5 (bbolt's read transaction)", allocs)
	}
}

// TestScanRaw: ScanRaw yields what Stream yields, in the same order and
// with the same bytes, across many chunks and in every direction; lent
// bytes are whole during the call; fn's error comes back as it is; a
// cancelled context stops it.
func TestScanRaw(t *testing.T) {
	db := openTemp(t)
	docs, _ := db.Docs("c")
	ids := fillDocs(t, docs, 1500) // six chunks
	for _, q := range []query.Query{
		query.All(),
		query.All().Reverse(),
		query.All().After(ids[100]).Limit(700),
		query.All().Before(ids[1400]).Reverse().Limit(300),
		query.All().Where(query.Field("i").Gte(1000)),
		query.All().Where(query.Field("i").Lt(20)).OrderBy("i", query.Desc),
		query.All().Limit(1),
	} {
		t.Run(q.String(), func(t *testing.T) {
			want := collect(t, docs.Stream(q))
			type lent struct {
				id  uuidv7.UUID
				raw []byte
			}
			var got []lent
			err := docs.ScanRaw(q, func(id uuidv7.UUID, raw []byte) error {
				got = append(got, lent{id, bytes.Clone(raw)})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("ScanRaw yielded %d records, Stream %d", len(got), len(want))
			}
			for i := range want {
				if got[i].id != want[i].ID || !bytes.Equal(got[i].raw, want[i].Raw()) {
					t.Fatalf("record %d: ScanRaw %s %x, Stream %s %x", i, got[i].id, got[i].raw, want[i].ID, want[i].Raw())
				}
			}
		})
	}

	stop := errors.New("enough")
	n := 0
	err := docs.ScanRaw(query.All(), func(uuidv7.UUID, []byte) error {
		if n++; n == 300 {
			return stop
		}
		return nil
	})
	if err != stop || n != 300 {
		t.Errorf("ScanRaw with fn failing at 300 = %v after %d calls; want fn's own error after 300", err, n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	n = 0
	err = docs.ScanRawContext(ctx, query.All(), func(uuidv7.UUID, []byte) error {
		if n++; n == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 10 {
		t.Errorf("ScanRawContext cancelled at 10 = %v after %d calls; want context.Canceled after 10", err, n)
	}

	err = docs.ScanRaw(query.All().Limit(0), func(uuidv7.UUID, []byte) error { return nil })
	if !errors.Is(err, storh.ErrInvalidQuery) {
		t.Errorf("ScanRaw of a bad query = %v; want ErrInvalidQuery", err)
	}
}

// TestScanRawMemoryIsFlat: ScanRaw reuses its chunk buffer, so its
// allocations do not grow with the records it lends: well under one per
// record.
func TestScanRawMemoryIsFlat(t *testing.T) {
	fileOnly(t)
	db := openTemp(t)
	docs, _ := db.Docs("c")
	fillDocs(t, docs, 5000)
	allocs := testing.AllocsPerRun(3, func() {
		n := 0
		if err := docs.ScanRaw(query.All(), func(uuidv7.UUID, []byte) error { n++; return nil }); err != nil || n != 5000 {
			t.Fatalf("ScanRaw: %d records, %v", n, err)
		}
	})
	if per := allocs / 5000; per > 0.2 {
		t.Errorf("ScanRaw allocates %.3f times per record; want at most 0.2", per)
	}
}
