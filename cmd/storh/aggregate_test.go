package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh/web"
)

func TestParseAgg(t *testing.T) {
	for _, tc := range []struct {
		op, arg string
		want    web.Aggregation
		err     string // a substring of the error; "" for none
	}{
		{"count", "n", web.Aggregation{Op: "count", Name: "n"}, ""},
		{"count", "a=b", web.Aggregation{Op: "count", Name: "a=b"}, ""},
		{"sum", "total=amount", web.Aggregation{Op: "sum", Name: "total", Path: "amount"}, ""},
		{"max", "m=a.b=c", web.Aggregation{Op: "max", Name: "m", Path: "a.b=c"}, ""},
		{"avg", "a:b=x", web.Aggregation{Op: "avg", Name: "a:b", Path: "x"}, ""},
		{"count", "", web.Aggregation{}, `--count "": give the NAME`},
		{"sum", "amount", web.Aggregation{}, `--sum "amount": give NAME=PATH, the column's name and the path it reads, such as --sum sum_amount=amount`},
		{"min", "=x", web.Aggregation{}, `--min "=x": the name before '=' is empty`},
		{"max", "m=", web.Aggregation{}, `--max "m=": the path after '=' is empty`},
	} {
		got, err := parseAgg(tc.op, tc.arg)
		name := "--" + tc.op + " " + tc.arg
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error with %q", name, err, tc.err)
			} else if _, usage := err.(usageError); !usage {
				t.Errorf("%s: %v is not a usage error", name, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", name, got, err, tc.want)
		}
	}
}

// TestAggregateCommand pins aggregate's table and --json on a file: the
// columns in the order of the flags, cells that --where reads back, and
// each refusal with its exit code.
func TestAggregateCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	seedRemote(t, path)
	run := func(args ...string) (string, string, int) {
		return runEnv(append([]string{"--db", path}, args...), "", nil)
	}
	for _, tc := range []struct {
		args   []string
		out    string
		stderr string // a substring of stderr
		code   int
	}{
		{args: []string{"aggregate", "posts", "--group", "draft", "--count", "n", "--sum", "total=score", "--max", "last=at", "--avg", "mean=score", "--min", "low=slug"},
			out: "draft  n  total  last                              mean  low\n" +
				`null   3  6      {"$date":"2024-05-06T12:00:00Z"}  2.0   pb` + "\n" +
				`true   4  15     {"$date":"2024-05-07T12:00:00Z"}  3.75  pa` + "\n"},
		{args: []string{"aggregate", "posts", "--where", "score>=3", "--group", "tags", "--count", "n"},
			out: "tags      n\n" + `["db"]    1` + "\n" + `["go"]    1` + "\n" + `["rust"]  1` + "\n" + `["web"]   1` + "\n"},
		{args: []string{"aggregate", "events", "--from", "1714564809000", "--count", "n", "--sum", "s=f"},
			out: "n  s\n3  15.0\n"},
		{args: []string{"--json", "aggregate", "events", "--group", "level", "--count", "n", "--max", "top=n"},
			out: `{"collection":"events","group_by":["level"],"groups":[{"key":["error"],"values":{"n":3,"top":11}},{"key":["info"],"values":{"n":2,"top":10}}]}` + "\n"},
		{args: []string{"aggregate", "posts", "--where", "slug=nope", "--count", "n"}, out: "n\n", stderr: "no groups"},
		{args: []string{"aggregate", "posts", "--group", "score", "--count", "n", "--explain"},
			out: "plan          index \"score\": 7 keys read, 0 records read, 7 returned\n"},
		{args: []string{"aggregate", "posts", "--group", "tags.x", "--count", "n"}, stderr: "invalid query", code: 1},
		{args: []string{"aggregate", "posts", "--group", "score"}, stderr: "at least one aggregate", code: 2},
		{args: []string{"aggregate", "posts", "--count", "n", "--sum", "n=score"}, stderr: `two aggregates are named "n"`, code: 1},
		{args: []string{"aggregate", "posts", "--count", "n", "--order", "score"}, stderr: "unknown flag: --order", code: 2},
		{args: []string{"aggregate", "jobs", "--count", "n"}, code: 1},
		{args: []string{"aggregate", "nope", "--count", "n"}, code: 1},
	} {
		out, errOut, code := run(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.stderr)
		}
		if tc.out != "" && !strings.HasPrefix(out, tc.out) {
			t.Errorf("%q:\n%s\nwant\n%s", tc.args, out, tc.out)
		}
	}
}
