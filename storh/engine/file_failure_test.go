package engine_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/engine"
)

// TestFileCutWithLocksOutOfReach: where bbolt's locks cannot be released
// after its Begin faults on a file cut to nothing (a bbolt the release was
// not checked against), every call still returns ErrCorrupt and Close
// returns without waiting on them, with the file's lock released.
func TestFileCutWithLocksOutOfReach(t *testing.T) {
	defer engine.WithoutLockRelease()()
	path := filepath.Join(t.TempDir(), "cut.db")
	db, err := storh.Open(path, storh.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	docs, err := db.Docs("d")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := docs.Put(storh.Map{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	returns := func(what string, fn func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- fn() }()
		select {
		case err := <-done:
			if !errors.Is(err, storh.ErrCorrupt) {
				t.Errorf("%s after the cut = %v; want ErrCorrupt", what, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s after the cut did not return within 20s", what)
		}
	}
	returns("Get", func() error { _, err := docs.Get(rec.ID); return err })
	returns("Put", func() error { _, err := docs.Put(storh.Map{"n": 2}); return err })
	returns("Count", func() error { _, err := docs.Count(); return err })
	returns("Close", db.Close)
	// bbolt's lock is released: another open of the file takes it at once.
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("the file is still locked after Close: %v", err)
	}
	bdb.Close()
}

// TestBoltLocksReachable fails when the bbolt this module builds with
// keeps the locks its Begin holds elsewhere than reachBoltLocks looks:
// a Begin that faults would then leave them held for good.
func TestBoltLocksReachable(t *testing.T) {
	bdb, err := bolt.Open(filepath.Join(t.TempDir(), "l.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if !engine.BoltLocksReachable(bdb) {
		t.Fatal("bbolt's rwlock, metalock and mmaplock are not where reachBoltLocks looks for them (storh/engine/file_failure.go)")
	}
}
