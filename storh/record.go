package storh

import (
	"time"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Map is the generic form of a record's data.
//
// Decoded values have one Go type per kind, whatever was stored: integers are
// int64 (uint64 only above math.MaxInt64), floats float64, lists []any,
// nested maps map[string]any, timestamps time.Time in UTC, binary []byte.
type Map = map[string]any

// Entry is a record to write with an explicit id, for PutMany and PutStream.
// A zero ID means "generate one".
type Entry struct {
	ID   uuidv7.UUID
	Data any
}

// Record is one stored record: its id and its msgpack-encoded data, decoded
// only when asked for. A Record owns its bytes and is safe to keep, also
// one returned by a write inside an Update.
type Record struct {
	ID      uuidv7.UUID
	payload []byte
}

// Time returns the creation time carried by the id.
func (r Record) Time() time.Time { return r.ID.Time() }

// Data decodes the record into a Map (see Map for the types). It decodes on
// every call, so keep the result. It returns nil only for a record that fails
// to decode (a payload whose checksum is valid but that is not a record: a
// bug or a forgery, which Verify reports); DataErr says why.
func (r Record) Data() Map {
	m, _ := r.DataErr()
	return m
}

// DataErr is Data that also returns the error of a record that fails to
// decode, an *Error wrapping ErrCorrupt.
func (r Record) DataErr() (Map, error) {
	m, err := engine.DecodeMap(r.payload)
	if err != nil {
		return nil, opErr("decode", "", r.ID.String(), -1, err)
	}
	return m, nil
}

// Decode decodes the record into v: a pointer to a struct (msgpack tags
// honoured, as when it was written) or to a Map. A Map gets the types
// described under Map; struct fields get their declared types, except that a
// field declared as any (or a map or slice of any) receives msgpack's own
// types (int8, uint16, float32, ...): declare concrete field types, or use
// Data, when the exact types matter.
func (r Record) Decode(v any) error {
	if err := engine.DecodeInto(r.payload, v); err != nil {
		return opErr("decode", "", r.ID.String(), -1, err)
	}
	return nil
}

// Raw returns the record's msgpack bytes: one map whose keys, and the keys
// of every map inside it, are in ascending byte order, whatever Go type
// wrote it (a struct, a typed map or a Map), so equal data has equal bytes.
// The record owns them: they share memory with nothing the database holds.
func (r Record) Raw() []byte { return r.payload }

// Size returns the encoded size of the data in bytes.
func (r Record) Size() int { return len(r.payload) }
