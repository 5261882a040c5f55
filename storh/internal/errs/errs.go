// Package errs declares the sentinel errors and the error types of storh
// once, where the engine and its internal packages can return them and the
// storh package can re-export them. Their meaning, and when each is
// returned, is documented in package storh, the only place users meet them.
package errs

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The sentinels; package storh documents each under the same name.
var (
	ErrNotFound            = errors.New("storh: not found")
	ErrInvalidID           = errors.New("storh: invalid id")
	ErrExists              = errors.New("storh: record already exists")
	ErrInvalidData         = errors.New("storh: invalid data")
	ErrClosed              = errors.New("storh: database closed")
	ErrCorrupt             = errors.New("storh: corrupt data")
	ErrLocked              = errors.New("storh: database is locked")
	ErrInvalidName         = errors.New("storh: invalid collection name")
	ErrWrongKind           = errors.New("storh: collection kind mismatch")
	ErrReadOnly            = errors.New("storh: read-only")
	ErrNestedTx            = errors.New("storh: database call inside a transaction callback")
	ErrUniqueViolation     = errors.New("storh: unique violation")
	ErrNoIndex             = errors.New("storh: no index for the query")
	ErrCursorNotFound      = fmt.Errorf("%w: the cursor record does not exist", ErrNotFound)
	ErrInvalidIndex        = errors.New("storh: invalid index")
	ErrTooLarge            = errors.New("storh: database size limit reached")
	ErrCommitUnknown       = errors.New("storh: commit outcome unknown")
	ErrUnsupported         = errors.New("storh: not supported by this backend")
	ErrEmpty               = errors.New("storh: queue is empty")
	ErrNotClaimed          = errors.New("storh: job is not claimed")
	ErrClaimed             = errors.New("storh: job is claimed")
	ErrNotDead             = errors.New("storh: job is not dead")
	ErrNotEmpty            = errors.New("storh: destination is not empty")
	ErrUnfinishedMigration = errors.New("storh: the database is the destination of an unfinished migration")
	ErrInvalidOption       = errors.New("storh: invalid option")
	ErrInvalidPatch        = errors.New("storh: invalid patch")
	ErrSchema              = errors.New("storh: schema violation")
	ErrMismatch            = errors.New("storh: copy differs from its source")
	ErrLagged              = errors.New("storh: watcher fell behind")
	ErrWatchLost           = errors.New("storh: watch lost its feed of other processes' commits")
	ErrChangesTrimmed      = errors.New("storh: changes trimmed from the feed")
)

// MismatchError is the first difference the verification of a copy found;
// package storh documents it as storh.MigrateMismatch. It wraps
// ErrMismatch.
type MismatchError struct {
	Path       [][]byte // the entry that differs: its keys from the top level down
	Collection string   // the collection it belongs to; empty for the database's own buckets
	Detail     string
}

func (e *MismatchError) Error() string {
	return "storh: copy differs from its source at " + KeyPath(e.Path) + ": " + e.Detail
}

func (e *MismatchError) Unwrap() error { return ErrMismatch }

// KeyPath prints a path of keys for messages: text keys as they are
// (quoted when they hold a space, '/' or '"'), others in hex, joined by
// '/'; an empty path is "the start".
func KeyPath(path [][]byte) string {
	if len(path) == 0 {
		return "the start"
	}
	parts := make([]string, len(path))
	for i, k := range path {
		parts[i] = keyString(k)
	}
	return strings.Join(parts, "/")
}

func keyString(k []byte) string {
	if !utf8.Valid(k) || len(k) == 0 {
		return "0x" + hex.EncodeToString(k)
	}
	plain := true
	for _, r := range string(k) {
		if !unicode.IsPrint(r) {
			return "0x" + hex.EncodeToString(k)
		}
		if r == ' ' || r == '/' || r == '"' {
			plain = false
		}
	}
	if plain {
		return string(k)
	}
	return strconv.Quote(string(k))
}

// Error describes a failed operation; package storh documents it as
// storh.Error.
type Error struct {
	Op         string // "put", "get", "stream", "open", ...
	Path       string // database file, for errors about the file itself
	Collection string // may be empty
	ID         string // record id in canonical form, may be empty
	Index      int    // position in a batch; -1 when not a batch item
	Err        error  // wraps a sentinel
	Hint       string // what the user can do about it
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
		// Quoted: a name with control characters must not be able to forge
		// or break a log line.
		b.WriteString(strconv.Quote(e.Collection))
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

// UniqueViolation is the error of a write (or of a unique index's build)
// that met a value another record holds; package storh documents it as
// storh.UniqueViolation.
type UniqueViolation struct {
	Index    string      // the unique index's name
	Paths    [][]string  // its field paths
	Values   []any       // the values, normalised as Record.Data gives them; nil for a missing field
	Existing uuidv7.UUID // the record that holds them
}

func (e *UniqueViolation) Error() string {
	parts := make([]string, len(e.Paths))
	for i, path := range e.Paths {
		v := "null"
		if e.Values[i] != nil {
			v = fmt.Sprintf("%#v", e.Values[i])
			if len(v) > 80 {
				v = v[:77] + "..."
			}
		}
		parts[i] = plan.PathString(path) + " = " + v
	}
	return fmt.Sprintf("%v: index %q already holds %s, for record %s", ErrUniqueViolation, e.Index, strings.Join(parts, ", "), e.Existing)
}

func (e *UniqueViolation) Unwrap() error { return ErrUniqueViolation }
