package engine_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// damageRecords is how many records the damaged-leaf fixture holds, each
// with its own value of the unique index "n".
const damageRecords = 20_000

// damageFixture writes a file with a unique blocked index on "n" over
// damageRecords records, folded into blocks of about 512 bytes (several
// to a bbolt leaf), and returns it with the leaf pages of the index's
// blocks bucket, in key order.
func damageFixture(t *testing.T) (string, []uint64) {
	t.Helper()
	restore, err := tune.Set("layout=blocks,block=512,foldmin=64,foldmax=1000")
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	path := filepath.Join(t.TempDir(), "blocks.db")
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := db.Docs("d", storh.WithIndex(storh.Index("n").Unique()))
	if err != nil {
		t.Fatal(err)
	}
	for start := 0; start < damageRecords; start += 1000 {
		batch := make([]any, 1000)
		for i := range batch {
			batch[i] = storh.Map{"n": start + i}
		}
		if _, err := d.PutMany(batch); err != nil {
			t.Fatal(err)
		}
	}
	if ixs, err := d.Indexes(); err != nil || len(ixs) != 1 || ixs[0].Layout != "blocks" || ixs[0].Journaled != 0 {
		t.Fatalf("Indexes = %+v, %v; want one blocked index, folded", ixs, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var root uint64
	testkit.ViewBolt(t, path, func(btx *bolt.Tx) {
		root = uint64(btx.Bucket([]byte("d")).Bucket([]byte("i")).Bucket([]byte("n")).RootPage())
	})
	leaves := leafPages(t, path, root)
	if len(leaves) < 3 {
		t.Fatalf("the blocks bucket has %d leaves; the test needs a first, a middle and a last", len(leaves))
	}
	return path, leaves
}

// readPage returns page id of the file, with its overflow pages.
func readPage(t *testing.T, path string, id uint64) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := int64(os.Getpagesize())
	p := make([]byte, size)
	if _, err := f.ReadAt(p, int64(id)*size); err != nil {
		t.Fatal(err)
	}
	if overflow := binary.NativeEndian.Uint32(p[12:]); overflow > 0 {
		p = make([]byte, size*int64(overflow+1))
		if _, err := f.ReadAt(p, int64(id)*size); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// leafPages returns the leaves under page id, in key order.
func leafPages(t *testing.T, path string, id uint64) []uint64 {
	t.Helper()
	ne := binary.NativeEndian
	p := readPage(t, path, id)
	switch flags := ne.Uint16(p[8:]); flags {
	case 0x02:
		return []uint64{id}
	case 0x01:
		var out []uint64
		for i := range int(ne.Uint16(p[10:])) {
			out = append(out, leafPages(t, path, ne.Uint64(p[16+16*i+8:]))...)
		}
		return out
	default:
		t.Fatalf("page %d has flags %#x, want a branch or a leaf", id, flags)
		return nil
	}
}

// leafElement returns the key and value of element i of leaf page p.
func leafElement(p []byte, i int) (key, value []byte) {
	ne := binary.NativeEndian
	elem := 16 + 16*i
	pos, ksize, vsize := int(ne.Uint32(p[elem+4:])), int(ne.Uint32(p[elem+8:])), int(ne.Uint32(p[elem+12:]))
	return p[elem+pos : elem+pos+ksize], p[elem+pos+ksize : elem+pos+ksize+vsize]
}

// lastElement is the index of leaf page p's last element.
func lastElement(p []byte) int { return int(binary.NativeEndian.Uint16(p[10:])) - 1 }

// dropLast lowers the element count of leaf page p by one: its last
// element, a whole block, is gone.
func dropLast(p []byte) {
	binary.NativeEndian.PutUint16(p[10:], binary.NativeEndian.Uint16(p[10:])-1)
}

// dropFirst removes the first element of leaf page p: the headers of the
// others move down one place (each points at its key by an offset from
// itself, which grows by a header's 16 bytes) and the count drops.
func dropFirst(p []byte) {
	ne := binary.NativeEndian
	n := int(ne.Uint16(p[10:]))
	for i := 1; i < n; i++ {
		from, to := 16+16*i, 16+16*(i-1)
		copy(p[to:to+16], p[from:from+16])
		ne.PutUint32(p[to+4:], ne.Uint32(p[to+4:])+16)
	}
	ne.PutUint16(p[10:], uint16(n-1))
}

// TestDamagedIndexLeafFailsClosed is the review's reproduction: a leaf of
// a blocked index's blocks bucket loses one element (its count lowered by
// one, or its first element cut out), so a whole block of entries
// vanishes from an otherwise sound file. Every read that crosses the gap
// must fail with ErrCorrupt instead of answering without the block: an
// ordered walk, either way; an equality on a value the block held; a count
// through the index; and a unique check, so that a duplicate of a value in
// the lost block is refused rather than stored. Verify reports the
// missing block, and Repair rebuilds the index whole.
func TestDamagedIndexLeafFailsClosed(t *testing.T) {
	fixture, leaves := damageFixture(t)
	for _, tc := range []struct {
		name string
		leaf uint64
		drop func(p []byte)
		elem func(p []byte) int // the element dropped
	}{
		{"a middle leaf's last element", leaves[len(leaves)/2], dropLast, lastElement},
		{"the last leaf's last element", leaves[len(leaves)-1], dropLast, lastElement},
		{"the first leaf's first element", leaves[0], dropFirst, func([]byte) int { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := testkit.CopyFile(t, fixture)
			p := readPage(t, path, tc.leaf)
			entries, err := engine.BlockEntries(leafElement(p, tc.elem(p)))
			if err != nil || len(entries) == 0 {
				t.Fatalf("the block to drop: %d entries, %v", len(entries), err)
			}
			testkit.EditPage(t, path, tc.leaf, tc.drop)

			db, err := storh.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			d, err := db.Docs("d", storh.WithIndex(storh.Index("n").Unique()))
			if err != nil {
				t.Fatal(err)
			}
			// A value the lost block held: that of the record its middle
			// entry ends with.
			var id uuidv7.UUID
			mid := entries[len(entries)/2]
			copy(id[:], mid[len(mid)-16:])
			rec, err := d.Get(id)
			if err != nil {
				t.Fatalf("the lost block names record %s: %v", id, err)
			}
			lost := int(rec.Data()["n"].(int64))

			for _, dir := range []query.Direction{query.Asc, query.Desc} {
				recs, err := d.Find(query.All().OrderBy("n", dir))
				if !errors.Is(err, storh.ErrCorrupt) {
					t.Errorf("an ordered walk (%v): %d of %d records, %v; want ErrCorrupt", dir, len(recs), damageRecords, err)
				}
			}
			if recs, err := d.Find(query.All().Where(query.Field("n").Eq(lost))); !errors.Is(err, storh.ErrCorrupt) {
				t.Errorf("Find(n == %d), a value of the lost block: %d records, %v; want ErrCorrupt", lost, len(recs), err)
			}
			if n, err := d.CountMatching(query.All().Where(query.Field("n").Gte(0))); !errors.Is(err, storh.ErrCorrupt) && n != damageRecords {
				t.Errorf("CountMatching = %d, %v; want %d or ErrCorrupt", n, err, damageRecords)
			}
			if _, err := d.Put(storh.Map{"n": lost}); !errors.Is(err, storh.ErrCorrupt) {
				t.Errorf("Put of a duplicate of %d under the unique index: %v; want ErrCorrupt", lost, err)
			}
			if n, err := d.Count(); err != nil || n != damageRecords {
				t.Errorf("Count = %d, %v; want %d: the refused duplicate is not stored", n, err, damageRecords)
			}

			var problems []string
			rep, err := db.Verify(func(p storh.Problem) { problems = append(problems, p.String()) })
			if err != nil {
				t.Fatal(err)
			}
			if rep.Problems == 0 || !strings.Contains(strings.Join(problems, "\n"), "is not there") {
				t.Fatalf("Verify found %q; want the missing block", problems)
			}
			if _, err := db.Repair(nil); err != nil {
				t.Fatalf("Repair: %v", err)
			}
			recs, err := d.Find(query.All().OrderBy("n", query.Asc))
			if err != nil || len(recs) != damageRecords {
				t.Fatalf("after Repair, an ordered walk: %d records, %v", len(recs), err)
			}
			if _, err := d.Put(storh.Map{"n": lost}); !errors.Is(err, storh.ErrUniqueViolation) {
				t.Errorf("after Repair, a duplicate of %d: %v; want ErrUniqueViolation", lost, err)
			}
		})
	}
}
