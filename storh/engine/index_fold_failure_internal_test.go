package engine

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/kv"
)

// fullUnderEntries is a store whose writes into the index blocks bucket
// ("i") fail, while armed, as a full disk fails them: a fold's rewrite of
// blocks meets it, the writes it follows (records, journal) do not. While
// lost is set, reads there fail as a lost connection fails them on a
// server: they answer nil, and the transaction reports the failure
// (kv.Failer).
type fullUnderEntries struct {
	kv.Store
	armed, lost atomic.Bool
}

var errConnLost = errors.New("connection lost")

func (s *fullUnderEntries) Begin(writable bool) (kv.Tx, error) {
	tx, err := s.Store.Begin(writable)
	if err != nil {
		return nil, err
	}
	return &fullTx{Tx: tx, s: s}, nil
}

type fullTx struct {
	kv.Tx
	s      *fullUnderEntries
	failed error
}

func (t *fullTx) Failure() error { return t.failed }

func (t *fullTx) Bucket(name []byte) kv.Bucket { return t.wrap(t.Tx.Bucket(name), false) }

func (t *fullTx) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	b, err := t.Tx.CreateBucketIfNotExists(name)
	return t.wrap(b, false), err
}

func (t *fullTx) wrap(b kv.Bucket, blocks bool) kv.Bucket {
	if b == nil {
		return nil
	}
	return &fullBucket{inner: b, s: t.s, tx: t, blocks: blocks}
}

// inner names the embedded bucket, whose own name would clash with the
// Bucket method.
type inner = kv.Bucket

type fullBucket struct {
	inner
	s      *fullUnderEntries
	tx     *fullTx
	blocks bool // under the index blocks bucket
}

func (b *fullBucket) Bucket(name []byte) kv.Bucket {
	return b.tx.wrap(b.inner.Bucket(name), b.blocks || bytes.Equal(name, bucketIndexEntries))
}

func (b *fullBucket) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	nb, err := b.inner.CreateBucketIfNotExists(name)
	return b.tx.wrap(nb, b.blocks || bytes.Equal(name, bucketIndexEntries)), err
}

func (b *fullBucket) CreateBucket(name []byte) (kv.Bucket, error) {
	nb, err := b.inner.CreateBucket(name)
	return b.tx.wrap(nb, b.blocks || bytes.Equal(name, bucketIndexEntries)), err
}

func (b *fullBucket) Get(key []byte) []byte {
	if b.blocks && b.s.lost.Load() {
		b.tx.failed = errConnLost
		return nil
	}
	return b.inner.Get(key)
}

func (b *fullBucket) Cursor() kv.Cursor {
	if b.blocks && b.s.lost.Load() {
		b.tx.failed = errConnLost
		return lostCursor{}
	}
	return b.inner.Cursor()
}

// lostCursor answers as a cursor of a server whose connection is lost:
// nothing.
type lostCursor struct{}

func (lostCursor) First() ([]byte, []byte)      { return nil, nil }
func (lostCursor) Last() ([]byte, []byte)       { return nil, nil }
func (lostCursor) Seek([]byte) ([]byte, []byte) { return nil, nil }
func (lostCursor) Next() ([]byte, []byte)       { return nil, nil }
func (lostCursor) Prev() ([]byte, []byte)       { return nil, nil }
func (lostCursor) Delete() error                { return errConnLost }

func (b *fullBucket) Put(key, value []byte) error {
	if b.blocks && b.s.armed.Load() {
		return fmt.Errorf("writing a page: %w", syscall.ENOSPC)
	}
	return b.inner.Put(key, value)
}

// A fold that fails because the store refuses its writes (a full disk)
// found nothing wrong with the index: the index's journal still holds every
// change its blocks lack, so the index stays readable and its answers
// whole, FoldError reports the store's error (not ErrCorrupt), and the next
// fold that can write ends it. (The fold's store error became ErrCorrupt,
// and every read of the index failed until Repair.)
func TestFoldStoreFailureKeepsIndexReadable(t *testing.T) {
	setTune(t, "layout=blocks,block=128,foldmin=4,foldmax=16,step=512")
	bdb, err := bolt.Open(filepath.Join(t.TempDir(), "full.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	store := &fullUnderEntries{Store: boltStore{db: bdb}}
	db, err := OpenStore(store, "full", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := Handle{Name: "c", Kind: KindDocs, Indexes: []IndexSpec{{Name: "v", Paths: [][]string{{"v"}}}}}
	puts := 0
	putWith := func(foldNow bool) {
		t.Helper()
		putAt(t, db, h, puts, map[string]any{"v": puts % 5}, foldNow)
		puts++
	}
	put := func() { t.Helper(); putWith(true) }
	entries := func() int {
		t.Helper()
		n := 0
		if err := db.View(func(tx *Tx) error {
			c, err := tx.Coll("c", 0, false)
			if err != nil {
				return err
			}
			ix, err := c.index("v")
			if err != nil {
				return err
			}
			cur, err := ix.cursor()
			if err != nil {
				return err
			}
			for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
				n++
			}
			return cursorDamage(cur)
		}); err != nil {
			t.Fatalf("reading the index after %d puts: %v", puts, err)
		}
		return n
	}
	put()
	store.armed.Store(true)
	for range 40 {
		put()
	}
	foldErr := db.FoldError()
	if foldErr == nil {
		t.Fatal("no fold failed with the blocks bucket refusing writes: the test folds nothing")
	}
	if errors.Is(foldErr, errs.ErrCorrupt) || !errors.Is(foldErr, errs.ErrTooLarge) {
		t.Fatalf("FoldError with a full disk: %v; want ErrTooLarge, not ErrCorrupt", foldErr)
	}
	if n := entries(); n != puts {
		t.Fatalf("the index holds %d entries after %d puts", n, puts)
	}
	store.armed.Store(false)
	put()
	if err := db.FoldError(); err != nil {
		t.Fatalf("FoldError after a fold that could write: %v", err)
	}
	if n := entries(); n != puts {
		t.Fatalf("the index holds %d entries after %d puts", n, puts)
	}

	// A fold whose reads of blocks fail on a lost connection found nothing
	// missing: it read nothing (it took the empty answer for a missing
	// block, and the index for damaged). The writes come first, folding
	// nothing, so that only the fold meets the lost connection (the
	// invariant checks of a storh_invariants build read blocks in every
	// write).
	for range 40 {
		putWith(false)
	}
	store.lost.Store(true)
	db.blocked.folds.add("c", "v")
	db.runFolds()
	store.lost.Store(false)
	foldErr = db.FoldError()
	if foldErr == nil {
		t.Fatal("no fold failed with the reads of blocks failing")
	}
	if errors.Is(foldErr, errs.ErrCorrupt) || !errors.Is(foldErr, errConnLost) {
		t.Fatalf("FoldError with a lost connection: %v; want the connection's error, not ErrCorrupt", foldErr)
	}
	if n := entries(); n != puts {
		t.Fatalf("the index holds %d entries after %d puts", n, puts)
	}
}
