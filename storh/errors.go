package storh

import (
	"errors"

	"github.com/storhdb/storh-go/storh/internal/api"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/codec"
	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/query"
)

// Sentinel errors; test with errors.Is. Errors about one operation are
// *Error values that wrap one of these and add the operation, collection,
// id and a hint.
var (
	// ErrNotFound is returned by Get for a valid id that is not stored, by
	// reads of a collection that does not exist, and by Open WithReadOnly of
	// a database that does not exist (a missing file; on PostgreSQL, a
	// search_path naming no schema that exists, or a schema holding no
	// store).
	ErrNotFound = errs.ErrNotFound
	// ErrInvalidID is returned when an id is not a UUIDv7 (version 7, RFC
	// 9562 variant): from PutWithID, Get, Delete, or a custom generator.
	// Nothing is written.
	ErrInvalidID = errs.ErrInvalidID
	// ErrExists is returned by Log.PutWithID (and Log.Put with a generator
	// that repeats itself) for an id already stored: log records are
	// immutable.
	ErrExists = errs.ErrExists
	// ErrInvalidData is returned when data is nil, not a map or a struct,
	// holds a value msgpack cannot encode (channels, funcs), has non-string
	// map keys, exceeds MaxRecordSize or nests deeper than MaxDepth.
	ErrInvalidData = errs.ErrInvalidData
	// ErrInvalidQuery is returned, as the first error of a stream, for a
	// query that cannot run (Limit below 1, empty field name, a WhereEqual
	// value that cannot be stored). It is query.ErrInvalidQuery.
	ErrInvalidQuery = query.ErrInvalidQuery
	// ErrClosed is returned by every call on a closed DB, and by handles
	// bound to a transaction that has ended.
	ErrClosed = errs.ErrClosed
	// ErrCorrupt is returned for a stored value that fails its checksum or
	// decode (the error names the id), and for a damaged file.
	ErrCorrupt = errs.ErrCorrupt
	// ErrLocked is returned by Open when another process holds the file and
	// the lock timeout passes: a process that has it open for writing keeps
	// every other out, and processes that have it open read-only keep out
	// one that would write. The error says which, where the lock shows it.
	ErrLocked = errs.ErrLocked
	// ErrInvalidName is returned for a collection name that is empty, longer
	// than MaxNameLength bytes, or not printable UTF-8.
	ErrInvalidName = errs.ErrInvalidName
	// ErrWrongKind is returned when a collection is opened as another kind
	// than it was created with (db.Log on a Docs collection).
	ErrWrongKind = errs.ErrWrongKind
	// ErrReadOnly is returned by writes on a read-only database or inside
	// View, and by Open of a PostgreSQL hot standby without WithReadOnly.
	ErrReadOnly = errs.ErrReadOnly
	// ErrNestedTx is returned by a call on the DB or on a DB-level handle
	// from inside an Update or View callback, which would deadlock; use the
	// handles from tx.Docs and tx.Log instead.
	ErrNestedTx = errs.ErrNestedTx
	// ErrTooLarge is returned by a write that would grow the file past
	// WithMaxSize, or that the file system refused to grow for. Nothing of
	// that write is stored.
	ErrTooLarge = errs.ErrTooLarge
	// ErrUnsupported is returned for what only a database file has on a
	// PostgreSQL store: Backup, BackupFile, Compact, and the options that
	// set up a file (WithLockTimeout, WithInitialMmapSize, WithMaxSize,
	// WithFileMode) given to Open with a postgres:// URL; and for
	// WithReadURL given to Open of a file or to OpenStore.
	ErrUnsupported = errs.ErrUnsupported
	// ErrCommitUnknown is returned, on a PostgreSQL store, by a write
	// (Put, PutMany, Delete, Update, a queue operation) whose connection
	// was lost after it sent its commit when the server could not then be
	// asked how the transaction ended (storh asks, on a new connection,
	// for a few seconds), or when the server that answers is not the one
	// that ran it (a standby promoted in its place, or that server after a
	// crash) and cannot tell it from one of its own: its writes may be
	// stored, or not. Find out before writing again, or a retried Put
	// stores its record twice: ids are chosen before the write, and the
	// error names the record's (Error.ID, for Put too), so Get tells
	// whether it is stored; Docs.PutWithID with that id is safe to repeat,
	// and a Log's refuses an id it holds (ErrExists). A lost connection whose outcome the server gave is never
	// this error: a commit that happened succeeds, one that did not fails
	// with the connection's error and can be run again.
	ErrCommitUnknown = errs.ErrCommitUnknown
	// ErrUniqueViolation is returned by a write whose value a unique index
	// already holds for another record (the error names the index, the
	// value and that record; nothing of the write is stored), and by
	// opening a collection with a unique index over data that holds
	// duplicates (the index is not created).
	ErrUniqueViolation = errs.ErrUniqueViolation
	// ErrEmpty is returned by Queue.Claim and ClaimMany when no job is
	// pending.
	ErrEmpty = errs.ErrEmpty
	// ErrNotClaimed is returned by Queue.Complete, Fail, Extend and Release
	// for a job that is not claimed (it is pending, done or dead).
	ErrNotClaimed = errs.ErrNotClaimed
	// ErrNotDead is returned by Queue.Retry for a job that is not dead
	// (pending, claimed or done): only a dead letter is retried. Nothing
	// changes.
	ErrNotDead = errs.ErrNotDead
	// ErrClaimed is returned by Queue.Cancel for a job a worker holds: it
	// is claimed and its lease has not ended. Nothing changes; cancel it
	// once its worker has failed or released it, or its lease has ended.
	ErrClaimed = errs.ErrClaimed
	// ErrNoIndex is returned by a query with RequireIndex that no index
	// serves and that would read the whole collection.
	ErrNoIndex = errs.ErrNoIndex
	// ErrCursorNotFound is returned by a query whose keyset cursor (After
	// or Before with OrderBy) names a record that no longer exists; it
	// wraps ErrNotFound. AfterValue and BeforeValue need no record.
	ErrCursorNotFound = errs.ErrCursorNotFound
	// ErrInvalidIndex is returned when opening a collection with an index
	// declaration that cannot be used (no paths, an empty path segment, a
	// bad or duplicate name), or that contradicts the stored index of that
	// name (other paths or uniqueness: drop it first).
	ErrInvalidIndex = errs.ErrInvalidIndex
	// ErrTypeMismatch is returned by Record.Decode and the reads of typed
	// collections (DocsOf, LogOf) when a stored value does not fit the Go
	// type asked for: a string for an int field, a number out of the
	// field's range, a list for a struct. The record is intact; Data reads
	// it.
	ErrTypeMismatch = codec.ErrType
	// ErrNotEmpty is returned by Migrate for a destination that holds data
	// of its own, or an unfinished migration from another source; the
	// destination is left as it was.
	ErrNotEmpty = errs.ErrNotEmpty
	// ErrUnfinishedMigration is returned by Open for the destination of a
	// Migrate that has not finished: it holds part of its source. Run the
	// same migration again to finish it (Migrate opens it), or delete it.
	ErrUnfinishedMigration = errs.ErrUnfinishedMigration
	// ErrInvalidOption is returned by Open, DB.Docs, DB.Log and DB.Queue for
	// an option given an unusable value (a non-positive lock timeout, a nil
	// id generator, ...), by Open for a path that holds a password (a
	// PostgreSQL connection string in keyword/value form: give a URL) or a
	// WithReadURL naming no hot standby of the URL's database, and by
	// Migrate for a source and destination that are one store.
	ErrInvalidOption = errs.ErrInvalidOption
	// ErrInvalidPatch is returned by Patch and PatchMatching for a change
	// that cannot apply: an empty or bad path, an operand that cannot be
	// stored, Inc of a non-number or by a non-number, an Inc whose integer
	// result leaves the range of int64 and uint64 or whose float result
	// overflows, Push, Pull or AddToSet on a field that is not a list,
	// and Set, Inc, Push or AddToSet through a field that is not a map.
	// The record is left as it was (docs/queries.md, "Patches").
	ErrInvalidPatch = errs.ErrInvalidPatch
	// ErrSchema is returned by a write whose record fails its collection's
	// JSON Schema (WithSchema, SetSchema): Put, PutWithID, PutMany and
	// PutStream (the *Error's Index names the item), Patch and
	// PatchMatching (on the patched record), and every writer above
	// them. The message names the JSON pointer of each failing value and
	// its rule ("/age: minimum: got -3, want 0"); nothing of the write is
	// stored. SetSchema returns it, listing the first 10 records that
	// fail, when existing records fail the new schema, which is then not
	// set. See docs/schemas.md.
	ErrSchema = errs.ErrSchema
)

