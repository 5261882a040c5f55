package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/uuidv7"
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

// MaxRecordSize bounds the msgpack payload of one record. bbolt could store
// values up to 2 GiB, but a record that large would be copied whole on every
// read and would stall every writer while its pages are written.
const MaxRecordSize = 16 << 20

// MaxDepth bounds nesting of maps and lists in a record (the top-level map
// is depth 1). It also stops cyclic maps before they exhaust the stack.
const MaxDepth = mpack.MaxDepth

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendWriter lets a pooled msgpack.Encoder append to a caller's slice, so a
// batch can encode all its values into one arena.
type appendWriter struct{ buf []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *appendWriter) WriteByte(c byte) error {
	w.buf = append(w.buf, c)
	return nil
}

func (w *appendWriter) WriteString(s string) (int, error) {
	w.buf = append(w.buf, s...)
	return len(s), nil
}

type valueEncoder struct {
	w       appendWriter
	enc     *msgpack.Encoder
	scratch []byte // for AppendValue(nil, ...): encode here, then copy once
	fast    mapEncoder
	sorter  mpack.Sorter
	sorted  []byte // the sorter's output, before it is copied back
}

// maxScratch bounds the scratch buffer a pooled encoder keeps.
const maxScratch = 64 << 10

var encoderPool = sync.Pool{New: func() any {
	e := &valueEncoder{}
	e.enc = msgpack.NewEncoder(&e.w)
	e.enc.SetSortMapKeys(true)
	e.enc.UseCompactInts(true)
	return e
}}

// AppendValue encodes data as a stored value (header + msgpack payload)
// appended to dst. It fails with ErrInvalidData, appending nothing, when data
// is not a map or struct, cannot be encoded, or breaks a limit. The checksum
// is left for sealValue, because it covers the id, which Put assigns only
// once the data is known to be valid (Tx.Put seals every value it writes).
func AppendValue(dst []byte, data any) ([]byte, error) {
	e := encoderPool.Get().(*valueEncoder)
	defer encoderPool.Put(e)
	if m, ok := data.(map[string]any); ok && m != nil {
		out, handled, err := e.appendFastValue(dst, m)
		if handled {
			return out, err
		}
	}
	if err := checkShape(data); err != nil {
		return dst, err
	}
	// Growing a nil slice from empty costs several allocations per record;
	// encoding into pooled scratch and copying once costs one.
	fresh := dst == nil
	if fresh {
		dst = e.scratch[:0]
	}
	start := len(dst)
	e.w.buf = append(dst, valueVersion, 0, 0, 0, 0)
	err := encodeGuarded(e.enc, data)
	out := e.w.buf
	e.w.buf = nil
	if fresh {
		if cap(out) <= maxScratch {
			e.scratch = out[:0]
		}
		dst = nil
	}
	if err != nil {
		return dst, fmt.Errorf("%w: %v", ErrInvalidData, err)
	}
	payload := out[start+HeaderSize:]
	if len(payload) > MaxRecordSize {
		return dst, fmt.Errorf("%w: record is %d bytes encoded; the limit is %d", ErrInvalidData, len(payload), MaxRecordSize)
	}
	// The library writes struct fields in declaration order and typed maps
	// in Go's random order: validation finds out whether every map is in
	// order, and if one is not, every map's keys are put in order, so equal
	// data always gives equal bytes. Only the order changes, not the length,
	// so the sorted form goes back over the payload.
	canon, err := e.sorter.CanonicalRecord(e.sorted[:0], payload)
	if err != nil {
		return dst, fmt.Errorf("%w: %v", ErrInvalidData, err)
	}
	if &canon[0] != &payload[0] {
		copy(payload, canon)
		e.sorted = canon[:0]
		if cap(e.sorted) > maxScratch {
			e.sorted = nil
		}
	}
	if fresh {
		out = append(make([]byte, 0, len(out)), out...)
	}
	return out, nil
}

// sealValue writes the checksum of value for key into its header. It is
// idempotent, so a write retried after a failed group commit stays valid.
func sealValue(value []byte, key uuidv7.UUID) {
	binary.BigEndian.PutUint32(value[1:], checksum(value[HeaderSize:], key[:]))
}

func checksum(payload, key []byte) uint32 {
	return crc32.Update(crc32.Checksum(payload, castagnoli), castagnoli, key)
}

// appendFastValue is AppendValue for the generic map form through the fast
// encoder, which also enforces the depth limit and only ever writes what
// ValidateRecord accepts. handled is false when m holds other types.
func (e *valueEncoder) appendFastValue(dst []byte, m map[string]any) ([]byte, bool, error) {
	fresh := dst == nil
	if fresh {
		dst = e.scratch[:0]
	}
	start := len(dst)
	out, handled, err := e.fast.appendFast(append(dst, valueVersion, 0, 0, 0, 0), m)
	if fresh && cap(out) <= maxScratch {
		e.scratch = out[:0]
	}
	switch {
	case !handled:
		return nil, false, nil
	case err != nil:
		if fresh {
			return nil, true, err
		}
		return dst[:start], true, err
	case len(out)-start-HeaderSize > MaxRecordSize:
		err = fmt.Errorf("%w: record is %d bytes encoded; the limit is %d", ErrInvalidData, len(out)-start-HeaderSize, MaxRecordSize)
		if fresh {
			return nil, true, err
		}
		return dst[:start], true, err
	}
	if fresh {
		out = append(make([]byte, 0, len(out)), out...)
	}
	return out, true, nil
}

// encodeGuarded turns the library's panics on exotic values into errors: a
// bad record must fail its own write, never the process.
func encodeGuarded(enc *msgpack.Encoder, data any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cannot encode value: %v", r)
		}
	}()
	return enc.Encode(data)
}

// Payload checks a stored value's header and checksum against the key it is
// stored under and returns its msgpack payload (aliasing value). Errors wrap
// ErrCorrupt.
func Payload(key, value []byte) ([]byte, error) {
	if len(value) < HeaderSize {
		return nil, fmt.Errorf("%w: value is %d bytes, shorter than its header", ErrCorrupt, len(value))
	}
	if value[0] != valueVersion {
		return nil, fmt.Errorf("%w: unknown value format version %d", ErrCorrupt, value[0])
	}
	payload := value[HeaderSize:]
	if got, want := checksum(payload, key), binary.BigEndian.Uint32(value[1:]); got != want {
		return nil, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x)", ErrCorrupt, want, got)
	}
	return payload, nil
}

// DecodeMap decodes a payload into the normalised map form: integers as int64
// (uint64 above MaxInt64), floats as float64, lists as []any, maps as
// map[string]any, msgpack timestamps as time.Time in UTC, binary as []byte.
func DecodeMap(payload []byte) (map[string]any, error) {
	m, err := mpack.DecodeMap(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return m, nil
}

// DecodeInto decodes a payload into v: a pointer to a struct (msgpack tags
// honoured), to a map[string]any, or to an any. Maps and interfaces get the
// normalised form of DecodeMap.
func DecodeInto(payload []byte, v any) error {
	switch p := v.(type) {
	case *map[string]any:
		m, err := DecodeMap(payload)
		if err != nil {
			return err
		}
		*p = m
		return nil
	case *any:
		m, err := DecodeMap(payload)
		if err != nil {
			return err
		}
		*p = m
		return nil
	}
	if err := msgpack.Unmarshal(payload, v); err != nil {
		return fmt.Errorf("decode into %T: %w", v, err)
	}
	return nil
}
