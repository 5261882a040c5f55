package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/storhdb/storh-go/storh/internal/errs"

	"github.com/storhdb/storh-go/storh/internal/codec"
	"github.com/storhdb/storh-go/storh/internal/mpack"
)

// Stored value layout (see docs/architecture.md):
//
//	byte 0     format version (valueVersion)
//	bytes 1-4  CRC-32C (Castagnoli) of the payload followed by the record's
//	           16-byte key, big-endian. Covering the key matters: bbolt has no
//	           page checksums, and a damaged key would otherwise return intact
//	           data under an id that was never written.
//	bytes 5-   payload: one msgpack map, the keys of every map at every depth
//	           in ascending byte order (struct fields included), integers
//	           in their smallest encoding
const (
	valueVersion = 1
	HeaderSize   = 5
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sealValue writes the checksum of value for key into its header. It is
// idempotent, so a write retried after a failed group commit stays valid.
// key is a slice, not a uuidv7.UUID: crc32 calls through a function
// value, so a slice of an array parameter would escape, an allocation per
// write.
func sealValue(value, key []byte) {
	binary.BigEndian.PutUint32(value[1:], checksum(value[HeaderSize:], key))
}

func checksum(payload, key []byte) uint32 {
	return crc32.Update(crc32.Checksum(payload, castagnoli), castagnoli, key)
}

// Payload checks a stored value's header and checksum against the key it is
// stored under and returns its msgpack payload (aliasing value). Errors wrap
// ErrCorrupt.
func Payload(key, value []byte) ([]byte, error) {
	if len(value) < HeaderSize {
		return nil, fmt.Errorf("%w: value is %d bytes, shorter than its header", errs.ErrCorrupt, len(value))
	}
	if value[0] != valueVersion {
		return nil, fmt.Errorf("%w: unknown value format version %d", errs.ErrCorrupt, value[0])
	}
	payload := value[HeaderSize:]
	if got, want := checksum(payload, key), binary.BigEndian.Uint32(value[1:]); got != want {
		return nil, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x)", errs.ErrCorrupt, want, got)
	}
	return payload, nil
}

// decodeMap decodes a payload into the normalised map form: integers as int64
// (uint64 above MaxInt64), floats as float64, lists as []any, maps as
// map[string]any, msgpack timestamps as time.Time in UTC, binary as []byte.
func decodeMap(payload []byte) (map[string]any, error) {
	return DecodeMapIn(payload, nil)
}

// DecodeMapIn is decodeMap boxing the values in slab, shared by the
// records of a page; nil gives the record a slab of its own.
func DecodeMapIn(payload []byte, slab *mpack.Slab) (map[string]any, error) {
	m, err := mpack.DecodeMapIn(payload, slab)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrCorrupt, err)
	}
	return m, nil
}

// DecodeInto decodes a payload into v: a pointer to a struct (msgpack tags
// honoured, json tags for fields without one), to a map[string]any, or to
// an any, or to any other Go type the codec decodes (see
// storh/internal/codec). Maps and interfaces get the normalised form of
// decodeMap, also inside structs. A record that does not fit v's type
// fails with an error wrapping codec.ErrType; a payload that does not decode,
// with ErrCorrupt.
func DecodeInto(payload []byte, v any) error {
	switch p := v.(type) {
	case *map[string]any:
		m, err := decodeMap(payload)
		if err != nil {
			return err
		}
		*p = m
		return nil
	case *any:
		m, err := decodeMap(payload)
		if err != nil {
			return err
		}
		*p = m
		return nil
	}
	return decodeErr(codec.Decode(payload, v))
}

// decodeErr keeps the codec's type errors and turns everything else (a
// payload that is not well-formed msgpack) into ErrCorrupt.
func decodeErr(err error) error {
	if err == nil || errors.Is(err, codec.ErrType) {
		return err
	}
	return fmt.Errorf("%w: %w", errs.ErrCorrupt, err)
}
