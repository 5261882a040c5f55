package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
)

// libraryTerms are words of the library's Go API that mean nothing to a
// user of the command.
var libraryTerms = regexp.MustCompile(`ReadOnly|WithMaxSize|WithLockTimeout|tx\.Docs|tx\.Log|db\.(Docs|Log|Queue)|Update/View|inside Update|Open in this`)

// TestLibraryErrorsInCLITerms makes the library fail in each way whose
// message names its API, and checks what the command prints for it.
func TestLibraryErrorsInCLITerms(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lib.db")
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := db.Docs("pages")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := docs.Put(storh.Map{"a": 1}); err != nil {
		t.Fatal(err)
	}
	errs := map[string]error{}
	_, errs["wrong kind"] = db.Log("pages")
	errs["nested call"] = db.Update(func(*storh.Tx) error { _, err := db.Stats(); return err })
	db.Close()

	ro, err := storh.Open(path, storh.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	roDocs, err := ro.Docs("pages")
	if err != nil {
		t.Fatal(err)
	}
	_, errs["write on a read-only database"] = roDocs.Put(storh.Map{"a": 2})
	ro.Close()

	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs["read-only open of an empty file"] = storh.Open(empty, storh.WithReadOnly())

	small, err := storh.Open(filepath.Join(dir, "small.db"), storh.WithMaxSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	smallDocs, err := small.Docs("big")
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, err = smallDocs.Put(storh.Map{"s": strings.Repeat("x", 100_000)}); err != nil {
			break
		}
	}
	errs["size limit"] = err
	small.Close()

	for what, err := range errs {
		if err == nil {
			t.Errorf("%s: no error", what)
			continue
		}
		if !libraryTerms.MatchString(err.Error()) {
			t.Logf("%s: the library no longer names its API: %v", what, err)
		}
		for _, wrapped := range []bool{false, true} {
			var stderr bytes.Buffer
			a := newApp(context.Background(), strings.NewReader(""), &bytes.Buffer{}, &stderr, func(string) string { return "" })
			a.started = true
			e := err
			if wrapped {
				e = &jsonl.LineError{Line: 7, Err: err} // a library error quoted inside another
			}
			a.report(&cobra.Command{Use: "storh"}, e)
			if m := libraryTerms.FindString(stderr.String()); m != "" {
				t.Errorf("%s: the message names %q: %s", what, m, stderr.String())
			}
		}
	}
}

// TestQname checks how collection names are shown in messages.
func TestQname(t *testing.T) {
	for name, want := range map[string]string{
		"pages":                       `"pages"`,
		strings.Repeat("a", 64):       `"` + strings.Repeat("a", 64) + `"`,
		strings.Repeat("b", 65):       `"` + strings.Repeat("b", 48) + `…" (65 bytes)`,
		strings.Repeat("é", 5000):     `"` + strings.Repeat("é", 24) + `…" (10,000 bytes)`,
		"x" + strings.Repeat("é", 40): `"x` + strings.Repeat("é", 23) + `…" (81 bytes)`,
	} {
		if got := qname(name); got != want {
			t.Errorf("qname(%.20q…) = %s, want %s", name, got, want)
		}
	}
}
