// Package codec encodes Go values into storh's canonical msgpack records and
// decodes records into Go values, with an encoder and a decoder compiled
// once per Go type and cached.
//
// It replaces github.com/vmihailenco/msgpack/v5 on storh's write and typed
// read paths: the library walks every value by reflection, writes struct
// fields in declaration order (so the write path had to sort the record
// afterwards), and decodes into any fields whatever narrow type the bytes
// carry (int8, uint16, float32, local times). Here a struct's fields are
// compiled into a table of offsets and per-field encoders, sorted by name,
// so the output is canonical in one pass; scalar fields are read and written
// in place through their address, with no reflection and no allocation per
// field.
//
// # Basics
//
// AppendRecord(dst, v, limit) appends the record v: a struct, a map with
// string keys, or a pointer to either. Decode(payload, &v) decodes a record
// into v. For a type known in advance, For(reflect.Type) returns its *Codec
// once, and Codec.AppendRecord and Codec.DecodeRecord take a pointer to the
// value, skipping the type lookup: the typed collections use them.
//
// What a value becomes:
//
//	map keys, struct fields  str keys in ascending byte order, at every depth
//	integers                 smallest encoding; non-negative values as uint
//	float32, float64         float 32 (0xca) and float 64 (0xcb): the width is kept
//	string kinds             str
//	[]byte kinds             bin; a nil slice is nil
//	[N]byte                  bin of N bytes
//	other slices and arrays  array; a nil slice is nil
//	time.Time                timestamp extension (-1), smallest form
//	uuidv7.UUID              extension mpack.ExtUUID (fixext 16)
//	objectid.ObjectID        extension mpack.ExtObjectID (ext 8, 12 bytes)
//	nil pointers, maps, slices, interfaces   nil
//	pointers, interfaces     what they point to / hold
//
// The id types come first: they also implement MarshalBinary and
// MarshalText, which would otherwise apply. Then types with their own
// encoding, in the library's order of precedence (the method on T first,
// then on *T): msgpack.CustomEncoder and msgpack.Marshaler are encoded by
// the library, value by value, and the record is put in canonical form
// afterwards (mpack.Sorter); encoding.BinaryMarshaler gives bin and
// encoding.TextMarshaler str. A field of type error is its Error() text.
//
// Struct fields are named by their msgpack tag, else their json tag, else
// their Go name; "-" skips a field, unexported fields are skipped. omitempty
// (from the tag that named the field, or for every field after a
// `_msgpack struct{} msgpack:",omitempty"` field) leaves out empty values by
// the library's rule: nil, zero numbers, false, empty strings, slices, maps
// and arrays, structs whose every field is left out, and values whose IsZero
// method says so. omitzero (json's, honoured in either tag) leaves out the
// zero value of the type, or what IsZero reports. An msgpack alias:name
// option adds a name the decoder also accepts; so does a json tag's name
// for the field's Go name, under which the library (which ignores json
// tags) stored it, unless another field has that name.
//
// Embedded structs, and pointers to structs, are inlined (their fields
// promoted, a nil pointer contributing none) unless their tag says
// noinline, they have their own encoding (a Marshaler or Unmarshaler of any
// kind, time.Time), or their json tag gives them a name; an msgpack tag's
// name does not stop the inlining (the library's rule) and its inline
// option forces it. Name conflicts between promoted fields follow
// encoding/json: the shallowest field wins; at the same depth a tagged one
// beats untagged ones, and otherwise all of them are dropped.
//
// Decoding matches struct fields by the same names, skips unknown keys
// without allocating, and turns msgpack nil into the zero value (a nil
// pointer, slice or map). Integer kinds take any msgpack integer in range
// and integral floats in range; float kinds take floats and integers; bool
// takes bool; string kinds take str or bin; []byte takes bin or str
// (copied); [N]byte takes bin of exactly N bytes. time.Time takes a
// timestamp, in UTC; uuidv7.UUID takes its extension or bin of 16 bytes
// (how the library stored it, through MarshalBinary) and objectid.ObjectID
// its extension or bin of 12, with no check of the id's version. any,
// map[string]any and []any get mpack's normalised form (int64, uint64 only
// above math.MaxInt64, float64, string, []byte, time.Time in UTC,
// uuidv7.UUID, objectid.ObjectID, []any, map[string]any), exactly what
// mpack.Decode gives. Types with their own decoding (msgpack.CustomDecoder,
// msgpack.Unmarshaler, encoding.BinaryUnmarshaler from bin, str or an id
// extension's bytes, encoding.TextUnmarshaler from str or bin) get their
// value's own bytes.
//
// A value that does not fit its Go type is an error wrapping ErrType and
// naming the type and the field path:
//
//	decode into main.Post: field "views": 300 overflows int8
//
// Malformed input is an error wrapping mpack.ErrMalformed or
// mpack.ErrTooDeep instead. Encoding errors wrap ErrUnsupported, ErrTooLarge
// or mpack.ErrTooDeep.
//
// # Caveats
//
// Maps and lists nest at most mpack.MaxDepth levels (the record is level 1),
// and a run of 31 pointers and interfaces that reaches no map or list is an
// error too: both stop cyclic values before they exhaust the stack. The
// size limit of AppendRecord is checked after every map entry, struct field
// and list element, so a huge value (or a cyclic one sharing its parts) is
// abandoned early.
//
// Differences from the msgpack library that a user can see:
//
//   - uuidv7.UUID and objectid.ObjectID are id extensions, not bin (the
//     decoder still reads the bin form);
//   - encoding.TextMarshaler values are str, not bin (both are decoded);
//   - any fields decode to the normalised form (int64, not int8; UTC times);
//   - json tags name fields that have no msgpack tag;
//   - name conflicts between promoted fields follow encoding/json: where the
//     library refuses to inline an embedded struct whose fields clash with
//     earlier ones (and encodes it as one field), the fields are inlined and
//     the shallowest wins; an embedded struct with a json tag name is not
//     inlined;
//   - decoded maps and slices replace the target's (the library adds to an
//     existing map and reuses a slice's array); structs and pointers are
//     decoded into in place, so fields the record lacks keep their values;
//   - an array decodes into [N]T when it has at most N elements, the rest
//     of the Go array being zeroed; [N]byte needs exactly N bytes;
//   - a float64 beyond the range of float32 is an error in a float32, and
//     map keys must be str (the library also reads bin keys);
//   - values in an interface whose Marshaler has a pointer receiver are
//     encoded with it (the library refuses them as not addressable);
//   - types registered with msgpack.RegisterExt are not consulted, and
//     intern is ignored; structs tagged as_array are left to the library
//     whole.
//
// A user's CustomEncoder and Marshaler may write anything a record may hold
// (no extension types but storh's), and their output is checked; what
// their own calls into the library encode follows the library's rules. A
// panic in a user's method is recovered and returned as an error.
//
// To save allocations, the strings decoded from a payload of at most 4 KiB
// are all cut from one copy of it (as mpack.Decode does): one retained
// string keeps that copy alive. Byte slices are always copied on their own.
//
// Struct tags are parsed for the forms records use: name, comma-separated
// options, and key:value options; the library's quoted values are not
// supported, and json's string option is ignored.
package codec
