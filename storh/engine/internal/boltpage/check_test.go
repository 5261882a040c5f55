package boltpage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/internal/testkit"
)

// checkFixture writes a bbolt file laid out as a storh database, with what
// the page check must walk: a collection "a" (a metadata bucket, an index
// bucket with a bucket nested in it, and a records bucket large enough for
// a branch page over more than smallTree leaves, one value on overflow
// pages) and a small collection "b" whose buckets sit inline in its page.
// It returns the file and the root page of a's records bucket.
func checkFixture(t *testing.T) (string, uint64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pages.db")
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{"a", "b"} {
			c, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			m, err := c.CreateBucket([]byte("m"))
			if err != nil {
				return err
			}
			if err := m.Put([]byte("kind"), []byte{1}); err != nil {
				return err
			}
			recs, err := c.CreateBucket(recordsName)
			if err != nil {
				return err
			}
			recs.FillPercent = 1 // as storh fills its records: appended in order
			n := 6000
			if name == "b" {
				n = 1
			}
			for i := range n {
				if err := recs.Put(recordKey(i), []byte("a few words of text, as a value")); err != nil {
					return err
				}
			}
			if name == "b" {
				continue
			}
			if err := recs.Put(recordKey(n), []byte(strings.Repeat("x", 20000))); err != nil {
				return err
			}
			ix, err := c.CreateBucket([]byte("i"))
			if err != nil {
				return err
			}
			entries, err := ix.CreateBucket([]byte("n"))
			if err != nil {
				return err
			}
			for i := range 97 {
				if err := entries.Put(binary.BigEndian.AppendUint32(nil, uint32(i)), nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if cerr := bdb.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	testkit.ViewBolt(t, path, func(btx *bolt.Tx) {
		root = uint64(btx.Bucket([]byte("a")).Bucket(recordsName).RootPage())
	})
	testkit.EditPage(t, path, root, func(p []byte) {
		if flags := binary.NativeEndian.Uint16(p[8:]); flags != branchPage {
			t.Fatalf("records root page %d has flags %#x, want a branch", root, flags)
		}
		if n := binary.NativeEndian.Uint16(p[10:]); n <= smallTree {
			t.Fatalf("records root page %d has %d children, want more than %d", root, n, smallTree)
		}
	})
	return path, root
}

// recordKey is the 16-byte key of record i, ascending with i.
func recordKey(i int) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 8, 16), uint64(i))
}

// checkFile runs Check (descending into only, when given) and
// CheckSearchPaths on the file at path: Check's findings as "top: detail"
// lines, and what CheckSearchPaths found broken.
func checkFile(t *testing.T, path string, only ...string) (found []string, broken map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	testkit.ViewBolt(t, path, func(btx *bolt.Tx) {
		if err := Check(f, btx, only, nil, func(top, detail string) { found = append(found, top+": "+detail) }); err != nil {
			t.Fatal(err)
		}
		if broken, err = CheckSearchPaths(f, btx); err != nil {
			t.Fatal(err)
		}
	})
	return found, broken
}

func TestCheckHealthy(t *testing.T) {
	path, _ := checkFixture(t)
	if found, broken := checkFile(t, path); len(found) > 0 || len(broken) > 0 {
		t.Fatalf("a healthy file: %q, search paths %v", found, broken)
	}
}

// TestCheckFindsDamage damages one element or header of a's records
// bucket's root branch (or of its first leaf, or of a's own page) in each
// way the check guards against, and wants the finding under the top-level
// bucket's name; the damage that can make a search loop must also be found
// by CheckSearchPaths, and only that. Asked to check only b, the check
// does not find it.
func TestCheckFindsDamage(t *testing.T) {
	fixture, root := checkFixture(t)
	ne := binary.NativeEndian
	var firstLeaf, collRoot uint64
	testkit.EditPage(t, fixture, root, func(p []byte) { firstLeaf = ne.Uint64(p[16+8:]) })
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
			path := testkit.CopyFile(t, fixture)
			testkit.EditPage(t, path, tc.page(), tc.edit)
			found, broken := checkFile(t, path)
			if len(found) == 0 || !strings.HasPrefix(found[0], "a: ") || !strings.Contains(found[0], tc.want) {
				t.Fatalf("found %q, want a finding of bucket a saying %q", found, tc.want)
			}
			if got := broken["a"] != ""; got != tc.loops || len(broken) > 1 {
				t.Fatalf("CheckSearchPaths found %v; want bucket a broken: %v", broken, tc.loops)
			}
			if found, _ := checkFile(t, path, "b"); len(found) > 0 {
				t.Fatalf("checking only b found %q", found)
			}
		})
	}
}

