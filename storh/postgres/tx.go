package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/storhdb/storh-go/storh/kv"
)

const (
	beginWritable = "BEGIN ISOLATION LEVEL READ COMMITTED"
	beginReadOnly = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
)

// tx is a kv.Tx on one pooled connection. Every trip to the server is one
// pgx.Batch: the BEGIN if the transaction has not begun yet, the buffered
// writes of the bucket about to be read, and the read.
type tx struct {
	s        *Store
	ctx      context.Context
	conn     *pgxpool.Conn // nil once the transaction has ended
	writable bool
	begun    bool // BEGIN has been sent
	err      error
	root     *bucket
	dirty    []*bucket           // buckets written in this transaction (pending or not)
	arena    arena               // keys and values handed out, valid until the end
	locked   map[string]bool     // top-level buckets this writer holds: true alone, false shared
	upgrades []int64             // exclusive locks to take with the next statement (HoldAlone)
	notices  notices             // announced, sent with the commit
	quiet    map[string]struct{} // top-level buckets nobody watches: their notices are dropped
	commitID uint64              // the xid of a commit that announced
	snap     *snapshot           // a read-only transaction's, once Sees asked for it
}

var (
	_ kv.Tx     = (*tx)(nil)
	_ kv.Locker = (*tx)(nil)
)

func (t *tx) Bucket(name []byte) kv.Bucket { return t.root.Bucket(name) }

// BucketShared is Bucket holding name shared (see kv.Locker).
func (t *tx) BucketShared(name []byte) kv.Bucket {
	if c := t.root.childHeld(name, true); c != nil {
		return c
	}
	return nil
}

// HoldAlone queues the exclusive lock on top-level bucket name ahead of
// the transaction's next statement, if it holds the bucket shared. One it
// does not hold yet is locked alone when it is looked up.
func (t *tx) HoldAlone(name []byte) {
	if alone, held := t.locked[string(name)]; t.writable && held && !alone {
		t.locked[string(name)] = true
		t.upgrades = append(t.upgrades, t.s.lockKey(name))
	}
}
func (t *tx) CreateBucket(name []byte) (kv.Bucket, error) {
	return t.root.CreateBucket(name)
}
func (t *tx) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	return t.root.CreateBucketIfNotExists(name)
}
func (t *tx) DeleteBucket(name []byte) error { return t.root.DeleteBucket(name) }
func (t *tx) Cursor() kv.Cursor              { return t.root.Cursor() }
func (t *tx) Writable() bool                 { return t.writable }
func (t *tx) Err() error                     { return t.err }

// newBatch starts a round trip, with the BEGIN first if it is the
// transaction's first.
func (t *tx) newBatch() *pgx.Batch {
	b := &pgx.Batch{}
	if !t.begun {
		if t.writable {
			b.Queue(beginWritable)
		} else {
			// The snapshot is taken by the first statement after it;
			// Sees asks for its bounds if it is ever called.
			b.Queue(beginReadOnly)
		}
	}
	for _, key := range t.upgrades {
		b.Queue(lockSQL, key)
	}
	t.upgrades = t.upgrades[:0]
	return b
}

// queueLock queues, if this writable transaction does not hold it yet,
// the lock on the top-level bucket name (shared or exclusive), ahead of
// the statement that looks the bucket up or creates it. The lock is what makes a writer see
// and change a top-level bucket alone (see the package documentation):
// statements after it in the batch run once it is granted, each with a
// snapshot taken then, so they see everything the previous holder
// committed.
func (t *tx) queueLock(b *pgx.Batch, name []byte, shared bool) {
	if !t.writable {
		return
	}
	if _, ok := t.locked[string(name)]; ok {
		return
	}
	if t.locked == nil {
		t.locked = make(map[string]bool, 2)
	}
	t.locked[string(name)] = !shared
	if shared {
		b.Queue(lockSharedSQL, t.s.lockKey(name))
		return
	}
	b.Queue(lockSQL, t.s.lockKey(name))
	// With the bucket alone, find out whether anyone watches it; if not,
	// its notices need not be sent (see watchKey).
	key := string(name)
	b.Queue(quietSQL, t.s.watchKey(key)).QueryRow(func(row pgx.Row) error {
		var nobody bool
		if err := row.Scan(&nobody); err != nil {
			return err
		}
		if nobody {
			if t.quiet == nil {
				t.quiet = make(map[string]struct{}, 2)
			}
			t.quiet[key] = struct{}{}
		}
		return nil
	})
}

