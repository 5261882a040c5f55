package testkit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/kv"
)

// Damage rewrites the stored value of record id in collection coll of the
// closed bbolt database at path through edit, behind storh's back: a
// collection's records are in its bucket's "r" bucket, under their 16-byte
// ids.
func Damage(t testing.TB, path, coll string, id []byte, edit func(v []byte)) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket([]byte(coll))
		if root == nil {
			return errors.New("no collection bucket")
		}
		recs := root.Bucket([]byte("r"))
		if recs == nil {
			return errors.New("no records bucket")
		}
		v := recs.Get(id)
		if v == nil {
			return errors.New("no such record")
		}
		v = append([]byte(nil), v...)
		edit(v)
		return recs.Put(id, v)
	}); err != nil {
		t.Fatalf("damage: %v", err)
	}
}

// ViewBolt runs fn in a read transaction of the closed bbolt database at
// path, opened read-only (a process that holds it for writing fails the
// test after a few seconds instead of hanging it).
func ViewBolt(t testing.TB, path string, fn func(*bolt.Tx)) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("bolt.Open(%s): %v", path, err)
	}
	defer bdb.Close()
	if err := bdb.View(func(tx *bolt.Tx) error { fn(tx); return nil }); err != nil {
		t.Fatalf("view %s: %v", path, err)
	}
}

// digest hashes a tree of buckets as tagged, length-prefixed elements, so
// that no two different trees hash alike: 'B' a top-level bucket's name
// ... 'E' its end, 'k' a key, then 'v' its value or '{' ... '}' the
// nested bucket under it.
type digest struct{ h hash.Hash }

func (d digest) put(tag byte, b []byte) {
	var n [9]byte
	n[0] = tag
	binary.BigEndian.PutUint64(n[1:], uint64(len(b)))
	d.h.Write(n[:])
	d.h.Write(b)
}

func (d digest) sum() string { return hex.EncodeToString(d.h.Sum(nil)) }

// DigestBolt hashes every bucket name, key and value of tx, nested buckets
// included: two files hash alike when they hold the same data, whatever
// their pages. It equals DigestKV of a store holding the same tree.
func DigestBolt(tx *bolt.Tx) string {
	d := digest{sha256.New()}
	_ = tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		d.put('B', name)
		digestBucket(d, b, (*bolt.Bucket).Cursor, (*bolt.Bucket).Bucket)
		d.put('E', nil)
		return nil
	})
	return d.sum()
}

// DigestKV is DigestBolt through the storage contract (a PostgreSQL
// store), failing with the transaction's read error if it has one.
func DigestKV(tx kv.Tx) (string, error) {
	d := digest{sha256.New()}
	c := tx.Cursor()
	for name, _ := c.First(); name != nil; name, _ = c.Next() {
		d.put('B', name)
		digestBucket(d, tx.Bucket(name), kv.Bucket.Cursor, kv.Bucket.Bucket)
		d.put('E', nil)
	}
	return d.sum(), tx.Err()
}

// digestBucket feeds d the keys and values of b, nested buckets included,
// for the buckets of either store: cursor and nested are its methods.
func digestBucket[B any, C interface {
	First() ([]byte, []byte)
	Next() ([]byte, []byte)
}](d digest, b B, cursor func(B) C, nested func(B, []byte) B) {
	c := cursor(b)
	for k, v := c.First(); k != nil; k, v = c.Next() {
		d.put('k', k)
		if v == nil {
			d.put('{', nil)
			digestBucket(d, nested(b, k), cursor, nested)
			d.put('}', nil)
			continue
		}
		d.put('v', v)
	}
}

// EditPage rewrites page id of the closed bbolt file at path through edit,
// behind bbolt's back: pages are the machine's page size, as bbolt writes
// them.
func EditPage(t testing.TB, path string, id uint64, edit func(p []byte)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := os.Getpagesize()
	p := make([]byte, size)
	if _, err := f.ReadAt(p, int64(id)*int64(size)); err != nil {
		t.Fatal(err)
	}
	edit(p)
	if _, err := f.WriteAt(p, int64(id)*int64(size)); err != nil {
		t.Fatal(err)
	}
}

// CopyFile copies the file at src into the test's own directory, for a
// test that damages a copy of a fixture, and returns the copy's path.
func CopyFile(t testing.TB, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "damaged.db")
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}
