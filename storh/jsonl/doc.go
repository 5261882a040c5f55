// Package jsonl writes storh collections as JSON lines and reads them back:
// the format of `storh export` and `storh import`, for applications that
// export and import themselves. It also reads the Extended JSON that
// MongoDB's mongoexport writes.
//
// # Basics
//
// Export writes the records a query selects, one line each; Import reads
// lines into a collection. Both stream (memory stays flat whatever the
// size), take a context that stops them, and work on any storh.Collection
// (*storh.Docs or *storh.Log):
//
//	rep, err := jsonl.Export(ctx, w, posts, query.All())
//	rep, err := jsonl.Import(ctx, r, posts, jsonl.SkipInvalid())
//
// A line is one JSON object. Export writes the record's JSON, which is also
// what json.Marshal writes for a storh.Record, or with WithoutTime the
// compact form `storh export` writes:
//
//	{"id":"0190…","time":"2024-07-01T12:00:00.123Z","data":{…}}
//	{"id":"0190…","data":{…}}
//
// Import reads three forms:
//
//	{"id":"0190…","data":{…}}   the record keeps its id ("time" may be there, and is ignored)
//	{"data":{…}}                 a new id is generated
//	{…}                          a bare object is the data; a new id is generated
//
// An object is read as one of the first two forms only when its keys are
// among "id", "data" and "time", and "data" is an object. With Mongo the
// lines are mongoexport output: an ObjectID _id becomes the deterministic
// UUIDv7 of objectid.ObjectID.UUIDv7 and is kept, typed, as the field
// "_oid". Ids stay typed wherever they appear: {"$uuid":…} and a $binary of
// subtype 04 become a uuidv7.UUID, {"$oid":…} an objectid.ObjectID.
//
// Exporting, importing into an empty collection and exporting again gives
// the same bytes. JSON has one number type, no timestamps and no bytes, so
// the types JSON cannot express are written as MongoDB Extended JSON
// wrappers, and read back from them:
//
//	int64, uint64        an integer: 42
//	float64, float32     a number with a fraction or exponent: 42.0, 1e+21
//	NaN, ±Inf            {"$numberDouble":"NaN"}, "Infinity", "-Infinity"
//	time.Time            {"$date":"2024-05-01T12:00:00.123456789Z"}
//	[]byte               {"$binary":{"base64":"…","subType":"00"}}
//	uuidv7.UUID          {"$uuid":"0190a4f4-5c3b-7def-8123-456789abcdef"}
//	objectid.ObjectID    {"$oid":"5f1a2b3c4d5e6f7a8b9c0d1e"}
//
// Reading, integers without fraction or exponent become int64, uint64 above
// math.MaxInt64, and float64 beyond; every other number is a float64. A
// one-key object whose key is a known wrapper ($date, $numberLong, $oid, …)
// is that value, and it is an error when the value inside does not fit the
// wrapper; objects with other "$" keys stay objects.
//
// Writing from the stored msgpack (AppendRecord, AppendRow, AppendPayload)
// transcodes byte by byte without building maps, which is what makes
// Export fast; AppendValue writes the values of storh.Record.Data. Keys
// come out in the stored (sorted) order. Decoder decodes lines and values
// for programs that read JSON lines their own way.
//
// Import checks every line before a transaction's worth of them
// (storh.StreamBatch) is written: a bad line stops it with a *LineError
// before any row of its batch is written, and ImportReport says exactly what
// is committed. Its options give the choices of `storh import`: SkipInvalid
// (and OnSkip to hear about each skipped line), OnDuplicate for an id given
// twice, InvalidUTF8AsBinary, Mongo, WithLineFunc to change or explain
// lines, and WithProgress, which Export takes too.
//
// docs/bulk-data.md has the full type mapping, the Extended JSON wrappers
// Import reads, and how to migrate from MongoDB.
//
// # Caveats
//
//   - A stored map that has exactly one key named like a wrapper, with a value
//     of the wrapper's shape, is read back as the wrapped type: JSON has no
//     way to tell the two apart (MongoDB has the same limit).
//   - Reading refuses what encoding/json would silently change: an object
//     that holds a key twice (at any depth, wrappers included), bytes that
//     are not UTF-8, and a \u escape of half a surrogate pair. With
//     InvalidUTF8AsBinary (Decoder.KeepInvalidUTF8) a string value that is
//     not UTF-8 becomes a []byte of its bytes instead, written back as
//     {"$binary":…}.
//   - Writing, a stored string that is not valid UTF-8 (only a Go program can
//     store one) gets U+FFFD in place of the bad bytes, as encoding/json
//     does; it does not round-trip.
//   - Timestamps outside the years 0–9999 are written as
//     {"$date":{"$numberLong":"<ms>"}}, which keeps only milliseconds.
//   - json.Marshal of a storh.Record is its line without the newline, but
//     for <, > and &, which json.Marshal escapes (\u003c) in the output of
//     every MarshalJSON; a json.Encoder with SetEscapeHTML(false) keeps
//     them. Both read back the same.
//   - Import counts Inserted and Replaced from the collection's record count
//     before and after: other writers to the same collection during the
//     import make them inexact (Imported, the sum, stays exact).
//   - Import remembers the ids it has seen (about 20 bytes each when they
//     come in ascending order, as an export lists them), to find an id given
//     twice.
package jsonl
