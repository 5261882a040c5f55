package storh

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/backend"
	"github.com/storhdb/storh-go/storh/internal/connstr"
	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// DB is an open database: one bbolt file holding any number of named
// collections. It is safe for concurrent use by many goroutines.
type DB struct {
	eng   *engine.DB
	sweep sweeper // the background expiry (sweeper.go)
}

// Open opens the database file at path, creating it if needed. Opening costs
// the same for an empty and a huge file. If another process holds the file,
// Open waits up to the lock timeout (WithLockTimeout, default 1s) and then
// fails with ErrLocked.
//
// A path of the form scheme://… is a URL instead, opened by the backend
// registered for its scheme (see Register). The PostgreSQL backend
// registers postgres:// and postgresql:// when its package is imported:
//
//	import _ "github.com/storhdb/storh-go/storh/postgres"
//
// the database then lives in that server's tables (in the first schema of
// the URL's search_path), shared by every process that opens the same URL.
// See docs/postgres.md for what differs. A URL whose scheme no imported
// backend registered fails with ErrUnsupported, naming the import to add.
// No error shows a password of the URL (see Redact).
func Open(path string, opts ...Option) (*DB, error) {
	o, err := openOptions(opts)
	if err != nil {
		return nil, err
	}
	if scheme, ok := connstr.Scheme(path); ok {
		return openURL(scheme, path, o)
	}
	if masked := Redact(path); masked != path {
		// A keyword/value connection string (host=… password=…), which
		// would become the name of a new file, password and all.
		return nil, &Error{Op: "open", Path: masked, Index: -1,
			Err:  fmt.Errorf("%w: the path holds a password: a PostgreSQL connection string in keyword/value form, which Open does not take", ErrInvalidOption),
			Hint: "give PostgreSQL as a URL: postgres://user:password@host/dbname?search_path=schema"}
	}
	eng, err := engine.Open(path, o)
	if err != nil {
		return nil, err
	}
	return &DB{eng: eng}, nil
}

// OpenStore opens a database on store, any backend that keeps package kv's
// contract (kvtest checks one). The DB owns store: it closes it when it
// closes, or at once if OpenStore fails. Path is store's String if it has
// one. What only a database file has fails with ErrUnsupported: the file
// options here (WithLockTimeout, WithInitialMmapSize, WithMaxSize,
// WithFileMode), WithoutSync and WithReadURL (durability and a standby to
// read are the store's, set where it was opened: postgres.WithReadURL),
// and later Backup and BackupFile; Verify has no pages to check.
func OpenStore(store kv.Store, opts ...Option) (*DB, error) {
	name := ""
	if s, ok := store.(fmt.Stringer); ok {
		name = Redact(s.String())
	}
	o, err := openOptions(opts)
	if err == nil {
		err = storeOptionErr(name, o)
	}
	if err != nil {
		store.Close()
		return nil, err
	}
	return openEngine(store, name, o)
}

// storeOptionErr refuses what an open kv.Store can no longer be given.
func storeOptionErr(name string, o engine.Options) error {
	refused := fileOptions(o)
	if o.UnsafeNoSync {
		refused = append(refused, "WithoutSync")
	}
	if o.ReadURL != "" {
		refused = append(refused, "WithReadURL")
	}
	if len(refused) == 0 {
		return nil
	}
	return &Error{Op: "open", Path: name, Index: -1, Err: fmt.Errorf("%w: %s applies when a store is opened, before OpenStore", ErrUnsupported, refused[0]),
		Hint: "set it up where the store is opened, or drop the option"}
}

// openURL opens a URL by the backend registered for its scheme.
func openURL(scheme, rawURL string, o engine.Options) (*DB, error) {
	name := Redact(rawURL)
	driver, ok := backend.Lookup(scheme)
	if !ok {
		e := &Error{Op: "open", Path: name, Index: -1, Err: fmt.Errorf("%w: no backend is registered for %s:// URLs", ErrUnsupported, scheme),
			Hint: "import the package of the backend that registers the scheme"}
		if pkg, known := backendPackages[scheme]; known {
			e.Hint = fmt.Sprintf("add import _ %q to the program", pkg)
		}
		return nil, e
	}
	store, err := driver.OpenURL(context.Background(), rawURL, kv.OpenOptions{NoSync: o.UnsafeNoSync, FileOptions: fileOptions(o),
		ReadOnly: o.ReadOnly, ReadURL: o.ReadURL})
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, &Error{Op: "open", Path: name, Index: -1, Err: err}
	}
	return openEngine(store, name, o)
}

