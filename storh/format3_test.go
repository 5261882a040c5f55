package storh_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
)

// Format 3 chains the blocks of blocked indexes: each block is filed under
// the lower bound of its range (the first under the head key, 00) and
// names the key of the next, so that a block lost from the file is damage
// a read finds (storh/engine/index_block.go). The pinned files hold the
// same content as format 2's (writeFormat2DB), written by format 3:
// testdata/format3/format3.db and the bytes of its every block and journal
// record (testdata/format3/index.hex). Today's code must read that file
// and write those bytes; a change to them needs a new format version,
// never a regenerated file.
var writeFormat3 = flag.Bool("write-format3", false, "write testdata/format3 (only where it does not exist yet)")

const format3Dir = "testdata/format3"

// TestFormat3WriteFiles writes the pinned files when asked to and they do
// not exist yet.
func TestFormat3WriteFiles(t *testing.T) {
	if !*writeFormat3 {
		t.Skip("run with -write-format3 to write testdata/format3 (once)")
	}
	if _, err := os.Stat(format3Dir); err == nil {
		t.Fatalf("%s exists: the format-3 files are never rewritten", format3Dir)
	}
	tmp := filepath.Join(t.TempDir(), "format3.db")
	writeFormat2DB(t, tmp)
	if err := os.MkdirAll(format3Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := storh.Compact(tmp, filepath.Join(format3Dir, "format3.db")); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("# index/bucket key value-hex: every block (\"i\") and journal record (\"l\") of collection docs\n")
	b.WriteString("# Format 3, pinned: these bytes must never change. See storh/format3_test.go.\n")
	vals := indexValues(t, tmp)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range vals {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "%s %x\n", k, vals[k])
	}
	if err := os.WriteFile(filepath.Join(format3Dir, "index.hex"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFormat3FileReads: today's code opens the pinned file, whose indexes
// hold exactly the pinned blocks and journal records, all chained, and
// finds through each index what a scan of the records finds; Verify is
// clean.
func TestFormat3FileReads(t *testing.T) {
	fileOnly(t)
	path := pinnedCopy(t, format3Dir, "format3.db")
	vectors := readHexLines(t, filepath.Join(format3Dir, "index.hex"))
	if got := indexValues(t, path); !mapsEqual(got, vectors) {
		t.Errorf("the file holds %d blocks and records, index.hex %d, or their bytes differ", len(got), len(vectors))
	}
	for k, v := range vectors {
		if strings.HasPrefix(k, "i/") && (len(v) == 0 || v[0] != 2) {
			t.Errorf("pinned block %s is not of version 2", k)
		}
	}
	if m := formatMarker(t, path); m != 3 {
		t.Errorf("format marker %d, want 3", m)
	}
	db, err := storh.Open(path, storh.WithReadOnly())
	if err != nil {
		t.Fatalf("open the format-3 file: %v", err)
	}
	defer db.Close()
	checkPinnedContent(t, db)
}

// TestFormat3WritesThePinnedBytes: writing the same content with today's
// code gives the pinned blocks and journal records, byte for byte.
func TestFormat3WritesThePinnedBytes(t *testing.T) {
	fileOnly(t)
	vectors := readHexLines(t, filepath.Join(format3Dir, "index.hex"))
	path := filepath.Join(t.TempDir(), "again.db")
	writeFormat2DB(t, path)
	got := indexValues(t, path)
	for key, want := range vectors {
		if !bytes.Equal(got[key], want) {
			t.Errorf("%s: today's code writes\n %x\nindex.hex pins\n %x", key, got[key], want)
		}
	}
	if len(got) != len(vectors) {
		t.Errorf("wrote %d blocks and records; index.hex has %d", len(got), len(vectors))
	}
}
