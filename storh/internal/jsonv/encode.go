package jsonv

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// ErrPayload is wrapped by the errors of AppendPayload, AppendRow and
// AppendRecord for bytes that are not a well-formed storh record payload
// (which storh never hands out unless the file is damaged), and by
// AppendValue for a Go type that storh does not store.
var ErrPayload = errors.New("jsonl: cannot write record")

// TimeLayout is how record times are printed: RFC 3339 in UTC with
// milliseconds, the precision of a UUIDv7.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// AppendRow appends the export form of a record, {"id":"…","data":{…}},
// and a newline.
func AppendRow(dst []byte, id uuidv7.UUID, payload []byte) ([]byte, error) {
	dst, err := AppendObject(dst, id, payload, false)
	if err != nil {
		return dst, err
	}
	return append(dst, '\n'), nil
}

// AppendRecord appends the display form of a record,
// {"id":"…","time":"…","data":{…}}, and a newline. The time is the id's.
func AppendRecord(dst []byte, id uuidv7.UUID, payload []byte) ([]byte, error) {
	dst, err := AppendObject(dst, id, payload, true)
	if err != nil {
		return dst, err
	}
	return append(dst, '\n'), nil
}

// AppendObject appends a record as one JSON object, without a newline:
// {"id":"…","time":"…","data":{…}}, or without the time when withTime is
// false. On error dst comes back as it was given.
func AppendObject(dst []byte, id uuidv7.UUID, payload []byte, withTime bool) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"id":"`...)
	dst, _ = id.AppendText(dst)
	if withTime {
		dst = append(dst, `","time":"`...)
		dst = id.Time().UTC().AppendFormat(dst, TimeLayout)
	}
	dst = append(dst, `","data":`...)
	dst, err := AppendPayload(dst, payload)
	if err != nil {
		return dst[:start], err
	}
	return append(dst, '}'), nil
}

// AppendPayload transcodes a record payload (one msgpack map, as
// storh.Record.Raw returns it) to JSON, straight from the bytes.
func AppendPayload(dst, payload []byte) ([]byte, error) {
	if len(payload) == 0 || !isMap(payload[0]) {
		return dst, fmt.Errorf("%w: the payload is not a msgpack map", ErrPayload)
	}
	out, n, err := appendMsgpack(dst, payload, 0, 0)
	if err != nil {
		return dst, err
	}
	if n != len(payload) {
		return dst, fmt.Errorf("%w: %d bytes after the record's map", ErrPayload, len(payload)-n)
	}
	return out, nil
}

func isMap(c byte) bool { return c&0xf0 == 0x80 || c == 0xde || c == 0xdf }

var errShort = fmt.Errorf("%w: the payload ends inside a value", ErrPayload)

