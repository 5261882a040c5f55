package storh_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// askedCtx is a context whose Err reports context.Canceled from its
// (limit+1)th call on (never, with a negative limit), and counts the calls:
// a deterministic "cancelled mid-way" that also shows how many times an
// operation asked, and that it stopped asking once told.
type askedCtx struct {
	context.Context
	limit int64
	calls atomic.Int64
}

func doneAfter(n int) *askedCtx { return &askedCtx{Context: context.Background(), limit: int64(n)} }

func neverDone() *askedCtx { return &askedCtx{Context: context.Background(), limit: -1} }

func (c *askedCtx) Err() error {
	if n := c.calls.Add(1); c.limit >= 0 && n > c.limit {
		return context.Canceled
	}
	return nil
}

// checkCancelled asserts that err is the *storh.Error of op wrapping
// context.Canceled and mentioning each of mention, and that the operation
// stopped asking ctx once it was told (promptly: no more work, no more
// checks).
func checkCancelled(t *testing.T, name string, ctx *askedCtx, err error, op string, mention ...string) {
	t.Helper()
	var se *storh.Error
	switch {
	case !errors.Is(err, context.Canceled):
		t.Errorf("%s = %v; want an error wrapping context.Canceled", name, err)
		return
	case !errors.As(err, &se) || se.Op != op:
		t.Errorf("%s = %#v; want a *storh.Error of op %q", name, err, op)
	}
	for _, m := range mention {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("%s = %q; want it to mention %q", name, err, m)
		}
	}
	if got := ctx.calls.Load(); got != ctx.limit+1 {
		t.Errorf("%s asked its context %d times; want %d (it must stop at the first done answer)", name, got, ctx.limit+1)
	}
}

// settled waits for the number of goroutines to come back to at most
// before, and fails naming the goroutines left over (bbolt's page check
// among them, if Verify left it blocked).
func settled(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("%d goroutines, %d before: leaked\n%s", runtime.NumGoroutine(), before, buf)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	if s := string(buf[:runtime.Stack(buf, true)]); strings.Contains(s, "bbolt.(*Tx).check") {
		t.Errorf("bbolt's page check is still running:\n%s", s)
	}
}

// returnsIn fails the test when fn does not return in time: a transaction
// left open would block a write or Close forever.
func returnsIn(t *testing.T, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s after a cancelled operation: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		deadlocked.Store(true)
		t.Fatalf("%s after a cancelled operation did not return: a transaction was left open", what)
	}
}

