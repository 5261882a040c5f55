package postgres

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/storhdb/storh-go/storh/kv"
)

// bucket is a kv.Bucket: one table, the registry rows of its nested
// buckets as this transaction knows them, and its buffered writes.
type bucket struct {
	tx  *tx
	id  int64
	sql *tableSQL

	// children are the nested buckets by name; a nil entry is a name
	// known not to be one. A bucket's whole subtree is read from the
	// registry when the bucket is first looked up, so children is
	// complete for every bucket but the top level, which is looked up
	// name by name.
	children map[string]*bucket
	complete bool
	deleted  bool // by DeleteBucket in this transaction

	// top is the top-level bucket this one is in (itself at the top
	// level, nil for the root), named name: creating or deleting a bucket
	// under it raises its generation.
	top  *bucket
	name string

	// unchecked marks a bucket of a subtree taken from the store's cache
	// whose check has not come back yet (see tx.trip); idSeen records
	// that the caller asked for its id meanwhile.
	unchecked bool
	idSeen    bool

	// pending are the writes not yet sent, in the order they were made,
	// in the pooled buffer opBuf (nil while there are none).
	pending []op
	opBuf   *[]op
	inDirty bool // listed in tx.dirty

	// cursors are those holding rows read ahead, which a write may make
	// stale.
	cursors []*cursor

	seq *sequence // values numbered at commit (kv.Sequencer), nil: none
}

// op is a buffered write: a put of v (an insert of an absent key), a
// delete, or an add of the integers of v (kv.Adder).
type op struct {
	k, v   []byte
	del    bool
	insert bool
	add    bool
}

var (
	_ kv.Bucket     = (*bucket)(nil)
	_ kv.Inserter   = (*bucket)(nil)
	_ kv.Adder      = (*bucket)(nil)
	_ kv.RowLocker  = (*bucket)(nil)
	_ kv.Identifier = (*bucket)(nil)
)

func (b *bucket) Writable() bool { return b.tx.writable }

// ID is the bucket's registry id, which an identity column never hands
// out twice.
func (b *bucket) ID() uint64 {
	if b.unchecked {
		b.idSeen = true
	}
	return uint64(b.id)
}

// SetFillPercent does nothing: PostgreSQL splits its own pages.
func (b *bucket) SetFillPercent(float64) {}

func (b *bucket) Cursor() kv.Cursor { return &cursor{b: b} }

// isBucket reports whether key names a nested bucket.
func (b *bucket) isBucket(key []byte) bool { return b.children[string(key)] != nil }

