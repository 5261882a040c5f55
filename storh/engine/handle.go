package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/kv"
)

// Handle is what the storh front door keeps for an open collection handle:
// the collection's name and kind, and the drop epoch when it was opened.
//
// A collection is created by its first write, in the same transaction, so
// an import that fails, or a handle that is only read, leaves nothing
// behind. Until then reads through a handle see it empty.
type Handle struct {
	Name  string
	Kind  Kind
	Epoch uint64
	// Indexes are the indexes the handle was opened with: they are created
	// with the collection, or by EnsureIndexes on an existing one.
	Indexes []IndexSpec
	// Schema is the JSON Schema the handle was opened with (nil: none):
	// given to the collection when its first write creates it, and
	// refused on one that exists with another (CheckHandleSchema).
	Schema []byte
	// Feed is the keep of the change feed the handle was opened with (0:
	// none asked): given to the collection when its first write creates
	// it, and set on one that exists (EnsureFeed).
	Feed int64
	// Rule is the queue rule the handle's options gave (zero fields: not
	// given), stored with the queue when its first write creates it, and
	// refused on one that stores another (CheckQueueRule). BackoffGiven:
	// the options gave a backoff (or none, explicitly).
	Rule         QueueRule
	BackoffGiven bool

	key   []byte    // Name as a bucket key, made once: see ReadRecord
	roots *rootSlot // the records bucket's root page at the last commit a point read saw (direct.go)
}

// collections is what a DB knows of its collections between
// transactions: their kinds, their drops, and those Open found damaged.
type collections struct {
	// mu serialises OpenHandle's look-up with Drop, so a Drop cannot
	// slip between the check of a collection and the caching of its kind.
	mu sync.Mutex

	// kinds caches name → Kind for collections that exist, or that a handle
	// was opened for and whose first write will create them.
	kinds sync.Map
	// kindsByID caches collections' kinds by the identity of their
	// top-level bucket, on a store whose buckets have one (see openCollIn).
	kindsByID sync.Map
	// bounds caches, by records bucket, the largest id the DB last knew
	// there, for writers beside other stores (see Coll.beyondLast).
	bounds sync.Map
	// schemas caches name → *Schema, the collection's schema as last
	// compiled, for the writes after (schema.go).
	schemas sync.Map

	// Every successful Drop takes the next epoch and records it under the
	// collection's name, so a handle opened before the Drop refuses to
	// write (it would silently resurrect the collection) while a handle
	// opened after it creates the collection afresh.
	epoch atomic.Uint64
	drops sync.Map // name → epoch of its last Drop

	// broken holds the collections whose search paths Open found damaged,
	// with what it found: they cannot be read or written without risking
	// a search that never ends, so Tx.Coll refuses them. Set by Open, read
	// only after.
	broken map[string]string
}

// errNoColl is the ErrNotFound of a collection that is not in the file.
type errNoColl struct{ name string }

func (e errNoColl) Error() string {
	return fmt.Sprintf("storh: not found: collection %s does not exist", quote(e.name))
}

func (e errNoColl) Unwrap() error { return errs.ErrNotFound }

// NoColl is the ErrNotFound of collection name, missing from the store.
func NoColl(name string) error { return errNoColl{name} }

func isNoColl(err error) bool {
	var nc errNoColl
	return errors.As(err, &nc)
}

