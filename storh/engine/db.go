package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/storhdb/storh-go/storh/engine/internal/boltpage"
	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/internal/tune"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/storhdb/storh-go/storh/kv"
)

// Options configure Open. The zero value gives the defaults.
type Options struct {
	// LockTimeout bounds the wait for the file lock held by another process.
	// Zero means defaultLockTimeout; a negative value tries once.
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
	// Clock is the time source of queue leases and retention (default
	// time.Now).
	Clock func() time.Time
	// CopyTarget opens the destination of an unfinished copy (CopyTo),
	// which Open otherwise refuses with ErrUnfinishedMigration.
	CopyTarget bool
	// ReadURL names a copy of a store opened by URL that its read-only
	// transactions may read instead (a PostgreSQL hot standby): the
	// backend's to use (kv.OpenOptions.ReadURL). A file has no such copy,
	// and Open refuses it with ErrUnsupported.
	ReadURL string
	// NoBackground turns off the background sweeps of collections with
	// a retention or a time to live (package storh's sweeper, which the
	// engine only carries the settings of). SweepEvery is the pause
	// between two sweeps; zero means storh's default.
	NoBackground bool
	SweepEvery   time.Duration
}

// defaultAllocSize is bbolt's file growth step (not exported by bbolt).
const defaultAllocSize = 16 << 20

const (
	defaultLockTimeout     = time.Second
	defaultInitialMmapSize = 1 << 30
	defaultMaxBatch        = 1024
)

// DB is an open database: a bbolt file, or another backend's store. Its
// state is grouped by the subsystem that owns it; each group's type, beside
// the code that uses it, says what it guards.
type DB struct {
	store kv.Store
	path  string
	opts  Options

	file      dbFile      // the bbolt file under store; zero on another backend
	colls     collections // what the DB knows of its collections between transactions
	group     groupCommit // the writer that batches single writes, and the turns of write transactions
	lifecycle lifecycle   // the operations under way, and Close
	callbacks callbacks   // the goroutines inside a user's callback

	// slotKey names this DB's counter slots in the metadata of the
	// collections it writes beside other stores (see slots.go).
	slotKey []byte

	signals signals // per queue: closed when jobs become pending
	// feedSignals: per collection, closed when a commit records changes
	// in its feed; feedConfs caches feeds' settings by their settings
	// bucket's identity; feedFollowers counts the FeedFollowers (feed.go).
	feedSignals   signals
	feedConfs     sync.Map
	feedFollowers atomic.Int32
	// queueNotices: other processes' commits that make jobs pending wake
	// signals too (queue_notify.go).
	queueNotices queueNotices
	watch        watchers       // per collection: the feeds of Watch
	blocked      blockedIndexes // per blocked index: its journal decoded, its folds (index_view.go)

	// upgrade: Open found a store to bring up to formatLists (upgradeLists).
	upgrade bool
	// upgradeDue: Open found a store to bring up to formatDue (upgradeDue);
	// oldPending: one it leaves below it (read-only, a copy's destination),
	// whose queues are read in the layout from before.
	upgradeDue, oldPending bool
}

// lifecycle is the DB's count of running operations and its closing: Close
// waits for the operations under way (Enter to Exit), and nothing new
// starts once it has begun.
type lifecycle struct {
	closing chan struct{} // closed when Close starts: waiters stop waiting

	// active counts running operations (Enter to Exit) in its low bits, and
	// closedBit marks a closing database: Close waits until the count is
	// zero, and nothing new starts. Unlike an RWMutex, a nested Enter (from
	// a goroutine a callback started) never queues behind a waiting Close.
	active  atomic.Int64
	drained chan struct{} // signalled when active reaches zero after Close
	closed  atomic.Bool
}

// callbacks are the goroutines currently running a user's Update or View
// callback: a database call from one of them would deadlock on bbolt's
// locks, so Enter and Close refuse it (ErrNestedTx).
type callbacks struct {
	active atomic.Int32 // how many: the goroutine id is read only while one is
	goids  sync.Map     // goroutine id → struct{}
}

