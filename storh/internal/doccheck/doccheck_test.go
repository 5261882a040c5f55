package doccheck_test

import (
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/doccheck"
)

// TestCheck runs the checker on small pages: what must pass passes, and
// each kind of drift fails with the page's file and line.
func TestCheck(t *testing.T) {
	const db = "<!-- doccheck\nvar db *storh.DB\n-->\n"
	tests := []struct {
		name string
		page string
		want []string // substrings of the errors, in order; none: it passes
	}{
		{"fragments chain, and may redeclare and leave variables unused",
			db + "```go\nposts, err := db.Docs(\"posts\")\nif err != nil {\n\treturn err\n}\n```\n\ntext\n\n" +
				"```go\nrec, err := posts.Put(storh.Map{\"a\": 1})\n```\n\n```go\n_, err := posts.Get(rec.ID)\nvar unused int\n```\n", nil},
		{"a method that does not exist",
			db + "```go\nposts, _ := db.Docs(\"posts\")\nposts.Upsert(storh.Map{})\n```\n",
			[]string{"page.md:6: posts.Upsert undefined"}},
		{"a call with the wrong number of results",
			"<!-- doccheck\nvar q *storh.Queue\n-->\n```go\npending, claimed, done, dead := q.Counts()\n```\n",
			[]string{"page.md:5: assignment mismatch: 4 variables but q.Counts returns 2 values"}},
		{"a block in a list item",
			"- a step:\n\n  ```go\n  fmt.Println(nosuch)\n  ```\n", []string{"page.md:4: undefined: nosuch"}},
		{"a language feature newer than go.mod's go line",
			"```go\np := new(42)\n```\n", []string{"page.md:2: new(42) requires go1.26 or later"}},
		{"a free identifier without a preamble",
			"```go\nfmt.Println(db)\n```\n", []string{"page.md:2: undefined: db"}},
		{"an explicit import that does not exist",
			"```go\nimport \"github.com/storhdb/storh-go/storh/nosuch\"\n\nnosuch.X()\n```\n",
			[]string{"page.md:2: could not import github.com/storhdb/storh-go/storh/nosuch"}},
		{"a program is strict about unused variables",
			"```go\npackage main\n\nfunc main() {\n\tx := 1\n}\n```\n", []string{"page.md:5: declared and not used: x"}},
		{"so is a function shown whole, where fragments are not",
			"```go\nfunc f() {\n\tx := 1\n}\n```\n\n```go\ny := 2\n```\n", []string{"page.md:3: declared and not used: x"}},
		{"a fragment written as a function's body",
			"<!-- doccheck func(w http.ResponseWriter, r *http.Request) -->\n```go\nid, err := uuidv7.Parse(r.PathValue(\"id\"))\nif err != nil {\n\treturn\n}\nfmt.Fprintln(w, id)\n```\n", nil},
		{"a restated type that matches",
			"<!-- doccheck mirror github.com/storhdb/storh-go/storh -->\n```go\ntype Job struct {\n\tRecord\n\tState      JobState\n\tAttempts   int\n\tLeaseUntil time.Time\n\tChanged    time.Time\n\tLastError  string\n\tDue        time.Time\n\tToken      uint64\n}\n\nfunc (q *Queue) Counts() (QueueCounts, error)\n```\n", nil},
		{"a restated type with a field missing, a method with another signature",
			"<!-- doccheck mirror github.com/storhdb/storh-go/storh -->\n```go\ntype Job struct {\n\tRecord\n\tState JobState\n}\n\nfunc (q *Queue) Counts() (pending, claimed, done, dead int)\n\nfunc Nothing()\n```\n",
			[]string{"page.md:3: Job is not as in", "page.md:8: Queue.Counts is not as in", "page.md:10: github.com/storhdb/storh-go/storh has no Nothing"}},
	}
	c, err := doccheck.NewChecker(moduleRoot(t), []string{"github.com/storhdb/storh-go/storh/nosuch"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blocks, err := doccheck.Parse("page.md", []byte(tt.page))
			if err != nil {
				t.Fatal(err)
			}
			errs := c.Check(blocks)
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tt.want), errs)
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tt.want[i]) {
					t.Errorf("error %d: %v\nwant it to contain %q", i, err, tt.want[i])
				}
			}
		})
	}
}

// TestParseRefuses checks that a doccheck comment cannot silently apply to
// nothing, or to the wrong block.
func TestParseRefuses(t *testing.T) {
	for _, page := range []string{
		"<!-- doccheck\nvar db *storh.DB\n-->\ntext\n```go\nx := 1\n```\n",
		"<!-- doccheck\nvar db *storh.DB\n-->\n```sh\nstorh stats\n```\n",
		"<!-- doccheck\nvar db *storh.DB\n-->\n",
		"<!-- doccheck somehow -->\n```go\nx := 1\n```\n",
		"<!-- doccheck\nvar db *storh.DB\n",
		"```go\nx := 1\n",
	} {
		if _, err := doccheck.Parse("page.md", []byte(page)); err == nil {
			t.Errorf("Parse accepted %q", page)
		} else {
			t.Log(err)
		}
	}
}
