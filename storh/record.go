package storh

import (
	"time"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/jsonv"
	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Map is the generic form of a record's data.
//
// Decoded values have one Go type per kind, whatever was stored: integers are
// int64 (uint64 only above math.MaxInt64), floats float64, lists []any,
// nested maps map[string]any, timestamps time.Time in UTC, binary []byte,
// UUIDs uuidv7.UUID and ObjectIDs objectid.ObjectID.
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
	// slab, when set, is shared by the records of one page: Data boxes
	// their numbers and strings in it (see mpack.Slab).
	slab *mpack.Slab
}

// Time returns the creation time carried by the id.
func (r Record) Time() time.Time { return r.ID.Time() }

// Data decodes the record into a Map (see Map for the types). It decodes on
// every call, so keep the result. The records of one chunk of a Stream box
// their decoded numbers and strings in shared blocks, so a kept Map holds
// on to at most a few KiB of its neighbours' values. It returns nil only for a record that fails
// to decode (a payload whose checksum is valid but that is not a record: a
// bug or a forgery, which Verify reports); DataErr says why.
func (r Record) Data() Map {
	m, _ := r.DataErr()
	return m
}

// DataErr is Data that also returns the error of a record that fails to
// decode, an *Error wrapping ErrCorrupt.
func (r Record) DataErr() (Map, error) {
	m, err := engine.DecodeMapIn(r.payload, r.slab)
	if err != nil {
		return nil, opErr("decode", "", r.ID.String(), -1, err)
	}
	return m, nil
}

// Decode decodes the record into v: a pointer to a struct (fields named as
// when it was written: msgpack tag, else json tag, else the Go name), to a
// map with string keys, or to a Map. Fields get their declared types, and
// a field declared as any (or a map or slice of any) gets the types of
// Data: int64, float64, time.Time in UTC, uuidv7.UUID, ... (docs/types.md
// has the table). A stored value that does not fit its field (text into an
// int, 300 into an int8) is ErrTypeMismatch, naming the field.
func (r Record) Decode(v any) error {
	if err := decodeInto(r.payload, v); err != nil {
		return opErr("decode", "", r.ID.String(), -1, err)
	}
	return nil
}

// decodeInto decodes a payload into v. A payload that is not a record at
// all is ErrCorrupt; one that does not fit v is ErrTypeMismatch.
func decodeInto(payload []byte, v any) error { return engine.DecodeInto(payload, v) }

// Raw returns the record's msgpack bytes: one map whose keys, and the keys
// of every map inside it, are in ascending byte order, whatever Go type
// wrote it (a struct, a typed map or a Map), so equal data has equal bytes.
// The record owns them: they share memory with nothing the database holds.
func (r Record) Raw() []byte { return r.payload }

// Size returns the encoded size of the data in bytes.
func (r Record) Size() int { return len(r.payload) }

// MarshalJSON writes the record as one JSON object,
// {"id":"…","time":"…","data":{…}}: the line storh/jsonl's Export writes
// for it (without the newline), and what `storh get` prints. The time is the
// id's, RFC 3339 in UTC with milliseconds; the data is written straight from
// the stored bytes, keys in stored (sorted) order, with MongoDB Extended
// JSON wrappers for the values JSON has no type for ({"$date":…},
// {"$binary":…}, {"$numberDouble":"NaN"}), and floats always with a fraction
// or an exponent, so that UnmarshalJSON, and a JSONL import, give back the
// same record. storh/jsonl documents the mapping.
//
// json.Marshal escapes <, > and & in the output of every MarshalJSON; a
// json.Encoder with SetEscapeHTML(false) keeps them as they are.
func (r Record) MarshalJSON() ([]byte, error) { return marshalRecordJSON(r.ID, r.payload) }

// UnmarshalJSON reads what MarshalJSON writes: an object of the keys "id",
// "data" and, not read (the id carries it), "time". The data is encoded as
// a write would store it, so the record has the same id and data as the one
// marshalled, and the same bytes (Raw) but where it held float32 values,
// which JSON carries as float64. JSON null leaves the record as it is.
func (r *Record) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	id, payload, err := unmarshalRecordJSON(b)
	if err != nil {
		return err
	}
	r.ID, r.payload = id, payload
	return nil
}

// marshalRecordJSON is the JSON of a record given as its id and payload
// (msgpack, as Raw returns it): MarshalJSON's, for every type whose JSON is
// a record's.
func marshalRecordJSON(id uuidv7.UUID, payload []byte) ([]byte, error) {
	b, err := jsonv.AppendObject(make([]byte, 0, 64+2*len(payload)), id, payload, true)
	if err != nil {
		return nil, opErr("marshal json", "", id.String(), -1, err)
	}
	return b, nil
}

// unmarshalRecordJSON reads the JSON of a record (see UnmarshalJSON) into
// its id and payload, encoded as a write stores it.
func unmarshalRecordJSON(b []byte) (uuidv7.UUID, []byte, error) {
	row, err := new(jsonv.Decoder).DecodeRecord(b)
	if err != nil {
		return uuidv7.UUID{}, nil, opErr("unmarshal json", "", "", -1, err)
	}
	value, err := engine.AppendValue(nil, row.Data)
	if err != nil {
		return uuidv7.UUID{}, nil, opErr("unmarshal json", "", row.ID.String(), -1, err)
	}
	return row.ID, value[engine.HeaderSize:], nil
}
