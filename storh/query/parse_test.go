package query_test

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// TestParseValues checks how one condition's value is typed: each text
// gives the condition Field(path).Eq(value) built in Go.
func TestParseValues(t *testing.T) {
	day := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in    string
		path  []string
		value any
	}{
		{"status=active", []string{"status"}, "active"},
		{"n=5", []string{"n"}, int64(5)},
		{"n=-5", []string{"n"}, int64(-5)},
		{"f=5.0", []string{"f"}, 5.0},
		{"f=1e3", []string{"f"}, 1000.0},
		{"ok=true", []string{"ok"}, true},
		{"gone=null", []string{"gone"}, nil},
		{`name="5"`, []string{"name"}, "5"},
		{`name="true"`, []string{"name"}, "true"},
		{`name="a=b"`, []string{"name"}, "a=b"},
		{`empty=""`, []string{"empty"}, ""},
		{`msg="hello world"`, []string{"msg"}, "hello world"},
		{"msg= 5", []string{"msg"}, int64(5)},
		{"msg = 5", []string{"msg"}, int64(5)},
		{"url=https://x.test/?a=1", []string{"url"}, "https://x.test/?a=1"},
		{"v=5abc", []string{"v"}, "5abc"},
		{"v=it's", []string{"v"}, "it's"},
		{`tags=["a","b"]`, []string{"tags"}, []any{"a", "b"}},
		{`tags=[a, b]`, []string{"tags"}, []any{"a", "b"}},
		{`tags=[]`, []string{"tags"}, []any{}},
		{`m=[[1], {"k": x}]`, nil, nil}, // an object's values are JSON: refused below
		{`geo={"lat":1}`, []string{"geo"}, map[string]any{"lat": int64(1)}},
		{`at={"$date":"2024-05-01T12:00:00Z"}`, []string{"at"}, day},
		{"big=18446744073709551615", []string{"big"}, uint64(18446744073709551615)},
		{"user.name=ana", []string{"user", "name"}, "ana"},
		{`"user.name"=ana`, []string{"user.name"}, "ana"},
		{`user."first.name"=ana`, []string{"user", "first.name"}, "ana"},
		{`"a=b"=1`, []string{"a=b"}, int64(1)},
		{`"sp ace"=x`, []string{"sp ace"}, "x"},
		{`"q\"uote"=1`, []string{`q"uote`}, int64(1)},
		{`"not"=1`, []string{"not"}, int64(1)},
		{`x="and"`, []string{"x"}, "and"},
		{"in=1", []string{"in"}, int64(1)},
		{"exists=missing", []string{"exists"}, "missing"},
		{"android=1", []string{"android"}, int64(1)},
		{"é=ü", []string{"é"}, "ü"},
		{"_oid=5e0be232153bcf7c10df5e93", []string{"_oid"}, "5e0be232153bcf7c10df5e93"},
		{"_oid=oid:5E0BE232153BCF7C10DF5E93", []string{"_oid"}, objectid.MustParse("5e0be232153bcf7c10df5e93")},
		{"post=uuid:0190a4f4-5c3b-7def-8123-456789abcdef", []string{"post"}, uuidv7.MustParse("0190a4f4-5c3b-7def-8123-456789abcdef")},
		{"ext=UUID:73ffd264-44b3-4c69-90e8-e7d1dfc035d4", []string{"ext"}, uuidv7.UUID{0x73, 0xff, 0xd2, 0x64, 0x44, 0xb3, 0x4c, 0x69, 0x90, 0xe8, 0xe7, 0xd1, 0xdf, 0xc0, 0x35, 0xd4}},
		{`post={"$uuid":"0190a4f4-5c3b-7def-8123-456789abcdef"}`, []string{"post"}, uuidv7.MustParse("0190a4f4-5c3b-7def-8123-456789abcdef")},
		{`label="uuid:x"`, []string{"label"}, "uuid:x"},
	}
	for _, tt := range tests {
		c, err := query.Parse(tt.in)
		if tt.path == nil {
			if err == nil {
				t.Errorf("%s: parsed as %s, want an error", tt.in, c)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if want := query.FieldPath(tt.path...).Eq(tt.value); !query.Equal(c, want) {
			t.Errorf("%s = %s, want %s", tt.in, c, want)
		}
	}
}

// TestParse checks the grammar through the canonical form String writes:
// operators, words in any case, precedence and parentheses.
func TestParse(t *testing.T) {
	tests := []struct{ in, want string }{
		{"level=error", `level = "error"`},
		{"status!=200", `status != 200`},
		{"n>5", `n > 5`},
		{"n >= 5", `n >= 5`},
		{"n<5.5", `n < 5.5`},
		{"n<=-1", `n <= -1`},
		{"path^=/api", `path ^= "/api"`},
		{"code^=12", `code ^= "12"`}, // after ^= a bare word is text
		{`path ^= "/a b"`, `path ^= "/a b"`},
		{"level in [error, warn]", `level in ["error", "warn"]`},
		{"level IN [error,warn]", `level in ["error", "warn"]`},
		{"n in []", `n in []`},
		{`n in [1, 2.0, "3", null]`, `n in [1, 2.0, "3", null]`},
		{"level not in [debug]", `level not in ["debug"]`},
		{"level NOT IN [debug]", `level not in ["debug"]`},
		{"tags contains go", `tags contains "go"`},
		{"tags contains [1]", `tags contains [1]`},
		{"n between 1 and 5", `n between 1 and 5`},
		{"n BETWEEN 1 AND 5 and m=1", `n between 1 and 5 and m = 1`},
		{"email exists", `email exists`},
		{"deleted missing", `deleted missing`},
		{"a.b.c exists", `a.b.c exists`},
		{"items elemmatch (sku=X and qty>2)", `items elemmatch (sku = "X" and qty > 2)`},
		{"items ELEMMATCH(not sku=X)", `items elemmatch (not sku = "X")`},
		{"o.items elemmatch (sku=X) and n=1", `o.items elemmatch (sku = "X") and n = 1`},
		{"items elemmatch (tags elemmatch (a=1 or b missing))", `items elemmatch (tags elemmatch (a = 1 or b missing))`},
		{`"a.b".c missing`, `"a.b".c missing`},
		{"not a=1", `not a = 1`},
		{"not not a=1", `not not a = 1`},
		{"not(a=1)", `not a = 1`},
		{"not (a=1 or b=2)", `not (a = 1 or b = 2)`},
		{"a=1 and b=2 and c=3", `a = 1 and b = 2 and c = 3`},
		{"a=1 or b=2 and c=3", `a = 1 or (b = 2 and c = 3)`},
		{"a=1 and b=2 or c=3", `(a = 1 and b = 2) or c = 3`},
		{"(a=1 or b=2) and c=3", `(a = 1 or b = 2) and c = 3`},
		{"not a=1 and b=2", `not a = 1 and b = 2`},
		{"((a=1))", `a = 1`},
		{"level=error and (status>=500 or path^=/api)", `level = "error" and (status >= 500 or path ^= "/api")`},
		{"level=error AND(status>=500 Or path^=/api)", `level = "error" and (status >= 500 or path ^= "/api")`},
		{"  a = 1  ", `a = 1`},
		{"a=1\tand\nb=2", `a = 1 and b = 2`},
		{`at>={"$date":"2024-05-01T00:00:00Z"}`, `at >= {"$date":"2024-05-01T00:00:00Z"}`},
		{"ok<true", `ok < true`},
		{`"and"=1 and "Or".x=2`, `"and" = 1 and "Or".x = 2`},
	}
	for _, tt := range tests {
		c, err := query.Parse(tt.in)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if got := c.String(); got != tt.want {
			t.Errorf("%s\n  parses as %s\n  want      %s", tt.in, got, tt.want)
		}
		if again, err := query.Parse(c.String()); err != nil || !query.Equal(again, c) {
			t.Errorf("%s: the canonical form %s does not parse back to an equal condition: %v", tt.in, c, err)
		}
	}
}

// TestParseErrors checks that every mistake names its column and what was
// expected there, and is a *ParseError that wraps ErrInvalidQuery.
func TestParseErrors(t *testing.T) {
	tests := []struct{ in, msg string }{
		{"", `at column 1: expected a condition, like level=error or n>=5; got nothing`},
		{"   ", `at column 1: expected a condition`},
		{"status", `at column 7: expected an operator after the field status (= != > >= < <= ^= in, not in, contains, between, exists, missing, elemmatch); got the end`},
		{"items elemmatch sku=X", `at column 17: expected a condition in parentheses after elemmatch, like items elemmatch (sku = X and qty > 2); got "sku=X"`},
		{"items elemmatch (sku=X", `at column 23: expected and, or, or ')' to close the '(' at column 17; got the end`},
		{"=5", `at column 1: expected a field name; got "=5"`},
		{`""=5`, `at column 1: a condition needs a field name`},
		{"a.=1", `at column 3: expected a field name after '.'; got "=1"`},
		{"a..b=1", `at column 3: expected a field name after '.'`},
		{"n==5", `at column 3: '==' is not an operator; write n=5 (for a value that starts with '=', quote it: n="=5")`},
		{"n=>5", `at column 2: '=>' is not an operator; did you mean n>=5?`},
		{"n=<5", `at column 2: '=<' is not an operator; did you mean n<=5?`},
		{"n<>5", `at column 2: '<>' is not an operator; write n!=5`},
		{"n>>5", `at column 3: a value that starts with '>' must be quoted: n>">5"`},
		{"n~5", `at column 2: unknown operator "~"; the operators are = != > >=`},
		{"n!5", `at column 2: unknown operator "!"`},
		{"n*=5", `at column 2: unknown operator "*="`},
		{"n=", `at column 3: expected a value after =; got the end (for the empty text write n="")`},
		{"n>", `at column 3: expected a value after >; got the end`},
		{"n= and m=1", `at column 4: expected a value after =; got the word and (to match that text, quote it: "and")`},
		{"n='x y'", `at column 3: text is quoted with double quotes, as a JSON string: n="…"`},
		{"msg=hello world", `at column 11: expected and, or, or the end of the expression; got "world" (a value with spaces must be quoted: msg="hello world")`},
		{"a=1 b=2", `at column 5: expected and, or, or the end of the expression; got "b=2"`},
		{"a=1 and", `at column 8: expected a condition, like level=error; got the end`},
		{"a=1 and and b=2", `at column 9: expected a condition, like level=error; got the word and`},
		{"or a=1", `at column 1: expected a condition, like level=error; got the word or`},
		{"(a=1", `at column 5: expected and, or, or ')' to close the '(' at column 1; got the end`},
		{"level=error and (status>=500 or path^=/api", `at column 43: expected and, or, or ')' to close the '(' at column 17; got the end`},
		{"a=1)", `at column 4: unexpected ')': no '(' is open`},
		{"()", `at column 2: expected a field name; got ')'`},
		{"not", `at column 4: expected a condition, like level=error; got the end`},
		{"a=f(x)", `at column 4: expected and, or, or the end of the expression; got '('`},
		{"tag=a,b", `at column 6: expected and, or, or the end of the expression; got ','`},
		{"x in error", `at column 6: expected a list after in, like x in [a, b]; got "error"`},
		{"x in [1,", `at column 9: expected a value after '[' or ','; got the end`},
		{"x in [1,]", `at column 9: expected a value in the list; got ']'`},
		{"x in [1 2]", `at column 9: expected ',' or ']' to close the list at column 6; got "2"`},
		{"x in [1", `at column 8: expected ',' or ']' to close the list at column 6; got the end`},
		{"x not exists", `at column 7: expected in after not (field not in [a, b]); got "exists"`},
		{"x between 1 5", `at column 13: expected and after the lower bound, as in x between 1 and 5; got "5"`},
		{"x between 1 and", `at column 16: expected a value after between's and; got the end`},
		{`x between 1 and "a"`, `at column 17: the bounds of between must be of one type; got a number and text`},
		{"x>null", `at column 1: > compares numbers, text, booleans, times, bytes or ids, not null (to find null, use = or contains)`},
		{"x<=[1]", `at column 1: <= compares numbers, text, booleans, times, bytes or ids, not a list`},
		{`x>{"a":1}`, `at column 1: > compares numbers, text, booleans, times, bytes or ids, not an object`},
		{"x^=[a]", `at column 4: ^= needs text, not a list`},
		{"p=uuid:0190a4f4", `at column 3: uuid:0190a4f4 is not a UUID: uuid: takes the 36-character text form, like uuid:0190a4f4-5c3b-7def-8123-456789abcdef (to match the text, quote it: p="uuid:0190a4f4")`},
		{"p=oid:xyz", `at column 3: oid:xyz is not an ObjectID: oid: takes 24 hex digits, like oid:5f1a2b3c4d5e6f7a8b9c0d1e (to match the text, quote it: p="oid:xyz")`},
		{"p in [oid:1]", `at column 7: oid:1 is not an ObjectID`},
		{`x^={"a":1}`, `at column 4: ^= needs text, not an object`},
		{`x^=5 and y^={"$date":"2024-05-01T00:00:00Z"}`, `at column 13: ^= needs text, not a time`},
		{`"open=1`, `at column 8: invalid JSON in the field name: unterminated string`},
		{`x="open`, `at column 8: invalid JSON in the value: unterminated string`},
		{`x={broken`, `at column 4: invalid JSON in the value`},
		{`m={"k":1,"k":2}`, `at column 10: the value is JSON, but not one storh can match: duplicate key "k": the object already has it at column 4`},
		{`at={"$date":"yesterday"}`, `the value is JSON, but not one storh can match`},
		{"n=1e999", `at column 3: 1e999 is JSON, but not a value storh can match: number 1e999 is beyond the range of a float64`},
		{"a=1 or é=1 or ü ~ 2", `at column 17: unknown operator "~"`}, // columns count characters
		{"a=\xff", `at column 3: the text is not valid UTF-8`},
		{strings.Repeat("(", 100) + "a=1" + strings.Repeat(")", 100), `at column 65: conditions nest more than 64 levels deep`},
		{strings.Repeat("not ", 100) + "a=1", `at column 256: conditions nest more than 64 levels deep`},
		{"x in " + strings.Repeat("[", 100) + strings.Repeat("]", 100), `at column 69: lists nest more than 64 levels deep`},
		{strings.Repeat("a", 1100) + "=1", `at column 1: field name "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... is 1100 bytes, the limit is 1024`},
		{strings.Repeat("a=1 or ", query.MaxCondNodes) + "a=1", `at column 1: more than 1024 conditions`},
		{"x=" + strings.Repeat("1", query.MaxCondBytes), `at column 1: the condition is 65538 bytes; the limit is 65536`},
	}
	for _, tt := range tests {
		_, err := query.Parse(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%q: error %v\n  want one containing %q", tt.in, err, tt.msg)
			continue
		}
		var pe *query.ParseError
		if !errors.As(err, &pe) || !errors.Is(err, query.ErrInvalidQuery) || pe.Column < 1 {
			t.Errorf("%q: %v is not a *ParseError with a column that wraps ErrInvalidQuery", tt.in, err)
		}
	}
}

// TestParseConds runs parsed conditions through Validate: the typed values
// reach the engine's plan as the builders make them.
func TestParseConds(t *testing.T) {
	for _, in := range []string{"n=5", "p=uuid:0190a4f4-5c3b-7def-8123-456789abcdef", "p>oid:5e0be232153bcf7c10df5e93", "n in [1, 2]", "n between 1 and 5", "s^=ab", "l contains x", "a.b exists", "not (a=1 or b=2)", "items elemmatch (sku=X and qty>2)"} {
		c, err := query.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := query.All().Where(c).Validate(); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
}

// TestDepthLimitIsShared checks that the text, the JSON form and the Go
// builders take and refuse the same nesting: MaxCondDepth levels.
func TestDepthLimitIsShared(t *testing.T) {
	for _, nots := range []int{query.MaxCondDepth - 1, query.MaxCondDepth} {
		text := strings.Repeat("not ", nots) + "a=1"
		js := strings.Repeat(`{"not":`, nots) + `{"field":"a","op":"eq","value":1}` + strings.Repeat("}", nots)
		built := query.Field("a").Eq(1)
		for range nots {
			built = query.Not(built)
		}
		_, textErr := query.Parse(text)
		var c query.Cond
		jsonErr := c.UnmarshalJSON([]byte(js))
		goErr := query.All().Where(built).Validate()
		want := nots < query.MaxCondDepth
		for _, got := range []struct {
			form string
			err  error
		}{{"text", textErr}, {"JSON", jsonErr}, {"Go", goErr}} {
			if (got.err == nil) != want {
				t.Errorf("%d nots in %s: error %v, want ok=%v", nots, got.form, got.err, want)
			}
			if got.err != nil && !strings.Contains(got.err.Error(), "nest more than 64 levels") {
				t.Errorf("%d nots in %s: %v does not name the limit", nots, got.form, got.err)
			}
		}
	}
}

func TestParseField(t *testing.T) {
	tests := []struct {
		in   string
		path []string
	}{
		{"score", []string{"score"}},
		{"author.name", []string{"author", "name"}},
		{`"a b".c`, []string{"a b", "c"}},
		{`"-x"`, []string{"-x"}},
	}
	for _, tt := range tests {
		f, err := query.ParseField(tt.in)
		path, ferr := f.Path()
		if err != nil || ferr != nil || strings.Join(path, "|") != strings.Join(tt.path, "|") {
			t.Errorf("%s: %q %v, want %q", tt.in, path, err, tt.path)
		}
		if again, err := query.ParseField(f.String()); err != nil || again.String() != f.String() {
			t.Errorf("%s: String %s does not parse back: %v", tt.in, f, err)
		}
	}
	bad := []struct{ in, msg string }{
		{"", `at column 1: expected a field name; got the end`},
		{"a b", `at column 2: expected the end after the field name; got ' ' (one field only)`},
		{"a,b", `at column 2: expected the end after the field name; got ','`},
		{"a..b", `at column 3: expected a field name after '.'`},
		{`""`, `at column 1: a condition needs a field name`},
	}
	for _, tt := range bad {
		_, err := query.ParseField(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.msg) || !errors.Is(err, query.ErrInvalidQuery) {
			t.Errorf("%q: error %v, want one containing %q", tt.in, err, tt.msg)
		}
	}
	fs, err := query.ParseFields(` kind , "a.b".c`)
	if err != nil || len(fs) != 2 || fs[0].String() != "kind" || fs[1].String() != `"a.b".c` {
		t.Errorf("ParseFields: %v %v", fs, err)
	}
	if _, err := query.ParseFields("a b"); err == nil || !strings.Contains(err.Error(), `at column 3: expected ',' and another field, or the end; got "b"`) {
		t.Errorf("ParseFields(a b): %v", err)
	}
}

var columnRe = regexp.MustCompile(`(?s)^storh: invalid query: at column ([0-9]+): .+`)

// FuzzParse checks the parser on any input: it never panics; an error
// names a column inside the text (or just after it); a parsed condition is
// one the library runs, its String parses back to an equal condition, and
// so does its JSON.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"level=error", "level=error and (status>=500 or path^=/api)", "n between 1 and 5",
		"tags contains go", "level not in [debug, info]", `"a.b".c missing`, "not (a=1 or b exists)",
		`at>={"$date":"2024-05-01T00:00:00Z"}`, `m=[1, [2, {"k": "v"}], null]`, "msg=hello world",
		"n==5", "x in [1,", `"open=1`, "é=ü", "a=1)", "NOT x=1 AND y=2 OR z MISSING",
		"items elemmatch (sku=X and qty>2)", "items.sku=X", "a elemmatch (b elemmatch (not c exists))", "items elemmatch sku",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := query.Parse(in)
		if err != nil {
			m := columnRe.FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("%q: error %q does not say at which column", in, err)
			}
			col, _ := strconv.Atoi(m[1])
			if max := utf8.RuneCountInString(in) + 1; col < 1 || col > max {
				t.Fatalf("%q: column %d outside 1..%d: %v", in, col, max, err)
			}
			return
		}
		if err := query.All().Where(c).Validate(); err != nil {
			t.Fatalf("%q parses, but the library refuses it: %v", in, err)
		}
		s := c.String()
		again, err := query.Parse(s)
		if err != nil {
			t.Fatalf("%q: canonical form %q does not parse: %v", in, s, err)
		}
		if !query.Equal(again, c) {
			t.Fatalf("%q: canonical form %q parses back as %s", in, s, again)
		}
		checkJSONRoundTrip(t, c)
	})
}
