package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// A --where expression is one or more conditions combined with and, or,
// not and parentheses:
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
//	               | "exists" | "missing" )
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
// is always text). Operators are matched longest first, so >= is never >
// followed by "=…". The words and, or and not are never names or bare
// words: quote them ("not"=1, x="and").

// The operators of a condition.
const (
	opEq       = "="
	opNeq      = "!="
	opGt       = ">"
	opGte      = ">="
	opLt       = "<"
	opLte      = "<="
	opPrefix   = "^="
	opIn       = "in"
	opNotIn    = "not in"
	opContains = "contains"
	opBetween  = "between"
	opExists   = "exists"
	opMissing  = "missing"
	// The combinators.
	opAnd = "and"
	opOr  = "or"
	opNot = "not"
)

// whereOps are the symbol operators, longest first.
var whereOps = []string{opNeq, opGte, opLte, opPrefix, opEq, opGt, opLt}

// operatorList names every operator, for messages.
const operatorList = "= != > >= < <= ^= in, not in, contains, between, exists, missing"

// maxWhereDepth bounds how deeply parentheses, not and lists nest.
const maxWhereDepth = 64

// whereNode is a parsed --where expression: a combinator with kids, or a
// condition on a field path.
type whereNode struct {
	op   string
	kids []*whereNode // and, or: two or more; not: one
	path []string     // a condition's field, as literal segments
	vals []any        // one value; two for between; the list for in and not in
	at   int          // byte offset of the condition, for messages
}

// parseWhere parses one --where flag. Every error says at which column
// of the expression the problem is and what was expected there.
func parseWhere(src string) (*whereNode, error) {
	p := &whereParser{src: src}
	n, err := p.parse()
	if err != nil {
		var pe *parseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("--where %s: at column %d: %s", quoteExpr(src), column(src, pe.at), pe.msg)
		}
		return nil, fmt.Errorf("--where %s: %w", quoteExpr(src), err)
	}
	return n, nil
}

// exprShown is the longest expression a message shows whole.
const exprShown = 200