// Open opens or creates the database file at path.
func Open(path string, opts Options) (db *DB, err error) {
	if opts.LockTimeout == 0 {
		opts.LockTimeout = defaultLockTimeout
	}
	if opts.InitialMmapSize == 0 {
		opts.InitialMmapSize = defaultInitialMmapSize
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = defaultMaxBatch
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
	if opts.ReadURL != "" {
		return nil, &errs.Error{Op: "open", Path: path, Index: -1, Err: fmt.Errorf("%w: a read URL is for a store opened by URL, not a file", errs.ErrUnsupported),
			Hint: "drop WithReadURL for a database file"}
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, &errs.Error{Op: "open", Path: path, Index: -1, Err: &fs.PathError{Op: "open", Path: path, Err: syscall.EISDIR},
			Hint: "give the path of a database file, not of a directory"}
	}
	if opts.ReadOnly {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, &errs.Error{Op: "open", Path: path, Index: -1, Err: fmt.Errorf("%w: %v", errs.ErrNotFound, err),
				Hint: "a read-only open needs an existing database"}
		}
		if fi.Size() == 0 {
			// bbolt would try to initialise it and fail on the read-only descriptor.
			return nil, &errs.Error{Op: "open", Path: path, Index: -1, Err: fmt.Errorf("%w: the file is empty, not a database", errs.ErrCorrupt),
				Hint: "open it once without WithReadOnly to create the database"}
		}
	}
	if err := boltpage.Precheck(path); err != nil {
		return nil, openError(path, opts, err)
	}
	// bbolt syncs a new file's first pages but not its name: until the
	// directory is synced too, a power cut can take the file, and every
	// write acknowledged into it, away.
	fresh := false
	if fi, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Size() == 0) {
		fresh = !opts.ReadOnly
	}
	// bbolt's lock lives on its file descriptor. Should bolt.Open panic
	// anyway, the descriptor is closed here, so a failed open never leaves
	// the file locked for the rest of the process.
	var file *os.File
	bopts.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}
	var bdb *bolt.DB
	err, panicked := contain(func() error {
		var err error
		bdb, err = bolt.Open(path, opts.FileMode, bopts)
		return err
	})
	if panicked && file != nil {
		file.Close()
	}
	if err == nil && fresh {
		if err = syncDir(filepath.Dir(path)); err != nil {
			bdb.Close()
			err = fmt.Errorf("storh: created %s but could not sync its directory, so the file may not survive a power cut: %w", path, err)
		}
	}
	if err != nil {
		return nil, openError(path, opts, err)
	}
	if opts.MaxSize > 0 {
		// bbolt grows the file in 16 MiB steps; with a cap, a step must not
		// overshoot it.
		bdb.AllocSize = max(os.Getpagesize(), min(defaultAllocSize, opts.MaxSize/16))
	}
	db = &DB{path: path, opts: opts, file: dbFile{fd: file, pageSize: bdb.Info().PageSize,
		locks: reachLocks(bdb), stuck: make(chan struct{})}}
	db.setStore(boltStore{db: bdb, file: db})
	db.file.panicsSeen.Store(containedPanics.Load())
	// Before the first search: a damaged branch that points back up its
	// tree would make one recurse until the stack overflows, which no
	// recover can stop.
	err = containPanic(func() error {
		return db.boltView(func(btx *bolt.Tx) error {
			var err error
			if db.colls.broken, err = boltpage.CheckSearchPaths(file, btx); err == nil && db.colls.broken[""] == "" {
				db.file.directOff = layoutMismatch(file, btx, db.colls.broken)
			}
			return err
		})
	})
	if err == nil && db.colls.broken[""] != "" {
		err = fmt.Errorf("%w: the file is damaged: %s", errs.ErrCorrupt, db.colls.broken[""])
	}
	if err != nil {
		db.closeFile()
		return nil, openError(path, opts, err)
	}
	if err := db.start(); err != nil {
		db.closeFile()
		return nil, startError(path, err)
	}
	return db, nil
}

