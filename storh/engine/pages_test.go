package engine_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/testkit"
)

// pagesFixture writes a database with what the page check must walk: a
// collection large enough for branch pages and more than a few dozen
// leaves, an index, a small log (inline buckets) and a record on overflow
// pages. It returns the file and the root page of "a"'s records bucket.
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
	editPage(t, path, root, func(p []byte) {
		if flags := binary.NativeEndian.Uint16(p[8:]); flags != 0x01 {
			t.Fatalf("records root page %d has flags %#x, want a branch", root, flags)
		}
	})
	return path, root
}

// editPage rewrites page id of the file through edit.
func editPage(t *testing.T, path string, id uint64, edit func(p []byte)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := os.Getpagesize()
	p := make([]byte, size)
	if _, err := f.ReadAt(p, int64(id)*int64(size)); err != nil {
		t.Fatal(err)
	}
	edit(p)
	if _, err := f.WriteAt(p, int64(id)*int64(size)); err != nil {
		t.Fatal(err)
	}
}

func copyDB(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "damaged.db")
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestCheckPagesHealthy(t *testing.T) {
	path, _ := pagesFixture(t)
	testkit.ViewBolt(t, path, func(btx *bolt.Tx) {
		found, err := engine.CheckPages(path, btx)
		if err != nil || len(found) > 0 {
			t.Fatalf("a healthy file: %v, %q", err, found)
		}
		broken, err := engine.CheckSearchPaths(path, btx)
		if err != nil || len(broken) > 0 {
			t.Fatalf("a healthy file's search paths: %v, %v", err, broken)
		}
	})
}

// TestCheckPagesFindsDamage damages one element or header of the records
// bucket's root branch (or of its first leaf) in each way the check
// guards against, and wants the finding under the collection's name; the
// damage that can make a search loop must also be found by the check Open
// runs, and only that.
func TestCheckPagesFindsDamage(t *testing.T) {
	fixture, root := pagesFixture(t)
	ne := binary.NativeEndian
	var firstLeaf, collRoot uint64
	editPage(t, fixture, root, func(p []byte) { firstLeaf = ne.Uint64(p[16+8:]) })
	testkit.ViewBolt(t, fixture, func(btx *bolt.Tx) { collRoot = uint64(btx.Bucket([]byte("a")).RootPage()) })
	for _, tc := range []struct {
		name  string
		page  func() uint64
		edit  func(p []byte)
		want  string
		loops bool
	}{
		{"cycle", func() uint64 { return root }, func(p []byte) { ne.PutUint64(p[16+8:], root) }, "reached twice", true},
		{"shared child", func() uint64 { return root }, func(p []byte) { copy(p[32+8:32+16], p[16+8:16+16]) }, "reached twice", true},
		{"child past the file", func() uint64 { return root }, func(p []byte) { ne.PutUint64(p[16+8:], 1<<40) }, "outside the file's pages", false},
		{"child is a meta page", func() uint64 { return root }, func(p []byte) { ne.PutUint64(p[16+8:], 1) }, "outside the file's pages", false},
		{"key past the page", func() uint64 { return root }, func(p []byte) { ne.PutUint32(p[16+4:], 0x300010) }, "outside the page", false},
		{"too many elements", func() uint64 { return root }, func(p []byte) { ne.PutUint16(p[10:], 0xffff) }, "more than fit", false},
		{"no elements", func() uint64 { return root }, func(p []byte) { ne.PutUint16(p[10:], 0) }, "no elements", false},
		{"wrong page type", func() uint64 { return root }, func(p []byte) { ne.PutUint16(p[8:], 0x10) }, "page type", false},
		{"wrong page id", func() uint64 { return root }, func(p []byte) { ne.PutUint64(p, 7) }, "says it is page 7", false},
		{"overflow past the file", func() uint64 { return root }, func(p []byte) { ne.PutUint32(p[12:], 1<<30) }, "overflow pages", false},
		{"leaf value past the page", func() uint64 { return firstLeaf }, func(p []byte) { ne.PutUint32(p[16+12:], 0x7ffff000) }, "outside the page", false},
		// Found in CI (TestCorruptFile, seed 1796125429852942380): bbolt
		// copies an unaligned bucket value whole before reading it, so
		// opening the collection allocated 2 GiB and stalled the child.
		{"bucket value past the page", func() uint64 { return collRoot }, func(p []byte) { ne.PutUint32(p[16+12:], 0x7ffff000) }, "outside the page", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := copyDB(t, fixture)
			editPage(t, path, tc.page(), tc.edit)
			testkit.ViewBolt(t, path, func(btx *bolt.Tx) {
				found, err := engine.CheckPages(path, btx)
				if err != nil {
					t.Fatal(err)
				}
				if len(found) == 0 || !strings.HasPrefix(found[0], "a: ") || !strings.Contains(found[0], tc.want) {
					t.Fatalf("found %q, want a finding of collection a saying %q", found, tc.want)
				}
				broken, err := engine.CheckSearchPaths(path, btx)
				if err != nil {
					t.Fatal(err)
				}
				if got := broken["a"] != ""; got != tc.loops || len(broken) > 1 {
					t.Fatalf("Open's check found %v; want collection a broken: %v", broken, tc.loops)
				}
			})
		})
	}
}

// TestOpenRefusesLoopingCollection opens a file whose records tree has a
// cycle: searches in it would recurse until the stack overflows, so the
// collection is refused with ErrCorrupt while the rest of the file works,
// Verify reports the damage, and Repair leaves it alone without hanging.
func TestOpenRefusesLoopingCollection(t *testing.T) {
	fixture, root := pagesFixture(t)
	path := copyDB(t, fixture)
	editPage(t, path, root, func(p []byte) { binary.NativeEndian.PutUint64(p[16+8:], root) })
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
	path := copyDB(t, fixture)
	var collRoot uint64
	testkit.ViewBolt(t, path, func(btx *bolt.Tx) { collRoot = uint64(btx.Bucket([]byte("a")).RootPage()) })
	editPage(t, path, collRoot, func(p []byte) { binary.NativeEndian.PutUint32(p[16+12:], 0x7ffff000) })
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
