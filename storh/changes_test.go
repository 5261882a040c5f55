package storh_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// change is what a test expects of one ChangeEvent: its op, its id and
// the "n" of its record (-1 for a delete).
type change struct {
	seq uint64
	op  storh.ChangeOp
	id  uuidv7.UUID
	n   int64
}

func (c change) String() string { return fmt.Sprintf("%d:%s %s n=%d", c.seq, c.op, c.id, c.n) }

func asChange(t testing.TB, ev storh.ChangeEvent) change {
	t.Helper()
	c := change{seq: ev.Seq, op: ev.Op, id: ev.ID, n: -1}
	if ev.Op == storh.OpPut {
		if ev.Record.ID != ev.ID {
			t.Fatalf("change %d: record id %s, event id %s", ev.Seq, ev.Record.ID, ev.ID)
		}
		m, err := ev.Record.DataErr()
		if err != nil {
			t.Fatalf("change %d: %v", ev.Seq, err)
		}
		c.n, _ = m["n"].(int64)
	} else if !ev.Record.ID.IsZero() {
		t.Fatalf("change %d: a delete with a record %s", ev.Seq, ev.Record.ID)
	}
	return c
}

// readChanges reads what Changes yields after after until it has n
// changes, failing the test on an error or when they do not come.
func readChanges(t testing.TB, seq func(context.Context, uint64) iter.Seq2[storh.ChangeEvent, error], after uint64, n int) []change {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []change
	if n == 0 {
		return nil
	}
	for ev, err := range seq(ctx, after) {
		if err != nil {
			t.Fatalf("Changes(%d) after %d changes: %v", after, len(out), err)
		}
		out = append(out, asChange(t, ev))
		if len(out) == n {
			break
		}
	}
	return out
}

func sameChanges(t testing.TB, got, want []change) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("changes:\n got %v\nwant %v", got, want)
	}
}