// writable returns why the bucket cannot take a write, or nil.
func (b *bucket) writable(op string) error {
	if err := b.tx.usable(); err != nil {
		if err == b.tx.err {
			return fmt.Errorf("postgres: %s after a failed statement: %w", op, err)
		}
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	if b.deleted {
		return fmt.Errorf("postgres: %s: %w (%w)", op, kv.ErrBucketNotFound, errDeleted)
	}
	return nil
}

// Get reads key, after sending the bucket's buffered writes, in one round
// trip. The key of a nested bucket answers nil without one.
func (b *bucket) Get(key []byte) []byte {
	t := b.tx
	if !t.readable() || b.deleted || len(key) == 0 || len(key) > MaxKeySize {
		return nil
	}
	if b.unchecked {
		t.observe(b, key)
	}
	if b.isBucket(key) {
		return nil
	}
	var v []byte
	err := t.trip("get", func(batch *pgx.Batch) {
		b.queueFlush(batch)
		v = nil
		batch.Queue(b.sql.get, key).Query(func(rows pgx.Rows) error {
			if rows.Next() {
				var err error
				_, v, err = scanRow(rows, &t.arena, false)
				return err
			}
			return nil
		})
	})
	if err != nil {
		return nil
	}
	return v
}

// LockRange is SELECT ... FOR UPDATE SKIP LOCKED over [from, to), after
// sending the bucket's buffered writes, in one round trip.
func (b *bucket) LockRange(from, to []byte, n int) (keys, values [][]byte) {
	t := b.tx
	if !t.writable || !t.readable() || b.deleted || n <= 0 {
		return nil, nil
	}
	if from == nil {
		from = []byte{}
	}
	batch := t.newBatch()
	b.queueFlush(batch)
	scan := func(rows pgx.Rows) error {
		for rows.Next() {
			k, v, err := scanRow(rows, &t.arena, true)
			if err != nil {
				return err
			}
			keys, values = append(keys, k), append(values, v)
		}
		return nil
	}
	if to == nil {
		batch.Queue(b.sql.lockFrom, from, n).Query(scan)
	} else {
		batch.Queue(b.sql.lockRange, from, to, n).Query(scan)
	}
	if t.send(batch, "lock range") != nil {
		return nil, nil
	}
	return keys, values
}

// LockKeys is SELECT ... FOR UPDATE (SKIP LOCKED without wait) of keys,
// after sending the bucket's buffered writes, in one round trip. Rows are
// locked in key order, so that two transactions locking overlapping keys
// do not deadlock over them.
func (b *bucket) LockKeys(keys [][]byte, wait bool) [][]byte {
	t := b.tx
	values := make([][]byte, len(keys))
	if !t.writable || !t.readable() || b.deleted || len(keys) == 0 {
		return values
	}
	batch := t.newBatch()
	b.queueFlush(batch)
	got := make(map[string][]byte, len(keys))
	stmt := b.sql.lockKeys
	if !wait {
		stmt = b.sql.tryKeys
	}
	batch.Queue(stmt, keys).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			k, v, err := scanRow(rows, &t.arena, true)
			if err != nil {
				return err
			}
			got[string(k)] = v
		}
		return nil
	})
	if t.send(batch, "lock keys") != nil {
		return values
	}
	for i, k := range keys {
		values[i] = got[string(k)]
	}
	return values
}

// Put buffers the write: it reaches the server with the next read of the
// bucket or the commit. The value is kept, not copied, as the contract
// allows; the key is copied, since callers reuse theirs.
func (b *bucket) Put(key, value []byte) error {
	if err := b.writable("put"); err != nil {
		return err
	}
	switch {
	case len(key) == 0:
		return fmt.Errorf("postgres: put: %w", kv.ErrKeyRequired)
	case len(key) > MaxKeySize:
		return fmt.Errorf("postgres: put: %w: %d bytes, the limit is %d", kv.ErrKeyTooLarge, len(key), MaxKeySize)
	case len(value) > MaxValueSize:
		return fmt.Errorf("postgres: put: %w: %d bytes, the limit is %d", kv.ErrValueTooLarge, len(value), MaxValueSize)
	case b.isBucket(key):
		return fmt.Errorf("postgres: put %q: %w: it is a nested bucket", key, kv.ErrIncompatibleValue)
	}
	if value == nil {
		value = []byte{} // a nil value would be a NULL: a bucket's marker
	}
	b.write(op{k: b.tx.arena.copy(key), v: value})
	return nil
}

// Insert is Put of a key the caller knows is absent: it goes to the
// server as a plain INSERT, which costs PostgreSQL less than the upsert of
// a Put; a key that was present fails the transaction with kv.ErrConflict
// (SQLSTATE 23505).
func (b *bucket) Insert(key, value []byte) error {
	if err := b.Put(key, value); err != nil {
		return err
	}
	b.pending[len(b.pending)-1].insert = true
	return nil
}

