package objectid

import (
	"encoding/binary"
	"fmt"
)

// The mapping below turns an ObjectID into a UUIDv7 (RFC 9562) for importing
// MongoDB data into a store keyed by UUIDv7. It returns raw [16]byte so this
// package depends on nothing else in the module; callers convert with
// uuidv7.UUID(b).
//
// UUIDv7 layout, most significant first:
//
//	48 bits unix_ts_ms | 4 bits version (0111) | 12 bits rand_a |
//	2 bits variant (10) | 62 bits rand_b
//
// unix_ts_ms is seconds*1000. The ObjectID's last 8 bytes (random value then
// counter) read as a big-endian uint64 V fill the 74 random bits in order:
// rand_a is the top 12 bits of V, rand_b the remaining 52 bits followed by 10
// zero bits. Every field of the UUID is either constant or a monotonic
// function of the ObjectID's bytes, so bytewise order is preserved.

const (
	low52  = 1<<52 - 1
	low10  = 1<<10 - 1
	varRFC = 0b10 << 62
)

// UUIDv7 returns the UUIDv7 derived from id. The result is a pure function
// of id: re-importing the same document yields the same key, so imports are
// idempotent and can be resumed or repeated without duplicates. It has
// version 7 and the RFC variant, its millisecond timestamp is
// id.Seconds()*1000, and derived UUIDs sort bytewise exactly as their
// ObjectIDs do. FromUUIDv7 inverts it.
func (id ObjectID) UUIDv7() [16]byte {
	var u [16]byte
	ms := uint64(id.Seconds()) * 1000
	v := binary.BigEndian.Uint64(id[4:12])
	// ms occupies the top 48 bits; the next 16 are version and rand_a.
	binary.BigEndian.PutUint64(u[0:8], ms<<16|0x7<<12|v>>52)
	binary.BigEndian.PutUint64(u[8:16], varRFC|(v&low52)<<10)
	return u
}

// UUIDv7Bounds returns the smallest and largest UUIDv7 whose timestamp lies
// in id's second: lo has ms = seconds*1000 and all random bits zero, hi has
// ms = seconds*1000+999 and all random bits one. They bound a range scan
// for "records imported from ObjectIDs of this second" (and, with ids of a
// first and last second, of any span), and id.UUIDv7() always lies in
// [lo, hi].
func (id ObjectID) UUIDv7Bounds() (lo, hi [16]byte) {
	ms := uint64(id.Seconds()) * 1000
	binary.BigEndian.PutUint64(lo[0:8], ms<<16|0x7000)
	binary.BigEndian.PutUint64(lo[8:16], varRFC)
	binary.BigEndian.PutUint64(hi[0:8], (ms+999)<<16|0x7fff)
	binary.BigEndian.PutUint64(hi[8:16], 0xbfff_ffff_ffff_ffff)
	return lo, hi
}

// FromUUIDv7 recovers the ObjectID that UUIDv7 derived u from. It returns
// an error wrapping ErrInvalid if u cannot be such a result: wrong version
// or variant, a millisecond timestamp that is not a whole second within
// the ObjectID range, or non-zero low 10 bits. A UUIDv7 made any other way
// (uuidv7.New) passes these checks only by chance, about one time in a
// million (1/1000 for the whole second times 1/1024 for the zero bits), so
// the check is a strong hint, not proof, that a key came from an import.
func FromUUIDv7(u [16]byte) (ObjectID, error) {
	hi := binary.BigEndian.Uint64(u[0:8])
	lo := binary.BigEndian.Uint64(u[8:16])
	ms := hi >> 16
	switch {
	case hi>>12&0xf != 7:
		return Nil, fmt.Errorf("%w: UUID version %d, want 7", ErrInvalid, hi>>12&0xf)
	case lo>>62 != 0b10:
		return Nil, fmt.Errorf("%w: UUID variant bits %02b, want 10", ErrInvalid, lo>>62)
	case ms%1000 != 0 || ms/1000 > 1<<32-1:
		return Nil, fmt.Errorf("%w: UUIDv7 timestamp %d ms is not a whole second in the ObjectID range", ErrInvalid, ms)
	case lo&low10 != 0:
		return Nil, fmt.Errorf("%w: UUIDv7 low 10 bits are %#x, want 0 for a UUID derived from an ObjectID", ErrInvalid, lo&low10)
	}
	var id ObjectID
	binary.BigEndian.PutUint32(id[0:4], uint32(ms/1000))
	binary.BigEndian.PutUint64(id[4:12], (hi&0xfff)<<52|(lo&^(0b11<<62))>>10)
	return id, nil
}
