package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseIndexPaths(t *testing.T) {
	for in, want := range map[string][][]string{
		"slug":                {{"slug"}},
		"kind,publishedAt":    {{"kind"}, {"publishedAt"}},
		"kind, author.name":   {{"kind"}, {"author", "name"}},
		`"a b",c`:             {{"a b"}, {"c"}},
		`"x,y"`:               {{"x,y"}},
		`author."first name"`: {{"author", "first name"}},
		`"http.status"`:       {{"http.status"}},
	} {
		got, err := parseIndexPaths(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %q %v, want %q", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"":        `fields "": at column 1: expected a field name; got the end`,
		"a,":      `fields "a,": at column 3: expected a field name; got the end`,
		"a b":     `fields "a b": at column 3: expected ',' and another field, or the end; got "b"`,
		"a=1":     `at column 2: expected ',' and another field, or the end; got "=1"`,
		"a.b,a.b": "", // the library refuses the same path twice
	} {
		_, err := parseIndexPaths(in)
		if msg == "" {
			continue
		}
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want one containing %q", in, err, msg)
		}
	}
}