// TestCheckStopsAtStep: step is told of every page the check reads, and
// the error it returns ends the check with that error.
func TestCheckStopsAtStep(t *testing.T) {
	path, _ := checkFixture(t)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stop := errors.New("stop")
	testkit.ViewBolt(t, path, func(btx *bolt.Tx) {
		pages := 0
		count := func(size int) error {
			if size != btx.DB().Info().PageSize {
				t.Fatalf("step told of %d bytes, want a page", size)
			}
			pages++
			return nil
		}
		if err := Check(f, btx, nil, count, func(top, detail string) { t.Errorf("%s: %s", top, detail) }); err != nil {
			t.Fatal(err)
		}
		if pages <= smallTree {
			t.Fatalf("step told of %d pages, want every branch and leaf", pages)
		}
		seen := 0
		err := Check(f, btx, nil, func(int) error {
			if seen++; seen == pages/2 {
				return stop
			}
			return nil
		}, func(top, detail string) { t.Errorf("%s: %s", top, detail) })
		if !errors.Is(err, stop) || seen != pages/2 {
			t.Fatalf("a step that fails: %v after %d pages, want %v after %d", err, seen, stop, pages/2)
		}
	})
}

// TestCheckRefusesOverlappingBuckets: a leaf whose nested buckets' values
// overlap (bbolt writes a page's keys and values one after another) is
// damage, found once. Before it was, the check followed every element to
// the bucket it reaches, so inline buckets nested in each other two to a
// page, each pair sharing one value, took 2^depth visits: a check (and an
// Open) that did not end. Found while writing FuzzPages, by reading the
// check for what could make it run on.
func TestCheckRefusesOverlappingBuckets(t *testing.T) {
	ne := binary.NativeEndian
	const depth = 30
	// The innermost bucket's page is no leaf: a finding each time the
	// check reaches it.
	value := make([]byte, bucketHead+pageHeader)
	ne.PutUint16(value[bucketHead+8:], 0x10)
	for range depth {
		// An inline bucket of two elements whose key and value are the
		// same bytes: the bucket nested one level down.
		outer := make([]byte, bucketHead+pageHeader+2*elemSize, bucketHead+pageHeader+2*elemSize+1+len(value))
		page := outer[bucketHead:]
		ne.PutUint16(page[8:], leafPage)
		ne.PutUint16(page[10:], 2)
		kv := uint32(pageHeader + 2*elemSize)
		for i := range uint32(2) {
			e := page[pageHeader+i*elemSize:]
			ne.PutUint32(e[0:], bucketLeaf)
			ne.PutUint32(e[4:], kv-(pageHeader+i*elemSize))
			ne.PutUint32(e[8:], 1)
			ne.PutUint32(e[12:], uint32(len(value)))
		}
		value = append(append(outer, 'x'), value...)
	}
	// A file of three 4 KiB pages whose root tree, at page 2, holds the
	// outermost bucket as top-level bucket a.
	const pageSize = 4096
	data := make([]byte, 3*pageSize)
	root := data[2*pageSize:]
	ne.PutUint64(root, 2)
	ne.PutUint16(root[8:], leafPage)
	ne.PutUint16(root[10:], 1)
	ne.PutUint32(root[pageHeader:], bucketLeaf)
	ne.PutUint32(root[pageHeader+4:], elemSize)
	ne.PutUint32(root[pageHeader+8:], 1)
	ne.PutUint32(root[pageHeader+12:], uint32(len(value)))
	copy(root[pageHeader+elemSize:], append([]byte("a"), value...))

	pc := newPageChecker(bytes.NewReader(data), pageSize, uint64(len(data)))
	var found []string
	pc.report = func(top, detail string) {
		if found = append(found, top+": "+detail); len(found) > 10 {
			t.Fatalf("the check found %d problems and goes on: %q", len(found), found[:3])
		}
	}
	if err := pc.searchPaths("", 2, 0, "the root bucket", true); err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || !strings.HasPrefix(found[0], "a: ") || !strings.Contains(found[0], "overlaps") {
		t.Fatalf("found %q, want bucket a's overlapping buckets, once", found)
	}
}
