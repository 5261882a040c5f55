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
	// After reads, for each of Keys, the first key after it and before
	// Ends at the same index, and its value: what a cursor's Seek past
	// the key finds, when it is in bounds. Found and Values answer index
	// by index with Keys (nil: none in bounds).
	After
)

// Read is one read of a Pipeline, and its answer. A read of a bucket that
// is not a RowLocker (a store with one writer at a time, where no other
// transaction could hold a row) reads without locks what the same read
// with them would: a LockRange walks a cursor.
type Read struct {
	Bucket Bucket
	Op     ReadOp
	Keys   [][]byte // Get, LockKeys, TryKeys: the keys to read; After: the keys to read after
	Ends   [][]byte // After: the bound of each of Keys
	From   []byte   // LockRange: the first key (nil: the bucket's first)
	To     []byte   // LockRange: the bound after the last (nil: none)
	N      int      // LockRange: at most this many keys

	// Follow, with LockRange, reads in each of these buckets the value
	// under each value the range found, taken as a key, with the range:
	// an index entry's record, a queue's pending entry's job.
	Follow []Follow

	// Found are the keys a LockRange locked, in key order, or those an
	// After found, index by index with Keys (nil: none). Values are the
	// values read, index by index with Keys (nil for a key that is
	// missing, a nested bucket's, or skipped as another's) or with Found
	// (nil for a nested bucket's). Followed are, for each of Follow, the
	// values read there, index by index with Found (nil where it holds
	// none). After a failed round trip (see Failer) a range found nothing
	// and every value is nil.
	Found    [][]byte
	Values   [][]byte
	Followed [][][]byte
}

// Follow is a bucket a LockRange follows the values it finds into (see
// Read.Follow).
type Follow struct {
	Bucket Bucket
	// Lock locks the rows followed, waiting for other transactions'
	// locks, as LockKeys does; each is read as its lock finds it.
	Lock bool
}

// Pipeline carries out reads in tx: in one round trip where tx is a
// Pipeliner, one by one where it is not.
func Pipeline(tx Tx, reads ...*Read) {
	if p, ok := tx.(Pipeliner); ok {
		p.Pipeline(reads...)
		return
	}
	for _, r := range reads {
		r.Found, r.Values, r.Followed = nil, nil, nil
		switch {
		case r.Op == LockRange:
			if locker, ok := r.Bucket.(RowLocker); ok {
				r.Found, r.Values = locker.LockRange(r.From, r.To, r.N)
			} else {
				r.Found, r.Values = walkRange(r.Bucket, r.From, r.To, r.N)
			}
			r.Followed = make([][][]byte, len(r.Follow))
			for i, f := range r.Follow {
				r.Followed[i] = readKeys(f.Bucket, r.Values, f.Lock, true)
			}
		case r.Op == After:
			r.Found, r.Values = seekAfter(r.Bucket, r.Keys, r.Ends)
		default:
			r.Values = readKeys(r.Bucket, r.Keys, r.Op != Get, r.Op == LockKeys)
		}
	}
}

// readKeys reads keys of b one by one, or with RowLocker.LockKeys where
// lock asks for it and b has it.
func readKeys(b Bucket, keys [][]byte, lock, wait bool) [][]byte {
	if locker, ok := b.(RowLocker); ok && lock {
		return locker.LockKeys(keys, wait)
	}
	// One cursor for them all: a Get makes one of its own, which costs
	// bbolt an allocation each.
	values := make([][]byte, len(keys))
	c := b.Cursor()
	for i, k := range keys {
		if len(k) == 0 {
			continue
		}
		if found, v := c.Seek(k); bytes.Equal(found, k) {
			values[i] = v
		}
	}
	return values
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

// seekAfter is an After read with a cursor.
func seekAfter(b Bucket, keys, ends [][]byte) (found, values [][]byte) {
	found, values = make([][]byte, len(keys)), make([][]byte, len(keys))
	c := b.Cursor()
	for i, key := range keys {
		k, v := c.Seek(key)
		if k != nil && bytes.Equal(k, key) {
			k, v = c.Next()
		}
		if k != nil && bytes.Compare(k, ends[i]) < 0 {
			found[i], values[i] = k, v
		}
	}
	return found, values
}
