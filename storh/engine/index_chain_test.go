package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/errs"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/engine/internal/blockindex"
	"github.com/storhdb/storh-go/storh/internal/testkit"
)

// The pinned format-2 file (storh/testdata/format2) holds blocks of
// version 1: collection "docs" with these four blocked indexes.
var format2Indexes = []string{"u", "tag", "tags", "kind,n"}

func format2Copy(t *testing.T) string {
	t.Helper()
	orig, err := os.ReadFile(filepath.Join("..", "testdata", "format2", "format2.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "format2.db")
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// indexEntries reads every entry of index name of "docs", as a query
// would, failing the test on damage.
func indexEntries(t *testing.T, db *DB, name string) [][]byte {
	t.Helper()
	var out [][]byte
	err := db.View(func(tx *Tx) error {
		c, err := tx.Coll("docs", 0, false)
		if err != nil {
			return err
		}
		ix, err := c.index(name)
		if err != nil {
			return err
		}
		cur, err := ix.cursor()
		if err != nil {
			return err
		}
		for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
			out = append(out, bytes.Clone(k))
		}
		return cursorDamage(cur)
	})
	if err != nil {
		t.Fatalf("index %s: %v", name, err)
	}
	return out
}

// blockVersions counts the blocks of index name by version.
func blockVersions(t *testing.T, db *DB, name string) map[byte]int {
	t.Helper()
	out := map[byte]int{}
	if err := db.View(func(tx *Tx) error {
		c, err := tx.Coll("docs", 0, false)
		if err != nil {
			return err
		}
		return forEach(c.root.Bucket(bucketIndexEntries).Bucket([]byte(name)), func(_, v []byte) error {
			out[v[0]]++
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// indexProblems runs Verify's index checks on "docs".
func indexProblems(t *testing.T, db *DB) []string {
	t.Helper()
	var found []string
	if err := db.View(func(tx *Tx) error {
		c, err := tx.Coll("docs", 0, false)
		if err != nil {
			return err
		}
		checkIndexes(c, func(p api.Problem) { found = append(found, p.String()) })
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return found
}

// chainSteps runs one chaining step of budget bytes on each index, each in
// a transaction of its own that starts no fold.
func chainSteps(t *testing.T, db *DB, budget int) {
	t.Helper()
	for _, name := range format2Indexes {
		if err := db.Update(func(tx *Tx) error {
			tx.folding = true
			c, err := tx.Coll("docs", 0, false)
			if err != nil {
				return err
			}
			ix, err := c.index(name)
			if err != nil {
				return err
			}
			done, err := tx.chainStep(ix, budget)
			if done {
				t.Errorf("index %s: chained in one step of %d bytes", name, budget)
			}
			return err
		}); err != nil {
			t.Fatalf("index %s: %v", name, err)
		}
	}
}

// TestChainingResumes: chaining a format-2 file's blocks stops between
// steps (a close, or a crash, after any commit) with the index chained
// part way, which reads the same entries and passes Verify's checks; a
// later fold resumes where it stopped and chains the rest.
func TestChainingResumes(t *testing.T) {
	path := format2Copy(t)
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][][]byte{}
	for _, name := range format2Indexes {
		want[name] = indexEntries(t, db, name)
	}
	chainSteps(t, db, 1)
	for _, name := range format2Indexes {
		if v := blockVersions(t, db, name); v[blockindex.BlockVersion] == 0 || v[blockindex.BlockVersion1] == 0 {
			t.Errorf("index %s after one step: blocks by version %v; want both", name, v)
		}
		if got := indexEntries(t, db, name); !slicesEqual(got, want[name]) {
			t.Errorf("index %s chained part way reads %d entries, want %d", name, len(got), len(want[name]))
		}
	}
	if p := indexProblems(t, db); len(p) > 0 {
		t.Errorf("Verify of indexes chained part way: %q", p)
	}
	chainSteps(t, db, 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.ViewBolt(t, path, func(btx *bolt.Tx) {
		// The open for writing raised it further (upgradeLists).
		if m := binary.BigEndian.Uint64(btx.Bucket(dbMetaBucket).Get(keyFormat)); m != formatLists {
			t.Errorf("format marker %d once chaining began, want %d", m, formatLists)
		}
	})

	if db, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, name := range format2Indexes {
		var inc uint64
		if err := db.fold("docs", name, &inc); err != nil {
			t.Fatalf("index %s: %v", name, err)
		}
		if v := blockVersions(t, db, name); v[blockindex.BlockVersion1] != 0 {
			t.Errorf("index %s: blocks by version %v after the fold; want all chained", name, v)
		}
		if got := indexEntries(t, db, name); !slicesEqual(got, want[name]) {
			t.Errorf("index %s chained reads %d entries, want %d", name, len(got), len(want[name]))
		}
	}
	if p := indexProblems(t, db); len(p) > 0 {
		t.Errorf("Verify of the chained indexes: %q", p)
	}
	if err := db.View(func(tx *Tx) error {
		c, err := tx.Coll("docs", 0, false)
		if err != nil {
			return err
		}
		for _, name := range format2Indexes {
			if ix, _ := c.index(name); !ix.def.Chained || ix.def.ChainNext != nil {
				t.Errorf("index %s: chained %v, resuming at %x", name, ix.def.Chained, ix.def.ChainNext)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestChainingRefusesShortIndex: a format-2 index that lost a block holds
// fewer entries than its definition counts; chaining it would make the
// loss pass for a whole index, so the fold fails with ErrCorrupt, leaves
// every block as it was, Verify still reports the index, and its reads
// fail once a writer's fold has failed there.
func TestChainingRefusesShortIndex(t *testing.T) {
	path := format2Copy(t)
	var lost []byte
	editBolt(t, path, func(btx *bolt.Tx) error {
		b := btx.Bucket([]byte("docs")).Bucket(bucketIndexEntries).Bucket([]byte("tag"))
		c := b.Cursor()
		c.First()
		k, _ := c.Next()
		lost = bytes.Clone(k)
		return b.Delete(lost)
	})
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := blockVersions(t, db, "tag")
	var inc uint64
	if err := db.fold("docs", "tag", &inc); !errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), "a block may be missing") {
		t.Fatalf("folding the short index: %v; want errs.ErrCorrupt", err)
	}
	if after := blockVersions(t, db, "tag"); after[blockindex.BlockVersion] != 0 || after[blockindex.BlockVersion1] != before[blockindex.BlockVersion1] {
		t.Errorf("blocks by version %v after the refused chaining, %v before", after, before)
	}
	if p := indexProblems(t, db); len(p) == 0 {
		t.Error("Verify finds nothing wrong with the short index")
	}
	// Failed as a writer's fold does (a writable Docs runs it), the
	// failure is kept for the index, whose reads fail with it from then on.
	db.blocked.folds.add("docs", "tag")
	db.runFolds()
	err = db.View(func(tx *Tx) error {
		c, err := tx.Coll("docs", 0, false)
		if err != nil {
			return err
		}
		ix, err := c.index("tag")
		if err != nil {
			return err
		}
		_, err = ix.cursor()
		return err
	})
	if !errors.Is(err, errs.ErrCorrupt) {
		t.Errorf("reading the short index after its chaining failed: %v; want errs.ErrCorrupt", err)
	}
}

func slicesEqual(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func editBolt(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(fn); err != nil {
		t.Fatal(err)
	}
}
