package mpack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// ValidateRecord checks that b is exactly one msgpack map, with no trailing
// bytes, that storh can store and read back: keys at every level are strings
// and unique within their map, nesting is at most MaxDepth, and every value
// is nil, bool, an integer of any width, float32/64, str, bin, array, map or
// a timestamp (extension -1 in its 4, 8 or 12-byte form).
//
// ValidateRecord accepts exactly the inputs DecodeMap accepts. It allocates
// nothing except to check a map of more than 32 keys whose keys are not in
// ascending byte order for duplicates (see the package Caveats).
func ValidateRecord(b []byte) error {
	_, err := ValidateRecordSorted(b)
	return err
}

// ValidateRecordSorted is ValidateRecord that also reports whether the keys
// of every map in b, at every depth, are in ascending byte order: the
// canonical form storh stores (see AppendSorted). Knowing it costs nothing
// extra, the check of key uniqueness needs the order anyway.
func ValidateRecordSorted(b []byte) (sorted bool, err error) {
	return validateRecord(b, true)
}

// validateRecord is ValidateRecordSorted; without unique, a map whose keys
// are not in order is not rescanned for duplicates (the caller sorts it and
// finds them adjacent).
func validateRecord(b []byte, unique bool) (sorted bool, err error) {
	if err := isMap(b); err != nil {
		return false, err
	}
	end, sorted, err := validate(b, 0, 1, unique)
	if err != nil {
		return false, err
	}
	return sorted, trailing(b, end)
}

func isMap(b []byte) error {
	if len(b) > 0 && !(b[0] >= 0x80 && b[0] <= 0x8f || b[0] == 0xde || b[0] == 0xdf) {
		return fmt.Errorf("%w: record is not a map (code 0x%02x)", ErrMalformed, b[0])
	}
	return nil // an empty input fails later as truncated
}

func trailing(b []byte, end int) error {
	if end != len(b) {
		return fmt.Errorf("%w: %d trailing bytes after offset %d", ErrMalformed, len(b)-end, end)
	}
	return nil
}

// validate checks the value at b[pos] against the record rules and returns
// where it ends, and whether every map in it has its keys in ascending
// order. depth is the level a container at pos would occupy.
func validate(b []byte, pos, depth int, unique bool) (int, bool, error) {
	h, err := readHead(b, pos)
	if err != nil {
		return 0, false, err
	}
	switch h.k {
	case kExt:
		p := pos + h.size
		if err := checkExt(h.ext, b[p:p+h.n], p); err != nil {
			return 0, false, err
		}
	case kArray, kMap:
		if depth > MaxDepth {
			return 0, false, tooDeepAt(pos)
		}
		if h.k == kArray {
			pos += h.size
			all := true
			for i := 0; i < h.n; i++ {
				var sorted bool
				if pos, sorted, err = validate(b, pos, depth+1, unique); err != nil {
					return 0, false, err
				}
				all = all && sorted
			}
			return pos, all, nil
		}
		return validateMap(b, pos, h, depth, unique)
	}
	return pos + h.size + h.n, true, nil
}

func validateMap(b []byte, pos int, h head, depth int, unique bool) (int, bool, error) {
	pos += h.size
	first, sorted, inner := pos, true, true
	var prev []byte
	for i := 0; i < h.n; i++ {
		key, next, err := mapKey(b, pos)
		if err != nil {
			return 0, false, err
		}
		// Sorted keys (the way storh encodes maps) prove uniqueness for free.
		if sorted && i > 0 && bytes.Compare(prev, key) >= 0 {
			sorted = false
		}
		prev = key
		var s bool
		if pos, s, err = validate(b, next, depth+1, unique); err != nil {
			return 0, false, err
		}
		inner = inner && s
	}
	if !sorted && unique {
		if err := uniqueKeys(b, first, h.n); err != nil {
			return 0, false, err
		}
	}
	return pos, sorted && inner, nil
}

// mapKey reads the string key at b[pos] and returns it and where its value
// starts.
func mapKey(b []byte, pos int) ([]byte, int, error) {
	if pos < len(b) && b[pos]&0xe0 == 0xa0 { // fixstr, nearly every key
		start, end := pos+1, pos+1+int(b[pos]&0x1f)
		if end <= len(b) {
			return b[start:end], end, nil
		}
	}
	h, err := readHead(b, pos)
	if err != nil {
		return nil, 0, err
	}
	if h.k != kStr {
		return nil, 0, fmt.Errorf("%w: map key at offset %d is not a string", ErrMalformed, pos)
	}
	start := pos + h.size
	return b[start : start+h.n], start + h.n, nil
}

