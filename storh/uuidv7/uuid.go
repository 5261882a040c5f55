package uuidv7

import (
	"cmp"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
)

// UUID is a 16-byte RFC 9562 UUID in network byte order. Ids made by this
// package are version 7: the first 48 bits are a big-endian Unix timestamp in
// milliseconds, so comparing two ids bytewise (or with [UUID.Compare])
// compares their creation times first.
//
// UUID is comparable and can be used as a map key. Its text form is the
// canonical 36-character lowercase string; JSON and database/sql use it.
type UUID [16]byte

// Nil is the all-zero UUID, the zero value of [UUID]. It is not a valid
// UUIDv7: [Parse], [FromBytes], [UUID.UnmarshalText] and [UUID.Scan] reject it,
// and [UUID.IsV7] reports false. Use it (or [UUID.IsZero]) to mean "no id".
var Nil UUID

// MaxTimestampMs is the largest timestamp a UUIDv7 can hold: 48 bits of
// milliseconds since the Unix epoch, which runs out in the year 10889.
const MaxTimestampMs = 1<<48 - 1

var (
	// ErrInvalid is returned (wrapped) by [Parse], [ParseBytes], [Validate],
	// [TimestampMs], [FromBytes], [UUID.UnmarshalText], [UUID.UnmarshalBinary]
	// and [UUID.Scan] when the input is not a well-formed UUIDv7: wrong length
	// or layout, a non-hex digit, a version other than 7 or a variant other
	// than the RFC 9562 one. Test for it with errors.Is.
	ErrInvalid = errors.New("uuidv7: invalid UUIDv7")

	// ErrTimestampRange is returned (wrapped) by [NewAt] and
	// [Generator.NewAt] when the timestamp is negative or above
	// [MaxTimestampMs], because NewAt must encode its timestamp exactly.
	ErrTimestampRange = errors.New("uuidv7: timestamp out of range")

	// ErrExhausted is returned (wrapped) by [NewAt] and [Generator.NewAt] when
	// consecutive calls for one millisecond have used up the 74-bit counter
	// of that millisecond. NewAt cannot borrow the next millisecond the way
	// [New] does, since it must encode its timestamp exactly. With the default
	// randomness it takes at least 2^73 calls, so in practice this signals an
	// injected randomness source (see [WithRandom]) that returns the same bytes.
	ErrExhausted = errors.New("uuidv7: ids for this millisecond exhausted")
)

