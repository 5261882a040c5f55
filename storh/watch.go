package storh

import (
	"context"
	"fmt"
	"iter"
	"sort"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// ErrLagged ends a Watch whose consumer fell too far behind the writers
// (by 65536 records or 64 MiB of them): writers never wait for a watcher, and
// its backlog is bounded. Watch again from the last id received.
var ErrLagged = errs.ErrLagged

// ErrWatchLost ends a Watch on a PostgreSQL store whose connection for
// other processes' commits broke: from then on it could miss their
// records. Watch again from the last id received.
var ErrWatchLost = errs.ErrWatchLost

// historyChunk is how many records one read transaction of a Watch's
// catch-up reads.
const historyChunk = 256

// Watch yields the records committed to the collection after from, then
// waits for new ones until ctx ends (it then yields ctx's error once and
// stops). With the zero id it starts from now: only records written after
// the call, each transaction whole (one that had written to the collection
// by then commits before the first record is yielded, and is not
// delivered). With an id (the last one a previous Watch or Stream gave) it
// first catches up with the records whose ids come after it, in id order,
// then follows the commits.
//
// It never misses and never repeats a record committed while it runs,
// whatever the ids (on a file, the only writer is this process; on
// PostgreSQL, records of other processes come through LISTEN/NOTIFY and
// are read after their commit, so one deleted before it is read is not
// delivered, and one written again meanwhile comes with its newer data:
// see docs/watch.md): concurrent writers whose ids interleave
// and records written with explicit older ids are all delivered, each once,
// in commit order after the catch-up (a record written several times is
// delivered for each write, with its data at that write). Deletions are not
// delivered.
//
// Writers never wait for a watcher: each watcher has a backlog of up to
// 65,536 records (64 MiB); a watcher that falls further behind gets
// ErrLagged and stops, and can Watch again from the last id it received
// (records written meanwhile under older ids are then only in the file, not
// in the catch-up, which goes by id). Watch needs a DB-level handle.
func (c *coll) Watch(ctx context.Context, from uuidv7.UUID) iter.Seq2[Record, error] {
	op := c.opName("watch")
	return func(yield func(Record, error) bool) {
		if c.tx != nil {
			yield(Record{}, opErr(op, c.name, "", -1, errWatchInTx))
			return
		}
		if err := c.db.eng.Enter(); err != nil {
			yield(Record{}, opErr(op, c.name, "", -1, err))
			return
		}
		sub, err := c.db.eng.Subscribe(c.name)
		c.db.eng.Exit()
		if err != nil {
			yield(Record{}, opErr(op, c.name, "", -1, err))
			return
		}
		defer sub.Close()

		var seen catchUp
		if !from.IsZero() {
			var ok bool
			if seen, ok = c.catchUp(ctx, op, from, yield); !ok {
				return
			}
		}
		for {
			changes, err := sub.Take()
			if err != nil {
				yield(Record{}, opErr(op, c.name, "", -1, err))
				return
			}
			for _, ch := range changes {
				if seen.saw(from, ch) {
					continue
				}
				if !yield(Record{ID: ch.ID, payload: ch.Payload}, nil) {
					return
				}
			}
			if len(changes) > 0 {
				continue // more may have come meanwhile
			}
			select {
			case <-ctx.Done():
				yield(Record{}, opErr(op, c.name, "", -1, ctx.Err()))
				return
			case <-c.db.eng.Closing():
				yield(Record{}, opErr(op, c.name, "", -1, ErrClosed))
				return
			case <-sub.Ready():
			}
		}
	}
}

var errWatchInTx = fmt.Errorf("%w: Watch waits for commits, which cannot happen inside a transaction; use a DB-level handle", ErrNestedTx)

// lastID is above every id: the catch-up's last chunk reads to the end.
var lastID = uuidv7.UUID{255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255}

// catchUp is what the catch-up read: for each chunk, the transaction it
// read in and the last id it reached (the last chunk reaches the end).
type catchUp struct {
	snaps []engine.Snapshot
	ends  []uuidv7.UUID
}

// saw reports whether the catch-up delivered the change: its id lies in a
// chunk's range, after from, and that chunk read a snapshot that held the
// change's commit. A change the catch-up had passed by (an id behind its
// position when committed) is new.
func (cu *catchUp) saw(from uuidv7.UUID, ch engine.Change) bool {
	if len(cu.ends) == 0 || ch.ID.Compare(from) <= 0 {
		return false
	}
	i := sort.Search(len(cu.ends), func(i int) bool { return ch.ID.Compare(cu.ends[i]) <= 0 })
	if i == len(cu.ends) {
		i = len(cu.ends) - 1 // the last chunk read to the end
	}
	return cu.snaps[i].Holds(ch.Txid)
}

// catchUp yields the records after from in id order, chunk by chunk, each
// chunk in a read transaction of its own; ok is false when the watch ends.
func (c *coll) catchUp(ctx context.Context, op string, from uuidv7.UUID, yield func(Record, error) bool) (catchUp, bool) {
	var cu catchUp
	spec, err := plan.Compile(query.All().After(from))
	if err != nil {
		yield(Record{}, opErr(op, c.name, "", -1, err))
		return cu, false
	}
	r := engine.NewRun(spec)
	var items []engine.Item
	for !r.Done {
		if err := ctx.Err(); err != nil {
			yield(Record{}, opErr(op, c.name, "", -1, err))
			return cu, false
		}
		var snap engine.Snapshot
		err := c.readRun(r, func(etx *engine.Tx, ec *engine.Coll) error {
			snap = etx.Snapshot()
			var err error
			items, err = r.Next(ec, historyChunk, items[:0])
			return err
		})
		if err != nil {
			yield(Record{}, opErr(op, c.name, "", -1, err))
			return cu, false
		}
		end := uuidv7.UUID{}
		if len(items) > 0 {
			end = items[len(items)-1].ID
		}
		if r.Done {
			end = lastID
		}
		cu.snaps, cu.ends = append(cu.snaps, snap), append(cu.ends, end)
		for _, it := range items {
			if it.Err != nil {
				yield(Record{}, opErr(op, c.name, it.ID.String(), -1, it.Err))
				return cu, false
			}
			if !yield(Record{ID: it.ID, payload: it.Payload}, nil) {
				return cu, false
			}
		}
	}
	return cu, true
}