// OpenStore opens a database on a backend other than a bbolt file; name
// says which, in errors. What only a file has (backup, compaction, page
// checks, file statistics) fails with ErrUnsupported. The DB closes store
// when it closes, or at once if OpenStore fails.
func OpenStore(store kv.Store, name string, opts Options) (*DB, error) {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = defaultMaxBatch
	}
	db := &DB{path: name, opts: opts}
	db.setStore(store)
	// The tail of this DB's counter slots (see slots.go).
	db.slotKey = binary.BigEndian.AppendUint64(bytes.Clone(jobSlotPrefix), rand.Uint64())
	if err := db.start(); err != nil {
		store.Close()
		return nil, startError(name, err)
	}
	return db, nil
}

// setStore makes store the DB's, and finds the bbolt file under it if it
// is the bbolt store.
func (db *DB) setStore(store kv.Store) {
	db.store = store
	if f, ok := store.(boltFile); ok {
		db.file.bolt = f.boltDB()
	}
}

// startError is the error of an Open whose start failed.
func startError(path string, err error) error {
	e := &errs.Error{Op: "open", Path: path, Index: -1, Err: err}
	if errors.Is(err, errs.ErrUnfinishedMigration) {
		e.Hint = "run the same storh migrate again to finish it, or delete this destination"
	}
	return e
}

// start checks the database's format marker (writing it into a new one),
// notes where the file's transaction ids start, and starts the writer.
func (db *DB) start() error {
	db.lifecycle.drained = make(chan struct{}, 1)
	db.lifecycle.closing = make(chan struct{})
	if err := db.initMeta(); err != nil {
		return err
	}
	if db.file.bolt != nil {
		if err := containPanic(func() error {
			return db.boltView(func(tx *bolt.Tx) error { db.file.openTxid = tx.ID(); return nil })
		}); err != nil {
			return mapStoreErr(err)
		}
	}
	if db.upgrade {
		if err := db.upgradeLists(); err != nil {
			return err
		}
	}
	if db.upgradeDue {
		if err := db.upgradeQueues(); err != nil {
			return err
		}
	}
	if !db.opts.ReadOnly {
		db.group.writes = make(chan *WriteOp, db.opts.MaxBatch)
		db.group.stop = make(chan struct{})
		db.group.writerDone = make(chan struct{})
		go db.writer()
	}
	return nil
}

// openError classifies a failed bolt.Open by the error's type, never its
// text: the lock timeout, errors of the operating system (which keep their
// errno), and everything else bbolt raises, which is about the file's
// content (bad meta pages, a file too small to hold them).
func openError(path string, opts Options, err error) error {
	e := &errs.Error{Op: "open", Path: path, Index: -1}
	var pathErr *fs.PathError
	var errno syscall.Errno
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		e.Err, e.Hint = lockedError(path, opts.LockTimeout)
	case errors.Is(err, errs.ErrCorrupt):
		e.Err = err
		e.Hint = damagedHint
	case errors.As(err, &pathErr), errors.As(err, &errno):
		e.Err = mapStoreErr(err)
		switch {
		case errors.Is(err, fs.ErrPermission):
			e.Hint = "check the permissions of the file and its directory"
		case errors.Is(err, syscall.EROFS):
			e.Hint = "the file system is read-only; open the database with WithReadOnly"
		}
	default:
		e.Err = fmt.Errorf("%w: the file is damaged or not a storh database (bbolt: %v)", errs.ErrCorrupt, err)
		e.Hint = damagedHint
	}
	return e
}

