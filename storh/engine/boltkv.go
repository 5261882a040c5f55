package engine

import (
	"bytes"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/storhdb/storh-go/storh/kv"
)

// The embedded backend: package kv's contract on a bbolt file. Store, Tx
// and Bucket hold one pointer each, so wrapping a bbolt value in a kv
// interface does not allocate, and their methods are direct calls into
// bbolt; a cursor carries the little state its fixes need. What only a file
// can do (page checks, backup, compaction, file statistics) reaches the
// *bolt.DB and *bolt.Tx underneath through boltFile and boltTxOf.

type boltStore struct {
	db *bolt.DB
	// file is the open database the store is the file of, when there is
	// one: its transactions begin through it (DB.beginBolt), which refuses
	// them once the file has failed.
	file *DB
}

func (s boltStore) Begin(writable bool) (kv.Tx, error) {
	var tx *bolt.Tx
	var err error
	if s.file != nil {
		tx, err = s.file.beginBolt(writable)
	} else {
		tx, err = s.db.Begin(writable)
	}
	if err != nil {
		return nil, boltErr(err)
	}
	return boltTx{tx}, nil
}

func (s boltStore) Close() error { return boltErr(s.db.Close()) }

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) Bucket(name []byte) kv.Bucket { return wrapBucket(t.tx.Bucket(name)) }

func (t boltTx) CreateBucket(name []byte) (kv.Bucket, error) {
	b, err := t.tx.CreateBucket(name)
	return wrapBucket(b), boltErr(err)
}

func (t boltTx) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	b, err := t.tx.CreateBucketIfNotExists(name)
	return wrapBucket(b), boltErr(err)
}

func (t boltTx) DeleteBucket(name []byte) error { return boltErr(t.tx.DeleteBucket(name)) }
func (t boltTx) Cursor() kv.Cursor              { return newBoltCursor(t.tx.Cursor()) }
func (t boltTx) Writable() bool                 { return t.tx.Writable() }
func (t boltTx) Commit() error                  { return boltErr(t.tx.Commit()) }
func (t boltTx) Err() error                     { return nil }

// Rollback after Commit is a no-op, as the contract asks; bbolt reports
// ErrTxClosed then.
func (t boltTx) Rollback() error {
	if err := t.tx.Rollback(); err != nil && !errors.Is(err, berrors.ErrTxClosed) {
		return boltErr(err)
	}
	return nil
}

type boltBucket struct{ b *bolt.Bucket }

// wrapBucket keeps a missing bucket a nil interface, not an interface
// holding a nil pointer.
func wrapBucket(b *bolt.Bucket) kv.Bucket {
	if b == nil {
		return nil
	}
	return boltBucket{b}
}

func (b boltBucket) Get(key []byte) []byte       { return b.b.Get(key) }
func (b boltBucket) Put(key, value []byte) error { return boltErr(b.b.Put(key, value)) }
func (b boltBucket) Delete(key []byte) error     { return boltErr(b.b.Delete(key)) }
func (b boltBucket) Cursor() kv.Cursor           { return newBoltCursor(b.b.Cursor()) }
func (b boltBucket) Bucket(name []byte) kv.Bucket {
	return wrapBucket(b.b.Bucket(name))
}

func (b boltBucket) CreateBucket(name []byte) (kv.Bucket, error) {
	nb, err := b.b.CreateBucket(name)
	return wrapBucket(nb), boltErr(err)
}

func (b boltBucket) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	nb, err := b.b.CreateBucketIfNotExists(name)
	return wrapBucket(nb), boltErr(err)
}

func (b boltBucket) DeleteBucket(name []byte) error { return boltErr(b.b.DeleteBucket(name)) }
func (b boltBucket) Writable() bool                 { return b.b.Writable() }
func (b boltBucket) SetFillPercent(fill float64)    { b.b.FillPercent = fill }

// boltCursor is bbolt's cursor made to keep the contract over leaf pages
// that deletes emptied earlier in the same write transaction (bbolt merges
// them only when it commits). Over them bbolt's own cursor loops forever in
// Last when the bucket is empty, returns nil from Prev as if at the first
// key, and after Delete skips the key that follows the deleted one. Forward
// moves (First, Seek, Next) are sound, so the fixes lean on them, and cost
// nothing unless bbolt's answer is the suspect one.
type boltCursor struct {
	c bolt.Cursor
	// key is where the cursor is (nil off either end); deleted holds the
	// key Delete removed, while gone says the cursor has not moved since.
	key     []byte
	deleted []byte
	gone    bool
}

func newBoltCursor(c *bolt.Cursor) *boltCursor { return &boltCursor{c: *c} }

func (c *boltCursor) at(k, v []byte) ([]byte, []byte) {
	c.key, c.gone = k, false
	return k, v
}

