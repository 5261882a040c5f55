package boltpage

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"
)

// recordsOf is LayoutMismatch's sample: the records bucket of top-level
// bucket name, when there is one with pages of its own.
func recordsOf(tx *bolt.Tx, name string) func() (*bolt.Bucket, string) {
	return func() (*bolt.Bucket, string) {
		c := tx.Bucket([]byte(name))
		if c == nil {
			return nil, ""
		}
		recs := c.Bucket(recordsName)
		if recs == nil || recs.Root() == 0 {
			return nil, ""
		}
		return recs, "the records of " + name
	}
}

// TestLayoutCheckPassesBoltFiles: the layout check finds nothing to
// object to in files bbolt wrote, with trees of one leaf up to several
// levels, overflow values and nested buckets, and an empty file; read
// through another file, or with the reader seeing a leaf element's key
// elsewhere than bbolt does, it objects.
func TestLayoutCheckPassesBoltFiles(t *testing.T) {
	bdb := scratchBolt(t)
	file, err := os.Open(bdb.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if err := bdb.View(func(tx *bolt.Tx) error {
		if why := LayoutMismatch(file, tx, recordsOf(tx, "c")); why != "" {
			t.Errorf("an empty file: %s", why)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(rt *rapid.T) {
		drawTree(rt, bdb)
		if err := bdb.View(func(tx *bolt.Tx) error {
			if why := LayoutMismatch(file, tx, recordsOf(tx, "c")); why != "" {
				rt.Fatalf("a file bbolt wrote: %s", why)
			}
			return nil
		}); err != nil {
			rt.Fatal(err)
		}
	})

	other := flatBucket(t)
	if err := other.View(func(tx *bolt.Tx) error {
		if why := LayoutMismatch(file, tx, recordsOf(tx, "c")); !strings.Contains(why, "no meta page") {
			t.Errorf("another file's meta pages: %q, want a mismatch", why)
		}
		// The reader over a copy of the mapping whose first leaf of b
		// holds its second key (0001) one byte later than bbolt reads it.
		r := NewReader(tx)
		recs := tx.Bucket([]byte("b"))
		data := bytes.Clone(r.data)
		id := uint64(recs.Root())
		for {
			p := data[id*r.pageSize:]
			if binary.NativeEndian.Uint16(p[8:]) == leafPage {
				pos := p[pageHeader+elemSize+4:]
				binary.NativeEndian.PutUint32(pos, binary.NativeEndian.Uint32(pos)+1)
				break
			}
			id = branchChild(p, 0)
		}
		moved := Reader{data: data, pageSize: r.pageSize}
		if why := sameEntries(moved, uint64(recs.Root()), recs.Cursor(), "b"); why == "" {
			t.Error("a key read elsewhere than bbolt reads it: no mismatch")
		}
		if why := sameEntries(r, uint64(recs.Root()), recs.Cursor(), "b"); why != "" {
			t.Errorf("the same tree, read as it is: %s", why)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
