package storh

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Stream returns the records q selects, in id order (oldest first) unless
// q orders by a field or is reversed. Ranges (After, Before, TimeRangeMs)
// seek straight to their first key, and conditions on indexed fields seek
// the index, so a page costs the same in a collection of a thousand or a
// billion records. An index changes the cost of a query, never its result.
//
// A DB-level stream reads in chunks, each in its own short read transaction,
// and resumes after the last key it saw: a slow consumer never holds a
// transaction, and records written meanwhile ahead of the cursor may appear.
// A query that must sort in memory (see Explain) gathers its matches first.
// A handle bound to a Tx streams within that transaction's snapshot.
//
// An error ends the stream after being yielded once, unless the query has
// ContinueOnError, which skips and reports unreadable records. Breaking out
// of the loop releases everything.
func (c *coll) Stream(q query.Query) iter.Seq2[Record, error] {
	return c.StreamContext(context.Background(), q)
}

// StreamContext is Stream that stops when ctx is done: before each record
// it yields, and between chunks, so within one chunk's work (at most 4096
// keys examined) even while no record matches, it yields an error
// wrapping ctx.Err() and ends, with no transaction left open.
func (c *coll) StreamContext(ctx context.Context, q query.Query) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		c.run(ctx, c.opName("stream"), q, false, yield, nil, func(err error) { yield(Record{}, err) })
	}
}

// ScanRaw calls fn for each record q selects, in Stream's order, with its
// id and its msgpack payload (what Record.Raw returns) lent for the call:
// the bytes are valid only until fn returns and must not be modified; copy
// what you keep. It is Stream for code that only looks at the bytes (an
// export, a checksum, a count by a custom rule): it reads in chunks, each
// in its own short read transaction as Stream does, and copies each chunk
// into one buffer it reuses, so it allocates nothing per record and its
// memory does not grow with the collection.
//
// An error from fn stops the scan and is returned as it is; ScanRaw's own
// errors are Stream's. With ContinueOnError, unreadable records are skipped
// and reported to its callback.
func (c *coll) ScanRaw(q query.Query, fn func(id uuidv7.UUID, raw []byte) error) error {
	return c.ScanRawContext(context.Background(), q, fn)
}

// ScanRawContext is ScanRaw that stops when ctx is done, as StreamContext
// does, returning an error that wraps ctx.Err().
func (c *coll) ScanRawContext(ctx context.Context, q query.Query, fn func(id uuidv7.UUID, raw []byte) error) error {
	var err, own error
	c.run(ctx, c.opName("scan"), q, true, nil, func(r Record) (bool, error) {
		if own = fn(r.ID, r.payload); own != nil {
			return false, nil
		}
		return true, nil
	}, func(e error) { err = e })
	if own != nil {
		return own
	}
	return err
}

// lendBufs holds the buffers lending runs copy their chunks into; one that
// grew past maxPooledLend for large records is left to the collector.
var lendBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledLend = 1 << 20

// itemBufs holds the chunk buffers of runs: a stream of many pages would
// otherwise allocate one per page.
var itemBufs = sync.Pool{New: func() any {
	b := make([]engine.Item, 0, engine.ChunkRecords)
	return &b
}}

