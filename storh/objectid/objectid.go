package objectid

import (
	"cmp"
	"database/sql/driver"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ObjectID is a 12-byte MongoDB ObjectID: 4 bytes of big-endian unsigned
// seconds since the Unix epoch, a 5-byte per-process random value and a
// 3-byte big-endian counter. It is a value type: compare with == or Compare,
// use it as a map key, copy it freely.
type ObjectID [12]byte

// Nil is the all-zero ObjectID. Generators never produce it in practice; it
// marks "no id" (see IsZero).
var Nil ObjectID

var (
	// ErrInvalid is returned (wrapped, with the offending input and what is
	// wrong with it) by Parse, FromBytes, FromUUIDv7, UnmarshalText,
	// UnmarshalJSON, UnmarshalBinary and Scan when the input is not an
	// ObjectID in the expected form.
	ErrInvalid = errors.New("objectid: invalid ObjectID")

	// ErrBatchSize is returned (wrapped, with the size asked for) by NewBatch
	// and AppendBatch when n is outside 1..MaxBatch.
	ErrBatchSize = errors.New("objectid: batch size out of range")

	// ErrRange is returned (wrapped, with the value) by FromParts when random
	// does not fit in 40 bits or counter does not fit in 24 bits. The options
	// WithProcessRandom and WithCounterStart panic with an error wrapping it.
	ErrRange = errors.New("objectid: part out of range")
)

const (
	// MaxBatch is the largest n accepted by NewBatch and AppendBatch, the
	// 1..100 of the generator this package's format description comes from.
	// For more ids, call AppendBatch repeatedly into one slice.
	MaxBatch = 100

	// MaxRandom is the largest process random value (40 bits).
	MaxRandom = 1<<40 - 1

	// MaxCounter is the largest counter value (24 bits); the counter wraps
	// from MaxCounter to 0.
	MaxCounter = 1<<24 - 1

	hexLen = 24
)

// FromParts assembles an ObjectID from its three fields. It returns an error
// wrapping ErrRange if random > MaxRandom or counter > MaxCounter; silently
// truncating either would make a different id than the caller described.
func FromParts(seconds uint32, random uint64, counter uint32) (ObjectID, error) {
	if random > MaxRandom {
		return Nil, fmt.Errorf("%w: random value %#x does not fit in 40 bits", ErrRange, random)
	}
	if counter > MaxCounter {
		return Nil, fmt.Errorf("%w: counter %#x does not fit in 24 bits", ErrRange, counter)
	}
	return build(seconds, random, counter), nil
}

// build packs already range-checked parts.
func build(seconds uint32, random uint64, counter uint32) ObjectID {
	var id ObjectID
	binary.BigEndian.PutUint32(id[0:4], seconds)
	// random (40 bits) and counter (24 bits) together fill the last 8 bytes.
	binary.BigEndian.PutUint64(id[4:12], random<<24|uint64(counter))
	return id
}

// FromTime returns the ObjectID with the seconds of t and zero random value
// and counter: the smallest id of that second, which makes it a lower bound
// for "ids created at or after t". Seconds are uint32(t.Unix()), the same
// wrap-around the generators and the MongoDB drivers apply.
func FromTime(t time.Time) ObjectID {
	return build(uint32(t.Unix()), 0, 0)
}

// FromBytes copies a 12-byte binary ObjectID. Any other length is an error
// wrapping ErrInvalid.
func FromBytes(b []byte) (ObjectID, error) {
	var id ObjectID
	if len(b) != len(id) {
		return Nil, fmt.Errorf("%w: %d bytes, want 12", ErrInvalid, len(b))
	}
	copy(id[:], b)
	return id, nil
}

// Seconds returns the raw timestamp field: seconds since the Unix epoch,
// modulo 2^32.
func (id ObjectID) Seconds() uint32 { return binary.BigEndian.Uint32(id[0:4]) }

// Random returns the 40-bit process random value.
func (id ObjectID) Random() uint64 { return binary.BigEndian.Uint64(id[4:12]) >> 24 }

// Counter returns the 24-bit counter.
func (id ObjectID) Counter() uint32 {
	return uint32(id[9])<<16 | uint32(id[10])<<8 | uint32(id[11])
}

// Timestamp returns the creation second in UTC. The field is read as
// unsigned, so the result is always between 1970-01-01 00:00:00 and
// 2106-02-07 06:28:15 UTC; an id generated outside that range decodes to a
// wrapped time (see the package documentation).
func (id ObjectID) Timestamp() time.Time {
	return time.Unix(int64(id.Seconds()), 0).UTC()
}

// Compare returns -1, 0 or +1 as id sorts before, equal to or after o.
// The order is bytewise, which is the order of the lowercase hex strings and
// of MongoDB's _id index: by second, then random value, then counter.
func (id ObjectID) Compare(o ObjectID) int {
	a, b := binary.BigEndian.Uint64(id[0:8]), binary.BigEndian.Uint64(o[0:8])
	if a != b {
		return cmp.Compare(a, b)
	}
	return cmp.Compare(binary.BigEndian.Uint32(id[8:12]), binary.BigEndian.Uint32(o[8:12]))
}

// IsZero reports whether id is Nil.
func (id ObjectID) IsZero() bool { return id == Nil }

// Hex returns the 24-character lowercase hexadecimal form.
func (id ObjectID) Hex() string {
	var buf [hexLen]byte
	hex.Encode(buf[:], id[:])
	return string(buf[:])
}

// String returns id.Hex(). It does not add MongoDB's ObjectId("...")
// wrapper so that the result can be fed straight back to Parse.
func (id ObjectID) String() string { return id.Hex() }

// AppendText implements encoding.TextAppender: it appends the 24 lowercase
// hex characters to b and never fails.
func (id ObjectID) AppendText(b []byte) ([]byte, error) {
	return hex.AppendEncode(b, id[:]), nil
}

// MarshalText implements encoding.TextMarshaler, so encoding/json writes an
// ObjectID as a hex string.
func (id ObjectID) MarshalText() ([]byte, error) {
	return id.AppendText(make([]byte, 0, hexLen))
}

// UnmarshalText implements encoding.TextUnmarshaler with the rules of Parse.
// On error id is left unchanged.
func (id *ObjectID) UnmarshalText(b []byte) error {
	v, err := parse(b)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// AppendBinary implements encoding.BinaryAppender: it appends the 12 raw bytes.
func (id ObjectID) AppendBinary(b []byte) ([]byte, error) {
	return append(b, id[:]...), nil
}

// MarshalBinary implements encoding.BinaryMarshaler: the 12 raw bytes.
func (id ObjectID) MarshalBinary() ([]byte, error) {
	return id.AppendBinary(make([]byte, 0, len(id)))
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler. It accepts exactly
// 12 bytes; anything else is an error wrapping ErrInvalid and leaves id
// unchanged.
func (id *ObjectID) UnmarshalBinary(b []byte) error {
	v, err := FromBytes(b)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Value implements database/sql/driver.Valuer. It stores the hex string,
// which every SQL database can hold and compare in the same order as the ids.
func (id ObjectID) Value() (driver.Value, error) { return id.Hex(), nil }

// Scan implements database/sql.Scanner. It accepts a 24-character hex string
// (as string or []byte) or 12 raw bytes. NULL is an error wrapping ErrInvalid:
// an ObjectID has no null value, so scan nullable columns into
// sql.Null[objectid.ObjectID]. On error id is left unchanged.
func (id *ObjectID) Scan(src any) error {
	var (
		v   ObjectID
		err error
	)
	switch s := src.(type) {
	case string:
		v, err = Parse(s)
	case []byte:
		if len(s) == len(v) {
			v, err = FromBytes(s)
		} else {
			v, err = parse(s)
		}
	case nil:
		return fmt.Errorf("%w: cannot scan NULL; use sql.Null[objectid.ObjectID] for nullable columns", ErrInvalid)
	default:
		return fmt.Errorf("%w: cannot scan %T", ErrInvalid, src)
	}
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Parse decodes the 24-character hexadecimal form, in either case. Nothing
// else is accepted: no surrounding whitespace, no ObjectId("...") wrapper, no
// 0x prefix. Errors wrap ErrInvalid and name the input and, for a bad
// character, its byte offset. Parse does not allocate on success.
func Parse(s string) (ObjectID, error) { return parse(s) }

// MustParse is like Parse but panics on error. It is meant for constants in
// tests and examples.
func MustParse(s string) ObjectID {
	id, err := parse(s)
	if err != nil {
		panic(err)
	}
	return id
}

// IsValid reports whether Parse would accept s.
func IsValid(s string) bool {
	if len(s) != hexLen {
		return false
	}
	for i := 0; i < hexLen; i++ {
		if unhex[s[i]] == bad {
			return false
		}
	}
	return true
}

// parse serves both strings and byte slices so UnmarshalText and Scan need
// no conversion (and no allocation) on the success path.
func parse[S string | []byte](s S) (ObjectID, error) {
	var id ObjectID
	if len(s) != hexLen {
		return Nil, fmt.Errorf("%w %s: length %d, want 24 hex characters", ErrInvalid, quote(string(s)), len(s))
	}
	for i := range id {
		hi, lo := unhex[s[2*i]], unhex[s[2*i+1]]
		if hi|lo > 0x0f { // either digit is bad
			at := 2 * i
			if hi != bad {
				at++
			}
			return Nil, fmt.Errorf("%w %s: invalid character %q at offset %d, want 0-9, a-f or A-F",
				ErrInvalid, quote(string(s)), string(s[at:at+1]), at)
		}
		id[i] = hi<<4 | lo
	}
	return id, nil
}

// quote keeps error messages bounded when the input is huge (a fuzzer, a
// wrong column, a whole JSON document).
func quote(s string) string {
	const limit = 32
	if len(s) > limit {
		return fmt.Sprintf("%q...", s[:limit])
	}
	return fmt.Sprintf("%q", s)
}

const bad = 0xff

// unhex maps a byte to its hex digit value, or bad.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = bad
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c - 'a' + 10)
		t[c-'a'+'A'] = byte(c - 'a' + 10)
	}
	return t
}()

// UnmarshalJSON accepts a JSON string with the hex form (what MarshalText
// produces) and MongoDB Extended JSON {"$oid": "<hex>"} (what mongoexport
// writes), so exported collections decode without a wrapper type. JSON null
// leaves id unchanged, as encoding/json expects. Anything else is an error
// wrapping ErrInvalid. Encoding always uses the plain string form.
func (id *ObjectID) UnmarshalJSON(b []byte) error {
	// The common case, a 24-character string without escapes, needs no trip
	// through encoding/json and does not allocate.
	if len(b) == hexLen+2 && b[0] == '"' && b[len(b)-1] == '"' {
		return id.UnmarshalText(b[1 : len(b)-1])
	}
	if string(b) == "null" {
		return nil
	}
	s, err := jsonHex(b)
	if err != nil {
		return err
	}
	v, err := parse(s)
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// jsonHex extracts the hex string from a JSON string or {"$oid": string}.
// It is separate from UnmarshalJSON so that the fast path does not pay for
// the heap-allocated decoding targets.
func jsonHex(b []byte) (string, error) {
	var s string
	switch {
	case len(b) > 0 && b[0] == '"':
		if err := json.Unmarshal(b, &s); err != nil {
			return "", fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	case len(b) > 0 && b[0] == '{':
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(b, &obj); err != nil {
			return "", fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		raw, ok := obj["$oid"]
		if !ok || len(obj) != 1 {
			return "", fmt.Errorf("%w: JSON object %s, want {\"$oid\": \"<24 hex characters>\"}", ErrInvalid, quote(string(b)))
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%w: $oid is %s, want a string", ErrInvalid, quote(string(raw)))
		}
	default:
		return "", fmt.Errorf("%w: JSON value %s, want a hex string or {\"$oid\": \"<hex>\"}", ErrInvalid, quote(string(b)))
	}
	return s, nil
}
