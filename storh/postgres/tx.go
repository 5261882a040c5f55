package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
	dirty    []*bucket // buckets written in this transaction (pending or not)
	// sequenced are the buckets with values numbered at commit, in the
	// order they were first given one (sequence.go).
	sequenced []*bucket
	drew      bool                // the commit's batch draws numbers (see drawSQL)
	seen      map[string]*seqSeen // what the commit sees of its sequences (see queueSequences)
	arena     arena               // keys and values handed out, valid until the end
	locked    map[string]bool     // top-level buckets this writer holds: true alone, false shared
	upgrades  []string            // top-level buckets to hold alone from the next statement (HoldAlone)
	// A writer's top-level buckets taken from the store's cache: their
	// locks and, after them, the checks that fail the transaction if a
	// subtree changed, go with its next statement (see holdCached).
	deferred []hold
	asserts  []assertion
	assumed  []string            // the names of those subtrees: forgotten if a check fails
	notices  notices             // announced, sent with the commit
	quiet    map[string]struct{} // top-level buckets nobody watches: their notices are dropped
	asking   map[string]int64    // top-level buckets whose question is on its way: the watch key tried
	commitID uint64              // the transaction's xid, once committed
	snap     *snapshot           // a read-only transaction's, once Sees asked for it

	// Subtrees taken from the store's cache: the checks to send with the
	// first round trip, those it found changed, and what the caller
	// learnt from them meanwhile.
	checks   []check
	stale    []check
	observed []observation
	answered int                 // checks the current round trip has answered
	reshape  map[string]struct{} // top-level buckets whose subtree this writer changed
}

// hold is a lock on a top-level bucket still to be taken.
type hold struct {
	name   []byte
	shared bool
}

// assertion is a cached subtree a writer uses: its top-level bucket's
// name, id and generation.
type assertion struct {
	name    []byte
	id, gen int64
}

// check is a cached subtree to check, and the buckets made from it.
type check struct {
	tree *tree
	top  *bucket
}

// observation is an answer the caller had from an unchecked subtree:
// whether parent's key name is a nested bucket, and which.
type observation struct {
	parent *bucket
	name   string
	child  *bucket
}