// backendPackages names the package that registers each scheme of the
// backends this module ships, for the error of a URL whose backend the
// program did not import.
var backendPackages = map[string]string{
	"postgres":   "github.com/storhdb/storh-go/storh/postgres",
	"postgresql": "github.com/storhdb/storh-go/storh/postgres",
}

// openEngine starts the engine on an open store.
func openEngine(store kv.Store, name string, o engine.Options) (*DB, error) {
	eng, err := engine.OpenStore(store, name, o)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, &Error{Op: "open", Path: name, Index: -1, Err: err}
	}
	return &DB{eng: eng}, nil
}

// fileOptions names the options in o that only a database file has.
func fileOptions(o engine.Options) []string {
	var names []string
	if o.LockTimeout != 0 {
		names = append(names, "WithLockTimeout")
	}
	if o.InitialMmapSize != 0 {
		names = append(names, "WithInitialMmapSize")
	}
	if o.MaxSize != 0 {
		names = append(names, "WithMaxSize")
	}
	if o.FileMode != 0 {
		names = append(names, "WithFileMode")
	}
	return names
}

// Redact returns path, a file path or a PostgreSQL connection URL as Open
// takes it, with every password in it masked (xxxxx): in the URL's user
// part, in password and sslpassword parameters, repeated or with encoded
// names, and in the keywords of a keyword/value connection string. It is
// how storh's errors and Stats name a store; log it rather than path. A
// file path comes back as it is.
func Redact(path string) string { return connstr.Redact(path) }

// isURL tells a URL, opened by a registered backend, from a file path.
func isURL(s string) bool {
	_, ok := connstr.Scheme(s)
	return ok
}

// Close commits queued writes, waits for running operations and
// transactions, and closes the file. Every later call fails with ErrClosed,
// except Close itself, which returns nil (closing twice is harmless).
//
// A background sweep (WithRetention, WithTTL) in flight stops between two
// records: what it committed stays deleted. Close returns once it has.
func (db *DB) Close() error {
	err := db.eng.Close()
	select {
	case <-db.eng.Closing():
		db.sweep.wait()
	default: // not closed (Close inside a transaction's callback)
	}
	return err
}

// Path returns the file path, or a PostgreSQL store's URL with its
// passwords masked (see Redact).
func (db *DB) Path() string { return db.eng.Path() }

// Docs opens the document collection name, creating it if needed. A Docs
// collection supports upserts and deletes. The handle is cheap and safe for
// concurrent use.
func (db *DB) Docs(name string, opts ...CollectionOption) (*Docs, error) {
	c, err := db.open("docs", name, engine.KindDocs, opts)
	if err != nil {
		return nil, err
	}
	return &Docs{c}, nil
}

// Log opens the append-only log name, creating it if needed. Log records are
// immutable: there is no update and no delete.
func (db *DB) Log(name string, opts ...CollectionOption) (*Log, error) {
	c, err := db.open("log", name, engine.KindLog, opts)
	if err != nil {
		return nil, err
	}
	return &Log{c}, nil
}

// Queue opens the durable job queue name, creating it if needed. See Queue
// for its operations; WithMaxAttempts sets how many claims a job gets and
// WithBackoff how long a failed one waits, both stored with the queue.
func (db *DB) Queue(name string, opts ...CollectionOption) (*Queue, error) {
	c, err := db.open("queue", name, engine.KindQueue, opts)
	if err != nil {
		return nil, err
	}
	return newQueue(c, opts)
}

