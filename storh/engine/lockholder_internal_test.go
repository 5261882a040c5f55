package engine

import (
	"path/filepath"
	"runtime"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestLockHolderOf: the probe tells an exclusive lock from shared ones and
// from none, and leaves no lock of its own behind.
func TestLockHolderOf(t *testing.T) {
	if lockHolderOf(filepath.Join(t.TempDir(), "missing.db")) != holderUnknown {
		t.Error("a missing file: want holderUnknown")
	}
	if runtime.GOOS == "windows" {
		t.Skip("bbolt does not lock with flock here: the probe says nothing")
	}
	path := filepath.Join(t.TempDir(), "held.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := lockHolderOf(path); got != holderWriter {
		t.Errorf("beside a writer: %v, want holderWriter", got)
	}
	db.Close()
	if got := lockHolderOf(path); got != holderGone {
		t.Errorf("with no holder: %v, want holderGone", got)
	}
	var readers []*bolt.DB
	for range 2 {
		r, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
	}
	if got := lockHolderOf(path); got != holderReaders {
		t.Errorf("beside readers: %v, want holderReaders", got)
	}
	for _, r := range readers {
		r.Close()
	}
	// The probe let go of its own lock: a writer gets in at once.
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: -1})
	if err != nil {
		t.Fatalf("a writer after the probes: %v", err)
	}
	db.Close()
}