// run runs q, passing each record to each until it returns false, and a
// failure to fail. An error from each (a record that does not decode into
// the caller's type) is a failure of that record, which ContinueOnError
// skips. A stream passes its yield instead of each (which is then nil):
// the run calls it with no closure between them. It returns the run, for
// its statistics.
//
// With lend, each record's bytes are valid only during its call of each
// (see ScanRaw): the run copies every chunk into one buffer it reuses.
func (c *coll) run(ctx context.Context, op string, q query.Query, lend bool, yield func(Record, error) bool, each func(Record) (bool, error), fail func(error)) *engine.Run {
	spec, err := c.compile(q)
	if err != nil {
		fail(opErr(op, c.name, "", -1, err))
		return nil
	}
	r := engine.NewRun(spec)
	if lend {
		lent := lendBufs.Get().(*[]byte)
		defer func() {
			if cap(*lent) <= maxPooledLend {
				lendBufs.Put(lent)
			}
		}()
		r.Lend(lent)
	}
	buf := itemBufs.Get().(*[]engine.Item)
	used := 0 // the most items a chunk held
	defer func() {
		clear((*buf)[:used]) // the pool must not pin the records' bytes
		itemBufs.Put(buf)
	}()
	items := (*buf)[:0]
	for !r.Done {
		if err := ctx.Err(); err != nil {
			fail(opErr(op, c.name, "", -1, err))
			return r
		}
		items, err = c.chunk(r, items[:0])
		*buf, used = items, max(used, len(items))
		if err != nil {
			fail(opErr(op, c.name, "", -1, err))
			return r
		}
		var slab *mpack.Slab // the decoding slab of this chunk's records
		if !lend {
			slab = new(mpack.Slab)
		}
		done := ctx.Done()
		for i := range items {
			it := &items[i]
			// A consumer that cancels mid-chunk gets no further record.
			if done != nil {
				select {
				case <-done:
					fail(opErr(op, c.name, "", -1, ctx.Err()))
					return r
				default:
				}
			}
			more, err := true, it.Err
			switch {
			case err != nil:
			case yield != nil:
				more = yield(Record{ID: it.ID, payload: it.Payload, slab: slab}, nil)
			default:
				more, err = each(Record{ID: it.ID, payload: it.Payload, slab: slab})
			}
			if err != nil {
				if spec.OnError != nil {
					spec.OnError(it.ID, opErr(op, c.name, it.ID.String(), -1, err))
					continue
				}
				fail(opErr(op, c.name, it.ID.String(), -1, err))
				return r
			}
			if !more {
				return r
			}
		}
	}
	return r
}

// chunk reads the next chunk of r: in the handle's transaction, or in a
// short one of its own.
func (c *coll) chunk(r *engine.Run, dst []engine.Item) ([]engine.Item, error) {
	if c.tx != nil {
		err := c.inTx(false, func(_ *engine.Tx, ec *engine.Coll) error {
			var err error
			dst, err = r.Next(ec, engine.ChunkRecords, dst)
			return err
		})
		return dst, err
	}
	if err := c.db.eng.Enter(); err != nil {
		return dst, err
	}
	defer c.db.eng.Exit()
	return c.db.eng.RunChunk(c.h, r, engine.ChunkRecords, dst)
}

// Find returns every record q selects, in its order (see Stream). Bound it
// with Limit: Find holds the whole result in memory.
func (c *coll) Find(q query.Query) ([]Record, error) {
	return c.FindContext(context.Background(), q)
}

// FindContext is Find that stops when ctx is done (see StreamContext).
func (c *coll) FindContext(ctx context.Context, q query.Query) ([]Record, error) {
	var out []Record
	if err := c.find(ctx, "find", q, func(r Record) error { out = append(out, r); return nil }); err != nil {
		return nil, err
	}
	return out, nil
}

// find runs q to its end, handing each record to take.
func (c *coll) find(ctx context.Context, op string, q query.Query, take func(Record) error) error {
	var err error
	c.run(ctx, c.opName(op), q, false, nil, func(r Record) (bool, error) { return true, take(r) }, func(e error) { err = e })
	return err
}

// First returns the first record q selects, or ErrNotFound when none does.
func (c *coll) First(q query.Query) (Record, error) {
	return c.FirstContext(context.Background(), q)
}

// FirstContext is First that stops when ctx is done (see StreamContext).
func (c *coll) FirstContext(ctx context.Context, q query.Query) (Record, error) {
	var out Record
	err := c.first(ctx, q, func(r Record) error { out = r; return nil })
	return out, err
}

// first runs q for its first record, handing it to take.
func (c *coll) first(ctx context.Context, q query.Query, take func(Record) error) error {
	if err := q.Validate(); err != nil { // before Limit(1) replaces a bad limit
		return opErr(c.opName("first"), c.name, "", -1, err)
	}
	found := false
	var err error
	c.run(ctx, c.opName("first"), q.Limit(1), false, nil, func(r Record) (bool, error) {
		if err := take(r); err != nil {
			return true, err
		}
		found = true
		return false, nil
	}, func(e error) { err = e })
	switch {
	case err != nil:
		return err
	case !found:
		return opErr(c.opName("first"), c.name, "", -1, fmt.Errorf("%w: no record matches %s", ErrNotFound, q))
	}
	return nil
}

