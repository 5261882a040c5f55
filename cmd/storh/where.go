package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/storhdb/storh-go/cmd/storh/internal/jsonl"
)

// A --where condition is FIELD OP VALUE with no spaces needed:
//
//	status=active      n=5      ok=true      name="5"      tags=["a","b"]
//
// FIELD is a top-level field name without operator characters, or a JSON
// string ("a=b"=1) for one that has them. OP is one of the operators below,
// longest match first, so two-character operators never read as '=' plus a
// value. VALUE is JSON when it parses as JSON (with the import type mapping,
// so {"$date":"…"} is a time), else the text itself.
//
// Only '=' runs today; the rest parse already, so adding them later changes
// no syntax.

// whereOps lists the operators, two-character ones first.
var whereOps = []string{"!=", ">=", "<=", "^=", "=", ">", "<"}

// runnableOps are the operators the query engine supports now.
var runnableOps = map[string]bool{"=": true}

// opChars start an operator; a bare field name cannot contain them.
const opChars = "=!<>^~*$|"

type whereCond struct {
	Field string
	Op    string
	Value any
}

func parseWhere(s string) (whereCond, error) {
	var c whereCond
	rest := s
	if strings.HasPrefix(s, `"`) {
		end := closingQuote(s)
		if end < 0 {
			return c, fmt.Errorf("--where %q: unterminated quoted field name", s)
		}
		v, err := jsonl.DecodeValue([]byte(s[:end+1]))
		if err != nil {
			return c, fmt.Errorf("--where %q: the quoted field name is not a JSON string", s)
		}
		c.Field, rest = v.(string), s[end+1:]
	} else {
		i := strings.IndexAny(s, opChars)
		if i < 0 {
			return c, fmt.Errorf("--where %q: expected field=value, like status=active or n=5", s)
		}
		c.Field, rest = s[:i], s[i:]
		if strings.TrimSpace(c.Field) != c.Field {
			return c, fmt.Errorf("--where %q: spaces around the field name; write %s", s, strings.TrimSpace(c.Field)+rest)
		}
	}
	if c.Field == "" {
		return c, fmt.Errorf("--where %q: missing field name before the operator", s)
	}
	for _, op := range whereOps {
		if strings.HasPrefix(rest, op) {
			c.Op = op
			break
		}
	}
	if c.Op == "" {
		if rest == "" {
			return c, fmt.Errorf("--where %q: missing operator and value after the field name, like %s=value", s, c.Field)
		}
		op := rest[:1]
		if i := strings.IndexFunc(rest, func(r rune) bool { return !strings.ContainsRune(opChars, r) }); i > 0 {
			op = rest[:i]
		}
		return c, fmt.Errorf("--where %q: unknown operator %q (operators: %s)", s, op, strings.Join(whereOps, " "))
	}
	raw := rest[len(c.Op):]
	if c.Op == "=" && strings.HasPrefix(raw, "=") {
		return c, fmt.Errorf("--where %q: '==' is not an operator; write %s=%s (for a value that starts with '=', quote it: %s=%q)",
			s, c.Field, raw[1:], c.Field, raw)
	}
	v, err := whereValue(raw)
	if err != nil {
		return c, fmt.Errorf("--where %q: the value is JSON, but not one storh can match: %s", s, libMsg(err))
	}
	c.Value = v
	if !runnableOps[c.Op] {
		return c, fmt.Errorf("--where %q: operator %s is not supported yet; this version runs only field=value", s, c.Op)
	}
	return c, nil
}

// whereValue reads VALUE: JSON if it parses, else the text as a string.
// JSON that parses but cannot be a stored value (a key given twice, a
// wrapper holding the wrong thing) is an error: matching it as text would
// find nothing, silently.
func whereValue(raw string) (any, error) {
	v, err := jsonl.DecodeValue([]byte(raw))
	switch {
	case err == nil:
		return v, nil
	case errors.Is(err, jsonl.ErrRow):
		return nil, err
	}
	return raw, nil
}

// closingQuote returns the index of the quote that ends the JSON string
// starting at s[0], or -1.
func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

var errBadTime = errors.New("use RFC 3339 (2024-05-01T12:00:00Z), a date (2024-05-01, UTC), Unix milliseconds (1714564800000), now, or a time relative to now (-15m, -2h, -7d, +1h)")

// parseTime reads a time argument: RFC 3339, a date, Unix milliseconds,
// "now", or a signed duration relative to now (Go syntax plus d for days).
func parseTime(s string, now time.Time) (time.Time, error) {
	switch {
	case s == "":
		return time.Time{}, fmt.Errorf("empty time: %w", errBadTime)
	case s == "now":
		return now, nil
	case s[0] == '-' || s[0] == '+':
		d, err := parseDuration(s[1:])
		if err != nil {
			return time.Time{}, fmt.Errorf("time %q: %v; %w", s, err, errBadTime)
		}
		if s[0] == '-' {
			d = -d
		}
		return now.Add(d), nil
	case isDigits(s):
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms > maxTimeMs {
			return time.Time{}, fmt.Errorf("time %q: Unix milliseconds out of range", s)
		}
		return time.UnixMilli(ms), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if _, err := time.Parse("2006-01-02T15:04:05.999999999", s); err == nil {
		return time.Time{}, fmt.Errorf("time %q has no time zone: add Z for UTC or an offset like +02:00", s)
	}
	return time.Time{}, fmt.Errorf("invalid time %q: %w", s, errBadTime)
}

// maxTimeMs is the last millisecond a UUIDv7 can carry.
const maxTimeMs = 1<<48 - 1

func parseDuration(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok && isDigits(n) {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days > math.MaxInt64/int64(24*time.Hour) {
			return 0, fmt.Errorf("%sd is too long", n)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("put the sign first, once")
	}
	return d, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
