package storh_test

import (
	"os"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
)

// TestVerifyAndStatsReadTheOpenFile: Verify and Stats read the file the
// database has open, never its path. After the file at the path is
// removed they still succeed on the open file; after a different, damaged
// file is moved to the path, Verify still finds the open database healthy
// and Stats gives its size, not the other file's.
func TestVerifyAndStatsReadTheOpenFile(t *testing.T) {
	fileOnly(t)
	for _, replace := range []bool{false, true} {
		path := newPath(t)
		db := openAt(t, path)
		docs, err := db.Docs("d")
		if err != nil {
			t.Fatal(err)
		}
		items := make([]any, 500)
		for i := range items {
			items[i] = storh.Map{"i": i, "pad": strings.Repeat("x", 100)}
		}
		if _, err := docs.PutMany(items); err != nil {
			t.Fatal(err)
		}
		before, err := db.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if replace {
			// Another database, of another size, whose every page after
			// the meta pages is zeroed: a page check of it finds nothing
			// but damage.
			other := newPath(t)
			odb := openAt(t, other)
			if _, err := odb.Docs("other"); err != nil {
				t.Fatal(err)
			}
			if err := odb.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(other)
			if err != nil {
				t.Fatal(err)
			}
			clear(b[2*os.Getpagesize():])
			if err := os.WriteFile(other, append(b, make([]byte, 1<<20)...), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, path); err != nil {
				t.Fatal(err)
			}
		}
		var problems []string
		rep, err := db.Verify(func(p storh.Problem) { problems = append(problems, p.String()) })
		if err != nil || rep.Problems != 0 || rep.Records != 500 {
			t.Errorf("replaced %v: Verify = %+v, %v %q; want the open database healthy, 500 records", replace, rep, err, problems)
		}
		st, err := db.Stats()
		if err != nil || st.FileSize != before.FileSize {
			t.Errorf("replaced %v: Stats = file size %d, %v; want %d, the open file's", replace, st.FileSize, err, before.FileSize)
		}
	}
}
