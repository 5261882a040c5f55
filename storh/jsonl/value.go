package jsonl

import (
	"github.com/storhdb/storh-go/storh/internal/jsonv"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TimeLayout is how record times are written: RFC 3339 in UTC with
// milliseconds, the precision of a UUIDv7.
const TimeLayout = jsonv.TimeLayout

// MaxNesting bounds how deeply arrays and objects nest in one line. It is
// far above what storh stores (storh.MaxDepth), so the library still
// reports too-deep records in its own words; this limit only keeps a
// hostile line from exhausting the stack.
const MaxNesting = jsonv.MaxNesting

var (
	// ErrSyntax is wrapped by the errors for input that is not valid JSON,
	// or nests deeper than MaxNesting.
	ErrSyntax = jsonv.ErrSyntax
	// ErrRow is wrapped by the errors for valid JSON that is not a valid
	// line: not an object, a bad id, a wrapper ($date, $oid, …) whose
	// value does not fit it, or a number beyond float64.
	ErrRow = jsonv.ErrRow
	// ErrPayload is wrapped by the errors of AppendPayload, AppendRow and
	// AppendRecord for bytes that are not a well-formed record payload
	// (storh never hands one out unless the file is damaged), and of
	// AppendValue for a Go type that storh does not store.
	ErrPayload = jsonv.ErrPayload
)

// Error describes why a line (or a value) was not decoded. Its fields:
//
//	Err    error  // ErrSyntax or ErrRow
//	Column int    // 1-based byte column of the problem; 0 when not about one place
//	Field  string // path of the field concerned (a.b[2].c); "" when none
//	Reason string
//
// Every error of the decoding functions is an *Error; get it with
// errors.As.
type Error = jsonv.Error

// InvalidUTF8 reports whether err is about a string value whose bytes are
// not UTF-8, which Decoder.KeepInvalidUTF8 (or Import's InvalidUTF8AsBinary)
// would have kept as bytes.
func InvalidUTF8(err error) bool { return jsonv.InvalidUTF8(err) }

// Row is one decoded line.
type Row struct {
	// ID is the record id the line names; zero means "generate one".
	ID uuidv7.UUID
	// Data is the record.
	Data map[string]any
	// ForeignID reports, for DecodeMongo, a document whose _id is not an
	// ObjectID: it stays in Data as "_id" and the record gets a new id, so
	// importing it again makes a second record.
	ForeignID bool
}

func row(r jsonv.Row) Row { return Row{ID: r.ID, Data: r.Data, ForeignID: r.ForeignID} }

// Decoder decodes lines and values. It remembers the keys (and short
// string values) it has seen, so rows that share a schema share their
// strings: fewer allocations than a fresh Decoder per line. A Decoder is not
// safe for concurrent use; the zero value is ready.
//
// Input that JSON allows but that would lose data is refused: an object
// that holds a key twice (encoding/json keeps the last value), and strings
// that are not valid UTF-8 or hold a \u escape of half a surrogate pair
// (encoding/json turns them into U+FFFD). The *Error names the key or the
// column.
type Decoder struct {
	// KeepInvalidUTF8 decodes a string value whose bytes are not valid
	// UTF-8 to a []byte holding those bytes (written back as
	// {"$binary":…}), instead of failing. Keys must be valid UTF-8 either way.
	KeepInvalidUTF8 bool

	d jsonv.Decoder
}

func (d *Decoder) dec() *jsonv.Decoder {
	d.d.KeepInvalidUTF8 = d.KeepInvalidUTF8
	return &d.d
}

// DecodeRow decodes one line of storh JSON lines, in any of the three
// forms of the package doc: {"id":…,"data":{…}} (with "time" or not),
// {"data":{…}}, or a bare object.
func (d *Decoder) DecodeRow(line []byte) (Row, error) {
	r, err := d.dec().DecodeRow(line)
	return row(r), err
}

// DecodeMongo decodes one line of mongoexport output (relaxed or canonical
// Extended JSON v2, and the legacy v1 forms of $binary, $date and $regex).
// An ObjectID _id becomes the record id, objectid.ObjectID.UUIDv7 of it,
// and is kept as the field "_oid" (a document that already has an "_oid"
// is refused); any other _id stays in the data, and ForeignID is set.
func (d *Decoder) DecodeMongo(line []byte) (Row, error) {
	r, err := d.dec().DecodeMongo(line)
	return row(r), err
}

// DecodeObject decodes one JSON object with the value mapping, without
// looking for the id/data envelope of a line.
func (d *Decoder) DecodeObject(b []byte) (map[string]any, error) {
	return d.dec().DecodeObject(b)
}

// DecodeValue decodes one JSON value of any kind with the value mapping.
func (d *Decoder) DecodeValue(b []byte) (any, error) {
	return d.dec().DecodeValue(b)
}

// DecodeValuePrefix decodes the JSON value at the start of b (after any
// whitespace) and returns it with the number of bytes it took. What follows
// the value is left to the caller: it is for a value inside a larger
// syntax, such as a query expression. Error columns count from the start
// of b.
func (d *Decoder) DecodeValuePrefix(b []byte) (v any, n int, err error) {
	return d.dec().DecodeValuePrefix(b)
}

// DecodeRow decodes one line with a fresh Decoder.
func DecodeRow(line []byte) (Row, error) { return new(Decoder).DecodeRow(line) }

// DecodeMongo decodes one mongoexport line with a fresh Decoder.
func DecodeMongo(line []byte) (Row, error) { return new(Decoder).DecodeMongo(line) }

// DecodeValue decodes one JSON value with a fresh Decoder.
func DecodeValue(b []byte) (any, error) { return new(Decoder).DecodeValue(b) }

// AppendRecord appends the line of a record, {"id":"…","time":"…","data":{…}}
// and a newline: the JSON of storh.Record (json.Marshal gives the same
// object), what Export writes by default and what `storh get`, `query` and
// `tail` print. The time is the id's, in TimeLayout. payload is the record's
// msgpack, storh.Record.Raw; it is transcoded straight to JSON, without
// decoding it into maps. On error dst comes back unchanged.
func AppendRecord(dst []byte, id uuidv7.UUID, payload []byte) ([]byte, error) {
	return jsonv.AppendRecord(dst, id, payload)
}

// AppendRow appends the compact line of a record, {"id":"…","data":{…}}
// and a newline: what `storh export` writes, and Export with WithoutTime.
// On error dst comes back unchanged.
func AppendRow(dst []byte, id uuidv7.UUID, payload []byte) ([]byte, error) {
	return jsonv.AppendRow(dst, id, payload)
}

// AppendPayload appends a record's data, payload being its msgpack
// (storh.Record.Raw), as one JSON object: keys in their stored (sorted)
// order, values with the mapping of the package doc. It transcodes byte by
// byte and allocates nothing.
func AppendPayload(dst, payload []byte) ([]byte, error) {
	return jsonv.AppendPayload(dst, payload)
}

// AppendValue appends a Go value of the kinds a record holds (as
// storh.Record.Data returns them: nil, bool, string, the integer and float
// types, []byte, time.Time, []any, map[string]any) as JSON, with the same
// mapping as AppendPayload; map keys are written sorted, as stored. Other
// types are an error wrapping ErrPayload.
func AppendValue(dst []byte, v any) ([]byte, error) {
	return jsonv.AppendValue(dst, v)
}
