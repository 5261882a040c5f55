package boltpage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/errs"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"
)

// TestPageCursorAgreesWithBolt: random walks (First, Last, Seek to keys
// present, absent, below and past them all, then runs of Next and Prev
// that cross leaves and fall off either end) stand where bbolt's cursor
// stands, key and value, nested buckets shown as keys without values, in
// trees of one leaf up to several levels with overflow values.
func TestPageCursorAgreesWithBolt(t *testing.T) {
	bdb := scratchBolt(t)
	rapid.Check(t, func(rt *rapid.T) {
		n := drawTree(rt, bdb)
		if err := bdb.View(func(tx *bolt.Tx) error {
			recs := tx.Bucket([]byte("c")).Bucket(recordsName)
			root := uint64(recs.Root())
			if root == 0 {
				return nil // inline: the direct path does not read it
			}
			ours, theirs := NewCursor(NewReader(tx), root), recs.Cursor()
			same := func(what string, k, v, wk, wv []byte) {
				if !bytes.Equal(k, wk) || (k == nil) != (wk == nil) || !bytes.Equal(v, wv) || (v == nil) != (wv == nil) {
					rt.Fatalf("%s: at %x (%d bytes, value %t), bbolt at %x (%d bytes, value %t)", what, k, len(v), v != nil, wk, len(wv), wv != nil)
				}
				if ours.err != nil {
					rt.Fatalf("%s: %v", what, ours.err)
				}
			}
			for range rapid.IntRange(1, 20).Draw(rt, "walks") {
				var k, v, wk, wv []byte
				var what string
				switch start := rapid.IntRange(0, 2).Draw(rt, "start"); start {
				case 0:
					what = "First"
					k, v = ours.First()
					wk, wv = theirs.First()
				case 1:
					what = "Last"
					k, v = ours.Last()
					wk, wv = theirs.Last()
				default:
					// Keys are multiples of 3: most probes miss, some lie
					// past the last key.
					seek := binary.BigEndian.AppendUint32(nil, uint32(rapid.IntRange(0, 3*n+3).Draw(rt, "seek")))
					what = fmt.Sprintf("Seek(%x)", seek)
					k, v = ours.Seek(seek)
					wk, wv = theirs.Seek(seek)
				}
				same(what, k, v, wk, wv)
				if k == nil {
					continue // bbolt's cursor does not step back from off the end
				}
				forward := rapid.Bool().Draw(rt, "forward")
				for i := range rapid.SampledFrom([]int{1, 5, 300, 5000}).Draw(rt, "steps") {
					if forward {
						k, v = ours.Next()
						wk, wv = theirs.Next()
					} else {
						k, v = ours.Prev()
						wk, wv = theirs.Prev()
					}
					same(fmt.Sprintf("%s then step %d (forward %t)", what, i, forward), k, v, wk, wv)
					if k == nil {
						break
					}
				}
			}
			return nil
		}); err != nil {
			rt.Fatal(err)
		}
	})
}

// TestPageCursorRefusesDamage: a root outside the file, a leaf whose
// header names another page, and an element that points past its page
// end the walk with ErrCorrupt kept in err, never a fault or a wrong key.
func TestPageCursorRefusesDamage(t *testing.T) {
	bdb := flatBucket(t)
	bdb.View(func(tx *bolt.Tx) error {
		r := NewReader(tx)
		root := uint64(tx.Bucket([]byte("b")).Root())
		walk := func(c *Cursor) int {
			n := 0
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				n++
			}
			return n
		}
		if c := NewCursor(r, root); walk(c) != 2000 || c.err != nil {
			t.Fatalf("a sound walk: %v", c.err)
		}
		for _, bad := range []uint64{0, 1, uint64(tx.Size()) / r.pageSize} {
			if c := NewCursor(r, bad); walk(c) != 0 || !errors.Is(c.err, errs.ErrCorrupt) {
				t.Errorf("root %d: %v, want errs.ErrCorrupt", bad, c.err)
			}
		}
		// The first leaf, in a copy of the mapping, damaged two ways.
		c := NewCursor(r, root)
		c.First()
		leaf := c.path[len(c.path)-1].id
		data := bytes.Clone(r.data)
		d := Reader{data: data, pageSize: r.pageSize}
		at := leaf * r.pageSize
		binary.NativeEndian.PutUint64(data[at:], leaf+1)
		if c := NewCursor(d, root); walk(c) != 0 || !errors.Is(c.err, errs.ErrCorrupt) {
			t.Errorf("a leaf with another page's id: %v, want errs.ErrCorrupt", c.err)
		}
		binary.NativeEndian.PutUint64(data[at:], leaf)
		e := at + pageHeader + 3*elemSize // the fourth element
		binary.NativeEndian.PutUint32(data[e+12:], uint32(r.pageSize)*4)
		c = NewCursor(d, root)
		if got := walk(c); got != 3 || !errors.Is(c.err, errs.ErrCorrupt) {
			t.Errorf("an element past its page: walked %d keys, %v; want 3 and errs.ErrCorrupt", got, c.err)
		}
		c = NewCursor(d, root)
		if c.Seek(binary.BigEndian.AppendUint32(nil, 3)); !errors.Is(c.err, errs.ErrCorrupt) {
			t.Errorf("a seek onto it: %v, want errs.ErrCorrupt", c.err)
		}
		return nil
	})
}
