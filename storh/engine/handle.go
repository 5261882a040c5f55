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
	// A new collection is empty: its declared indexes are ready at once.
	return c, t.ensureIndexes(c, h.Indexes)
}

// UseShared is Use for the queue operations that move jobs by row locks
// (Claim, RequeueExpired, Complete, Fail, Extend, Release): on a store
// whose writers run at once it holds the queue beside other writers, so
// that claimers in many processes take different jobs at the same time
// instead of taking turns. It never creates the collection.
func (t *Tx) UseShared(h Handle) (*Coll, error) {
	if _, ok := t.ktx.(kv.Locker); !ok || !t.ktx.Writable() {
		return t.Use(h, false)
	}
	if c, ok := t.colls[h.Name]; ok {
		return c, checkKind(c, h.Kind)
	}
	c, err := t.openColl(h.Name, h.Kind, false, true)
	if err == nil || !isNoColl(err) {
		return c, err
	}
	if t.db != nil && t.db.droppedSince(h.Name, h.Epoch) {
		return nil, fmt.Errorf("%w (it was dropped after this handle was opened; open a new handle to create it again)", err)
	}
	return nil, nil
}

// DropColl deletes a collection and forgets its kind. The caller must hold
// Enter.
func (db *DB) DropColl(name string) error {
	db.colls.mu.Lock()
	defer db.colls.mu.Unlock()
	defer db.colls.kinds.Delete(name)
	return db.UpdateSafe(func(tx *Tx) error {
		if err := tx.DropColl(name); err != nil {
			return err
		}
		// Recorded inside the transaction: a write that starts after this
		// one commits already sees it.
		db.colls.drops.Store(name, db.colls.epoch.Add(1))
		db.blocked.mems.dropColl(name) // caches: lost on a rollback, rebuilt when read
		return nil
	})
}
