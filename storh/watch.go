package storh

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"sort"
	"time"

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
// delivered. On a handle with a retention (WithRetention) or a time to
// live (WithTTL), a record that has expired when the watch reads it, by
// the database's clock, is not delivered, as Get and Find do not return
// it.
//
// Writers never wait for a watcher: each watcher has a backlog of up to
// 65,536 records (64 MiB); a watcher that falls further behind gets
// ErrLagged and stops, and can Watch again from the last id it received
// (records written meanwhile under older ids are then only in the file, not
// in the catch-up, which goes by id). Watch needs a DB-level handle.
//
// On a PostgreSQL hot standby (a DB opened on one WithReadOnly), which
// hears of no commit, Watch polls how far the standby has replayed, and
// delivers in id order what it had not: it misses a record committed
// more than a second after its id's time (see docs/postgres.md, watch on
// a standby).
func (c *coll) Watch(ctx context.Context, from uuidv7.UUID) iter.Seq2[Record, error] {
	return c.watch(ctx, from, nil)
}

// WatchReady is Watch that calls ready, once, when the watch has
// subscribed: every record committed after ready is called is delivered
// (from the zero id too), so a caller that writes, or lets others write,
// only once ready has run misses nothing, without a first write to wait
// for or a sleep. ready runs in the loop's goroutine, before the first
// record is yielded; it is not called if the watch fails to start. On a
// standby (see Watch), ready is called when the loop starts. For a
// durable feed that a reader can resume from any point, see Changes.
func (c *coll) WatchReady(ctx context.Context, from uuidv7.UUID, ready func()) iter.Seq2[Record, error] {
	return c.watch(ctx, from, ready)
}