// storhShaped returns the name of a top-level bucket only storh makes: one
// in storh's own namespace (names starting with a NUL byte) or a collection
// (a bucket holding a metadata bucket with a kind). It looks at a bounded
// number of buckets: a foreign file is refused either way, and Open must
// not walk a large one.
func storhShaped(tx kv.Tx) []byte {
	const looks = 64
	c := tx.Cursor()
	n := 0
	for k, _ := c.First(); k != nil && n < looks; k, _ = c.Next() {
		n++
		if len(k) > 0 && k[0] == 0 {
			return k
		}
		if b := tx.Bucket(k); b != nil {
			if m := b.Bucket(bucketMeta); m != nil && m.Get(keyKind) != nil {
				return k
			}
		}
	}
	return nil
}

const damagedHint = "restore it from a backup; `storh verify` tells what is wrong"

// maxPlausibleFormat bounds the format markers taken for a newer storh's:
// formats are numbered from 1 up, one at a time, so a larger value is a
// damaged marker (a scattered write over it reads as millions), and saying
// "upgrade" would send the user the wrong way.
const maxPlausibleFormat = 1 << 10

func (db *DB) initMeta() error {
	// On a store whose writers run at once, this build's writers need
	// formatShared (see the formats in layout.go), which upgradeLists
	// passes; a build from before it (tune.PreLists) raises to it alone.
	// The destination of a copy takes its source's marker, whatever it
	// is: the next open for writing raises it.
	_, shared := db.store.(kv.Shared)
	shared = shared && !db.opts.CopyTarget
	// An open for writing raises the format to formatLists and rebuilds
	// the indexes made before (upgradeLists), unless it is a copy's
	// destination, which keeps its source's marker.
	lists := !db.opts.ReadOnly && !db.opts.CopyTarget && !tune.PreLists
	newest := int64(formatVersion)
	if tune.PreLists {
		newest = formatShared
	}
	raise := false
	check := func(tx kv.Tx) error {
		b := tx.Bucket(dbMetaBucket)
		if b == nil {
			if k, _ := tx.Cursor().First(); k != nil {
				// Buckets but no storh metadata: a storh file whose
				// metadata name was overwritten, or another program's
				// bbolt file. Writing our bucket into either would be
				// vandalism; which one it is decides the advice.
				if found := storhShaped(tx); found != nil {
					return fmt.Errorf("%w: the file is damaged: its metadata bucket %q is missing, yet it holds storh's buckets (%q)", errs.ErrCorrupt, dbMetaBucket, found)
				}
				return fmt.Errorf("%w: a bbolt file without storh metadata (bucket %q); not a storh database", errs.ErrCorrupt, k)
			}
			if tx.Writable() {
				nb, err := tx.CreateBucket(dbMetaBucket)
				if err != nil {
					return mapStoreErr(err)
				}
				switch {
				case lists:
					return putInt(nb, keyFormat, formatLists)
				case shared:
					return putInt(nb, keyFormat, formatShared)
				}
				return putInt(nb, keyFormat, formatBase)
			}
			return nil
		}
		v := getInt(b, keyFormat)
		switch {
		case v > newest && v <= maxPlausibleFormat:
			return fmt.Errorf("%w: the file is in format %d, written by a newer storh; this build reads formats %d to %d", errs.ErrCorrupt, v, formatBase, newest)
		case v < formatBase || v > newest:
			return fmt.Errorf("%w: the file is damaged: its format marker reads %d (want %d to %d)", errs.ErrCorrupt, v, formatBase, newest)
		}
		if m := b.Get(keyMigrating); m != nil && !db.opts.CopyTarget {
			// Part of a copy would pass for the whole of its source.
			source, _, _ := decodeMarker(m)
			return fmt.Errorf("%w from %s", errs.ErrUnfinishedMigration, source)
		}
		db.upgrade = lists && (v < formatLists || b.Get(keyListsBuild) != nil)
		db.upgradeDue = lists && v < formatDue
		db.oldPending = v < formatDue && !db.upgradeDue
		if raise = shared && v < formatShared && !db.upgrade; raise && tx.Writable() {
			return putInt(b, keyFormat, formatShared)
		}
		return nil
	}
	return containPanic(func() error {
		if db.opts.ReadOnly {
			return db.run(false, check)
		}
		// Most opens find the bucket: check in a read transaction first, so
		// opening an existing database never writes (but once, to raise
		// its format: upgradeLists).
		found := false
		if err := db.run(false, func(tx kv.Tx) error {
			found = tx.Bucket(dbMetaBucket) != nil
			if k, _ := tx.Cursor().First(); found || k != nil {
				found = true
				return check(tx)
			}
			return nil
		}); err != nil || found && !raise {
			return err
		}
		// Processes opening a new PostgreSQL store at once all write the
		// marker: all but one conflict, and find it written when they
		// run again.
		return rerunConflicts(func() error { return db.run(true, check) })
	})
}