// quoteExpr quotes an expression for a message, cut to its first 160
// characters with its length when it is longer than exprShown.
func quoteExpr(s string) string {
	n := utf8.RuneCountInString(s)
	if n <= exprShown {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q (%s characters)", string([]rune(s)[:160])+"…", commas(int64(n)))
}

// column is the 1-based column, in characters, of the byte offset at.
func column(s string, at int) int {
	if at > len(s) {
		at = len(s)
	}
	return utf8.RuneCountInString(s[:at]) + 1
}

type parseError struct {
	at  int
	msg string
}

func (e *parseError) Error() string { return e.msg }

type whereParser struct {
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

func (p *whereParser) errAt(at int, format string, args ...any) error {
	return &parseError{at: at, msg: fmt.Sprintf(format, args...)}
}

func (p *whereParser) parse() (*whereNode, error) {
	if !utf8.ValidString(p.src) {
		at := 0
		for at < len(p.src) {
			r, size := utf8.DecodeRuneInString(p.src[at:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			at += size
		}
		return nil, p.errAt(at, "the text is not valid UTF-8")
	}
	p.space()
	if p.i == len(p.src) {
		return nil, p.errAt(0, "expected a condition, like level=error or n>=5; got nothing")
	}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i < len(p.src) {
		if p.src[p.i] == ')' {
			return nil, p.errAt(p.i, "unexpected ')': no '(' is open")
		}
		msg := fmt.Sprintf("expected and, or, or the end of the expression; got %s", p.found())
		return nil, &parseError{at: p.i, msg: msg + p.spaceHint()}
	}
	return n, nil
}

// spaceHint suggests quoting when a bare word value is followed by more
// text, as in msg=hello world.
func (p *whereParser) spaceHint() string {
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

func (p *whereParser) or() (*whereNode, error) {
	n, err := p.and()
	if err != nil {
		return nil, err
	}
	kids := []*whereNode{n}
	for p.keyword(opOr) {
		k, err := p.and()
		if err != nil {
			return nil, err
		}
		kids = append(kids, k)
	}
	if len(kids) == 1 {
		return n, nil
	}
	return &whereNode{op: opOr, kids: kids}, nil
}

func (p *whereParser) and() (*whereNode, error) {
	n, err := p.unary()
	if err != nil {
		return nil, err
	}
	kids := []*whereNode{n}
	for p.keyword(opAnd) {
		k, err := p.unary()
		if err != nil {
			return nil, err
		}
		kids = append(kids, k)
	}
	if len(kids) == 1 {
		return n, nil
	}
	return &whereNode{op: opAnd, kids: kids}, nil
}

func (p *whereParser) enter() error {
	if p.depth++; p.depth > maxWhereDepth {
		return p.errAt(p.i, "nested deeper than %d levels", maxWhereDepth)
	}
	return nil
}

func (p *whereParser) unary() (*whereNode, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.space()
	switch {
	case p.keyword(opNot):
		k, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &whereNode{op: opNot, kids: []*whereNode{k}}, nil
	case p.i < len(p.src) && p.src[p.i] == '(':
		open := p.i
		p.i++
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.src) || p.src[p.i] != ')' {
			msg := fmt.Sprintf("expected and, or, or ')' to close the '(' at column %d; got %s", column(p.src, open), p.found())
			return nil, &parseError{at: p.i, msg: msg + p.spaceHint()}
		}
		p.i++
		return n, nil
	}
	return p.cond()
}

// cond reads one condition: a path, an operator and its operands.
func (p *whereParser) cond() (*whereNode, error) {
	p.space()
	n := &whereNode{at: p.i}
	if p.i >= len(p.src) {
		return nil, p.errAt(p.i, "expected a condition, like level=error; got the end")
	}
	if w := p.word(); w == opAnd || w == opOr {
		return nil, p.errAt(p.i, "expected a condition, like level=error; got the word %s", p.src[p.i:p.i+len(w)])
	}
	path, err := p.path()
	if err != nil {
		return nil, err
	}
	n.path = path
	field := p.src[n.at:p.i]
	p.space()
	opAt := p.i
	if p.i < len(p.src) && strings.ContainsRune("=!<>^~*$|", rune(p.src[p.i])) {
		for _, op := range whereOps {
			if strings.HasPrefix(p.src[p.i:], op) {
				n.op = op
				break
			}
		}
		if n.op == "" {
			end := p.i
			for end < len(p.src) && strings.ContainsRune("=!<>^~*$|", rune(p.src[end])) {
				end++
			}
			return nil, p.errAt(p.i, "unknown operator %q; the operators are %s", p.src[p.i:end], operatorList)
		}
		p.i += len(n.op)
		v, err := p.value(valueCtx{op: n.op, field: field, opText: n.op})
		if err != nil {
			return nil, err
		}
		n.vals = []any{v}
	} else {
		switch w := p.word(); {
		case p.keyword(opIn):
			n.op = opIn
		case w == opNot:
			p.keyword(opNot)
			if !p.keyword(opIn) {
				p.space()
				return nil, p.errAt(p.i, "expected in after not (field not in [a, b]); got %s", p.found())
			}
			n.op = opNotIn
		case p.keyword(opContains):
			n.op = opContains
		case p.keyword(opBetween):
			n.op = opBetween
		case p.keyword(opExists):
			n.op = opExists
		case p.keyword(opMissing):
			n.op = opMissing
		default:
			return nil, p.errAt(p.i, "expected an operator after the field %s (%s); got %s", field, operatorList, p.found())
		}
		switch n.op {
		case opIn, opNotIn:
			p.space()
			if p.i >= len(p.src) || p.src[p.i] != '[' {
				return nil, p.errAt(p.i, "expected a list after %s, like %s %s [a, b]; got %s", n.op, field, n.op, p.found())
			}
			list, err := p.list(field)
			if err != nil {
				return nil, err
			}
			n.vals = list
		case opContains:
			v, err := p.value(valueCtx{op: n.op, field: field, opText: p.src[opAt:p.i]})
			if err != nil {
				return nil, err
			}
			n.vals = []any{v}
		case opBetween:
			lo, err := p.value(valueCtx{op: n.op, field: field, opText: p.src[opAt:p.i]})
			if err != nil {
				return nil, err
			}
			if !p.keyword(opAnd) {
				p.space()
				return nil, p.errAt(p.i, "expected and after the lower bound, as in %s between 1 and 5; got %s", field, p.found())
			}
			p.space()
			hiAt := p.i
			hi, err := p.value(valueCtx{op: "between's and", field: field})
			if err != nil {
				return nil, err
			}
			lc, _ := rangeKind(lo)
			if hc, _ := rangeKind(hi); lc != hc {
				return nil, p.errAt(hiAt, "the bounds of between must be of one type; got %s and %s", lc, hc)
			}
			n.vals = []any{lo, hi}
		}
	}
	if err := p.check(n); err != nil {
		return nil, err
	}
	return n, nil
}

// check refuses what the library would refuse, at the condition's column.
func (p *whereParser) check(n *whereNode) error {
	switch n.op {
	case opGt, opGte, opLt, opLte, opBetween:
		for _, v := range n.vals {
			if k, ok := rangeKind(v); !ok {
				return p.errAt(n.at, "%s compares numbers, text, booleans, times, bytes or ids, not %s (to find %s, use = or contains)", n.op, k, k)
			}
		}
	}
	if err := query.All().Where(n.cond()).Validate(); err != nil {
		return p.errAt(n.at, "%s", strings.TrimPrefix(libMsg(err), "invalid query: "))
	}
	return nil
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
func (p *whereParser) path() ([]string, error) {
	var segs []string
	for {
		if p.i < len(p.src) && p.src[p.i] == '"' {
			v, n, err := new(jsonl.Decoder).DecodeValuePrefix([]byte(p.src[p.i:]))
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
	op     string // the operator before the value ("and" for between's upper bound)
	field  string // the condition's path as typed
	opText string // the operator as typed, for suggestions
	list   bool   // an element of a list
}

// value reads a value.
func (p *whereParser) value(c valueCtx) (any, error) {
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
		v, n, err := new(jsonl.Decoder).DecodeValuePrefix([]byte(p.src[p.i:]))
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
	if lw := lowerWord(w); lw == opAnd || lw == opOr || lw == opNot {
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
	v, err := jsonl.DecodeValue([]byte(w))
	switch {
	case err == nil:
		return v, nil
	case errors.Is(err, jsonl.ErrRow):
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
	if c.list {
		return "'[' or ','"
	}
	return c.op
}

// prefix is the text a suggested value follows: the field and operator,
// as typed (nothing inside a list).
func (c valueCtx) prefix() string {
	if c.list {
		return ""
	}
	if c.opText == "=" || c.opText == "!=" || c.opText == "^=" || c.opText == "<" || c.opText == ">" || c.opText == "<=" || c.opText == ">=" {
		return c.field + c.opText
	}
	return c.field + " " + c.opText + " "
}

// list reads [a, b, …]; the elements are values.
func (p *whereParser) list(field string) ([]any, error) {
	open := p.i
	if err := p.enter(); err != nil {
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
func (p *whereParser) jsonErr(err error, what string) error {
	var e *jsonl.Error
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
	if errors.Is(err, jsonl.ErrRow) {
		return p.errAt(at, "the %s is JSON, but not one storh can match: %s", what, reason)
	}
	return p.errAt(at, "invalid JSON in the %s: %s", what, reason)
}

var jsonColumn = regexp.MustCompile(`at column [0-9]+`)

// jsonReason is what a JSON error says, in this context's words.
func jsonReason(err error) string {
	var e *jsonl.Error
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
func (p *whereParser) keyword(w string) bool {
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
func (p *whereParser) word() string {
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
func (p *whereParser) wordAt(i int) bool {
	if i >= len(p.src) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(p.src[i:])
	return wordRune(r)
}

// wordEnd returns where the bare word starting at i ends.
func (p *whereParser) wordEnd(i int) int {
	for i < len(p.src) {
		r, size := utf8.DecodeRuneInString(p.src[i:])
		if !wordRune(r) {
			break
		}
		i += size
	}
	return i
}

func (p *whereParser) space() {
	for p.i < len(p.src) {
		r, size := utf8.DecodeRuneInString(p.src[p.i:])
		if !unicode.IsSpace(r) {
			return
		}
		p.i += size
	}
}

// found describes what is at p.i, for "expected …; got …".
func (p *whereParser) found() string {
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

// jsonQuote writes s as a JSON string.
func jsonQuote(s string) string {
	b, _ := jsonl.AppendValue(nil, s)
	return string(b)
}

// cond builds the library condition.
func (n *whereNode) cond() query.Cond {
	switch n.op {
	case opAnd, opOr:
		kids := make([]query.Cond, len(n.kids))
		for i, k := range n.kids {
			kids[i] = k.cond()
		}
		if n.op == opAnd {
			return query.And(kids...)
		}
		return query.Or(kids...)
	case opNot:
		return query.Not(n.kids[0].cond())
	}
	f := query.FieldPath(n.path...)
	switch n.op {
	case opEq:
		return f.Eq(n.vals[0])
	case opNeq:
		return f.Neq(n.vals[0])
	case opGt:
		return f.Gt(n.vals[0])
	case opGte:
		return f.Gte(n.vals[0])
	case opLt:
		return f.Lt(n.vals[0])
	case opLte:
		return f.Lte(n.vals[0])
	case opPrefix:
		s, _ := n.vals[0].(string)
		return f.Prefix(s)
	case opIn:
		return f.In(n.vals...)
	case opNotIn:
		return f.NotIn(n.vals...)
	case opContains:
		return f.Contains(n.vals[0])
	case opBetween:
		return f.Between(n.vals[0], n.vals[1])
	case opExists:
		return f.Exists()
	case opMissing:
		return f.Missing()
	}
	panic("storh: unknown --where operator " + n.op)
}

// String writes the expression back in the --where syntax, in a canonical
// form: one space around words and operators, values as JSON, and
// parentheses around every and/or inside another expression. Parsing it
// gives the same expression.
func (n *whereNode) String() string {
	var b strings.Builder
	n.write(&b)
	return b.String()
}

func (n *whereNode) write(b *strings.Builder) {
	switch n.op {
	case opAnd, opOr:
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(" " + n.op + " ")
			}
			k.operand(b)
		}
		return
	case opNot:
		b.WriteString("not ")
		n.kids[0].operand(b)
		return
	}
	b.WriteString(pathString(n.path))
	switch n.op {
	case opExists, opMissing:
		b.WriteString(" " + n.op)
	case opIn, opNotIn:
		b.WriteString(" " + n.op + " ")
		writeValue(b, n.vals)
	case opBetween:
		b.WriteString(" between ")
		writeValue(b, n.vals[0])
		b.WriteString(" and ")
		writeValue(b, n.vals[1])
	default:
		b.WriteString(" " + n.op + " ")
		writeValue(b, n.vals[0])
	}
}

func (n *whereNode) operand(b *strings.Builder) {
	if n.op == opAnd || n.op == opOr {
		b.WriteString("(")
		n.write(b)
		b.WriteString(")")
		return
	}
	n.write(b)
}

func writeValue(b *strings.Builder, v any) {
	switch id := v.(type) {
	case uuidv7.UUID:
		b.WriteString("uuid:" + id.String())
		return
	case objectid.ObjectID:
		b.WriteString("oid:" + id.Hex())
		return
	}
	if list, ok := v.([]any); ok {
		// Elements one by one, so that one the JSON writer cannot write
		// spoils only itself.
		b.WriteString("[")
		for i, e := range list {
			if i > 0 {
				b.WriteString(", ")
			}
			writeValue(b, e)
		}
		b.WriteString("]")
		return
	}
	out, err := jsonl.AppendValue(nil, v)
	if err != nil {
		fmt.Fprintf(b, "%v", v)
		return
	}
	b.Write(out)
}

// pathString writes a field path in the --where syntax: bare segments
// where they can be, JSON strings where not.
func pathString(path []string) string {
	parts := make([]string, len(path))
	for i, s := range path {
		parts[i] = s
		if !bareName(s) {
			parts[i] = jsonQuote(s)
		}
	}
	return strings.Join(parts, ".")
}

// bareName reports whether s can be written as a bare path segment.
func bareName(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	if l := lowerWord(s); l == opAnd || l == opOr || l == opNot {
		return false
	}
	for _, r := range s {
		if !nameRune(r) {
			return false
		}
	}
	return true
}
