package storh

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// ErrChangesTrimmed is returned by Changes when the changes after the
// Seq it was given are no longer in the feed: they were trimmed to the
// feed's keep (WithChangeFeed). The reader must resync: read the
// collection afresh (Stream), take LastSeq first, and follow Changes from
// it.
var ErrChangesTrimmed = errs.ErrChangesTrimmed

// ChangeOp is what a change did to its record.
type ChangeOp uint8

const (
	// OpPut: the record was inserted or replaced (a PutWithID of an
	// existing id, a Patch).
	OpPut ChangeOp = iota + 1
	// OpDelete: the record was deleted (Delete, DeleteMatching,
	// DeleteBefore, a retention).
	OpDelete
)

func (op ChangeOp) String() string {
	switch op {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	}
	return fmt.Sprintf("ChangeOp(%d)", uint8(op))
}

// ChangeEvent is one change of a collection's feed (see Docs.Changes).
type ChangeEvent struct {
	// Seq is the change's place in the collection's commit order: the
	// changes of one commit take consecutive numbers, and a commit's come
	// after those of every commit before it. A collection's first change
	// is 1.
	Seq uint64
	// Op is OpPut for an insert or a replacement, OpDelete for a delete.
	Op ChangeOp
	// ID is the record's id.
	ID uuidv7.UUID
	// Record is the record as the change committed it (the zero Record
	// for OpDelete).
	Record Record
}

// WithChangeFeed gives a Docs or Log collection a durable change feed
// that keeps at least the last keep changes: every put and delete of a
// record is recorded in the transaction that makes it, numbered in commit
// order, and Changes reads them back, across restarts and processes. 0
// asks for nothing (the default); a negative keep is ErrInvalidOption, as
// is WithChangeFeed given to a queue.
//
// The setting is stored with the collection, so every handle and every
// process applies it: a handle opened with WithChangeFeed on a collection
// without a feed turns it on (its first change is then 1, or the next
// number of a feed it had), and one opened with another keep sets the
// new keep for every writer after (a lower keep trims the excess in
// bounded steps over the following commits). A handle opened without it
// leaves the feed as it is. See docs/changes.md.
func WithChangeFeed(keep int) CollectionOption {
	return CollectionOption{func(c *collConfig) error {
		if keep < 0 {
			return fmt.Errorf("%w: WithChangeFeed(%d): keep must not be negative", ErrInvalidOption, keep)
		}
		c.feed = int64(keep)
		return nil
	}}
}

// changesChunk is how many changes one read transaction of Changes reads.
const changesChunk = 256

// gapPatience is how long a reader of a feed on PostgreSQL waits for a
// change still committing to fill a gap, woken by commits, before it
// settles the gap, making the collection's new writers wait behind it for
// a statement: a commit takes milliseconds, so most gaps fill on their
// own, and only a commit that was lost (or a slow one) costs a settle.
const gapPatience = 50 * time.Millisecond

// Changes yields the collection's changes with a Seq greater than after,
// in Seq order, each once, then waits for new ones until ctx ends (it then
// yields ctx's error once and stops). A reader that keeps the Seq of the
// last change it handled and calls Changes with it after a restart, or a
// crash, misses nothing and repeats nothing. Changes of this process wake
// it at their commit; on PostgreSQL, other processes' commits wake it
// through LISTEN/NOTIFY, never by polling.
//
// The collection must have a feed (WithChangeFeed), else Changes yields
// ErrNotFound; changes after after that were trimmed are ErrChangesTrimmed.
// A Changes of a collection not created yet waits for its first change.
// A collection dropped while Changes follows it ends it with ErrNotFound;
// one dropped and made again (its feed starts afresh at 1), with
// ErrChangesTrimmed, as the reader must resync. The drop wakes it, done
// by any process (on PostgreSQL, by the drop's notice).
// Changes needs a DB-level handle (inside a transaction it yields
// ErrNestedTx).
//
// A put whose record cannot be read back checked (damaged on disk, or
// moved out by Repair) is yielded with an error wrapping ErrCorrupt, its
// Seq, Op and ID, and no Record: a reader can note it and go on, and the
// changes after it follow if the loop continues.
func (d *Docs) Changes(ctx context.Context, after uint64) iter.Seq2[ChangeEvent, error] {
	return d.coll.changes(ctx, after)
}

// LastSeq returns the Seq of the collection's last change (0 before its
// first, or without a feed). A reader that resyncs after
// ErrChangesTrimmed takes it before it reads the collection, then follows
// Changes from it: it misses no change committed after LastSeq returned.
// On PostgreSQL, where a commit still in flight may have drawn a smaller
// Seq than one already committed, LastSeq first waits for the
// collection's writers in flight to end (their commits); inside an Update
// there it cannot wait, and returns the last change the transaction sees.
func (d *Docs) LastSeq() (uint64, error) { return d.coll.lastSeq() }

// Changes is Docs.Changes of a log: its changes are its appends and the
// deletes of DeleteBefore and its retention.
func (l *Log) Changes(ctx context.Context, after uint64) iter.Seq2[ChangeEvent, error] {
	return l.coll.changes(ctx, after)
}

// LastSeq is Docs.LastSeq of a log.
func (l *Log) LastSeq() (uint64, error) { return l.coll.lastSeq() }

