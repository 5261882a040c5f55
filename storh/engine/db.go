package engine

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Options configure Open. The zero value gives the defaults.
type Options struct {
	// LockTimeout bounds the wait for the file lock held by another process.
	// Zero means DefaultLockTimeout; a negative value tries once.
	LockTimeout time.Duration
	// ReadOnly opens the file with a shared lock; every write fails with
	// ErrReadOnly.
	ReadOnly bool
	// UnsafeNoSync skips fsync on commit: a crash can lose acknowledged
	// writes or corrupt the file. For tests and throwaway data only.
	UnsafeNoSync bool
	// InitialMmapSize is the address space mapped at open. Readers never
	// block writers while the file fits in it; it costs no disk.
	InitialMmapSize int
	// MaxSize caps the file size; writes that would grow past it fail with
	// ErrTooLarge. Zero means no limit.
	MaxSize int
	// MaxBatch caps how many single writes one group commit may hold.
	MaxBatch int
	// FileMode is used when the file is created (default 0600).
	FileMode os.FileMode
}

// defaultAllocSize is bbolt's file growth step (not exported by bbolt).
const defaultAllocSize = 16 << 20

const (
	DefaultLockTimeout     = time.Second
	DefaultInitialMmapSize = 1 << 30
	DefaultMaxBatch        = 1024
)

// DB is an open database file.
type DB struct {
	bolt *bolt.DB
	path string
	opts Options

	// active counts running operations (Enter to Exit) in its low bits, and
	// closedBit marks a closing database: Close waits until the count is
	// zero, and nothing new starts. Unlike an RWMutex, a nested Enter (from
	// a goroutine a callback started) never queues behind a waiting Close.
	active  atomic.Int64
	drained chan struct{} // signalled when active reaches zero after Close
	closed  atomic.Bool

	// collMu serialises creating and dropping collections with the kind
	// cache, so a Drop cannot slip between EnsureColl's check and its store.
	collMu sync.Mutex

	writes     chan *WriteOp
	stop       chan struct{}
	writerDone chan struct{}

	kinds sync.Map // collection name → Kind, for collections known to exist

	openTxid int // the file's transaction id when it was opened

	// Goroutines currently running a user's Update or View callback: a
	// database call from one of them would deadlock on bbolt's locks.
	cbActive atomic.Int32
	cbMu     sync.Mutex
	cbGoids  map[uint64]int
}

// Open opens or creates the database file at path.
func Open(path string, opts Options) (db *DB, err error) {
	if opts.LockTimeout == 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if opts.InitialMmapSize == 0 {
		opts.InitialMmapSize = DefaultInitialMmapSize
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.FileMode == 0 {
		opts.FileMode = 0o600
	}
	timeout := opts.LockTimeout
	if timeout < 0 {
		timeout = time.Nanosecond
	}
	bopts := &bolt.Options{
		Timeout:         timeout,
		ReadOnly:        opts.ReadOnly,
		NoSync:          opts.UnsafeNoSync,
		NoGrowSync:      opts.UnsafeNoSync,
		InitialMmapSize: opts.InitialMmapSize,
		FreelistType:    bolt.FreelistMapType,
		MaxSize:         opts.MaxSize,
	}
	if opts.ReadOnly {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, &Error{Op: "open", Path: path, Index: -1, Err: fmt.Errorf("%w: %v", ErrNotFound, err),
				Hint: "a read-only open needs an existing database"}
		}
		if fi.Size() == 0 {
			// bbolt would try to initialise it and fail on the read-only descriptor.
			return nil, &Error{Op: "open", Path: path, Index: -1, Err: fmt.Errorf("%w: the file is empty, not a database", ErrCorrupt),
				Hint: "open it once without ReadOnly to create the database"}
		}
	}
	var bdb *bolt.DB
	err = containPanic(func() error {
		var err error
		bdb, err = bolt.Open(path, opts.FileMode, bopts)
		return err
	})
	if err != nil {
		return nil, openError(path, opts, err)
	}
	if opts.MaxSize > 0 {
		// bbolt grows the file in 16 MiB steps; with a cap, a step must not
		// overshoot it.
		bdb.AllocSize = max(os.Getpagesize(), min(defaultAllocSize, opts.MaxSize/16))
	}
	db = &DB{bolt: bdb, path: path, opts: opts, cbGoids: map[uint64]int{}, drained: make(chan struct{}, 1)}
	if err := db.initMeta(); err != nil {
		bdb.Close()
		return nil, &Error{Op: "open", Path: path, Index: -1, Err: err}
	}
	if err := db.bolt.View(func(tx *bolt.Tx) error { db.openTxid = tx.ID(); return nil }); err != nil {
		bdb.Close()
		return nil, &Error{Op: "open", Path: path, Index: -1, Err: mapBoltErr(err)}
	}
	if !opts.ReadOnly {
		db.writes = make(chan *WriteOp, opts.MaxBatch)
		db.stop = make(chan struct{})
		db.writerDone = make(chan struct{})
		go db.writer()
	}
	return db, nil
}

