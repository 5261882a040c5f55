package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
)

// TestClassify maps every sentinel of storh, wrapped as storh wraps them,
// to its status and kind.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		kind   string
	}{
		{storh.ErrNotFound, 404, KindNotFound},
		{storh.ErrCursorNotFound, 404, KindCursorNotFound},
		{storh.ErrEmpty, 404, KindNotFound},
		{storh.ErrInvalidID, 400, KindBadRequest},
		{storh.ErrInvalidData, 400, KindBadRequest},
		{storh.ErrInvalidQuery, 400, KindInvalidQuery},
		{storh.ErrInvalidName, 400, KindBadRequest},
		{storh.ErrNoIndex, 400, KindNoIndex},
		{storh.ErrInvalidIndex, 400, KindBadRequest},
		{jsonl.ErrSyntax, 400, KindBadRequest},
		{jsonl.ErrRow, 400, KindBadRequest},
		{storh.ErrUniqueViolation, 409, KindUniqueViolation},
		{storh.ErrExists, 409, KindExists},
		{storh.ErrWrongKind, 409, KindWrongKind},
		{storh.ErrNotClaimed, 409, KindNotClaimed},
		{storh.ErrClaimed, 409, KindClaimed},
		{storh.ErrNotDead, 409, KindNotDead},
		{storh.ErrNotEmpty, 409, KindConflict},
		{storh.ErrUnfinishedMigration, 409, KindConflict},
		{storh.ErrReadOnly, 403, KindReadOnly},
		{storh.ErrLocked, 423, KindLocked},
		{storh.ErrTooLarge, 507, KindFull},
		{storh.ErrUnsupported, 501, KindUnsupported},
		{storh.ErrClosed, 503, KindUnavailable},
		{storh.ErrCorrupt, 500, KindCorrupt},
		{storh.ErrNestedTx, 500, KindInternal},
		{storh.ErrTypeMismatch, 500, KindInternal},
		{storh.ErrInvalidOption, 400, KindInvalidSchema},
		{storh.ErrSchema, 422, KindSchema},
		{&jsonl.LineError{Line: 3, Err: storh.ErrSchema}, 422, KindSchema},
		{jsonl.ErrPayload, 500, KindInternal},
		{jsonl.ErrLineTooLong, 400, KindBadRequest},
		{&jsonl.DuplicateError{First: 1}, 400, KindBadRequest},
		{&jsonl.LineError{Line: 3, Err: jsonl.ErrSyntax}, 400, KindBadRequest},
		{&jsonl.LineError{Line: 3, Err: storh.ErrExists}, 409, KindExists},
		{storh.ErrLagged, 503, KindLagged},
		{storh.ErrChangesTrimmed, 410, KindChangesTrimmed},
		{storh.ErrWatchLost, 503, KindWatchLost},
		{context.DeadlineExceeded, 503, KindTimeout},
		{&http.MaxBytesError{Limit: 1}, 413, KindTooLarge},
		{&query.ParseError{Node: "$", Reason: "x"}, 400, KindInvalidQuery},
		{&query.ParseError{Column: 3, Reason: "x"}, 400, KindInvalidQuery},
		{errors.New("other"), 500, KindInternal},
	} {
		for _, err := range []error{tc.err, &storh.Error{Op: "get", Collection: "c", Index: -1, Err: tc.err}, fmt.Errorf("web: body: %w", tc.err)} {
			status, kind := classify(err)
			if status != tc.status || kind != tc.kind {
				t.Errorf("%v: %d %s, want %d %s", err, status, kind, tc.status, tc.kind)
			}
		}
	}
}

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	writeError(w, &storh.Error{Op: "get", Collection: "c", ID: "x", Index: -1, Err: storh.ErrLocked})
	want := `{"error":{"kind":"locked","message":"storh: get \"c\" id x: database is locked"}}` + "\n"
	if w.Code != 423 || w.Body.String() != want || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("%d %q %v", w.Code, w.Body, w.Header())
	}
	// An import's line is a field of its own.
	w = httptest.NewRecorder()
	writeError(w, fmt.Errorf("web: import: %w", &jsonl.LineError{Line: 7, Err: storh.ErrInvalidData}))
	want = `{"error":{"kind":"bad_request","message":"web: import: line 7: storh: invalid data","line":7}}` + "\n"
	if w.Code != 400 || w.Body.String() != want {
		t.Errorf("%d %q", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	writeError(w, fmt.Errorf("storh: stream: %w", context.DeadlineExceeded))
	if w.Code != 503 || !strings.Contains(w.Body.String(), "time limit") {
		t.Errorf("%d %q", w.Code, w.Body)
	}
}
