// Package uuidv7 makes, parses and validates RFC 9562 version 7 UUIDs, the
// record ids of storh.
//
// A UUIDv7 is 16 bytes: a 48-bit big-endian Unix timestamp in milliseconds,
// the version nibble 7, 12 bits rand_a, the variant bits 10 and 62 bits
// rand_b. Because the timestamp comes first, sorting ids bytewise sorts them
// by creation time, which is why storh uses the raw 16 bytes as B+tree keys:
// new records append at the right edge of the tree, and a time window is a
// key range.
//
// # Basics
//
// [New] returns an id from a process-wide generator. Ids from one generator
// strictly increase, even when many goroutines call New at once, within one
// millisecond, or while the system clock steps backwards; [NewBatch] reserves
// many consecutive ids at once. [NewAt] encodes a given timestamp exactly,
// for imports and fixtures. A [Generator] with its own state, clock and
// randomness comes from [NewGenerator]; [NewDeterministic] gives one whose ids
// are the same on every run, for tests.
//
// [Parse], [Validate], [IsValid] and [TimestampMs] accept only the canonical
// 36-character text form (any case) of a version 7, RFC-variant UUID. Their
// errors wrap [ErrInvalid] and are [*ParseError] values naming the offending
// offset. [MinForTimestampMs] and [MaxForTimestampMs] give the smallest and
// largest possible id of a millisecond, the bounds of a time-window scan.
//
// [UUID] implements encoding.TextMarshaler and TextAppender (JSON uses the
// canonical string), encoding.BinaryMarshaler (the 16 raw bytes),
// database/sql.Scanner and driver.Valuer.
//
// # Costs
//
// New, NewBatch, NewAt, Parse on success, IsValid, Validate on success and
// AppendText into a buffer with room do not allocate. The generator reads
// crypto/rand 4 KiB at a time and only when a millisecond starts, so most
// ids cost a clock read, a lock and a few arithmetic operations. A failed
// Parse allocates once (the *ParseError; ParseBytes twice), and the message
// is only built if Error is called, so rejecting bad input in bulk stays
// cheap. String allocates its result.
//
// # Caveats
//
// Monotonicity is per generator, so per process for [New]: two processes, or
// two Generators, can interleave ids within a millisecond, and nothing here
// coordinates machines. Uniqueness across them rests on the 73 to 74 random
// bits per millisecond.
//
// When the clock goes backwards the generator keeps its last millisecond and
// counts up from there; ids then carry a timestamp slightly ahead of the
// clock until it catches up. The same happens if the 74 bits of one
// millisecond overflow (they start below 2^73, so that takes 2^73 ids).
//
// Ids within one millisecond differ by one, so they are guessable from one
// another. Do not use them as secrets or capabilities.
//
// [Nil] (all zeros) is not a valid UUIDv7. It marshals to text but does not
// parse back; use it, with `json:",omitzero"`, to mean "no id".
package uuidv7
