// Package kv is the storage contract under the storh engine: ordered,
// transactional buckets of byte keys and values, nested by name.
//
// The engine (package storh/engine) writes everything above storage once,
// over this contract: the record codec and its checksums, index
// maintenance, query execution, the queue's states. A backend supplies the
// buckets. The embedded backend is a bbolt file (in storh/engine, whose
// page-level checks, backup and compaction only a file can have); the
// PostgreSQL backend (storh/postgres) keeps each bucket in a table.
//
// # Basics
//
// A Tx sees one consistent state of the store. A bucket holds keys in
// ascending bytewise order; each key holds either a value (possibly empty,
// never nil) or a nested bucket, which cursors show as a key with a nil
// value. A Cursor walks one bucket in key order both ways and seeks the
// first key at or after a given one, so every ordered read the engine does
// (cursor pages, time windows, index ranges) is a seek and a walk.
//
// # Caveats
//
// These rules are bbolt's, and the engine relies on them on every backend:
//
//   - A value passed to Put must not change until the transaction ends: a
//     backend may keep the slice, not a copy, until it commits. Keys are
//     copied: a caller may reuse a key's bytes as soon as Put or Delete
//     returns (the engine keeps one scratch key per collection).
//   - A key or value returned by Get or a Cursor is valid until the
//     transaction ends and must not be modified.
//   - A writable transaction may be used by one goroutine at a time; a
//     read-only one too. Cursors are invalid once their transaction ends.
//   - Get, Cursor moves and Bucket cannot return an error, since on bbolt
//     they cannot fail. A backend whose reads can fail (over a network)
//     records the first failure in its transaction, answers as if the key
//     were missing from then on, refuses to commit, and reports the
//     failure from Err: every caller checks Err before it trusts what a
//     transaction read. Such a backend's transactions are Failers, so a
//     caller can tell a failed read from a missing key at once.
package kv

import (
	"context"
	"errors"
)

// Store is a backend: a source of transactions.
type Store interface {
	// Begin starts a transaction. A store may allow one writable
	// transaction at a time (bbolt) or several (PostgreSQL, which then
	// orders them itself, and fails one of two it cannot order, e.g. a
	// deadlock, with an error wrapping ErrConflict).
	Begin(writable bool) (Tx, error)
	// Close releases the store. Transactions must have ended.
	Close() error
}

// Tx is one transaction. Its top level is a bucket of buckets.
type Tx interface {
	// Bucket returns the top-level bucket name, or nil if there is none.
	Bucket(name []byte) Bucket
	// CreateBucket creates the top-level bucket name; ErrBucketExists if
	// it exists, ErrIncompatibleValue if the key holds a value.
	CreateBucket(name []byte) (Bucket, error)
	// CreateBucketIfNotExists returns the top-level bucket name, creating
	// it if needed.
	CreateBucketIfNotExists(name []byte) (Bucket, error)
	// DeleteBucket deletes the top-level bucket name and everything in
	// it; ErrBucketNotFound if there is none.
	DeleteBucket(name []byte) error
	// Cursor walks the names of the top-level buckets (values are nil).
	Cursor() Cursor
	// Writable reports whether the transaction may write.
	Writable() bool
	// Commit makes a writable transaction's writes durable, all of them
	// or none, and ends it. After a failed read (see Err) it fails. An
	// error means nothing was committed, except one wrapping
	// ErrCommitUnknown.
	Commit() error
	// Rollback discards the transaction's writes and ends it. It may be
	// called after Commit, and then does nothing.
	Rollback() error
	// Err returns the first failure of a read that could not return one
	// (Get, a Cursor move, Bucket), or nil.
	Err() error
}