var errChangesInTx = fmt.Errorf("%w: Changes waits for commits, which cannot happen inside a transaction; use a DB-level handle", ErrNestedTx)

func (c *coll) lastSeq() (uint64, error) {
	seq, err := c.settledLastSeq()
	return seq, opErr(c.opName("last seq"), c.name, "", -1, err)
}

// settledLastSeq is LastSeq: on PostgreSQL the Seq of the last change
// once the writers that could still commit one before it have ended, read
// in a transaction begun after they did.
func (c *coll) settledLastSeq() (uint64, error) {
	ctx, cancel := c.db.closingContext()
	defer cancel()
	settled, err := c.settle(ctx)
	if err != nil {
		return 0, err
	}
	var seq uint64
	err = c.read(func(etx *engine.Tx, ec *engine.Coll) error {
		var err error
		seq, err = etx.LastSeq(ec, settled)
		return err
	})
	return seq, err
}

// settle waits until no writer can still commit a change at or below the
// Seq it returns (see engine.Tx.SettleFeed).
func (c *coll) settle(ctx context.Context) (uint64, error) {
	var seq uint64
	err := c.read(func(etx *engine.Tx, ec *engine.Coll) error {
		var err error
		seq, err = etx.SettleFeed(ctx, ec)
		return err
	})
	return seq, err
}

// closingContext is a context that ends when the DB closes, for the waits
// of calls that take none.
func (db *DB) closingContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-db.eng.Closing():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (c *coll) changes(ctx context.Context, after uint64) iter.Seq2[ChangeEvent, error] {
	op := c.opName("changes")
	return func(yield func(ChangeEvent, error) bool) {
		fail := func(err error) { yield(ChangeEvent{}, opErr(op, c.name, "", -1, err)) }
		if c.tx != nil {
			fail(errChangesInTx)
			return
		}
		if err := c.db.eng.Enter(); err != nil {
			fail(err)
			return
		}
		follower, err := c.db.eng.FollowFeed(c.name)
		c.db.eng.Exit()
		if err != nil {
			fail(err)
			return
		}
		defer follower.Stop()
		// Every seq at or below settled that is not in the feed is gone or
		// never was (see engine.Tx.ReadChanges).
		var settled uint64
		// The feed followed, once the collection is there: one dropped,
		// or dropped and made again, ends the reader.
		followed, feedID := false, uint64(0)
		// The first missing Seq of the gap the reader waits at, and since
		// when (see gapPatience).
		var gapAt uint64
		var gapSince time.Time
		for {
			if ctx.Err() != nil {
				fail(ctx.Err())
				return
			}
			// Taken before the read: a commit after it closes it.
			wake := c.db.eng.FeedSignal(c.name)
			if err := follower.Check(); err != nil {
				fail(err)
				return
			}
			var got []engine.FeedEntry
			var gap bool
			err := c.read(func(etx *engine.Tx, ec *engine.Coll) error {
				switch id := etx.FeedID(ec); {
				case ec == nil && followed:
					return fmt.Errorf("%w: collection %q was dropped while Changes followed it", ErrNotFound, c.name)
				case ec != nil && followed && id != feedID:
					return fmt.Errorf("%w: collection %q was dropped and made again while Changes followed it; its feed started afresh", ErrChangesTrimmed, c.name)
				case ec != nil:
					followed, feedID = true, id
				}
				var err error
				got, gap, err = etx.ReadChanges(ec, after, settled, changesChunk)
				return err
			})
			if err != nil {
				fail(err)
				return
			}
			for _, e := range got {
				ev := ChangeEvent{Seq: e.Seq, Op: OpPut, ID: e.ID}
				if e.Op == engine.FeedDelete {
					ev.Op = OpDelete
				} else if e.Err == nil {
					ev.Record = Record{ID: e.ID, payload: e.Payload}
				}
				after = e.Seq
				var err error
				if e.Err != nil {
					err = opErr(op, c.name, e.ID.String(), -1, e.Err)
				}
				if !yield(ev, err) {
					return
				}
			}
			if gap {
				// On PostgreSQL a change numbered before one already read
				// may still be committing, or never will. Most such gaps
				// fill within a commit, whose notice wakes this reader:
				// wait for that first, as long as gapPatience. A gap that
				// outlasts it is settled: wait for the writers that could
				// still fill it (which makes new writers wait behind, for
				// a statement), then read again.
				if after+1 != gapAt {
					gapAt, gapSince = after+1, time.Now()
				}
				if left := gapPatience - time.Since(gapSince); left > 0 {
					patience := time.NewTimer(left)
					select {
					case <-ctx.Done():
						patience.Stop()
						fail(ctx.Err())
						return
					case <-c.db.eng.Closing():
						patience.Stop()
						fail(ErrClosed)
						return
					case <-wake:
					case <-patience.C:
					}
					patience.Stop()
					continue
				}
				if settled, err = c.settle(ctx); err != nil {
					if ctx.Err() != nil {
						err = ctx.Err()
					}
					fail(err)
					return
				}
				continue
			}
			if len(got) >= changesChunk {
				continue // more may be waiting (a read ends with its block)
			}
			select {
			case <-ctx.Done():
				fail(ctx.Err())
				return
			case <-c.db.eng.Closing():
				fail(ErrClosed)
				return
			case <-wake:
			}
		}
	}
}
