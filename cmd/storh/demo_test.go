package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// masks replace what may differ between demo runs: ids, clock times and
// timings, and sizes.
var masks = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}`), "ID"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "DATETIME"},
	{regexp.MustCompile(`\d\d:\d\d:\d\d(\.\d{3})?`), "TIME"},
	{regexp.MustCompile(`\d+ ms`), "N ms"},
	{regexp.MustCompile(`[0-9.]+ [KMG]?i?B`), "SIZE"},
	{regexp.MustCompile(`\(new demo collections\)|\(replaced the previous demo collections\)`), "(NOTE)"},
}

func mask(s string) string {
	for _, m := range masks {
		s = m.re.ReplaceAllString(s, m.with)
	}
	return s
}

// TestDemo runs the demo twice on one database: both runs succeed, the
// output is short, and it is the same but for ids, times and sizes.
func TestDemo(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	var outs []string
	for _, now := range []time.Time{time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), time.Now()} {
		var out, errb bytes.Buffer
		a := newApp(context.Background(), strings.NewReader(""), &out, &errb, func(string) string { return "" })
		a.now = func() time.Time { return now }
		root := a.rootCmd()
		root.SetArgs([]string{"--db", db, "demo"})
		if err := root.Execute(); err != nil {
			t.Fatalf("demo: %v\n%s", err, errb.String())
		}
		if errb.Len() > 0 {
			t.Errorf("demo wrote to stderr: %s", errb.String())
		}
		if n := strings.Count(out.String(), "\n"); n > 60 {
			t.Errorf("demo output is %d lines, want at most 60", n)
		}
		outs = append(outs, out.String())
	}
	if a, b := mask(outs[0]), mask(outs[1]); a != b {
		t.Errorf("two demo runs differ beyond ids and times:\n%s\n---\n%s", a, b)
	}
	if !strings.Contains(outs[0], "(10:59:59.") && !strings.Contains(outs[0], "11:00:00 to 12:00:00 UTC") {
		t.Errorf("the first run's hour is not the hour before its clock:\n%s", outs[0])
	}
}