// Path returns the file path the database was opened with.
func (db *DB) Path() string { return db.path }

// Options returns the effective options.
func (db *DB) Options() Options { return db.opts }

// Close waits for running operations, commits queued writes, and closes the
// file. Calls after Close fail with ErrClosed; a second Close returns nil.
//
// On a file that failed while open (file_failure.go) Close returns the
// failure; if bbolt's locks stayed held, it waits for nothing that may be
// waiting on them.
func (db *DB) Close() error {
	if db.callbacks.active.Load() > 0 && db.inCallback() {
		return &errs.Error{Op: "close", Index: -1, Err: errs.ErrNestedTx, Hint: "close the database after the transaction returns"}
	}
	if db.lifecycle.closed.Swap(true) {
		return nil // closing twice is harmless, as in bbolt and database/sql
	}
	close(db.lifecycle.closing)
	if db.lifecycle.active.Or(closedBit) != 0 {
		select {
		case <-db.lifecycle.drained: // running operations finish; their queued writes commit
		case <-db.file.stuck:
		}
	}
	if db.group.stop != nil {
		close(db.group.stop)
		select {
		case <-db.group.writerDone:
		case <-db.file.stuck:
		}
	}
	db.stopListening()
	db.stopQueueNotices()
	failure, err := db.fileFailed(), db.closeFile()
	switch {
	case failure != nil && err != nil:
		return &errs.Error{Op: "close", Index: -1, Err: fmt.Errorf("%w; %w", failure, err), Hint: damagedHint}
	case failure != nil:
		return &errs.Error{Op: "close", Index: -1, Err: failure, Hint: damagedHint}
	case err != nil:
		return &errs.Error{Op: "close", Path: db.path, Index: -1, Err: mapStoreErr(err)}
	}
	return nil
}

// Enter marks the start of an operation: it fails with ErrClosed on a closed
// database, ErrNestedTx inside a transaction callback, and ErrCorrupt on a
// file that failed while open. Every successful
// Enter must be paired with Exit.
func (db *DB) Enter() error {
	if db.callbacks.active.Load() > 0 && db.inCallback() {
		return errs.ErrNestedTx
	}
	if db.lifecycle.active.Add(1)&closedBit != 0 {
		db.Exit()
		return errs.ErrClosed
	}
	if err := db.fileFailed(); err != nil {
		db.Exit()
		return err
	}
	return nil
}

const closedBit = 1 << 62

// Exit ends an operation started by Enter.
func (db *DB) Exit() {
	if db.lifecycle.active.Add(-1) == closedBit {
		select {
		case db.lifecycle.drained <- struct{}{}:
		default: // already signalled; Close needs one
		}
	}
}

// Update runs fn in a write transaction and commits when fn returns nil. The
// caller must hold Enter.
//
// An error fn returns comes back unchanged (the same value, not a wrapped
// or translated one): only errors that the backend itself raises when
// beginning, reading in or committing the transaction are mapped to the
// package's sentinels.
//
// On a backend that runs writers side by side (PostgreSQL), a transaction
// that conflicts with a concurrent one is rolled back and fn runs again,
// up to maxConflictRetries times: fn must not keep effects of an earlier
// run. On bbolt, with one writer at a time, fn runs once.
//
// A commit that brings a blocked index's fold due runs the fold before
// Update returns (see runFolds); the fold's outcome is not Update's: the
// commit's is.
func (db *DB) Update(fn func(*Tx) error) error {
	return db.update(fn, true)
}