// CountMatching counts the records Stream(q) would yield, its Limit
// included. When an index decides the whole condition (docs/indexes.md says
// which conditions do) it counts distinct ids among the index keys and
// reads no record; otherwise it runs the query. Unlike Count, it is not
// O(1).
func (c *coll) CountMatching(q query.Query) (int, error) {
	return c.CountMatchingContext(context.Background(), q)
}

// CountMatchingContext is CountMatching that stops when ctx is done, within
// one chunk of index keys or records.
func (c *coll) CountMatchingContext(ctx context.Context, q query.Query) (int, error) {
	op := c.opName("count matching")
	spec, err := c.compile(q)
	if err != nil {
		return 0, opErr(op, c.name, "", -1, err)
	}
	r := engine.NewRun(spec)
	for !r.Done {
		if err := ctx.Err(); err != nil {
			return 0, opErr(op, c.name, "", -1, err)
		}
		if err := c.countChunk(r); err != nil {
			return 0, opErr(op, c.name, "", -1, err)
		}
		if !r.Done && !r.Countable() {
			n := 0
			c.run(ctx, op, q, true, nil, func(Record) (bool, error) { n++; return true, nil }, func(e error) { err = e })
			return n, err
		}
	}
	return r.Stats.Returned, nil
}

func (c *coll) countChunk(r *engine.Run) error {
	if c.tx != nil {
		return c.inTx(false, func(_ *engine.Tx, ec *engine.Coll) error { return r.Count(ec) })
	}
	if err := c.db.eng.Enter(); err != nil {
		return err
	}
	defer c.db.eng.Exit()
	return c.db.eng.CountChunk(c.h, r)
}

// Plan says how a query ran: Explain's answer.
type Plan struct {
	// Query is the query, as query.Query.String writes it.
	Query string
	// Indexes are the indexes read, none for a read of the records in id
	// order (a range of ids, or the whole collection); several for an Or
	// served by a union.
	Indexes []string
	// Sorted means the results had to be sorted in memory: no index walks
	// in the query's order.
	Sorted bool
	// KeysRead counts index keys examined, RecordsRead the records fetched
	// and checked against the condition, Returned the records the query
	// returns.
	KeysRead, RecordsRead, Returned int
}

// String describes the plan for people, on one line.
func (p Plan) String() string {
	var b strings.Builder
	if len(p.Indexes) == 0 {
		b.WriteString("scan records by id")
	} else {
		fmt.Fprintf(&b, "index %s", strings.Join(quoteAll(p.Indexes), " + "))
	}
	if p.Sorted {
		b.WriteString(", sorted in memory")
	}
	fmt.Fprintf(&b, ": %d keys read, %d records read, %d returned", p.KeysRead, p.RecordsRead, p.Returned)
	return b.String()
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// Explain runs q as Stream would, without handing out records, and
// reports how: which indexes it read, whether it sorted in memory, and how
// many index keys and records it read to return how many.
func (c *coll) Explain(q query.Query) (Plan, error) {
	return c.ExplainContext(context.Background(), q)
}

// ExplainContext is Explain that stops when ctx is done (see StreamContext).
func (c *coll) ExplainContext(ctx context.Context, q query.Query) (Plan, error) {
	var err error
	r := c.run(ctx, c.opName("explain"), q, true, nil, func(Record) (bool, error) { return true, nil }, func(e error) { err = e })
	if err != nil {
		return Plan{}, err
	}
	return Plan{Query: q.String(), Indexes: r.Stats.Indexes, Sorted: r.Stats.Sorted,
		KeysRead: r.Stats.KeysRead, RecordsRead: r.Stats.RecordsRead, Returned: r.Stats.Returned}, nil
}
