package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
)

// The kinds of error a response names, in {"error":{"kind":…}}. A client
// switches on the kind; the message is for people.
const (
	KindBadRequest       = "bad_request"        // 400: a bad parameter, id or body
	KindInvalidQuery     = "invalid_query"      // 400: a condition, order or cursor storh refuses (storh.ErrInvalidQuery)
	KindNoIndex          = "no_index"           // 400: require_index, and no index serves the query (storh.ErrNoIndex)
	KindInvalidPatch     = "invalid_patch"      // 400: a PATCH change that cannot apply to the record (storh.ErrInvalidPatch)
	KindInvalidSchema    = "invalid_schema"     // 400: a PUT schema that is not a valid JSON Schema (storh.ErrInvalidOption)
	KindInvalidOption    = "invalid_option"     // 400: a queue's lease, time or option that storh refuses (storh.ErrInvalidOption)
	KindUnauthorized     = "unauthorized"       // 401: no token, or the wrong one
	KindForbidden        = "forbidden"          // 403: a write while writes are off
	KindReadOnly         = "read_only"          // 403: a write to a database opened read-only
	KindNotFound         = "not_found"          // 404: no such collection, record or endpoint; changes of a collection without a feed
	KindCursorNotFound   = "cursor_not_found"   // 404: an ordered page's cursor names no record (storh.ErrCursorNotFound)
	KindMethodNotAllowed = "method_not_allowed" // 405: a method the endpoint does not have
	KindAppendOnly       = "append_only"        // 405: DELETE or PATCH of a log record
	KindExists           = "exists"             // 409: PUT of an id a log already has
	KindUniqueViolation  = "unique_violation"   // 409: a unique index holds the value for another record
	KindWrongKind        = "wrong_kind"         // 409: the collection is of another kind (a queue has no records)
	KindConflict         = "conflict"           // 409: the store is in a state that forbids it
	KindNotClaimed       = "not_claimed"        // 409: a job that is not claimed, or a claim token whose claim no longer holds (storh.ErrNotClaimed)
	KindClaimed          = "claimed"            // 409: cancel of a job claimed under a lease that holds (storh.ErrClaimed)
	KindNotDead          = "not_dead"           // 409: retry of a job that is not dead (storh.ErrNotDead)
	KindChangesTrimmed   = "changes_trimmed"    // 410: changes after the Seq asked for were trimmed from the feed (storh.ErrChangesTrimmed)
	KindSchema           = "schema_violation"   // 422: a record the collection's JSON Schema refuses, or records a new one would (storh.ErrSchema)
	KindTooLarge         = "too_large"          // 413: the request body is over the limit
	KindMisdirected      = "misdirected"        // 421: a Host that WithAllowedHosts does not allow
	KindLocked           = "locked"             // 423: another process holds the database file
	KindCorrupt          = "corrupt"            // 500: a stored value fails its checksum
	KindInternal         = "internal"           // 500: anything else
	KindUnsupported      = "unsupported"        // 501: not on this backend
	KindUnavailable      = "unavailable"        // 503: the database is closed
	KindTimeout          = "timeout"            // 503: the request ran past its time limit; 408: its body did not arrive within it
	KindBusy             = "busy"               // 503: imports hold as much memory as they may; try again
	KindLagged           = "lagged"             // 503: a tail fell too far behind the writers (storh.ErrLagged)
	KindWatchLost        = "watch_lost"         // 503: a tail lost PostgreSQL's feed of other processes' commits
	KindFull             = "full"               // 507: the database reached its size limit
)

// apiError is an error the handler answers with a status and kind of its
// own choosing, rather than one derived from a storh sentinel.
type apiError struct {
	status int
	kind   string
	msg    string
	err    error
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.err }

// itemError is an error about one job of an enqueue's body: item is its
// place, 1-based, which the answer carries beside the message.
type itemError struct {
	item int
	err  error
}

func (e *itemError) Error() string { return e.err.Error() }
func (e *itemError) Unwrap() error { return e.err }

func badRequest(msg string) error {
	return &apiError{status: http.StatusBadRequest, kind: KindBadRequest, msg: msg}
}

