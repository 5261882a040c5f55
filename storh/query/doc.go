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
// # Caveats
//
// A query is validated when it runs, not when it is built: Limit(0) or an
// unsupported WhereEqual value make the query fail with an error that
// satisfies errors.Is(err, ErrInvalidQuery) (re-exported as
// storh.ErrInvalidQuery). This package performs no I/O.
package query
