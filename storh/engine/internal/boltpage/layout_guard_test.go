package boltpage

import (
	"os"
	"strings"
	"testing"
)

// TestLayoutCheckedAgainstGoMod fails when go.mod builds with another
// bbolt than the release the direct reader's assumptions about bbolt's
// page layout were checked against (LayoutChecked, layout.go), or with a
// replacement of it: until they are checked again, the reader could read a
// file in a way bbolt no longer writes it.
func TestLayoutCheckedAgainstGoMod(t *testing.T) {
	const bolt = "go.etcd.io/bbolt"
	b, err := os.ReadFile("../../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var required string
	block := ""
	for line := range strings.Lines(string(b)) {
		line, _, _ = strings.Cut(line, "//")
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
			continue
		case f[0] == ")":
			block = ""
			continue
		case len(f) == 2 && f[1] == "(":
			block = f[0]
			continue
		case block != "":
			f = append([]string{block}, f...)
		}
		if len(f) >= 3 && f[1] == bolt {
			switch f[0] {
			case "require":
				required = f[2]
			case "replace":
				t.Fatalf("go.mod replaces %s: %s\n%s", bolt, strings.TrimSpace(line), recheck)
			}
		}
	}
	if required != LayoutChecked {
		t.Fatalf("go.mod requires %s %s, but the direct reader's assumptions about bbolt's page layout were checked against %s.\n%s",
			bolt, required, LayoutChecked, recheck)
	}
}

const recheck = "Check them again before raising LayoutChecked in storh/engine/internal/boltpage/layout.go: " +
	"the meta page and the page header (layout.go, file.go, check.go), branch and leaf element headers " +
	"and nested buckets' values (check.go, reader.go), that bbolt neither remaps the file nor " +
	"reuses its pages while a read transaction is open (reader.go, cursor.go), and which of " +
	"bbolt's locks its Begin holds while it reads the meta pages (releaseBegin, storh/engine/file_failure.go)."