func (c *boltCursor) First() ([]byte, []byte)        { return c.at(c.c.First()) }
func (c *boltCursor) Seek(k []byte) ([]byte, []byte) { return c.at(c.c.Seek(k)) }

// Last asks First whether the bucket is empty before bbolt's Last, which
// never returns on a bucket whose every key this transaction deleted.
func (c *boltCursor) Last() ([]byte, []byte) {
	if k, _ := c.c.First(); k == nil {
		return c.at(nil, nil)
	}
	return c.at(c.c.Last())
}

// Next after Delete seeks past the deleted key instead of trusting bbolt,
// whose cursor did not step back when the entry under it went away.
func (c *boltCursor) Next() ([]byte, []byte) {
	if c.gone {
		return c.at(c.c.Seek(c.deleted))
	}
	return c.at(c.c.Next())
}

func (c *boltCursor) Prev() ([]byte, []byte) {
	from := c.key
	if c.gone {
		// Stand on the key after the deleted one, or past the end.
		from = c.deleted
		if k, _ := c.c.Seek(c.deleted); k == nil {
			return c.Last()
		}
	}
	k, v := c.c.Prev()
	if k == nil && from != nil {
		return c.before(from)
	}
	return c.at(k, v)
}

// before settles a nil from bbolt's Prev: the start of the bucket if no
// key sorts before from; otherwise bbolt stopped at an emptied page, and
// the cursor moves to the last key before from, found walking forward.
func (c *boltCursor) before(from []byte) ([]byte, []byte) {
	probe := c.c.Bucket().Cursor()
	first, _ := probe.First()
	if first == nil || bytes.Compare(first, from) >= 0 {
		c.c.First() // bbolt leaves a cursor that ran off the start on the first key
		return c.at(nil, nil)
	}
	last := first
	for k, _ := probe.Next(); k != nil && bytes.Compare(k, from) < 0; k, _ = probe.Next() {
		last = k
	}
	return c.at(c.c.Seek(last))
}

func (c *boltCursor) Delete() error {
	if c.key != nil {
		c.deleted = append(c.deleted[:0], c.key...) // before bbolt drops the key
	}
	if err := c.c.Delete(); err != nil {
		return boltErr(err)
	}
	c.gone = c.key != nil
	return nil
}

// boltFile is what the bbolt store offers beyond package kv's contract:
// the bbolt database under it, for what only a file can do. The engine
// asserts it once, when it takes a store (DB.setStore), and boltTxOf at
// Begin (newTx): the file is found through the store, never kept beside
// it, and a read costs no assertion of its own. Its methods are unexported:
// the engine's page checks read the file's descriptor too, which only its
// own Open has, so no store from outside may claim a bbolt file.
type boltFile interface{ boltDB() *bolt.DB }

// boltTxOf is the bbolt transaction under a kv.Tx of the bbolt store.
type boltTxOf interface{ boltTxn() *bolt.Tx }

func (s boltStore) boltDB() *bolt.DB { return s.db }
func (t boltTx) boltTxn() *bolt.Tx   { return t.tx }

// boltOf returns the bbolt transaction under tx, or nil on another
// backend.
func boltOf(tx kv.Tx) *bolt.Tx {
	if t, ok := tx.(boltTxOf); ok {
		return t.boltTxn()
	}
	return nil
}

// boltErrs pairs bbolt's errors with the contract's. The bbolt error stays
// in the chain: the engine's own mapping also looks at the errno under a
// failed write (a full disk, a file size limit).
var boltErrs = []struct{ bolt, kv error }{
	{berrors.ErrTxNotWritable, kv.ErrTxNotWritable},
	{berrors.ErrDatabaseReadOnly, kv.ErrTxNotWritable},
	{berrors.ErrTxClosed, kv.ErrTxClosed},
	{berrors.ErrDatabaseNotOpen, kv.ErrTxClosed},
	{berrors.ErrBucketExists, kv.ErrBucketExists},
	{berrors.ErrBucketNotFound, kv.ErrBucketNotFound},
	{berrors.ErrIncompatibleValue, kv.ErrIncompatibleValue},
	{berrors.ErrKeyRequired, kv.ErrKeyRequired},
	{berrors.ErrBucketNameRequired, kv.ErrKeyRequired},
	{berrors.ErrKeyTooLarge, kv.ErrKeyTooLarge},
	{berrors.ErrValueTooLarge, kv.ErrValueTooLarge},
}

// boltErr wraps a bbolt error in the contract's matching sentinel.
func boltErr(err error) error {
	if err == nil {
		return nil
	}
	for _, e := range boltErrs {
		if errors.Is(err, e.bolt) {
			return fmt.Errorf("%w (%w)", e.kv, err)
		}
	}
	return err
}