// hexOffsets[i] is where byte i of a UUID starts in the canonical text.
var hexOffsets = [16]byte{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

const hexDigits = "0123456789abcdef"

// encodeHex writes the canonical text of u into dst, which must hold 36 bytes.
func encodeHex(dst []byte, u *UUID) {
	_ = dst[35]
	for i, off := range hexOffsets {
		dst[off] = hexDigits[u[i]>>4]
		dst[off+1] = hexDigits[u[i]&0x0f]
	}
	dst[8], dst[13], dst[18], dst[23] = '-', '-', '-', '-'
}

// String returns the canonical form, e.g. "017f22e2-79b0-7cc3-98c4-dc0c0c07398f".
// It allocates the string; use [UUID.AppendText] with a reused buffer on hot paths.
func (u UUID) String() string {
	var buf [36]byte
	encodeHex(buf[:], &u)
	return string(buf[:])
}

// AppendText appends the canonical form of u to b. It implements
// encoding.TextAppender and never fails; it does not allocate when b has room
// for 36 more bytes.
func (u UUID) AppendText(b []byte) ([]byte, error) {
	b = slices.Grow(b, 36)
	n := len(b)
	b = b[:n+36]
	encodeHex(b[n:], &u)
	return b, nil
}

// MarshalText implements encoding.TextMarshaler, so encoding/json writes the
// canonical string. It does not check the version: [Nil] marshals to
// "00000000-0000-0000-0000-000000000000", which [UUID.UnmarshalText] rejects.
// For optional ids in JSON use the `json:",omitzero"` tag option, which
// consults [UUID.IsZero].
func (u UUID) MarshalText() ([]byte, error) {
	return u.AppendText(make([]byte, 0, 36))
}

// UnmarshalText implements encoding.TextUnmarshaler with the rules of
// [ParseBytes]. On error u is left unchanged.
func (u *UUID) UnmarshalText(b []byte) error {
	id, err := ParseBytes(b)
	if err != nil {
		return err
	}
	*u = id
	return nil
}

// AppendBinary appends the 16 raw bytes of u to b. It implements
// encoding.BinaryAppender.
func (u UUID) AppendBinary(b []byte) ([]byte, error) {
	return append(b, u[:]...), nil
}

// MarshalBinary implements encoding.BinaryMarshaler: the 16 raw bytes.
func (u UUID) MarshalBinary() ([]byte, error) {
	return u.AppendBinary(make([]byte, 0, 16))
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler with the rules of
// [FromBytes]. On error u is left unchanged.
func (u *UUID) UnmarshalBinary(b []byte) error {
	id, err := FromBytes(b)
	if err != nil {
		return err
	}
	*u = id
	return nil
}

// FromBytes returns the UUID held in 16 raw bytes. It fails with an error
// wrapping [ErrInvalid] unless b is exactly 16 bytes of a version 7 UUID with
// the RFC 9562 variant; raw bytes from storage are checked like text is.
func FromBytes(b []byte) (UUID, error) {
	var u UUID
	if len(b) != len(u) {
		return Nil, fmt.Errorf("%w: %d bytes, want 16", ErrInvalid, len(b))
	}
	copy(u[:], b)
	if err := u.check(); err != nil {
		return Nil, err
	}
	return u, nil
}

// check reports why u is not a UUIDv7, or nil.
func (u *UUID) check() error {
	if v := u.Version(); v != 7 {
		return fmt.Errorf("%w: %x: version %d, want 7", ErrInvalid, u[:], v)
	}
	if u[8]&0xc0 != 0x80 {
		return fmt.Errorf("%w: %x: variant bits %02b, want 10 (RFC 9562)", ErrInvalid, u[:], u[8]>>6)
	}
	return nil
}

// TimestampMs returns the embedded Unix time in milliseconds. It does not
// check the version; for a UUID of another version the result is meaningless.
func (u UUID) TimestampMs() int64 {
	return int64(binary.BigEndian.Uint64(u[:8]) >> 16)
}

// Time returns the embedded timestamp as a UTC [time.Time] with millisecond
// precision.
func (u UUID) Time() time.Time {
	return time.UnixMilli(u.TimestampMs()).UTC()
}

// Compare compares u and v bytewise and returns -1, 0 or +1. For UUIDv7s
// this is creation order: timestamp first, then the monotonic counter. It is
// the order of the 16-byte keys on disk, and fits slices.SortFunc.
func (u UUID) Compare(v UUID) int {
	if c := cmp.Compare(binary.BigEndian.Uint64(u[:8]), binary.BigEndian.Uint64(v[:8])); c != 0 {
		return c
	}
	return cmp.Compare(binary.BigEndian.Uint64(u[8:]), binary.BigEndian.Uint64(v[8:]))
}

// Version returns the version field (the high nibble of byte 6): 7 for ids
// made by this package, 0 for [Nil].
func (u UUID) Version() int {
	return int(u[6] >> 4)
}

// IsV7 reports whether u has version 7 and the RFC 9562 variant (bits 10),
// the two checks [FromBytes] makes. It does not judge the timestamp or the
// random bits: any such 16 bytes are a valid UUIDv7.
func (u UUID) IsV7() bool {
	return u[6]>>4 == 7 && u[8]&0xc0 == 0x80
}

// IsZero reports whether u is [Nil]. It lets `json:",omitzero"` omit unset ids.
func (u UUID) IsZero() bool {
	return u == Nil
}

// Scan implements database/sql.Scanner. It accepts a string or []byte in the
// canonical 36-character form (any case), or a []byte of 16 raw bytes, all
// checked as by [Parse] and [FromBytes]. A NULL (nil) is an error, as is any
// other type; every error wraps [ErrInvalid]. Scan into sql.Null[uuidv7.UUID]
// for nullable columns. On error u is left unchanged.
func (u *UUID) Scan(src any) error {
	var (
		id  UUID
		err error
	)
	switch v := src.(type) {
	case string:
		id, err = Parse(v)
	case []byte:
		switch len(v) {
		case 16:
			id, err = FromBytes(v)
		case 36:
			id, err = ParseBytes(v)
		default:
			err = fmt.Errorf("%w: cannot scan %d bytes into a UUID, want 16 raw bytes or 36 characters of text", ErrInvalid, len(v))
		}
	case nil:
		err = fmt.Errorf("%w: cannot scan NULL into a UUID (use sql.Null[uuidv7.UUID])", ErrInvalid)
	default:
		err = fmt.Errorf("%w: cannot scan %T into a UUID", ErrInvalid, src)
	}
	if err != nil {
		return err
	}
	*u = id
	return nil
}

// Value implements database/sql/driver.Valuer: the canonical string, which
// sorts like the id in any text column with a binary collation.
func (u UUID) Value() (driver.Value, error) {
	return u.String(), nil
}

// MinForTimestampMs returns the smallest UUIDv7 with timestamp ms
// (ts ‖ 7000 ‖ 8000 ‖ 000000000000). Together with [MaxForTimestampMs] it
// turns a time window into a key range: every UUIDv7 minted at a millisecond
// in [from, until] lies in [MinForTimestampMs(from), MaxForTimestampMs(until)],
// so no separate timestamp field or index is needed.
//
// ms is clamped to [0, MaxTimestampMs], so open-ended windows need no special
// case: MinForTimestampMs(math.MinInt64) is the smallest UUIDv7 of all.
func MinForTimestampMs(ms int64) UUID {
	var u UUID
	binary.BigEndian.PutUint64(u[:8], uint64(clampMs(ms))<<16|0x7000)
	u[8] = 0x80
	return u
}

// MaxForTimestampMs returns the largest UUIDv7 with timestamp ms
// (ts ‖ 7fff ‖ bfff ‖ ffffffffffff). ms is clamped like in
// [MinForTimestampMs]: MaxForTimestampMs(math.MaxInt64) is the largest UUIDv7.
func MaxForTimestampMs(ms int64) UUID {
	var u UUID
	binary.BigEndian.PutUint64(u[:8], uint64(clampMs(ms))<<16|0x7fff)
	binary.BigEndian.PutUint64(u[8:], 0xbfff_ffff_ffff_ffff)
	return u
}

func clampMs(ms int64) int64 {
	return min(max(ms, 0), MaxTimestampMs)
}
