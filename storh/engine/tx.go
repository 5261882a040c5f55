package engine

import (
	"errors"
	"fmt"
	"sync"

	"github.com/storhdb/storh-go/storh/internal/errs"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Tx is one transaction of the backend with the collections it has opened.
// Counter changes are kept in memory and written once by flush, so a bulk
// write touches each collection's metadata once per transaction, not per
// record.
type Tx struct {
	db  *DB // nil for transactions outside a DB (tests of the layout)
	ktx kv.Tx
	// btx is the bbolt transaction under ktx, for what only a file has
	// (its pages, its size, a backup); nil on another backend.
	btx     *bolt.Tx
	shared  kv.SharedTx // ktx, on a store other processes write to
	failer  kv.Failer   // ktx, on a store whose reads can fail
	colls   map[string]*Coll
	created []*Coll             // collections this transaction created
	woken   map[string]struct{} // queues with jobs made pending: waiters wake on commit
	changes []collChange        // records written to watched collections
	fed     map[string]struct{} // collections whose feeds got changes: readers wake on commit
	feedBuf []byte              // where the changes' keys and values are cut from (feedEntry)

	scratch indexScratch

	// folding marks a fold's own transaction, which starts no other fold.
	folding bool
	// careful marks a run of Update after a conflict: a unique value is
	// looked up before its claim is inserted (claims.go), so that a claim
	// another writer made is an ErrUniqueViolation, not another conflict.
	careful bool
	// rebuilt holds the indexes Repair rebuilt, by collection and name:
	// once it commits, their earlier folds' failures are history.
	rebuilt [][2]string

	// poisoned is set when Protect contained a panic inside this write
	// transaction: bbolt may have been stopped half way through changing
	// its pages, so the transaction must not commit, whatever the callback
	// returns, and every later operation in it fails. (A read transaction
	// changes nothing, so its other reads go on.)
	poisoned error
}

// Protect runs one engine operation of a user's transaction callback with
// bbolt panics and memory faults contained, as the engine's own reads and
// writes are: a damaged page gives ErrCorrupt, not a dead process, and the
// transaction is then rolled back rather than committed.
//
// On a store whose reads can fail (PostgreSQL), an operation after a
// failed read or write of the transaction fails with that failure, and
// one that meets it fails with it whatever it made of the nil the read
// answered (a missing record, an empty page, a collection without its
// buckets).
func (t *Tx) Protect(fn func() error) error {
	if t.poisoned != nil {
		return t.poisoned
	}
	if err := t.failure(); err != nil {
		return err
	}
	err, panicked := contain(fn)
	if panicked {
		if t.ktx.Writable() {
			t.poisoned = err
		}
		return err
	}
	if ferr := t.failure(); ferr != nil {
		return ferr
	}
	return err
}

func newTx(db *DB, ktx kv.Tx) *Tx {
	t := &Tx{db: db, ktx: ktx, btx: boltOf(ktx)}
	t.shared, _ = ktx.(kv.SharedTx)
	t.failer, _ = ktx.(kv.Failer)
	return t
}

// failure returns, mapped, the failure a read or write of the transaction
// met on a store whose reads can fail, or nil.
func (t *Tx) failure() error {
	if t.failer == nil {
		return nil
	}
	return mapStoreErr(t.failer.Failure())
}

// Writable reports whether this is a write transaction.
func (t *Tx) Writable() bool { return t.ktx.Writable() }

// Coll opens the collection name. want = 0 accepts any kind. With create, a
// missing collection is created with kind want (write transactions only);
// without it, a missing collection is ErrNotFound.
func (t *Tx) Coll(name string, want Kind, create bool) (*Coll, error) {
	if c, ok := t.colls[name]; ok {
		t.holdAlone(c) // held beside other writers so far: from here on, alone
		return c, checkKind(c, want)
	}
	return t.openColl(name, want, create, false)
}

// openColl opens a collection not open in the transaction yet; with
// shared, held beside other writers where the store has them.
func (t *Tx) openColl(name string, want Kind, create, shared bool) (*Coll, error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	if err := t.damaged(name); err != nil {
		return nil, err
	}
	var c *Coll
	var err error
	if locker, ok := t.ktx.(kv.Locker); ok && shared {
		if c, err = openCollIn(t.ktx, locker.BucketShared([]byte(name)), name, t.kinds()); c != nil {
			c.shared = true
			if t.db != nil {
				c.slotKey = t.db.slotKey
			}
		}
	} else {
		c, err = openCollIn(t.ktx, t.ktx.Bucket([]byte(name)), name, t.kinds())
	}
	if err == nil && c == nil {
		// A lookup that failed on the server reads as a missing bucket.
		err = t.ktx.Err()
	}
	if err != nil {
		return nil, err
	}
	if c == nil {
		if !create || want == 0 {
			return nil, errNoColl{name}
		}
		if !t.ktx.Writable() {
			return nil, fmt.Errorf("%w (a read-only transaction cannot create it)", errNoColl{name})
		}
		if c, err = createColl(t.ktx, name, want); err != nil {
			return nil, err
		}
		if want == KindQueue {
			// Its jobs are keyed by due time, which a storh from before
			// would misread (formatDue).
			if err := t.needFormat(formatDue); err != nil {
				return nil, err
			}
		}
		t.created = append(t.created, c)
	}
	if err := checkKind(c, want); err != nil {
		return nil, err
	}
	if t.colls == nil {
		t.colls = make(map[string]*Coll, 2)
	}
	if t.db != nil {
		c.oldPending = t.db.oldPending
		c.mems = &t.db.blocked.mems
		if ider, ok := c.records.(kv.Identifier); ok && c.remote {
			c.boundKey, c.bounds = ider, &t.db.colls.bounds
		}
	}
	t.colls[name] = c
	return c, nil
}

func checkKind(c *Coll, want Kind) error {
	if want != 0 && c.Kind != want {
		return fmt.Errorf("%w: %q is a %s collection, not %s; open it with db.%s(%q)",
			errs.ErrWrongKind, c.Name, c.Kind, want, kindMethod(c.Kind), c.Name)
	}
	return nil
}

func kindMethod(k Kind) string {
	switch k {
	case KindDocs:
		return "Docs"
	case KindLog:
		return "Log"
	case KindQueue:
		return "Queue"
	}
	return k.String()
}

// Put stores value (from AppendValue) under id, sealing its checksum for id.
// With insertOnly an existing id fails with ErrExists and nothing changes.
// value belongs to this put alone: it is sealed in place and bbolt keeps a
// reference to it until the transaction ends, so it must be neither shared
// with another put nor modified before then.
func (t *Tx) Put(c *Coll, id uuidv7.UUID, value []byte, insertOnly bool) error {
	return t.PutPrechecked(c, id, value, insertOnly, nil, 0)
}

// PutPrechecked is Put of value i of what pre validated before the
// transaction (DB.Precheck), which spares validating it again when pre
// used the schema c has here.
func (t *Tx) PutPrechecked(c *Coll, id uuidv7.UUID, value []byte, insertOnly bool, pre *Prechecked, i int) error {
	if !t.ktx.Writable() {
		return errs.ErrReadOnly
	}
	// The key lives in the Coll, not on the stack: a slice of a parameter
	// escapes, which cost an allocation per put (bbolt copies keys anyway).
	var old []byte
	if !c.beyondLast(id) {
		old = c.current(id)
	}
	c.key = id
	key := c.key[:]
	if old != nil && insertOnly {
		return fmt.Errorf("%w: log records are immutable", errs.ErrExists)
	}
	// Before anything is written: a violation is the op's own fault
	// (ownFault), and the rest of a group commit goes on without it.
	if err := t.checkSchema(c, value[HeaderSize:], pre, i); err != nil {
		return err
	}
	var oldPayload []byte
	if len(old) >= HeaderSize {
		oldPayload = old[HeaderSize:]
	}
	if err := t.updateIndexes(c, id, oldPayload, value[HeaderSize:]); err != nil {
		return err
	}
	sealValue(value, key)
	var err error
	if old == nil && c.inserter != nil {
		err = c.inserter.Insert(key, value)
	} else {
		err = c.records.Put(key, value)
	}
	if err != nil {
		return mapStoreErr(err)
	}
	c.wroteRow(id, value)
	c.raiseLast(id)
	t.noteChange(c, id, value[HeaderSize:])
	if err := t.recordChange(c, FeedPut, id, old, nil); err != nil {
		return err
	}
	if old == nil {
		c.countDelta++
	} else {
		c.bytesDelta -= int64(len(old))
	}
	c.bytesDelta += int64(len(value))
	return nil
}

// Delete removes id and reports whether it was stored.
func (t *Tx) Delete(c *Coll, id uuidv7.UUID) (bool, error) {
	if !t.ktx.Writable() {
		return false, errs.ErrReadOnly
	}
	return t.deleteOld(c, id, c.current(id))
}

// deleteOld is Delete of id, whose value this transaction acts on is old
// (nil: not stored), as Coll.current returns it.
func (t *Tx) deleteOld(c *Coll, id uuidv7.UUID, old []byte) (bool, error) {
	if old == nil {
		return false, nil
	}
	var payload []byte
	if len(old) >= HeaderSize {
		payload = old[HeaderSize:]
	}
	if err := t.deleteStored(c, id, old, payload, len(old) >= HeaderSize, int64(len(old))); err != nil {
		return false, err
	}
	return true, nil
}

// deleteStored deletes id, stored as size bytes (old, when the caller has
// the stored value and not only the payload): with payload (if it has
// one, readable) its index entries, which a damaged record without one
// leaves for Verify to report and Repair to rebuild.
func (t *Tx) deleteStored(c *Coll, id uuidv7.UUID, old, payload []byte, readable bool, size int64) error {
	c.key = id
	if readable {
		if err := t.updateIndexes(c, id, payload, nil); err != nil {
			return err
		}
	}
	if err := c.records.Delete(c.key[:]); err != nil {
		return mapStoreErr(err)
	}
	c.wroteRow(id, nil)
	if !readable {
		payload = nil
	}
	if err := t.recordChange(c, FeedDelete, id, old, payload); err != nil {
		return err
	}
	c.countDelta--
	c.bytesDelta -= size
	return nil
}

// Get returns the checked payload of id, aliasing the transaction's memory.
// Beside other writers (HoldRows), the record is read with its row locked:
// it stays as read until the transaction ends, so that a write computed
// from it (a read-modify-write) loses no other writer's.
func (t *Tx) Get(c *Coll, id uuidv7.UUID) ([]byte, error) {
	if c.shared {
		// Read again even if held: a read reports a failed transaction.
		return t.get(c, id, c.lockRow(id))
	}
	return t.get(c, id, c.stored(id))
}

// get is Get of v, the stored value of id as read.
func (t *Tx) get(c *Coll, id uuidv7.UUID, v []byte) ([]byte, error) {
	c.key = id // a slice of the parameter would escape: an allocation per Get
	if v == nil {
		if err := t.failure(); err != nil {
			return nil, err // a read that failed, not a missing record
		}
		return nil, errs.ErrNotFound
	}
	// The checksum, over payload and key, proves these are the bytes Put
	// wrote, and Put writes only valid records: reads do not re-validate
	// the encoding (that walk cost more than the rest of a read). Decoding
	// still reports a malformed payload as ErrCorrupt, and Verify checks
	// every record's encoding.
	return Payload(c.key[:], v)
}

// DropColl deletes a collection and all its records.
func (t *Tx) DropColl(name string) error {
	if err := validateName(name); err != nil {
		return err
	}
	if err := t.damaged(name); err != nil {
		return err // freeing its pages would walk the damage
	}
	if err := t.ktx.DeleteBucket([]byte(name)); err != nil {
		if errors.Is(err, kv.ErrBucketNotFound) {
			return errNoColl{name}
		}
		return mapStoreErr(err)
	}
	delete(t.colls, name)
	if t.shared != nil {
		// Readers of its feed in other processes (and other stores of
		// this one) wait for a notice of the collection: the drop's, sent
		// with its commit, wakes them, and they read it gone. The
		// backend drops it when nobody watches the collection. A wake-only
		// key, as a queue's: a watcher's listener finds no record by it.
		t.shared.Announce(name, wakeKey)
	}
	return nil
}

// kinds returns the DB's kinds by bucket identity (see openCollIn).
func (t *Tx) kinds() *sync.Map {
	if t.db == nil {
		return nil
	}
	return &t.db.colls.kindsByID
}

// flush writes the counters of every collection this transaction changed.
// After a failed read or write of the store it writes nothing: the
// transaction cannot commit, and its buckets may read as missing.
func (t *Tx) flush() error {
	if err := t.failure(); err != nil {
		return err
	}
	for _, c := range t.colls {
		if err := c.flush(); err != nil {
			return err
		}
	}
	return checkInvariants(t)
}

// keepBounds records, after the transaction committed, the largest ids it
// knows of the collections it used on a remote store, for the DB's next
// transactions that hold them beside other writers (see Coll.beyondLast).
func (t *Tx) keepBounds() {
	for _, c := range t.colls {
		if c.bounds != nil && c.lastKnown {
			c.bounds.Store(c.boundKey.ID(), bound{last: c.last, empty: c.empty})
		}
	}
}

// forgetBounds drops, after the transaction failed, the cached bounds it
// used: one may be behind the ids other processes took, which is what a
// conflict may have been, and the next run reads the bound afresh.
func (t *Tx) forgetBounds() {
	for _, c := range t.colls {
		if c.lastCached {
			c.bounds.Delete(c.boundKey.ID())
		}
	}
}

// needFormat raises the database's format marker to at least v, in this
// transaction: what it writes needs a storh that reads format v.
func (t *Tx) needFormat(v int64) error {
	b := t.ktx.Bucket(dbMetaBucket)
	if b == nil {
		return nil // a transaction outside a database (tests of the layout)
	}
	if getInt(b, keyFormat) >= v {
		return nil
	}
	return putInt(b, keyFormat, v)
}

// damage returns the first damage a read of this transaction met and could
// not report at the call (Coll.fail): the transaction fails with it.
func (t *Tx) damage() error {
	for _, c := range t.colls {
		if c.failed != nil {
			return c.failed
		}
	}
	return nil
}

// afterCommit hands what a committed transaction changed in blocked
// indexes to the DB's views, and notes the folds that came due.
func (t *Tx) afterCommit() {
	for _, r := range t.rebuilt {
		t.db.blocked.mems.forgetFolds(r[0], r[1])
	}
	for _, c := range t.colls {
		for _, ix := range c.idx {
			if ix.def.Layout != layoutBlocks {
				continue
			}
			if len(ix.flushed) > 0 || ix.folded {
				mem := t.db.blocked.mems.get(c.Name, ix.name, ix.def.Inc)
				for _, f := range ix.flushed {
					mem.PublishCommit(ix.def.Floor, f.before, f.after, f.seg)
				}
				if ix.folded {
					mem.PublishFold(ix.def.Floor)
				}
			}
			if !t.folding && ix.foldDue() {
				t.db.blocked.folds.add(c.Name, ix.name)
			}
		}
	}
}

// damaged refuses a collection whose pages Open found damaged.
func (t *Tx) damaged(name string) error {
	if t.db == nil || t.db.colls.broken[name] == "" {
		return nil
	}
	return fmt.Errorf("%w: collection %q cannot be used: Open found its pages damaged (%s); restore a backup (Verify checks the rest of the file)", errs.ErrCorrupt, name, t.db.colls.broken[name])
}