// Add buffers the addition of delta's integers to key's (see kv.Adder):
// it reaches the server as an upsert that adds them there, so it needs
// no read. The delta is kept, not copied, as a Put's value is.
func (b *bucket) Add(key, delta []byte) error {
	if err := b.writable("add"); err != nil {
		return err
	}
	switch {
	case len(key) == 0:
		return fmt.Errorf("postgres: add: %w", kv.ErrKeyRequired)
	case len(key) > MaxKeySize:
		return fmt.Errorf("postgres: add: %w: %d bytes, the limit is %d", kv.ErrKeyTooLarge, len(key), MaxKeySize)
	case len(delta) == 0 || len(delta)%8 != 0 || len(delta) > MaxValueSize:
		return fmt.Errorf("postgres: add %q: %w: a delta of %d bytes is not a run of 8-byte integers", key, kv.ErrIncompatibleValue, len(delta))
	case b.isBucket(key):
		return fmt.Errorf("postgres: add %q: %w: it is a nested bucket", key, kv.ErrIncompatibleValue)
	}
	b.write(op{k: b.tx.arena.copy(key), v: delta, add: true})
	return nil
}

// sumInts adds the 8-byte big-endian integers of delta to those of v, as
// the server does for an Add: a v of another length counts as missing.
func sumInts(v, delta []byte) []byte {
	out := append([]byte(nil), delta...)
	if len(v) != len(delta) {
		return out
	}
	for i := 0; i+8 <= len(out); i += 8 {
		binary.BigEndian.PutUint64(out[i:], binary.BigEndian.Uint64(v[i:])+binary.BigEndian.Uint64(out[i:]))
	}
	return out
}

// Delete buffers the deletion of key. A key that cannot exist (empty, too
// long) is not an error, as on bbolt.
func (b *bucket) Delete(key []byte) error {
	if err := b.writable("delete"); err != nil {
		return err
	}
	if len(key) == 0 || len(key) > MaxKeySize {
		return nil
	}
	if b.isBucket(key) {
		return fmt.Errorf("postgres: delete %q: %w: it is a nested bucket", key, kv.ErrIncompatibleValue)
	}
	b.write(op{k: b.tx.arena.copy(key), del: true})
	return nil
}

// write buffers o and drops what cursors read ahead that it changes.
func (b *bucket) write(o op) {
	if b.opBuf == nil {
		b.opBuf = opBufs.Get().(*[]op)
		b.pending = *b.opBuf
	}
	b.pending = append(b.pending, o)
	if !b.inDirty {
		b.inDirty = true
		b.tx.dirty = append(b.tx.dirty, b)
	}
	b.wrote(o.k)
}

// wrote drops the rows read ahead by cursors that key falls among.
func (b *bucket) wrote(key []byte) {
	for i := 0; i < len(b.cursors); {
		if c := b.cursors[i]; c.staleAfter(key) {
			c.ahead, c.end, c.watched = nil, false, false
			b.cursors[i] = b.cursors[len(b.cursors)-1]
			b.cursors[len(b.cursors)-1] = nil
			b.cursors = b.cursors[:len(b.cursors)-1]
			continue
		}
		i++
	}
}

// flushChunk bounds the bytes of keys and values one statement carries.
const flushChunk = 16 << 20

