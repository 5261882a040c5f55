package storh_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
)

// TestRepairQuarantineIsAChange: a record Repair moves out of a
// collection with a feed is gone to every read, so the feed records its
// delete: a reader that follows the feed to rebuild the collection ends
// with what the collection holds.
func TestRepairQuarantineIsAChange(t *testing.T) {
	fileOnly(t) // the damage is written into the file's pages
	path := newPath(t)
	db := openAt(t, path)
	docs, err := db.Docs("fed", storh.WithChangeFeed(100))
	if err != nil {
		t.Fatal(err)
	}
	var recs []storh.Record
	for i := range 4 {
		r, err := docs.Put(storh.Map{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	damaged := recs[1].ID
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		r := tx.Bucket([]byte("fed")).Bucket([]byte("r"))
		v := append([]byte(nil), r.Get(damaged[:])...)
		v[len(v)-1] ^= 0xff // the checksum no longer matches
		return r.Put(damaged[:], v)
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}

	db = openAt(t, path)
	docs, err = db.Docs("fed")
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := db.Repair(nil); err != nil || rep.Quarantined != 1 {
		t.Fatalf("Repair = %+v, %v; want one record quarantined", rep, err)
	}
	got := readChanges(t, docs.Changes, 4, 1)
	if want := (change{seq: 5, op: storh.OpDelete, id: damaged, n: -1}); len(got) != 1 || got[0] != want {
		t.Fatalf("the feed after Repair: %v, want %v", got, want)
	}
	if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
		t.Errorf("Verify after Repair = %+v, %v", rep, err)
	}
	// The put of the damaged record reads as damaged, that change alone:
	// the reader goes on to the changes after it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var seqs []uint64
	for ev, err := range docs.Changes(ctx, 0) {
		switch {
		case ev.Seq == 2:
			if !errors.Is(err, storh.ErrCorrupt) || ev.ID != damaged || ev.Op != storh.OpPut {
				t.Fatalf("change 2, the damaged record's put: %+v, %v; want ErrCorrupt", ev, err)
			}
		case err != nil:
			t.Fatalf("change %d: %v", ev.Seq, err)
		case ev.Op == storh.OpPut && ev.Record.ID != recs[ev.Seq-1].ID:
			t.Fatalf("change %d put %s, want %s", ev.Seq, ev.Record.ID, recs[ev.Seq-1].ID)
		}
		if seqs = append(seqs, ev.Seq); len(seqs) == 5 {
			break
		}
	}
	if !slices.Equal(seqs, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("read back changes %v, want 1 to 5", seqs)
	}
}