// update is Update; without foldNow the folds a commit brings due are left
// for a later commit to run (a fold's own transactions start no other).
// The group-commit writer folds before it tells its writers their writes
// are durable: an operation that returns leaves no work of its behind.
func (db *DB) update(fn func(*Tx) error, foldNow bool) error {
	if db.opts.ReadOnly {
		return errs.ErrReadOnly
	}
	var own error // from fn or from our own bookkeeping: returned as is
	var tx *Tx
	var txid int // bbolt clears the transaction's meta once it commits
	db.blocked.pubMu.Lock()
	published := false
	defer func() {
		if !published {
			db.blocked.pubMu.Unlock()
		}
	}()
	runs := 0
	err := rerunConflicts(func() error {
		if runs++; runs > 1 {
			db.group.reruns.Add(1)
		}
		err := db.run(true, func(ktx kv.Tx) error {
			tx = newTx(db, ktx)
			tx.careful = runs > 1
			if tx.btx != nil {
				txid = tx.btx.ID()
			}
			if own = fn(tx); own == nil {
				if own = tx.poisoned; own == nil {
					if own = tx.damage(); own == nil {
						own = tx.flush()
					}
				}
			} else if err := tx.blindConflict(); err != nil {
				return err // run again, carefully
			}
			return own
		})
		if err != nil && tx != nil {
			tx.forgetBounds()
		}
		return err
	})
	if own != nil && err == own {
		return own
	}
	if err == nil {
		tx.keepBounds()
		if tx.shared != nil {
			txid = int(tx.shared.CommitID())
		}
		db.group.commits.Add(1)
		for _, c := range tx.created {
			db.colls.kinds.Store(c.Name, c.Kind)
		}
		for name := range tx.woken {
			db.signals.wake(name)
		}
		for name := range tx.fed {
			db.feedSignals.wake(name)
		}
		if len(tx.changes) > 0 {
			db.publish(txid, tx.changes)
		}
		tx.afterCommit()
		published = true
		db.blocked.pubMu.Unlock()
		if foldNow && !tx.folding {
			db.runFolds()
		}
	}
	return db.commitErr(err)
}

// rerunConflicts runs a transaction, and runs it again while it fails
// with kv.ErrConflict (a concurrent writer won), maxConflictRetries times
// at most.
func rerunConflicts(run func() error) error {
	for attempt := 1; ; attempt++ {
		err := run()
		if !errors.Is(err, kv.ErrConflict) || attempt == maxConflictRetries {
			return err
		}
		conflictPause(attempt)
	}
}

// maxConflictRetries bounds the runs of one Update whose transaction keeps
// conflicting with concurrent writers (other processes on PostgreSQL).
const maxConflictRetries = 30

// conflictPause waits before the next run of a conflicting transaction: a
// random time below a limit that doubles with each attempt up to 64 ms, so
// writers that keep colliding spread out (all 30 runs wait 1.7 s at most).
func conflictPause(attempt int) {
	limit := time.Millisecond << min(attempt, 6)
	time.Sleep(time.Duration(rand.Int64N(int64(limit))) + 100*time.Microsecond)
}

// View runs fn in a read transaction. The caller must hold Enter. An error
// fn returns comes back unchanged, unless the transaction failed with
// kv.ErrStale (see ViewSafe).
func (db *DB) View(fn func(*Tx) error) error {
	var own error
	err := db.run(false, func(ktx kv.Tx) error {
		tx := newTx(db, ktx)
		if own = fn(tx); own == nil {
			own = tx.damage()
		}
		return own
	})
	if own != nil && !errors.Is(err, kv.ErrStale) {
		// fn's error, unless fn worked from buckets that had changed:
		// then its error may be one of them (no index, no collection).
		return own
	}
	return mapStoreErr(err)
}

