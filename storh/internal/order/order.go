package order

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/storhdb/storh-go/storh/internal/mpack"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Tag is the first byte of every key: the value's class. Keys of a lower
// class sort before every key of a higher one, so the keys of class t are
// exactly those from []byte{t} (inclusive) to []byte{t + 1} (exclusive).
// It is a byte so that such bounds can be written as literals.
type Tag = byte

// The classes, in their order. Missing fields have the key of null.
const (
	TagNull   Tag = 0x01
	TagFalse  Tag = 0x02
	TagTrue   Tag = 0x03
	TagNumber Tag = 0x04
	TagString Tag = 0x05
	TagBytes  Tag = 0x06
	TagTime   Tag = 0x07
	TagList   Tag = 0x08
	TagMap    Tag = 0x09
	// Typed ids (mpack.ExtUUID, mpack.ExtObjectID) sort after every other
	// class, each by its bytes, which for UUIDv7s and ObjectIDs is creation
	// order. They came after the other classes were laid out on disk, so
	// they take the next tags rather than renumbering any.
	TagUUID     Tag = 0x0A
	TagObjectID Tag = 0x0B
)

// The bytes of the layout that are not tags (see the package doc).
const (
	kindInt   = 0x00 // last byte of an integer's number key
	kindFloat = 0x01 // last byte of a float's number key
	escape    = 0xFF // follows a 0x00 byte of a string, bytes or map key
	term      = 0x01 // follows the 0x00 that ends a string, bytes or map key
	endList   = 0x00 // after a list's elements, and after a map's entries
	mapEntry  = 0x01 // before each map entry
)

// NumberLen is the length of every number key.
const NumberLen = 12

// unixToInternal is the number of seconds from 0001-01-01 00:00:00 UTC, the
// zero time.Time, to the Unix epoch.
const unixToInternal = (1969*365 + 1969/4 - 1969/100 + 1969/400) * 24 * 60 * 60

// Append appends the key of v to dst. v is a value in mpack's normalised
// form (nil, bool, int64, uint64, float64, string, []byte, time.Time, []any,
// map[string]any) or any other Go value mpack.Normalize accepts, which is
// keyed as its normalised form: other integer and float widths, nil slices,
// maps and pointers (null), typed slices and string-keyed maps. The key of a
// value is the same bytes AppendRaw gives for its msgpack encoding.
//
// Append allocates nothing for normalised scalars beyond growing dst. Maps
// allocate to sort their keys; values outside the normalised form go
// through mpack.Normalize. On error, which wraps mpack.ErrUnsupported or
// mpack.ErrTooDeep, dst is returned at its original length.
func Append(dst []byte, v any) ([]byte, error) {
	n := len(dst)
	out, err := appendValue(dst, v, 1)
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, TagNull), nil
	case bool:
		if x {
			return append(dst, TagTrue), nil
		}
		return append(dst, TagFalse), nil
	case int64:
		return appendInt(dst, x), nil
	case uint64:
		return appendUint(dst, x), nil
	case float64:
		return appendFloat(dst, x), nil
	case string:
		dst = appendEscapedString(append(dst, TagString), x)
		return append(dst, 0, term), nil
	case []byte:
		if x == nil {
			return append(dst, TagNull), nil // as mpack.Normalize and the encoder see it
		}
		dst = appendEscaped(append(dst, TagBytes), x)
		return append(dst, 0, term), nil
	case time.Time:
		return appendTime(dst, x.Unix(), x.Nanosecond()), nil
	case uuidv7.UUID:
		return append(append(dst, TagUUID), x[:]...), nil
	case objectid.ObjectID:
		return append(append(dst, TagObjectID), x[:]...), nil
	case []any:
		if x == nil {
			return append(dst, TagNull), nil
		}
		if depth > mpack.MaxDepth {
			return dst, tooDeep()
		}
		dst = append(dst, TagList)
		for _, e := range x {
			var err error
			if dst, err = appendValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, endList), nil
	case map[string]any:
		if x == nil {
			return append(dst, TagNull), nil
		}
		if depth > mpack.MaxDepth {
			return dst, tooDeep()
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, TagMap)
		for _, k := range keys {
			dst = appendEscapedString(append(dst, mapEntry), k)
			dst = append(dst, 0, term)
			var err error
			if dst, err = appendValue(dst, x[k], depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, endList), nil
	// The common non-normalised numbers, without mpack.Normalize's
	// reflection.
	case int:
		return appendInt(dst, int64(x)), nil
	case int32:
		return appendInt(dst, int64(x)), nil
	case uint:
		return appendUint(dst, uint64(x)), nil
	case uint32:
		return appendUint(dst, uint64(x)), nil
	case float32:
		return appendFloat(dst, float64(x)), nil
	}
	norm, err := mpack.Normalize(v)
	if err != nil {
		return dst, err
	}
	return appendValue(dst, norm, depth) // norm is normalised: no second pass
}