// queueFlush queues the bucket's buffered writes into batch: the writes
// of each key come down to one (the last put or delete, with the adds
// after it summed into it), so the statements touch distinct keys and
// their order does not matter. Keys go in ascending order.
func (b *bucket) queueFlush(batch *pgx.Batch) {
	if len(b.pending) == 0 || b.deleted {
		b.releaseOps()
		return
	}
	ops := b.pending
	slices.SortStableFunc(ops, func(x, y op) int { return bytes.Compare(x.k, y.k) })
	var (
		putK, putV byteaArray
		insK, insV byteaArray
		addK, addV byteaArray
		delK       byteaArray
		putSize    int
		insSize    int
		addSize    int
		delSize    int
		left       int // ops not settled yet: room enough for any kind's arrays
	)
	// room returns arr, made with room for the rest of the ops when the
	// kind has none yet: one allocation, not a doubling per kind.
	room := func(arr byteaArray) byteaArray {
		if arr == nil {
			return make(byteaArray, 0, left)
		}
		return arr
	}
	emitPuts := func() {
		switch len(putK) {
		case 0:
		case 1:
			batch.Queue(b.sql.put1, putK[0], putV[0])
		default:
			batch.Queue(b.sql.putN, putK, putV)
		}
		putK, putV, putSize = nil, nil, 0
	}
	emitInserts := func() {
		switch len(insK) {
		case 0:
		case 1:
			batch.Queue(b.sql.ins1, insK[0], insV[0])
		default:
			batch.Queue(b.sql.insN, insK, insV)
		}
		insK, insV, insSize = nil, nil, 0
	}
	emitAdds := func() {
		switch {
		case len(addK) == 0:
		case len(addK) == 1 && len(addV[0]) <= 8*maxAddInts:
			batch.Queue(b.sql.add1[len(addV[0])/8-1], addK[0], addV[0])
		default:
			batch.Queue(b.sql.addN, addK, addV)
		}
		addK, addV, addSize = nil, nil, 0
	}
	emitDels := func() {
		switch len(delK) {
		case 0:
		case 1:
			batch.Queue(b.sql.del1, delK[0])
		default:
			batch.Queue(b.sql.delN, delK)
		}
		delK, delSize = nil, 0
	}
	for i := 0; i < len(ops); {
		j := i + 1
		for j < len(ops) && bytes.Equal(ops[j].k, ops[i].k) {
			j++
		}
		first, o := ops[i], settle(ops[i:j])
		left = len(ops) - i
		i = j
		if o.add {
			if n := len(o.k) + len(o.v); addSize+n > flushChunk {
				emitAdds()
			}
			addK, addV = append(room(addK), o.k), append(room(addV), o.v)
			addSize += len(o.k) + len(o.v)
			continue
		}
		// A key inserted first keeps its INSERT whatever this transaction
		// wrote to it after, so that a row another writer committed still
		// fails the transaction (kv.Inserter): its later writes land on the
		// row it inserted, so a put comes down to an INSERT of the last
		// value, and a delete to the INSERT followed by the DELETE (dels
		// go after inserts). An insert after another write of its key
		// (none reached the server) is not known to be of an absent key.
		if first.insert {
			ins := o
			if o.del {
				ins = first
			}
			if n := len(ins.k) + len(ins.v); insSize+n > flushChunk {
				emitInserts()
			}
			insK, insV = append(room(insK), ins.k), append(room(insV), ins.v)
			insSize += len(ins.k) + len(ins.v)
			if !o.del {
				continue
			}
		}
		if o.del {
			if delSize+len(o.k) > flushChunk {
				emitInserts() // the INSERTs of keys inserted and then deleted go first
				emitDels()
			}
			delK = append(room(delK), o.k)
			delSize += len(o.k)
			continue
		}
		if n := len(o.k) + len(o.v); putSize+n > flushChunk {
			emitPuts()
		}
		putK, putV = append(room(putK), o.k), append(room(putV), o.v)
		putSize += len(o.k) + len(o.v)
	}
	emitPuts()
	emitInserts()
	emitAdds()
	emitDels()
	b.releaseOps()
}

// opBufs holds the buffers of writes that went into a batch: every
// transaction makes its buckets anew, so a buffer a bucket kept would be
// grown again from nothing, allocation by allocation, by each one.
var opBufs = sync.Pool{New: func() any { return new([]op) }}

// releaseOps gives the bucket's write buffer back to opBufs, emptied: the
// batch holds the keys and values, not the buffer.
func (b *bucket) releaseOps() {
	if b.opBuf == nil {
		b.pending = nil
		return
	}
	clear(b.pending) // the caller's values: the pool must not keep them
	if cap(b.pending) <= maxPooledOps {
		*b.opBuf = b.pending[:0]
		opBufs.Put(b.opBuf)
	}
	b.pending, b.opBuf = nil, nil
}

