package engine

import (
	"encoding/binary"
	"fmt"
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
		b.Run("layout=blocks+journal", func(b *testing.B) {
			run(b, newIxCursor(newBlockCursor(bk.Bucket([]byte("blocks")), fail), newSegSource(view, 1)))
		})
		return nil
	})
}
