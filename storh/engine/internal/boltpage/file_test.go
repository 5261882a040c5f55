package boltpage

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/internal/testkit"
)

// editMetas rewrites both meta pages of the closed file at path through
// edit, which gets each page's fields (after the page header), and seals
// them again with their checksum.
func editMetas(t *testing.T, path string, edit func(fields []byte)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var first [metaBytes]byte
	if _, err := f.ReadAt(first[:], 0); err != nil {
		t.Fatal(err)
	}
	m, ok := readMeta(first[:])
	if !ok {
		t.Fatal("the first meta page is not valid")
	}
	for id := range int64(2) {
		var b [metaBytes]byte
		if _, err := f.ReadAt(b[:], id*int64(m.pageSize)); err != nil {
			t.Fatal(err)
		}
		fields := b[pageHeader:]
		edit(fields)
		h := fnv.New64a()
		h.Write(fields[:metaSumFrom])
		binary.NativeEndian.PutUint64(fields[metaSumFrom:], h.Sum64())
		if _, err := f.WriteAt(b[:], id*int64(m.pageSize)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFileChecks: Precheck and CheckFileHolds pass a sound file and fail
// one cut short of the pages its meta page claims, or whose meta page puts
// the freelist past them; a file whose meta pages are both overwritten is
// left to bbolt by Precheck (it reports it) and fails CheckFileHolds, as
// it does when the file under an open database is overwritten.
func TestFileChecks(t *testing.T) {
	fixture, _ := checkFixture(t)
	var first [metaBytes]byte
	if b, err := os.ReadFile(fixture); err != nil || copy(first[:], b) < metaBytes {
		t.Fatalf("reading the fixture: %v", err)
	}
	m, ok := readMeta(first[:])
	if !ok {
		t.Fatal("the fixture's first meta page is not valid")
	}
	pageSize := int(m.pageSize)
	// bbolt grows a file in steps past its pages: the cut is below the
	// last page the meta page claims.
	pagesEnd := int64(m.pgid) * int64(m.pageSize)
	for _, tc := range []struct {
		name            string
		damage          func(t *testing.T, path string)
		precheck, holds string // what the error says; "" for none
	}{
		{"sound", func(*testing.T, string) {}, "", ""},
		{"cut short", func(t *testing.T, path string) {
			if err := os.Truncate(path, pagesEnd-int64(pageSize)); err != nil {
				t.Fatal(err)
			}
		}, "truncated to", "truncated to"},
		{"freelist past the pages", func(t *testing.T, path string) {
			editMetas(t, path, func(b []byte) {
				binary.NativeEndian.PutUint64(b[32:], binary.NativeEndian.Uint64(b[40:])+5)
			})
		}, "its freelist is said to be on page", "its freelist is said to be on page"},
		{"meta pages overwritten", func(t *testing.T, path string) {
			testkit.EditPage(t, path, 0, func(p []byte) { clear(p) })
			testkit.EditPage(t, path, 1, func(p []byte) { clear(p) })
		}, "", "neither of its meta pages is valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := testkit.CopyFile(t, fixture)
			tc.damage(t, path)
			same := func(what string, err error, want string) {
				t.Helper()
				switch {
				case want == "" && err != nil:
					t.Errorf("%s: %v, want none", what, err)
				case want != "" && (!errors.Is(err, errs.ErrCorrupt) || !strings.Contains(err.Error(), want)):
					t.Errorf("%s: %v, want ErrCorrupt saying %q", what, err, want)
				}
			}
			same("Precheck", Precheck(path), tc.precheck)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			same("CheckFileHolds", CheckFileHolds(f, pageSize), tc.holds)
		})
	}
	for _, path := range []string{filepath.Join(t.TempDir(), "missing.db"), filepath.Join(t.TempDir(), "empty.db")} {
		if strings.HasSuffix(path, "empty.db") {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := Precheck(path); err != nil {
			t.Errorf("Precheck(%s): %v, want it left to bbolt", filepath.Base(path), err)
		}
	}
}