// classify gives the status and kind of an error. Sentinels are tested in
// the order below because some wrap others (ErrCursorNotFound is an
// ErrNotFound; a condition error wraps ErrInvalidQuery, and so does a
// patch's bad path, which is an ErrInvalidPatch).
func classify(err error) (int, string) {
	var ae *apiError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.kind
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, KindTooLarge
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, KindTimeout
	case errors.Is(err, storh.ErrLagged):
		return http.StatusServiceUnavailable, KindLagged
	case errors.Is(err, storh.ErrWatchLost):
		return http.StatusServiceUnavailable, KindWatchLost
	case errors.Is(err, storh.ErrChangesTrimmed):
		// Gone for good: asking again cannot bring them back.
		return http.StatusGone, KindChangesTrimmed
	case errors.Is(err, storh.ErrCursorNotFound):
		return http.StatusNotFound, KindCursorNotFound
	case errors.Is(err, storh.ErrNotFound), errors.Is(err, storh.ErrEmpty):
		return http.StatusNotFound, KindNotFound
	case errors.Is(err, storh.ErrNoIndex):
		return http.StatusBadRequest, KindNoIndex
	case errors.Is(err, storh.ErrInvalidPatch):
		// Before ErrInvalidQuery: a change's bad path wraps the query
		// layer's error too, and it is the patch that is wrong.
		return http.StatusBadRequest, KindInvalidPatch
	case errors.Is(err, storh.ErrInvalidQuery):
		return http.StatusBadRequest, KindInvalidQuery
	case errors.Is(err, storh.ErrInvalidID), errors.Is(err, storh.ErrInvalidData),
		errors.Is(err, storh.ErrInvalidName), errors.Is(err, storh.ErrInvalidIndex),
		errors.Is(err, jsonl.ErrSyntax), errors.Is(err, jsonl.ErrRow),
		errors.Is(err, jsonl.ErrLineTooLong), errors.As(err, new(*jsonl.DuplicateError)):
		return http.StatusBadRequest, KindBadRequest
	case errors.Is(err, storh.ErrSchema):
		return http.StatusUnprocessableEntity, KindSchema
	case errors.Is(err, storh.ErrInvalidOption):
		// Only a PUT of a schema sends the database an option from a
		// request: the document it puts.
		return http.StatusBadRequest, KindInvalidSchema
	case errors.Is(err, storh.ErrUniqueViolation):
		return http.StatusConflict, KindUniqueViolation
	case errors.Is(err, storh.ErrExists):
		return http.StatusConflict, KindExists
	case errors.Is(err, storh.ErrWrongKind):
		return http.StatusConflict, KindWrongKind
	case errors.Is(err, storh.ErrNotClaimed):
		return http.StatusConflict, KindNotClaimed
	case errors.Is(err, storh.ErrClaimed):
		return http.StatusConflict, KindClaimed
	case errors.Is(err, storh.ErrNotDead):
		return http.StatusConflict, KindNotDead
	case errors.Is(err, storh.ErrNotEmpty), errors.Is(err, storh.ErrUnfinishedMigration):
		return http.StatusConflict, KindConflict
	case errors.Is(err, storh.ErrReadOnly):
		return http.StatusForbidden, KindReadOnly
	case errors.Is(err, storh.ErrLocked):
		return http.StatusLocked, KindLocked
	case errors.Is(err, storh.ErrTooLarge):
		// The database is full, which is not the request's size: 413 would
		// tell the client to send less.
		return http.StatusInsufficientStorage, KindFull
	case errors.Is(err, storh.ErrUnsupported):
		return http.StatusNotImplemented, KindUnsupported
	case errors.Is(err, storh.ErrClosed):
		return http.StatusServiceUnavailable, KindUnavailable
	case errors.Is(err, storh.ErrCorrupt):
		return http.StatusInternalServerError, KindCorrupt
	}
	// ErrNestedTx, ErrTypeMismatch and ErrPayload cannot
	// come from a request: they are bugs, here or in storh.
	return http.StatusInternalServerError, KindInternal
}

// writeError answers with err as JSON. The message is the error's own
// text: storh's errors name the operation, collection and id, never more
// of the file than its own text says, and the handler's name the parameter.
func writeError(w http.ResponseWriter, err error) {
	status, body := errorOf(err)
	writeJSON(w, status, body)
}

// errorOf gives the status and JSON body of err, for a response or, once
// a stream has started, for its last line or event.
func errorOf(err error) (int, ErrorResponse) {
	status, kind := classify(err)
	var body ErrorResponse
	body.Error.Kind, body.Error.Message = kind, err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		body.Error.Message = "web: the request ran past its time limit: " + err.Error()
	}
	var le *jsonl.LineError
	if errors.As(err, &le) {
		body.Error.Line = le.Line
	}
	var ie *itemError
	if errors.As(err, &ie) {
		body.Error.Item = ie.item
	}
	return status, body
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := appendJSON(nil, v)
	if err != nil {
		// Only the handler's own types reach here, and they all marshal.
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"kind":"internal","message":"web: cannot write the response"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// appendJSON appends v as JSON and a newline to dst.
// Like a record's JSON, it leaves <, > and & as they are (json.Marshal
// would write \u003c): a query's text reads "score >= 8", and nosniff
// keeps browsers from reading JSON as HTML.
func appendJSON(dst []byte, v any) ([]byte, error) {
	b := bytes.NewBuffer(dst)
	e := json.NewEncoder(b)
	e.SetEscapeHTML(false)
	err := e.Encode(v)
	return b.Bytes(), err
}
