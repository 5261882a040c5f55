package engine

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh/kv"
)

// A database file can fail for good while it is open: cut short by
// another program (a page past its end is a memory fault on the mapping),
// or its meta pages overwritten. Faults and bbolt's panics are contained
// into ErrCorrupt, but containing one does not undo what bbolt was doing:
// a panic inside bbolt's Begin leaves its meta and mapping locks held (a
// read transaction) or its writer lock (a write transaction), and one
// inside the rollback of a write transaction (which rereads the freelist
// page) leaves the writer lock held. Every later transaction, and bbolt's
// Close, would then wait for ever.
//
// So the DB marks the file failed when a panic leaves bbolt's Begin or a
// write transaction's rollback (the only places where bbolt reads pages
// while it holds a lock that no deferred call releases), and when the file
// no longer holds what its meta pages claim (checked through the file
// descriptor after any contained panic in the process: a fault on the
// mapping means the file is shorter than its pages). A failed DB answers
// every call with the failure (Enter refuses it), begins no transaction,
// and its Close releases the file without calling bbolt's. A damaged page
// that bbolt meets inside a transaction, in a file that still holds its
// pages, fails only the calls that read it: bbolt's locks are released by
// the rollback, and Verify can report it.

// fileFailure is why the file of an open database failed.
type fileFailure struct{ cause string }

func (f *fileFailure) Error() string {
	return "storh: corrupt data: the database file failed while it was open, and this DB no longer reads or writes it: " + f.cause
}

func (f *fileFailure) Unwrap() error { return ErrCorrupt }

const failedHint = "close the database, then restore the file from a backup; `storh verify` on the file tells what is wrong"

// HintOf returns what the user can do about err, for the errors of the
// engine that know it without being an *Error of their own: a database
// whose file failed while it was open. It is "" for every other error.
func HintOf(err error) string {
	var f *fileFailure
	if errors.As(err, &f) {
		return failedHint
	}
	return ""
}

// containedPanics counts the panics contained in this process (damaged).
// A DB checks its file again when it has moved (fileFailed): a fault on a
// mapping does not say whose mapping it was.
var containedPanics atomic.Uint64

// fail marks the file failed; the first cause is kept.
func (db *DB) fail(cause error) {
	msg := strings.TrimPrefix(cause.Error(), "storh: ")
	msg = strings.TrimPrefix(msg, strings.TrimPrefix(ErrCorrupt.Error(), "storh: ")+": ")
	if db.failed.CompareAndSwap(nil, &fileFailure{cause: msg}) {
		close(db.failedCh)
	}
}

// fileFailed returns the failure of the DB's file, or nil while it is
// sound. After a panic was contained anywhere in the process it first
// checks that the file still holds the pages its meta pages claim.
func (db *DB) fileFailed() error {
	if db.file == nil {
		return nil
	}
	if f := db.failed.Load(); f != nil {
		return f
	}
	if n := containedPanics.Load(); n != db.panicsSeen.Load() {
		db.panicsSeen.Store(n)
		return db.checkFile()
	}
	return nil
}

// checkFile checks that the DB's file still holds what its meta pages
// claim, and fails it when not: it returns the failure, or nil.
func (db *DB) checkFile() error {
	if err := checkFileHolds(db.file, db.pageSize); err != nil {
		db.fail(err)
		return db.failed.Load()
	}
	return nil
}

// beginBolt begins a bbolt transaction on the DB's file: every transaction
// the engine opens on it begins here. A failed file refuses at once. A
// panic or a fault out of bbolt's Begin (it reads the meta pages) fails
// the file, since bbolt kept its locks, and is the error returned: the
// callers include a user's Update, which no containment wraps.
func (db *DB) beginBolt(writable bool) (tx *bolt.Tx, err error) {
	if err := db.fileFailed(); err != nil {
		return nil, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			db.fail(damaged(r))
			tx, err = nil, db.failed.Load()
		}
	}()
	return db.bolt.Begin(writable)
}

// rollback ends a transaction that did not commit. A panic or a fault out
// of bbolt's rollback of a write transaction (it rereads the freelist
// page) fails the file, since bbolt kept its writer lock, and ends there:
// the transaction's own outcome, an error or a panic already under way,
// goes on up as it would have.
func (db *DB) rollback(ktx kv.Tx) {
	if db.bolt != nil && ktx.Writable() {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if r := recover(); r != nil {
				db.fail(damaged(r))
			}
		}()
	}
	_ = ktx.Rollback()
}

// boltView runs fn in a read transaction of bbolt's begun by beginBolt,
// for the engine's reads that need bbolt's own view of the file. Panics of
// fn go on up: the caller contains them.
func (db *DB) boltView(fn func(*bolt.Tx) error) error {
	btx, err := db.beginBolt(false)
	if err != nil {
		return err
	}
	defer btx.Rollback()
	return fn(btx)
}

// abandonFile releases a failed file without bbolt, whose Close would wait
// for the locks a contained panic left held: it unlocks the file (the
// mapping keeps the open file alive, and with it bbolt's lock, after the
// descriptor is closed) and closes the descriptor. The mapping stays:
// calls that were under way when the file failed may still be reading it,
// and unmapping would turn their reads into faults outside any
// containment. Calls that were waiting inside bbolt for its locks then
// wait for ever; nothing else does.
func (db *DB) abandonFile() error {
	uerr := unlockFile(db.file)
	if err := db.file.Close(); err != nil || uerr != nil {
		return fmt.Errorf("releasing the failed database file: %w", errors.Join(uerr, err))
	}
	return nil
}

// release closes the file of a DB whose Open failed after bbolt opened it.
func (db *DB) release() {
	if db.fileFailed() != nil {
		_ = db.abandonFile()
		return
	}
	_ = db.bolt.Close()
}