func tooDeep() error {
	return fmt.Errorf("%w: more than %d levels", mpack.ErrTooDeep, mpack.MaxDepth)
}

// AppendRaw appends the key of one msgpack value, given as its raw bytes, to
// dst. raw nil stands for a missing field and gets the key of null; any
// other raw must be exactly one value that mpack.Decode accepts (string and
// unique map keys, at most mpack.MaxDepth levels, timestamps as the only
// extension), else AppendRaw returns an error wrapping mpack.ErrMalformed,
// mpack.ErrUnsupported or mpack.ErrTooDeep and dst at its original length.
// An empty, non-nil raw is malformed.
//
// The key equals Append's for the decoded value, whatever the encoding:
// integers of any width and signedness, float32 or float64, any timestamp
// form, and maps with their entries in any order.
//
// AppendRaw allocates nothing beyond growing dst, except for a map whose
// keys are not in ascending byte order (storh stores every map sorted), which
// needs a scratch slice to sort its entries.
func AppendRaw(dst, raw []byte) ([]byte, error) {
	if raw == nil {
		return append(dst, TagNull), nil
	}
	n := len(dst)
	out, end, err := appendRaw(dst, raw, 0, 1)
	if err == nil && end != len(raw) {
		err = fmt.Errorf("%w: %d trailing bytes after offset %d", mpack.ErrMalformed, len(raw)-end, end)
	}
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

// appendRaw appends the key of the value at b[pos], a container at nesting
// level depth, and returns where the value ends.
func appendRaw(dst, b []byte, pos, depth int) ([]byte, int, error) {
	if pos < len(b) {
		if out, end, ok := appendScalar(dst, b, pos); ok {
			return out, end, nil
		}
	}
	h, err := mpack.ReadHead(b, pos)
	if err != nil {
		return dst, 0, err
	}
	p := pos + h.Size
	switch h.Kind {
	case mpack.KindNil:
		return append(dst, TagNull), p, nil
	case mpack.KindFalse:
		return append(dst, TagFalse), p, nil
	case mpack.KindTrue:
		return append(dst, TagTrue), p, nil
	case mpack.KindInt:
		return appendInt(dst, int64(h.Bits)), p, nil
	case mpack.KindUint:
		return appendUint(dst, h.Bits), p, nil
	case mpack.KindFloat32:
		return appendFloat(dst, float64(math.Float32frombits(uint32(h.Bits)))), p, nil
	case mpack.KindFloat64:
		return appendFloat(dst, math.Float64frombits(h.Bits)), p, nil
	case mpack.KindStr, mpack.KindBin:
		tag := TagString
		if h.Kind == mpack.KindBin {
			tag = TagBytes
		}
		dst = appendEscaped(append(dst, tag), b[p:p+h.N])
		return append(dst, 0, term), p + h.N, nil
	case mpack.KindExt:
		switch {
		case h.Ext == mpack.ExtUUID && h.N == 16:
			return append(append(dst, TagUUID), b[p:p+16]...), p + 16, nil
		case h.Ext == mpack.ExtObjectID && h.N == 12:
			return append(append(dst, TagObjectID), b[p:p+12]...), p + 12, nil
		}
		t, err := h.Timestamp(b, pos)
		if err != nil {
			return dst, 0, err
		}
		return appendTime(dst, t.Unix(), t.Nanosecond()), p + h.N, nil
	}
	if depth > mpack.MaxDepth {
		return dst, 0, fmt.Errorf("%w: more than %d levels at offset %d", mpack.ErrTooDeep, mpack.MaxDepth, pos)
	}
	if h.Kind == mpack.KindMap {
		return appendRawMap(dst, b, p, h.N, depth)
	}
	dst = append(dst, TagList)
	for i := 0; i < h.N; i++ {
		if dst, p, err = appendRaw(dst, b, p, depth+1); err != nil {
			return dst, 0, err
		}
	}
	return append(dst, endList), p, nil
}

// appendScalar is appendRaw's fast path for the values whose first one or
// two bytes say what they are and how long: fixints, nil, booleans, the
// fixed-width numbers, fixstr, str8, bin8 and the 4 and 8-byte timestamps,
// nearly every stored scalar. It reports
// false, having appended nothing, for any other code or a value cut short,
// which mpack.ReadHead then handles (the fuzz target checks that both paths
// agree with mpack.Decode).
func appendScalar(dst, b []byte, pos int) ([]byte, int, bool) {
	c := b[pos]
	switch {
	case c <= 0x7f:
		return appendUint(dst, uint64(c)), pos + 1, true
	case c >= 0xe0:
		return appendInt(dst, int64(int8(c))), pos + 1, true
	case c >= 0xa0 && c <= 0xbf:
		return appendContent(dst, TagString, b, pos+1, int(c&0x1f))
	case c == 0xd9 || c == 0xc4: // str8, bin8
		if pos+1 >= len(b) {
			return dst, 0, false
		}
		tag := TagString
		if c == 0xc4 {
			tag = TagBytes
		}
		return appendContent(dst, tag, b, pos+2, int(b[pos+1]))
	case (c == 0xd6 || c == 0xd7) && pos+1 < len(b) && b[pos+1] == 0xff: // timestamp 32, 64
		if c == 0xd6 && len(b)-pos >= 6 {
			return appendTime(dst, int64(binary.BigEndian.Uint32(b[pos+2:])), 0), pos + 6, true
		}
		if c == 0xd7 && len(b)-pos >= 10 {
			v := binary.BigEndian.Uint64(b[pos+2:])
			if nsec := v >> 34; nsec <= 999_999_999 {
				return appendTime(dst, int64(v&(1<<34-1)), int(nsec)), pos + 10, true
			}
		}
		return dst, 0, false
	case c == 0xc0:
		return append(dst, TagNull), pos + 1, true
	case c == 0xc2:
		return append(dst, TagFalse), pos + 1, true
	case c == 0xc3:
		return append(dst, TagTrue), pos + 1, true
	}
	var w int
	switch c {
	case 0xca, 0xce, 0xd2:
		w = 4
	case 0xcb, 0xcf, 0xd3:
		w = 8
	case 0xcc, 0xd0:
		w = 1
	case 0xcd, 0xd1:
		w = 2
	default:
		return dst, 0, false
	}
	if len(b)-pos-1 < w {
		return dst, 0, false
	}
	var u uint64
	for _, x := range b[pos+1 : pos+1+w] {
		u = u<<8 | uint64(x)
	}
	end := pos + 1 + w
	switch c {
	case 0xca:
		return appendFloat(dst, float64(math.Float32frombits(uint32(u)))), end, true
	case 0xcb:
		return appendFloat(dst, math.Float64frombits(u)), end, true
	case 0xcc, 0xcd, 0xce, 0xcf:
		return appendUint(dst, u), end, true
	}
	shift := 64 - 8*w // sign-extend int 8/16/32/64
	return appendInt(dst, int64(u<<shift)>>shift), end, true
}

// appendContent appends the key of a string or bytes value whose n bytes
// of content start at b[p], if they are all there.
func appendContent(dst []byte, tag Tag, b []byte, p, n int) ([]byte, int, bool) {
	if n > len(b)-p {
		return dst, 0, false
	}
	dst = appendEscaped(append(dst, tag), b[p:p+n])
	return append(dst, 0, term), p + n, true
}

// rawEntry is one entry of an unsorted raw map: its key and where its value
// starts.
type rawEntry struct {
	key   []byte
	value int
}

// appendRawMap appends the key of the map of n entries whose first key is
// at b[p]. A first pass reads only the keys, skipping the values, to learn
// whether they are in order; so every value is encoded exactly once, and a
// deep nest of unsorted maps costs no more than a sorted one.
func appendRawMap(dst, b []byte, p, n, depth int) ([]byte, int, error) {
	first, sorted := p, true
	var prev []byte
	for i := 0; i < n; i++ {
		key, next, err := mapKey(b, p)
		if err != nil {
			return dst, 0, err
		}
		if i > 0 && sorted {
			switch c := bytes.Compare(prev, key); {
			case c == 0:
				return dst, 0, duplicate(key, p)
			case c > 0:
				sorted = false
			}
		}
		prev = key
		size, err := mpack.Skip(b[next:])
		if err != nil {
			return dst, 0, fmt.Errorf("map value at offset %d: %w", next, err)
		}
		p = next + size
	}
	end := p
	dst = append(dst, TagMap)
	if sorted {
		p = first
		for i := 0; i < n; i++ {
			key, next, _ := mapKey(b, p) // read above: cannot fail
			dst = appendEntryKey(dst, key)
			var err error
			if dst, p, err = appendRaw(dst, b, next, depth+1); err != nil {
				return dst, 0, err
			}
		}
		return append(dst, endList), end, nil
	}
	entries := make([]rawEntry, n)
	p = first
	for i := range entries {
		key, next, _ := mapKey(b, p)
		size, _ := mpack.Skip(b[next:])
		entries[i] = rawEntry{key, next}
		p = next + size
	}
	slices.SortFunc(entries, func(x, y rawEntry) int { return bytes.Compare(x.key, y.key) })
	for i, e := range entries {
		if i > 0 && bytes.Equal(e.key, entries[i-1].key) {
			return dst, 0, duplicate(e.key, e.value-len(e.key))
		}
		dst = appendEntryKey(dst, e.key)
		var err error
		if dst, _, err = appendRaw(dst, b, e.value, depth+1); err != nil {
			return dst, 0, err
		}
	}
	return append(dst, endList), end, nil
}

func appendEntryKey(dst, key []byte) []byte {
	dst = appendEscaped(append(dst, mapEntry), key)
	return append(dst, 0, term)
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
	h, err := mpack.ReadHead(b, pos)
	if err != nil {
		return nil, 0, err
	}
	if h.Kind != mpack.KindStr {
		return nil, 0, fmt.Errorf("%w: map key at offset %d is not a string", mpack.ErrMalformed, pos)
	}
	start := pos + h.Size
	return b[start : start+h.N], start + h.N, nil
}

func duplicate(key []byte, pos int) error {
	return fmt.Errorf("%w: duplicate map key %q at offset %d", mpack.ErrMalformed, key, pos)
}

// appendEscaped appends s with every 0x00 byte written as 0x00 0xFF.
func appendEscaped(dst, s []byte) []byte {
	for {
		i := bytes.IndexByte(s, 0)
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(append(dst, s[:i+1]...), escape)
		s = s[i+1:]
	}
}

// appendEscapedString is appendEscaped for a string.
func appendEscapedString(dst []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(append(dst, s[:i+1]...), escape)
		s = s[i+1:]
	}
}

