package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/storhdb/storh-go/storh/engine/internal/blockindex"
	"github.com/storhdb/storh-go/storh/kv"
)

// benchBuckets opens a bbolt file through the engine's adapter and returns
// an update helper that runs fn on a bucket inside one transaction.
func benchBuckets(b *testing.B) func(fn func(b kv.Bucket) error) {
	db, err := Open(filepath.Join(b.TempDir(), "b.db"), Options{UnsafeNoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return func(fn func(b kv.Bucket) error) {
		b.Helper()
		if err := db.run(true, func(ktx kv.Tx) error {
			bk, err := ktx.CreateBucketIfNotExists([]byte("t"))
			if err != nil {
				return err
			}
			return fn(bk)
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// journalView journals the changes (puts, and deletes of the keys in del)
// as one transaction would, in the bucket journal, and returns the view
// of that journal.
func journalView(journal kv.Bucket, puts, dels [][]byte) (*blockindex.View, uint64, error) {
	p := &blockindex.Pending{}
	for _, k := range puts {
		p.Add(k, false)
	}
	for _, k := range dels {
		p.Add(k, true)
	}
	seq, _, _, err := p.Journal(journal, 0)
	if err != nil {
		return nil, 0, err
	}
	v, err := blockindex.ReadView(journal, 0, seq)
	return v, seq, err
}

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
	slices.SortFunc(keys, bytes.Compare)
	update := benchBuckets(b)
	var viewPuts [][]byte
	for i := n; i < n+20_000; i++ {
		viewPuts = append(viewPuts, key(i*7))
	}
	var view *blockindex.View
	var seq uint64
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
		journal, _ := bk.CreateBucket([]byte("journal"))
		for _, k := range keys {
			if err := keysB.Put(k, nil); err != nil {
				return err
			}
		}
		var err error
		if view, seq, err = journalView(journal, viewPuts, nil); err != nil {
			return err
		}
		return blockindex.WriteBlocks(blocks, keys)
	})
	update(func(bk kv.Bucket) error {
		fail := func(err error) { b.Fatal(err) }
		b.Run("layout=keys", func(b *testing.B) { run(b, bk.Bucket([]byte("keys")).Cursor()) })
		b.Run("layout=blocks", func(b *testing.B) { run(b, blockindex.NewBlockCursor(bk.Bucket([]byte("blocks")), "walk", true, fail)) })
		b.Run("layout=blocks/seeks", func(b *testing.B) {
			// Point reads, as a unique check or an equality makes: a seek
			// each, spread over the index.
			cur := blockindex.NewBlockCursor(bk.Bucket([]byte("blocks")), "seeks", true, fail)
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
			run(b, blockindex.NewCursor(blockindex.NewBlockCursor(bk.Bucket([]byte("blocks")), "walk", true, fail), view.Source(seq)))
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
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal)
	var puts, dels [][]byte
	for i := range changes {
		if i%4 == 0 {
			dels = append(dels, keys[(i*37)%n])
		} else {
			puts = append(puts, key(n+i*13))
		}
	}
	var view *blockindex.View
	var seq uint64
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
		journal, err := ktx.CreateBucket([]byte("journal"))
		if err != nil {
			return err
		}
		if view, seq, err = journalView(journal, puts, dels); err != nil {
			return err
		}
		return blockindex.WriteBlocks(bk, keys)
	}); err != nil {
		b.Fatal(err)
	}
	rollback := errors.New("rollback")
	b.ReportAllocs()
	for b.Loop() {
		err := db.run(true, func(ktx kv.Tx) error {
			if _, err := blockindex.Fold(ktx.Bucket([]byte("blocks")), view, seq, nil, math.MaxInt); err != nil {
				return err
			}
			return rollback
		})
		if err != rollback {
			b.Fatal(err)
		}
	}
}
