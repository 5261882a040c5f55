package engine

import (
	"testing"

	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// announceTx is a shared store's write transaction that only counts the
// notices a put announces.
type announceTx struct {
	kv.SharedTx
	notices int
}

func (a *announceTx) Writable() bool                    { return true }
func (a *announceTx) Announce(topic string, key []byte) { a.notices++ }

// discardBucket is a records bucket that holds nothing and keeps no write.
type discardBucket struct{ bucket }

// bucket names kv.Bucket as a field that does not hide its method Bucket.
type bucket = kv.Bucket

func (discardBucket) Get([]byte) []byte     { return nil }
func (discardBucket) Put(_, _ []byte) error { return nil }
func (discardBucket) Delete(_ []byte) error { return nil }
func (discardBucket) Writable() bool        { return true }

// TestPutBookkeepingAllocatesNothing: a put's own bookkeeping, around the
// store's write, allocates nothing. The checksum it seals and the notice
// it announces to other processes take the record's id as bytes; slicing
// the id parameter for them moved it to the heap, two allocations per
// record written.
func TestPutBookkeepingAllocatesNothing(t *testing.T) {
	id := uuidv7.New()
	value, err := AppendValue(nil, map[string]any{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	shared := &announceTx{}
	tx := &Tx{ktx: shared, shared: shared}
	c := &Coll{Name: "c", records: discardBucket{}, lastKnown: true, empty: true, idxLoaded: true, schemaRead: true, feed: feedState{read: true}}
	allocs := testing.AllocsPerRun(100, func() {
		if err := tx.Put(c, id, value, false); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Put: %v allocations, want 0", allocs)
	}
	if shared.notices == 0 {
		t.Fatal("Put announced nothing")
	}
	if _, err := Payload(id[:], value); err != nil {
		t.Fatalf("the sealed value does not check against its id: %v", err)
	}
}

// BenchmarkPutBookkeeping: what a put costs around the store's write (the
// checksum, the notice, the counters), on a bucket that keeps nothing.
func BenchmarkPutBookkeeping(b *testing.B) {
	id := uuidv7.New()
	value, err := AppendValue(nil, map[string]any{"user": "u", "score": 1, "note": "a small record of a few fields"})
	if err != nil {
		b.Fatal(err)
	}
	shared := &announceTx{}
	tx := &Tx{ktx: shared, shared: shared}
	c := &Coll{Name: "c", records: discardBucket{}, lastKnown: true, empty: true, idxLoaded: true, schemaRead: true, feed: feedState{read: true}}
	b.ReportAllocs()
	for b.Loop() {
		if err := tx.Put(c, id, value, false); err != nil {
			b.Fatal(err)
		}
	}
}