func openError(path string, opts Options, err error) error {
	e := &Error{Op: "open", Path: path, Index: -1}
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		e.Err = ErrLocked
		e.Hint = "another process, or another Open in this one, has the file; close it, or raise the lock timeout (waited " + opts.LockTimeout.String() + ")"
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, ErrCorrupt),
		strings.Contains(err.Error(), "file size too small"): // bbolt has no sentinel for it
		e.Err = fmt.Errorf("%w: the file is damaged or not a storh database: %v", ErrCorrupt, err)
		e.Hint = "restore it from a backup; `storh verify` tells what is wrong"
	default:
		e.Err = mapBoltErr(err)
	}
	return e
}

func (db *DB) initMeta() error {
	check := func(tx *bolt.Tx) error {
		// Reading pages past the end of a truncated file would fault.
		if size, err := fileSize(db.path); err == nil && size < tx.Size() {
			return fmt.Errorf("%w: the file is damaged: truncated to %d bytes, but its pages need %d", ErrCorrupt, size, tx.Size())
		}
		b := tx.Bucket(dbMetaBucket)
		if b == nil {
			if k, _ := tx.Cursor().First(); k != nil {
				// Buckets but no storh metadata: another program's bbolt
				// file. Writing our bucket into it would be vandalism.
				return fmt.Errorf("%w: a bbolt file without storh metadata (bucket %q); not a storh database", ErrCorrupt, k)
			}
			if tx.Writable() {
				nb, err := tx.CreateBucket(dbMetaBucket)
				if err != nil {
					return mapBoltErr(err)
				}
				return putInt(nb, keyFormat, formatVersion)
			}
			return nil
		}
		if v := getInt(b, keyFormat); v != formatVersion {
			return fmt.Errorf("%w: file format %d; this build reads format %d", ErrCorrupt, v, formatVersion)
		}
		return nil
	}
	return containPanic(func() error {
		if db.opts.ReadOnly {
			return db.bolt.View(check)
		}
		// Most opens find the bucket: check in a read transaction first, so
		// opening an existing database never writes.
		found := false
		if err := db.bolt.View(func(tx *bolt.Tx) error {
			if size, err := fileSize(db.path); err == nil && size < tx.Size() {
				return check(tx) // reports the truncation
			}
			found = tx.Bucket(dbMetaBucket) != nil
			if k, _ := tx.Cursor().First(); found || k != nil {
				found = true
				return check(tx)
			}
			return nil
		}); err != nil || found {
			return err
		}
		return db.bolt.Update(check)
	})
}

// Path returns the file path the database was opened with.
func (db *DB) Path() string { return db.path }

// Options returns the effective options.
func (db *DB) Options() Options { return db.opts }

// Bolt exposes the bbolt handle for verification, backup and tests.
func (db *DB) Bolt() *bolt.DB { return db.bolt }

// Close waits for running operations, commits queued writes, and closes the
// file. Calls after Close fail with ErrClosed.
func (db *DB) Close() error {
	if db.cbActive.Load() > 0 && db.inCallback() {
		return &Error{Op: "close", Index: -1, Err: ErrNestedTx, Hint: "close the database after the transaction returns"}
	}
	if db.closed.Swap(true) {
		return &Error{Op: "close", Index: -1, Err: ErrClosed}
	}
	if db.active.Or(closedBit) != 0 {
		<-db.drained // running operations finish; their queued writes commit
	}
	if db.stop != nil {
		close(db.stop)
		<-db.writerDone
	}
	if err := db.bolt.Close(); err != nil {
		return &Error{Op: "close", Path: db.path, Index: -1, Err: mapBoltErr(err)}
	}
	return nil
}

// Closed reports whether Close has been called.
func (db *DB) Closed() bool { return db.closed.Load() }

// Enter marks the start of an operation: it fails with ErrClosed on a closed
// database and ErrNestedTx inside a transaction callback. Every successful
// Enter must be paired with Exit.
func (db *DB) Enter() error {
	if db.cbActive.Load() > 0 && db.inCallback() {
		return ErrNestedTx
	}
	if db.active.Add(1)&closedBit != 0 {
		db.Exit()
		return ErrClosed
	}
	return nil
}

const closedBit = 1 << 62

// Exit ends an operation started by Enter.
func (db *DB) Exit() {
	if db.active.Add(-1) == closedBit {
		select {
		case db.drained <- struct{}{}:
		default: // already signalled; Close needs one
		}
	}
}

// Update runs fn in a write transaction and commits when fn returns nil. The
// caller must hold Enter.
func (db *DB) Update(fn func(*Tx) error) error {
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	var tx *Tx
	err := db.bolt.Update(func(btx *bolt.Tx) error {
		tx = newTx(btx)
		if err := fn(tx); err != nil {
			return err
		}
		return tx.flush()
	})
	if err != nil {
		return mapBoltErr(err)
	}
	return nil
}

// View runs fn in a read transaction. The caller must hold Enter.
func (db *DB) View(fn func(*Tx) error) error {
	return mapBoltErr(db.bolt.View(func(btx *bolt.Tx) error { return fn(newTx(btx)) }))
}

