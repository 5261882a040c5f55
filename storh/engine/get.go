package engine

import (
	"fmt"
	"runtime/debug"

	"github.com/storhdb/storh-go/storh/engine/internal/boltpage"
	"github.com/storhdb/storh-go/storh/internal/errs"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

// A point read is the most frequent read, and on a file almost all of its
// cost is the path to the value. On bbolt it therefore goes straight to the
// file: one read transaction and a search of the records bucket's pages
// from the root this commit has (direct.go), without opening bbolt's
// buckets on the way. The collection's kind is read with the root, once
// per commit, and checked on every read: a handle opened before another
// created the collection as another kind must not read it. A handle opened
// before a DropColl takes the full path and its checks. Other stores,
// collections Open found damaged, and files whose layout Open did not
// recognise take the full path always.

// ReadRecord reads the record id of the collection of h in a read
// transaction of its own and hands its checked payload to use, valid only
// during the call. A record or collection that is not there is
// ErrNotFound. The caller must hold Enter.
func (db *DB) ReadRecord(h Handle, id uuidv7.UUID, use func(payload []byte) error) error {
	if !db.direct(h) {
		return db.ViewSafe(func(tx *Tx) error {
			p, err := tx.getIn(h, id)
			if err != nil {
				return err
			}
			return use(p)
		})
	}
	return db.directRead(h, id, use)
}

// CopyRecord is ReadRecord that appends a copy of the payload to dst
// (nil for a new slice) and returns it: the transaction has ended before
// the caller looks at the bytes.
func (db *DB) CopyRecord(h Handle, id uuidv7.UUID, dst []byte) (out []byte, err error) {
	keep := func(p []byte) error {
		out = append(dst, p...)
		return nil
	}
	if !db.direct(h) {
		return out, db.ViewSafe(func(tx *Tx) error {
			p, err := tx.getIn(h, id)
			if err != nil {
				return err
			}
			return keep(p)
		})
	}
	return out, db.directRead(h, id, keep)
}

// directRead is the direct path: use runs inside the read transaction, and
// a panic of bbolt's over a damaged page becomes ErrCorrupt.
func (db *DB) directRead(h Handle, id uuidv7.UUID, use func(payload []byte) error) error {
	return db.directView(func(btx *bolt.Tx) error {
		p, err := directGet(btx, h, id)
		if err != nil {
			return err
		}
		return use(p)
	})
}

// directView runs fn in a bbolt read transaction of its own, with faults
// on the mapping and bbolt's panics over a damaged page turned into
// ErrCorrupt: the direct paths read the file's pages themselves.
func (db *DB) directView(fn func(btx *bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = damaged(r)
		}
	}()
	btx, err := db.beginBolt(false)
	if err != nil {
		return mapStoreErr(boltErr(err))
	}
	defer btx.Rollback()
	return fn(btx)
}

// direct reports whether a point read of h may take the direct path: on
// a file whose layout Open found to be the one the reader knows.
func (db *DB) direct(h Handle) bool {
	return db.file.bolt != nil && db.file.directOff == "" && db.colls.broken[h.Name] == "" && !db.droppedSince(h.Name, h.Epoch)
}

// getIn is the full path: the collection opened with its checks.
func (t *Tx) getIn(h Handle, id uuidv7.UUID) ([]byte, error) {
	c, err := t.Use(h, false)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, errs.ErrNotFound
	}
	return t.Get(c, id)
}

// directGet is the direct path in btx: the records bucket's root page as
// found at this commit, then a search of its pages (direct.go); a
// collection small enough that bbolt keeps its records inline in the
// parent's page is read through bbolt's buckets.
func directGet(btx *bolt.Tx, h Handle, id uuidv7.UUID) ([]byte, error) {
	root, exists, err := recordsRoot(btx, h)
	switch {
	case err != nil:
		return nil, err
	case !exists:
		return nil, errs.ErrNotFound
	}
	var v []byte
	if root != 0 {
		if v, err = boltpage.NewReader(btx).Get(root, id[:]); err != nil {
			return nil, fmt.Errorf("collection %q: %w", h.Name, err)
		}
	} else {
		name := h.key
		if name == nil {
			name = []byte(h.Name)
		}
		v = btx.Bucket(name).Bucket(bucketRecords).Get(id[:])
	}
	if v == nil {
		return nil, errs.ErrNotFound
	}
	return Payload(id[:], v)
}
