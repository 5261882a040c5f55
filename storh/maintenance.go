package storh

import (
	"context"
	"fmt"
	"io"

	"github.com/storhdb/storh-go/storh/internal/api"

	"github.com/storhdb/storh-go/storh/engine"
)

// Problem is one finding of Verify or Repair: its Kind, the Collection
// (empty for the file's own problems) and record ID (zero unless it is about
// one record) where it applies, the raw Key of a key that is not an id, and
// a readable Detail. Its String method prints all of them on one line.
type Problem = api.Problem

// ProblemKind classifies a Problem.
type ProblemKind = api.ProblemKind

// The kinds of Problem.
const (
	ProblemFile     = api.ProblemFile     // the file's pages (bbolt's page check, damaged pages)
	ProblemLayout   = api.ProblemLayout   // a collection's buckets, kind or strays beside them
	ProblemKey      = api.ProblemKey      // a record key that is not a 16-byte UUIDv7
	ProblemChecksum = api.ProblemChecksum // a value whose header or checksum does not match
	ProblemDecode   = api.ProblemDecode   // a payload that is not a valid record
	ProblemCounter  = api.ProblemCounter  // record count or bytes disagree with the records
	ProblemIndex    = api.ProblemIndex    // a secondary index disagrees with the records
	ProblemQueue    = api.ProblemQueue    // a queue's job states, indexes or counters disagree
)

// VerifyReport summarises Verify and Repair: the Collections and Records
// checked and the Problems found; for Repair also the records Quarantined
// (moved out of their collection), the collections Recounted (counters
// rewritten) and the indexes Reindexed (rebuilt from the records).
type VerifyReport = api.VerifyReport

// CompactReport says how large the source (Src…) and the compacted copy
// (Dst…) are: Size is the apparent size (what ls shows), Allocated the
// space the file system gave the file (what du shows: bbolt grows a file
// sparsely), InUse the bytes of pages that hold data. Reclaimed returns
// the allocated space the copy saves, never negative.
type CompactReport = api.CompactReport

// Verify checks the database, or only the named collections: bbolt's own
// page consistency (whole-database runs only), each collection's layout,
// every record's key, checksum and encoding, and the counters. Problems are
// passed to report as they are found (report may be nil); the database is
// healthy when the report's Problems is 0. It reads one consistent snapshot,
// so it holds a read transaction for its whole run.
func (db *DB) Verify(report func(Problem), collections ...string) (VerifyReport, error) {
	return db.VerifyContext(context.Background(), report, collections...)
}

// VerifyContext is Verify that stops when ctx is done: it checks ctx every
// few thousand keys (or few MiB of values) of its walks, the index checks
// included, and before bbolt's page check. It then returns the report so
// far (the problems found until then are passed to report as usual) and an
// *Error wrapping ctx.Err(), with no transaction left open. bbolt's page
// check cannot be interrupted: a cancel while it runs takes effect when it
// ends (it reads each page once and decodes nothing, a small part of a
// whole-database Verify).
func (db *DB) VerifyContext(ctx context.Context, report func(Problem), collections ...string) (VerifyReport, error) {
	if err := db.eng.Enter(); err != nil {
		return VerifyReport{}, opErr("verify", "", "", -1, err)
	}
	defer db.eng.Exit()
	rep, err := db.eng.Verify(ctx, collections, report)
	return rep, opErr("verify", "", "", -1, err)
}

// Repair moves every record that fails verification out of its collection
// into the collection's quarantine (kept in the file for manual recovery)
// and rewrites counters that disagree with the records, in one transaction.
// Problems are reported as Verify reports them, except that Repair does not
// run bbolt's page check (run Verify for that). Damage to bbolt's own pages
// cannot be repaired in place: restore a backup, or Compact what is readable.
func (db *DB) Repair(report func(Problem), collections ...string) (VerifyReport, error) {
	return db.RepairContext(context.Background(), report, collections...)
}