// run runs fn in a transaction of the store, as bbolt's Update and View
// do: a writable one commits when fn returns nil, and rolls back on an
// error or a panic (which goes on up). A read the backend could not
// report at the call (kv.Tx.Err) fails the transaction whatever fn
// returned, since fn may have taken a missing answer for a missing key.
// The store's errors come back unmapped: the callers classify them.
func (db *DB) run(writable bool, fn func(kv.Tx) error) error {
	if writable && db.file.bolt == nil {
		db.group.writeMu.Lock()
		defer db.group.writeMu.Unlock()
	}
	ktx, err := db.store.Begin(writable)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			_ = ktx.Rollback()
		}
	}()
	ferr := fn(ktx)
	if rerr := ktx.Err(); rerr != nil {
		return rerr
	}
	if ferr != nil || !writable {
		return ferr
	}
	if err := db.fileFailed(); err != nil {
		return err // a commit would write into a file that is gone
	}
	// Marked only once Commit has returned: a panic inside it (bbolt
	// meeting a damaged page while it rebalances or spills) must still
	// roll back, or the transaction keeps bbolt's writer lock and every
	// later write, and Close, waits for it forever.
	err = ktx.Commit()
	committed = true
	if err != nil && db.file.fd != nil {
		// bbolt reports a file cut short under it (when it maps it again)
		// as an error of its own: say what it is.
		if failed := db.checkFile(); failed != nil {
			return failed
		}
	}
	return err
}

// ViewSafe is View for the engine's own reads: a panic inside bbolt (it
// panics on some damaged pages) becomes ErrCorrupt instead of killing the
// process. User callbacks never run under it; their reads go through
// Tx.Protect.
//
// On a store that remembers its buckets between transactions
// (PostgreSQL), fn runs a second time when the first found, before it had
// read anything, that another process had deleted or made again a
// collection it opened (kv.ErrStale). So fn must set what it hands back,
// never add to what an earlier run left.
func (db *DB) ViewSafe(fn func(*Tx) error) error {
	err := db.viewSafeOnce(fn)
	if errors.Is(err, kv.ErrStale) {
		err = db.viewSafeOnce(fn)
	}
	return err
}

func (db *DB) viewSafeOnce(fn func(*Tx) error) error {
	return containPanic(func() error { return db.View(fn) })
}

// ViewRun is ViewSafe for a read that advances run r: fn runs again only
// if r had not begun, from r as it was. A run that has begun fails with
// kv.ErrStale, as a read does when a concurrent transaction deletes its
// collection.
func (db *DB) ViewRun(r *Run, fn func(*Tx) error) error {
	if r.planned || r.Done {
		return db.viewSafeOnce(fn)
	}
	start := *r
	err := db.viewSafeOnce(fn)
	if errors.Is(err, kv.ErrStale) {
		*r = start
		err = db.viewSafeOnce(fn)
	}
	return err
}

// UpdateSafe is Update with bbolt panics contained, for internal writes.
func (db *DB) UpdateSafe(fn func(*Tx) error) error {
	return containPanic(func() error { return db.Update(fn) })
}

// BeginCallback records that the calling goroutine is about to run user code
// inside a transaction; the returned func undoes it. A goroutine runs at most
// one callback at a time (a nested Update or View fails with ErrNestedTx
// before it gets here), so the set needs no counts.
func (db *DB) BeginCallback() func() {
	id := goroutineID()
	db.callbacks.goids.Store(id, struct{}{})
	db.callbacks.active.Add(1)
	return func() {
		db.callbacks.goids.Delete(id)
		db.callbacks.active.Add(-1)
	}
}

