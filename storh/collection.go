package storh

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// coll is what Docs and Log share: a named collection reached either through
// the DB (each call its own transaction, single writes group-committed) or
// through one Tx.
type coll struct {
	db   *DB
	tx   *Tx // nil for a DB-level handle
	h    engine.Handle
	name string
	kind engine.Kind
	gen  func() uuidv7.UUID // nil: uuidv7.New

	retention time.Duration // logs: WithRetention; 0: none
	ttl       *ttlConf      // docs: WithTTL; nil: none
}

// StreamBatch is how many records PutStream commits per transaction. Larger
// transactions amortise the two fsyncs of a commit; past ~10k records bbolt
// spends more rebalancing and memory than it saves (see docs/benchmarks.md).
const StreamBatch = 5000

// streamBatchBytes ends a PutStream batch early when its records are large,
// so memory stays bounded whatever the record size.
const streamBatchBytes = 8 << 20

func (c *coll) opName(op string) string {
	if c.kind == engine.KindLog {
		return "log " + op
	}
	return op
}

// Name returns the collection name.
func (c *coll) Name() string { return c.name }

// Kind returns the collection's kind: "docs", "log" or "queue".
func (c *coll) Kind() string { return c.kind.String() }

func (c *coll) newID() uuidv7.UUID {
	if c.gen != nil {
		return c.gen()
	}
	return uuidv7.New()
}

func checkID(id uuidv7.UUID, generated bool) error {
	if id.IsV7() {
		return nil
	}
	if generated {
		return errGeneratorID
	}
	if id.Version() == 7 {
		return fmt.Errorf("%w: version 7 but not the RFC 9562 variant (byte 8 is %#02x, want 0x80-0xbf)", ErrInvalidID, id[8])
	}
	return fmt.Errorf("%w: not a UUIDv7 (version %d)", ErrInvalidID, id.Version())
}

var errGeneratorID = fmt.Errorf("%w: the id generator returned an id that is not a UUIDv7", ErrInvalidID)

// Put stores data under a new id from the collection's generator and returns
// the stored record. data is a map or a struct (see the package doc) that
// encodes to a map. On a DB-level handle concurrent Puts share commits; each
// returns once its record is durable.
func (c *coll) Put(data any) (Record, error) {
	// Encode first: bad data must not use up an id of the generator (a
	// deterministic sequence would shift) nor be reported under an id that
	// was never stored.
	value, err := engine.AppendValue(nil, data)
	if err != nil {
		return Record{}, opErr(c.opName("put"), c.name, "", -1, err)
	}
	id := c.newID()
	if err := checkID(id, true); err != nil {
		return Record{}, opErr(c.opName("put"), c.name, id.String(), -1, err)
	}
	return c.write("put", id, value)
}

// PutWithID stores data under an explicit id, which must be a UUIDv7.
func (c *coll) PutWithID(id uuidv7.UUID, data any) (Record, error) {
	if err := checkID(id, false); err != nil {
		return Record{}, opErr(c.opName("put"), c.name, id.String(), -1, err)
	}
	value, err := engine.AppendValue(nil, data)
	if err != nil {
		return Record{}, opErr(c.opName("put"), c.name, id.String(), -1, err)
	}
	return c.write("put", id, value)
}

// write stores an encoded value: in the handle's transaction, or through
// group commit. value was allocated for this write alone.
func (c *coll) write(op string, id uuidv7.UUID, value []byte) (Record, error) {
	var err error
	insertOnly := c.kind == engine.KindLog
	payload := value[engine.HeaderSize:]
	if c.tx != nil {
		// bbolt keeps a reference to value until the transaction ends:
		// the record gets its own copy, so nothing the caller does to it
		// can reach the pending write.
		payload = append([]byte(nil), payload...)
		err = c.inTxUse(true, engine.HoldRows, func(etx *engine.Tx, ec *engine.Coll) error { return etx.Put(ec, id, value, insertOnly) })
	} else {
		err = c.submit(id, value)
	}
	if err != nil {
		return Record{}, opErr(c.opName(op), c.name, id.String(), -1, err)
	}
	return Record{ID: id, payload: payload}, nil
}

