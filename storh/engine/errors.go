package engine

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/storhdb/storh-go/storh/query"
)

// Sentinel errors. The storh package re-exports each one under the same
// name; test for them with errors.Is. Every error the engine returns that
// concerns one collection or record is an *Error that wraps a sentinel.
var (
	// ErrNotFound: Get of a valid id that is not stored, or a read-only
	// operation on a collection that does not exist.
	ErrNotFound = errors.New("storh: not found")
	// ErrInvalidID: an id that is not a UUIDv7 (version 7, RFC 9562 variant),
	// whether given explicitly, produced by a generator, or parsed from text.
	ErrInvalidID = errors.New("storh: invalid id")
	// ErrExists: PutWithID on a Log with an id that is already stored (log
	// records are immutable).
	ErrExists = errors.New("storh: record already exists")
	// ErrInvalidData: data that is not a map or a struct encoding to a
	// msgpack map with string keys, is nil, too large, nested too deeply, or
	// holds a value that cannot be stored (channels, funcs, complex numbers).
	ErrInvalidData = errors.New("storh: invalid data")
	// ErrInvalidQuery: a query that cannot run (see query.ErrInvalidQuery).
	ErrInvalidQuery = query.ErrInvalidQuery
	// ErrClosed: any call on a closed database, or on a handle bound to a
	// transaction that has ended.
	ErrClosed = errors.New("storh: database closed")
	// ErrCorrupt: a stored value fails its checksum or cannot be decoded, or
	// the file itself is damaged. The data is never returned as if valid.
	ErrCorrupt = errors.New("storh: corrupt data")
	// ErrLocked: another process (or Open) holds the database file's lock
	// and did not release it within the lock timeout: open for writing,
	// which keeps every other Open out, or read-only, which keeps out an
	// Open that would write. The error says which, where the lock shows it.
	ErrLocked = errors.New("storh: database is locked")
	// ErrInvalidName: a collection name that is empty, too long, or not
	// printable text.
	ErrInvalidName = errors.New("storh: invalid collection name")
	// ErrWrongKind: a collection opened as another kind than it was created
	// with (for example Log on a Docs collection).
	ErrWrongKind = errors.New("storh: collection kind mismatch")
	// ErrReadOnly: a write on a database opened read-only or inside View.
	ErrReadOnly = errors.New("storh: read-only")
	// ErrNestedTx: a call on the database (not on the transaction's own
	// handles) from inside an Update or View callback; it would deadlock.
	ErrNestedTx = errors.New("storh: database call inside a transaction callback")
	// ErrUniqueViolation: a write whose value a unique index already holds
	// for another record (nothing of the write is stored), or a unique
	// index declared over data that holds duplicates (it is not created).
	ErrUniqueViolation = errors.New("storh: unique violation")
	// ErrNoIndex: a query with RequireIndex that would read the whole
	// collection.
	ErrNoIndex = errors.New("storh: no index for the query")
	// ErrCursorNotFound: a keyset cursor (After or Before with OrderBy)
	// names a record that does not exist. It wraps ErrNotFound.
	ErrCursorNotFound = fmt.Errorf("%w: the cursor record does not exist", ErrNotFound)
	// ErrInvalidIndex: an index declaration that cannot be used (no paths,
	// an empty segment, a bad name), or one that contradicts the index of
	// that name already stored.
	ErrInvalidIndex = errors.New("storh: invalid index")
	// ErrTooLarge: a write that would exceed the database's size limit
	// (Options.MaxSize) or that the file system refused to grow for.
	ErrTooLarge = errors.New("storh: database size limit reached")

	// ErrCommitUnknown: a write whose commit may or may not have happened,
	// on a store over a network (PostgreSQL): the connection was lost after
	// the commit was sent, and the server could not be asked how it ended.
	ErrCommitUnknown = errors.New("storh: commit outcome unknown")

	// ErrUnsupported is returned for what only a database file has
	// (backup, compaction, the file's page checks and statistics) on
	// another backend.
	ErrUnsupported = errors.New("storh: not supported by this backend")
)

// Error describes a failed operation: what was attempted (Op), on which
// collection and record, why (Err, which wraps a sentinel), and what the user
// can do about it (Hint).
type Error struct {
	Op         string // "put", "get", "stream", "open", ...
	Path       string // database file, for errors about the file itself
	Collection string // may be empty
	ID         string // record id in canonical form, may be empty
	Index      int    // position in a batch; -1 when not a batch item
	Err        error
	Hint       string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("storh: ")
	b.WriteString(e.Op)
	if e.Path != "" {
		b.WriteString(" ")
		b.WriteString(e.Path)
	}
	if e.Collection != "" {
		b.WriteString(" ")
		b.WriteString(quote(e.Collection))
	}
	if e.Index >= 0 {
		b.WriteString(" item ")
		b.WriteString(strconv.Itoa(e.Index))
	}
	if e.ID != "" {
		b.WriteString(" id ")
		b.WriteString(e.ID)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "storh: "))
	}
	if e.Hint != "" {
		b.WriteString(" (")
		b.WriteString(e.Hint)
		b.WriteString(")")
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// quote escapes names for messages: a name with control characters must not
// be able to forge or break a log line.
func quote(s string) string { return strconv.Quote(s) }
