package jsonv

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// MaxNesting bounds how deeply arrays and objects nest in one row. It is far
// above what storh stores (storh.MaxDepth), so the library still reports
// too-deep records in its own words; this limit only keeps a hostile line
// from exhausting the stack.
const MaxNesting = 1000

var (
	// ErrSyntax is wrapped by errors for input that is not valid JSON, or
	// nests deeper than MaxNesting.
	ErrSyntax = errors.New("jsonl: invalid JSON")
	// ErrRow is wrapped by errors for valid JSON that is not a valid row:
	// not an object, a bad id, a wrapper ($date, $oid, …) whose value does
	// not fit it, or a number beyond float64.
	ErrRow = errors.New("jsonl: invalid row")
)

// Error describes why a line was rejected.
type Error struct {
	Err    error  // ErrSyntax or ErrRow
	Column int    // 1-based byte column of the problem; 0 when not about one place
	Field  string // path of the field concerned (a.b[2].c); "" when none
	Reason string

	badUTF8 bool // a string value that is not UTF-8 (see InvalidUTF8)
}

// InvalidUTF8 reports whether err is about a string value whose bytes are
// not UTF-8, which Decoder.KeepInvalidUTF8 would have kept as bytes.
func InvalidUTF8(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.badUTF8
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	if e.Column > 0 {
		fmt.Fprintf(&b, " at column %d", e.Column)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " in field %s", e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Row is one decoded line.
type Row struct {
	// ID is the record id the line names; zero means "generate one".
	ID uuidv7.UUID
	// Data is the record.
	Data map[string]any
	// ForeignID reports, for DecodeMongo, a row whose _id is not an
	// ObjectID: it stays in Data as "_id" and the record gets a new id, so
	// importing it again makes a second record.
	ForeignID bool
	// Time is the "time" of a record's JSON ({"id":…,"time":…,"data":{…}})
	// as decoded, nil when the row has none. An import ignores it, since
	// the id carries the creation time; a writer of one record given its
	// id elsewhere (the web handler's PUT) checks it against that id.
	Time any
}

// Decoder decodes lines. It remembers the keys it has seen, so rows that
// share a schema share their key strings (fewer allocations). A Decoder is
// not safe for concurrent use; the zero value is ready.
//
// Input that JSON allows but that would lose data is refused: an object
// that holds a key twice (encoding/json keeps the last value), and strings
// that are not valid UTF-8 or hold a \u escape of half a surrogate pair
// (encoding/json turns them into U+FFFD). The error names the key or the
// byte offset.
type Decoder struct {
	// KeepInvalidUTF8 decodes a string value whose bytes are not valid
	// UTF-8 to a []byte holding those bytes (written back as
	// {"$binary":…}), instead of failing. Keys must be valid UTF-8 either way.
	KeepInvalidUTF8 bool

	p parser
}

const (
	internMax    = 4096 // distinct keys remembered
	internKeyMax = 128  // longer keys are not remembered
	// internValueMax is the longest string value remembered: enum-like
	// values are short, and long ones rarely repeat.
	internValueMax = 24
	// internWindow lookups decide whether value interning pays; when it
	// does not, the next internPause short values skip it.
	internWindow = 1024
	internPause  = 16 * internWindow
)

// DecodeRow decodes one line of storh JSONL (see the package doc for the
// three row forms).
func (d *Decoder) DecodeRow(line []byte) (Row, error) {
	m, err := d.top(line)
	if err != nil {
		return Row{}, err
	}
	return envelope(m)
}

// DecodeMongo decodes one line of mongoexport output (relaxed or canonical
// Extended JSON v2, and the legacy v1 forms of $binary, $date and $regex).
func (d *Decoder) DecodeMongo(line []byte) (Row, error) {
	m, err := d.top(line)
	if err != nil {
		return Row{}, err
	}
	row := Row{Data: m}
	v, ok := m["_id"]
	if !ok {
		return row, nil
	}
	oid, ok := v.(objectid.ObjectID)
	if !ok {
		row.ForeignID = true
		return row, nil
	}
	if _, clash := m["_oid"]; clash {
		return Row{}, &Error{Err: ErrRow, Field: "_oid", Reason: "the document already has an _oid field, where the import keeps the ObjectID; rename it first"}
	}
	delete(m, "_id")
	m["_oid"] = oid
	row.ID = uuidv7.UUID(oid.UUIDv7())
	return row, nil
}

// DecodeRecord decodes the JSON of one record as Record.MarshalJSON writes
// it, {"id":"…","time":"…","data":{…}}: an object of those keys only, with
// an id and an object as data. The time is not read (the id carries it) and
// may be left out.
func (d *Decoder) DecodeRecord(b []byte) (Row, error) {
	m, err := d.top(b)
	if err != nil {
		return Row{}, err
	}
	for k := range m {
		if k != "id" && k != "data" && k != "time" {
			return Row{}, &Error{Err: ErrRow, Field: k, Reason: `a record's JSON has only the keys "id", "time" and "data"`}
		}
	}
	switch id, has := m["id"]; {
	case !has:
		return Row{}, &Error{Err: ErrRow, Field: "id", Reason: "missing: a record's JSON needs its id"}
	case id == nil:
		return Row{}, &Error{Err: ErrRow, Field: "id", Reason: "must be a UUIDv7 string, got null"}
	}
	if _, ok := m["data"]; !ok {
		return Row{}, &Error{Err: ErrRow, Field: "data", Reason: "missing: a record's JSON needs its data, an object"}
	}
	return envelope(m)
}

// DecodeObject decodes one JSON object with the row type mapping, without
// looking for the id/data envelope.
func (d *Decoder) DecodeObject(b []byte) (map[string]any, error) {
	return d.top(b)
}

// DecodeValue decodes one JSON value of any kind with the row type mapping.
func (d *Decoder) DecodeValue(b []byte) (any, error) {
	p := d.reset(b)
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i < len(p.b) {
		return nil, p.syntax("unexpected " + describe(p.b[p.i]) + " after the value")
	}
	return v, nil
}

// DecodeValuePrefix decodes the JSON value at the start of b (after any
// whitespace) with the row type mapping, and returns it with the number of
// bytes it took. What follows the value is left to the caller: it is for a
// value inside a larger syntax, such as a --where expression. Error
// columns count from the start of b.
func (d *Decoder) DecodeValuePrefix(b []byte) (v any, n int, err error) {
	p := d.reset(b)
	v, err = p.value()
	if err != nil {
		return nil, 0, err
	}
	return v, p.i, nil
}

// DecodeRow decodes one line with a fresh Decoder.
func DecodeRow(line []byte) (Row, error) { return new(Decoder).DecodeRow(line) }

// DecodeMongo decodes one mongoexport line with a fresh Decoder.
func DecodeMongo(line []byte) (Row, error) { return new(Decoder).DecodeMongo(line) }

// DecodeValue decodes one JSON value with a fresh Decoder.
func DecodeValue(b []byte) (any, error) { return new(Decoder).DecodeValue(b) }

func (d *Decoder) reset(b []byte) *parser {
	p := &d.p
	if p.keys == nil {
		p.keys = make(map[string]string)
		p.vals = make(map[string]any)
	}
	p.b, p.i, p.depth, p.path = b, 0, 0, p.path[:0]
	p.keepBad = d.KeepInvalidUTF8
	clear(p.members)
	clear(p.elems)
	p.members, p.elems = p.members[:0], p.elems[:0]
	return p
}

func (d *Decoder) top(b []byte) (map[string]any, error) {
	p := d.reset(b)
	p.ws()
	if p.i >= len(p.b) {
		return nil, p.syntax("empty line, expected a JSON object")
	}
	if p.b[p.i] != '{' {
		start := p.i
		if _, err := p.value(); err != nil {
			return nil, err
		}
		return nil, &Error{Err: ErrRow, Column: start + 1, Reason: "a row must be a JSON object, got " + kindAt(p.b[start])}
	}
	v, err := p.object()
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i < len(p.b) {
		return nil, p.syntax("unexpected " + describe(p.b[p.i]) + " after the object (one object per line)")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Err: ErrRow, Column: 1, Reason: "a row must be a JSON object, not an Extended JSON wrapper (this one is " + typeName(v) + ")"}
	}
	return m, nil
}

// envelope splits {"id":…,"data":{…}} rows from bare objects.
func envelope(m map[string]any) (Row, error) {
	data, has := m["data"]
	if !has {
		return Row{Data: m}, nil
	}
	for k := range m {
		if k != "id" && k != "data" && k != "time" {
			return Row{Data: m}, nil
		}
	}
	dm, ok := data.(map[string]any)
	if !ok {
		return Row{}, &Error{Err: ErrRow, Field: "data", Reason: "must be a JSON object, got " + typeName(data) +
			" (a record whose only fields are id/data/time must itself be wrapped: {\"data\":{…}})"}
	}
	row := Row{Data: dm, Time: m["time"]}
	switch id := m["id"].(type) {
	case nil:
	case string:
		u, err := uuidv7.Parse(id)
		if err != nil {
			return Row{}, &Error{Err: ErrRow, Field: "id", Reason: strings.TrimPrefix(err.Error(), "uuidv7: ")}
		}
		row.ID = u
	default:
		return Row{}, &Error{Err: ErrRow, Field: "id", Reason: "must be a UUIDv7 string, got " + typeName(id)}
	}
	return row, nil
}

type pathElem struct {
	key string
	idx int // -1 for an object key
}

type parser struct {
	b       []byte
	i       int
	depth   int
	keepBad bool // Decoder.KeepInvalidUTF8
	keys    map[string]string
	vals    map[string]any
	path    []pathElem
	buf     []byte // scratch for strings with escapes

	internTries, internHits, internPaused int // value interning's bookkeeping (strValue)

	// The members of the objects and the elements of the arrays being
	// decoded, innermost last: an object or array collects its own on top
	// and becomes a map or slice of the exact size once complete (no growth
	// steps, and wrappers never become maps at all).
	members []member
	elems   []any
}

// member is one decoded member of an object.
type member struct {
	key string
	val any
	col int // 1-based column of the key
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) syntax(reason string) error {
	return &Error{Err: ErrSyntax, Column: p.i + 1, Reason: reason}
}

func (p *parser) rowErr(col int, reason string) error {
	return &Error{Err: ErrRow, Column: col, Field: p.fieldPath(), Reason: reason}
}

func (p *parser) fieldPath() string {
	var b strings.Builder
	for i, e := range p.path {
		if e.idx >= 0 {
			fmt.Fprintf(&b, "[%d]", e.idx)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		if simpleKey(e.key) {
			b.WriteString(e.key)
		} else {
			b.WriteString(strconv.Quote(e.key))
		}
	}
	return b.String()
}

func simpleKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r != '_' && r != '-' && r != '$' && !('a' <= r && r <= 'z') && !('A' <= r && r <= 'Z') && !('0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

func describe(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func kindAt(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case int64, uint64, float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case []byte:
		return "binary data"
	case time.Time:
		return "a date"
	case objectid.ObjectID:
		return "an ObjectID"
	}
	return "a value of another type" // never a Go type name: messages are for users
}

func (p *parser) value() (any, error) {
	p.ws()
	if p.i >= len(p.b) {
		return nil, p.syntax("unexpected end of line, expected a value")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.strValue()
	case c == 't':
		return p.literal("true", true)
	case c == 'f':
		return p.literal("false", false)
	case c == 'n':
		return p.literal("null", nil)
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number()
	default:
		return nil, p.syntax("unexpected " + describe(c) + ", expected a value")
	}
}

func (p *parser) literal(word string, v any) (any, error) {
	if len(p.b)-p.i >= len(word) && string(p.b[p.i:p.i+len(word)]) == word {
		p.i += len(word)
		return v, nil
	}
	return nil, p.syntax("invalid literal, expected " + word)
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxNesting {
		return p.syntax(fmt.Sprintf("nested deeper than %d levels", MaxNesting))
	}
	return nil
}

func (p *parser) object() (any, error) {
	start := p.i
	p.i++ // '{'
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		p.depth--
		return map[string]any{}, nil
	}
	base := len(p.members)
	dollar := false
	for {
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			if p.i >= len(p.b) {
				return nil, p.syntax("unexpected end of line inside an object")
			}
			return nil, p.syntax("unexpected " + describe(p.b[p.i]) + ", expected a string key")
		}
		col := p.i + 1
		key, err := p.str(true)
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, p.syntax("expected ':' after the object key " + strconv.Quote(key))
		}
		p.i++
		p.path = append(p.path, pathElem{key: key, idx: -1})
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		p.path = p.path[:len(p.path)-1]
		p.members = append(p.members, member{key, v, col})
		if len(key) > 0 && key[0] == '$' {
			dollar = true
		}
		p.ws()
		if p.i >= len(p.b) {
			return nil, p.syntax("unexpected end of line inside an object")
		}
		if c := p.b[p.i]; c == ',' {
			p.i++
			continue
		} else if c == '}' {
			p.i++
			break
		} else {
			return nil, p.syntax("unexpected " + describe(c) + ", expected ',' or '}' after an object member")
		}
	}
	p.depth--
	ms := p.members[base:]
	defer func() {
		clear(ms) // no references into the row outlive it
		p.members = p.members[:base]
	}()
	if dollar && len(ms) <= 2 && (len(ms) == 1 || ms[0].key != ms[1].key) {
		if v, ok, err := p.wrapper(ms, start+1); ok || err != nil {
			return v, err
		}
	}
	m := make(map[string]any, len(ms))
	for _, e := range ms {
		m[e.key] = e.val
	}
	if len(m) != len(ms) {
		return nil, p.duplicate(ms)
	}
	return m, nil
}