func (db *DB) open(op, name string, kind engine.Kind, opts []CollectionOption) (coll, error) {
	cfg, err := collOptions(kind, opts)
	if err != nil {
		return coll{}, err
	}
	if err := db.eng.Enter(); err != nil {
		return coll{}, opErr(op, name, "", -1, err)
	}
	defer db.eng.Exit()
	h, err := db.eng.OpenHandle(name, kind, cfg.mustExist)
	if err != nil {
		return coll{}, opErr(op, name, "", -1, err)
	}
	h.Indexes, h.Schema, h.Feed = cfg.indexes, cfg.schema, cfg.feed
	h.Rule, h.BackoffGiven = cfg.queueRule(), cfg.backoff != nil
	if err := db.eng.CheckHandleSchema(h); err != nil {
		return coll{}, opErr(op, name, "", -1, err)
	}
	if err := db.eng.CheckHandleQueue(h); err != nil {
		return coll{}, opErr(op, name, "", -1, err)
	}
	if err := db.eng.EnsureIndexes(h); err != nil {
		return coll{}, opErr(op, name, "", -1, err)
	}
	if err := db.eng.EnsureFeed(h); err != nil {
		return coll{}, opErr(op, name, "", -1, err)
	}
	c := coll{db: db, h: h, name: name, kind: kind, gen: cfg.gen, retention: cfg.retention, ttl: cfg.ttl}
	db.sweep.register(db, c)
	return c, nil
}

// Drop deletes the collection name and all its records. Dropping a missing
// collection fails with ErrNotFound.
func (db *DB) Drop(name string) error {
	if err := db.eng.Enter(); err != nil {
		return opErr("drop", name, "", -1, err)
	}
	defer db.eng.Exit()
	return opErr("drop", name, "", -1, db.eng.DropColl(name))
}

// Update runs fn in one read-write transaction: every write fn makes through
// tx's handles, across any number of collections, commits atomically when fn
// returns nil, and is rolled back when fn returns an error or panics (the
// panic then continues). Writes are durable when Update returns.
//
// Inside fn use only tx and handles from tx.Docs and tx.Log: a call on db or
// on a DB-level handle would deadlock and fails with ErrNestedTx instead.
//
// On PostgreSQL, fn may run more than once, after a conflict with another
// process's transaction; what an Update holds there is in the package
// documentation (Transactions on PostgreSQL).
func (db *DB) Update(fn func(*Tx) error) error {
	if err := db.eng.Enter(); err != nil {
		return opErr("update", "", "", -1, err)
	}
	defer db.eng.Exit()
	if db.eng.Options().ReadOnly {
		return opErr("update", "", "", -1, ErrReadOnly)
	}
	// The callback's own errors come back unwrapped, as the user returned them.
	err := db.eng.Update(func(etx *engine.Tx) error {
		tx := &Tx{db: db, etx: etx, writable: true}
		defer db.eng.BeginCallback()()
		defer tx.end()
		return fn(tx)
	})
	return err
}

// View runs fn in a read-only transaction that sees one consistent snapshot.
// Keep it short: a long read transaction keeps the file from growing for
// writers. Writes inside fail with ErrReadOnly.
//
// On PostgreSQL, the snapshot is taken by the View's first read of a
// record, a page or a count (opening a handle may read nothing), and a
// View whose first read finds that another process deleted a collection fn
// had opened, or deleted and made it again, since this DB last read it,
// fails with an error wrapping kv.ErrStale (having read nothing); run it
// again.
func (db *DB) View(fn func(*Tx) error) error {
	if err := db.eng.Enter(); err != nil {
		return opErr("view", "", "", -1, err)
	}
	defer db.eng.Exit()
	return db.eng.View(func(etx *engine.Tx) error {
		tx := &Tx{db: db, etx: etx}
		defer db.eng.BeginCallback()()
		defer tx.end()
		return fn(tx)
	})
}

// CollectionInfo describes one collection.
type CollectionInfo struct {
	Name    string
	Kind    string // "docs", "log" or "queue"
	Records int
	Bytes   int64 // sum of stored value sizes; the file also holds keys, page overhead and free pages
	FirstID uuidv7.UUID
	LastID  uuidv7.UUID // both zero when empty
}

// FirstTime is the creation time of the oldest record (zero when empty).
func (s CollectionInfo) FirstTime() time.Time { return idTime(s.FirstID) }

