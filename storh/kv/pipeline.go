package kv

import "bytes"

// Pipeliner is implemented by the transactions of a store whose reads are
// round trips to a server (PostgreSQL). Pipeline carries out reads of any
// of the transaction's buckets in one round trip, in the order given: each
// returns what it would return made alone at its place in that order (the
// writes buffered in its bucket before the call included), and a lock one
// read takes is held when the reads after it run. So reads that do not
// depend on each other's answers, say a job's state row to lock and its
// payload to read, cost one trip instead of one each.
//
// A store whose reads cost no trip (bbolt) need not implement it: the
// function Pipeline makes the reads one by one there.
type Pipeliner interface {
	Pipeline(reads ...*Read)
}

// ReadOp is what a Read does.
type ReadOp uint8

const (
	// Get reads the values of Keys, each as Bucket.Get does.
	Get ReadOp = iota + 1
	// LockKeys locks and reads Keys, waiting for other transactions'
	// locks: RowLocker.LockKeys(Keys, true).
	LockKeys
	// TryKeys locks and reads the Keys no other transaction holds:
	// RowLocker.LockKeys(Keys, false).
	TryKeys
	// LockRange locks and reads up to N keys from From on and before To
	// that no other transaction holds: RowLocker.LockRange(From, To, N).
	LockRange
)

// Read is one read of a Pipeline, and its answer. A read of a bucket that
// is not a RowLocker (a store with one writer at a time, where no other
// transaction could hold a row) reads without locks what the same read
// with them would: a LockRange walks a cursor.
type Read struct {
	Bucket Bucket
	Op     ReadOp
	Keys   [][]byte // Get, LockKeys, TryKeys: the keys to read
	From   []byte   // LockRange: the first key (nil: the bucket's first)
	To     []byte   // LockRange: the bound after the last (nil: none)
	N      int      // LockRange: at most this many keys

	// Found are the keys a LockRange locked, in key order. Values are the
	// values read, index by index with Keys (nil for a key that is
	// missing, a nested bucket's, or skipped as another's) or with Found
	// (nil for a nested bucket's). After a failed round trip (see Failer)
	// a range found nothing and every value is nil.
	Found  [][]byte
	Values [][]byte
}

// Pipeline carries out reads in tx: in one round trip where tx is a
// Pipeliner, one by one where it is not.
func Pipeline(tx Tx, reads ...*Read) {
	if p, ok := tx.(Pipeliner); ok {
		p.Pipeline(reads...)
		return
	}
	for _, r := range reads {
		r.Found, r.Values = nil, nil
		locker, locks := r.Bucket.(RowLocker)
		switch {
		case r.Op == LockRange && locks:
			r.Found, r.Values = locker.LockRange(r.From, r.To, r.N)
		case r.Op == LockRange:
			r.Found, r.Values = walkRange(r.Bucket, r.From, r.To, r.N)
		case r.Op != Get && locks:
			r.Values = locker.LockKeys(r.Keys, r.Op == LockKeys)
		default:
			r.Values = make([][]byte, len(r.Keys))
			for i, k := range r.Keys {
				r.Values[i] = r.Bucket.Get(k)
			}
		}
	}
}

// walkRange is LockRange without locks.
func walkRange(b Bucket, from, to []byte, n int) (keys, values [][]byte) {
	c := b.Cursor()
	k, v := c.First()
	if from != nil {
		k, v = c.Seek(from)
	}
	for ; k != nil && len(keys) < n && (to == nil || bytes.Compare(k, to) < 0); k, v = c.Next() {
		keys, values = append(keys, k), append(values, v)
	}
	return keys, values
}