// appendTime appends the key of the instant sec seconds and nsec
// nanoseconds after the Unix epoch, sec as time.Time.Unix returns it. The
// key counts seconds from the zero time.Time, which is how time.Time
// orders instants: its full range is exactly the range of an int64 from
// there, whereas Unix seconds overflow int64 at its lower end (t.Unix()
// wraps around, and the wrapping addition here undoes that).
func appendTime(dst []byte, sec int64, nsec int) []byte {
	s := (uint64(sec) + unixToInternal) ^ 1<<63
	dst = binary.BigEndian.AppendUint64(append(dst, TagTime), s)
	return binary.BigEndian.AppendUint32(dst, uint32(nsec))
}

// Class returns the class of v, which is the first byte of its key, or 0
// when v has no normalised form (mpack.Normalize fails). It accepts the
// same values as Append, and allocates nothing for normalised values.
func Class(v any) Tag {
	switch x := v.(type) {
	case nil:
		return TagNull
	case bool:
		if x {
			return TagTrue
		}
		return TagFalse
	case int64, uint64, float64, int, int32, uint, uint32, float32:
		return TagNumber
	case string:
		return TagString
	case []byte:
		if x == nil {
			return TagNull
		}
		return TagBytes
	case time.Time:
		return TagTime
	case uuidv7.UUID:
		return TagUUID
	case objectid.ObjectID:
		return TagObjectID
	case []any:
		if x == nil {
			return TagNull
		}
		return TagList
	case map[string]any:
		if x == nil {
			return TagNull
		}
		return TagMap
	}
	norm, err := mpack.Normalize(v)
	if err != nil {
		return 0
	}
	return Class(norm)
}

