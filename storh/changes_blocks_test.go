package storh_test

import (
	"encoding/binary"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The file's feed stores a commit's changes as one block of ids and keeps
// the values later writes overwrite beside it (the before-images, bucket
// "b" of the collection). These tests look at that layout through bbolt.

// feedLayout reads, in a closed file, collection name's feed: how many
// entries its bucket holds, how many before-images, the oldest change it
// holds (in a block or in the tail), and the smallest seq a before-image
// is kept under (0: none).
func feedLayout(t *testing.T, path, name string) (entries, befores int, oldest, oldestBefore uint64) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.View(func(tx *bolt.Tx) error {
		root := tx.Bucket([]byte(name))
		f := root.Bucket([]byte("f"))
		entries = f.Stats().KeyN
		if k, _ := f.Cursor().First(); k != nil {
			oldest = binary.BigEndian.Uint64(k)
		} else if tail := root.Bucket([]byte("m")).Get([]byte("feedTail")); tail != nil {
			oldest = binary.BigEndian.Uint64(tail)
		}
		if b := root.Bucket([]byte("b")); b != nil {
			befores = b.Stats().KeyN
			c := b.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if s := binary.BigEndian.Uint64(k[16:]); oldestBefore == 0 || s < oldestBefore {
					oldestBefore = s
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries, befores, oldest, oldestBefore
}

// A commit's changes join the feed's tail, in blocks of 32 and up once
// it holds 32, and inserts store no before-image;
// replacements and deletes store one each, and the trim takes them with
// their blocks: a feed that keeps k holds no more before-images than the
// changes it keeps. A put read back after its record was replaced, then
// deleted, is the record as that put committed it.
func TestChangesBlocks(t *testing.T) {
	fileOnly(t)
	path := newPath(t)
	db := openAt(t, path)
	docs, err := db.Docs("d", storh.WithChangeFeed(40))
	if err != nil {
		t.Fatal(err)
	}
	var ids []uuidv7.UUID
	batch := make([]any, 30)
	for i := range batch {
		batch[i] = storh.Map{"n": i}
	}
	recs, err := docs.PutMany(batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	db.Close()
	if e, b, _, _ := feedLayout(t, path, "d"); e != 0 || b != 0 {
		t.Fatalf("after a PutMany of 30 inserts: %d feed entries, %d before-images; want 0, 0 (the changes are the tail's)", e, b)
	}
	if got := fileFormat(t, path); got != 10 {
		t.Fatalf("a file whose feed stores blocks is at format %d, want 10", got)
	}

	db = openAt(t, path)
	if docs, err = db.Docs("d"); err != nil {
		t.Fatal(err)
	}
	// Replace the first record twice, in one transaction and then in
	// another, and delete it.
	err = db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("d")
		if err != nil {
			return err
		}
		if _, err := d.PutWithID(ids[0], storh.Map{"n": 100}); err != nil {
			return err
		}
		_, err = d.PutWithID(ids[0], storh.Map{"n": 101})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := docs.Delete(ids[0]); err != nil {
		t.Fatal(err)
	}
	want := []change{{1, storh.OpPut, ids[0], 0}, {2, storh.OpPut, ids[1], 1}}
	sameChanges(t, readChanges(t, docs.Changes, 0, 2), want)
	sameChanges(t, readChanges(t, docs.Changes, 30, 3), []change{
		{31, storh.OpPut, ids[0], 100}, {32, storh.OpPut, ids[0], 101}, {33, storh.OpDelete, ids[0], -1},
	})
	db.Close()
	// The replaces took the tail to 32: a block, 1 to 32; the delete is
	// the tail's.
	if e, b, _, _ := feedLayout(t, path, "d"); e != 1 || b != 3 {
		t.Fatalf("after 3 more commits (2 replaces, a delete): %d feed entries, %d before-images; want 1, 3", e, b)
	}

	// Every id replaced, a commit each, 8 times: blocks of 32 and a tail.
	// The feed trims to 150 plus its slack (18) in steps, a block whole
	// with the before-images its changes kept, and past the bound inside
	// the block it keeps.
	db = openAt(t, path)
	if docs, err = db.Docs("d", storh.WithChangeFeed(150)); err != nil {
		t.Fatal(err)
	}
	for round := range 8 {
		for i, id := range ids[1:] {
			if _, err := docs.PutWithID(id, storh.Map{"n": 1000*(round+1) + i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	last, err := docs.LastSeq()
	if err != nil || last != 33+8*29 {
		t.Fatalf("LastSeq = %d, %v; want %d", last, err, 33+8*29)
	}
	got := readChanges(t, docs.Changes, last-150, 150)
	for i, c := range got {
		round, k := (int(c.seq)-34)/29, (int(c.seq)-34)%29
		if w := (change{c.seq, storh.OpPut, ids[1+k], int64(1000*(round+1) + k)}); c != w {
			t.Fatalf("change %d of the last 150: %v, want %v", i, c, w)
		}
	}
	trimmed(t, docs, last-150-18-1)
	db.Close()
	_, befores, oldest, oldestBefore := feedLayout(t, path, "d")
	if oldest > last-150+1 || last-oldest+1 > 150+18+32+66 {
		t.Fatalf("the feed holds the changes from %d to %d; want the last 150 at least, and no more than keep, slack, a block and a step", oldest, last)
	}
	if oldestBefore < oldest || uint64(befores) > last-oldest+1 {
		t.Fatalf("%d before-images from change %d are kept for the changes from %d", befores, oldestBefore, oldest)
	}
}

// A file whose feed was written by a storh from before blocks (a change
// each, with a copy of its record) reads on: its changes first, then the
// blocks this build adds, and the trim removes both.
func TestChangesBlocksAfterOldFeed(t *testing.T) {
	fileOnly(t)
	path := newPath(t)
	db := openAt(t, path)
	docs, err := db.Docs("d", storh.WithChangeFeed(6))
	if err != nil {
		t.Fatal(err)
	}
	var ids []uuidv7.UUID
	for i := range 3 {
		r, err := docs.Put(storh.Map{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	db.Close()
	// Rewrite the feed as the build before wrote it: key seq, value
	// op ‖ id ‖ the record's stored value, and the format it had.
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket([]byte("d"))
		if err := root.DeleteBucket([]byte("f")); err != nil {
			return err
		}
		f, err := root.CreateBucket([]byte("f"))
		if err != nil {
			return err
		}
		for i, id := range ids {
			var k [8]byte
			binary.BigEndian.PutUint64(k[:], uint64(i+1))
			v := append(append([]byte{1}, id[:]...), root.Bucket([]byte("r")).Get(id[:])...)
			if err := f.Put(k[:], v); err != nil {
				return err
			}
		}
		if err := root.Bucket([]byte("m")).Delete([]byte("feedTail")); err != nil {
			return err
		}
		var format [8]byte
		binary.BigEndian.PutUint64(format[:], 8)
		return tx.Bucket([]byte("\x00storh")).Put([]byte("format"), format[:])
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}

	db = openAt(t, path)
	if docs, err = db.Docs("d"); err != nil {
		t.Fatal(err)
	}
	// The old changes hold their records: a replacement after them
	// stores its before-image, which they do not need.
	if _, err := docs.PutWithID(ids[0], storh.Map{"n": 10}); err != nil {
		t.Fatal(err)
	}
	if err := docs.Delete(ids[1]); err != nil {
		t.Fatal(err)
	}
	sameChanges(t, readChanges(t, docs.Changes, 0, 5), []change{
		{1, storh.OpPut, ids[0], 0}, {2, storh.OpPut, ids[1], 1}, {3, storh.OpPut, ids[2], 2},
		{4, storh.OpPut, ids[0], 10}, {5, storh.OpDelete, ids[1], -1},
	})
	sameChanges(t, readChanges(t, docs.Changes, 2, 2), []change{{3, storh.OpPut, ids[2], 2}, {4, storh.OpPut, ids[0], 10}})
	for i := range 8 { // past keep and its slack: the old changes are trimmed
		if _, err := docs.PutWithID(ids[2], storh.Map{"n": 20 + i}); err != nil {
			t.Fatal(err)
		}
	}
	trimmed(t, docs, 0)
	sameChanges(t, readChanges(t, docs.Changes, 12, 1), []change{{13, storh.OpPut, ids[2], 27}})
	db.Close()
	if got := fileFormat(t, path); got != 10 {
		t.Fatalf("after this build wrote the feed the file is at format %d, want 10", got)
	}
}

// A handle that sets another keep inside an Update, after a write of that
// Update, changes the feed's settings only: the changes the transaction
// numbered already are recorded, each once, and a replacement's
// before-image stays under its own change, so every put reads back its
// own value.
func TestChangesKeepSetMidUpdate(t *testing.T) {
	for _, keep := range []int{50, 100, 200} { // lowered, the same, raised
		db := openTemp(t)
		docs, err := db.Docs("d", storh.WithChangeFeed(100))
		if err != nil {
			t.Fatal(err)
		}
		x, y := idAt(t, 1000), idAt(t, 2000)
		if _, err := docs.PutWithID(x, storh.Map{"n": 1}); err != nil { // change 1
			t.Fatal(err)
		}
		err = db.Update(func(tx *storh.Tx) error {
			d, err := tx.Docs("d")
			if err != nil {
				return err
			}
			if _, err := d.PutWithID(x, storh.Map{"n": 2}); err != nil { // change 2
				return err
			}
			d2, err := tx.Docs("d", storh.WithChangeFeed(keep))
			if err != nil {
				return err
			}
			if _, err := d2.PutWithID(x, storh.Map{"n": 3}); err != nil { // change 3
				return err
			}
			_, err = d2.PutWithID(y, storh.Map{"n": 4}) // change 4
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if last, err := docs.LastSeq(); err != nil || last != 4 {
			t.Fatalf("keep %d: LastSeq = %d, %v; want 4", keep, last, err)
		}
		sameChanges(t, readChanges(t, docs.Changes, 0, 4), []change{
			{1, storh.OpPut, x, 1}, {2, storh.OpPut, x, 2}, {3, storh.OpPut, x, 3}, {4, storh.OpPut, y, 4},
		})
	}
}

// A reader of many commits of many changes reads a block whole, past the
// changes one read asks for (256), and goes on reading without waiting
// for a commit: every change once, in order, each put with its record.
func TestChangesReadPastChunks(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("d", storh.WithChangeFeed(20_000))
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 1000)
	for i := range items {
		items[i] = storh.Map{"n": int64(i)}
	}
	var want []change
	for range 3 {
		recs, err := docs.PutMany(items)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			want = append(want, change{uint64(len(want) + 1), storh.OpPut, r.ID, int64(i)})
		}
	}
	sameChanges(t, readChanges(t, docs.Changes, 0, len(want)), want)
}