// Bucket is an ordered set of keys inside a transaction.
type Bucket interface {
	// Get returns the value of key, or nil if the key is missing or holds
	// a nested bucket.
	Get(key []byte) []byte
	// Put sets key to value (not nil). ErrIncompatibleValue if key holds
	// a nested bucket; ErrTxNotWritable in a read-only transaction.
	Put(key, value []byte) error
	// Delete removes key; a missing key is not an error.
	// ErrIncompatibleValue if key holds a nested bucket.
	Delete(key []byte) error
	// Cursor returns a cursor over the bucket's keys.
	Cursor() Cursor
	// Bucket returns the nested bucket name, or nil.
	Bucket(name []byte) Bucket
	// CreateBucket creates the nested bucket name; ErrBucketExists if it
	// exists, ErrIncompatibleValue if the key holds a value.
	CreateBucket(name []byte) (Bucket, error)
	// CreateBucketIfNotExists returns the nested bucket name, creating it
	// if needed; ErrIncompatibleValue if the key holds a value.
	CreateBucketIfNotExists(name []byte) (Bucket, error)
	// DeleteBucket deletes the nested bucket name and everything in it;
	// ErrBucketNotFound if there is none.
	DeleteBucket(name []byte) error
	// Writable reports whether the bucket's transaction may write.
	Writable() bool
	// SetFillPercent tells a backend that splits pages how full to leave
	// them when it splits (0.1 to 1.0): 1.0 for keys that arrive in
	// ascending order, less for keys that arrive anywhere. It lasts for
	// the transaction. Backends without pages ignore it.
	SetFillPercent(fill float64)
}

// Cursor walks one bucket's keys. Every move returns the key and value it
// lands on, or a nil key past either end. A nested bucket's key comes
// with a nil value.
type Cursor interface {
	First() (key, value []byte)
	Last() (key, value []byte)
	// Seek moves to the first key at or after seek.
	Seek(seek []byte) (key, value []byte)
	Next() (key, value []byte)
	Prev() (key, value []byte)
	// Delete removes the key the cursor is on; the next Next moves to
	// the key after it. ErrIncompatibleValue on a nested bucket's key.
	Delete() error
}

// Failer is implemented by the transactions of a backend whose reads can
// fail. Failure returns the failure Err would report as far as the
// transaction knows it, without asking anyone: a backend whose Err goes
// to its server to confirm answers it gave from memory (see ErrStale)
// leaves that to Err, so a caller may ask after every operation, to
// report a failed read from the operation that met it rather than take
// its nil for a missing key.
type Failer interface {
	Failure() error
}

// ReadAhead is implemented by cursors that fetch keys from a server in
// pages. A caller that knows how many keys it will walk after its next
// First, Last or Seek says so, and the first page holds that many (within
// the backend's bounds) instead of growing towards it in round trips.
type ReadAhead interface {
	ReadAhead(n int)
}

// Ranger is implemented by cursors that fetch keys from a server. Range
// confines the cursor to the keys from lo to hi, both included (nil: no
// bound on that side), until Range is called again: its walks end at the
// bounds as they would at the ends of the bucket, and no page reads past
// them.
type Ranger interface {
	Range(lo, hi []byte)
}

// Lasting is implemented by cursors whose keys and values are copies the
// caller owns: they stay valid and unchanged after the transaction ends
// (bbolt's are views of its memory map, valid only inside it). A caller
// may keep them without copying them again.
type Lasting interface {
	Lasting()
}

// Identifier is implemented by buckets that have an identity: a number no
// other bucket of the store has or will ever have, even once this one is
// deleted, so that a caller may remember what it read under it.
type Identifier interface {
	ID() uint64
}

// Inserter is implemented by buckets that store a key the caller knows is
// absent more cheaply than a Put (PostgreSQL: a plain INSERT, not an
// upsert). Insert of a key that is present fails the transaction, at the
// latest at Commit, with an error wrapping ErrConflict.
type Inserter interface {
	Insert(key, value []byte) error
}

// Adder is implemented by the buckets of a Locker's transactions. Add
// adds delta, a run of 8-byte big-endian signed integers, to the integers
// at the same offsets of key's value, as one atomic step on the server: a
// missing key counts as zeros, and a value of another length is replaced
// by delta. It neither reads the value nor waits for other adders to
// commit before the transaction does, so writers that each keep a key of
// their own, or add to one key at commit, never take turns over it. Add
// after a Put or Delete of the key in the same transaction adds to what
// they left; a later Put or Delete replaces the sum.
type Adder interface {
	Add(key, delta []byte) error
}

