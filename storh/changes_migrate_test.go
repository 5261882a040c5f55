package storh_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// A collection with a change feed, migrated from a file to PostgreSQL and
// back. The two backends keep a feed differently (a file in blocks of ids
// beside the values later writes overwrote, PostgreSQL a row each with its
// record): the copy reads on as it was until its first write, which takes
// the feed over for its backend. On PostgreSQL the feed then starts after
// the file's last change (a reader behind resyncs: ErrChangesTrimmed); on
// a file it goes on after PostgreSQL's greatest change, whose changes read
// on. Each write's change reads back with its record as committed.
func TestMigrateChangeFeed(t *testing.T) {
	fileOnly(t) // it runs on both backends itself
	dir := t.TempDir()
	first, back := filepath.Join(dir, "first.db"), filepath.Join(dir, "back.db")
	url := pgtest.URL(t)

	db := openAt(t, first)
	docs, err := db.Docs("fed", storh.WithChangeFeed(1000))
	if err != nil {
		t.Fatal(err)
	}
	var want []change
	var ids []uuidv7.UUID
	put := func(d *storh.Docs, id uuidv7.UUID, n int64) uuidv7.UUID {
		t.Helper()
		var r storh.Record
		if id.IsZero() {
			r, err = d.Put(storh.Map{"n": n})
		} else {
			r, err = d.PutWithID(id, storh.Map{"n": n})
		}
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, change{uint64(len(want) + 1), storh.OpPut, r.ID, n})
		return r.ID
	}
	batch := make([]any, 40)
	for i := range batch {
		batch[i] = storh.Map{"n": int64(i)}
	}
	recs, err := docs.PutMany(batch) // past the tail: a block
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		ids = append(ids, r.ID)
		want = append(want, change{uint64(i + 1), storh.OpPut, r.ID, int64(i)})
	}
	put(docs, ids[0], 100) // replaced: the first put's value is a before-image
	if err := docs.Delete(ids[1]); err != nil {
		t.Fatal(err)
	}
	want = append(want, change{uint64(len(want) + 1), storh.OpDelete, ids[1], -1})
	put(docs, uuidv7.UUID{}, 7) // in the tail
	sameChanges(t, readChanges(t, docs.Changes, 0, len(want)), want)
	db.Close()

	if _, err := storh.Migrate(context.Background(), first, url); err != nil {
		t.Fatalf("file to PostgreSQL: %v", err)
	}
	pg := openAt(t, url)
	docs, err = pg.Docs("fed")
	if err != nil {
		t.Fatal(err)
	}
	// Read on as the file had them, before any write.
	sameChanges(t, readChanges(t, docs.Changes, 0, len(want)), want)
	fileLast := uint64(len(want))
	if got, err := docs.LastSeq(); err != nil || got != fileLast {
		t.Fatalf("LastSeq on PostgreSQL before a write = %d, %v; want %d", got, err, fileLast)
	}
	put(docs, ids[2], 200)
	put(docs, uuidv7.UUID{}, 8)
	sameChanges(t, readChanges(t, docs.Changes, fileLast, 2), want[fileLast:])
	trimmed(t, docs, 0)
	pg.Close()
	verifyPath(t, url)

	if _, err := storh.Migrate(context.Background(), url, back); err != nil {
		t.Fatalf("PostgreSQL to file: %v", err)
	}
	db = openAt(t, back)
	docs, err = db.Docs("fed")
	if err != nil {
		t.Fatal(err)
	}
	pgLast := uint64(len(want))
	if got, err := docs.LastSeq(); err != nil || got != pgLast {
		t.Fatalf("LastSeq on the file before a write = %d, %v; want %d", got, err, pgLast)
	}
	sameChanges(t, readChanges(t, docs.Changes, fileLast, 2), want[fileLast:])
	put(docs, ids[3], 300)
	put(docs, ids[2], 301) // its PostgreSQL change holds its own copy
	if err := docs.Delete(ids[3]); err != nil {
		t.Fatal(err)
	}
	want = append(want, change{uint64(len(want) + 1), storh.OpDelete, ids[3], -1})
	sameChanges(t, readChanges(t, docs.Changes, fileLast, len(want)-int(fileLast)), want[fileLast:])
	if got, err := docs.LastSeq(); err != nil || got != uint64(len(want)) {
		t.Fatalf("LastSeq on the file after its writes = %d, %v; want %d", got, err, len(want))
	}
	trimmed(t, docs, fileLast-1)
	db.Close()
	verifyPath(t, back)
}

// trimmed checks that Changes after after is ErrChangesTrimmed.
func trimmed(t *testing.T, docs *storh.Docs, after uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, err := range docs.Changes(ctx, after) {
		if !errors.Is(err, storh.ErrChangesTrimmed) {
			t.Fatalf("Changes(%d): %v; want ErrChangesTrimmed", after, err)
		}
		return
	}
}

// A file's feed that PostgreSQL took over leaves none of the file's
// blocks behind: copied back to a file, a trim that reached one would
// find a change that stored a before-image, with the before-images gone,
// and fail every commit. On the file again, commits of inserts trim the
// feed past where PostgreSQL took it over, and the changes kept read.
func TestMigrateChangeFeedAndBack(t *testing.T) {
	fileOnly(t) // it runs on both backends itself
	dir := t.TempDir()
	first, back := filepath.Join(dir, "first.db"), filepath.Join(dir, "back.db")
	url := pgtest.URL(t)
	batch := make([]any, 40)
	for i := range batch {
		batch[i] = storh.Map{"n": int64(i)}
	}

	db := openAt(t, first)
	docs, err := db.Docs("fed", storh.WithChangeFeed(100))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := docs.PutMany(batch) // changes 1 to 40, a block
	if err != nil {
		t.Fatal(err)
	}
	// One commit of a replacement, which stores a before-image, and 40
	// inserts: a block with a change that stored one.
	err = db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("fed")
		if err != nil {
			return err
		}
		if _, err := d.PutWithID(recs[0].ID, storh.Map{"n": 100}); err != nil {
			return err
		}
		_, err = d.PutMany(batch)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	if _, err := storh.Migrate(context.Background(), first, url); err != nil {
		t.Fatal(err)
	}
	pg := openAt(t, url)
	docs, err = pg.Docs("fed")
	if err != nil {
		t.Fatal(err)
	}
	r, err := docs.Put(storh.Map{"n": 7}) // takes the feed over: change 82
	if err != nil {
		t.Fatal(err)
	}
	sameChanges(t, readChanges(t, docs.Changes, 81, 1), []change{{82, storh.OpPut, r.ID, 7}})
	trimmed(t, docs, 80)
	pg.Close()

	if _, err := storh.Migrate(context.Background(), url, back); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, back)
	docs, err = db.Docs("fed")
	if err != nil {
		t.Fatal(err)
	}
	for round := range 10 { // past keep and its slack: trims on every commit
		if _, err := docs.PutMany(batch); err != nil {
			t.Fatalf("PutMany %d on the file after PostgreSQL: %v", round, err)
		}
	}
	last, err := docs.LastSeq()
	if err != nil || last != 82+400 {
		t.Fatalf("LastSeq = %d, %v; want %d", last, err, 82+400)
	}
	trimmed(t, docs, 82)
	got := readChanges(t, docs.Changes, last-40, 40)
	for i, ev := range got {
		if ev.seq != last-39+uint64(i) || ev.op != storh.OpPut || ev.n != int64(i) {
			t.Fatalf("change %d read back as %+v", i, ev)
		}
	}
	db.Close()
	verifyPath(t, back)
}