// maxPooledOps bounds the write buffer that goes back to the pool: one
// grown by a bulk write is left to the collector.
const maxPooledOps = 4096

// byteaArray is a bytea[] argument that pgx encodes without reflection:
// a [][]byte goes through reflect, which copies every element to the heap
// to hand it over as an interface, two allocations per row written.
type byteaArray [][]byte

var _ pgtype.ArrayGetter = byteaArray(nil)

func (a byteaArray) Dimensions() []pgtype.ArrayDimension {
	if a == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(a)), LowerBound: 1}}
}

// Index hands element i over as a pointer, which an interface holds
// without a copy.
func (a byteaArray) Index(i int) any { return (*byteaElem)(&a[i]) }

func (a byteaArray) IndexType() any { return (*byteaElem)(nil) }

// byteaElem is an element of a byteaArray; a nil one is a NULL, as a nil
// []byte is.
type byteaElem []byte

var _ pgtype.BytesValuer = (*byteaElem)(nil)

func (e *byteaElem) BytesValue() ([]byte, error) { return *e, nil }

// settle is what the writes of one key, in the order they were made, come
// down to: the last put or delete, with the adds after it summed into it
// (after a delete, into zeros), or the sum of the adds if that is all
// there is.
func settle(ops []op) op {
	last := ops[len(ops)-1]
	if !last.add {
		return last
	}
	s := op{k: last.k, add: true}
	for _, o := range ops {
		switch {
		case !o.add:
			s = o
		case s.add && s.v == nil:
			s.v = o.v
		case s.add:
			s.v = sumInts(s.v, o.v)
		case s.del:
			s = op{k: o.k, v: o.v}
		default:
			s = op{k: o.k, v: sumInts(s.v, o.v)}
		}
	}
	return s
}

// Bucket returns the nested bucket name, reading its subtree from the
// registry on first use in the transaction.
func (b *bucket) Bucket(name []byte) kv.Bucket {
	if c := b.child(name); c != nil {
		return c
	}
	return nil
}

func (b *bucket) child(name []byte) *bucket { return b.childHeld(name, false) }

// childHeld is child; a top-level bucket not yet held is held shared or
// alone as asked.
func (b *bucket) childHeld(name []byte, shared bool) *bucket {
	t := b.tx
	if !t.readable() || b.deleted || len(name) == 0 || len(name) > MaxKeySize {
		return nil
	}
	if c, known := b.children[string(name)]; known || b.complete {
		if b.unchecked {
			t.observe(b, name)
		}
		return c
	}
	// A read that has not been to the server yet takes the subtree from
	// the cache, and checks it with its first statement. A writer takes
	// it whenever it first uses the bucket, and a check that finds it
	// changed fails the writer (see holdCached).
	if b.id == 0 && (t.writable || !t.begun) {
		if tr, ok := t.s.trees.Load(string(name)); ok {
			tr := tr.(*tree)
			c := t.plant(b, name, tr.rows)
			if t.writable {
				t.holdCached(c.nameKey(), shared, tr)
				return c
			}
			c.walk(func(d *bucket) { d.unchecked = true })
			t.checks = append(t.checks, check{tree: tr, top: c})
			t.observe(b, name)
			return c
		}
	}
	found, err := t.lookup(b, name, shared)
	if err != nil {
		return nil
	}
	return t.plant(b, name, found)
}