// ViewSafe is View for the engine's own reads: a panic inside bbolt (it
// panics on some damaged pages) becomes ErrCorrupt instead of killing the
// process. User callbacks never run under it.
func (db *DB) ViewSafe(fn func(*Tx) error) error {
	return containPanic(func() error { return db.View(fn) })
}

// UpdateSafe is Update with bbolt panics contained, for internal writes.
func (db *DB) UpdateSafe(fn func(*Tx) error) error {
	return containPanic(func() error { return db.Update(fn) })
}

// BeginCallback records that the calling goroutine is about to run user code
// inside a transaction; the returned func undoes it.
func (db *DB) BeginCallback() func() {
	id := goid()
	db.cbMu.Lock()
	db.cbGoids[id]++
	db.cbMu.Unlock()
	db.cbActive.Add(1)
	return func() {
		db.cbMu.Lock()
		if db.cbGoids[id]--; db.cbGoids[id] == 0 {
			delete(db.cbGoids, id)
		}
		db.cbMu.Unlock()
		db.cbActive.Add(-1)
	}
}

func (db *DB) inCallback() bool {
	id := goid()
	db.cbMu.Lock()
	defer db.cbMu.Unlock()
	return db.cbGoids[id] > 0
}

// goid returns the current goroutine's id. It costs about a microsecond, so
// it only runs while some transaction callback is active.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	// "goroutine 123 [running]:..."
	const prefix = len("goroutine ")
	if len(b) <= prefix {
		return 0
	}
	b = b[prefix:]
	end := 0
	for end < len(b) && b[end] >= '0' && b[end] <= '9' {
		end++
	}
	id, _ := strconv.ParseUint(string(b[:end]), 10, 64)
	return id
}

// KnownKind returns the kind of a collection this process has seen exist.
func (db *DB) KnownKind(name string) (Kind, bool) {
	k, ok := db.kinds.Load(name)
	if !ok {
		return 0, false
	}
	return k.(Kind), true
}

// EnsureColl makes sure the collection exists with kind want, creating it
// when missing (unless read-only). The caller must hold Enter.
func (db *DB) EnsureColl(name string, want Kind) error {
	if k, ok := db.KnownKind(name); ok {
		if k != want {
			return checkKind(&Coll{Name: name, Kind: k}, want)
		}
		return nil
	}
	db.collMu.Lock()
	defer db.collMu.Unlock()
	exists := false
	err := db.ViewSafe(func(tx *Tx) error {
		c, err := tx.Coll(name, want, false)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		exists = c != nil
		return err
	})
	if err != nil {
		return err
	}
	if !exists {
		if db.opts.ReadOnly {
			return fmt.Errorf("%w: collection %q does not exist (database is read-only)", ErrNotFound, name)
		}
		if err := db.UpdateSafe(func(tx *Tx) error {
			_, err := tx.Coll(name, want, true)
			return err
		}); err != nil {
			return err
		}
	}
	db.kinds.Store(name, want)
	return nil
}

// DropColl deletes a collection and forgets its kind. The caller must hold
// Enter.
func (db *DB) DropColl(name string) error {
	db.collMu.Lock()
	defer db.collMu.Unlock()
	defer db.kinds.Delete(name)
	return db.UpdateSafe(func(tx *Tx) error { return tx.DropColl(name) })
}

// containPanic runs fn and turns a panic into an ErrCorrupt error. bbolt
// panics on some damaged pages; a damaged file must give an error, not kill
// the process.
//
// SetPanicOnFault turns a memory fault on the mapped file (a page past the
// end of a truncated file, SIGBUS/SIGSEGV) into a panic on this goroutine
// so it can be recovered here, instead of a fatal error.
func containPanic(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: the database file is damaged (bbolt: %v)", ErrCorrupt, r)
		}
	}()
	return fn()
}

// mapBoltErr translates bbolt and file-system errors into the package's
// sentinels where one fits, keeping the original text.
func mapBoltErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, berrors.ErrDatabaseNotOpen), errors.Is(err, berrors.ErrTxClosed):
		return fmt.Errorf("%w (%v)", ErrClosed, err)
	case errors.Is(err, berrors.ErrTxNotWritable), errors.Is(err, berrors.ErrDatabaseReadOnly):
		return fmt.Errorf("%w (%v)", ErrReadOnly, err)
	case errors.Is(err, berrors.ErrMaxSizeReached), errors.Is(err, syscall.EFBIG), errors.Is(err, syscall.ENOSPC),
		// bbolt formats a failed file resize with %s, losing the errno.
		strings.Contains(err.Error(), syscall.EFBIG.Error()), strings.Contains(err.Error(), syscall.ENOSPC.Error()):
		return fmt.Errorf("%w: %v", ErrTooLarge, err)
	case errors.Is(err, berrors.ErrIncompatibleValue):
		// A key that holds a nested bucket where a record should be.
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	case errors.Is(err, berrors.ErrValueTooLarge):
		return fmt.Errorf("%w: %v", ErrInvalidData, err)
	}
	return err
}
