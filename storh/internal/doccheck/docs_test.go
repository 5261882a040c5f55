package doccheck_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/doccheck"
)

// moduleRoot is the directory of the go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// TestDocs type-checks every go block of README.md and docs/*.md.
func TestDocs(t *testing.T) {
	root := moduleRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	perFile := map[string][]doccheck.Block{}
	var all []doccheck.Block
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		blocks, err := doccheck.Parse(rel, src)
		if err != nil {
			t.Fatal(err)
		}
		perFile[rel] = blocks
		all = append(all, blocks...)
	}
	goBlocks := 0
	for _, b := range all {
		if b.Lang == "go" {
			goBlocks++
		}
	}
	if goBlocks < 50 {
		t.Errorf("found %d go blocks: the extraction no longer finds what the docs hold", goBlocks)
	}
	c, err := doccheck.NewChecker(root, doccheck.Imports(all))
	if err != nil {
		t.Fatal(err)
	}
	for _, blocks := range perFile {
		for _, err := range c.Check(blocks) {
			t.Errorf("%v", err)
		}
	}
}
