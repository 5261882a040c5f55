package storh_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Format 2 adds blocked indexes: a file's index entries in sorted,
// prefix-compressed blocks and a journal of the changes not folded into
// them yet (storh/engine/index_block.go). A file written by it
// (testdata/format2/format2.db) and the exact bytes of every block and
// journal record in it (testdata/format2/index.hex: bucket path, key, value
// in hex) pin the encoding, as testdata/format1 pins the records': today's
// code must read that file, and chain its blocks when it writes to it
// (format 3, whose own pinned files format3_test.go checks). A change to
// them needs a new format version, never a regenerated file.
const format2Dir = "testdata/format2"

// format2Tune makes the 60 records of the pinned file fold twice, into
// several blocks, and leave changes in the journal.
const format2Tune = "layout=blocks,block=256,foldmin=16,foldmax=24,step=400"

// format2ID is record i's id: stable forever.
func format2ID(i int) uuidv7.UUID {
	id, err := uuidv7.NewAt(1_700_000_100_000 + int64(i))
	if err != nil {
		panic(err)
	}
	copy(id[8:], []byte{0x80 | byte(i&0x3f), 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87})
	id[6], id[7] = 0x70, byte(i)
	return id
}

func format2Record(i int) storh.Map {
	return storh.Map{"u": i, "tag": fmt.Sprintf("t%d", i%4), "tags": []any{"all", fmt.Sprintf("m%d", i%3)},
		"kind": []string{"a", "b"}[i%2], "n": i % 5}
}