// duplicate reports the first key that ms holds twice. JSON allows it, but
// only one value can be stored, and keeping the last one silently (as
// encoding/json does) would lose data.
func (p *parser) duplicate(ms []member) error {
	first := make(map[string]int, len(ms))
	for _, e := range ms {
		if col, seen := first[e.key]; seen {
			return p.rowErr(e.col, fmt.Sprintf("duplicate key %s: the object already has it at column %d; a key may appear once", strconv.Quote(e.key), col))
		}
		first[e.key] = e.col
	}
	return p.rowErr(0, "duplicate key")
}

func (p *parser) array() (any, error) {
	p.i++ // '['
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		p.depth--
		return []any{}, nil
	}
	base := len(p.elems)
	for {
		p.path = append(p.path, pathElem{idx: len(p.elems) - base})
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		p.path = p.path[:len(p.path)-1]
		p.elems = append(p.elems, v)
		p.ws()
		if p.i >= len(p.b) {
			return nil, p.syntax("unexpected end of line inside an array")
		}
		if c := p.b[p.i]; c == ',' {
			p.i++
			continue
		} else if c == ']' {
			p.i++
			break
		} else {
			return nil, p.syntax("unexpected " + describe(c) + ", expected ',' or ']' in an array")
		}
	}
	p.depth--
	es := p.elems[base:]
	a := make([]any, len(es))
	copy(a, es)
	clear(es)
	p.elems = p.elems[:base]
	return a, nil
}