// Sequencer is implemented by the buckets of a store whose writers run
// at the same time (PostgreSQL), to number runs of entries at commit from
// a counter the backend keeps itself, so that writers of one bucket never
// take turns over the numbers through their commits (bbolt, with one
// writer at a time, needs none of this: the engine numbers entries itself,
// reading and writing a counter in the transaction).
//
// StartSequence makes such a counter for counterKey of bucket counter,
// whose 8-byte big-endian integer is the last number given so far: the
// backend's counter goes on from it, and the integer becomes the floor,
// the highest key trimmed from the sequenced bucket (one less than its
// lowest key now, or the integer itself when it is empty), which the
// commits that trim raise. It is called once per counter, in a writable
// transaction that holds the top-level bucket alone, and done when that
// commits.
//
// At commit, after every other write of the transaction, the backend
// draws the numbers of the runs queued by SequenceRun on one counter as
// one block of consecutive numbers, the runs in the order queued, and
// stores each run as Shape.Tag ‖ entries under the number of its first
// entry: one value, or several of consecutive entries, where it bounds
// its values' size (on PostgreSQL, with 1,000 records of 250 bytes in a
// durable commit, a value per entry holding its record took the commit
// twice as long as without, and a run of 17-byte entries 1.0 to 1.2
// times). A block is drawn under a lock held for the draw alone, not to
// the commit's end, so the numbers increase in the order drawn, not in
// the order of the commits: a number drawn by a transaction still
// committing may become visible after a greater one (Settler tells a
// reader when that can no longer happen). A transaction that does not
// commit leaves its numbers unused; numbers are never reused.
//
// A side value of entry i is stored in Shape.Side under the entry's bytes
// [1, 1+Shape.SideKey) followed by its 8-byte big-endian number.
//
// Then, if TrimRuns asked, and the floor is more than slack below
// last-keep (last: the greatest number the commit drew), the commit
// deletes whole values, oldest first, once their last number is at or
// below last-keep: a value that starts with shape.Tag holds
// (len-1)/shape.Size entries, numbered from its key, any other value
// (stored before the counter started) one; with it go the side values of
// its entries that have a bit of shape.SideFlag set in their first byte.
// max bounds the entries one commit deletes (one value at least), and the
// floor rises to the last number of the values deleted: unless another
// commit is trimming the bucket, which it then leaves to it rather than
// wait. The backend may judge whether a trim is due by the numbers and
// floors its own commits saw, so a commit may leave a trim that is due,
// by numbers other stores drew since, to a later commit: the bucket holds
// more than keep for a while, never less.
//
// Under a shared hold (Locker.BucketShared) a transaction may sequence
// into buckets of the top-level bucket it holds.
type Sequencer interface {
	// StartSequence makes the backend's counter of counterKey in counter
	// (see above).
	StartSequence(counter Bucket, counterKey []byte) error
	// SequenceRun queues run for the commit. All the runs a transaction
	// queues in one bucket must use one counter, made by StartSequence.
	SequenceRun(counter Bucket, counterKey []byte, run Run) error
	// TrimRuns sets how the commit trims the bucket: keep the entries
	// above last-keep, and once more than slack of the others are kept,
	// delete at most max of them (see above).
	TrimRuns(keep, slack int64, max int, shape RunShape) error
}

// RunShape is how a bucket of runs (Sequencer) stores them.
type RunShape struct {
	Tag  byte // a stored value that starts with Tag holds a run
	Size int  // the bytes of one entry
	// Side is the bucket of the side values (nil: none); an entry that
	// has one has a bit of SideFlag set in its first byte, and SideKey of
	// its bytes, from the second on, lead its key.
	Side     Bucket
	SideFlag byte
	SideKey  int
}

// Run is a run of entries for Sequencer.SequenceRun, kept, not copied,
// until the commit.
type Run struct {
	Shape   RunShape
	Entries []byte // Shape.Size bytes each, numbered in order
	// Sides are the side values: Sides[j] of entry SideOf[j].
	SideOf []int
	Sides  [][]byte
}

// Settler is implemented by the buckets of any transaction of a store
// whose buckets are Sequencers.
type Settler interface {
	// SettleSequence waits, outside the transaction and without changing
	// its snapshot, for every transaction that may still store a value
	// numbered from counter's counterKey (the holders of counter's
	// top-level bucket when it is called) to end, and returns the greatest
	// number drawn until then. Every key at or below it that the bucket
	// will ever hold is then visible to a transaction begun after
	// SettleSequence returns: one missing there was trimmed, or never
	// committed. While it waits, new writers of that top-level bucket wait
	// behind it.
	SettleSequence(ctx context.Context, counter Bucket, counterKey []byte) (uint64, error)
}