// maintenanceFixture writes three collections (one with an index) of a
// few thousand small records each, enough for every walk to check its
// context several times, and closes the database. It returns the path and
// the ids of "a".
func maintenanceFixture(t *testing.T) (string, []uuidv7.UUID) {
	t.Helper()
	path := newPath(t)
	db, err := storh.Open(path, storh.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	a, err := db.Docs("a", storh.WithIndex(storh.Index("n")))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := db.Docs("b")
	l, _ := db.Log("l")
	var ids []uuidv7.UUID
	for _, c := range []interface {
		PutMany([]any) ([]storh.Record, error)
	}{a, b, l} {
		items := make([]any, 5000)
		for i := range items {
			items[i] = storh.Map{"n": i % 977, "s": "some text"}
		}
		recs, err := c.PutMany(items)
		if err != nil {
			t.Fatal(err)
		}
		if ids == nil {
			for _, r := range recs {
				ids = append(ids, r.ID)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path, ids
}

// breakIt damages the fixture for Repair: record ids[0] of "a" fails its
// checksum, the index of "a" lacks the entry of one other record, and the
// counters of "b" are wrong.
func breakIt(t *testing.T, path string, ids []uuidv7.UUID) {
	t.Helper()
	testkit.Damage(t, path, "a", ids[0][:], func(v []byte) { v[len(v)-1] ^= 0xff })
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(func(tx *bolt.Tx) error {
		entries := tx.Bucket([]byte("a")).Bucket([]byte("i")).Bucket([]byte("n"))
		k, _ := entries.Cursor().Last()
		if err := entries.Delete(k); err != nil {
			return err
		}
		return tx.Bucket([]byte("b")).Bucket([]byte("m")).Put([]byte("count"), make([]byte, 8))
	}); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyContextCancelled: a VerifyContext whose context is done after
// any number of checks stops there, at the collection walks, the index
// checks, the page walk or just before bbolt's page check, with an error
// wrapping context.Canceled; the report counts what was checked until then
// and the problems found so far are delivered; no transaction or goroutine
// is left behind.
func TestVerifyContextCancelled(t *testing.T) {
	fileOnly(t)
	path, ids := maintenanceFixture(t)
	testkit.Damage(t, path, "a", ids[0][:], func(v []byte) { v[len(v)-1] ^= 0xff })
	db := openAt(t, path)
	// The write at the end goes to a collection of its own: "a" holds the
	// damaged record, which the storh_invariants build refuses to commit
	// beside.
	c, _ := db.Docs("after")

	full := neverDone()
	whole, err := db.VerifyContext(full, nil)
	if err != nil || whole.Problems != 1 || whole.Collections != 3 || whole.Records != 15000 {
		t.Fatalf("VerifyContext with a live context = %+v, %v; want one problem in 3 collections of 15000 records", whole, err)
	}
	total := int(full.calls.Load())
	if total < 12 {
		t.Fatalf("Verify asked its context %d times over 15000 records and their index; want every few thousand keys", total)
	}
	t.Logf("a whole Verify asks its context %d times", total)
	for n := range total {
		before := runtime.NumGoroutine()
		ctx := doneAfter(n)
		var found []storh.Problem
		rep, err := db.VerifyContext(ctx, func(p storh.Problem) { found = append(found, p) })
		checkCancelled(t, "VerifyContext", ctx, err, "verify", "cancelled")
		if rep.Records > whole.Records || rep.Collections > whole.Collections || rep.Problems != len(found) {
			t.Errorf("done after %d checks: report %+v with %d problems delivered; want part of %+v", n, rep, len(found), whole)
		}
		if rep.Records > 5000 && rep.Problems != 1 {
			// "a" was walked whole: its damaged record was found and is reported.
			t.Errorf("done after %d checks, past collection a: %d problems; want the damaged record's", n, rep.Problems)
		}
		settled(t, before)
	}
	// Cancelled before it starts, on one collection only.
	ctx := doneAfter(0)
	_, err = db.VerifyContext(ctx, nil, "b")
	checkCancelled(t, "VerifyContext(b)", ctx, err, "verify")
	returnsIn(t, "a write", func() error { _, err := c.Put(storh.Map{"n": 1}); return err })
	returnsIn(t, "Close", db.Close)
}

// TestRepairContextCancelled: a RepairContext whose context is done after
// any number of checks (during the walks, the moves, the recount, the index
// check or the index rebuild) rolls everything back: the file is byte for
// byte what it was, the report counts no repairs and the error says nothing
// was repaired. A whole Repair afterwards still repairs everything.
func TestRepairContextCancelled(t *testing.T) {
	fileOnly(t)
	path, ids := maintenanceFixture(t)
	breakIt(t, path, ids)
	db := openAt(t, path)
	before := digest(t, db)

	// Count the checks of a whole run on a copy, which it repairs.
	cp := filepath.Join(t.TempDir(), "copy.db")
	if _, err := db.BackupFile(cp); err != nil {
		t.Fatal(err)
	}
	other := openAt(t, cp)
	full := neverDone()
	whole, err := other.RepairContext(full, nil)
	if err != nil || whole.Quarantined != 1 || whole.Recounted != 2 || whole.Reindexed != 1 {
		t.Fatalf("RepairContext with a live context = %+v, %v; want 1 quarantined, 2 recounted, 1 reindexed", whole, err)
	}
	other.Close()
	total := int(full.calls.Load())
	t.Logf("a whole Repair asks its context %d times", total)
	for n := range total {
		goroutines := runtime.NumGoroutine()
		ctx := doneAfter(n)
		var found []storh.Problem
		rep, err := db.RepairContext(ctx, func(p storh.Problem) { found = append(found, p) })
		checkCancelled(t, "RepairContext", ctx, err, "repair", "nothing was repaired")
		if rep.Quarantined+rep.Recounted+rep.Reindexed != 0 || rep.Problems != len(found) || rep.Problems > whole.Problems {
			t.Errorf("done after %d checks: report %+v, %d problems delivered; want no repairs", n, rep, len(found))
		}
		if got := digest(t, db); got != before {
			t.Fatalf("done after %d checks: the cancelled Repair changed the file", n)
		}
		settled(t, goroutines)
	}
	c, _ := db.Docs("c")
	returnsIn(t, "a write", func() error { _, err := c.Put(storh.Map{"n": 1}); return err })
	rep, err := db.Repair(nil)
	if err != nil || rep.Quarantined != 1 || rep.Recounted != 2 || rep.Reindexed != 1 {
		t.Errorf("Repair after the cancelled ones = %+v, %v", rep, err)
	}
	if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
		t.Errorf("Verify after Repair = %+v, %v", rep, err)
	}
	returnsIn(t, "Close", db.Close)
}

// TestBackupContextCancelled: BackupContext stops at the write where its
// context is done, with the bytes written so far; BackupFileContext then
// removes its temporary file and leaves the target as it was, absent or
// holding its old content. Both end their transaction, and a live context
// gives the same copy as Backup.
func TestBackupContextCancelled(t *testing.T) {
	fileOnly(t)
	path, _ := maintenanceFixture(t)
	db := openAt(t, path)
	want := digest(t, db)

	var whole bytes.Buffer
	full := neverDone()
	n, err := db.BackupContext(full, &whole)
	if err != nil || n != int64(whole.Len()) {
		t.Fatalf("BackupContext with a live context = %d, %v", n, err)
	}
	total := int(full.calls.Load())
	if total < 10 {
		t.Fatalf("a backup of %d bytes asked its context %d times; want once per write", n, total)
	}
	for _, k := range []int{0, 1, 2, 3, total / 2, total - 1} {
		goroutines := runtime.NumGoroutine()
		var buf bytes.Buffer
		ctx := doneAfter(k)
		n, err := db.BackupContext(ctx, &buf)
		checkCancelled(t, "BackupContext", ctx, err, "backup", "incomplete")
		if n != int64(buf.Len()) || n >= int64(whole.Len()) || !bytes.HasPrefix(whole.Bytes(), buf.Bytes()) {
			t.Errorf("done after %d checks: %d bytes reported, %d written of %d", k, n, buf.Len(), whole.Len())
		}
		settled(t, goroutines)
	}

	dir := t.TempDir()
	absent := filepath.Join(dir, "absent.db")
	present := filepath.Join(dir, "present.db")
	if err := os.WriteFile(present, []byte("the previous backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{0, 1, total / 2, total - 1} {
		for _, target := range []string{absent, present} {
			goroutines := runtime.NumGoroutine()
			ctx := doneAfter(k)
			n, err := db.BackupFileContext(ctx, target)
			checkCancelled(t, "BackupFileContext", ctx, err, "backup", target, "as it was")
			if n != 0 {
				t.Errorf("BackupFileContext done after %d checks reported %d bytes; want 0, nothing was kept", k, n)
			}
			settled(t, goroutines)
		}
		if _, err := os.Stat(absent); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("done after %d checks: %s exists (%v); want it still absent", k, absent, err)
		}
		if b, err := os.ReadFile(present); err != nil || string(b) != "the previous backup" {
			t.Errorf("done after %d checks: %s holds %q, %v; want its old content", k, present, b, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("done after %d checks: the directory holds %d files; want the temporary file removed", k, len(entries))
		}
	}
	if _, err := db.BackupFileContext(neverDone(), absent); err != nil {
		t.Fatal(err)
	}
	if got := digestFile(t, absent); got != want {
		t.Errorf("BackupFileContext with a live context made a different copy")
	}
	c, _ := db.Docs("a")
	returnsIn(t, "a write", func() error { _, err := c.Put(storh.Map{"n": 1}); return err })
	returnsIn(t, "Close", db.Close)
}

// TestCompactContextCancelled: CompactContext whose context is done after
// any number of checks removes dst and leaves src as it was; with a live
// context it copies every bucket, key and value, as Compact does.
func TestCompactContextCancelled(t *testing.T) {
	fileOnly(t)
	src, _ := maintenanceFixture(t)
	want := digestFile(t, src)
	dir := t.TempDir()
	dst := filepath.Join(dir, "compact.db")

	full := neverDone()
	rep, err := storh.CompactContext(full, src, dst)
	if err != nil || rep.DstInUse <= 0 {
		t.Fatalf("CompactContext with a live context = %+v, %v", rep, err)
	}
	if got := digestFile(t, dst); got != want {
		t.Fatal("the compacted copy differs from its source")
	}
	if err := os.Remove(dst); err != nil {
		t.Fatal(err)
	}
	total := int(full.calls.Load())
	if total < 8 {
		t.Fatalf("a compaction of 15000 records and their index asked its context %d times; want every few thousand keys", total)
	}
	for n := range total {
		goroutines := runtime.NumGoroutine()
		ctx := doneAfter(n)
		_, err := storh.CompactContext(ctx, src, dst)
		checkCancelled(t, "CompactContext", ctx, err, "compact", "cancelled", dst)
		if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("done after %d checks: %s exists (%v); want it removed", n, dst, err)
		}
		settled(t, goroutines)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the target directory holds %d files; want none", len(entries))
	}
	if got := digestFile(t, src); got != want {
		t.Error("a cancelled compaction changed its source")
	}
	db := openAt(t, src)
	c, _ := db.Docs("a")
	returnsIn(t, "a write on the source", func() error { _, err := c.Put(storh.Map{"n": 1}); return err })
	returnsIn(t, "Close", db.Close)
}