// UniqueViolation is the error a unique index gives a write whose value
// another record holds: the index, its paths, the values and the id of that
// record (Existing). It wraps ErrUniqueViolation; get it with errors.As.
// Its fields:
//
//	Index    string      // the unique index's name
//	Paths    [][]string  // its field paths
//	Values   []any       // the values, as Record.Data gives them; nil for a missing field
//	Existing uuidv7.UUID // the record that holds them
type UniqueViolation = errs.UniqueViolation

// Error describes a failed operation. Its fields:
//
//	Op         string // what was attempted: "put", "get", "stream", "open", ...
//	Path       string // the database, for errors about the file or store itself
//	Collection string // the collection, or ""
//	ID         string // the record's id in canonical form, or ""
//	Index      int    // the position in a batch; -1 when not a batch item
//	Err        error  // why: it wraps one of the sentinels above
//	Hint       string // what the user can do about it
//
// Get it with errors.As; errors.Is sees the sentinel it wraps.
type Error = errs.Error

// Limits.
const (
	// MaxRecordSize bounds one record's encoded (msgpack) size: 16 MiB.
	MaxRecordSize = api.MaxRecordSize
	// MaxDepth bounds the nesting of maps and lists in a record: 64
	// levels, the top-level map being the first.
	MaxDepth = api.MaxDepth
	// MaxNameLength bounds a collection name: 200 bytes of UTF-8.
	MaxNameLength = api.MaxNameLength
)

func opErr(op, coll string, id string, index int, err error) error {
	if err == nil {
		return nil
	}
	if already, ok := err.(*Error); ok {
		return already
	}
	e := &Error{Op: op, Collection: coll, ID: id, Index: index, Err: err}
	switch {
	case errors.Is(err, ErrNestedTx):
		e.Hint = "inside Update/View use the handles from tx.Docs and tx.Log"
	case err == ErrClosed: // a wrapped ErrClosed (an ended transaction) says why itself
		e.Hint = "the database was closed; open it again"
	case errors.Is(err, ErrReadOnly):
		e.Hint = "writes need a database opened without WithReadOnly, and go inside Update, not View"
	case errors.Is(err, ErrInvalidPatch):
		e.Hint = "no change of the patch was applied: the record is as it was"
	case errors.Is(err, ErrSchema) && op == "set schema":
		e.Hint = "fix or delete those records, or loosen the schema; the collection keeps its schema as it was"
	case errors.Is(err, ErrSchema):
		e.Hint = "nothing was written: the record must pass the collection's JSON Schema (DB.Schema shows it; docs/schemas.md maps values to JSON)"
	default:
		e.Hint = engine.HintOf(err)
	}
	return e
}