// Locker is implemented by the writable transactions of a store whose
// writers run at the same time (PostgreSQL; bbolt has one writer at a time
// and needs none of this). A writer holds each top-level bucket it looks
// up until it ends, from its first statement after the lookup on (a store
// that remembers its buckets may answer the lookup without one): alone by
// default, so that whatever it reads there stays as it read it, as under
// bbolt's single writer. A writer that only
// moves rows it locks one by one (a queue's claims and completions) can
// hold the bucket shared instead, beside other shared holders, and then
// takes row locks (RowLocker) for what it changes and adds to counters
// (Adder) rather than rewrite them.
type Locker interface {
	Tx
	// BucketShared is Bucket, but holds the top-level bucket name shared:
	// other transactions that hold it shared run alongside, and one that
	// holds it alone waits for them, as they wait for it. A bucket already
	// held keeps its hold. Under a shared hold a transaction must write
	// only keys whose rows it holds locked (RowLocker), insert keys it
	// believes absent (Inserter: one another holder inserted first fails
	// the transaction with ErrConflict), or add to counters (Adder), and
	// must not create or delete nested buckets; its other reads see what
	// other shared holders commit as they commit it.
	BucketShared(name []byte) Bucket
	// HoldAlone makes the hold on top-level bucket name exclusive from the
	// transaction's next statement on, waiting for the other holders to
	// end. Two shared holders that both ask deadlock, and one of them fails
	// with ErrConflict.
	HoldAlone(name []byte)
}

// RowLocker is implemented by the buckets of a Locker's transactions. A
// lock lasts until the transaction ends, and a locked row reads as last
// committed (or as this transaction wrote it), however long the lock
// took to get.
type RowLocker interface {
	// LockRange locks and returns, in key order, up to n keys at or after
	// from and before to (nil: no bound) with their values, skipping the
	// keys another transaction holds locked. Nested buckets' keys come
	// with nil values.
	LockRange(from, to []byte, n int) (keys, values [][]byte)
	// LockKeys locks the keys present among keys and returns their values,
	// index by index (nil for a missing key). With wait, it waits for
	// another transaction's lock; without, a key another transaction holds
	// is skipped and reads nil, as if it were missing.
	LockKeys(keys [][]byte, wait bool) [][]byte
}

// Shared is implemented by a store that processes other than this one may
// write to at the same time (PostgreSQL; not bbolt, whose file lock keeps
// them out). Its writers announce what they wrote, and listeners in every
// process hear it after the commit, which is how a watcher learns of
// another process's writes.
//
// A topic is the name of a top-level bucket, and announcing costs the
// writers (PostgreSQL orders the commits that notify one at a time), so a
// store may drop a transaction's announcements under a topic that no
// listener watched when the transaction first held that bucket (shared or
// alone). Listener.Watch waits for those transactions to end.
type Shared interface {
	Store
	// Listen starts a listener that calls fn with each Notice of a
	// transaction that commits after Listen returns, in commit order, from
	// one goroutine, until it is stopped or fn returns false. If the store
	// can no longer promise to deliver every notice of the watched topics
	// (a lost connection, a notice it cannot read), fn gets the error once
	// and is not called again. Notices of topics nobody watches may come
	// too.
	Listen(fn func(Notice, error) bool) (Listener, error)
	// Origin identifies this Store in the notices of its writers.
	Origin() uint64
}

// Listener is a running Shared.Listen.
type Listener interface {
	// Watch asks for the notices under topic. It returns once every
	// transaction that may have dropped them has ended: a snapshot taken
	// after it holds those transactions' writes, and every transaction
	// after them announces under topic until the matching Unwatch. Each
	// Watch needs its own Unwatch.
	Watch(topic string) error
	// Unwatch ends one Watch of topic.
	Unwatch(topic string)
	// Stop ends the listener and waits for its goroutine; fn must not
	// call it.
	Stop()
}