// RepairContext is Repair that stops when ctx is done: it checks ctx as
// VerifyContext does, and also between the entries it moves, during
// recounts and between steps of an index rebuild. Its one transaction then
// rolls back, so nothing of the repair is kept: the error wraps ctx.Err()
// and says so, and the report counts the problems found until then and no
// repairs (Quarantined, Recounted and Reindexed are 0).
func (db *DB) RepairContext(ctx context.Context, report func(Problem), collections ...string) (VerifyReport, error) {
	if err := db.eng.Enter(); err != nil {
		return VerifyReport{}, opErr("repair", "", "", -1, err)
	}
	defer db.eng.Exit()
	rep, err := db.eng.Repair(ctx, collections, report)
	return rep, opErr("repair", "", "", -1, err)
}

// Backup writes a consistent copy of the database to w while it stays in
// use by this process. (bbolt's file lock means no other process can have
// the file open for writing meanwhile; a backup is therefore always taken
// through the process that owns the database.)
func (db *DB) Backup(w io.Writer) (int64, error) {
	return db.BackupContext(context.Background(), w)
}

// BackupContext is Backup that stops when ctx is done: it checks ctx before
// each write to w (the copy goes in writes of 32 KiB) and then returns the
// bytes written and an *Error wrapping ctx.Err(), with its read transaction
// ended. w holds an incomplete copy, which is not a database.
func (db *DB) BackupContext(ctx context.Context, w io.Writer) (int64, error) {
	if err := db.eng.Enter(); err != nil {
		return 0, opErr("backup", "", "", -1, err)
	}
	defer db.eng.Exit()
	n, err := db.eng.Backup(ctx, w)
	return n, opErr("backup", "", "", -1, err)
}

// BackupFile writes a consistent copy to path, atomically: path holds either
// the complete copy or whatever it held before.
func (db *DB) BackupFile(path string) (int64, error) {
	return db.BackupFileContext(context.Background(), path)
}

// BackupFileContext is BackupFile that stops when ctx is done, as
// BackupContext does: it removes its temporary file and leaves path as it
// was (absent, or the file it held), and the error wraps ctx.Err().
func (db *DB) BackupFileContext(ctx context.Context, path string) (int64, error) {
	if err := db.eng.Enter(); err != nil {
		return 0, opErr("backup", "", "", -1, err)
	}
	defer db.eng.Exit()
	n, err := db.eng.BackupFile(ctx, path)
	return n, opErr("backup", "", "", -1, err)
}

// Compact copies the live data of the closed database at src into the new
// file dst, leaving freed pages behind, and reports both sizes. src is
// opened read-only; a process holding it open for writing makes Compact fail
// with ErrLocked after the lock timeout.
//
// Every bucket is copied, nested buckets and their sequences included, in
// write transactions of at most 64 MiB; pages are packed full, as the
// engine writes them, except the entries of an index of the keys layout,
// which keep the room the engine leaves in them for inserts.
func Compact(src, dst string, opts ...Option) (CompactReport, error) {
	return CompactContext(context.Background(), src, dst, opts...)
}

// CompactContext is Compact that stops when ctx is done: it checks ctx
// before it starts and every few thousand keys (or few MiB of values) of
// the copy, and then removes dst (which did not exist before) and returns an
// *Error wrapping ctx.Err(). src is only read, so it is as it was.
func CompactContext(ctx context.Context, src, dst string, opts ...Option) (CompactReport, error) {
	o, err := openOptions(opts)
	if err != nil {
		return CompactReport{}, err
	}
	if isURL(src) || isURL(dst) {
		return CompactReport{}, &Error{Op: "compact", Index: -1, Err: fmt.Errorf("%w: Compact rewrites a database file", ErrUnsupported),
			Hint: "PostgreSQL reclaims space itself (VACUUM); to move a store between backends, export and import it"}
	}
	rep, err := engine.Compact(ctx, src, dst, o)
	return rep, opErr("compact", "", "", -1, err)
}