// LastTime is the creation time of the newest record (zero when empty).
func (s CollectionInfo) LastTime() time.Time { return idTime(s.LastID) }

func idTime(id uuidv7.UUID) time.Time {
	if id.IsZero() {
		return time.Time{}
	}
	return id.Time()
}

// Stats describes the database.
type Stats struct {
	Path     string
	FileSize int64
	// FreeBytes is how much of the file is free pages: bbolt never
	// shrinks its file, so deleted records (Delete, DeleteMatching,
	// DeleteBefore, PurgeDone) leave free pages that later writes reuse
	// before the file grows, and that `storh compact` gives back.
	FreeBytes   int64
	Collections []CollectionInfo // in name order

	// Commits counts the write transactions this DB committed since Open:
	// concurrent single writes share one (group commit), so Commits against
	// the records written tells how well they were shared. PageWrites and
	// CommitIOTime are the page writes those commits made and the time spent
	// writing and syncing them.
	Commits      int64
	PageWrites   int64
	CommitIOTime time.Duration
	// Reruns counts the write transactions this DB ran again since Open
	// because they conflicted with another process's on a shared store
	// (PostgreSQL: a record or a unique value another store inserted
	// first, a deadlock): against Commits, the conflicts per
	// transaction. Always 0 on a file.
	Reruns int64

	// SweepError joins the errors of the last background sweeps that
	// failed, one per collection whose last sweep did (nil when none
	// did): see WithTTL and WithRetention. A failed sweep is tried again
	// at the next round.
	SweepError error

	// FoldError joins the failures of the last folds of the blocked
	// indexes whose last fold in this process failed (nil when none did):
	// see IndexInfo.FoldError.
	FoldError error

	// DirectReadsOff is empty when point and ranged reads of the file read
	// its pages directly, the fast path. Open checks that the file's pages
	// are in the layout that path knows (bbolt's format, read the way
	// bbolt reads it); when they are not, it says why here, and every read
	// goes through bbolt's buckets: slower, the same answers. Always empty
	// on PostgreSQL.
	DirectReadsOff string
}

// Stats reads the statistics of the database and every collection. It does
// not scan records.
func (db *DB) Stats() (Stats, error) {
	s := Stats{Path: db.Path()}
	if err := db.eng.Enter(); err != nil {
		return s, opErr("stats", "", "", -1, err)
	}
	defer db.eng.Exit()
	err := db.eng.ViewSafe(func(etx *engine.Tx) error {
		s.Collections = s.Collections[:0]
		cs, err := etx.Collections()
		for _, c := range cs {
			s.Collections = append(s.Collections, convertStats(c))
		}
		return err
	})
	if err != nil {
		return s, opErr("stats", "", "", -1, err)
	}
	sort.Slice(s.Collections, func(i, j int) bool { return s.Collections[i].Name < s.Collections[j].Name })
	if s.FileSize, err = db.eng.FileSize(); err != nil {
		return s, opErr("stats", "", "", -1, err)
	}
	s.FreeBytes = db.eng.FreeBytes()
	s.DirectReadsOff = db.eng.DirectReadsOff()
	cs, err := db.eng.CommitStats()
	s.Commits, s.PageWrites, s.CommitIOTime, s.Reruns = cs.Commits, cs.PageWrites, cs.IOTime, cs.Reruns
	s.FoldError = db.eng.FoldError()
	s.SweepError = db.sweep.lastErr()
	return s, opErr("stats", "", "", -1, err)
}

func convertStats(c engine.CollStats) CollectionInfo {
	return CollectionInfo{Name: c.Name, Kind: c.Kind.String(), Records: c.Records, Bytes: c.Bytes, FirstID: c.FirstID, LastID: c.LastID}
}

// Register makes Open hand the URLs of scheme (scheme://…) to driver. A
// backend package calls it from its init, so that importing the package is
// all a program does to use the backend, as with database/sql drivers. It
// panics if driver is nil or scheme is empty or registered already: two
// backends claiming one scheme is a mistake in the program's imports.
func Register(scheme string, driver kv.Driver) { backend.Register(scheme, driver) }
