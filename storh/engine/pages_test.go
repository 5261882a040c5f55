package engine_test

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/testkit"
)

// pagesFixture writes a database with what the page check must walk: a
// collection large enough for branch pages and more than a few dozen
// leaves, an index, a small log (inline buckets) and a record on overflow
// pages. It returns the file and the root page of "a"'s records bucket.
// The check itself is tested in package boltpage; these tests are about
// what the engine makes of what it finds.
func pagesFixture(t *testing.T) (string, uint64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pages.db")
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := db.Docs("a", storh.WithIndex(storh.Index("n")))
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]any, 6000)
	for i := range batch {
		batch[i] = map[string]any{"n": i % 97, "s": "a few words of text"}
	}
	if _, err := a.PutMany(batch); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Put(map[string]any{"big": strings.Repeat("x", 20000)}); err != nil {
		t.Fatal(err)
	}
	b, err := db.Log("b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(map[string]any{"k": 1}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var root uint64
	testkit.ViewBolt(t, path, func(btx *bolt.Tx) {
		root = uint64(btx.Bucket([]byte("a")).Bucket([]byte("r")).RootPage())
	})
	testkit.EditPage(t, path, root, func(p []byte) {
		if flags := binary.NativeEndian.Uint16(p[8:]); flags != 0x01 {
			t.Fatalf("records root page %d has flags %#x, want a branch", root, flags)
		}
	})
	return path, root
}

// TestOpenRefusesLoopingCollection opens a file whose records tree has a
// cycle: searches in it would recurse until the stack overflows, so the
// collection is refused with ErrCorrupt while the rest of the file works,
// Verify reports the damage, and Repair leaves it alone without hanging.
func TestOpenRefusesLoopingCollection(t *testing.T) {
	fixture, root := pagesFixture(t)
	path := testkit.CopyFile(t, fixture)
	testkit.EditPage(t, path, root, func(p []byte) { binary.NativeEndian.PutUint64(p[16+8:], root) })
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, err := db.Docs("a")
	if err == nil {
		_, err = a.Count()
	}
	if !errors.Is(err, storh.ErrCorrupt) {
		t.Fatalf("collection a: %v, want ErrCorrupt", err)
	}
	if err := db.Drop("a"); !errors.Is(err, storh.ErrCorrupt) {
		t.Fatalf("Drop of the damaged collection: %v, want ErrCorrupt", err)
	}
	b, err := db.Log("b")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.Count(); err != nil || n != 1 {
		t.Fatalf("the healthy log: %d, %v", n, err)
	}
	var problems []string
	if _, err := db.Verify(func(p storh.Problem) { problems = append(problems, p.String()) }); err != nil {
		t.Fatal(err)
	}
	if len(problems) == 0 || !strings.Contains(problems[0], "reached twice") {
		t.Fatalf("Verify: %q", problems)
	}
	if _, err := db.Repair(nil); err != nil {
		t.Fatalf("Repair: %v", err)
	}
}

// TestOpenRefusesBucketPastPage opens a file where the element naming a
// collection's metadata bucket claims a 2 GiB value: bbolt would copy that
// much to open it, so Open must refuse the collection before anything
// tries, and the refusal must cost no such allocation.
func TestOpenRefusesBucketPastPage(t *testing.T) {
	fixture, _ := pagesFixture(t)
	path := testkit.CopyFile(t, fixture)
	var collRoot uint64
	testkit.ViewBolt(t, path, func(btx *bolt.Tx) { collRoot = uint64(btx.Bucket([]byte("a")).RootPage()) })
	testkit.EditPage(t, path, collRoot, func(p []byte) { binary.NativeEndian.PutUint32(p[16+12:], 0x7ffff000) })
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Docs("a"); !errors.Is(err, storh.ErrCorrupt) {
		t.Fatalf("collection a: %v, want ErrCorrupt", err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("opening the damaged collection allocated %d MiB", grew>>20)
	}
	if n, err := mustLog(t, db, "b").Count(); err != nil || n != 1 {
		t.Fatalf("the healthy log: %d, %v", n, err)
	}
}

func mustLog(t *testing.T, db *storh.DB, name string) *storh.Log {
	t.Helper()
	l, err := db.Log(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