// submit hands one write (a put, or a delete when value is nil) to the
// group-commit writer and waits until it is durable.
func (c *coll) submit(id uuidv7.UUID, value []byte) error {
	if err := c.db.eng.Enter(); err != nil {
		return err
	}
	defer c.db.eng.Exit()
	op := engine.NewWriteOp()
	defer op.Release()
	op.Coll, op.ID, op.Value = c.h, id, value
	op.Delete, op.InsertOnly = value == nil, value != nil && c.kind == engine.KindLog
	if value != nil {
		// Validated here, in the caller's goroutine, not by the one writer
		// that commits everyone's writes (engine.Prechecked).
		op.Pre = c.db.eng.PrecheckValue(c.h.Name, value)
	}
	return c.db.eng.Submit(op)
}

// submitOp hands fn to the group-commit writer as one op, holding the
// collection as hold says (engine.Tx.UseHold), and waits until its
// transaction is durable. fn may run more than once (see
// engine.WriteOp.Fn); without create it gets a nil Coll for a collection
// not in the file.
func (c *coll) submitOp(create bool, hold engine.Hold, fn func(*engine.Tx, *engine.Coll) error) error {
	if err := c.db.eng.Enter(); err != nil {
		return err
	}
	defer c.db.eng.Exit()
	op := engine.NewWriteOp()
	defer op.Release()
	op.Coll, op.Fn, op.Create, op.Hold = c.h, fn, create, hold
	return c.db.eng.Submit(op)
}

// inTx runs fn on the collection inside the handle's transaction, with
// bbolt's panics on damaged pages contained (the transaction then cannot
// commit). For a read of a collection not created yet ec is nil.
func (c *coll) inTx(write bool, fn func(*engine.Tx, *engine.Coll) error) error {
	return c.inTxUse(write, engine.HoldAlone, fn)
}

// inTxUse is inTx holding the collection as hold says (engine.Tx.UseHold).
func (c *coll) inTxUse(write bool, hold engine.Hold, fn func(*engine.Tx, *engine.Coll) error) error {
	if err := c.tx.usable(write); err != nil {
		return err
	}
	etx := c.tx.etx
	return etx.Protect(func() error {
		ec, err := etx.UseHold(c.h, write, hold)
		if err != nil {
			return err
		}
		return fn(etx, ec)
	})
}

// read runs fn on the collection in the handle's transaction, or in a
// short read transaction of its own for a DB-level handle, in which fn
// may run twice (see engine.DB.ViewSafe).
func (c *coll) read(fn func(*engine.Tx, *engine.Coll) error) error {
	return c.readRun(nil, fn)
}

// readRun is read for fn that advances run r (see engine.DB.ViewRun).
func (c *coll) readRun(r *engine.Run, fn func(*engine.Tx, *engine.Coll) error) error {
	if c.tx != nil {
		return c.inTx(false, fn)
	}
	if err := c.db.eng.Enter(); err != nil {
		return err
	}
	defer c.db.eng.Exit()
	view := c.db.eng.ViewSafe
	if r != nil {
		view = func(fn func(*engine.Tx) error) error { return c.db.eng.ViewRun(r, fn) }
	}
	return view(func(etx *engine.Tx) error {
		ec, err := etx.Use(c.h, false)
		if err != nil {
			return err
		}
		return fn(etx, ec)
	})
}

