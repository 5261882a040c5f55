// Package jsonl reads and writes storh's JSON lines: the rows of
// `storh export` and `storh import`, the records printed by `storh get` and
// `storh query`, and the Extended JSON written by MongoDB's mongoexport. It
// is the library form of what the storh command does, for applications that
// export and import themselves; the value mapping itself lives in
// storh/internal/jsonv, which storh shares.
//
// # Basics
//
// A row is one JSON object on one line. Three forms are read:
//
//	{"id":"0190…","data":{…}}   the form export writes: the record keeps its id
//	{"data":{…}}                 a new id is generated
//	{…}                          a bare object is the data; a new id is generated
//
// An object is read as the first two forms only when its keys are "id",
// "data" and (ignored) "time", so the records printed by `storh query` import
// as they are. Decoder.DecodeMongo reads mongoexport output instead: an
// ObjectID _id becomes the deterministic UUIDv7 of objectid.ObjectID.UUIDv7
// and is kept as the field "_oid".
//
// JSON has one number type, no timestamps and no bytes, so the record types
// that JSON cannot express are written as MongoDB Extended JSON wrappers, and
// read back from them:
//
//	int64, uint64        an integer: 42
//	float64, float32     a number with a fraction or exponent: 42.0, 1e+21
//	NaN, ±Inf            {"$numberDouble":"NaN"}, "Infinity", "-Infinity"
//	time.Time            {"$date":"2024-05-01T12:00:00.123456789Z"}
//	[]byte               {"$binary":{"base64":"…","subType":"00"}}
//
// Reading, integers without fraction or exponent become int64, uint64 above
// math.MaxInt64, and float64 beyond; every other number is a float64. A
// one-key object whose key is a known wrapper ($date, $numberLong, $oid, …)
// is that value, and it is an error when the value inside does not fit the
// wrapper; objects with other "$" keys stay objects.
//
// Writing from the stored msgpack (AppendPayload, AppendRow, AppendRecord)
// transcodes byte by byte without building maps, which is what makes export
// fast. Keys come out in the stored (sorted) order, so export, import and
// export again gives byte-identical files.
//
// # Caveats
//
//   - A stored map that has exactly one key named like a wrapper, with a value
//     of the wrapper's shape, is read back as the wrapped type: JSON has no
//     way to tell the two apart (MongoDB has the same limit).
//   - Reading refuses what encoding/json would silently change: an object
//     that holds a key twice (at any depth, wrappers included), bytes that
//     are not UTF-8, and a \u escape of half a surrogate pair. With
//     Decoder.KeepInvalidUTF8 a string value that is not UTF-8 becomes a
//     []byte of its bytes instead, written back as {"$binary":…}.
//   - Writing, a stored string that is not valid UTF-8 (only a Go program can
//     store one) gets U+FFFD in place of the bad bytes, as encoding/json
//     does; it does not round-trip.
//   - Timestamps outside the years 0–9999 are written as
//     {"$date":{"$numberLong":"<ms>"}}, which keeps only milliseconds.
package jsonl