// Every kind of write of a record lands in the feed, numbered from 1 in
// commit order, with the record as committed: puts, replacements, patches,
// deletes, DeleteMatching, writes inside Update, and a log's appends and
// DeleteBefore. A reopened database goes on from where it was.
func TestChangesEveryWrite(t *testing.T) {
	path := newPath(t)
	db := openAt(t, path)
	docs, err := db.Docs("d", storh.WithChangeFeed(100))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := idAt(t, 1000), idAt(t, 2000), idAt(t, 3000)
	var want []change
	put := func(id uuidv7.UUID, n int64) {
		t.Helper()
		if _, err := docs.PutWithID(id, map[string]any{"n": n}); err != nil {
			t.Fatal(err)
		}
		want = append(want, change{uint64(len(want) + 1), storh.OpPut, id, n})
	}
	put(a, 1)
	put(b, 2)
	put(a, 3) // a replacement
	if _, err := docs.Patch(b, storh.Inc("n", 10)); err != nil {
		t.Fatal(err)
	}
	want = append(want, change{4, storh.OpPut, b, 12})
	if err := docs.Delete(a); err != nil {
		t.Fatal(err)
	}
	want = append(want, change{5, storh.OpDelete, a, -1})
	if err := docs.Delete(a); err != nil { // not stored: no change
		t.Fatal(err)
	}
	err = db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("d")
		if err != nil {
			return err
		}
		if _, err := d.PutWithID(c, map[string]any{"n": int64(7)}); err != nil {
			return err
		}
		return d.Delete(b)
	})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, change{6, storh.OpPut, c, 7}, change{7, storh.OpDelete, b, -1})
	// A rolled-back transaction records nothing.
	rollback := errors.New("roll back")
	err = db.Update(func(tx *storh.Tx) error {
		d, _ := tx.Docs("d")
		if _, err := d.PutWithID(a, map[string]any{"n": int64(99)}); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	if n, err := docs.DeleteMatching(query.All()); err != nil || n != 1 {
		t.Fatalf("DeleteMatching: %d, %v", n, err)
	}
	want = append(want, change{8, storh.OpDelete, c, -1})
	sameChanges(t, readChanges(t, docs.Changes, 0, len(want)), want)
	sameChanges(t, readChanges(t, docs.Changes, 4, len(want)-4), want[4:])
	if last, err := docs.LastSeq(); err != nil || last != 8 {
		t.Fatalf("LastSeq: %d, %v", last, err)
	}

	logs, err := db.Log("l", storh.WithChangeFeed(100))
	if err != nil {
		t.Fatal(err)
	}
	old, young := idAt(t, 1000), uuidv7.New()
	for i, id := range []uuidv7.UUID{old, young} {
		if _, err := logs.PutWithID(id, map[string]any{"n": int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := logs.DeleteBefore(time.UnixMilli(5000)); err != nil || n != 1 {
		t.Fatalf("DeleteBefore: %d, %v", n, err)
	}
	sameChanges(t, readChanges(t, logs.Changes, 0, 3), []change{{1, storh.OpPut, old, 0}, {2, storh.OpPut, young, 1}, {3, storh.OpDelete, old, -1}})

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path)
	docs, err = db.Docs("d") // no option: the feed stays
	if err != nil {
		t.Fatal(err)
	}
	put(a, 4)
	sameChanges(t, readChanges(t, docs.Changes, 0, len(want)), want)
}

// A collection without a feed records nothing, and Changes says so; a
// handle opened WithChangeFeed turns it on from the next write, whose
// Seq is 1.
func TestChangesTurnedOn(t *testing.T) {
	db := openTemp(t)
	plain, err := db.Docs("d")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Put(map[string]any{"n": int64(1)}); err != nil {
		t.Fatal(err)
	}
	for _, err := range plain.Changes(context.Background(), 0) {
		checkErr(t, err, storh.ErrNotFound, "WithChangeFeed")
		break
	}
	if last, err := plain.LastSeq(); err != nil || last != 0 {
		t.Fatalf("LastSeq: %d, %v", last, err)
	}
	fed, err := db.Docs("d", storh.WithChangeFeed(10))
	if err != nil {
		t.Fatal(err)
	}
	r, err := plain.Put(map[string]any{"n": int64(2)}) // through the old handle: the feed is the collection's
	if err != nil {
		t.Fatal(err)
	}
	sameChanges(t, readChanges(t, fed.Changes, 0, 1), []change{{1, storh.OpPut, r.ID, 2}})
	if _, err := db.Queue("q", storh.WithChangeFeed(1)); !errors.Is(err, storh.ErrInvalidOption) {
		t.Fatalf("a queue WithChangeFeed: %v", err)
	}
	if _, err := db.Docs("d", storh.WithChangeFeed(-1)); !errors.Is(err, storh.ErrInvalidOption) {
		t.Fatalf("WithChangeFeed(-1): %v", err)
	}
}

// The feed keeps at least keep changes, trimming the oldest as commits
// come; a reader behind them gets ErrChangesTrimmed, one at the edge does
// not. A lower keep trims the excess over the next commits, a step each.
func TestChangesTrimmed(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("d", storh.WithChangeFeed(5))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := docs.Put(map[string]any{"n": int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got := readChanges(t, docs.Changes, 15, 5)
	if got[0].seq != 16 || got[4].seq != 20 {
		t.Fatalf("after 15: %v", got)
	}
	for _, after := range []uint64{0, 14} {
		for _, err := range docs.Changes(context.Background(), after) {
			checkErr(t, err, storh.ErrChangesTrimmed)
			break
		}
	}
}

// A feed that keeps 80 is trimmed only once it holds more than a slack of
// 10 beyond them: after 90 single puts every change is there; the 91st
// trims the 11 past keep at once. openTemp gives a file, or a schema on
// the PostgreSQL pass.
func TestChangesTrimSlack(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("d", storh.WithChangeFeed(80))
	if err != nil {
		t.Fatal(err)
	}
	put := func(n int) {
		t.Helper()
		for range n {
			if _, err := docs.Put(map[string]any{"n": 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	firstAfter := func(after uint64) (uint64, error) {
		t.Helper()
		for ev, err := range docs.Changes(context.Background(), after) {
			return ev.Seq, err
		}
		t.Fatal("Changes ended")
		return 0, nil
	}
	put(90)
	if seq, err := firstAfter(0); err != nil || seq != 1 {
		t.Fatalf("after 90 puts, keep 80: Changes(0) starts at %d, %v; want 1 (within the slack, nothing trimmed)", seq, err)
	}
	put(1)
	if _, err := firstAfter(10); !errors.Is(err, storh.ErrChangesTrimmed) {
		t.Fatalf("after 91 puts: Changes(10) = %v; want ErrChangesTrimmed", err)
	}
	if seq, err := firstAfter(11); err != nil || seq != 12 {
		t.Fatalf("after 91 puts: Changes(11) starts at %d, %v; want 12", seq, err)
	}
}

// A reader waiting for changes is woken by the commit of a write, and
// Changes ends with ctx's error when ctx ends.
func TestChangesWaitAndCancel(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("d", storh.WithChangeFeed(10))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan storh.ChangeEvent)
	done := make(chan error, 1)
	go func() {
		for ev, err := range docs.Changes(ctx, 0) {
			if err != nil {
				done <- err
				return
			}
			got <- ev
		}
		done <- nil
	}()
	for i := range 3 {
		r, err := docs.Put(map[string]any{"n": int64(i)})
		if err != nil {
			t.Fatal(err)
		}
		ev := <-got
		if ev.Seq != uint64(i+1) || ev.ID != r.ID {
			t.Fatalf("change %d: got %d %s, want %s", i, ev.Seq, ev.ID, r.ID)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
}

// WatchReady calls ready once the watch has subscribed: a record written
// after it is delivered, with no first write to wait for.
func TestWatchReady(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("d")
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan struct{})
		got := make(chan uuidv7.UUID, 1)
		go func() {
			for r, err := range docs.WatchReady(ctx, uuidv7.UUID{}, func() { close(ready) }) {
				if err != nil {
					close(got)
					return
				}
				got <- r.ID
				return
			}
		}()
		<-ready
		r, err := docs.Put(storh.Map{"n": 1})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case id, ok := <-got:
			if !ok || id != r.ID {
				t.Fatalf("the watch yielded %s (%v), want %s", id, ok, r.ID)
			}
		case <-time.After(30 * time.Second): // a hang guard, not a measure
			t.Fatal("the record written after ready never came")
		}
		cancel()
	}
}

// fileFormat reads a closed database file's format marker.
func fileFormat(t *testing.T, path string) uint64 {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var v uint64
	err = bdb.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("\x00storh"))
		if b == nil {
			return errors.New("no metadata bucket")
		}
		raw := b.Get([]byte("format"))
		if len(raw) != 8 {
			return fmt.Errorf("format marker %x", raw)
		}
		v = binary.BigEndian.Uint64(raw)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Turning a feed on raises the file's format marker to 8, which a build
// from before feeds refuses; a file without one keeps its format.
func TestChangesFormat(t *testing.T) {
	fileOnly(t)
	path := newPath(t)
	db := openAt(t, path)
	plain, err := db.Docs("plain")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Put(storh.Map{"a": 1}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before := fileFormat(t, path)
	if before >= 8 {
		t.Fatalf("a file without a feed is at format %d", before)
	}
	db = openAt(t, path)
	if _, err := db.Docs("fed", storh.WithChangeFeed(5)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// 10, not 8: the feed's settings are keys of the metadata, which a
	// build before blocks does not read: it would write without the feed.
	if got := fileFormat(t, path); got != 10 {
		t.Fatalf("with a feed the file is at format %d, want 10", got)
	}
}

// Changes on a transaction's handle is ErrNestedTx (it waits for
// commits), and a reader waiting when the database closes ends with
// ErrClosed.
func TestChangesEnds(t *testing.T) {
	db := openTemp(t)
	docs, err := db.Docs("d", storh.WithChangeFeed(10))
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *storh.Tx) error {
		d, err := tx.Docs("d")
		if err != nil {
			return err
		}
		for _, err := range d.Changes(context.Background(), 0) {
			return err
		}
		return nil
	})
	checkErr(t, err, storh.ErrNestedTx)

	r, err := docs.Put(storh.Map{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan storh.ChangeEvent, 1)
	done := make(chan error, 1)
	go func() {
		for ev, err := range docs.Changes(context.Background(), 0) {
			if err != nil {
				done <- err
				return
			}
			got <- ev
		}
		done <- nil
	}()
	if ev := <-got; ev.ID != r.ID {
		t.Fatalf("first change: %s, want %s", ev.ID, r.ID)
	}
	// The reader waits now (or is about to); Close ends it either way.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	checkErr(t, <-done, storh.ErrClosed)
}
