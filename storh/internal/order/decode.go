package order

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Decode returns the value whose key starts key, in mpack.Decode's
// normalised form (integers as int64, uint64 above math.MaxInt64, floats
// as float64, times in UTC), and the bytes after its key. Keys are
// self-delimiting, so the keys of a compound index entry decode one after
// the other. It lets a reader of index entries alone (a grouped count) hand
// back the values it grouped by, and an aggregate keep the order key of
// its best value instead of a copy of its bytes.
//
// A key's value is the one that was keyed, with what the order does not
// keep lost: a NaN comes back as the one NaN, -0.0 as 0.0, a time in UTC.
// Errors wrap mpack.ErrMalformed.
func Decode(key []byte) (v any, rest []byte, err error) {
	return decodeKey(key, 1)
}

func decodeKey(key []byte, depth int) (any, []byte, error) {
	if len(key) == 0 {
		return nil, nil, malformedKey("empty key")
	}
	tag, b := key[0], key[1:]
	switch tag {
	case TagNull:
		return nil, b, nil
	case TagFalse:
		return false, b, nil
	case TagTrue:
		return true, b, nil
	case TagNumber:
		if len(b) < NumberLen-1 {
			return nil, nil, malformedKey("short number")
		}
		return decodeNumber(b), b[NumberLen-1:], nil
	case TagString, TagBytes:
		s, rest, err := unescape(b)
		if err != nil {
			return nil, nil, err
		}
		if tag == TagString {
			return string(s), rest, nil
		}
		return s, rest, nil
	case TagTime:
		if len(b) < 12 {
			return nil, nil, malformedKey("short time")
		}
		sec := int64((binary.BigEndian.Uint64(b) ^ 1<<63) - unixToInternal)
		nsec := int64(binary.BigEndian.Uint32(b[8:]))
		return time.Unix(sec, nsec).UTC(), b[12:], nil
	case TagUUID:
		if len(b) < 16 {
			return nil, nil, malformedKey("short UUID")
		}
		return uuidv7.UUID(b[:16]), b[16:], nil
	case TagObjectID:
		if len(b) < len(objectid.ObjectID{}) {
			return nil, nil, malformedKey("short ObjectID")
		}
		n := len(objectid.ObjectID{})
		return objectid.ObjectID(b[:n]), b[n:], nil
	case TagList:
		if depth > mpack.MaxDepth {
			return nil, nil, malformedKey("too deep")
		}
		out := []any{}
		for {
			if len(b) == 0 {
				return nil, nil, malformedKey("unterminated list")
			}
			if b[0] == endList {
				return out, b[1:], nil
			}
			e, rest, err := decodeKey(b, depth+1)
			if err != nil {
				return nil, nil, err
			}
			out, b = append(out, e), rest
		}
	case TagMap:
		if depth > mpack.MaxDepth {
			return nil, nil, malformedKey("too deep")
		}
		out := map[string]any{}
		for {
			if len(b) == 0 {
				return nil, nil, malformedKey("unterminated map")
			}
			switch b[0] {
			case endList:
				return out, b[1:], nil
			case mapEntry:
			default:
				return nil, nil, malformedKey("map entry")
			}
			k, rest, err := unescape(b[1:])
			if err != nil {
				return nil, nil, err
			}
			e, rest, err := decodeKey(rest, depth+1)
			if err != nil {
				return nil, nil, err
			}
			out[string(k)], b = e, rest
		}
	}
	return nil, nil, malformedKey(fmt.Sprintf("tag 0x%02x", tag))
}

// decodeNumber inverts appendNumber: b holds F, r and the kind byte.
func decodeNumber(b []byte) any {
	fb := binary.BigEndian.Uint64(b)
	r := uint64(b[8])<<8 | uint64(b[9])
	var f float64
	switch {
	case fb == 0:
		return math.NaN()
	case fb>>63 != 0:
		f = math.Float64frombits(fb &^ (1 << 63))
	default:
		f = math.Float64frombits(^fb)
	}
	if b[10] != kindInt {
		return f
	}
	if f >= 0 {
		u := uint64(f) + r // f <= 2^64 - 2^11 for a stored integer: exact
		if u > math.MaxInt64 {
			return u
		}
		return int64(u)
	}
	// F is minus |x| rounded up, at most 2^63 in magnitude: see splitInt.
	return -int64(uint64(-f) - r)
}

// unescape reads an escaped string up to its terminator (see
// appendEscaped), returning its bytes and what follows.
func unescape(b []byte) ([]byte, []byte, error) {
	out := []byte{}
	for {
		i := bytes.IndexByte(b, 0)
		if i < 0 || i+1 >= len(b) {
			return nil, nil, malformedKey("unterminated string")
		}
		out = append(out, b[:i]...)
		switch b[i+1] {
		case term:
			return out, b[i+2:], nil
		case escape:
			out = append(out, 0)
			b = b[i+2:]
		default:
			return nil, nil, malformedKey("string escape")
		}
	}
}

func malformedKey(what string) error {
	return fmt.Errorf("%w: order key: %s", mpack.ErrMalformed, what)
}