// batch is a set of encoded records ready to write in one transaction.
// The records are encoded one after the other into a pooled buffer, and
// copied out of it into allocations of exactly their size, which the
// values written and the records returned share: at seal, and whenever
// the buffer holds spillAt bytes, so that a batch of large records holds
// its bytes about once, not in a buffer that grows by copying and then in
// its copy. (Fixed blocks of 256 KiB made a PutMany of a hundred small
// records allocate fifteen times what it encoded, all of it for the
// collector to clear and sweep.)
type batch struct {
	ids     []uuidv7.UUID
	ends    []int    // where each record still in enc ends there
	enc     *[]byte  // the pooled encoding buffer, nil when not held
	values  [][]byte // the values copied out, in the order of ids; after seal, all
	spilled int      // bytes in values
}

// spillAt is how many encoded bytes the buffer takes before they are
// copied out; maxPooledEnc bounds the buffer a batch gives back to the
// pool: one a single large record grew is left to the collector.
const (
	spillAt      = 256 << 10
	maxPooledEnc = 1 << 20
)

var encBufs = sync.Pool{New: func() any { return new([]byte) }}

func newBatch(n int) *batch {
	return &batch{ids: make([]uuidv7.UUID, 0, n), ends: make([]int, 0, n), values: make([][]byte, 0, n)}
}

// size is the number of bytes encoded into the batch.
func (b *batch) size() int { return b.spilled + b.buffered() }

// buffered is the number of bytes in the encoding buffer.
func (b *batch) buffered() int {
	if len(b.ends) == 0 {
		return 0
	}
	return b.ends[len(b.ends)-1]
}

// spill copies the records in the encoding buffer into one allocation of
// exactly their size, as values of their own, and empties the buffer: it
// can take the next records while the store still holds these.
func (b *batch) spill() {
	n := b.buffered()
	if n == 0 {
		return
	}
	own := append([]byte(nil), (*b.enc)[:n]...)
	start := 0
	for _, end := range b.ends {
		b.values = append(b.values, own[start:end:end])
		start = end
	}
	b.spilled += n
	b.ends = b.ends[:0]
	*b.enc = (*b.enc)[:0]
}

// seal makes every record of the batch a value, ready to write.
func (b *batch) seal() { b.spill() }

// release gives the encoding buffer back to the pool; the sealed values
// stay.
func (b *batch) release() {
	if b.enc == nil {
		return
	}
	if cap(*b.enc) <= maxPooledEnc {
		*b.enc = (*b.enc)[:0]
		encBufs.Put(b.enc)
	}
	b.enc = nil
}

// records returns the sealed batch as records. Inside a transaction bbolt
// still references the values until it ends, so the records get a copy
// of their own (one allocation for the whole batch); after a commit the
// values are the records' alone.
func (b *batch) records(pending bool) []Record {
	out := make([]Record, len(b.ids))
	var own []byte
	if pending {
		n := 0
		for _, v := range b.values {
			n += len(v) - engine.HeaderSize
		}
		own = make([]byte, 0, n)
	}
	for i, id := range b.ids {
		p := b.values[i][engine.HeaderSize:]
		if pending {
			start := len(own)
			own = append(own, p...)
			p = own[start:len(own):len(own)]
		}
		out[i] = Record{ID: id, payload: p}
	}
	return out
}

// reset empties the batch for the next records, keeping its encoding
// buffer. The bytes of the sealed values are left to the store, which may
// hold them until the transaction ends; the next seal copies into new
// ones.
func (b *batch) reset() {
	b.ids, b.ends, b.values, b.spilled = b.ids[:0], b.ends[:0], b.values[:0], 0
	if b.enc != nil {
		*b.enc = (*b.enc)[:0]
	}
}

// add encodes one untyped item (data or Entry) into the batch.
func (b *batch) add(item any) error {
	var id uuidv7.UUID
	data := item
	switch e := item.(type) {
	case Entry:
		id, data = e.ID, e.Data
	case *Entry:
		if e == nil {
			return fmt.Errorf("%w: nil *Entry", ErrInvalidData)
		}
		id, data = e.ID, e.Data
	}
	return b.addWith(id, func(dst []byte) ([]byte, error) { return engine.AppendValue(dst, data) })
}