// lookup reads the registry rows of parent's child name and of every
// bucket under it, locking a top-level bucket first in a writable
// transaction. A read-only transaction caches a top-level subtree it
// finds.
func (t *tx) lookup(parent *bucket, name []byte, shared bool) ([]reg, error) {
	var found []reg
	var top tree
	err := t.trip("bucket", func(batch *pgx.Batch) {
		if parent.id == 0 {
			t.queueLock(batch, name, shared)
		}
		found, top = found[:0], tree{}
		batch.Queue(t.s.reg.subtree, parent.id, name).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var r reg
				var gen int64
				if err := rows.Scan(&r.id, &r.parent, &r.name, &gen); err != nil {
					return err
				}
				if r.parent == parent.id {
					top.id, top.gen = r.id, gen
				}
				found = append(found, r)
			}
			return rows.Err()
		})
	})
	if err != nil {
		return nil, err
	}
	// A writer looks the subtree up once it holds the bucket, so it finds
	// it as committed; unless it changed it itself first.
	if _, changed := t.reshape[string(name)]; parent.id == 0 && top.id != 0 && !changed {
		top.rows = found
		t.s.cacheTree(string(name), &top)
	}
	return found, nil
}

// nameKey is a top-level bucket's name as a key the transaction keeps.
func (b *bucket) nameKey() []byte { return []byte(b.name) }

// plant makes the buckets of registry rows found under parent, links
// them, and returns parent's child name, nil if the rows do not hold it
// (which parent then remembers).
func (t *tx) plant(parent *bucket, name []byte, found []reg) *bucket {
	byID := make(map[int64]*bucket, len(found)+1)
	byID[parent.id] = parent
	for _, r := range found {
		byID[r.id] = t.newBucket(r.id)
	}
	for _, r := range found {
		if p := byID[r.parent]; p != nil {
			p.children[string(r.name)] = byID[r.id]
		}
	}
	c := parent.children[string(name)]
	if c == nil {
		parent.children[string(name)] = nil
		return nil
	}
	top := parent.top
	if parent.id == 0 {
		top = c
		c.name = string(name)
	}
	c.walk(func(d *bucket) { d.top = top })
	return c
}

// newBucket returns a bucket whose nested buckets the caller fills in.
func (t *tx) newBucket(id int64) *bucket {
	return &bucket{tx: t, id: id, sql: t.s.table(id), children: map[string]*bucket{}, complete: true}
}