// strValue reads a string value. Short ones are interned as interface
// values: the enum-like fields of a file ("info", "GET", "api") then cost
// no allocation at all, not even the interface header. Where values rarely
// repeat (ObjectIDs, dates, e-mail addresses) the lookups are wasted, so
// interning pauses for a while when fewer than one lookup in four finds
// its value.
func (p *parser) strValue() (any, error) {
	start := p.i + 1
	for i := start; i < len(p.b) && i-start <= internValueMax; i++ {
		c := p.b[i]
		if c == '"' {
			p.i = i + 1
			raw := p.b[start:i]
			if p.internPaused > 0 {
				p.internPaused--
				return string(raw), nil
			}
			if v, ok := p.vals[string(raw)]; ok {
				p.internHits++
				p.internTries++
				return v, nil
			}
			var v any = string(raw)
			if len(p.vals) < internMax {
				p.vals[string(raw)] = v
			}
			if p.internTries++; p.internTries == internWindow {
				if p.internHits < internWindow/4 {
					p.internPaused = internPause
				}
				p.internTries, p.internHits = 0, 0
			}
			return v, nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
	}
	s, raw, err := p.strSlow(start, false)
	if raw != nil {
		return raw, err
	}
	return s, err
}

// str reads a string at p.i (the opening quote). Keys are interned.
func (p *parser) str(key bool) (string, error) {
	start := p.i + 1
	for i := start; i < len(p.b); i++ {
		c := p.b[i]
		if c == '"' {
			p.i = i + 1
			if key {
				return p.intern(p.b[start:i]), nil
			}
			return string(p.b[start:i]), nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			s, _, err := p.strSlow(start, key)
			return s, err
		}
	}
	p.i = len(p.b)
	return "", p.syntax("unterminated string")
}

func (p *parser) intern(b []byte) string {
	if s, ok := p.keys[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(p.keys) < internMax && len(b) <= internKeyMax {
		p.keys[s] = s
	}
	return s
}

// strSlow handles escapes and non-ASCII bytes. Bytes that are not UTF-8
// fail, or with p.keepBad make a value string a []byte of its bytes (raw is
// then non-nil); a \u escape of half a surrogate pair always fails: it has
// no UTF-8 form.
func (p *parser) strSlow(start int, key bool) (s string, raw []byte, err error) {
	buf := p.buf[:0]
	invalid := false
	i := start
	for i < len(p.b) {
		c := p.b[i]
		switch {
		case c == '"':
			p.i = i + 1
			p.buf = buf
			if invalid {
				return "", append([]byte{}, buf...), nil
			}
			if key {
				return p.intern(buf), nil, nil
			}
			return string(buf), nil, nil
		case c == '\\':
			if i+1 >= len(p.b) {
				p.i = i
				return "", nil, p.syntax("unterminated string")
			}
			e := p.b[i+1]
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(p.b, i+2)
				if !ok {
					p.i = i
					return "", nil, p.syntax(`invalid \u escape: expected four hex digits`)
				}
				if utf16.IsSurrogate(r) {
					if r2, ok := hex4(p.b, i+8); ok && i+7 < len(p.b) && p.b[i+6] == '\\' && p.b[i+7] == 'u' {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							buf = utf8.AppendRune(buf, dec)
							i += 12
							continue
						}
					}
					return "", nil, p.rowErr(i+1, fmt.Sprintf(`%s is half of a UTF-16 surrogate pair without the other half: it stands for no character and has no UTF-8 form`, p.b[i:i+6]))
				}
				buf = utf8.AppendRune(buf, r)
				i += 6
				continue
			default:
				p.i = i
				return "", nil, p.syntax("invalid escape " + strconv.Quote(string(p.b[i:i+2])) + " in a string")
			}
			i += 2
		case c < 0x20:
			p.i = i
			return "", nil, p.syntax(fmt.Sprintf("control character 0x%02x in a string: write it as \\u%04x", c, c))
		case c < 0x80:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(p.b[i:])
			if r == utf8.RuneError && size == 1 {
				if key || !p.keepBad {
					p.i = i
					what := "a string"
					if key {
						what = "a key"
					}
					return "", nil, &Error{Err: ErrSyntax, Column: i + 1, Field: p.fieldPath(), badUTF8: !key,
						Reason: fmt.Sprintf("invalid UTF-8 in %s: byte 0x%02x at byte offset %d", what, c, i)}
				}
				invalid = true
			}
			buf = append(buf, p.b[i:i+size]...)
			i += size
		}
	}
	p.i = len(p.b)
	p.buf = buf
	return "", nil, p.syntax("unterminated string")
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number reads a JSON number: integers without fraction or exponent become
// int64 (uint64 above MaxInt64, float64 beyond), the rest float64.
func (p *parser) number() (any, error) {
	b, start := p.b, p.i
	i := start
	neg := b[i] == '-'
	if neg {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		p.i = i
		return nil, p.syntax("invalid number: expected a digit")
	}
	intEnd, float := i, false
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			p.i = i
			return nil, p.syntax("invalid number: expected a digit after '.'")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		float = true
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			p.i = i
			return nil, p.syntax("invalid number: expected a digit in the exponent")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		float = true
	}
	p.i = i
	if !float {
		digits := b[start:intEnd]
		if neg {
			digits = digits[1:]
		}
		if u, ok := parseUint(digits); ok {
			switch {
			case !neg && u <= math.MaxInt64:
				return int64(u), nil
			case !neg:
				return u, nil
			case u <= 1<<63:
				return int64(-u), nil // two's complement: exact down to MinInt64
			}
		}
	}
	f, err := strconv.ParseFloat(string(b[start:i]), 64)
	if err != nil && (math.IsInf(f, 0) || !errors.Is(err, strconv.ErrRange)) {
		return nil, p.rowErr(start+1, "number "+string(b[start:i])+" is beyond the range of a float64")
	}
	return f, nil
}

func parseUint(d []byte) (uint64, bool) {
	if len(d) > 20 {
		return 0, false
	}
	var u uint64
	for _, c := range d {
		n := uint64(c - '0')
		if u > (math.MaxUint64-n)/10 {
			return 0, false
		}
		u = u*10 + n
	}
	return u, true
}