// addWith appends one record to the batch: id (zero: fillIDs assigns one)
// and the value that encode appends to the encoding buffer. A record that
// fails to encode leaves the batch as it was.
func (b *batch) addWith(id uuidv7.UUID, encode func(dst []byte) ([]byte, error)) error {
	if !id.IsZero() {
		if err := checkID(id, false); err != nil {
			return err
		}
	}
	if b.enc == nil {
		b.enc = encBufs.Get().(*[]byte)
	}
	enc, err := encode((*b.enc)[:b.buffered()])
	if err != nil {
		return err
	}
	*b.enc = enc
	b.ids = append(b.ids, id)
	b.ends = append(b.ends, len(enc))
	if len(enc) >= spillAt {
		b.spill()
	}
	return nil
}

// fillIDs assigns generated ids to items without one: one reservation of
// consecutive ids for the default generator.
func (c *coll) fillIDs(b *batch, from int) (int, error) {
	if c.gen == nil {
		missing := 0
		for _, id := range b.ids[from:] {
			if id.IsZero() {
				missing++
			}
		}
		switch missing {
		case 0:
			return -1, nil
		case len(b.ids) - from:
			uuidv7.NewBatch(b.ids[from:]) // the usual case: straight into place
			return -1, nil
		}
		fresh := make([]uuidv7.UUID, missing)
		uuidv7.NewBatch(fresh)
		for i := range b.ids[from:] {
			if b.ids[from+i].IsZero() {
				b.ids[from+i], fresh = fresh[0], fresh[1:]
			}
		}
		return -1, nil
	}
	for i := range b.ids[from:] {
		if b.ids[from+i].IsZero() {
			id := c.gen()
			if !id.IsV7() {
				return from + i, errGeneratorID
			}
			b.ids[from+i] = id
		}
	}
	return -1, nil
}

func (c *coll) writeBatch(b *batch) (int, error) {
	insertOnly := c.kind == engine.KindLog
	failed := -1
	// Validated before the transaction, across the cores, rather than
	// inside it one record after another (engine.Prechecked).
	pre := c.db.eng.Precheck(c.h.Name, b.values)
	write := func(etx *engine.Tx, ec *engine.Coll) error {
		for i, id := range b.ids {
			if err := etx.PutPrechecked(ec, id, b.values[i], insertOnly, &pre, i); err != nil {
				failed = i
				return err
			}
		}
		return nil
	}
	if c.tx != nil {
		return failed, c.inTxUse(true, engine.HoldRows, write)
	}
	return failed, c.updateUse(true, engine.HoldRows, write)
}

// update runs fn on the collection in a write transaction of its own;
// with create a missing collection is made, else fn gets a nil Coll for
// it.
func (c *coll) update(create bool, fn func(*engine.Tx, *engine.Coll) error) error {
	return c.updateUse(create, engine.HoldAlone, fn)
}

// updateUse is update holding the collection as hold says
// (engine.Tx.UseHold).
func (c *coll) updateUse(create bool, hold engine.Hold, fn func(*engine.Tx, *engine.Coll) error) error {
	if err := c.db.eng.Enter(); err != nil {
		return err
	}
	defer c.db.eng.Exit()
	return c.db.eng.UpdateSafe(func(etx *engine.Tx) error {
		ec, err := etx.UseHold(c.h, create, hold)
		if err != nil {
			return err
		}
		return fn(etx, ec)
	})
}

// PutMany stores all items in one transaction, or none of them. An item is
// the data of one record, or an Entry carrying an explicit id. The records
// come back in input order. A bad item fails the whole call with an *Error
// whose Index names it.
//
// Inside Update, a failed PutMany may have written part of its items into
// the transaction: return the error from the callback to roll back.
func (c *coll) PutMany(items []any) ([]Record, error) {
	b, err := putMany(c, items, func(b *batch, item *any) error { return b.add(*item) })
	if err != nil {
		return nil, err
	}
	return b.records(c.tx != nil), nil
}

