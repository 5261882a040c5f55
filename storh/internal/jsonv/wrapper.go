package jsonv

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// wrapper converts an Extended JSON wrapper object, given as its members
// (already converted), to the value it stands for; ok is false for an
// object that is not a wrapper. col is the column of the object.
func (p *parser) wrapper(ms []member, col int) (v any, ok bool, err error) {
	if len(ms) == 2 {
		// Legacy (v1) forms, still written by old mongoexport versions.
		get := func(k string) (any, bool) {
			for _, e := range ms {
				if e.key == k {
					return e.val, true
				}
			}
			return nil, false
		}
		if data, ok := get("$binary"); ok {
			if typ, ok := get("$type"); ok {
				v, err := p.binary(data, typ, col)
				return v, true, err
			}
		}
		if re, ok := get("$regex"); ok {
			if opts, ok := get("$options"); ok {
				v, err := p.regex(re, opts, col)
				return v, true, err
			}
		}
		if _, ok := get("$code"); ok {
			if _, ok := get("$scope"); ok {
				return nil, true, p.rowErr(col, "$code with $scope (code with scope) has no storh equivalent; remove or convert the field before importing")
			}
		}
		return nil, false, nil
	}
	k, v := ms[0].key, ms[0].val
	switch k {
	case "$date":
		v, err = p.date(v, col)
	case "$numberLong":
		v, err = p.intString(k, v, 64, col)
	case "$numberInt":
		v, err = p.intString(k, v, 32, col)
	case "$numberDouble":
		v, err = p.double(v, col)
	case "$numberDecimal":
		// Decimal128 has no storh type; a string keeps every digit.
		s, ok := v.(string)
		if !ok {
			return nil, true, p.rowErr(col, "$numberDecimal must hold a string, got "+typeName(v))
		}
		if why := decimal128(s); why != "" {
			return nil, true, p.rowErr(col, fmt.Sprintf("$numberDecimal %q is not a Decimal128: %s", s, why))
		}
		v = s
	case "$uuid":
		s, ok := v.(string)
		u, err := uuidv7.ParseAny(s)
		if !ok || err != nil {
			return nil, true, p.rowErr(col, `$uuid must hold a UUID string like "73ffd264-44b3-4c69-90e8-e7d1dfc035d4"`)
		}
		v = u
	case "$binary":
		sub, ok := v.(map[string]any)
		if !ok || len(sub) != 2 {
			return nil, true, p.rowErr(col, `$binary must hold {"base64":"…","subType":"00"}`)
		}
		v, err = p.binary(sub["base64"], sub["subType"], col)
	case "$oid":
		s, ok := v.(string)
		if !ok {
			return nil, true, p.rowErr(col, "$oid must hold a string of 24 hex digits, got "+typeName(v))
		}
		oid, perr := objectid.Parse(s)
		if perr != nil {
			return nil, true, p.rowErr(col, "$oid "+strconv.Quote(s)+" is not an ObjectID (24 hex digits)")
		}
		v = oid
	case "$timestamp":
		sub, ok := v.(map[string]any)
		t, tok := sub["t"].(int64)
		i, iok := sub["i"].(int64)
		if !ok || len(sub) != 2 || !tok || !iok || t < 0 || t > math.MaxUint32 || i < 0 || i > math.MaxUint32 {
			return nil, true, p.rowErr(col, `$timestamp must hold {"t":<seconds>,"i":<increment>}, each from 0 to 4294967295`)
		}
		v = map[string]any{"t": t, "i": i}
	case "$regularExpression":
		sub, ok := v.(map[string]any)
		if !ok || len(sub) != 2 {
			return nil, true, p.rowErr(col, `$regularExpression must hold {"pattern":"…","options":"…"}`)
		}
		v, err = p.regex(sub["pattern"], sub["options"], col)
	case "$symbol", "$code":
		s, ok := v.(string)
		if !ok {
			return nil, true, p.rowErr(col, k+" must hold a string, got "+typeName(v))
		}
		v = s
	case "$undefined":
		if v != true {
			return nil, true, p.rowErr(col, `$undefined must hold true`)
		}
		v = nil
	case "$minKey", "$maxKey", "$dbPointer":
		return nil, true, p.rowErr(col, k+" has no storh equivalent; remove or convert the field before importing")
	default:
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	return v, true, nil
}

func (p *parser) date(v any, col int) (any, error) {
	switch d := v.(type) {
	case string:
		t, err := time.Parse(time.RFC3339Nano, d)
		if err != nil {
			// mongoexport before 4.0 wrote offsets without a colon.
			t, err = time.Parse("2006-01-02T15:04:05.999999999Z0700", d)
		}
		if err != nil {
			return nil, p.rowErr(col, "$date "+strconv.Quote(d)+" is not an RFC 3339 time like 2024-05-01T12:00:00.123Z")
		}
		return t.UTC(), nil
	case int64: // {"$numberLong":"…"} inside, already converted, or legacy milliseconds
		return time.UnixMilli(d).UTC(), nil
	}
	return nil, p.rowErr(col, `$date must hold an RFC 3339 string or {"$numberLong":"<unix ms>"}, got `+typeName(v))
}

func (p *parser) intString(k string, v any, bits int, col int) (any, error) {
	s, ok := v.(string)
	if !ok {
		return nil, p.rowErr(col, k+" must hold a string of digits, got "+typeName(v))
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		return nil, p.rowErr(col, fmt.Sprintf("%s %q is not a %d-bit integer", k, s, bits))
	}
	return n, nil
}

func (p *parser) double(v any, col int) (any, error) {
	s, ok := v.(string)
	if !ok {
		return nil, p.rowErr(col, "$numberDouble must hold a string, got "+typeName(v))
	}
	switch s {
	case "NaN":
		return math.NaN(), nil
	case "Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && isJSONNumber(s) {
		return f, nil
	}
	return nil, p.rowErr(col, fmt.Sprintf(`$numberDouble %q is not a number, "NaN", "Infinity" or "-Infinity"`, s))
}

// isJSONNumber keeps strconv's extra syntax (hex floats, "inf",
// underscores) out of $numberDouble.
func isJSONNumber(s string) bool {
	q := parser{b: []byte(s)}
	if len(s) == 0 || !(s[0] == '-' || isDigit(s[0])) {
		return false
	}
	_, err := q.number()
	return err == nil && q.i == len(s)
}

func (p *parser) binary(data, typ any, col int) (any, error) {
	s, ok1 := data.(string)
	t, ok2 := typ.(string)
	if !ok1 || !ok2 {
		return nil, p.rowErr(col, `$binary needs a base64 string and a hex subtype string, like {"base64":"AQI=","subType":"00"}`)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, p.rowErr(col, "$binary: the data is not standard base64: "+err.Error())
	}
	if len(t) == 0 || len(t) > 2 {
		return nil, p.rowErr(col, fmt.Sprintf("$binary: subtype %q is not one or two hex digits", t))
	}
	sub, err := strconv.ParseUint(t, 16, 8)
	if err != nil {
		return nil, p.rowErr(col, fmt.Sprintf("$binary: subtype %q is not one or two hex digits", t))
	}
	if sub == 4 && len(b) == 16 {
		// Subtype 4 is a standard UUID, what $uuid abbreviates.
		return uuidv7.UUID(b), nil
	}
	return b, nil
}

func (p *parser) regex(pattern, options any, col int) (any, error) {
	re, ok1 := pattern.(string)
	o, ok2 := options.(string)
	if !ok1 || !ok2 {
		return nil, p.rowErr(col, "a regular expression needs a pattern string and an options string")
	}
	return "/" + re + "/" + o, nil
}

// decimal128 says why s is not the text of a Decimal128 (at most 34
// significant digits, an exponent within Decimal128's range), or "".
func decimal128(s string) string {
	t := strings.TrimLeft(s, "+-")
	if len(s)-len(t) > 1 {
		return "more than one sign"
	}
	switch strings.ToLower(t) {
	case "nan", "inf", "infinity":
		return ""
	}
	mant, exp := t, 0
	if i := strings.IndexAny(t, "eE"); i >= 0 {
		e, err := strconv.Atoi(t[i+1:])
		if err != nil {
			return "the exponent is not an integer"
		}
		mant, exp = t[:i], e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	if digits == "" {
		return "no digits"
	}
	for i := 0; i < len(digits); i++ {
		if !isDigit(digits[i]) {
			return "not a number"
		}
	}
	significant := strings.TrimLeft(digits, "0")
	if len(significant) > 34 {
		return fmt.Sprintf("%d significant digits, the most is 34", len(significant))
	}
	// The value is digits × 10^(exp - len(frac)); with its significant
	// digits right-aligned in 34 that exponent must lie in -6176..6111.
	if e := exp - len(frac); significant != "" && (e < -6176-34+len(significant) || e > 6111) {
		return "the exponent is out of range"
	}
	return ""
}