// inCallback reports whether the calling goroutine is running a transaction
// callback. It costs a few nanoseconds (a goroutine id read and a lock-free
// map lookup), and only while some callback is active.
func (db *DB) inCallback() bool {
	_, ok := db.callbacks.goids.Load(goroutineID())
	return ok
}

// containPanic runs fn and turns a panic into an ErrCorrupt error. bbolt
// panics on some damaged pages; a damaged file must give an error, not kill
// the process.
//
// SetPanicOnFault turns a memory fault on the mapped file (a page past the
// end of a truncated file, SIGBUS/SIGSEGV) into a panic on this goroutine
// so it can be recovered here, instead of a fatal error.
func containPanic(fn func() error) error {
	err, _ := contain(fn)
	return err
}

// contain is containPanic that also says whether a panic was contained.
func contain(fn func() error) (err error, panicked bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err, panicked = damaged(r), true
		}
	}()
	return fn(), false
}

// damaged describes a contained panic. A runtime error (a fault, a nil or
// out-of-range page reference) is only the symptom of a damaged page and
// its text would mislead a reader, so it is left out; bbolt's own panics
// name what it found and are kept.
func damaged(r any) error {
	containedPanics.Add(1)
	if _, runtimeErr := r.(runtime.Error); runtimeErr {
		return fmt.Errorf("%w: the database file is damaged: a page cannot be read (the file may be truncated or overwritten)", errs.ErrCorrupt)
	}
	return fmt.Errorf("%w: the database file is damaged (bbolt: %v)", errs.ErrCorrupt, r)
}

// mapStoreErr translates errors raised by the backend (package kv's
// sentinels, bbolt's own errors and those of the file system under it)
// into the package's sentinels where one fits, keeping the original
// error in the message. It matches only by errors.Is, never by text; it is
// never applied to errors a user's callback returned.
func mapStoreErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, berrors.ErrDatabaseNotOpen), errors.Is(err, berrors.ErrTxClosed), errors.Is(err, kv.ErrTxClosed):
		return fmt.Errorf("%w (%v)", errs.ErrClosed, err)
	case errors.Is(err, berrors.ErrTxNotWritable), errors.Is(err, berrors.ErrDatabaseReadOnly), errors.Is(err, kv.ErrTxNotWritable):
		return fmt.Errorf("%w (%v)", errs.ErrReadOnly, err)
	case errors.Is(err, berrors.ErrMaxSizeReached):
		return fmt.Errorf("%w: the size limit set with WithMaxSize is reached", errs.ErrTooLarge)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w: the disk is full (%v)", errs.ErrTooLarge, err)
	case errors.Is(err, syscall.EFBIG):
		return fmt.Errorf("%w: the file system or the process's file size limit refuses a larger file (%v)", errs.ErrTooLarge, err)
	case errors.Is(err, berrors.ErrIncompatibleValue), errors.Is(err, kv.ErrIncompatibleValue):
		// A key that holds a nested bucket where a record should be.
		return fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
	case errors.Is(err, berrors.ErrValueTooLarge), errors.Is(err, kv.ErrValueTooLarge), errors.Is(err, kv.ErrKeyTooLarge):
		return fmt.Errorf("%w: %v", errs.ErrInvalidData, err)
	case errors.Is(err, kv.ErrCommitUnknown):
		return fmt.Errorf("%w (%v)", errs.ErrCommitUnknown, err)
	}
	return err
}

// commitErr maps an error from beginning or committing a write transaction.
// bbolt formats a failed file resize with %s, which drops the errno, so an
// error it cannot classify is checked against the conditions that make a
// file unable to grow: the process's file size limit (RLIMIT_FSIZE) and
// the free space of the file system.
func (db *DB) commitErr(err error) error {
	mapped := mapStoreErr(err)
	if mapped != err || err == nil {
		return mapped
	}
	if why := db.cannotGrow(); why != "" {
		return fmt.Errorf("%w: %s (%v)", errs.ErrTooLarge, why, err)
	}
	return err
}
