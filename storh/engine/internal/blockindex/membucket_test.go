package blockindex

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tidwall/btree"

	"github.com/storhdb/storh-go/storh/kv"
)

// memBucket is a kv.Bucket in memory, sorted as the stores sort: the
// package's tests need the storage contract, not a backend. Its cursors
// find their place again from their key at each move, so a write between
// moves is seen as a backend's cursor sees it.
type memBucket struct {
	m    *btree.Map[string, []byte]
	subs map[string]*memBucket
}

func newMemBucket() *memBucket {
	return &memBucket{m: new(btree.Map[string, []byte]), subs: map[string]*memBucket{}}
}

func (b *memBucket) Get(key []byte) []byte {
	v, _ := b.m.Get(string(key))
	return v
}

func (b *memBucket) Put(key, value []byte) error {
	if _, ok := b.subs[string(key)]; ok {
		return kv.ErrIncompatibleValue
	}
	b.m.Set(string(key), bytes.Clone(value))
	return nil
}

func (b *memBucket) Delete(key []byte) error {
	b.m.Delete(string(key))
	return nil
}

func (b *memBucket) Cursor() kv.Cursor { return &memCursor{b: b} }

func (b *memBucket) Bucket(name []byte) kv.Bucket {
	if s, ok := b.subs[string(name)]; ok {
		return s
	}
	return nil
}

func (b *memBucket) CreateBucket(name []byte) (kv.Bucket, error) {
	if _, ok := b.subs[string(name)]; ok {
		return nil, kv.ErrBucketExists
	}
	return b.CreateBucketIfNotExists(name)
}

func (b *memBucket) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	if s, ok := b.subs[string(name)]; ok {
		return s, nil
	}
	if _, ok := b.m.Get(string(name)); ok {
		return nil, kv.ErrIncompatibleValue
	}
	s := newMemBucket()
	b.subs[string(name)] = s
	return s, nil
}

func (b *memBucket) DeleteBucket(name []byte) error {
	if _, ok := b.subs[string(name)]; !ok {
		return kv.ErrBucketNotFound
	}
	delete(b.subs, string(name))
	return nil
}

func (b *memBucket) Writable() bool         { return true }
func (b *memBucket) SetFillPercent(float64) {}

// memCursor walks a memBucket's values (its nested buckets aside, which
// the package never nests in the buckets it reads).
type memCursor struct {
	b   *memBucket
	key string
	on  bool
}

// move lands on the first key from pivot on, forward or back (from the
// end when pivot is nil), past pivot itself when strict.
func (c *memCursor) move(pivot *string, forward, strict bool) ([]byte, []byte) {
	var k string
	var v []byte
	ok := false
	take := func(key string, val []byte) bool {
		if strict && key == *pivot {
			return true
		}
		k, v, ok = key, val, true
		return false
	}
	switch {
	case pivot == nil && forward:
		c.b.m.Scan(take)
	case pivot == nil:
		c.b.m.Reverse(take)
	case forward:
		c.b.m.Ascend(*pivot, take)
	default:
		c.b.m.Descend(*pivot, take)
	}
	c.key, c.on = k, ok
	if !ok {
		return nil, nil
	}
	return []byte(k), v
}

func (c *memCursor) First() ([]byte, []byte) { return c.move(nil, true, false) }
func (c *memCursor) Last() ([]byte, []byte)  { return c.move(nil, false, false) }

func (c *memCursor) Seek(seek []byte) ([]byte, []byte) {
	pivot := string(seek)
	return c.move(&pivot, true, false)
}

func (c *memCursor) Next() ([]byte, []byte) { return c.step(true) }
func (c *memCursor) Prev() ([]byte, []byte) { return c.step(false) }

// step moves one key on from the key the cursor is on, which may be gone.
func (c *memCursor) step(forward bool) ([]byte, []byte) {
	if !c.on {
		return nil, nil
	}
	pivot := c.key
	return c.move(&pivot, forward, true)
}

func (c *memCursor) Delete() error { return errors.New("memCursor: Delete is not used by the package") }

// testBuckets returns an update helper that runs fn on one bucket, the
// same bucket at every call, as the transactions of a store would.
func testBuckets(t testing.TB) func(fn func(b kv.Bucket) error) {
	b := newMemBucket()
	return func(fn func(kv.Bucket) error) {
		t.Helper()
		if err := fn(b); err != nil {
			t.Fatal(err)
		}
	}
}