// ClassOfRaw returns the class of the raw msgpack value, TagNull for nil (a
// missing field). It reads only the value's header (and a timestamp's
// payload): the rest of a container is not validated, AppendRaw does that.
// Errors wrap mpack.ErrMalformed or, for an extension other than a
// timestamp, mpack.ErrUnsupported.
func ClassOfRaw(raw []byte) (Tag, error) {
	if raw == nil {
		return TagNull, nil
	}
	h, err := mpack.ReadHead(raw, 0)
	if err != nil {
		return 0, err
	}
	switch h.Kind {
	case mpack.KindNil:
		return TagNull, nil
	case mpack.KindFalse:
		return TagFalse, nil
	case mpack.KindTrue:
		return TagTrue, nil
	case mpack.KindInt, mpack.KindUint, mpack.KindFloat32, mpack.KindFloat64:
		return TagNumber, nil
	case mpack.KindStr:
		return TagString, nil
	case mpack.KindBin:
		return TagBytes, nil
	case mpack.KindExt:
		switch {
		case h.Ext == mpack.ExtUUID && h.N == 16:
			return TagUUID, nil
		case h.Ext == mpack.ExtObjectID && h.N == 12:
			return TagObjectID, nil
		}
		if _, err := h.Timestamp(raw, 0); err != nil {
			return 0, err
		}
		return TagTime, nil
	case mpack.KindArray:
		return TagList, nil
	}
	return TagMap, nil
}
