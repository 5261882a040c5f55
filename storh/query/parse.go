package query

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/storhdb/storh-go/storh/internal/jsonv"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Parse reads a condition in the text syntax the CLI's --where takes
// (docs/cli.md):
//
//	level=error and (status>=500 or path^=/api)
//	tags contains go        user.name in [ana, bob]        deleted missing
//
// The grammar (words are case-insensitive; spaces between tokens are
// optional wherever the tokens stay apart):
//
//	expr    = and { "or" and }
//	and     = unary { "and" unary }
//	unary   = "not" unary | "(" expr ")" | cond
//	cond    = path ( cmp value | "^=" value | "in" list | "not" "in" list
//	               | "contains" value | "between" value "and" value
//	               | "exists" | "missing" | "elemmatch" "(" expr ")" )
//	cmp     = "=" | "!=" | ">" | ">=" | "<" | "<="
//	path    = segment { "." segment }
//	segment = a bare name | a JSON string ("a.b" is one key with a dot)
//	value   = a JSON string, object or list | a typed id | a bare word
//	typed id = "uuid:" UUID text | "oid:" 24 hex digits
//	list    = "[" [ value { "," value } ] "]"
//
// A bare name runs up to a space or one of . = ! < > ^ ~ * $ | ( ) [ ] { }
// , " '. A bare word runs up to a space or one of ( ) [ ] { } , " and is
// the JSON number, true, false or null it spells, a typed id when it starts
// with uuid: or oid: (to match such text, quote it), else text (after ^= it
// is always text). JSON values use the value mapping of JSON lines, so 5 is
// an integer, 5.0 a float and {"$date":"…"} a time. Operators are matched
// longest first, so >= is never > followed by "=…". The words and, or and
// not are never names or bare words: quote them ("not"=1, x="and"). The
// paths inside elemmatch's parentheses start at each element of the
// field's lists: items elemmatch (sku = X and qty > 2).
//
// Every error is a *ParseError that names the column of the fault and
// wraps ErrInvalidQuery. The limits are those of every condition:
// MaxCondBytes of text, MaxCondDepth, MaxCondNodes.
func Parse(text string) (Cond, error) {
	if len(text) > MaxCondBytes {
		return Cond{}, &ParseError{Column: 1, Reason: fmt.Sprintf("the condition is %d bytes; the limit is %d", len(text), MaxCondBytes)}
	}
	p := &parser{src: text}
	c, err := p.parse()
	return c, p.located(err)
}

// ParseField reads one field path in the text syntax (author.name,
// "a.b".c: see Parse), as an order or an index names its field. Errors are
// as Parse's.
func ParseField(text string) (FieldRef, error) {
	p := &parser{src: text}
	f, err := p.field()
	if err == nil && p.i < len(p.src) {
		err = p.errAt(p.i, "expected the end after the field name; got %s (one field only)", p.found())
	}
	if err != nil {
		return FieldRef{}, p.located(err)
	}
	return f, nil
}

// ParseFields reads field paths in the text syntax separated by commas,
// as a compound index names its fields (kind,publishedAt). Errors are as
// Parse's.
func ParseFields(text string) ([]FieldRef, error) {
	p := &parser{src: text}
	var out []FieldRef
	for {
		p.space()
		f, err := p.field()
		if err != nil {
			return nil, p.located(err)
		}
		out = append(out, f)
		p.space()
		if p.i == len(p.src) {
			return out, nil
		}
		if p.src[p.i] != ',' {
			return nil, p.located(p.errAt(p.i, "expected ',' and another field, or the end; got %s", p.found()))
		}
		p.i++
	}
}

// ParseError says why a condition's text or JSON was refused, and where.
// It wraps ErrInvalidQuery and, for JSON that does not decode, the JSON
// lines decoder's error (jsonl.ErrSyntax or jsonl.ErrRow).
type ParseError struct {
	// Column is the 1-based column, in characters, of the fault in the
	// text; 0 for JSON.
	Column int
	// Node is the JSON node at fault, as a path from "$", the whole
	// condition: "$.and[2]" is the third condition of a top-level and,
	// "$.not.or[0]" and so on; "" for text.
	Node string
	// Reason says what is wrong and, where it can, what was expected.
	Reason string
	// Err is the JSON decoding error, if that is the fault.
	Err error
}

func (e *ParseError) Error() string {
	if e.Column == 0 {
		return fmt.Sprintf("%s: condition at %s: %s", ErrInvalidQuery, e.Node, e.Reason)
	}
	return fmt.Sprintf("%s: at column %d: %s", ErrInvalidQuery, e.Column, e.Reason)
}