var (
	_ kv.Tx     = (*tx)(nil)
	_ kv.Locker = (*tx)(nil)
	_ kv.Failer = (*tx)(nil)
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
	for i := range t.deferred {
		if string(t.deferred[i].name) == string(name) {
			t.deferred[i].shared = false
			t.locked[string(name)] = true
			return
		}
	}
	if alone, held := t.locked[string(name)]; t.writable && held && !alone {
		t.locked[string(name)] = true
		t.upgrades = append(t.upgrades, string(name))
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

// Err returns the first failure of a read. A read-only transaction that
// answered from a cached subtree without going to the server checks it
// first: the answers it gave may have been stale (see trip).
func (t *tx) Err() error {
	t.settle()
	return t.err
}

// Failure is Err without the checks of cached subtrees: the failure a
// round trip met, which needs none to know.
func (t *tx) Failure() error { return t.err }

// settle sends the checks of cached subtrees that no read has taken to
// the server yet, on their own.
func (t *tx) settle() {
	if len(t.checks) > 0 && t.readable() {
		_ = t.trip("bucket", func(*pgx.Batch) {})
	}
}

// newBatch starts a round trip, with the BEGIN first if it is the
// transaction's first.
func (t *tx) newBatch() *pgx.Batch { return t.openBatch(true) }

// openBatch is newBatch, without the BEGIN if begin is false: a batch
// without one is a transaction of its own, implicit, which the server
// commits when it reaches the batch's end (the protocol's Sync), and
// rolls back if a statement fails.
func (t *tx) openBatch(begin bool) *pgx.Batch {
	b := &pgx.Batch{}
	if !t.begun && begin {
		if t.writable {
			b.Queue(beginWritable)
		} else {
			// The snapshot is taken by the first statement after it;
			// Sees asks for its bounds if it is ever called.
			b.Queue(beginReadOnly)
		}
	}
	for _, h := range t.deferred {
		t.queueHold(b, h.name, h.shared, t.takeAssertion(h.name))
	}
	t.deferred = t.deferred[:0]
	for _, name := range t.upgrades {
		b.Queue(t.s.reg.holdAlone, []byte(name), t.s.lockKey([]byte(name)))
	}
	t.upgrades = t.upgrades[:0]
	// Checks of subtrees whose bucket this writer already held: after
	// the locks, so that they see what the last exclusive holder
	// committed; before anything that uses the subtrees' tables.
	for _, a := range t.asserts {
		b.Queue(t.s.reg.assert, a.name, a.id, a.gen)
	}
	t.asserts = t.asserts[:0]
	for _, c := range t.checks {
		b.Queue(t.s.reg.check, []byte(c.top.name)).Query(func(rows pgx.Rows) error {
			t.answered++
			same := false
			for rows.Next() {
				var id, gen int64
				if err := rows.Scan(&id, &gen); err != nil {
					return err
				}
				same = id == c.tree.id && gen == c.tree.gen
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if same {
				c.top.walk(func(d *bucket) { d.unchecked = false })
			} else {
				t.stale = append(t.stale, c)
			}
			return nil
		})
	}
	t.checks = nil
	return b
}

// observe records, while b's subtree is unchecked, what the caller
// learns from it about key.
func (t *tx) observe(b *bucket, key []byte) {
	t.observed = append(t.observed, observation{parent: b, name: string(key), child: b.children[string(key)]})
}

// trip makes a round trip: the BEGIN and the checks of cached subtrees
// if they are due, then the statements build queues. A subtree found
// changed is looked up, the caller's buckets are moved onto it, and the
// statements are made and sent again, so build must reset whatever its
// callbacks fill.
//
// The checks ride with a transaction's first trip, so nothing it read has
// reached the caller when one fails, only buckets: if the buckets the
// caller used are all still there, the read goes on as though it had
// looked them up first. If one is gone, or one it found missing is
// there, or one it took the id of has another, what the caller did with
// them cannot be undone, and the transaction fails with kv.ErrStale: it
// can be run again from the start.
func (t *tx) trip(op string, build func(*pgx.Batch)) error {
	for {
		checks := t.checks
		t.answered = 0
		b := t.newBatch()
		build(b)
		err := t.conn.SendBatch(t.ctx, b).Close()
		t.begun = true
		if err != nil && t.answered < len(checks) {
			// The batch failed before its checks ran: pgx prepares a
			// statement it has not seen before in a trip of its own, which
			// fails on a table dropped since the cache was filled.
			t.stale = checks
		}
		if len(t.stale) > 0 {
			if err := t.restore(op, err != nil); err != nil {
				return err
			}
			continue
		}
		t.observed = nil
		if err != nil {
			return t.fail(op, err)
		}
		return nil
	}
}

// restore replaces the stale subtrees the first round trip found with
// what the registry holds, in the transaction's snapshot. A failure of
// that trip (a table dropped since the cache was filled) ended the
// transaction on the server: as nothing it read reached the caller, a
// new one begins.
func (t *tx) restore(op string, failed bool) error {
	stale, observed := t.stale, t.observed
	t.stale, t.observed = nil, nil
	if failed {
		if _, err := t.conn.Exec(t.ctx, "ROLLBACK"); err != nil {
			return t.fail(op, err)
		}
		t.begun = false
	}
	for _, c := range stale {
		name := []byte(c.top.name)
		t.s.forgetTree(c.top.name)
		found, err := t.lookup(&bucket{tx: t, children: map[string]*bucket{}}, name, false)
		if err != nil {
			return err
		}
		holder := &bucket{tx: t, children: map[string]*bucket{}}
		if real := t.plant(holder, name, found); real == nil || !adopt(c.top, real) {
			c.top.walk(func(d *bucket) { d.deleted, d.unchecked = true, false })
			t.root.children[c.top.name] = nil
		}
		c.top.walk(func(d *bucket) { d.top = c.top })
	}
	for _, o := range observed {
		if o.parent.deleted || o.parent.children[o.name] != o.child {
			top := o.name
			if o.parent.top != nil {
				top = o.parent.top.name
			}
			return t.fail(op, fmt.Errorf("%w: another store deleted or made bucket %q or a bucket in it; run the read again", kv.ErrStale, top))
		}
	}
	return nil
}

// adopt moves c, made from a stale subtree, onto real, the same bucket as
// the registry now holds it, keeping the caller's buckets where they are
// still the same. It reports false if c's id was handed out and is not
// real's.
func adopt(c, real *bucket) bool {
	if c.idSeen && c.id != real.id {
		return false
	}
	c.id, c.sql, c.unchecked, c.idSeen = real.id, real.sql, false, false
	children := make(map[string]*bucket, len(real.children))
	ok := true
	for name, rc := range real.children {
		if cc := c.children[name]; cc != nil {
			ok = adopt(cc, rc) && ok
			rc = cc
		}
		children[name] = rc
	}
	for name, cc := range c.children {
		if cc != nil && children[name] != cc {
			cc.walk(func(d *bucket) { d.deleted, d.unchecked = true, false })
		}
	}
	c.children = children
	return ok
}

// reshaped records that this writer creates or deletes parent's child
// name, so that a commit drops the store's cached subtree it changes.
func (t *tx) reshaped(parent *bucket, name []byte) {
	top := string(name)
	if parent.id != 0 {
		top = parent.top.name
	}
	if t.reshape == nil {
		t.reshape = make(map[string]struct{}, 1)
	}
	t.reshape[top] = struct{}{}
}

// queueLock queues, if this writable transaction does not hold it yet,
// the lock on top-level bucket name (shared or alone), ahead of the
// statement that looks the bucket up or creates it. The lock is what
// makes a writer see and change a top-level bucket alone (see the package
// documentation): statements after it in the batch run once it is
// granted, each with a snapshot taken then, so they see everything the
// previous holder committed.
func (t *tx) queueLock(b *pgx.Batch, name []byte, shared bool) {
	if t.holds(name, shared) {
		t.queueHold(b, name, shared, nil)
	}
}

// holds records that this writer holds top-level bucket name from its
// next statement on, and reports whether that lock is still to be
// queued: false in a read-only transaction, or for a bucket it holds.
func (t *tx) holds(name []byte, shared bool) bool {
	if !t.writable {
		return false
	}
	if _, ok := t.locked[string(name)]; ok {
		return false
	}
	if t.locked == nil {
		t.locked = make(map[string]bool, 2)
	}
	t.locked[string(name)] = !shared
	return true
}

// holdCached is queueLock for a top-level bucket whose subtree tr a
// writer takes from the store's cache: the lock goes with its next
// statement, and with it a check that fails the transaction, with an
// error wrapping kv.ErrConflict, if the subtree is no longer tr. So a
// writer that reads nothing before it commits sends it all in one round
// trip, and one that uses a subtree another store changed meanwhile
// changes nothing: run again, it looks the subtree up afresh.
func (t *tx) holdCached(name []byte, shared bool, tr *tree) {
	if t.holds(name, shared) {
		t.deferred = append(t.deferred, hold{name: name, shared: shared})
	}
	t.asserts = append(t.asserts, assertion{name: name, id: tr.id, gen: tr.gen})
	t.assumed = append(t.assumed, string(name))
}

// takeAssertion removes and returns the check queued for top-level
// bucket name, if there is one.
func (t *tx) takeAssertion(name []byte) *assertion {
	for i, a := range t.asserts {
		if string(a.name) == string(name) {
			t.asserts = slices.Delete(t.asserts, i, i+1)
			return &a
		}
	}
	return nil
}

// queueHold queues the hold of top-level bucket name, shared or alone, in
// one statement (see holdSQL). What makes the hold is the bucket's
// registry row, locked FOR SHARE (shared) or FOR NO KEY UPDATE (alone): a
// row lock that waited for another writer reads the row as that writer
// committed it, so with a, the check of the subtree the writer took from
// the cache, a changed generation or a deleted bucket leaves no row and
// the statement fails with staleCode. A bucket without a registry row
// locks nothing: it has not been made, and a writer that makes it inserts
// the row, which a concurrent maker of the same name waits for and then
// fails on. Ahead of the row lock, the transaction-level advisory lock of
// the name, in the same mode, is the queue: PostgreSQL grants a row lock
// FOR SHARE while an exclusive locker waits for the current sharers, so a
// stream of shared holders could keep an exclusive one waiting for ever,
// where the lock manager grants advisory locks in the order asked; with
// it, the row lock never waits. After both, the question whether anyone
// watches the bucket: if not, its notices need not be sent (see
// watchKeys); the aggregate is computed once the row is locked.
func (t *tx) queueHold(b *pgx.Batch, name []byte, shared bool, a *assertion) {
	key := string(name)
	watch := t.s.watchKey(key, rand.IntN(watchStripes))
	if t.asking == nil {
		t.asking = make(map[string]int64, 2)
	}
	t.asking[key] = watch
	lock := t.s.lockKey(name)
	var q *pgx.QueuedQuery
	switch {
	case a == nil && shared:
		q = b.Queue(t.s.reg.holdShared, name, watch, lock)
	case a == nil:
		q = b.Queue(t.s.reg.hold, name, watch, lock)
	case shared:
		q = b.Queue(t.s.reg.holdCheckedShared, name, watch, lock, a.id, a.gen)
	default:
		q = b.Queue(t.s.reg.holdChecked, name, watch, lock, a.id, a.gen)
	}
	q.QueryRow(func(row pgx.Row) error {
		var nobody bool
		if err := row.Scan(nil, &nobody); err != nil {
			return err
		}
		delete(t.asking, key)
		if nobody {
			if t.quiet == nil {
				t.quiet = make(map[string]struct{}, 2)
			}
			t.quiet[key] = struct{}{}
		}
		return nil
	})
}

// send makes the round trip. A failure ends the transaction on the server
// (PostgreSQL refuses every statement after a failed one), so it is
// recorded as the transaction's error: reads answer nil from then on and
// Commit fails.
func (t *tx) send(b *pgx.Batch, op string) error {
	t.begun = true
	if err := t.conn.SendBatch(t.ctx, b).Close(); err != nil {
		return t.fail(op, err)
	}
	return nil
}

// fail records err, from op, as the transaction's error if it has none
// yet, and returns it.
func (t *tx) fail(op string, err error) error {
	t.forgetStale(err)
	err = dbErr(op, err)
	if t.err == nil {
		t.err = err
	}
	return err
}

// forgetStale drops from the store's cache the subtrees this writer took
// from it when err says one of them changed: its check failed, or a
// statement met a table dropped since. The transaction then fails, and
// its next run looks them up.
func (t *tx) forgetStale(err error) {
	var pe *pgconn.PgError
	if len(t.assumed) == 0 || !errors.As(err, &pe) || (pe.Code != staleCode && pe.Code != "42P01") {
		return
	}
	for _, name := range t.assumed {
		t.s.forgetTree(name)
	}
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
// trip, with the BEGIN, locks and checks of a transaction that has not
// been to the server yet. Buckets are flushed in id order and keys in key
// order, so that concurrent transactions take row locks in the same order.
// Before the COMMIT goes the transaction's commit marker (see
// commitOutcome), which also returns its id.
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
	// A transaction that has not been to the server goes in one batch,
	// and needs neither BEGIN nor COMMIT: the batch is one implicit
	// transaction, at the session's READ COMMITTED (see setRuntime). A
	// store that reads from a standby asks where the primary's WAL ends
	// after the COMMIT, which must then be explicit.
	implicit := !t.begun && t.s.standby == nil
	b := t.openBatch(!implicit)
	opening := b.Len()
	for _, d := range t.dirty {
		d.queueFlush(b)
	}
	// Last of the writes: the counters' row locks are held from here to
	// the end of the commit only.
	t.queueSequences(b)
	t.queueNotices(b)
	// A transaction that never reached the server and wrote nothing has
	// nothing to commit.
	if t.begun || b.Len() > opening {
		token := newToken()
		b.Queue(t.s.marks.mark, token).QueryRow(func(row pgx.Row) error { return scanXid(row, &t.commitID) })
		var pos *uint64
		if !implicit {
			b.Queue("COMMIT")
			pos = t.s.queueCommitPosition(b)
		}
		if err := t.sendCommit(b, token); err != nil {
			return err
		}
		t.s.committed(pos)
		t.s.saw(t.seen)
		t.s.pruneMarks()
	}
	for name := range t.reshape {
		t.s.forgetTree(name)
	}
	t.release()
	return nil
}

// sendCommit sends the batch that ends with the COMMIT. If the server
// answers with an error, or the batch never left, nothing was committed
// and the transaction ends. If the connection is lost once the batch went
// out, the COMMIT may have been carried out or not: the store asks the
// server, by the transaction's commit marker token (see commitOutcome).
func (t *tx) sendCommit(b *pgx.Batch, token []byte) error {
	t.begun = true
	pc := t.conn.Conn().PgConn()
	lostOn := t.s.backendOf(pc)
	err := t.conn.SendBatch(t.ctx, b).Close()
	if err == nil {
		return nil
	}
	if pgconn.SafeToRetry(err) || !pc.IsClosed() {
		t.forgetStale(err)
		t.end()
		return dbErr("commit", err)
	}
	t.release()
	t.commitID, err = t.s.commitOutcome(token, lostOn, err)
	return err
}

// Rollback ends the transaction, discarding its writes; after Commit it
// does nothing. A read-only transaction that answered from a cached
// subtree and never went to the server checks the subtree first, and
// returns the kv.ErrStale of one that changed under an answer it gave
// (see trip), as Err would have.
func (t *tx) Rollback() error {
	if t.conn == nil {
		return nil
	}
	hadErr := t.err != nil
	t.settle()
	if err := t.err; err != nil && !hadErr {
		t.end()
		return err
	}
	if err := t.end(); err != nil && !hadErr {
		return err
	}
	return nil
}

// end rolls the transaction back on the server if it began there, lets go
// of the draw locks a failed commit may have left, and returns the
// connection to the pool.
func (t *tx) end() error {
	var err error
	if t.begun {
		if _, rerr := t.conn.Exec(t.ctx, "ROLLBACK"); rerr != nil {
			err = dbErr("rollback", rerr)
		}
	}
	t.releaseDraws()
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
	t.sequenced = nil
	t.drew = false
	t.seen = nil
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

// reserve makes room for n bytes in one chunk, if they fit one, so that
// a page whose size is known roughly lands in one allocation.
func (a *arena) reserve(n int) {
	if n > cap(*a)-len(*a) && n <= arenaChunk {
		*a = make([]byte, 0, max(n, arenaFirst))
	}
}

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
