// Package mpack reads msgpack record payloads directly from their bytes.
//
// storh stores every record as a msgpack map with sorted keys (written by
// storh/internal/codec). Decoding such a payload into map[string]any is the
// dominant cost of a read, and most of that work is wasted when a query only
// needs one field or a write only needs to know that the bytes are sound. This package offers
// the cheap operations on the raw bytes and a leaner full decoder:
//
//   - ValidateRecord checks a payload against the record rules without
//     allocating;
//   - Field finds one top-level field's raw bytes without allocating, and
//     EqualRaw compares them against a query value, also without allocating
//     for scalars;
//   - Decode and DecodeMap produce the normalised Go form that the storh API
//     returns, and Normalize brings a user's Go value into that same form;
//   - ReadHead parses one value's header, for readers elsewhere that walk
//     raw values without decoding them (the index key encoder).
//
// It imports only the standard library and storh's two id packages, whose
// types it decodes.
//
// # Basics
//
// A payload is valid when it is one map whose keys, at every level, are
// unique strings; whose maps and arrays nest at most MaxDepth levels; and
// whose values are nil, bool, integers, floats, str, bin, arrays, maps,
// timestamps (extension type -1), UUIDs (ExtUUID, 16 bytes) or ObjectIDs
// (ExtObjectID, 12 bytes). ValidateRecord, DecodeMap and EqualRaw
// enforce the same rules, so a payload accepted by one is accepted by all.
//
// Values are normalised to one Go type per kind: every integer becomes
// int64 (uint64 only above math.MaxInt64), floats become float64, str becomes
// string, bin becomes []byte, timestamps become time.Time in UTC, and the id
// extensions become uuidv7.UUID and objectid.ObjectID. Comparison
// is strictly typed: 1, 1.0 and "1" are three different values, while
// integers of different msgpack widths and signedness compare by value.
//
// A typical filtered read:
//
//	raw, ok, err := mpack.Field(payload, "status")
//	if err == nil && ok {
//		match, err = mpack.EqualRaw(raw, want) // want from mpack.Normalize
//	}
//	if match {
//		rec, err := mpack.DecodeMap(payload)
//		...
//	}
//
// # Caveats
//
// Field stops at the first matching key and does not validate the rest of the
// payload; use it on payloads that passed ValidateRecord.
//
// Duplicate map keys are rejected. A map whose keys are in ascending byte
// order (as the encoder writes them with SetSortMapKeys) needs no extra work
// to prove that; any other map is rescanned, pairwise for up to 32 keys and
// with a temporary set (which allocates) above that.
//
// Decode copies nothing it returns from its input, but to save allocations
// the keys and strings of a container of at most 4 KiB are all cut from one
// copy of it: one retained string keeps that whole copy alive.
//
// Strings are not checked for valid UTF-8, exactly like the msgpack library.
//
// Timestamps must be in one of the three forms of the msgpack specification
// with nanoseconds below 10^9; the library would silently carry larger
// nanoseconds into seconds, here they are malformed.
//
// Skip is purely structural: it accepts any extension type and any map key
// type, only the record-level functions apply the record rules.
package mpack