// putMany is PutMany over any item type: add encodes one item into the
// batch. It returns the written batch, ids filled in.
func putMany[I any](c *coll, items []I, add func(*batch, *I) error) (*batch, error) {
	op := c.opName("put many")
	b := newBatch(len(items))
	for i := range items {
		if err := add(b, &items[i]); err != nil {
			b.release()
			return nil, opErr(op, c.name, "", i, err)
		}
	}
	b.seal()
	b.release()
	if i, err := c.fillIDs(b, 0); err != nil {
		return nil, opErr(op, c.name, b.ids[i].String(), i, err)
	}
	if i, err := c.writeBatch(b); err != nil {
		id := ""
		if i >= 0 {
			id = b.ids[i].String()
		}
		return nil, opErr(op, c.name, id, i, err)
	}
	return b, nil
}

// PutStream stores an unbounded sequence of items (data or Entry) in
// transactions of StreamBatch records, holding only one batch in memory. It
// returns how many records are committed; on error that count is exact: the
// failing batch is rolled back whole and nothing after it is read. An error
// names the item by its position in the sequence (Index).
//
// Inside Update everything goes into the caller's one transaction, and a
// failure may leave earlier items of the sequence written into it: return
// the error from the callback to roll everything back.
func (c *coll) PutStream(seq iter.Seq[any]) (int, error) {
	return c.PutStreamContext(context.Background(), seq)
}

// PutStreamContext is PutStream that stops when ctx is done: before each
// item it reads and before each commit. The batches committed before stay
// (the count says how many records), the batch in progress is dropped, and
// the error wraps ctx.Err().
func (c *coll) PutStreamContext(ctx context.Context, seq iter.Seq[any]) (int, error) {
	return putStream(ctx, c, seq, (*batch).add)
}

