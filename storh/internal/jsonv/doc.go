// Package jsonv is the value mapping of storh's JSON lines: records as JSON
// objects with MongoDB Extended JSON wrappers for the types JSON lacks, and
// JSON back to the values storh stores. It is shared by storh (the
// json.Marshaler of Record), storh/query (the values of conditions in
// their text and JSON forms) and storh/jsonl (export, import and the
// functions applications call), which documents the mapping and re-exports
// what users need; nothing else imports it. The tests are in storh/jsonl.
package jsonv