func (c *coll) watch(ctx context.Context, from uuidv7.UUID, ready func()) iter.Seq2[Record, error] {
	op := c.opName("watch")
	return func(yield func(Record, error) bool) {
		if c.tx != nil {
			yield(Record{}, opErr(op, c.name, "", -1, errWatchInTx))
			return
		}
		if c.db.eng.Replaying() {
			if ready != nil {
				ready()
			}
			c.followReplica(ctx, op, from, yield)
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
		if ready != nil {
			ready()
		}

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
			// What has expired by the handle's retention or time to live
			// when the watch reads it is not delivered, as Get and Find
			// do not return it.
			expired := c.expiredAt(c.db.eng.Now())
			for _, ch := range changes {
				if seen.saw(from, ch) || expired != nil && expired(ch.ID, ch.Payload) {
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
	ok := c.readChunks(ctx, op, from, true, yield, func(snap engine.Snapshot, items []engine.Item, last bool) bool {
		end := uuidv7.UUID{}
		if len(items) > 0 {
			end = items[len(items)-1].ID
		}
		if last {
			end = lastID
		}
		cu.snaps, cu.ends = append(cu.snaps, snap), append(cu.ends, end)
		expired := c.expiredAt(c.db.eng.Now())
		for _, it := range items {
			if it.Err == nil && expired != nil && expired(it.ID, it.Payload) {
				continue
			}
			if !yieldItem(c, op, it, yield) {
				return false
			}
		}
		return true
	})
	return cu, ok
}

// yieldItem yields a record a chunk read, or its error (and then the watch
// ends); it reports whether the watch goes on.
func yieldItem(c *coll, op string, it engine.Item, yield func(Record, error) bool) bool {
	if it.Err != nil {
		yield(Record{}, opErr(op, c.name, it.ID.String(), -1, it.Err))
		return false
	}
	return yield(Record{ID: it.ID, payload: it.Payload}, nil)
}

// readChunks reads the records after from in id order, historyChunk at a
// time, each chunk in a read transaction of its own, and hands fn each
// chunk, with the snapshot it read if snap is set and whether it was the
// last. It returns false when the watch ends: fn returned false, or ctx or
// a read failed (the error is yielded).
func (c *coll) readChunks(ctx context.Context, op string, from uuidv7.UUID, snap bool, yield func(Record, error) bool,
	fn func(engine.Snapshot, []engine.Item, bool) bool) bool {
	spec, err := plan.Compile(query.All().After(from))
	if err != nil {
		yield(Record{}, opErr(op, c.name, "", -1, err))
		return false
	}
	r := engine.NewRun(spec)
	var items []engine.Item
	for !r.Done {
		if err := ctx.Err(); err != nil {
			yield(Record{}, opErr(op, c.name, "", -1, err))
			return false
		}
		var s engine.Snapshot
		err := c.readRun(r, func(etx *engine.Tx, ec *engine.Coll) error {
			if snap {
				s = etx.Snapshot()
			}
			var err error
			items, err = r.Next(ec, historyChunk, items[:0])
			return err
		})
		if err != nil {
			yield(Record{}, opErr(op, c.name, "", -1, err))
			return false
		}
		if !fn(s, items, r.Done) {
			return false
		}
	}
	return true
}

// A hot standby hears of no commit (LISTEN/NOTIFY does not reach it), so a
// watch there polls: every replicaPoll it asks how far the standby has
// replayed (a round trip that reads nothing else), and when that moved it
// reads the collection's records again from replicaLookback before the
// newest id it has seen (in the time of the ids), delivering, in id order,
// each record it has not delivered yet, or delivered with other data.
// The lookback is for commits that come after commits of larger ids
// (concurrent writers, a batch that waited for the one before it): a
// record committed more than replicaLookback after its id's time (or
// under an older id, one from a clock that far behind the newest id's, or
// rewritten later than that) is not delivered. Each
// read costs the records of the lookback: a collection written at R
// records a second costs a watch about R·replicaLookback/replicaPoll
// record reads a second, 10·R.
const (
	replicaPoll     = 100 * time.Millisecond
	replicaLookback = time.Second
)

// replicaFeed is what a watch on a hot standby has seen: the payload hash
// of each record from start on, and the newest id.
type replicaFeed struct {
	seen   map[uuidv7.UUID]uint64
	newest uuidv7.UUID
	start  uuidv7.UUID // the records before it are out of sight
}

// followReplica is Watch on a hot standby (see replicaPoll).
func (c *coll) followReplica(ctx context.Context, op string, from uuidv7.UUID, yield func(Record, error) bool) {
	f := replicaFeed{seen: map[uuidv7.UUID]uint64{}, start: from}
	// From the zero id the watch starts now: the records in sight, from
	// replicaLookback before the newest, are seen, not delivered (in an
	// empty collection everything is in sight). From an id, the first
	// round is the catch-up.
	deliver := !from.IsZero()
	if !deliver {
		newest, err := c.FirstContext(ctx, query.All().Reverse())
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			yield(Record{}, err)
			return
		default:
			f.newest = newest.ID
			f.start = f.sightStart(time.Now())
		}
	}
	poll := time.NewTimer(0)
	defer poll.Stop()
	var last uint64
	for round := 0; ; round++ {
		select {
		case <-ctx.Done():
			yield(Record{}, opErr(op, c.name, "", -1, ctx.Err()))
			return
		case <-c.db.eng.Closing():
			yield(Record{}, opErr(op, c.name, "", -1, ErrClosed))
			return
		case <-poll.C:
		}
		poll.Reset(replicaPoll)
		// Asked before the read: a commit replayed during the read moves
		// the position past this one, and the next round reads it.
		pos, err := c.position()
		if err != nil {
			yield(Record{}, opErr(op, c.name, "", -1, err))
			return
		}
		if round > 0 && pos == last {
			continue
		}
		last = pos
		if !c.readChunks(ctx, op, f.start, false, yield, func(_ engine.Snapshot, items []engine.Item, _ bool) bool {
			expired := c.expiredAt(c.db.eng.Now())
			for _, it := range items {
				if it.Err == nil && !f.fresh(it) {
					continue
				}
				if it.Err == nil && expired != nil && expired(it.ID, it.Payload) {
					continue // seen, and never delivered: it will not come back
				}
				if deliver && !yieldItem(c, op, it, yield) {
					return false
				}
			}
			return true
		}) {
			return
		}
		deliver = true
		f.forget(time.Now())
	}
}

// position is the standby's replay position.
func (c *coll) position() (uint64, error) {
	if err := c.db.eng.Enter(); err != nil {
		return 0, err
	}
	defer c.db.eng.Exit()
	return c.db.eng.Position()
}

// fresh records it as seen and reports whether it is new: an id not seen,
// or seen with other data.
func (f *replicaFeed) fresh(it engine.Item) bool {
	h := fnv.New64a()
	h.Write(it.Payload)
	sum := h.Sum64()
	if it.ID.Compare(f.newest) > 0 {
		f.newest = it.ID
	}
	if old, ok := f.seen[it.ID]; ok && old == sum {
		return false
	}
	f.seen[it.ID] = sum
	return true
}

// forget moves the start of sight up to sightStart, never back, and
// forgets the records before it. Until a record is seen the start stays:
// the ids to come may be from a clock behind this one's.
func (f *replicaFeed) forget(now time.Time) {
	if f.newest.IsZero() {
		return
	}
	start := f.sightStart(now)
	if start.Compare(f.start) <= 0 {
		return
	}
	f.start = start
	for id := range f.seen {
		if id.Compare(start) <= 0 {
			delete(f.seen, id)
		}
	}
}

// sightStart is replicaLookback before the newest id seen, or before now
// if that id is later (made by a clock ahead of this one's): the records
// after it are read at every poll.
func (f *replicaFeed) sightStart(now time.Time) uuidv7.UUID {
	at := now
	if t := f.newest.Time(); t.Before(at) {
		at = t
	}
	return idFloor(at.Add(-replicaLookback))
}

// idFloor is the smallest id of t's millisecond: the records after it are
// those of that millisecond on.
func idFloor(t time.Time) uuidv7.UUID {
	var id uuidv7.UUID
	ms := max(t.UnixMilli(), 0)
	for i := 5; i >= 0; i-- {
		id[i] = byte(ms)
		ms >>= 8
	}
	return id
}
