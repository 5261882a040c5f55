package codec

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/storhdb/storh-go/storh/internal/mpack"
)

var (
	// ErrType is wrapped by every decoding error that is not about the
	// bytes themselves: a well-formed value that does not fit the Go type it
	// is decoded into (a string into an int, 300 into an int8, an array into
	// a struct), a target that is not a non-nil pointer, and a user's
	// Unmarshaler that fails. Malformed input wraps mpack.ErrMalformed (or
	// mpack.ErrTooDeep) instead, so a caller can tell a type mismatch from
	// corrupt data.
	ErrType = errors.New("storh: value does not fit the Go type")

	// ErrUnsupported is wrapped by encoding errors for values that have no
	// msgpack form in a record: channels, functions, complex numbers, maps
	// whose keys are not strings, a top-level value that is not a map or a
	// struct, and a user's Marshaler that fails or writes something that is
	// not one msgpack value.
	ErrUnsupported = errors.New("storh: cannot encode value")

	// ErrTooLarge is wrapped when the encoded record exceeds the size limit
	// given to AppendRecord.
	ErrTooLarge = errors.New("storh: record too large")
)

// pathError is every error of the package: what failed, where (the field
// path, built while the error unwinds through the containers), and the
// sentinel it wraps.
type pathError struct {
	op    string   // "decode into main.Post", or "" when encoding
	path  []string // innermost segment first: "name", "[3]"
	msg   string
	kind  error // ErrType, ErrUnsupported, ErrTooLarge, an mpack sentinel
	cause error // a user's error or the underlying error, may be nil
	// noPath: the error is about the whole record (depth, size), and a
	// path 64 levels long would drown the message.
	noPath bool
}

func (e *pathError) Error() string {
	var sb strings.Builder
	if e.op != "" {
		sb.WriteString(e.op)
		sb.WriteString(": ")
	}
	if len(e.path) > 0 && !e.noPath {
		sb.WriteString("field ")
		sb.WriteString(strconv.Quote(e.Path()))
		sb.WriteString(": ")
	}
	sb.WriteString(e.msg)
	return sb.String()
}

// Path returns the dotted field path, with [i] for list elements.
func (e *pathError) Path() string {
	var sb strings.Builder
	for i := len(e.path) - 1; i >= 0; i-- {
		seg := e.path[i]
		if sb.Len() > 0 && !strings.HasPrefix(seg, "[") {
			sb.WriteByte('.')
		}
		sb.WriteString(seg)
	}
	return sb.String()
}

func (e *pathError) Unwrap() []error {
	if e.cause != nil && e.cause != e.kind {
		return []error{e.kind, e.cause}
	}
	return []error{e.kind}
}

func newError(kind error, msg string) *pathError {
	return &pathError{kind: kind, msg: msg}
}

func typeErrorf(format string, args ...any) error {
	return &pathError{kind: ErrType, msg: fmt.Sprintf(format, args...)}
}

func unsupportedf(format string, args ...any) error {
	return &pathError{kind: ErrUnsupported, msg: fmt.Sprintf(format, args...)}
}

// wrapRaw turns an error from mpack (malformed input) or from a user's
// method into a pathError that keeps it in its chain.
func wrapRaw(kind, err error, msg string) *pathError {
	return &pathError{kind: kind, cause: err, msg: msg}
}

// malformed wraps an mpack error (ErrMalformed, ErrTooDeep,
// ErrUnsupported for an unknown extension) as is.
func malformed(err error) error {
	if _, ok := err.(*pathError); ok {
		return err
	}
	return &pathError{kind: err, msg: err.Error()}
}

// atField adds one path segment to an error unwinding out of a container.
func atField(err error, seg string) error {
	pe, ok := err.(*pathError)
	if !ok {
		pe = &pathError{kind: err, msg: err.Error()}
	}
	pe.path = append(pe.path, seg)
	return pe
}

func atIndex(err error, i int) error {
	return atField(err, "["+strconv.Itoa(i)+"]")
}

// decodeOp names the target of a decode in its errors.
func withOp(err error, t reflect.Type) error {
	pe, ok := err.(*pathError)
	if !ok {
		pe = &pathError{kind: err, msg: err.Error()}
	}
	pe.op = "decode into " + t.String()
	return pe
}

func errTooDeep() error {
	return &pathError{kind: mpack.ErrTooDeep, msg: fmt.Sprintf("nested deeper than %d levels, or cyclic", mpack.MaxDepth), noPath: true}
}

// errTooLarge reports a record over the limit: exactly size bytes when the
// encoding is complete, at least size bytes when it stopped half-way.
func errTooLarge(size, limit int, complete bool) error {
	what := "at least "
	if complete {
		what = ""
	}
	return &pathError{kind: ErrTooLarge, msg: fmt.Sprintf("record is %s%d bytes encoded; the limit is %d", what, size, limit), noPath: true}
}

// wireKind names a msgpack value's kind in messages.
func wireKind(k mpack.Kind) string {
	switch k {
	case mpack.KindNil:
		return "nil"
	case mpack.KindFalse, mpack.KindTrue:
		return "bool"
	case mpack.KindInt, mpack.KindUint:
		return "integer"
	case mpack.KindFloat32, mpack.KindFloat64:
		return "float"
	case mpack.KindStr:
		return "string"
	case mpack.KindBin:
		return "binary"
	case mpack.KindExt:
		return "extension"
	case mpack.KindArray:
		return "array"
	case mpack.KindMap:
		return "map"
	}
	return "value"
}
