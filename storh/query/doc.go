// Package query is the pure query model of storh: what to read, not how.
//
// # Basics
//
// A Query is an immutable value built from All and refined by modifiers; each
// modifier returns a copy, so a base query can be shared and extended freely:
//
//	page := query.All().After(lastSeen).Limit(100)
//	window := query.All().TimeRangeMs(from, until).Reverse()
//
// Records are keyed by UUIDv7, whose leading 48 bits are the creation time in
// milliseconds, so After, Before and TimeRangeMs all reduce to one inclusive
// key range. The storage engine seeks to one end of that range and stops
// past the other: the cost of a read is proportional to the records it
// visits, never to the size of the collection.
//
// WhereEqual conditions are evaluated on the raw msgpack bytes of each stored
// record, so records that are filtered out are never decoded.
//
// # Conditions as text and JSON
//
// A condition also has two written forms, for people and for the wire.
// Parse reads the text syntax of the CLI's --where, and Cond.String writes
// it; Cond's MarshalJSON and UnmarshalJSON write and read the JSON form of
// the HTTP API (docs/web.md). Each reads back as an equal condition:
//
//	c, err := query.Parse(`level=error and (status>=500 or path^=/api)`)
//	b, err := json.Marshal(c) // {"and":[{"field":"level","op":"eq",…},{"or":[…]}]}
//
// Values in both forms use the value mapping of JSON lines, which keeps
// types: 5 is an integer, 5.0 a float, {"$date":"…"} a time. A Query has
// a JSON form too, so that a whole query travels as one value (see
// Query.MarshalJSON). Errors of both forms are *ParseError, which names the
// column of the text, or the JSON node, at fault.
//
// Every condition, built in Go or read from text or JSON, has the same
// limits: MaxCondDepth levels of nesting and MaxCondNodes conditions, and
// the text or JSON at most MaxCondBytes.
//
// # Caveats
//
// A query is validated when it runs, not when it is built: Limit(0) or an
// unsupported WhereEqual value make the query fail with an error that
// satisfies errors.Is(err, ErrInvalidQuery) (re-exported as
// storh.ErrInvalidQuery). This package performs no I/O.
package query