// writeFormat2DB writes the pinned content: 60 records, then 10 of them
// rewritten with other values and 5 deleted, with a unique, a plain, a list
// and a compound index.
func writeFormat2DB(t testing.TB, path string) {
	t.Helper()
	tuneFor(t, format2Tune)
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := db.Docs("docs", storh.WithIndex(storh.Index("u").Unique()), storh.WithIndex(storh.Index("tag")),
		storh.WithIndex(storh.Index("tags")), storh.WithIndex(storh.Index("kind", "n")))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if _, err := docs.PutWithID(format2ID(i), format2Record(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if _, err := docs.PutWithID(format2ID(i), format2Record(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 50; i < 55; i++ {
		if err := docs.Delete(format2ID(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// format2Final is the records the pinned file holds: id → data.
func format2Final() map[uuidv7.UUID]storh.Map {
	out := map[uuidv7.UUID]storh.Map{}
	for i := range 60 {
		if i < 50 || i >= 55 {
			out[format2ID(i)] = format2Record(i)
		}
	}
	for i := range 10 {
		out[format2ID(i)] = format2Record(100 + i)
	}
	return out
}

// indexValues reads every block and journal record of the file at path:
// "index/bucket key" → value.
func indexValues(t testing.TB, path string) map[string][]byte {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	out := map[string][]byte{}
	err = bdb.View(func(tx *bolt.Tx) error {
		root := tx.Bucket([]byte("docs"))
		for _, b := range []string{"i", "l"} {
			err := root.Bucket([]byte(b)).ForEachBucket(func(name []byte) error {
				return root.Bucket([]byte(b)).Bucket(name).ForEach(func(k, v []byte) error {
					out[fmt.Sprintf("%s/%s %x", b, name, k)] = bytes.Clone(v)
					return nil
				})
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func formatMarker(t testing.TB, path string) uint64 {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var v uint64
	bdb.View(func(tx *bolt.Tx) error {
		v = binary.BigEndian.Uint64(tx.Bucket([]byte("\x00storh")).Get([]byte("format")))
		return nil
	})
	return v
}

// TestFormat2FileReads: today's code opens the pinned file read-only,
// whose indexes hold exactly the pinned blocks and journal records, finds
// through each index what a scan of the records finds, and Verify is
// clean; nothing in the file changes.
func TestFormat2FileReads(t *testing.T) {
	fileOnly(t)
	path := pinnedCopy(t, format2Dir, "format2.db")
	vectors := readHexLines(t, filepath.Join(format2Dir, "index.hex"))
	if got := indexValues(t, path); !mapsEqual(got, vectors) {
		t.Errorf("the file holds %d blocks and records, index.hex %d, or their bytes differ", len(got), len(vectors))
	}
	if m := formatMarker(t, path); m != 2 {
		t.Errorf("format marker %d, want 2", m)
	}
	db, err := storh.Open(path, storh.WithReadOnly())
	if err != nil {
		t.Fatalf("open the format-2 file: %v", err)
	}
	checkPinnedContent(t, db)
	db.Close()
	if got := indexValues(t, path); !mapsEqual(got, vectors) {
		t.Error("a read-only open changed the blocks")
	}
}

// TestFormat2Upgrades: a writable open of the format-2 file chains every
// index's blocks (the same entries under the same keys, the first under
// the head key, each block of version 2) and raises the marker to 5 (the
// upgrade of every open for writing: docs/indexes.md); the
// journal records stay as they were, and the file reads as before. The
// chaining runs in steps of a few hundred bytes here, so that reads and
// Verify meet a file chained part way (TestChainingResumes in the engine
// stops between steps and reads there).
func TestFormat2Upgrades(t *testing.T) {
	fileOnly(t)
	tuneFor(t, "step=300")
	path := pinnedCopy(t, format2Dir, "format2.db")
	before := indexValues(t, path)
	db := openAt(t, path)
	checkPinnedContent(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if m := formatMarker(t, path); m != 5 {
		t.Errorf("format marker %d after a writable open, want 5", m)
	}
	after := indexValues(t, path)
	heads := 0
	for k, v := range after {
		switch {
		case strings.HasPrefix(k, "l/"):
			if !bytes.Equal(before[k], v) {
				t.Errorf("journal record %s changed", k)
			}
		case len(v) == 0 || v[0] != 2:
			t.Errorf("block %s is not of version 2 after the open", k)
		case strings.HasSuffix(k, " 00"):
			heads++
		}
	}
	if heads != 4 {
		t.Errorf("%d indexes have their first block under the head key, want 4", heads)
	}
	db = openAt(t, path, storh.WithReadOnly())
	defer db.Close()
	checkPinnedContent(t, db)
}

// pinnedCopy copies the pinned file dir/name to a scratch directory.
func pinnedCopy(t *testing.T, dir, name string) string {
	t.Helper()
	orig, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkPinnedContent checks that db holds the pinned files' content
// (writeFormat2DB): its four blocked indexes, with changes in their
// journals, find what a scan of the records finds, and Verify is clean.
func checkPinnedContent(t *testing.T, db *storh.DB) {
	t.Helper()
	if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 || rep.Collections != 1 {
		t.Errorf("Verify = %+v, %v", rep, err)
	}
	docs, err := db.Docs("docs")
	if err != nil {
		t.Fatal(err)
	}
	infos, err := docs.Indexes()
	if err != nil || len(infos) != 4 {
		t.Fatalf("Indexes = %v, %v", infos, err)
	}
	journaled := 0
	for _, ix := range infos {
		if ix.Layout != "blocks" {
			t.Errorf("index %s is in layout %q", ix.Name, ix.Layout)
		}
		journaled += ix.Journaled
	}
	if journaled == 0 {
		t.Error("nothing journaled: the pinned file should hold journal records too")
	}
	final := format2Final()
	for _, c := range []struct {
		cond query.Cond
		want func(storh.Map) bool
	}{
		{query.Field("u").Gte(20), func(m storh.Map) bool { return asInt(m["u"]) >= 20 }},
		{query.Field("tag").Eq("t1"), func(m storh.Map) bool { return m["tag"] == "t1" }},
		{query.Field("tags").Contains("m2"), func(m storh.Map) bool { return slices.Contains(m["tags"].([]any), any("m2")) }},
		{query.And(query.Field("kind").Eq("b"), query.Field("n").Lt(3)), func(m storh.Map) bool { return m["kind"] == "b" && asInt(m["n"]) < 3 }},
	} {
		q := query.All().Where(c.cond).RequireIndex()
		got := findIDs(t, docs, q)
		var want []uuidv7.UUID
		for id, m := range final {
			if c.want(m) {
				want = append(want, id)
			}
		}
		slices.SortFunc(want, uuidv7.UUID.Compare)
		if !slices.Equal(got, want) {
			t.Errorf("%v: %d ids, want %d", c.cond, len(got), len(want))
		}
	}
}

// TestFormatMarkerRises: a new file is in format 5 (paths through lists),
// blocked indexes or not; the pinned format-1 file stays in format 1
// through a read-only open and is raised to 5 by an open for writing,
// with its records intact.
func TestFormatMarkerRises(t *testing.T) {
	fileOnly(t)
	tuneFor(t, "layout=") // a file's indexes are blocked
	path := newPath(t)
	db := openAt(t, path)
	c, err := db.Docs("plain")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(storh.Map{"a": 1}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if m := formatMarker(t, path); m != 5 {
		t.Errorf("a file without blocked indexes: format %d, want 5", m)
	}
	db = openAt(t, path)
	ix, err := db.Docs("indexed", storh.WithIndex(storh.Index("a")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Put(storh.Map{"a": 1}); err != nil { // the collection, and its index, come with its first record
		t.Fatal(err)
	}
	db.Close()
	if m := formatMarker(t, path); m != 5 {
		t.Errorf("after a blocked index: format %d, want 5", m)
	}

	old := filepath.Join(t.TempDir(), "format1.db")
	orig, err := os.ReadFile(filepath.Join(format1Dir, "format1.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, old, storh.WithReadOnly())
	db.Close()
	if m := formatMarker(t, old); m != 1 {
		t.Errorf("the format-1 file after a read-only open: format %d, want 1", m)
	}
	db = openAt(t, old)
	d, err := db.Docs("docs", storh.WithIndex(storh.Index("yes")))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.CountMatching(query.All().Where(query.Field("yes").Eq(true)).RequireIndex()); err != nil || n != 1 {
		t.Errorf("the format-1 file's new index counts %d, %v; want 1", n, err)
	}
	db.Close()
	if m := formatMarker(t, old); m != 5 {
		t.Errorf("the format-1 file after an open for writing: format %d, want 5", m)
	}
	if vals, want := rawValues(t, old), readVectors(t); !mapsEqual(vals, want) {
		t.Error("the format-1 file's records changed")
	}
}

func mapsEqual(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func asInt(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	case uint64:
		return int64(n)
	}
	return -1
}
