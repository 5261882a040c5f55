package engine

import (
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/storhdb/storh-go/storh/engine/internal/boltpage"
	"github.com/storhdb/storh-go/storh/internal/errs"

	bolt "go.etcd.io/bbolt"
)

// A database file can fail for good while it is open: cut short by
// another program (a page past its end is a memory fault on the mapping),
// or its meta pages overwritten. Faults and bbolt's panics are contained
// into ErrCorrupt, and the rollback that follows releases what a
// transaction holds, except in one place: bbolt's Begin reads the meta
// pages while it holds its locks, with nothing deferred to release them.
// A read transaction's Begin keeps the meta lock and a read lock of the
// mapping, a write transaction's the writer lock; then every later
// transaction, every rollback of one under way, the commit under way, and
// bbolt's Close wait for ever.
//
// So every transaction on the file begins through beginBolt. A panic out
// of bbolt's Begin marks the file failed and releases the locks it left
// held (bbolt does not export them: see boltLocks); so does a file that no
// longer holds what its meta pages claim (checked through the descriptor
// after any contained panic in the process: a fault on the mapping means
// the file is shorter than its pages). A failed DB answers every call with
// the failure (Enter refuses it), begins no transaction and commits none;
// the calls under way finish, with errors where they read what is gone,
// and Close closes the file with bbolt's Close, returning the failure. A
// damaged page that bbolt meets inside a transaction, in a file that still
// holds its pages, fails only the calls that read it, and Verify reports
// it.

// fileFailure is why the file of an open database failed.
type fileFailure struct{ cause string }

func (f *fileFailure) Error() string {
	return "storh: corrupt data: the database file failed while it was open, and this DB no longer reads or writes it: " + f.cause
}

func (f *fileFailure) Unwrap() error { return errs.ErrCorrupt }

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
	msg = strings.TrimPrefix(msg, strings.TrimPrefix(errs.ErrCorrupt.Error(), "storh: ")+": ")
	db.file.failed.CompareAndSwap(nil, &fileFailure{cause: msg})
}

// fileFailed returns the failure of the DB's file, or nil while it is
// sound. After a panic was contained anywhere in the process it first
// checks that the file still holds the pages its meta pages claim.
func (db *DB) fileFailed() error {
	if db.file.fd == nil {
		return nil
	}
	if f := db.file.failed.Load(); f != nil {
		return f
	}
	if n := containedPanics.Load(); n != db.file.panicsSeen.Load() {
		db.file.panicsSeen.Store(n)
		return db.checkFile()
	}
	return nil
}

// checkFile checks that the DB's file still holds what its meta pages
// claim, and fails it when not: it returns the failure, or nil.
func (db *DB) checkFile() error {
	if err := boltpage.CheckFileHolds(db.file.fd, db.file.pageSize); err != nil {
		db.fail(err)
		return db.file.failed.Load()
	}
	return nil
}

// beginBolt begins a bbolt transaction on the DB's file: every transaction
// the engine opens on it begins here. A failed file refuses at once. A
// panic or a fault out of bbolt's Begin fails the file, releases the locks
// bbolt kept, and is the error returned: the callers include a user's
// Update, which no containment wraps.
func (db *DB) beginBolt(writable bool) (tx *bolt.Tx, err error) {
	if err := db.fileFailed(); err != nil {
		return nil, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			db.fail(damaged(r))
			db.releaseBegin(writable)
			tx, err = nil, db.file.failed.Load()
		}
	}()
	return db.file.bolt.Begin(writable)
}

// releaseBegin releases the locks bbolt's Begin holds when it panics: in a
// read transaction the meta lock and a read lock of the mapping, taken
// before it reads the meta pages and released after; in a write
// transaction the writer lock (the meta lock it releases in a deferred
// call). Where they cannot be reached, the locks stay held, and Close will
// not wait for what waits on them (stuck).
func (db *DB) releaseBegin(writable bool) {
	switch l := db.file.locks; {
	case l == nil:
		db.file.stuckOnce.Do(func() { close(db.file.stuck) })
	case writable:
		l.rw.Unlock()
	default:
		l.mmap.RUnlock()
		l.meta.Unlock()
	}
}

// boltLocks are bbolt's locks that its Begin leaves held when it panics.
// They are unexported fields of bolt.DB, reached by name and type: the
// workaround is only as good as its knowledge of bbolt's Begin, so it is
// used only with the bbolt release that knowledge was checked against
// (boltpage.LayoutChecked: TestLayoutCheckedAgainstGoMod fails when go.mod
// names another, and a binary that records another in its build
// information does without), and only when the fields are where that
// release has them.
type boltLocks struct {
	rw, meta *sync.Mutex
	mmap     *sync.RWMutex
}

// reachLocks is reachBoltLocks, which tests replace to take the path of a
// bbolt whose locks cannot be reached.
var reachLocks = reachBoltLocks

// reachBoltLocks returns bdb's locks, or nil when they cannot be trusted
// to be the ones Begin holds.
func reachBoltLocks(bdb *bolt.DB) *boltLocks {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "go.etcd.io/bbolt" && (m.Version != boltpage.LayoutChecked || m.Replace != nil) {
				return nil
			}
		}
	}
	v := reflect.ValueOf(bdb).Elem()
	field := func(name string, t reflect.Type) unsafe.Pointer {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Type() != t {
			return nil
		}
		return unsafe.Pointer(f.UnsafeAddr())
	}
	mutex, rwmutex := reflect.TypeFor[sync.Mutex](), reflect.TypeFor[sync.RWMutex]()
	rw, meta, mmap := field("rwlock", mutex), field("metalock", mutex), field("mmaplock", rwmutex)
	if rw == nil || meta == nil || mmap == nil {
		return nil
	}
	return &boltLocks{rw: (*sync.Mutex)(rw), meta: (*sync.Mutex)(meta), mmap: (*sync.RWMutex)(mmap)}
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

// abandonFile releases a failed file whose bbolt locks stay held, without
// bbolt, whose Close would wait for them: it unlocks the file (the mapping
// keeps the open file alive, and with it bbolt's lock, after the
// descriptor is closed) and closes the descriptor. The mapping stays:
// calls that were under way when the file failed may still be reading it,
// and unmapping would turn their reads into faults outside any
// containment.
func (db *DB) abandonFile() error {
	uerr := unlockFile(db.file.fd)
	if err := db.file.fd.Close(); err != nil || uerr != nil {
		return fmt.Errorf("releasing the failed database file: %w", errors.Join(uerr, err))
	}
	return nil
}

// closeFile closes the DB's file: with bbolt's Close, unless a failure
// left bbolt's locks held.
func (db *DB) closeFile() error {
	select {
	case <-db.file.stuck:
		return db.abandonFile()
	default:
		return db.store.Close()
	}
}
