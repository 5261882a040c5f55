package boltpage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/errs"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"
)

// recordsName names the records bucket in the trees drawTree writes, as
// storh names a collection's.
var recordsName = []byte("r")

// scratchBolt opens a bbolt file of the test's own, closed at its end.
func scratchBolt(t *testing.T) *bolt.DB {
	t.Helper()
	bdb, err := bolt.Open(filepath.Join(t.TempDir(), "p.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bdb.Close() })
	return bdb
}

// flatBucket is a scratch file with bucket b of 2000 keys (0 to 1999,
// four bytes each) of 100-byte values: a tree of one branch over leaves.
func flatBucket(t *testing.T) *bolt.DB {
	t.Helper()
	bdb := scratchBolt(t)
	if err := bdb.Update(func(tx *bolt.Tx) error {
		b, _ := tx.CreateBucket([]byte("b"))
		for i := range 2000 {
			b.Put(binary.BigEndian.AppendUint32(nil, uint32(i)), make([]byte, 100))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return bdb
}

// drawTree replaces bucket c of bdb with a collection whose records bucket
// holds keys 0, 3, 6, … (four bytes each) in a tree of one leaf up to
// several levels, some values spilling into overflow pages and some keys
// nested buckets; it returns how many keys it wrote.
func drawTree(rt *rapid.T, bdb *bolt.DB) int {
	n := rapid.IntRange(1, 3000).Draw(rt, "keys")
	big := rapid.IntRange(0, 3).Draw(rt, "big")
	if err := bdb.Update(func(tx *bolt.Tx) error {
		tx.DeleteBucket([]byte("c"))
		c, err := tx.CreateBucket([]byte("c"))
		if err != nil {
			return err
		}
		recs, err := c.CreateBucket(recordsName)
		if err != nil {
			return err
		}
		for i := range n {
			k := uint32(i * 3)
			size := 40 + i%200
			if big > 0 && i%97 == 0 {
				size = 5000 * big // past a page: an overflow leaf
			}
			if i%501 == 7 {
				if _, err := recs.CreateBucket(binary.BigEndian.AppendUint32(nil, k)); err != nil {
					return err
				}
				continue
			}
			if err := recs.Put(binary.BigEndian.AppendUint32(nil, k), bytes.Repeat([]byte{byte(i)}, size)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		rt.Fatal(err)
	}
	return n
}

// TestReaderAgreesWithBolt: a search of the pages finds what bbolt's
// Get finds, present or not, in trees of one leaf up to several levels,
// with values that spill into overflow pages, and with nested buckets
// among the keys (which are not values).
func TestReaderAgreesWithBolt(t *testing.T) {
	bdb := scratchBolt(t)
	rapid.Check(t, func(rt *rapid.T) {
		n := drawTree(rt, bdb)
		if err := bdb.View(func(tx *bolt.Tx) error {
			recs := tx.Bucket([]byte("c")).Bucket(recordsName)
			root := uint64(recs.Root())
			if root == 0 {
				return nil // inline: the direct path does not read it
			}
			r := NewReader(tx)
			for range 200 {
				k := binary.BigEndian.AppendUint32(nil, uint32(rapid.IntRange(0, 3*n+3).Draw(rt, "probe")))
				got, err := r.Get(root, k)
				if err != nil {
					rt.Fatalf("get %x: %v", k, err)
				}
				want := recs.Get(k)
				if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
					rt.Fatalf("get %x: %d bytes, bbolt %d", k, len(got), len(want))
				}
			}
			return nil
		}); err != nil {
			rt.Fatal(err)
		}
	})
}

// TestReaderRefusesDamage: a root outside the file, a page whose
// header is not its own and a page of another kind are ErrCorrupt.
func TestReaderRefusesDamage(t *testing.T) {
	bdb := flatBucket(t)
	bdb.View(func(tx *bolt.Tx) error {
		r := NewReader(tx)
		root := uint64(tx.Bucket([]byte("b")).Root())
		for _, bad := range []uint64{0, 1, uint64(tx.Size()) / r.pageSize, 1 << 40} {
			if _, err := r.Get(bad, []byte("k")); !errors.Is(err, errs.ErrCorrupt) {
				t.Errorf("root %d: %v, want errs.ErrCorrupt", bad, err)
			}
		}
		if v, err := r.Get(root, binary.BigEndian.AppendUint32(nil, 1234)); err != nil || len(v) != 100 {
			t.Errorf("a sound read: %d bytes, %v", len(v), err)
		}
		// A copy of the mapping with the root's header damaged.
		data := bytes.Clone(r.data)
		d := Reader{data: data, pageSize: r.pageSize}
		binary.NativeEndian.PutUint64(data[root*r.pageSize:], root+1)
		if _, err := d.Get(root, []byte("k")); !errors.Is(err, errs.ErrCorrupt) {
			t.Errorf("a page with another page's id: %v, want errs.ErrCorrupt", err)
		}
		binary.NativeEndian.PutUint64(data[root*r.pageSize:], root)
		binary.NativeEndian.PutUint16(data[root*r.pageSize+8:], 0x10) // the freelist's flag
		if _, err := d.Get(root, []byte("k")); !errors.Is(err, errs.ErrCorrupt) {
			t.Errorf("a page of another kind: %v, want errs.ErrCorrupt", err)
		}
		return nil
	})
}