const (
	lockSQL       = "SELECT pg_advisory_xact_lock($1)"
	lockSharedSQL = "SELECT pg_advisory_xact_lock_shared($1)"
)

// send makes the round trip. A failure ends the transaction on the server
// (PostgreSQL refuses every statement after a failed one), so it is
// recorded as the transaction's error: reads answer nil from then on and
// Commit fails.
func (t *tx) send(b *pgx.Batch, op string) error {
	t.begun = true
	if err := t.conn.SendBatch(t.ctx, b).Close(); err != nil {
		err = dbErr(op, err)
		if t.err == nil {
			t.err = err
		}
		return err
	}
	return nil
}

// usable returns why the transaction cannot take a write, or nil.
func (t *tx) usable() error {
	switch {
	case t.conn == nil:
		return kv.ErrTxClosed
	case !t.writable:
		return kv.ErrTxNotWritable
	}
	return t.err
}

// readable reports whether a read may go to the server.
func (t *tx) readable() bool { return t.conn != nil && t.err == nil }

// Commit sends every bucket's buffered writes and the COMMIT in one round
// trip. Buckets are flushed in id order and keys in key order, so that
// concurrent transactions take row locks in the same order.
func (t *tx) Commit() error {
	switch {
	case t.conn == nil:
		return fmt.Errorf("postgres: commit: %w", kv.ErrTxClosed)
	case !t.writable:
		return fmt.Errorf("postgres: commit: %w", kv.ErrTxNotWritable)
	case t.err != nil:
		err := t.err
		t.end()
		return fmt.Errorf("postgres: commit after a failed statement: %w", err)
	}
	slices.SortFunc(t.dirty, func(a, b *bucket) int { return cmp.Compare(a.id, b.id) })
	b := t.newBatch()
	for _, d := range t.dirty {
		d.queueFlush(b)
	}
	t.queueNotices(b)
	if t.begun || b.Len() > 1 {
		b.Queue("COMMIT")
		if err := t.send(b, "commit"); err != nil {
			t.end()
			return err
		}
	}
	// A transaction that never reached the server has nothing to commit.
	t.release()
	return nil
}

// Rollback ends the transaction, discarding its writes; after Commit it
// does nothing.
func (t *tx) Rollback() error {
	if t.conn == nil {
		return nil
	}
	hadErr := t.err != nil
	if err := t.end(); err != nil && !hadErr {
		return err
	}
	return nil
}

// end rolls the transaction back on the server if it began there, and
// returns the connection to the pool.
func (t *tx) end() error {
	var err error
	if t.begun {
		if _, rerr := t.conn.Exec(t.ctx, "ROLLBACK"); rerr != nil {
			err = dbErr("rollback", rerr)
		}
	}
	t.release()
	return err
}

// release returns the connection: the pool closes it instead if it is
// still inside a transaction (a failed ROLLBACK).
func (t *tx) release() {
	if t.conn == nil {
		return
	}
	t.conn.Release()
	t.conn = nil
	t.dirty = nil
	t.arena = nil
	t.notices = notices{}
}

// errDeleted is the error of a write to a bucket deleted in this
// transaction.
var errDeleted = errors.New("the bucket was deleted")

// arena hands out copies of keys and values read from the server, carved
// from shared chunks so that a cursor page costs a few allocations, not
// two per row. Chunks double from 4 KiB to 64 KiB, so that a point read or
// a short page does not pay for a large one. Copies are capped, so
// appending to one cannot reach the next.
type arena []byte

const (
	arenaFirst = 4 << 10
	arenaChunk = 64 << 10
)

func (a *arena) copy(b []byte) []byte {
	if len(b) == 0 {
		return []byte{}
	}
	if len(b) > cap(*a)-len(*a) {
		if len(b) > arenaChunk/4 {
			return append([]byte(nil), b...)
		}
		*a = make([]byte, 0, min(arenaChunk, max(arenaFirst, 2*cap(*a), 2*len(b))))
	}
	n := len(*a)
	*a = append(*a, b...)
	return (*a)[n:len(*a):len(*a)]
}