// appendMsgpack writes the value at b[i:] and returns the offset after it.
func appendMsgpack(dst, b []byte, i, depth int) ([]byte, int, error) {
	if depth > MaxNesting {
		return dst, i, fmt.Errorf("%w: nested deeper than %d levels", ErrPayload, MaxNesting)
	}
	if i >= len(b) {
		return dst, i, errShort
	}
	c := b[i]
	i++
	var n int // length of a str/bin/array/map, set by the cases below
	switch {
	case c <= 0x7f:
		return strconv.AppendInt(dst, int64(c), 10), i, nil
	case c >= 0xe0:
		return strconv.AppendInt(dst, int64(int8(c)), 10), i, nil
	case c&0xf0 == 0x80:
		return appendMap(dst, b, i, int(c&0x0f), depth)
	case c&0xf0 == 0x90:
		return appendArray(dst, b, i, int(c&0x0f), depth)
	case c&0xe0 == 0xa0:
		n = int(c & 0x1f)
		if len(b)-i < n {
			return dst, i, errShort
		}
		return appendString(dst, b[i:i+n]), i + n, nil
	}
	size := func(w int) bool {
		if len(b)-i < w {
			return false
		}
		switch w {
		case 1:
			n = int(b[i])
		case 2:
			n = int(binary.BigEndian.Uint16(b[i:]))
		case 4:
			n = int(binary.BigEndian.Uint32(b[i:]))
		}
		i += w
		return true
	}
	fixed := func(w int) ([]byte, bool) {
		if len(b)-i < w {
			return nil, false
		}
		v := b[i : i+w]
		i += w
		return v, true
	}
	switch c {
	case 0xc0:
		return append(dst, "null"...), i, nil
	case 0xc2:
		return append(dst, "false"...), i, nil
	case 0xc3:
		return append(dst, "true"...), i, nil
	case 0xc4, 0xc5, 0xc6: // bin 8/16/32
		if !size(1<<(c-0xc4)) || len(b)-i < n {
			return dst, i, errShort
		}
		return appendBinary(dst, b[i:i+n]), i + n, nil
	case 0xd9, 0xda, 0xdb: // str 8/16/32
		if !size(1<<(c-0xd9)) || len(b)-i < n {
			return dst, i, errShort
		}
		return appendString(dst, b[i:i+n]), i + n, nil
	case 0xdc, 0xdd: // array 16/32
		if !size(2 << (c - 0xdc)) {
			return dst, i, errShort
		}
		return appendArray(dst, b, i, n, depth)
	case 0xde, 0xdf: // map 16/32
		if !size(2 << (c - 0xde)) {
			return dst, i, errShort
		}
		return appendMap(dst, b, i, n, depth)
	case 0xca:
		v, ok := fixed(4)
		if !ok {
			return dst, i, errShort
		}
		return appendFloat(dst, float64(math.Float32frombits(binary.BigEndian.Uint32(v)))), i, nil
	case 0xcb:
		v, ok := fixed(8)
		if !ok {
			return dst, i, errShort
		}
		return appendFloat(dst, math.Float64frombits(binary.BigEndian.Uint64(v))), i, nil
	case 0xcc, 0xcd, 0xce, 0xcf:
		v, ok := fixed(1 << (c - 0xcc))
		if !ok {
			return dst, i, errShort
		}
		return strconv.AppendUint(dst, beUint(v), 10), i, nil
	case 0xd0, 0xd1, 0xd2, 0xd3:
		v, ok := fixed(1 << (c - 0xd0))
		if !ok {
			return dst, i, errShort
		}
		return strconv.AppendInt(dst, beInt(v), 10), i, nil
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1/2/4/8/16
		n = 1 << (c - 0xd4)
	case 0xc7, 0xc8, 0xc9: // ext 8/16/32
		if !size(1 << (c - 0xc7)) {
			return dst, i, errShort
		}
	default:
		return dst, i, fmt.Errorf("%w: byte 0x%02x at offset %d is not a msgpack type", ErrPayload, c, i-1)
	}
	// An extension: one type byte, then n bytes.
	if len(b)-i < n+1 {
		return dst, i, errShort
	}
	typ, data := int8(b[i]), b[i+1:i+1+n]
	i += 1 + n
	switch {
	case typ == mpack.ExtUUID && n == 16:
		return appendUUID(dst, uuidv7.UUID(data)), i, nil
	case typ == mpack.ExtObjectID && n == 12:
		return appendObjectID(dst, objectid.ObjectID(data)), i, nil
	case typ != -1:
		return dst, i, fmt.Errorf("%w: msgpack extension type %d of %d bytes is not a storh type", ErrPayload, typ, n)
	}
	t, err := decodeTimestamp(data)
	if err != nil {
		return dst, i, err
	}
	return appendTime(dst, t), i, nil
}

func beUint(v []byte) uint64 {
	var u uint64
	for _, c := range v {
		u = u<<8 | uint64(c)
	}
	return u
}

func beInt(v []byte) int64 {
	u := beUint(v)
	shift := 64 - 8*len(v)
	return int64(u<<shift) >> shift // sign-extend
}

// decodeTimestamp reads the msgpack timestamp extension (type -1) in its
// 32-, 64- and 96-bit forms.
func decodeTimestamp(d []byte) (time.Time, error) {
	switch len(d) {
	case 4:
		return time.Unix(int64(binary.BigEndian.Uint32(d)), 0), nil
	case 8:
		v := binary.BigEndian.Uint64(d)
		ns := int64(v >> 34)
		if ns > 999_999_999 {
			break
		}
		return time.Unix(int64(v&(1<<34-1)), ns), nil
	case 12:
		ns := int64(binary.BigEndian.Uint32(d))
		if ns > 999_999_999 {
			break
		}
		return time.Unix(int64(binary.BigEndian.Uint64(d[4:])), ns), nil
	}
	return time.Time{}, fmt.Errorf("%w: malformed msgpack timestamp (%d bytes)", ErrPayload, len(d))
}

func appendArray(dst, b []byte, i, n, depth int) ([]byte, int, error) {
	dst = append(dst, '[')
	for k := 0; k < n; k++ {
		if k > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, i, err = appendMsgpack(dst, b, i, depth+1); err != nil {
			return dst, i, err
		}
	}
	return append(dst, ']'), i, nil
}

