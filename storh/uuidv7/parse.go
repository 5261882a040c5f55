package uuidv7

import (
	"strconv"
	"strings"
)

// maxQuoted is how much of a bad input a [ParseError] keeps. Inputs are
// often user-supplied; a megabyte of garbage should not end up in a log line.
const maxQuoted = 64

// Reasons a [ParseError] gives. They are a closed set so that callers can
// switch on them.
const (
	ReasonLength  = "length"  // not exactly 36 bytes
	ReasonDash    = "dash"    // no '-' at offset 8, 13, 18 or 23
	ReasonHex     = "hex"     // a byte that is not a hex digit where one belongs
	ReasonVersion = "version" // the version digit (offset 14) is not '7'
	ReasonVariant = "variant" // the variant digit (offset 19) is not one of 89abAB
)

// ParseError describes why a text form is not a UUIDv7. Errors from [Parse],
// [ParseBytes], [Validate], [TimestampMs] and [UUID.UnmarshalText] are
// *ParseError values; they wrap [ErrInvalid], so errors.Is(err, ErrInvalid)
// holds, and errors.As gives the details.
//
// Building one costs one allocation (two from [ParseBytes], which must copy
// the input); the message is only formatted when Error is called.
type ParseError struct {
	// Input is the rejected text, cut to its first 64 bytes.
	Input string
	// Offset is the byte offset of the first offending byte, or for
	// ReasonLength the length of the whole input.
	Offset int
	// Reason is one of ReasonLength, ReasonDash, ReasonHex, ReasonVersion
	// and ReasonVariant.
	Reason string

	truncated bool
}

// Error formats the message, for example
//
//	uuidv7: invalid UUIDv7 "017f22e2-79b0-7cc3-98c4-dc0c0c07398g": non-hex character 'g' at offset 35
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalid.Error())
	b.WriteByte(' ')
	b.WriteString(strconv.Quote(e.Input))
	if e.truncated {
		b.WriteString("...")
	}
	b.WriteString(": ")
	switch e.Reason {
	case ReasonLength:
		b.WriteString("length ")
		b.WriteString(strconv.Itoa(e.Offset))
		b.WriteString(", want 36 (canonical 8-4-4-4-12 form without braces, prefix or whitespace)")
	case ReasonDash:
		b.WriteString("want '-' at offset ")
		b.WriteString(strconv.Itoa(e.Offset))
		b.WriteString(", found ")
		b.WriteString(e.quoteAt())
	case ReasonHex:
		b.WriteString("non-hex character ")
		b.WriteString(e.quoteAt())
		b.WriteString(" at offset ")
		b.WriteString(strconv.Itoa(e.Offset))
	case ReasonVersion:
		b.WriteString("version ")
		b.WriteString(e.quoteAt())
		b.WriteString(" at offset 14, want '7'")
	case ReasonVariant:
		b.WriteString("variant ")
		b.WriteString(e.quoteAt())
		b.WriteString(" at offset 19, want one of 8, 9, a, b (RFC 9562 variant)")
	default:
		b.WriteString(e.Reason)
	}
	return b.String()
}

// Unwrap returns [ErrInvalid].
func (e *ParseError) Unwrap() error { return ErrInvalid }

// quoteAt quotes the byte at Offset, as a character if it is ASCII.
func (e *ParseError) quoteAt() string {
	if e.Offset < 0 || e.Offset >= len(e.Input) {
		return "end of input"
	}
	c := e.Input[e.Offset]
	if c < 0x80 {
		return strconv.QuoteRune(rune(c))
	}
	return "byte 0x" + strconv.FormatUint(uint64(c), 16)
}

// hexValue maps an ASCII hex digit to its value and everything else to 0xff.
var hexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range 10 {
		t['0'+i] = byte(i)
	}
	for i := range 6 {
		t['a'+i] = byte(10 + i)
		t['A'+i] = byte(10 + i)
	}
	return t
}()