// putStream is PutStreamContext over any item type: add encodes one item
// into the batch.
func putStream[I any](ctx context.Context, c *coll, seq iter.Seq[I], add func(*batch, I) error) (int, error) {
	op := c.opName("put stream")
	var b batch
	defer b.release()
	committed, seen := 0, 0
	flush := func() error {
		b.seal()
		if i, err := c.fillIDs(&b, 0); err != nil {
			return opErr(op, c.name, b.ids[i].String(), committed+i, err)
		}
		if i, err := c.writeBatch(&b); err != nil {
			id, idx := "", -1
			if i >= 0 {
				id, idx = b.ids[i].String(), committed+i
			}
			return opErr(op, c.name, id, idx, err)
		}
		committed += len(b.ids)
		b.reset()
		return nil
	}
	for item := range seq {
		if err := ctx.Err(); err != nil {
			return committed, opErr(op, c.name, "", -1, err)
		}
		if err := add(&b, item); err != nil {
			return committed, opErr(op, c.name, "", seen, err)
		}
		seen++
		if len(b.ids) == StreamBatch || b.size() >= streamBatchBytes {
			if err := flush(); err != nil {
				return committed, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return committed, opErr(op, c.name, "", -1, err)
	}
	if len(b.ids) > 0 {
		if err := flush(); err != nil {
			return committed, err
		}
	}
	return committed, nil
}

// Get returns the record id. A valid id that is not stored is ErrNotFound;
// an id that is not a UUIDv7 is ErrInvalidID; a damaged value is ErrCorrupt.
func (c *coll) Get(id uuidv7.UUID) (Record, error) {
	p, err := c.readCopy(id, nil)
	if err != nil {
		return Record{}, err
	}
	return Record{ID: id, payload: p}, nil
}

// GetRaw calls fn with the msgpack payload of record id (what Record.Raw
// returns), lent for the call: valid only until fn returns, and not to be
// modified. It is Get for code that looks at the bytes and keeps nothing:
// the bytes are copied out of the read transaction, which has ended when
// fn runs, into a buffer that is reused, so a point read allocates only
// what its read transaction does. Errors are Get's; an error from fn comes
// back as it is.
func (c *coll) GetRaw(id uuidv7.UUID, fn func(raw []byte) error) error {
	buf := rawBufs.Get().(*[]byte)
	p, err := c.readCopy(id, (*buf)[:0])
	if err == nil {
		err = fn(p)
		*buf = p
	}
	if cap(*buf) <= maxPooledRaw {
		rawBufs.Put(buf)
	}
	return err
}

// readCopy appends the payload of record id to dst. A DB-level handle
// reads in a transaction of its own, on a file straight from the records
// bucket (engine.DB.CopyRecord).
func (c *coll) readCopy(id uuidv7.UUID, dst []byte) ([]byte, error) {
	if c.tx != nil {
		var out []byte
		err := c.get("get", id, func(p []byte) error { out = append(dst, p...); return nil })
		return out, err
	}
	if !id.IsV7() {
		return nil, opErr(c.opName("get"), c.name, id.String(), -1, ErrInvalidID)
	}
	if err := c.db.eng.Enter(); err != nil {
		return nil, opErr(c.opName("get"), c.name, id.String(), -1, err)
	}
	p, err := c.db.eng.CopyRecord(c.h, id, dst)
	c.db.eng.Exit()
	if err == nil && c.hidden(id, p[len(dst):]) {
		err = errExpired
	}
	if err != nil {
		return nil, opErr(c.opName("get"), c.name, id.String(), -1, err)
	}
	return p, nil
}

// rawBufs holds GetRaw's buffers; one that grew past maxPooledRaw for a
// large record is left to the collector rather than pinned.
var rawBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledRaw = 64 << 10

// get reads the record id and hands its payload, valid only during the
// call, to use.
func (c *coll) get(op string, id uuidv7.UUID, use func(payload []byte) error) error {
	if !id.IsV7() {
		return opErr(c.opName(op), c.name, id.String(), -1, ErrInvalidID)
	}
	var err error
	if c.tx != nil {
		// In a write transaction the record is read with its row locked
		// (engine.HoldRows), so that a write computed from it loses no
		// other writer's.
		err = c.inTxUse(false, engine.HoldRows, func(etx *engine.Tx, ec *engine.Coll) error {
			if ec == nil {
				return errs.ErrNotFound
			}
			p, err := etx.Get(ec, id)
			if err != nil {
				return err
			}
			if c.hidden(id, p) {
				return errExpired
			}
			return use(p)
		})
	} else if err = c.db.eng.Enter(); err == nil {
		if c.expires() {
			err = c.db.eng.ReadRecord(c.h, id, func(p []byte) error {
				if c.hidden(id, p) {
					return errExpired
				}
				return use(p)
			})
		} else {
			err = c.db.eng.ReadRecord(c.h, id, use)
		}
		c.db.eng.Exit()
	}
	if err != nil {
		return opErr(c.opName(op), c.name, id.String(), -1, err)
	}
	return nil
}

// Count returns the number of records, from a counter kept in the same
// transactions as the writes: O(1), no scan.
func (c *coll) Count() (int, error) {
	var n int64
	err := c.read(func(_ *engine.Tx, ec *engine.Coll) error {
		if ec != nil {
			n = ec.Count()
		}
		return nil
	})
	if err != nil {
		return 0, opErr(c.opName("count"), c.name, "", -1, err)
	}
	return int(n), nil
}

// Stats returns the collection's statistics.
func (c *coll) Stats() (CollectionInfo, error) {
	s := CollectionInfo{Name: c.name, Kind: c.kind.String()}
	err := c.read(func(_ *engine.Tx, ec *engine.Coll) error {
		if ec != nil {
			s = convertStats(ec.Stats())
		}
		return nil
	})
	return s, opErr(c.opName("stats"), c.name, "", -1, err)
}