func appendMap(dst, b []byte, i, n, depth int) ([]byte, int, error) {
	dst = append(dst, '{')
	for k := 0; k < n; k++ {
		if k > 0 {
			dst = append(dst, ',')
		}
		// Keys are strings (storh validates every record on write).
		if i >= len(b) {
			return dst, i, errShort
		}
		c, kn := b[i], 0
		switch {
		case c&0xe0 == 0xa0:
			kn, i = int(c&0x1f), i+1
		case c == 0xd9 && len(b)-i >= 2:
			kn, i = int(b[i+1]), i+2
		case c == 0xda && len(b)-i >= 3:
			kn, i = int(binary.BigEndian.Uint16(b[i+1:])), i+3
		case c == 0xdb && len(b)-i >= 5:
			kn, i = int(binary.BigEndian.Uint32(b[i+1:])), i+5
		default:
			return dst, i, fmt.Errorf("%w: map key at offset %d is not a string", ErrPayload, i)
		}
		if len(b)-i < kn {
			return dst, i, errShort
		}
		dst = appendString(dst, b[i:i+kn])
		dst = append(dst, ':')
		i += kn
		var err error
		if dst, i, err = appendMsgpack(dst, b, i, depth+1); err != nil {
			return dst, i, err
		}
	}
	return append(dst, '}'), i, nil
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string. Only what JSON requires is
// escaped (plus U+2028 and U+2029, which break JavaScript); bytes that are
// not UTF-8 become U+FFFD.
func appendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		var r rune
		var size int
		switch v := any(s).(type) {
		case string:
			r, size = utf8.DecodeRuneInString(v[i:])
		case []byte:
			r, size = utf8.DecodeRune(v[i:])
		}
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendFloat writes a float so that it reads back as the same float64:
// shortest form, always with a fraction or an exponent, and the Extended
// JSON wrappers for what JSON has no number for.
func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `{"$numberDouble":"NaN"}`...)
	case math.IsInf(f, 1):
		return append(dst, `{"$numberDouble":"Infinity"}`...)
	case math.IsInf(f, -1):
		return append(dst, `{"$numberDouble":"-Infinity"}`...)
	}
	start := len(dst)
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 → 1e-7, as encoding/json and JavaScript write it.
		if n := len(dst); n-start >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
		return dst
	}
	if !slices.Contains(dst[start:], '.') {
		dst = append(dst, '.', '0')
	}
	return dst
}

func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		dst = append(dst, `{"$date":{"$numberLong":"`...)
		dst = strconv.AppendInt(dst, t.UnixMilli(), 10)
		return append(dst, `"}}`...)
	}
	dst = append(dst, `{"$date":"`...)
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, `"}`...)
}

func appendBinary(dst, b []byte) []byte {
	dst = append(dst, `{"$binary":{"base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, `","subType":"00"}}`...)
}

// AppendValue writes a Go value of the kinds a storh record holds (as
// storh.Record.Data returns them) as JSON with the same mapping as
// AppendPayload. Map keys are written in sorted order, as stored.
// appendUUID writes a typed UUID as {"$uuid":"<canonical text>"}, the
// Extended JSON form, which import reads back as the same typed value.
func appendUUID(dst []byte, u uuidv7.UUID) []byte {
	dst = append(dst, `{"$uuid":"`...)
	dst, _ = u.AppendText(dst)
	return append(dst, `"}`...)
}

// appendObjectID writes a typed ObjectID as {"$oid":"<24 hex digits>"}.
func appendObjectID(dst []byte, id objectid.ObjectID) []byte {
	dst = append(dst, `{"$oid":"`...)
	dst, _ = id.AppendText(dst)
	return append(dst, `"}`...)
}

func AppendValue(dst []byte, v any) ([]byte, error) {
	return appendValue(dst, v, 0)
}

func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > MaxNesting {
		return dst, fmt.Errorf("%w: nested deeper than %d levels", ErrPayload, MaxNesting)
	}
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case string:
		return appendString(dst, x), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int8:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int16:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), nil
	case uint:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint8:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint16:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case float64:
		return appendFloat(dst, x), nil
	case float32:
		return appendFloat(dst, float64(x)), nil
	case []byte:
		return appendBinary(dst, x), nil
	case time.Time:
		return appendTime(dst, x), nil
	case uuidv7.UUID:
		return appendUUID(dst, x), nil
	case objectid.ObjectID:
		return appendObjectID(dst, x), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = appendValue(dst, x[k], depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return dst, fmt.Errorf("%w: %T is not a storh value type", ErrPayload, v)
}
