package storh

import (
	"context"
	"fmt"
	"time"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// deleteMatching deletes the records q selects and returns how many. On a
// DB-level handle it reads and deletes in the same write transactions, of
// about tune.MatchingBatch records each (5000), so every record it deletes matched q when
// it was deleted, and a huge deletion never holds one giant transaction; an
// error or a done ctx leaves the transactions before it committed. A query
// with an order (and so a Limit that picks by it) runs in one transaction.
// The file does not shrink; later writes reuse the freed pages and
// `storh compact` gives them back.
//
// With damaged, records that cannot be read are deleted too (a deletion by
// id range needs nothing of their content); else they fail the deletion,
// or go to the query's ContinueOnError function, called once their
// transaction has ended (it may use the database).
func (c *coll) deleteMatching(ctx context.Context, op string, q query.Query, damaged bool) (int, error) {
	spec, err := plan.Compile(q)
	if err != nil {
		return 0, opErr(op, c.name, "", -1, err)
	}
	return c.deleteSpec(ctx, op, spec, damaged, deletePace{batch: tune.MatchingBatch})
}

// deletePace is how a deletion on a DB-level handle divides its work:
// batch records per transaction and, with pause set, a call of pause
// between two transactions (a background sweep's, so that writers get
// the database between them), told how long the last one took and how
// many it deleted, which may change batch for the next; a pause error
// ends the deletion. check, if set, runs first in each transaction (ec
// nil: no collection there), and its error ends the deletion with that
// transaction rolled back: a sweep's test that the collection is still
// the one it was asked for.
type deletePace struct {
	batch int
	pause func(took time.Duration, deleted int, batch *int) error
	check func(etx *engine.Tx, ec *engine.Coll) error
	// ordered lets a deletion whose query has an order run in batches
	// too: one that deletes all it selects, which needs no single snapshot
	// of the order (no Limit picks by it).
	ordered bool
}

// deleteSpec is deleteMatching of a compiled query.
func (c *coll) deleteSpec(ctx context.Context, op string, spec *plan.Spec, damaged bool, pace deletePace) (int, error) {
	var err error
	r := engine.NewRun(spec)
	total := 0
	var items []engine.Item
	var del []engine.Item
	var ids []uuidv7.UUID
	var skipped []engine.Item
	step := func(etx *engine.Tx, ec *engine.Coll) error {
		skipped = skipped[:0]
		if pace.check != nil {
			if err := pace.check(etx, ec); err != nil {
				return err
			}
		}
		if ec == nil {
			r.Done = true
			return nil
		}
		n := 0
		for !r.Done && (n < pace.batch || c.tx != nil || spec.Order != nil && !pace.ordered) {
			if err := ctx.Err(); err != nil {
				return err
			}
			var err error
			chunk := ec.DeleteChunk()
			if c.tx == nil && (spec.Order == nil || pace.ordered) {
				chunk = min(chunk, pace.batch-n)
			}
			if items, err = r.Next(ec, chunk, items[:0]); err != nil {
				return err
			}
			del = del[:0]
			for _, it := range items {
				if it.Err != nil && !damaged {
					if spec.OnError != nil {
						skipped = append(skipped, it)
						continue
					}
					return fmt.Errorf("record %s: %w", it.ID, it.Err)
				}
				del = append(del, it)
			}
			// Records the run read just now, in this transaction, are
			// deleted as read. Those a collecting run kept from an
			// earlier transaction are read again, as they stand now, and
			// one written since so that it no longer matches (a record
			// put again with a later time to live) stays. On PostgreSQL
			// either costs a round trip per chunk at most, not one per
			// record.
			var deleted int
			if r.ReadNow() {
				deleted, err = etx.DeleteRead(ec, del)
			} else {
				ids = ids[:0]
				for _, it := range del {
					ids = append(ids, it.ID)
				}
				deleted, err = etx.DeleteMany(ec, ids, r.Matches)
			}
			if err != nil {
				return err
			}
			n += deleted
		}
		total += n
		return nil
	}
	for !r.Done {
		if err := ctx.Err(); err != nil {
			return total, opErr(op, c.name, "", -1, err)
		}
		before := total
		began := time.Now()
		if c.tx != nil {
			err = c.inTx(true, step)
		} else {
			err = c.update(false, step)
		}
		if err != nil {
			return before, opErr(op, c.name, "", -1, err)
		}
		for _, it := range skipped {
			spec.OnError(it.ID, opErr(op, c.name, it.ID.String(), -1, it.Err))
		}
		if pace.pause != nil && !r.Done {
			if err := pace.pause(time.Since(began), total-before, &pace.batch); err != nil {
				return total, opErr(op, c.name, "", -1, err)
			}
		}
	}
	return total, nil
}

// DeleteMatching deletes the documents q selects (using its indexes, as
// Stream does) and returns how many. A record that cannot be read fails it,
// unless q has ContinueOnError: its function then gets each such record,
// after the transaction that met it has ended. A Limit bounds the deletion; with
// OrderBy it deletes the first Limit in that order. On a DB-level handle a
// large deletion runs in transactions of a few thousand records, each
// reading and deleting together, so every deleted record matched q at
// that moment; if it fails part way, the transactions before the failure
// stay committed and the count says how many were deleted. bbolt never
// shrinks its file: later writes reuse the freed pages, and `storh
// compact` returns them to the file system (Stats.FreeBytes shows how
// much is free).
func (d *Docs) DeleteMatching(q query.Query) (int, error) {
	return d.coll.deleteMatching(context.Background(), "delete", q, false)
}

// DeleteMatchingContext is DeleteMatching that stops when ctx is done,
// between records: what was deleted before stays deleted.
func (d *Docs) DeleteMatchingContext(ctx context.Context, q query.Query) (int, error) {
	return d.coll.deleteMatching(ctx, "delete", q, false)
}

// DeleteBefore removes the log records created strictly before t (by the
// time their ids carry) and returns how many: a seek to the first record
// and a walk to the cutoff, in transactions of a few thousand records, so
// a huge trim never holds one giant write transaction. Indexes and
// counters follow. It is the one way log records leave a log. A record
// whose stored bytes are damaged is deleted like the others: the cut is by
// id, not by content. The file does not shrink (see DeleteMatching).
func (l *Log) DeleteBefore(t time.Time) (int, error) {
	return l.DeleteBeforeContext(context.Background(), t)
}

// DeleteBeforeContext is DeleteBefore that stops when ctx is done.
func (l *Log) DeleteBeforeContext(ctx context.Context, t time.Time) (int, error) {
	q, ok := beforeQuery(t)
	if !ok {
		return 0, nil
	}
	return l.coll.deleteMatching(ctx, "log delete", q, true)
}

// beforeQuery selects the records created strictly before t; ok is false
// when none can be.
func beforeQuery(t time.Time) (q query.Query, ok bool) {
	ms := t.UnixMilli()
	if ms <= 0 {
		return q, false // no id carries a time before the epoch
	}
	// Ids carry whole milliseconds: a record of t's own millisecond is not
	// before t unless t is past that millisecond's start, which the time
	// range rounds away; strictly before means up to the millisecond
	// before t's, or t's own when t has a fraction of a millisecond.
	return query.All().TimeRangeMs(0, retentionFromMs(t)-1), true
}

// ApplyRetention deletes the records older than the retention the log was
// opened with (WithRetention), by the database's clock, and returns how
// many. Without a retention it deletes nothing. Run it from a ticker, or at
// start-up: a retention never deletes a record newer than its cutoff.
func (l *Log) ApplyRetention() (int, error) {
	if l.coll.retention <= 0 {
		return 0, nil
	}
	return l.DeleteBefore(l.coll.db.eng.Now().Add(-l.coll.retention))
}
