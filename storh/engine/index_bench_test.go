package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/storhdb/storh-go/storh/kv"
)

// BenchmarkIndexWalk walks 1000 consecutive entries of a 100k-entry index
// stored each way: a bbolt key per entry, blocks alone, and blocks with a
// journal view of 20k changes spread over the key space, as a fresh
// import leaves it.
func BenchmarkIndexWalk(b *testing.B) {
	const n, walk = 100_000, 1000
	key := func(i int) []byte {
		k := []byte{entryWhole, 0x60}
		k = fmt.Appendf(k, "status-%d", i%10)
		k = append(k, 0)
		var id [16]byte
		binary.BigEndian.PutUint64(id[:], uint64(i))
		return append(k, id[:]...)
	}
	var keys [][]byte
	for i := range n {
		keys = append(keys, key(i))
	}
	sortKeys := func(ks [][]byte) [][]byte { return sortedUnique(ks) }
	keys = sortKeys(keys)
	update := testBuckets(b)
	var viewOps []ixOp
	for i := n; i < n+20_000; i++ {
		viewOps = append(viewOps, ixOp{key: key(i * 7), seq: 1})
	}
	sortOps(viewOps)
	view := (&ixView{}).with(newSegment(viewOps), 1)
	start := keys[n/2]
	run := func(b *testing.B, cur kv.Cursor) {
		b.ReportAllocs()
		for b.Loop() {
			k, _ := cur.Seek(start)
			for i := 1; i < walk && k != nil; i++ {
				k, _ = cur.Next()
			}
			if k == nil {
				b.Fatal("walked off the end")
			}
		}
	}
	update(func(bk kv.Bucket) error {
		keysB, _ := bk.CreateBucket([]byte("keys"))
		blocks, _ := bk.CreateBucket([]byte("blocks"))
		for _, k := range keys {
			if err := keysB.Put(k, nil); err != nil {
				return err
			}
		}
		return writeBlocks(blocks, keys)
	})
	update(func(bk kv.Bucket) error {
		fail := func(err error) { b.Fatal(err) }
		b.Run("layout=keys", func(b *testing.B) { run(b, bk.Bucket([]byte("keys")).Cursor()) })
		b.Run("layout=blocks", func(b *testing.B) { run(b, newBlockCursor(bk.Bucket([]byte("blocks")), fail)) })
		b.Run("layout=blocks/seeks", func(b *testing.B) {
			// Point reads, as a unique check or an equality makes: a seek
			// each, spread over the index.
			cur := newBlockCursor(bk.Bucket([]byte("blocks")), fail)
			b.ReportAllocs()
			for b.Loop() {
				for i := 0; i < n; i += n / walk {
					if k, _ := cur.Seek(keys[i]); k == nil {
						b.Fatal("a seek found nothing")
					}
				}
			}
		})
		b.Run("layout=blocks+journal", func(b *testing.B) {
			run(b, newIxCursor(newBlockCursor(bk.Bucket([]byte("blocks")), fail), newSegSource(view, 1)))
		})
		return nil
	})
}

// BenchmarkFold folds 20k changes (puts of new keys and deletes of old
// ones, spread over the key space) into the blocks of a 100k-entry index,
// in one transaction that is rolled back: the block rewrites a fold
// makes, without the commit's I/O.
func BenchmarkFold(b *testing.B) {
	const n, changes = 100_000, 20_000
	key := func(i int) []byte {
		k := []byte{entryWhole, 0x04}
		k = binary.BigEndian.AppendUint64(k, uint64(i%5000)<<20)
		var id [16]byte
		binary.BigEndian.PutUint64(id[:], uint64(i))
		return append(k, id[:]...)
	}
	var keys [][]byte
	for i := range n {
		keys = append(keys, key(i))
	}
	keys = sortedUnique(keys)
	var ops []ixOp
	for i := range changes {
		if i%4 == 0 {
			ops = append(ops, ixOp{key: keys[(i*37)%n], seq: 1, del: true})
		} else {
			ops = append(ops, ixOp{key: key(n + i*13), seq: 1})
		}
	}
	sortOps(ops)
	ops = (&ixView{}).with(newSegment(ops), 1).flatten(1)
	db, err := Open(filepath.Join(b.TempDir(), "fold.db"), Options{UnsafeNoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := db.run(true, func(ktx kv.Tx) error {
		bk, err := ktx.CreateBucket([]byte("blocks"))
		if err != nil {
			return err
		}
		return writeBlocks(bk, keys)
	}); err != nil {
		b.Fatal(err)
	}
	rollback := errors.New("rollback")
	b.ReportAllocs()
	for b.Loop() {
		err := db.run(true, func(ktx kv.Tx) error {
			w := blockWriter{blocks: ktx.Bucket([]byte("blocks"))}
			src := &flatSource{ops: ops}
			for k, _ := src.current(); k != nil; k, _ = src.current() {
				if err := w.rewrite(src); err != nil {
					return err
				}
			}
			return rollback
		})
		if err != rollback {
			b.Fatal(err)
		}
	}
}