func (e *ParseError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidQuery}
	}
	return []error{ErrInvalidQuery, e.Err}
}

// syntaxError is a fault at a byte offset of the text, until located turns
// the offset into a column.
type syntaxError struct {
	at  int
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

// located turns a *syntaxError into the *ParseError that callers see.
func (p *parser) located(err error) error {
	var se *syntaxError
	if errors.As(err, &se) {
		return &ParseError{Column: column(p.src, se.at), Reason: se.msg}
	}
	return err
}

// column is the 1-based column, in characters, of the byte offset at.
func column(s string, at int) int {
	if at > len(s) {
		at = len(s)
	}
	return utf8.RuneCountInString(s[:at]) + 1
}

type parser struct {
	src   string
	i     int
	depth int
	// bare is the last bare word read as a value, for the hint about
	// values with spaces.
	bare struct {
		prefix     string // field and operator
		start, end int
	}
}

func (p *parser) errAt(at int, format string, args ...any) error {
	return &syntaxError{at: at, msg: fmt.Sprintf(format, args...)}
}

// libErr is an error of the builders, at the byte offset at.
func (p *parser) libErr(at int, err error) error {
	return p.errAt(at, "%s", strings.TrimPrefix(err.Error(), ErrInvalidQuery.Error()+": "))
}

func (p *parser) parse() (Cond, error) {
	if !utf8.ValidString(p.src) {
		at := 0
		for at < len(p.src) {
			r, size := utf8.DecodeRuneInString(p.src[at:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			at += size
		}
		return Cond{}, p.errAt(at, "the text is not valid UTF-8")
	}
	p.space()
	if p.i == len(p.src) {
		return Cond{}, p.errAt(0, "expected a condition, like level=error or n>=5; got nothing")
	}
	c, err := p.or()
	if err != nil {
		return Cond{}, err
	}
	p.space()
	if p.i < len(p.src) {
		if p.src[p.i] == ')' {
			return Cond{}, p.errAt(p.i, "unexpected ')': no '(' is open")
		}
		msg := fmt.Sprintf("expected and, or, or the end of the expression; got %s", p.found())
		return Cond{}, &syntaxError{at: p.i, msg: msg + p.spaceHint()}
	}
	return c, nil
}

// spaceHint suggests quoting when a bare word value is followed by more
// text, as in msg=hello world.
func (p *parser) spaceHint() string {
	b := p.bare
	if b.end == 0 || !p.wordAt(p.i) {
		return ""
	}
	end := p.i
	for end < len(p.src) {
		r, size := utf8.DecodeRuneInString(p.src[end:])
		if !wordRune(r) {
			break
		}
		end += size
	}
	if p.src[b.end:p.i] != strings.Repeat(" ", p.i-b.end) {
		return ""
	}
	return fmt.Sprintf(" (a value with spaces must be quoted: %s%s)", b.prefix, jsonQuote(p.src[b.start:end]))
}

// or and and read operands joined by their word; the combination is
// built by the builders, whose limits apply as they do in Go.
func (p *parser) or() (Cond, error) { return p.joined(opOr, p.and) }

func (p *parser) and() (Cond, error) { return p.joined(opAnd, p.unary) }

func (p *parser) joined(o op, operand func() (Cond, error)) (Cond, error) {
	p.space()
	at := p.i
	c, err := operand()
	if err != nil {
		return Cond{}, err
	}
	kids := []Cond{c}
	for p.keyword(o.text()) {
		k, err := operand()
		if err != nil {
			return Cond{}, err
		}
		kids = append(kids, k)
	}
	if len(kids) == 1 {
		return c, nil
	}
	all := combine(o, kids)
	if all.err != nil {
		return Cond{}, p.libErr(at, all.err)
	}
	return all, nil
}

// enter bounds the parser's recursion as MaxCondDepth bounds the
// condition it makes, and lists within values as deeply.
func (p *parser) enter(what string) error {
	if p.depth++; p.depth > MaxCondDepth {
		return p.errAt(p.i, "%s nest more than %d levels deep", what, MaxCondDepth)
	}
	return nil
}

func (p *parser) unary() (Cond, error) {
	if err := p.enter("conditions"); err != nil {
		return Cond{}, err
	}
	defer func() { p.depth-- }()
	p.space()
	at := p.i
	switch {
	case p.keyword(opNot.text()):
		k, err := p.unary()
		if err != nil {
			return Cond{}, err
		}
		c := Not(k)
		if c.err != nil {
			return Cond{}, p.libErr(at, c.err)
		}
		return c, nil
	case p.i < len(p.src) && p.src[p.i] == '(':
		open := p.i
		p.i++
		c, err := p.or()
		if err != nil {
			return Cond{}, err
		}
		p.space()
		if p.i >= len(p.src) || p.src[p.i] != ')' {
			msg := fmt.Sprintf("expected and, or, or ')' to close the '(' at column %d; got %s", column(p.src, open), p.found())
			return Cond{}, &syntaxError{at: p.i, msg: msg + p.spaceHint()}
		}
		p.i++
		return c, nil
	}
	return p.cond()
}

// cond reads one condition: a path, an operator and its operands.
func (p *parser) cond() (Cond, error) {
	p.space()
	at := p.i
	if p.i >= len(p.src) {
		return Cond{}, p.errAt(p.i, "expected a condition, like level=error; got the end")
	}
	if w := p.word(); w == opAnd.text() || w == opOr.text() {
		return Cond{}, p.errAt(p.i, "expected a condition, like level=error; got the word %s", p.src[p.i:p.i+len(w)])
	}
	path, err := p.path()
	if err != nil {
		return Cond{}, err
	}
	field := p.src[at:p.i]
	p.space()
	opAt := p.i
	var o op
	var vals []any
	if p.i < len(p.src) && strings.ContainsRune(opRunes, rune(p.src[p.i])) {
		for _, so := range symbolOps {
			if strings.HasPrefix(p.src[p.i:], so.text()) {
				o = so
				break
			}
		}
		if o == 0 {
			end := p.i
			for end < len(p.src) && strings.ContainsRune(opRunes, rune(p.src[end])) {
				end++
			}
			return Cond{}, p.errAt(p.i, "unknown operator %q; the operators are %s", p.src[p.i:end], opList())
		}
		p.i += len(o.text())
		v, err := p.value(valueCtx{op: o, field: field, opText: o.text()})
		if err != nil {
			return Cond{}, err
		}
		vals = []any{v}
	} else {
		switch w := p.word(); {
		case p.keyword(opIn.text()):
			o = opIn
		case w == opNot.text():
			p.keyword(opNot.text())
			if !p.keyword(opIn.text()) {
				p.space()
				return Cond{}, p.errAt(p.i, "expected in after not (field not in [a, b]); got %s", p.found())
			}
			o = opNotIn
		case p.keyword(opContains.text()):
			o = opContains
		case p.keyword(opBetween.text()):
			o = opBetween
		case p.keyword(opExists.text()):
			o = opExists
		case p.keyword(opMissing.text()):
			o = opMissing
		case p.keyword(opElemMatch.text()):
			p.space()
			if p.i >= len(p.src) || p.src[p.i] != '(' {
				return Cond{}, p.errAt(p.i, "expected a condition in parentheses after elemmatch, like %s elemmatch (sku = X and qty > 2); got %s", field, p.found())
			}
			kid, err := p.unary()
			if err != nil {
				return Cond{}, err
			}
			c := FieldPath(path...).ElemMatch(kid)
			if c.err != nil {
				return Cond{}, p.libErr(at, c.err)
			}
			return c, nil
		default:
			return Cond{}, p.errAt(p.i, "expected an operator after the field %s (%s); got %s", field, opList(), p.found())
		}
		switch o.takes() {
		case valueList:
			p.space()
			if p.i >= len(p.src) || p.src[p.i] != '[' {
				return Cond{}, p.errAt(p.i, "expected a list after %s, like %s %s [a, b]; got %s", o.text(), field, o.text(), p.found())
			}
			if vals, err = p.list(field); err != nil {
				return Cond{}, err
			}
		case oneValue:
			v, err := p.value(valueCtx{op: o, field: field, opText: p.src[opAt:p.i]})
			if err != nil {
				return Cond{}, err
			}
			vals = []any{v}
		case twoValues:
			lo, err := p.value(valueCtx{op: o, field: field, opText: p.src[opAt:p.i]})
			if err != nil {
				return Cond{}, err
			}
			if !p.keyword(opAnd.text()) {
				p.space()
				return Cond{}, p.errAt(p.i, "expected and after the lower bound, as in %s between 1 and 5; got %s", field, p.found())
			}
			p.space()
			hiAt := p.i
			hi, err := p.value(valueCtx{op: opBetween, upper: true, field: field})
			if err != nil {
				return Cond{}, err
			}
			lc, _ := rangeKind(lo)
			if hc, _ := rangeKind(hi); lc != hc {
				return Cond{}, p.errAt(hiAt, "the bounds of between must be of one type; got %s and %s", lc, hc)
			}
			vals = []any{lo, hi}
		}
	}
	return p.build(at, o, path, vals)
}

// opRunes are the characters symbol operators are made of, and some that
// people try as operators.
const opRunes = "=!<>^~*$|"

// build makes the condition with the builders, which refuse what the
// library refuses; the error is at the condition's column.
func (p *parser) build(at int, o op, path []string, vals []any) (Cond, error) {
	if o == opGt || o == opGte || o == opLt || o == opLte || o == opBetween {
		for _, v := range vals {
			if k, ok := rangeKind(v); !ok {
				return Cond{}, p.errAt(at, "%s compares numbers, text, booleans, times, bytes or ids, not %s (to find %s, use = or contains)", o.text(), k, k)
			}
		}
	}
	c := FieldPath(path...).with(o, vals)
	if c.err != nil {
		return Cond{}, p.libErr(at, c.err)
	}
	return c, nil
}

// field reads a path as a FieldRef, refused as the builders refuse it.
func (p *parser) field() (FieldRef, error) {
	at := p.i
	path, err := p.path()
	if err != nil {
		return FieldRef{}, err
	}
	f := FieldPath(path...)
	if f.err != nil {
		return FieldRef{}, p.libErr(at, f.err)
	}
	return f, nil
}

// rangeKind names a value's class for ranges, and whether ranges compare it.
func rangeKind(v any) (string, bool) {
	switch v.(type) {
	case int64, uint64, float64:
		return "a number", true
	case string:
		return "text", true
	case bool:
		return "a boolean", true
	case time.Time:
		return "a time", true
	case []byte:
		return "bytes", true
	case uuidv7.UUID:
		return "a UUID", true
	case objectid.ObjectID:
		return "an ObjectID", true
	case nil:
		return "null", false
	case []any:
		return "a list", false
	case map[string]any:
		return "an object", false
	}
	return "this value", false
}

// path reads a field path: segments, bare or JSON strings, joined by dots.
func (p *parser) path() ([]string, error) {
	var segs []string
	for {
		if p.i < len(p.src) && p.src[p.i] == '"' {
			v, n, err := new(jsonv.Decoder).DecodeValuePrefix([]byte(p.src[p.i:]))
			if err != nil {
				return nil, p.jsonErr(err, "field name")
			}
			segs = append(segs, v.(string)) // a '"' starts a string or fails
			p.i += n
		} else {
			start := p.i
			for p.i < len(p.src) {
				r, size := utf8.DecodeRuneInString(p.src[p.i:])
				if !nameRune(r) {
					break
				}
				p.i += size
			}
			if p.i == start {
				if len(segs) > 0 {
					return nil, p.errAt(p.i, "expected a field name after '.'; got %s", p.found())
				}
				return nil, p.errAt(p.i, "expected a field name; got %s", p.found())
			}
			segs = append(segs, p.src[start:p.i])
		}
		if p.i < len(p.src) && p.src[p.i] == '.' {
			p.i++
			continue
		}
		return segs, nil
	}
}

// valueCtx is where a value is read: after which operator, of which
// condition, or inside a list.
type valueCtx struct {
	op     op     // the operator before the value
	upper  bool   // between's upper bound, after its and
	field  string // the condition's path as typed
	opText string // the operator as typed, for suggestions
	list   bool   // an element of a list
}

// value reads a value.
func (p *parser) value(c valueCtx) (any, error) {
	p.space()
	if p.i >= len(p.src) {
		if c.op == opEq {
			return nil, p.errAt(p.i, "expected a value after =; got the end (for the empty text write %s=\"\")", c.field)
		}
		return nil, p.errAt(p.i, "expected a value after %s; got the end", c.what())
	}
	start := p.i
	switch ch := p.src[p.i]; ch {
	case '"', '{':
		v, n, err := new(jsonv.Decoder).DecodeValuePrefix([]byte(p.src[p.i:]))
		if err != nil {
			return nil, p.jsonErr(err, "value")
		}
		p.i += n
		if c.op == opPrefix {
			if _, ok := v.(string); !ok {
				return nil, p.errAt(start, "^= needs text, not %s", kindOf(v))
			}
		}
		return v, nil
	case '[':
		if c.op == opPrefix {
			return nil, p.errAt(start, "^= needs text, not a list")
		}
		return p.list(c.field)
	case '\'':
		return nil, p.errAt(p.i, `text is quoted with double quotes, as a JSON string: %s"…" (in the shell, put the whole --where in single quotes)`, c.prefix())
	case '=', '!', '<', '>', '^', '~':
		w := p.src[start:p.wordEnd(start)]
		switch {
		case c.list:
		case c.opText == "=" && ch == '=':
			return nil, p.errAt(start, "'==' is not an operator; write %s=%s (for a value that starts with '=', quote it: %s=%s)", c.field, w[1:], c.field, jsonQuote(w))
		case c.opText == "<" && ch == '>':
			return nil, p.errAt(start-1, "'<>' is not an operator; write %s!=%s", c.field, w[1:])
		case c.opText == "=" && (ch == '<' || ch == '>' || ch == '!'):
			return nil, p.errAt(start-1, "'=%c' is not an operator; did you mean %s%c=%s?", ch, c.field, ch, w[1:])
		}
		return nil, p.errAt(start, "a value that starts with '%c' must be quoted: %s%s", ch, c.prefix(), jsonQuote(w))
	}
	end := p.wordEnd(p.i)
	if end == p.i {
		return nil, p.errAt(p.i, "expected a value after %s; got %s", c.what(), p.found())
	}
	w := p.src[p.i:end]
	if lw := lowerWord(w); lw == opAnd.text() || lw == opOr.text() || lw == opNot.text() {
		return nil, p.errAt(p.i, "expected a value after %s; got the word %s (to match that text, quote it: %s)", c.what(), w, jsonQuote(w))
	}
	p.i = end
	if !c.list {
		p.bare.prefix, p.bare.start, p.bare.end = c.prefix(), start, end
	}
	if c.op == opPrefix {
		return w, nil
	}
	if v, ok, err := typedID(w); ok {
		if err != nil {
			return nil, p.errAt(start, "%s (to match the text, quote it: %s%s)", err, c.prefix(), jsonQuote(w))
		}
		return v, nil
	}
	v, err := jsonv.DecodeValue([]byte(w))
	switch {
	case err == nil:
		return v, nil
	case errors.Is(err, jsonv.ErrRow):
		return nil, p.errAt(start, "%s is JSON, but not a value storh can match: %s", w, jsonReason(err))
	}
	return w, nil
}

// typedID reads a bare word that names a typed id, uuid:<UUID text> or
// oid:<24 hex digits>: ok reports whether w has one of those prefixes, err
// whether what follows is no id.
func typedID(w string) (v any, ok bool, err error) {
	switch lw := strings.ToLower(w); {
	case strings.HasPrefix(lw, "uuid:"):
		u, err := uuidv7.ParseAny(w[len("uuid:"):])
		if err != nil {
			return nil, true, fmt.Errorf("%s is not a UUID: uuid: takes the 36-character text form, like uuid:0190a4f4-5c3b-7def-8123-456789abcdef", w)
		}
		return u, true, nil
	case strings.HasPrefix(lw, "oid:"):
		id, err := objectid.Parse(w[len("oid:"):])
		if err != nil {
			return nil, true, fmt.Errorf("%s is not an ObjectID: oid: takes 24 hex digits, like oid:5f1a2b3c4d5e6f7a8b9c0d1e", w)
		}
		return id, true, nil
	}
	return nil, false, nil
}

// what names the place of a value for messages.
func (c valueCtx) what() string {
	switch {
	case c.list:
		return "'[' or ','"
	case c.upper:
		return "between's and"
	}
	return c.op.text()
}

// prefix is the text a suggested value follows: the field and operator,
// as typed (nothing inside a list).
func (c valueCtx) prefix() string {
	if c.list {
		return ""
	}
	if c.op.isSymbol() {
		return c.field + c.opText
	}
	return c.field + " " + c.opText + " "
}

// list reads [a, b, …]; the elements are values.
func (p *parser) list(field string) ([]any, error) {
	open := p.i
	if err := p.enter("lists"); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.i++ // '['
	out := []any{}
	p.space()
	if p.i < len(p.src) && p.src[p.i] == ']' {
		p.i++
		return out, nil
	}
	for {
		p.space()
		if p.i < len(p.src) && (p.src[p.i] == ',' || p.src[p.i] == ']') {
			return nil, p.errAt(p.i, "expected a value in the list; got %s", p.found())
		}
		v, err := p.value(valueCtx{field: field, list: true})
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.space()
		if p.i >= len(p.src) {
			return nil, p.errAt(p.i, "expected ',' or ']' to close the list at column %d; got the end", column(p.src, open))
		}
		switch p.src[p.i] {
		case ',':
			p.i++
			continue
		case ']':
			p.i++
			p.bare.end = 0
			return out, nil
		}
		return nil, p.errAt(p.i, "expected ',' or ']' to close the list at column %d; got %s", column(p.src, open), p.found())
	}
}

// jsonErr turns a JSON decoding error into one at its column here.
func (p *parser) jsonErr(err error, what string) error {
	var e *jsonv.Error
	if !errors.As(err, &e) {
		return p.errAt(p.i, "invalid %s: %v", what, err)
	}
	at := p.i
	if e.Column > 0 {
		at += e.Column - 1
	}
	// Columns inside the reason count from the value's start too.
	reason := jsonColumn.ReplaceAllStringFunc(jsonReason(err), func(m string) string {
		var c int
		fmt.Sscanf(m, "at column %d", &c)
		return fmt.Sprintf("at column %d", column(p.src, p.i+c-1))
	})
	if errors.Is(err, jsonv.ErrRow) {
		return p.errAt(at, "the %s is JSON, but not one storh can match: %s", what, reason)
	}
	return p.errAt(at, "invalid JSON in the %s: %s", what, reason)
}

var jsonColumn = regexp.MustCompile(`at column [0-9]+`)

// jsonReason is what a JSON error says, in this context's words.
func jsonReason(err error) string {
	var e *jsonv.Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	r := strings.ReplaceAll(e.Reason, "end of line", "end")
	if e.Field != "" {
		r = "in " + e.Field + ": " + r
	}
	return r
}

func kindOf(v any) string {
	k, _ := rangeKind(v)
	return k
}

// keyword consumes the word w (any case) if it comes next, with space
// before it.
func (p *parser) keyword(w string) bool {
	save := p.i
	p.space()
	if p.word() == w {
		p.i += len(w)
		return true
	}
	p.i = save
	return false
}

// word returns the run of name characters at p.i, lowercased when it is
// all ASCII letters (so that it can be compared with the words of the
// grammar), else as it is.
func (p *parser) word() string {
	end := p.i
	for end < len(p.src) {
		r, size := utf8.DecodeRuneInString(p.src[end:])
		if !nameRune(r) {
			break
		}
		end += size
	}
	return lowerWord(p.src[p.i:end])
}

// lowerWord lowercases a word of ASCII letters; any other text is
// returned unchanged, so that no other character can fold into a keyword.
func lowerWord(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return s
		}
	}
	return strings.ToLower(s)
}

// wordAt reports whether a bare word starts at i.
func (p *parser) wordAt(i int) bool {
	if i >= len(p.src) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(p.src[i:])
	return wordRune(r)
}

// wordEnd returns where the bare word starting at i ends.
func (p *parser) wordEnd(i int) int {
	for i < len(p.src) {
		r, size := utf8.DecodeRuneInString(p.src[i:])
		if !wordRune(r) {
			break
		}
		i += size
	}
	return i
}

func (p *parser) space() {
	for p.i < len(p.src) {
		r, size := utf8.DecodeRuneInString(p.src[p.i:])
		if !unicode.IsSpace(r) {
			return
		}
		p.i += size
	}
}

// found describes what is at p.i, for "expected …; got …".
func (p *parser) found() string {
	if p.i >= len(p.src) {
		return "the end"
	}
	if end := p.wordEnd(p.i); end > p.i {
		w := p.src[p.i:end]
		if utf8.RuneCountInString(w) > 24 {
			w = string([]rune(w)[:21]) + "..."
		}
		return jsonQuote(w)
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.i:])
	if unicode.IsPrint(r) {
		return "'" + string(r) + "'"
	}
	return fmt.Sprintf("%U", r)
}

// nameRune reports whether r may be part of a bare field name.
func nameRune(r rune) bool {
	return !unicode.IsSpace(r) && !unicode.IsControl(r) && r != utf8.RuneError && !strings.ContainsRune(`.=!<>^~*$|()[]{},"'`, r)
}

// wordRune reports whether r may be part of a bare word value.
func wordRune(r rune) bool {
	return !unicode.IsSpace(r) && !unicode.IsControl(r) && r != utf8.RuneError && !strings.ContainsRune(`()[]{},"`, r)
}
