package storh_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
)

// TestOpenMessages: Open's failures say what is wrong in the user's terms,
// not the internals that noticed it.
func TestOpenMessages(t *testing.T) {
	dir := t.TempDir()
	for _, opts := range [][]storh.Option{nil, {storh.WithReadOnly()}} {
		_, err := storh.Open(dir, opts...)
		if !errors.Is(err, syscall.EISDIR) || errors.Is(err, storh.ErrCorrupt) ||
			!strings.Contains(err.Error(), "is a directory") || strings.Contains(err.Error(), "backup") {
			t.Errorf("Open(a directory, %d options) = %v; want EISDIR saying it is a directory", len(opts), err)
		}
	}

	// A database cut short: bbolt would fault reading it; the message says
	// the file is damaged, not what the runtime said, and the failed open
	// leaves no lock behind (each size is opened twice in a row: a leaked
	// lock would make the second ErrLocked).
	path := filepath.Join(dir, "cut.db")
	db := openAt(t, path)
	docs, _ := db.Docs("d")
	for i := range 2000 {
		if _, err := docs.PutMany([]any{storh.Map{"i": i, "pad": strings.Repeat("x", 200)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	for _, size := range []int64{4096 * 3, fi.Size() / 64, 4096*2 + 100} {
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
		for _, opts := range [][]storh.Option{nil, {storh.WithReadOnly()}} {
			db, err := storh.Open(path, opts...)
			if err == nil {
				_, err = db.Verify(nil)
				db.Close()
				continue // some cuts leave a readable prefix: Verify reports those
			}
			msg := err.Error()
			if !errors.Is(err, storh.ErrCorrupt) || !strings.Contains(msg, "damaged") {
				t.Errorf("Open(truncated to %d) = %v; want ErrCorrupt saying the file is damaged", size, err)
			}
			for _, internal := range []string{"nil pointer", "runtime error", "panic", "goroutine"} {
				if strings.Contains(msg, internal) {
					t.Errorf("Open(truncated to %d) shows %q: %v", size, internal, err)
				}
			}
		}
	}
}

// TestTooLargeSaysWhichLimit: ErrTooLarge names the limit that was hit.
func TestTooLargeSaysWhichLimit(t *testing.T) {
	fileOnly(t)
	db := openTemp(t, storh.WithMaxSize(1<<20))
	docs, _ := db.Docs("d")
	var err error
	for i := 0; err == nil && i < 100; i++ {
		_, err = docs.PutMany([]any{storh.Map{"big": strings.Repeat("x", 64<<10)}})
	}
	if !errors.Is(err, storh.ErrTooLarge) || !strings.Contains(err.Error(), "WithMaxSize") {
		t.Errorf("a write past WithMaxSize = %v; want ErrTooLarge naming WithMaxSize", err)
	}
}

// TestLockedSaysWho: an Open that waited for the file lock says what held
// it, as far as the lock shows: a writer (an exclusive lock) or readers
// (shared locks, which keep writers out), not "a writer" for both.
func TestLockedSaysWho(t *testing.T) {
	fileOnly(t)
	path := newPath(t)
	openAt(t, path).Close()
	const wait = 50 * time.Millisecond
	locked := func(want string, opts ...storh.Option) {
		t.Helper()
		db, err := storh.Open(path, append(opts, storh.WithLockTimeout(wait))...)
		if err == nil {
			db.Close()
			t.Fatalf("Open beside the holders succeeded")
		}
		if !errors.Is(err, storh.ErrLocked) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "(waited 50ms)") {
			t.Errorf("Open = %v; want ErrLocked saying %q", err, want)
		}
	}

	readers := []*storh.DB{openAt(t, path, storh.WithReadOnly()), openAt(t, path, storh.WithReadOnly())}
	locked("other processes, or other Opens in this one, have the file open read-only, which keeps writers out (close them")
	for _, r := range readers {
		r.Close()
	}

	writer := openAt(t, path)
	locked("another process, or another Open in this one, has the file open for writing (close it")
	locked("has the file open for writing", storh.WithReadOnly())
	writer.Close()
}