// uniqueKeys rechecks an unsorted, already validated map of n entries whose
// first key is at b[pos]. Small maps are compared pairwise on the stack;
// larger ones use a set, which allocates but keeps the check linear.
func uniqueKeys(b []byte, pos, n int) error {
	var small [32][]byte
	var set map[string]struct{}
	if n > len(small) {
		set = make(map[string]struct{}, n)
	}
	for i := 0; i < n; i++ {
		key, next, _ := mapKey(b, pos) // validated: cannot fail
		size, _ := Skip(b[next:])
		if set != nil {
			if _, dup := set[string(key)]; dup {
				return duplicate(key, pos)
			}
			set[string(key)] = struct{}{}
		} else {
			for _, k := range small[:i] {
				if bytes.Equal(k, key) {
					return duplicate(key, pos)
				}
			}
			small[i] = key
		}
		pos = next + size
	}
	return nil
}

func duplicate(key []byte, pos int) error {
	return fmt.Errorf("%w: duplicate map key %q at offset %d", ErrMalformed, key, pos)
}

// checkExt is extValue without the value (which would allocate).
func checkExt(ext int8, p []byte, pos int) error {
	switch {
	case ext == ExtUUID && len(p) != 16:
		return fmt.Errorf("%w: UUID of %d bytes at offset %d", ErrMalformed, len(p), pos)
	case ext == ExtObjectID && len(p) != 12:
		return fmt.Errorf("%w: ObjectID of %d bytes at offset %d", ErrMalformed, len(p), pos)
	case ext == ExtUUID, ext == ExtObjectID:
		return nil
	}
	_, err := timestamp(ext, p, pos)
	return err
}

// extValue decodes an extension payload p (found at offset pos, for
// messages): a timestamp, a UUID or an ObjectID.
func extValue(ext int8, p []byte, pos int) (any, error) {
	switch ext {
	case ExtUUID:
		if len(p) != 16 {
			return nil, fmt.Errorf("%w: UUID of %d bytes at offset %d", ErrMalformed, len(p), pos)
		}
		return uuidv7.UUID(p), nil
	case ExtObjectID:
		if len(p) != 12 {
			return nil, fmt.Errorf("%w: ObjectID of %d bytes at offset %d", ErrMalformed, len(p), pos)
		}
		return objectid.ObjectID(p), nil
	}
	return timestamp(ext, p, pos)
}

// timestamp decodes an extension payload p (found at offset pos, for
// messages) that must be a msgpack timestamp.
func timestamp(ext int8, p []byte, pos int) (time.Time, error) {
	if ext != extTimestamp {
		return time.Time{}, fmt.Errorf("%w: extension type %d at offset %d", ErrUnsupported, ext, pos)
	}
	var sec, nsec int64
	switch len(p) {
	case 4:
		sec = int64(binary.BigEndian.Uint32(p))
	case 8:
		v := binary.BigEndian.Uint64(p)
		sec, nsec = int64(v&(1<<34-1)), int64(v>>34)
	case 12:
		nsec = int64(binary.BigEndian.Uint32(p))
		sec = int64(binary.BigEndian.Uint64(p[4:]))
	default:
		return time.Time{}, fmt.Errorf("%w: timestamp of %d bytes at offset %d", ErrMalformed, len(p), pos)
	}
	if nsec > 999_999_999 {
		return time.Time{}, fmt.Errorf("%w: timestamp nanoseconds %d at offset %d", ErrMalformed, nsec, pos)
	}
	return time.Unix(sec, nsec).UTC(), nil
}

// Field returns the raw bytes of the value stored under the top-level key in
// the map payload b, with ok false if the key is absent. It reads only as far
// as the key and does not validate the rest of the payload, so it is meant
// for records that passed ValidateRecord (in which keys are unique). The
// returned slice aliases b and has its capacity clipped to its length.
// Field allocates nothing.
func Field(b []byte, key string) (raw []byte, ok bool, err error) {
	if err := isMap(b); err != nil {
		return nil, false, err
	}
	h, err := readHead(b, 0)
	if err != nil {
		return nil, false, err
	}
	pos := h.size
	for i := 0; i < h.n; i++ {
		k, next, err := mapKey(b, pos)
		if err != nil {
			return nil, false, err
		}
		end, ok := skipFast(b, next)
		if !ok {
			size, err := Skip(b[next:])
			if err != nil {
				return nil, false, err
			}
			end = next + size
		}
		pos = end
		if string(k) == key {
			return b[next:pos:pos], true, nil
		}
	}
	return nil, false, nil
}
