// Package objectid makes, parses and converts MongoDB ObjectIDs.
//
// An ObjectID is 12 bytes, written as 24 lowercase hex characters:
//
//	6553f100   3f2a91c8d4   003039
//	seconds    random       counter
//	4 bytes    5 bytes      3 bytes
//
// The seconds are big-endian unsigned seconds since the Unix epoch. The
// random value is drawn once per process (per Generator) so that machines
// need no coordination. The counter starts at a random value in
// 0..16777215, goes up by one per id and wraps from 16777215 to 0. Because
// the seconds come first, ids sort roughly by creation time, to the second.
//
// The package exists so that storh can import MongoDB data and keep its
// _id values: ObjectID.UUIDv7 maps an ObjectID to a UUIDv7 key
// deterministically and order-preservingly, and FromUUIDv7 maps it back.
// It imports only the standard library.
//
// # Basics
//
// New and NewBatch use a process-wide Generator; both are safe for
// concurrent use and take no lock (the counter is one atomic). New does not
// allocate. NewBatch(n) accepts 1..MaxBatch and reserves n consecutive
// counter values in one atomic step, with one clock read for the whole
// batch; AppendBatch does the same into a caller's slice without
// allocating.
//
//	id := objectid.New()
//	fmt.Println(id.Hex(), id.Timestamp())
//
//	id, err := objectid.Parse("507f1f77bcf86cd799439011")
//	if errors.Is(err, objectid.ErrInvalid) { ... }
//
// NewGenerator with WithClock, WithRandom, WithProcessRandom and
// WithCounterStart makes a Generator whose ids are reproducible, for
// tests.
//
// ObjectID implements encoding.TextMarshaler and TextUnmarshaler (JSON
// writes the hex string; UnmarshalJSON also reads MongoDB Extended JSON
// {"$oid": "..."}), encoding.BinaryMarshaler and BinaryUnmarshaler (the 12
// raw bytes), and database/sql Scanner and driver.Valuer (the hex string).
//
// # Caveats
//
// Time range. The seconds field is a uint32 holding uint32(t.Unix()), the
// same conversion the MongoDB drivers use, so ids made here and by a
// driver for the same instant agree. After 2106-02-07 06:28:15 UTC
// (0xFFFFFFFF) the field wraps to 0 and counts up again; a clock set
// before 1970 wraps the other way (one second before the epoch is
// 0xFFFFFFFF). Timestamp always reads the field as unsigned, so it returns
// a time in 1970..2106 and a wrapped id decodes to the wrong century and
// sorts in the wrong place. Clamping was rejected because it would make
// ids that no driver makes and would still not sort correctly.
//
// Ordering. Ids sort by second, then by random value, then by counter.
// Ids from one Generator within one second usually follow creation order,
// but not always: goroutines race between reading the clock and taking a
// counter, and the counter may wrap. Ids from different processes within
// one second are ordered by their random values, not by time. Do not use
// ObjectID order as an exact event order.
//
// Uniqueness. Uniqueness is probabilistic: two processes collide only if
// they draw the same 40-bit random value and reach the same counter in
// the same second. One Generator repeats an id only after more than
// 16777216 ids in one second. WithProcessRandom removes the randomness
// and with it this guarantee.
//
// Precision. ObjectIDs carry seconds; UUIDv7 carries milliseconds. A
// UUIDv7 derived from an ObjectID always has a timestamp that is a whole
// second: imported records sort at the very start of their second, before
// native UUIDv7 records made later in it. Use UUIDv7Bounds for range scans
// over a second.
package objectid