// OpenHandle checks that collection name can be used as kind want: it is
// either stored with that kind, or missing and the database is writable (the
// first write will create it). With mustExist a missing collection is
// ErrNotFound instead. No transaction writes. The caller must hold Enter.
func (db *DB) OpenHandle(name string, want Kind, mustExist bool) (Handle, error) {
	if err := validateName(name); err != nil {
		return Handle{}, err
	}
	h := Handle{Name: name, Kind: want, Epoch: db.colls.epoch.Load(), key: []byte(name), roots: new(rootSlot)}
	// A file's kinds are known for good. Other processes drop and create
	// the collections of a shared store: there the store says, and only a
	// name it does not hold keeps the kind a handle here opened it as.
	reserved, known := db.colls.kinds.Load(name)
	if known && !mustExist && db.file.bolt != nil {
		return h, checkKind(&Coll{Name: name, Kind: reserved.(Kind)}, want)
	}
	db.colls.mu.Lock()
	defer db.colls.mu.Unlock()
	var kind Kind
	err := db.ViewSafe(func(tx *Tx) error {
		// Set on every run: a first that found the collection in what the
		// store remembered runs again when it is gone (kv.ErrStale).
		kind = 0
		c, err := tx.Coll(name, 0, false)
		if c != nil {
			kind = c.Kind
		}
		if err != nil && isNoColl(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return h, err
	}
	if kind == 0 {
		switch {
		case mustExist:
			return h, errNoColl{name}
		case db.opts.ReadOnly:
			return h, fmt.Errorf("%w (the database is read-only, so it cannot be created)", errNoColl{name})
		case known:
			kind = reserved.(Kind)
		default:
			kind = want
		}
	}
	db.colls.kinds.Store(name, kind)
	return h, checkKind(&Coll{Name: name, Kind: kind}, want)
}

// Handle returns a handle on collection name for use inside this
// transaction. No Drop can run while a transaction is open, so the handle
// takes the current epoch.
func (t *Tx) Handle(name string, kind Kind) Handle {
	h := Handle{Name: name, Kind: kind, key: []byte(name)}
	if t.db != nil {
		h.Epoch = t.db.colls.epoch.Load()
	}
	return h
}

// droppedSince reports whether collection name was dropped after epoch.
func (db *DB) droppedSince(name string, epoch uint64) bool {
	e, ok := db.colls.drops.Load(name)
	return ok && e.(uint64) > epoch
}

// Use returns the collection of h in this transaction. A collection that is
// not in the file is created when write is set; for a read Use returns nil,
// which readers treat as an empty collection. A handle opened before the
// collection was dropped gets ErrNotFound either way.
func (t *Tx) Use(h Handle, write bool) (*Coll, error) {
	c, err := t.Coll(h.Name, h.Kind, false)
	if err == nil || !isNoColl(err) {
		return c, err
	}
	if t.db != nil && t.db.droppedSince(h.Name, h.Epoch) {
		return nil, fmt.Errorf("%w (it was dropped after this handle was opened; open a new handle to create it again)", err)
	}
	if !write {
		return nil, nil
	}
	if c, err = t.Coll(h.Name, h.Kind, true); err != nil {
		return nil, err
	}
	// A new collection is empty: its declared indexes are ready at once,
	// and its declared schema holds for every record.
	if err := t.ensureIndexes(c, h.Indexes); err != nil {
		return nil, err
	}
	if err := t.EnsureFeed(c, h.Feed); err != nil {
		return nil, err
	}
	if h.Kind == KindQueue {
		if err := c.storeQueueRule(h.Rule); err != nil {
			return nil, err
		}
	}
	if h.Schema != nil {
		s, err := CompileSchema(h.Schema)
		if err != nil {
			return nil, err
		}
		return c, t.storeSchema(c, s)
	}
	return c, nil
}

// Hold is how a write transaction holds a collection on a store whose
// writers run at the same time (kv.Locker: PostgreSQL, where other
// processes write too). On bbolt, with one writer at a time, every hold
// is the file's single writer.
type Hold uint8

const (
	// HoldAlone holds the collection alone: whatever the transaction
	// reads there stays as it read it until it ends, as under bbolt's
	// single writer. Queries, counts, index and queue maintenance hold
	// so.
	HoldAlone Hold = iota
	// HoldRows holds the collection beside other writers, for writes and
	// reads of records by id (Put, Delete, Get, appends, enqueues): a
	// record is read with its row locked, so that it stays as read until
	// the commit; a new id is inserted, and fails the transaction with
	// kv.ErrConflict if another writer inserted it first (Update runs it
	// again); counters go to the DB's own slots (see slots.go); unique
	// values are claimed (see claimIn). A collection whose indexes need
	// more (a blocked or building index) is held alone instead, and a
	// collection missing is created, alone.
	HoldRows
	// HoldMoving holds a queue beside other writers for the operations
	// that move jobs by row locks (Claim, RequeueExpired, Complete, Fail,
	// Extend, Release), so that claimers in many processes take
	// different jobs at the same time instead of taking turns. It never
	// creates the queue.
	HoldMoving
)

// UseHold is Use with the hold of a write transaction: alone, or beside
// other writers where the store has them. Any other use of the
// collection later in the transaction (Use, Coll) holds it alone from
// then on.
func (t *Tx) UseHold(h Handle, create bool, hold Hold) (*Coll, error) {
	if _, ok := t.ktx.(kv.Locker); !ok || hold == HoldAlone || !t.ktx.Writable() {
		return t.Use(h, create && hold != HoldMoving)
	}
	c, ok := t.colls[h.Name]
	if ok {
		if err := checkKind(c, h.Kind); err != nil {
			return nil, err
		}
	} else {
		var err error
		if c, err = t.openColl(h.Name, h.Kind, false, true); err != nil {
			if !isNoColl(err) {
				return nil, err
			}
			if t.db != nil && t.db.droppedSince(h.Name, h.Epoch) {
				return nil, fmt.Errorf("%w (it was dropped after this handle was opened; open a new handle to create it again)", err)
			}
			if !create || hold == HoldMoving {
				return nil, nil
			}
			return t.Use(h, true)
		}
	}
	if hold == HoldRows {
		return c, t.rowsReady(c)
	}
	return c, nil
}

// rowsReady decides, once per transaction, whether c can take writes of
// records by id beside other writers: every index one key per entry
// (blocks are rewritten whole), built (a build's mark moves under it), and
// a unique one with its claims; and a queue's jobs buckets made. Anything
// else holds c alone from here on. Holding it alone, the transaction
// gives a unique index the claims it lacks (buildClaims): the writers
// after it need not.
func (t *Tx) rowsReady(c *Coll) error {
	if c.rowsChecked {
		return nil
	}
	c.rowsChecked = true
	ixs, err := c.indexes()
	if err != nil {
		return err
	}
	alone := c.Kind == KindQueue && c.root.Bucket(bucketJobs) == nil
	for _, ix := range ixs {
		alone = alone || ix.def.Layout != layoutKeys || ix.def.Building || ix.def.Unique && !ix.def.Claims
	}
	if !alone {
		return nil
	}
	t.holdAlone(c)
	for _, ix := range ixs {
		if ix.def.Unique && !ix.def.Claims && ix.def.Layout == layoutKeys && !ix.def.Building {
			if err := t.buildClaims(c, ix); err != nil {
				return err
			}
		}
	}
	return nil
}

// holdAlone makes c's hold exclusive from the transaction's next
// statement on. What the transaction read of c's metadata beside other
// writers (their counter slots, the records' last id) may have changed
// since: it is read again. (A bound taken from the DB's cache stays
// marked: if it was behind, the transaction's inserts made with it fail,
// and the next run must not take it again.)
func (t *Tx) holdAlone(c *Coll) {
	if !c.shared {
		return
	}
	t.ktx.(kv.Locker).HoldAlone([]byte(c.Name))
	c.shared = false
	c.metaInts, c.slots, c.baseRead, c.slotsRead, c.lastKnown = nil, nil, false, false, false
}

// DropColl deletes a collection and forgets its kind. The caller must hold
// Enter.
func (db *DB) DropColl(name string) error {
	db.colls.mu.Lock()
	defer db.colls.mu.Unlock()
	defer db.colls.kinds.Delete(name)
	err := db.UpdateSafe(func(tx *Tx) error {
		if err := tx.DropColl(name); err != nil {
			return err
		}
		// Recorded inside the transaction: a write that starts after this
		// one commits already sees it.
		db.colls.drops.Store(name, db.colls.epoch.Add(1))
		db.blocked.mems.dropColl(name) // caches: lost on a rollback, rebuilt when read
		return nil
	})
	if err != nil {
		return err
	}
	// Its feed's readers in this process learn at once that it is gone;
	// those of other processes and stores by the drop's notice (Tx.DropColl).
	db.feedSignals.wake(name)
	return nil
}
