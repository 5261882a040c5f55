package storh_test

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
)

// BenchmarkGetWhileCallbackOpen: the cost of the nested-transaction guard.
// A DB-level call checks whether its goroutine is inside an Update or View
// callback only while some callback is open; this measures a Get with none
// open and with a long View open on another goroutine.
func BenchmarkGetWhileCallbackOpen(b *testing.B) {
	db := openTemp(b, storh.WithoutSync())
	docs, _ := db.Docs("d")
	r, err := docs.Put(storh.Map{"name": "x", "n": 1})
	if err != nil {
		b.Fatal(err)
	}
	get := func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := docs.Get(r.ID); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("callbacks=0", get)
	b.Run("callbacks=1", func(b *testing.B) {
		entered, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
		go func() {
			done <- db.View(func(*storh.Tx) error {
				close(entered)
				<-release
				return nil
			})
		}()
		<-entered
		get(b)
		close(release)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	})
}

// writeBenchRecord is a record of ten fields, about 170 bytes encoded: the
// shape issue 29's comparisons with pgx use.
func writeBenchRecord(i int) storh.Map {
	return storh.Map{
		"user": fmt.Sprintf("user-%06d", i), "email": fmt.Sprintf("user%06d@example.com", i),
		"age": 20 + i%50, "score": float64(i) * 1.5, "active": i%2 == 0,
		"city": "Amsterdam", "country": "NL", "tags": []any{"alpha", "beta"},
		"created": time.UnixMilli(1_750_000_000_000 + int64(i)).UTC(), "note": "a small record of ten fields",
	}
}

// BenchmarkWrite: the client's cost of writing records, on the backend
// STORH_TEST_BACKEND names (a file without fsync by default, so that the
// work of the process shows): PutMany of 100 records, and a single Put.
func BenchmarkWrite(b *testing.B) {
	db := openTemp(b, storh.WithoutSync())
	docs, err := db.Docs("w")
	if err != nil {
		b.Fatal(err)
	}
	items := make([]any, 100)
	for i := range items {
		items[i] = writeBenchRecord(i)
	}
	b.Run("op=putmany100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := docs.PutMany(items); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=put", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := docs.Put(items[7]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPutManyAllocatesWhatItEncodes: a PutMany of a few small records
// allocates in proportion to them, not a block sized for thousands (it
// took a 256 KiB arena per call, for the collector to clear and sweep).
// The bound leaves the store's own allocations room: a PutMany of ten
// records of 170 bytes costs about 25 KiB on a file.
func TestPutManyAllocatesWhatItEncodes(t *testing.T) {
	db := openTemp(t, storh.WithoutSync())
	docs, err := db.Docs("w")
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 10)
	for i := range items {
		items[i] = writeBenchRecord(i)
	}
	perCall := putManyAllocs(t, docs, items, 50)
	t.Logf("%d bytes a call", perCall)
	if perCall > 128<<10 {
		t.Errorf("PutMany of %d records allocated %d bytes a call, want at most %d", len(items), perCall, 128<<10)
	}
}

// A batch of large records holds its bytes about once: the encoding
// buffer is copied out whenever it fills, not grown by copying the whole
// batch again and again and then copied once more.
func TestPutManyOfLargeRecordsAllocatesAboutItsSize(t *testing.T) {
	if onPostgres {
		// There pgx builds each statement's parameters in a buffer of
		// its own that grows by copying, several times the batch.
		t.Skip("measures the batch over a file")
	}
	db := openTemp(t, storh.WithoutSync())
	docs, err := db.Docs("big")
	if err != nil {
		t.Fatal(err)
	}
	const records, size = 64, 64 << 10 // 4 MiB a call
	items := make([]any, records)
	for i := range items {
		items[i] = storh.Map{"n": i, "blob": bytes.Repeat([]byte{byte(i)}, size)}
	}
	perCall := putManyAllocs(t, docs, items, 5)
	t.Logf("%d bytes a call for %d bytes of records", perCall, records*size)
	// The values (once) and bbolt's dirty pages (once), with room for the
	// rest; a buffer grown to the batch's size allocates several times it.
	if limit := uint64(3 * records * size); perCall > limit {
		t.Errorf("PutMany of %d records of %d KiB allocated %d bytes a call, want at most %d", records, size>>10, perCall, limit)
	}
}

// putManyAllocs is the bytes the process allocated per PutMany of items,
// over calls of them.
func putManyAllocs(t *testing.T, docs *storh.Docs, items []any, calls uint64) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		if _, err := docs.PutMany(items); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / calls
}
