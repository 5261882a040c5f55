// Package order defines the total order of stored values, which secondary
// indexes and OrderBy sort by, and an order-preserving key encoding:
// bytes.Compare(key(a), key(b)) has the sign of Compare(a, b) for all
// values. Keys are prefix-free (no key is a proper prefix of another), so
// the order also holds for composite keys, the concatenation of several
// values' keys as a compound index stores them, and for keys followed by
// any bytes (an index entry's record id).
//
// It imports only the standard library and package mpack.
//
// # Basics
//
// The order puts classes first, then values within a class:
//
//	missing = null < false < true < numbers < strings < bytes < times < lists < maps
//
// and within the classes:
//
//   - Numbers (integers of any width and signedness, float32 and float64)
//     compare by exact numeric value: int64 2^53+1 is above float64 2^53,
//     the largest uint64 above every int64. At equal value an integer sorts
//     before a float (1 < 1.0); integers of equal value are equal whatever
//     their width or signedness; -0.0 equals +0.0. NaN sorts before every
//     other number, -Inf included, and all NaNs are equal.
//   - Strings and bytes compare bytewise, like Go strings.
//   - Times compare chronologically to the nanosecond over the whole range
//     of time.Time, zone ignored.
//   - Lists compare element by element, a proper prefix first:
//     [] < [1] < [1, 2] < [2].
//   - Maps compare their entries in ascending key order, as (key, value)
//     pairs: key bytewise, then value; a proper prefix first:
//     {} < {"a": 1} < {"a": 1, "b": 0} < {"a": 2} < {"b": 0}.
//
// Compare is the reference definition. Append gives the key of a Go value,
// AppendRaw the key of a stored msgpack value straight from its bytes
// (without allocating, for scalars and sorted maps); for the same value they
// give the same bytes.
//
// # Layout
//
// Every key starts with its class's tag byte, so the keys of one class
// are contiguous and Class is the first byte:
//
//	null    01                   (also a missing field)
//	false   02
//	true    03
//	number  04 F[8] r[2] kind[1] (12 bytes, NumberLen)
//	string  05 esc(s) 00 01
//	bytes   06 esc(b) 00 01
//	time    07 S[8] N[4]
//	list    08 key(e1) key(e2) ... 00
//	map     09 01 esc(k1) 00 01 key(v1) 01 esc(k2) 00 01 key(v2) ... 00
//
// Numbers: F is the largest float64 not above the value (the value itself
// for a float, and for an integer of magnitude up to 2^53), encoded so that
// bytes order as numbers: the sign bit set on a non-negative float, all
// bits flipped on a negative one; -0 is written as +0 and every NaN as 8
// zero bytes, which no other number uses. r is the value minus F, an
// integer below 2048, big-endian: non-zero only for integers that float64
// cannot hold. kind is 00 for an integer, 01 for a float. Comparing (F, r,
// kind) is comparing by value with integers first at equal values; number.go
// proves it.
//
// Strings and bytes: esc writes every 00 byte of the content as 00 FF; the
// terminator 00 01 sorts below both 00 FF and any non-zero byte, so a
// string sorts before its extensions, and it cannot occur inside escaped
// content, which makes the key prefix-free.
//
// Times: S is the number of seconds since 0001-01-01 00:00:00 UTC (the
// zero time.Time) as an int64 with its sign bit flipped, big-endian; N the
// nanoseconds within the second, big-endian. That is time.Time's own
// reckoning, whose full range fits S exactly (Unix seconds would overflow
// an int64 at its far past end): 1970-01-01 is S = 0x8000000E7791F700.
//
// Lists and maps: elements and entries begin with a byte of at least 01 (a
// tag, or the entry marker 01), so the closing 00 sorts a proper prefix
// first. Map entries are written in ascending key order whatever the order
// of the input; a key is escaped and terminated like a string's content.
//
// For example, the key of int64(1) is 04 BFF0000000000000 0000 00, of 1.0
// 04 BFF0000000000000 0000 01, of "a\x00b" 05 61 00FF 62 0001, of
// {"b": true, "a": nil} 09 01 610001 01 01 620001 03 00.
//
// # Bounds
//
// A query over keys reads a half-open range [lo, hi). The functions below
// produce bounds that are right both for whole value keys (as a filter
// compares a field's key) and for index keys, in which a value's key is
// followed by more bytes (other components, then a 16-byte id): each bound
// sorts before, or after, every key it must, whatever bytes follow that
// key. For a value v of class c (Class(v)):
//
//	every value of v's class   [ClassStart(c), ClassStart(c+1))
//	  booleans as one class    [ClassStart(TagFalse), ClassStart(TagTrue+1))
//	  numbers, NaN excluded    [AfterNaN(), ClassStart(TagNumber+1))
//	Eq(v) by value             [Bound(v, false), Bound(v, true))
//	Eq(v), integer ≠ float     [Append(v), PrefixEnd(Append(v)))
//	Gt(v)                      [Bound(v, true), class end)
//	Gte(v)                     [Bound(v, false), class end)
//	Lt(v)                      [class start, Bound(v, false))
//	Lte(v)                     [class start, Bound(v, true))
//	Between(a, b), inclusive   [Bound(a, false), Bound(b, true)); empty if lo >= hi
//	Prefix(s) of strings       [StringPrefix(s), PrefixEnd(StringPrefix(s)))
//
// where the class start and end are the bounds of the class lines above
// (for numbers, with or without NaN as the query wants; for booleans, one
// class or two). Bound of a number is NumberBound, which ignores the
// integer/float kind: Gte(5) includes 5.0 and Gt(5.0) excludes 5. Bound(v, false) of any other value is v's key,
// Bound(v, true) its PrefixEnd. Ranges over the whole order, across
// classes, use the same bounds without the class start and end. A
// descending read walks the same range backwards.
//
// NaN is an ordinary value of the order, below every other number: the
// bounds of NaN enclose exactly the NaN keys, so Eq(NaN) finds NaNs and
// Gt(NaN) every other number. A query language in which comparisons with
// NaN are false must turn such conditions into "match nothing" itself.
//
// In a compound index, fix the leading components by their keys and bound
// the next: for a1 = "x" and a2 >= 5, the range is [key("x") + Bound(5,
// false), key("x") + ClassStart(TagNumber+1)). (A leading number fixed by
// value needs two such ranges: see Caveats.)
//
// # Caveats
//
// Index keys are stored: the order and the layout are part of the file
// format. Any change to either means every index must be rebuilt.
//
// k + 0x00 is the least byte string above a key k, so it works as the end
// of k's range where whole value keys are compared, but an index key k +
// id lies above it: index scans must use PrefixEnd(k), which Bound does.
//
// An integer and a float of equal value are equal by value but have two
// keys. A lookup by value covers both with Bound; in a compound index, a
// leading number component fixed by value is two key prefixes (the
// integer's and the float's), each to be scanned.
//
// A key keeps the order, not the value's encoding: float32 and float64,
// integer widths, -0.0 and +0.0, NaN payloads, time zones and the order in
// which a map was written all give the same key. Keys are not meant to be
// decoded.
//
// Keys are longer than msgpack: 12 bytes per number, 3 per string plus
// one per zero byte, 3 plus the escaped key per map entry. A long string, a
// list or a map can exceed bbolt's limit on key length (32 KiB); indexing
// such values is the caller's to cap or refuse.
//
// Strings compare by bytes (which, for valid UTF-8, is code point order),
// with no collation, case folding or Unicode normalisation; invalid UTF-8 is
// ordered like any other bytes.
//
// A msgpack timestamp whose seconds exceed what time.Time can hold (beyond
// year 292 billion) wraps around exactly as the time.Time that mpack.Decode
// returns for it does, and sorts where Go sorts that time: in the far past.
//
// The order is storh's own, not MongoDB's BSON order (which, among other
// differences, puts maps before lists, and booleans after numbers, strings,
// maps, lists and binary data).
//
// Compare allocates and is slow: it is the oracle of the tests and the
// definition for readers, not something to sort with. It panics on values
// that have no normalised form; Append returns an error for those.
package order
