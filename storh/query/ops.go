package query

import (
	"strings"
	"unicode/utf8"

	"github.com/storhdb/storh-go/storh/internal/jsonv"
	"github.com/storhdb/storh-go/storh/internal/plan"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// op is the operator of a condition. The one table below names it for Go,
// the text syntax and the JSON form, so the three cannot drift apart.
type op uint8

const (
	opEq op = iota + 1
	opNeq
	opGt
	opGte
	opLt
	opLte
	opPrefix
	opIn
	opNotIn
	opContains
	opBetween
	opExists
	opMissing
	opElemMatch
	opAnd
	opOr
	opNot
)

// operands says what a leaf operator takes.
type operands uint8

const (
	oneValue  operands = iota // a value
	valueList                 // a list of values (in, not in)
	twoValues                 // lo and hi (between)
	noValue                   // nothing (exists, missing)
	oneCond                   // a condition on the elements of the field's lists (elemmatch)
	combines                  // conditions (and, or, not)
)

var ops = [...]struct {
	goName string // the builder
	text   string // the text syntax
	json   string // the JSON form's "op" (or key, for and, or and not)
	takes  operands
	plan   plan.Op // what the engine runs, before lowering
}{
	opEq:        {"Eq", "=", "eq", oneValue, plan.OpEq},
	opNeq:       {"Neq", "!=", "neq", oneValue, plan.OpNeq},
	opGt:        {"Gt", ">", "gt", oneValue, plan.OpRange},
	opGte:       {"Gte", ">=", "gte", oneValue, plan.OpRange},
	opLt:        {"Lt", "<", "lt", oneValue, plan.OpRange},
	opLte:       {"Lte", "<=", "lte", oneValue, plan.OpRange},
	opPrefix:    {"Prefix", "^=", "prefix", oneValue, plan.OpRange},
	opIn:        {"In", "in", "in", valueList, plan.OpIn},
	opNotIn:     {"NotIn", "not in", "nin", valueList, plan.OpNotIn},
	opContains:  {"Contains", "contains", "contains", oneValue, plan.OpContains},
	opBetween:   {"Between", "between", "between", twoValues, plan.OpRange},
	opExists:    {"Exists", "exists", "exists", noValue, plan.OpExists},
	opMissing:   {"Missing", "missing", "missing", noValue, plan.OpMissing},
	opElemMatch: {"ElemMatch", "elemmatch", "elemMatch", oneCond, plan.OpElemMatch},
	opAnd:       {"And", "and", "and", combines, plan.OpAnd},
	opOr:        {"Or", "or", "or", combines, plan.OpOr},
	opNot:       {"Not", "not", "not", combines, plan.OpNot},
}

func (o op) goName() string  { return ops[o].goName }
func (o op) text() string    { return ops[o].text }
func (o op) takes() operands { return ops[o].takes }
func (o op) planOp() plan.Op { return ops[o].plan }

// isSymbol reports whether the text syntax writes o with symbols, as =,
// rather than as a word, as in.
func (o op) isSymbol() bool {
	c := ops[o].text[0] | 0x20
	return c < 'a' || c > 'z'
}

// leafOps are the operators of field tests, in the order messages list
// them.
func leafOps() []op {
	return []op{opEq, opNeq, opGt, opGte, opLt, opLte, opPrefix, opIn, opNotIn, opContains, opBetween, opExists, opMissing, opElemMatch}
}

func opNamed(json string) (op, bool) {
	for _, o := range leafOps() {
		if ops[o].json == json {
			return o, true
		}
	}
	return 0, false
}

// symbolOps are the operators written with symbols, longest first, so that
// >= is never read as > followed by "=…".
var symbolOps = []op{opNeq, opGte, opLte, opPrefix, opEq, opGt, opLt}

// opList names the operators of the text syntax, for messages.
func opList() string {
	var b strings.Builder
	afterWord := false
	for _, o := range leafOps() {
		switch {
		case afterWord:
			b.WriteString(", ")
		case b.Len() > 0:
			b.WriteString(" ")
		}
		b.WriteString(o.text())
		afterWord = !o.isSymbol()
	}
	return b.String()
}

// jsonOpList names the operators of the JSON form, for messages.
func jsonOpList() string {
	names := make([]string, 0, len(ops))
	for _, o := range leafOps() {
		names = append(names, ops[o].json)
	}
	return strings.Join(names, ", ")
}

// String writes the condition in the text syntax; see Cond.String.
func (e *expr) String() string {
	var b strings.Builder
	e.write(&b)
	return b.String()
}

func (e *expr) write(b *strings.Builder) {
	switch e.op {
	case opAnd, opOr:
		if len(e.kids) == 0 {
			b.WriteString(e.op.text() + "()")
			return
		}
		for i, k := range e.kids {
			if i > 0 {
				b.WriteString(" " + e.op.text() + " ")
			}
			k.operand(b)
		}
		return
	case opNot:
		b.WriteString("not ")
		e.kids[0].operand(b)
		return
	}
	b.WriteString(pathText(e.path))
	b.WriteString(" " + e.op.text())
	switch e.op.takes() {
	case noValue:
	case oneCond:
		b.WriteString(" (")
		e.kids[0].write(b)
		b.WriteString(")")
	case valueList:
		b.WriteString(" ")
		writeValue(b, e.vals)
	case twoValues:
		b.WriteString(" ")
		writeValue(b, e.vals[0])
		b.WriteString(" and ")
		writeValue(b, e.vals[1])
	default:
		b.WriteString(" ")
		writeValue(b, e.vals[0])
	}
}

// operand writes e where it is one operand of and, or or not.
func (e *expr) operand(b *strings.Builder) {
	if (e.op == opAnd || e.op == opOr) && len(e.kids) > 0 {
		b.WriteString("(")
		e.write(b)
		b.WriteString(")")
		return
	}
	e.write(b)
}

// valueText writes a normalised value as the text syntax does.
func valueText(v any) string {
	var b strings.Builder
	writeValue(&b, v)
	return b.String()
}

// writeValue writes a normalised value: typed ids as uuid: and oid:, lists
// element by element (so the ids in them are written so too), anything
// else as JSON with the value mapping of JSON lines, which keeps types (5
// and 5.0, {"$date":…}).
func writeValue(b *strings.Builder, v any) {
	switch x := v.(type) {
	case uuidv7.UUID:
		b.WriteString("uuid:" + x.String())
		return
	case objectid.ObjectID:
		b.WriteString("oid:" + x.Hex())
		return
	case []any:
		b.WriteString("[")
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeValue(b, e)
		}
		b.WriteString("]")
		return
	}
	out, err := jsonv.AppendValue(nil, v)
	if err != nil {
		// Normalised values all have a JSON form; this is for the
		// message about one that is not normalised.
		b.WriteString("?" + err.Error())
		return
	}
	b.Write(out)
}

// pathText writes a field path in the text syntax: bare segments where
// they can be, JSON strings where not.
func pathText(path []string) string {
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
	if l := lowerWord(s); l == "and" || l == "or" || l == "not" {
		return false
	}
	for _, r := range s {
		if !nameRune(r) {
			return false
		}
	}
	return true
}

// jsonQuote writes s as a JSON string.
func jsonQuote(s string) string {
	b, _ := jsonv.AppendValue(nil, s)
	return string(b)
}
