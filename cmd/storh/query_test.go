package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseOrder(t *testing.T) {
	tests := []struct {
		in   string
		path []string
		desc bool
	}{
		{"score", []string{"score"}, false},
		{"-score", []string{"score"}, true},
		{"+score", []string{"score"}, false},
		{"author.name", []string{"author", "name"}, false},
		{`-"a b".c`, []string{"a b", "c"}, true},
		{`"-x"`, []string{"-x"}, false},
	}
	for _, tt := range tests {
		path, desc, err := parseOrder(tt.in)
		if err != nil || !reflect.DeepEqual(path, tt.path) || desc != tt.desc {
			t.Errorf("%s: %q %v %v, want %q %v", tt.in, path, desc, err, tt.path, tt.desc)
		}
	}
	bad := []struct{ in, msg string }{
		{"-", `--order "-": at column 2: expected a field name; got the end`},
		{"a b", `--order "a b": at column 2: expected the end after the field name; got ' ' (one field only)`},
		{"-a,b", `--order "-a,b": at column 3: expected the end after the field name; got ','`},
		{"a..b", `at column 3: expected a field name after '.'`},
	}
	for _, tt := range bad {
		_, _, err := parseOrder(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%q: error %v, want one containing %q", tt.in, err, tt.msg)
		}
	}
}

// TestWhereErrors checks that a --where error names the flag, the
// expression (cut when long) and the column.
func TestWhereErrors(t *testing.T) {
	long := strings.Repeat("a", 1100) + "=1"
	for _, tc := range []struct{ in, want string }{
		{"n==5", `--where "n==5": at column 3: '==' is not an operator; write n=5`},
		{"a=1 or é=1 or ü ~ 2", `--where "a=1 or é=1 or ü ~ 2": at column 17: unknown operator "~"`},
		{long, `(1,102 characters): at column 1: field name "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"... is 1100 bytes, the limit is 1024`},
	} {
		f := queryFlags{where: []string{tc.in}}
		_, err := f.build(time.Now())
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "--where "+quoteExpr(tc.in)+": at column ") {
			t.Errorf("%.40q: %v\nwant one containing %q", tc.in, err, tc.want)
		}
	}
}