// Notice is what one committed transaction announced under one topic.
type Notice struct {
	Topic  string   // what the keys belong to (for the engine, a collection)
	Commit uint64   // the writing transaction, as SharedTx.Sees knows it
	Origin uint64   // the Store that wrote it: SharedTx.Origin of its writer
	Keys   [][]byte // in the order they were announced
}

// SharedTx is implemented by the transactions of a Shared store.
type SharedTx interface {
	Tx
	// Announce queues a notice of key under topic; a writable
	// transaction sends its notices with its commit, and they are lost
	// with a rollback. It may drop them when nobody watches topic (see
	// Shared). The key is copied.
	Announce(topic string, key []byte)
	// CommitID returns, after a successful commit that announced
	// something, the transaction's Notice.Commit value.
	CommitID() uint64
	// Sees reports whether this transaction's snapshot holds the writes
	// of the committed transaction commit; for a writable one, true. A
	// read-only transaction's snapshot is taken by its first read, or by
	// the first Sees, which may ask the server: a caller that will ask
	// after the transaction ends asks once before (any commit will do),
	// and the answers then stay.
	Sees(commit uint64) bool
}

// Exclusive is implemented by a store that processes other than this one
// may write to at the same time (Shared), for work that at most one of
// them should do at once, such as sweeping one collection's expired
// records. A store that only one process writes (a file, under its lock)
// need not implement it.
type Exclusive interface {
	// TryExclusive takes the lock name, held until release is called or
	// until this process loses its hold on the store (it ends, or its
	// connection does): ok is false, at once, when another holder has it,
	// in this process or another. release may be called once.
	TryExclusive(name string) (release func(), ok bool, err error)
}

// Replica is implemented by a store that can read a copy of another
// server's data, which follows that server's commits by replaying them (a
// PostgreSQL hot standby). The notices of Shared do not reach such a
// copy, so a watcher there polls Position instead, and reads again when
// it moved.
type Replica interface {
	Store
	// Replaying reports whether the store reads such a copy and only it,
	// so that it cannot Listen.
	Replaying() bool
	// Position returns how far the copy has replayed its source's changes
	// (once it no longer follows one, how far its own have gone): a number
	// that grows with every commit a read may newly see. Asking costs a
	// round trip that reads nothing else.
	Position() (uint64, error)
}

// Errors a backend returns, wrapped with its own context, so that the
// engine can tell them apart with errors.Is on every backend.
var (
	// ErrTxNotWritable: a write in a read-only transaction.
	ErrTxNotWritable = errors.New("kv: transaction not writable")
	// ErrTxClosed: any use of a transaction that has ended, or of a
	// store that is closed.
	ErrTxClosed = errors.New("kv: transaction closed")
	// ErrBucketExists: CreateBucket of a key that exists.
	ErrBucketExists = errors.New("kv: bucket already exists")
	// ErrBucketNotFound: DeleteBucket of a bucket that does not exist.
	ErrBucketNotFound = errors.New("kv: bucket not found")
	// ErrIncompatibleValue: a value operation on a nested bucket's key,
	// or a bucket operation on a value's key.
	ErrIncompatibleValue = errors.New("kv: incompatible value")
	// ErrKeyRequired: an empty key.
	ErrKeyRequired = errors.New("kv: key required")
	// ErrKeyTooLarge and ErrValueTooLarge: beyond what the backend stores.
	ErrKeyTooLarge   = errors.New("kv: key too large")
	ErrValueTooLarge = errors.New("kv: value too large")
	// ErrConflict: a transaction that could not commit because a
	// concurrent one changed what it read; running it again may succeed.
	ErrConflict = errors.New("kv: transaction conflicts with a concurrent one")
	// ErrCommitUnknown: a Commit that may or may not have committed: the
	// store lost its connection after it sent the commit, and could not
	// find out from the server how the transaction ended. Running the
	// transaction again may apply its writes twice.
	ErrCommitUnknown = errors.New("kv: commit outcome unknown")
	// ErrStale: a read-only transaction's first round trip found that
	// buckets it had already handed out, from what the store remembered
	// of them, were deleted or made again since (by another process).
	// Nothing had been read: the transaction can run again from the
	// start, and then looks them up afresh.
	ErrStale = errors.New("kv: buckets changed since the store last read them")
)