// CreateBucket creates the nested bucket name: its marker row here and
// its registry row in one statement, then its table.
func (b *bucket) CreateBucket(name []byte) (kv.Bucket, error) {
	c, err := b.create(name)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (b *bucket) create(name []byte) (*bucket, error) {
	if err := b.checkName("create bucket", name); err != nil {
		return nil, err
	}
	if b.isBucket(name) {
		return nil, fmt.Errorf("postgres: create bucket %q: %w", name, kv.ErrBucketExists)
	}
	t := b.tx
	if b.id == 0 {
		t.HoldAlone(name)
	}
	batch := t.newBatch()
	if b.id == 0 {
		t.queueLock(batch, name, false)
	} else {
		batch.Queue(t.s.reg.bump, b.top.id)
	}
	t.reshaped(b, name)
	b.queueFlush(batch)
	var (
		id       *int64
		isBucket *bool
	)
	batch.Queue(b.sql.marker, name, b.id).QueryRow(func(row pgx.Row) error {
		return row.Scan(&id, &isBucket)
	})
	if err := t.send(batch, "create bucket"); err != nil {
		return nil, err
	}
	if id == nil {
		if isBucket != nil && !*isBucket {
			return nil, fmt.Errorf("postgres: create bucket %q: %w: the key holds a value", name, kv.ErrIncompatibleValue)
		}
		return nil, fmt.Errorf("postgres: create bucket %q: %w", name, kv.ErrBucketExists)
	}
	c := t.newBucket(*id)
	if c.top = b.top; b.id == 0 {
		c.top, c.name = c, string(name)
	}
	batch = t.newBatch()
	batch.Queue(c.sql.create)
	if err := t.send(batch, "create bucket"); err != nil {
		return nil, err
	}
	b.children[string(name)] = c
	b.wrote(name)
	return c, nil
}

// checkName checks a bucket operation's transaction and name.
func (b *bucket) checkName(op string, name []byte) error {
	if err := b.writable(op); err != nil {
		return err
	}
	switch {
	case len(name) == 0:
		return fmt.Errorf("postgres: %s: %w", op, kv.ErrKeyRequired)
	case len(name) > MaxKeySize:
		return fmt.Errorf("postgres: %s: %w: %d bytes, the limit is %d", op, kv.ErrKeyTooLarge, len(name), MaxKeySize)
	}
	return nil
}

func (b *bucket) CreateBucketIfNotExists(name []byte) (kv.Bucket, error) {
	if err := b.checkName("create bucket", name); err != nil {
		return nil, err
	}
	if c := b.child(name); c != nil {
		return c, nil
	}
	if err := b.tx.err; err != nil {
		return nil, err
	}
	return b.CreateBucket(name)
}

// DeleteBucket deletes the nested bucket name and its subtree: registry
// rows, marker and tables, in one round trip.
func (b *bucket) DeleteBucket(name []byte) error {
	if err := b.writable("delete bucket"); err != nil {
		return err
	}
	t := b.tx
	if b.id == 0 {
		t.HoldAlone(name)
	}
	c := b.child(name)
	if t.err != nil {
		return t.err
	}
	if c == nil {
		if b.id != 0 && b.Get(name) != nil {
			return fmt.Errorf("postgres: delete bucket %q: %w: the key holds a value", name, kv.ErrIncompatibleValue)
		}
		if t.err != nil {
			return t.err
		}
		return fmt.Errorf("postgres: delete bucket %q: %w", name, kv.ErrBucketNotFound)
	}
	var ids []int64
	var tables []string
	c.walk(func(d *bucket) {
		ids = append(ids, d.id)
		tables = append(tables, d.sql.name)
	})
	batch := t.newBatch()
	if b.id != 0 {
		batch.Queue(t.s.reg.bump, b.top.id)
	}
	t.reshaped(b, name)
	batch.Queue(t.s.reg.delete, ids)
	batch.Queue(b.sql.del1, name)
	batch.Queue("DROP TABLE " + strings.Join(tables, ", "))
	if err := t.send(batch, "delete bucket"); err != nil {
		return err
	}
	c.walk(func(d *bucket) {
		d.deleted, d.cursors = true, nil
		d.releaseOps()
	})
	if b.complete {
		delete(b.children, string(name))
	} else {
		b.children[string(name)] = nil
	}
	b.wrote(name)
	return nil
}

// walk calls fn on b and every bucket under it.
func (b *bucket) walk(fn func(*bucket)) {
	fn(b)
	for _, c := range b.children {
		if c != nil {
			c.walk(fn)
		}
	}
}

// scanText is scanRow for a row the server sent as text. It is a function
// of its own so that scanRow's results, whose addresses it does not take,
// stay off the heap: two allocations a row otherwise.
func scanText(rows pgx.Rows, withKey bool) (k, v []byte, err error) {
	if withKey {
		err = rows.Scan(&k, &v)
	} else {
		err = rows.Scan(&v)
	}
	return k, v, err
}

// scanRow reads a row of (k, v), or of v alone, copying into a: raw
// bytes when the server sent binary, as it does unless the connection is
// set to the simple protocol.
func scanRow(rows pgx.Rows, a *arena, withKey bool) (k, v []byte, err error) {
	raw := rows.RawValues()
	binary := true
	for _, f := range rows.FieldDescriptions() {
		binary = binary && f.Format == pgx.BinaryFormatCode
	}
	if !binary {
		return scanText(rows, withKey)
	}
	if withKey {
		if len(raw) != 2 {
			return nil, nil, errors.New("postgres: a row of (k, v) has not 2 columns")
		}
		k = a.copy(raw[0])
		raw = raw[1:]
	}
	if raw[0] != nil {
		v = a.copy(raw[0])
	}
	return k, v, nil
}