// decode parses the canonical form. On failure it returns the offset and
// reason of the first problem instead of an error, so that [IsValid] can
// reject input without allocating and the callers decide what an error costs.
func decode[T string | []byte](s T, anyVersion bool) (u UUID, off int, reason string) {
	if len(s) != 36 {
		return Nil, len(s), ReasonLength
	}
	// Fast path: all checks with one branch at the end; the slow scan below
	// only runs on bad input, to report the leftmost problem.
	var bad byte
	for i, o := range hexOffsets {
		hi, lo := hexValue[s[o]], hexValue[s[o+1]]
		bad |= hi | lo
		u[i] = hi<<4 | lo
	}
	if bad&0xf0 != 0 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		for i := range 36 {
			switch i {
			case 8, 13, 18, 23:
				if s[i] != '-' {
					return Nil, i, ReasonDash
				}
			default:
				if hexValue[s[i]] == 0xff {
					return Nil, i, ReasonHex
				}
			}
		}
	}
	if anyVersion {
		return u, 0, ""
	}
	if u[6]>>4 != 7 {
		return Nil, 14, ReasonVersion
	}
	if u[8]&0xc0 != 0x80 {
		return Nil, 19, ReasonVariant
	}
	return u, 0, ""
}

func newParseError(input string, off int, reason string) *ParseError {
	e := &ParseError{Input: input, Offset: off, Reason: reason}
	if len(input) > maxQuoted {
		e.Input, e.truncated = input[:maxQuoted], true
	}
	return e
}

// Parse parses the canonical text form of a UUIDv7: exactly 36 characters,
// dashes at offsets 8, 13, 18 and 23, hex digits in either case elsewhere,
// version digit '7' and variant digit one of 8, 9, a, b (or A, B).
// Everything else is rejected, including braces, a "urn:uuid:" prefix, the
// 32-digit form without dashes, surrounding whitespace and other versions.
//
// On failure the error is a [*ParseError] wrapping [ErrInvalid] that names
// the first problem; layout and digits are checked before version and
// variant. Parse does not allocate on success and allocates once on failure.
func Parse(s string) (UUID, error) {
	u, off, reason := decode(s, false)
	if reason != "" {
		return Nil, newParseError(s, off, reason)
	}
	return u, nil
}

// ParseBytes is [Parse] for text held in a byte slice. It does not retain b.
// It does not allocate on success and allocates twice on failure (the error
// and a copy of at most 64 bytes of b).
func ParseBytes(b []byte) (UUID, error) {
	u, off, reason := decode(b, false)
	if reason != "" {
		e := newParseError(string(b[:min(len(b), maxQuoted)]), off, reason)
		e.truncated = len(b) > maxQuoted
		return Nil, e
	}
	return u, nil
}

// ParseAny parses the canonical text form of a UUID of any version and
// variant, by the layout rules of [Parse]: for UUIDs that are data, such as
// a key from another system stored in a record, rather than ids. The result
// is not necessarily a UUIDv7; [UUID.IsV7] says whether it is. It does not
// allocate on success.
func ParseAny(s string) (UUID, error) {
	u, off, reason := decode(s, true)
	if reason != "" {
		return Nil, newParseError(s, off, reason)
	}
	return u, nil
}

// MustParse is like [Parse] but panics on error. It is meant for tests,
// examples and package-level fixtures.
func MustParse(s string) UUID {
	u, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// IsValid reports whether s is a UUIDv7 in canonical text form, by the rules
// of [Parse]. It never allocates.
func IsValid(s string) bool {
	_, _, reason := decode(s, false)
	return reason == ""
}

// Validate returns nil if s is a UUIDv7 in canonical text form, else the
// error [Parse] would return. It does not allocate on success.
func Validate(s string) error {
	_, err := Parse(s)
	return err
}

// TimestampMs returns the Unix millisecond timestamp of the UUIDv7 in s,
// after checking s by the rules of [Parse]. It does not allocate on success.
func TimestampMs(s string) (int64, error) {
	u, err := Parse(s)
	if err != nil {
		return 0, err
	}
	return u.TimestampMs(), nil
}
