package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// remoteIDs are the ids of the seeded records, the same in every seed.
var remoteIDs = func() []uuidv7.UUID {
	g := uuidv7.NewDeterministic(7, 1714564800000, 1000)
	ids := make([]uuidv7.UUID, 12)
	for i := range ids {
		ids[i] = g.New()
	}
	return ids
}()

// seedRemote writes the same database at path every time: a docs
// collection "posts" with a unique index on slug and an index on score, a
// log "events", and a queue "jobs" with a job pending, one claimed and one
// done.
func seedRemote(t *testing.T, path string) {
	t.Helper()
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	posts, err := db.Docs("posts", storh.WithIndex(storh.Index("slug").Unique()), storh.WithIndex(storh.Index("score")))
	if err != nil {
		t.Fatal(err)
	}
	tags := [][]any{{"go", "db"}, {"rust"}, {"go"}, {}, {"db"}, {"go", "web"}, {"web"}}
	for i := 0; i < 7; i++ {
		data := map[string]any{
			"slug":  "p" + string(rune('a'+i)),
			"score": int64(i * 3 % 7),
			"tags":  tags[i],
			"at":    time.Date(2024, 5, 1+i, 12, 0, 0, 0, time.UTC),
			"a.b":   map[string]any{"c": int64(i)},
		}
		if i%2 == 0 {
			data["draft"] = true
		}
		if _, err := posts.PutWithID(remoteIDs[i], data); err != nil {
			t.Fatal(err)
		}
	}
	events, err := db.Log("events")
	if err != nil {
		t.Fatal(err)
	}
	for i := 7; i < 12; i++ {
		level := "info"
		if i%2 == 1 {
			level = "error"
		}
		if _, err := events.PutWithID(remoteIDs[i], map[string]any{"level": level, "n": int64(i), "f": float64(i) / 2}); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := db.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	g := uuidv7.NewDeterministic(13, 1714564900000, 1000)
	for n := int64(1); n <= 3; n++ {
		if err := jobs.EnqueueWithID(g.New(), map[string]any{"n": n}); err != nil {
			t.Fatal(err)
		}
	}
	j, err := jobs.Claim(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := jobs.Complete(j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Claim(time.Hour); err != nil {
		t.Fatal(err)
	}
}

var freeBytes = regexp.MustCompile(`"free_bytes":[0-9]+,`)

type remoteStep struct {
	args  []string
	stdin string
}

type remoteCase struct {
	name  string
	steps []remoteStep
}

func step(args ...string) remoteStep { return remoteStep{args: args} }

// runEnv runs one command line in-process with the given environment.
func runEnv(args []string, stdin string, env map[string]string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return out.String(), errb.String(), code
}

// sameAsFileCases are command sequences whose stdout and exit code must
// not depend on where the database is: a file (--db path), the HTTP API
// (--url) or PostgreSQL (--db postgres://…). Each case starts from
// seedRemote's database.
func sameAsFileCases() []remoteCase {
	id := func(i int) string { return remoteIDs[i].String() }
	absent := uuidv7.NewDeterministic(9, 1714564800000, 1).New().String()
	fresh := uuidv7.NewDeterministic(11, 1714565800000, 1).New().String()
	impIDs := uuidv7.NewDeterministic(17, 1714566800000, 1000)
	imps := make([]string, 8)
	for i := range imps {
		imps[i] = impIDs.New().String()
	}
	imp := func(i int) string { return imps[i] }
	cases := []remoteCase{
		{"count", []remoteStep{step("count", "posts"), step("--json", "count", "events"), step("count", "empty")}},
		{"count where", []remoteStep{
			step("count", "posts", "--where", "tags contains go"),
			step("count", "posts", "--where", "score>=3 and not draft exists"),
			step("count", "events", "--where", "level in [error]", "--from", "1714564807000"),
			step("count", "posts", "--where", "tags contains go", "--require-index"),
			step("count", "posts", "--where", "draft=true", "--require-index"),
		}},
		{"count errors", []remoteStep{step("count", "nope"), step("count", "posts", "--where", "a=="), step("count", "posts", "--after", "xyz")}},
		{"stats", []remoteStep{step("--json", "stats"), step("--json", "stats", "posts"), step("stats", "nope")}},
		{"get", []remoteStep{
			step("get", "posts", id(3)), step("get", "events", strings.ToUpper(id(8))),
			step("get", "posts", absent), step("get", "posts", "not-an-id"), step("get", "nope", id(1)),
		}},
		{"query", []remoteStep{
			step("query", "posts"),
			step("query", "events", "--reverse"),
			step("query", "posts", "--limit", "3"),
			step("query", "posts", "--limit", "3", "--after", id(2)),
			step("query", "posts", "--reverse", "--before", id(5), "--limit", "3"),
			step("query", "posts", "--from", "2024-05-01T12:00:02Z", "--until", "1714564804000"),
			step("query", "posts", "--where", "tags contains go", "--order", "-score"),
			step("query", "posts", "--order", "score", "--limit", "2", "--after", id(5)),
			step("query", "posts", "--order", "-score", "--reverse"),
			step("query", "posts", "--where", `"a.b".c between 2 and 5`, "--order", `"a.b".c`),
			step("query", "posts", "--where", "slug^=p and (score<2 or score>5)", "--where", "tags not in [[rust]]"),
			step("query", "posts", "--where", `at>={"$date":"2024-05-04T00:00:00Z"}`),
			step("query", "posts", "--where", "draft missing or slug in [pa, pb]"),
			step("query", "events", "--where", "f=4.5"),
			step("query", "events", "--where", "f=4"),
			step("query", "posts", "--where", "nothing exists"),
		}},
		// One set of limits: as deep as a condition may nest works on a
		// file and over HTTP alike, one level deeper fails alike.
		{"deep where", []remoteStep{
			step("count", "posts", "--where", strings.Repeat("not ", 40)+"draft exists"),
			step("count", "posts", "--where", strings.Repeat("not ", query.MaxCondDepth-1)+"draft exists"),
			step("count", "posts", "--where", strings.Repeat("not ", query.MaxCondDepth)+"draft exists"),
		}},
		{"query errors", []remoteStep{
			step("query", "nope"),
			step("query", "posts", "--where", "a = (b"),
			step("query", "posts", "--order", "score", "--after", absent),
			step("query", "posts", "--where", "draft=true", "--require-index"),
			step("query", "posts", "--limit", "-1"),
		}},
		{"export", []remoteStep{
			step("export", "posts"),
			step("export", "events", "--where", "level=error", "--reverse"),
			step("export", "posts", "--order", "-score", "--limit", "4"),
			step("export", "nope"),
		}},
		{"put", []remoteStep{
			step("put", "posts", "--id", fresh, `{"slug":"new","score":1.0,"t":{"$date":"2024-05-01T00:00:00Z"}}`),
			step("get", "posts", fresh),
			step("put", "posts", "--id", id(1), `{"slug":"pb","score":99}`),
			step("count", "posts"),
			step("put", "posts", "--id", id(2), `{"slug":"pa"}`), // unique violation
			step("put", "events", "--id", id(8), `{"level":"x"}`),
			step("put", "posts", "--log", "--id", fresh, `{"x":1}`),
			step("put", "fresh", "--log", "--id", fresh, `{"x":1}`),
			step("--json", "stats", "fresh"),
			step("put", "posts", "not json"),
			step("count", "posts"),
		}},
		{"put stdin", []remoteStep{
			{args: []string{"put", "posts"}, stdin: "{\"slug\":\"pz\"}\n{\"slug\":\"pa\"}\n"}, // line 2 violates
			step("count", "posts"),
			{args: []string{"--json", "count", "lines"}},
		}},
		{"import", []remoteStep{
			{args: []string{"import", "posts", "-"}, stdin: `{"id":"` + imp(0) + `","data":{"slug":"q0","score":2}}` + "\n" +
				`{"id":"` + id(1) + `","data":{"slug":"pb","score":99}}` + "\n\n"},
			step("count", "posts"),
			step("get", "posts", imp(0)),
			step("get", "posts", id(1)),
			{args: []string{"import", "fresh", "-"}, stdin: `{"id":"` + imp(1) + `","data":{"n":1}}` + "\n" + `{"id":"` + imp(2) + `","data":{"n":{"$numberLong":"2"}}}` + "\n"},
			step("--json", "stats", "fresh"),
			step("query", "fresh"),
			{args: []string{"import", "--log", "flog", "-"}, stdin: `{"id":"` + imp(3) + `","data":{"level":"info"}}` + "\n"},
			step("--json", "stats", "flog"),
			{args: []string{"import", "--log", "posts", "-"}, stdin: `{"data":{"x":1}}` + "\n"},
			{args: []string{"import", "jobs", "-"}, stdin: `{"data":{"x":1}}` + "\n"},
			{args: []string{"import", "blank", "-"}, stdin: "\n\n"},
			step("stats", "blank"),
			{args: []string{"import", "posts", "-"}, stdin: "\n"},
			step("count", "posts"),
		}},
		{"import errors", []remoteStep{
			{args: []string{"import", "posts", "-"}, stdin: `{"id":"` + imp(4) + `","data":{"slug":"q4"}}` + "\nnot json\n"}, // bad line 2
			step("get", "posts", imp(4)),
			{args: []string{"import", "posts", "-"}, stdin: `[{"slug":"q5"}]` + "\n"}, // a JSON array: the hint
			{args: []string{"import", "newbad", "-"}, stdin: `{"id":"` + imp(5) + `","data":{"n":1}}` + "\n{\"n\":\n"},
			step("stats", "newbad"),
			{args: []string{"import", "posts", "-"}, stdin: `{"id":"` + imp(6) + `","data":{"slug":"q6"}}` + "\n" + `{"data":{"slug":"pa"}}` + "\n"}, // unique violation
			step("count", "posts"),
			step("get", "posts", imp(6)),
			{args: []string{"import", "events", "-"}, stdin: `{"id":"` + id(8) + `","data":{"level":"x"}}` + "\n"},                                             // a log's existing id
			{args: []string{"import", "posts", "-"}, stdin: `{"id":"` + imp(7) + `","data":{"a":1}}` + "\n" + `{"id":"` + imp(7) + `","data":{"a":2}}` + "\n"}, // an id twice
			step("count", "posts"),
			step("import", "posts", "no-such-file.jsonl"),
		}},
		{"explain", []remoteStep{
			step("explain", "posts", "--where", "slug=pc", "--limit", "2"),
			step("--json", "explain", "posts", "--where", "score>=3", "--order", "-score", "--limit", "2"),
			step("explain", "events", "--where", "level=error", "--reverse", "--limit", "1"),
			step("explain", "posts", "--where", "tags contains go", "--after", id(1), "--limit", "2"),
		}},
		{"explain errors", []remoteStep{
			step("explain", "nope"),
			step("explain", "jobs", "--limit", "1"),
			step("explain", "posts", "--where", "draft=true", "--require-index", "--limit", "1"),
			step("explain", "posts", "--where", "a=="),
			step("explain", "posts", "--order", "score", "--after", absent, "--limit", "1"),
		}},
		{"aggregate", []remoteStep{
			step("aggregate", "posts", "--group", "draft", "--count", "n", "--sum", "total=score", "--avg", "mean=score", "--min", "first=at", "--max", "last=slug"),
			step("aggregate", "posts", "--group", "tags", "--group", "draft", "--count", "n", "--where", "score>=2", "--until", "1714564804000"),
			step("--json", "aggregate", "events", "--group", "level", "--count", "n", "--sum", "s=f", "--max", "top=n", "--after", id(8)),
			step("aggregate", "events", "--count", "n:all", "--avg", "a:b=n"),
			step("aggregate", "posts", "--count", "n", "--where", "slug=nope"),
			step("aggregate", "posts", "--group", "score", "--count", "n", "--explain"),
			step("--json", "aggregate", "posts", "--group", "draft", "--count", "n", "--where", "score=3", "--explain"),
			step("aggregate", "posts", "--count", "n", "--sum", "n=score"),
			step("aggregate", "posts", "--group", "tags.x", "--count", "n"),
			step("aggregate", "posts", "--count", "n", "--where", "a=="),
			step("aggregate", "jobs", "--count", "n"),
			step("aggregate", "nope", "--count", "n"),
		}},
		{"index list", []remoteStep{
			step("index", "list", "posts"),
			step("--json", "index", "list", "posts"),
			step("index", "list", "events"),
			step("--json", "index", "list", "events"),
			step("index", "list", "nope"),
			step("index", "list", "jobs"),
		}},
		{"queue stats", []remoteStep{
			step("queue", "stats", "jobs"),
			step("--json", "queue", "stats", "jobs"),
			step("queue", "stats", "posts"),
			step("queue", "stats", "events"),
			step("queue", "stats", "nope"),
		}},
		{"verify", []remoteStep{
			step("verify"),
			step("--json", "verify"),
			step("verify", "posts", "jobs"),
			step("--json", "verify", "events"),
			step("verify", "nope"),
			step("verify", "posts", "nope"),
		}},
		{"tail", []remoteStep{
			step("tail", "events"),
			step("tail", "posts", "-n", "3"),
			step("tail", "posts", "-n", "0"),
			step("tail", "events", "-n", "100"),
			step("tail", "empty"),
			step("tail", "nope"),
			step("tail", "jobs"),
			step("tail", "posts", "-n", "-1"),
		}},
		{"patch", []remoteStep{
			step("patch", "posts", id(1), "--set", "score=10", "--inc", "score=1", "--push", `tags="x"`, "--unset", "a.b",
				"--set", `m.t={"$date":"2024-05-01T00:00:00Z"}`, "--add-to-set", `tags="rust"`, "--pull", `tags="x"`),
			step("get", "posts", id(1)),
			step("patch", "posts", id(1), "--inc", "score=-1", "--set", "score=1.5"),
			step("patch", "posts", id(1), "--set", "x=1", "--inc", "slug=1"),
			step("patch", "posts", id(1), "--set", `slug="pa"`),
			step("patch", "posts", absent, "--set", "x=1"),
			step("patch", "posts", id(1), "--set", "x=nope"),
			step("patch", "posts", "bad", "--set", "x=1"),
			step("patch", "events", id(8), "--set", "x=1"),
			step("patch", "jobs", id(1), "--set", "x=1"),
			step("patch", "nope", id(1), "--set", "x=1"),
			step("export", "posts"),
		}},
		{"schema", []remoteStep{
			step("schema", "get", "posts"),
			{args: []string{"schema", "set", "posts"}, stdin: `{"required":["nope"]}`}, // the records fail it
			{args: []string{"schema", "set", "posts", "-"}, stdin: `{"type":"object","properties":{"score":{"type":"integer","minimum":0}}}`},
			step("schema", "get", "posts"),
			step("--json", "schema", "get", "posts"),
			step("put", "posts", "--id", fresh, `{"slug":"neg","score":-1}`),
			{args: []string{"import", "posts", "-"}, stdin: `{"id":"` + imp(0) + `","data":{"slug":"q0","score":-2}}` + "\n"},
			step("patch", "posts", id(1), "--set", "score=-3"),
			step("count", "posts"),
			{args: []string{"schema", "set", "posts"}, stdin: `{"type":"strng"}`},
			{args: []string{"schema", "set", "posts"}, stdin: `not json`},
			{args: []string{"schema", "set", "jobs"}, stdin: `{}`},
			{args: []string{"schema", "set", "nope"}, stdin: `{}`},
			step("schema", "get", "jobs"),
			step("--json", "schema", "rm", "posts"),
			step("--json", "schema", "get", "posts"),
			step("put", "posts", "--id", fresh, `{"slug":"neg","score":-1}`),
		}},
		{"delete", []remoteStep{
			step("--json", "delete", "posts", id(1), absent, id(1)),
			step("get", "posts", id(1)),
			step("delete", "events", id(8)),
			step("delete", "posts", "bad"),
			step("delete", "nope", id(1)),
			step("count", "posts"),
		}},
	}
	return cases
}

// TestRemoteSameAsFile runs each case twice, on a freshly seeded file
// (--db) and over HTTP (--url) against web.Handler on a database seeded
// the same way, and wants the same stdout and exit code from every step.
// The handler's page size is 2, so reads over HTTP page with next.
func TestRemoteSameAsFile(t *testing.T) {
	for _, c := range sameAsFileCases() {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			local := filepath.Join(dir, "local.db")
			seedRemote(t, local)
			remote := filepath.Join(dir, "remote.db")
			seedRemote(t, remote)
			db, err := storh.Open(remote)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(web.Handler(db, web.WithWrites(), web.WithMaxPage(2)))
			defer func() { srv.Close(); db.Close() }()
			compareSteps(t, c.steps, []string{"--db", local}, []string{"--url", srv.URL}, "http", func(s string) string {
				// The path is the store's name; free pages are counted
				// only by a database opened for writing, as the server's is.
				return freeBytes.ReplaceAllString(strings.NewReplacer(local, "DB", srv.URL, "DB").Replace(s), "")
			})
		})
	}
}

// compareSteps runs every step on a file (the first flags) and elsewhere
// (the second), and wants the same stdout, after norm, and exit code.
func compareSteps(t *testing.T, steps []remoteStep, file, other []string, otherName string, norm func(string) string) {
	t.Helper()
	for _, s := range steps {
		lout, lerr, lcode := runEnv(append(slices.Clone(file), s.args...), s.stdin, nil)
		rout, rerr, rcode := runEnv(append(slices.Clone(other), s.args...), s.stdin, nil)
		lout, rout = norm(lout), norm(rout)
		if lout != rout || lcode != rcode {
			t.Errorf("storh %s:\nfile: exit %d\n%s%s\n%s: exit %d\n%s%s", strings.Join(s.args, " "), lcode, lout, lerr, otherName, rcode, rout, rerr)
		}
	}
}

// TestRemoteErrors covers what only the HTTP path has: a read-only
// handler, the token, and --url where it does not belong.
func TestRemoteErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.db")
	seedRemote(t, path)
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ro := httptest.NewServer(web.Handler(db))
	defer ro.Close()
	tok := httptest.NewServer(web.Handler(db, web.WithToken("s3cret")))
	defer tok.Close()

	for _, tc := range []struct {
		args   []string
		env    map[string]string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"--url", ro.URL, "put", "posts", "--id", remoteIDs[0].String(), `{"x":1}`}, nil, exitError, "", "read-only"},
		{[]string{"--url", ro.URL, "delete", "posts", remoteIDs[0].String()}, nil, exitError, "", "read-only"},
		{[]string{"--url", ro.URL, "count", "posts"}, nil, exitOK, "7\n", ""},
		{[]string{"count", "posts"}, map[string]string{"STORH_URL": ro.URL}, exitOK, "7\n", ""},
		{[]string{"--url", tok.URL, "count", "events"}, nil, exitError, "", "needs a token"},
		{[]string{"--url", tok.URL, "--token", "wrong", "count", "events"}, nil, exitError, "", "refused the token"},
		{[]string{"--url", tok.URL, "--token", "s3cret", "count", "events"}, nil, exitOK, "5\n", ""},
		{[]string{"--url", tok.URL, "count", "events"}, map[string]string{"STORH_TOKEN": "s3cret"}, exitOK, "5\n", ""},
		{[]string{"--url", ro.URL, "query", "posts", "--where", "draft=true", "--require-index"}, nil, exitError, "", "--require-index: no index of \"posts\""},
		{[]string{"--url", ro.URL, "query", "posts", "--order", "score", "--after", uuidv7.NewDeterministic(9, 1714564800000, 1).New().String()}, nil, exitError, "", "has no record"},
		{[]string{"--url", ro.URL, "--db", path, "count", "events"}, nil, exitUsage, "", "--url and --db"},
		{[]string{"--url", ro.URL, "backup", "x.db"}, nil, exitUsage, "", "database file only"},
		{[]string{"--url", ro.URL, "compact"}, nil, exitUsage, "", "database file only"},
		{[]string{"--url", ro.URL, "index", "create", "posts", "x"}, nil, exitUsage, "", "storh index create works on a database file only"},
		{[]string{"--url", ro.URL, "index", "drop", "posts", "score"}, nil, exitUsage, "", "database file only"},
		{[]string{"--url", ro.URL, "queue", "enqueue", "jobs", `{"n":1}`}, nil, exitError, "", "read-only"},
		{[]string{"--url", ro.URL, "queue", "claim", "jobs"}, nil, exitError, "", "read-only"},
		{[]string{"--url", ro.URL, "queue", "options", "jobs", "--max-attempts", "2"}, nil, exitError, "", "read-only"},
		{[]string{"--url", ro.URL, "queue", "jobs", "jobs"}, nil, exitOK, `{"id":"018f3408-2c70-75fc-a70d-6db09f31cf60","time":"2024-05-01T12:01:42.000Z","state":"pending","attempts":0}` + "\n", ""},
		{[]string{"--url", tok.URL, "queue", "lookup", "jobs", "018f3408-2c70-75fc-a70d-6db09f31cf60"}, nil, exitError, "", "needs a token"},
		{[]string{"--url", ro.URL, "index", "list", "posts"}, nil, exitOK, "NAME   PATHS  UNIQUE  ENTRIES  STATE  LAYOUT\nscore  score  no      7        ready  blocks (7 journaled)\nslug   slug   yes     7        ready  blocks (7 journaled)\n", ""},
		{[]string{"--url", ro.URL, "--json", "queue", "stats", "jobs"}, nil, exitOK, `{"queue":"jobs","pending":1,"claimed":1,"done":1,"dead":0,"scheduled":0,"bytes":27}` + "\n", ""},
		{[]string{"--url", ro.URL, "import", "--mongo", "users", "-"}, nil, exitUsage, "", "import --mongo works on a database file only"},
		{[]string{"--url", ro.URL, "import", "--skip-invalid", "posts", "-"}, nil, exitUsage, "", "drop --skip-invalid"},
		{[]string{"--url", ro.URL, "import", "--on-duplicate=last", "posts", "-"}, nil, exitUsage, "", "--on-duplicate=last"},
		{[]string{"--url", ro.URL, "import", "--on-duplicate", "skip", "posts", "-"}, nil, exitUsage, "", "--on-duplicate=skip"},
		{[]string{"--url", ro.URL, "import", "--invalid-utf8=binary", "posts", "-"}, nil, exitUsage, "", "--invalid-utf8=binary"},
		{[]string{"--url", ro.URL, "import", "posts", "-"}, nil, exitError, "", "read-only"},
		{[]string{"--url", ro.URL, "uuid", "new"}, nil, exitUsage, "", "needs no database"},
		{[]string{"--url", ro.URL, "delete", "posts", "--where", "x=1"}, nil, exitUsage, "", "database file only"},
		{[]string{"--url", ro.URL, "patch", "posts", "--where", "x=1", "--set", "x=2"}, nil, exitUsage, "", "database only"},
		{[]string{"--url", ro.URL, "patch", "posts", remoteIDs[0].String(), "--set", "x=2"}, nil, exitError, "", "read-only"},
		{[]string{"--url", "ftp://x", "count", "posts"}, nil, exitUsage, "", "http://"},
		{[]string{"--url", "http://127.0.0.1:1", "count", "posts"}, nil, exitError, "", "cannot reach"},
		// $STORH_URL does not concern a file-only command, and --db beats it.
		{[]string{"--db", path + ".none", "count", "posts"}, map[string]string{"STORH_URL": ro.URL}, exitError, "", "no database at"},
	} {
		out, errs, code := runEnv(tc.args, "", tc.env)
		if code != tc.code || out != tc.stdout || !strings.Contains(errs, tc.stderr) {
			t.Errorf("storh %s (env %v): exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr with %q",
				strings.Join(tc.args, " "), tc.env, code, out, errs, tc.code, tc.stdout, tc.stderr)
		}
	}
}

// TestRemoteErrorMapping checks that the API's error kinds come back as the
// sentinels the file path returns.
func TestRemoteErrorMapping(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.db")
	seedRemote(t, path)
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := httptest.NewServer(web.Handler(db, web.WithWrites()))
	defer srv.Close()
	ro := httptest.NewServer(web.Handler(db))
	defer ro.Close()
	a := newApp(context.Background(), nil, nil, nil, func(string) string { return "" })
	a.url = srv.URL
	s := a.newHTTPStore()
	if _, err := s.get("posts", uuidv7.New()); !errors.Is(err, storh.ErrNotFound) {
		t.Errorf("get of an absent id: %v, want ErrNotFound", err)
	}
	_, err = s.put("posts", "docs", []uuidv7.UUID{uuidv7.New()}, []any{map[string]any{"slug": "pa"}})
	if !errors.Is(err, storh.ErrUniqueViolation) {
		t.Errorf("put of a taken slug: %v, want ErrUniqueViolation", err)
	}
	_, err = s.put("events", "log", []uuidv7.UUID{remoteIDs[8]}, []any{map[string]any{}})
	if !errors.Is(err, storh.ErrExists) {
		t.Errorf("put of an id the log has: %v, want ErrExists", err)
	}
	a.url = ro.URL
	if _, _, err := a.newHTTPStore().deleteIDs("posts", remoteIDs[:1]); !errors.Is(err, storh.ErrReadOnly) {
		t.Errorf("delete on a read-only handler: %v, want ErrReadOnly", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	a.url = srv.URL
	if _, err := a.newHTTPStore().stats(); !errors.Is(err, storh.ErrClosed) {
		t.Errorf("stats of a closed database: %v, want ErrClosed", err)
	}
}

// TestCondJSON checks the JSON form that --where expressions are sent in:
// the HTTP API reads it back as the condition the file path runs.
func TestCondJSON(t *testing.T) {
	for _, tc := range []struct {
		where []string
		want  string
	}{
		{[]string{"level=error"}, `{"field":"level","op":"eq","value":"error"}`},
		{[]string{"n>=5", "n<9.5"}, `{"and":[{"field":"n","op":"gte","value":5},{"field":"n","op":"lt","value":9.5}]}`},
		{[]string{`"a.b".c != "x y"`}, `{"path":["a.b","c"],"op":"neq","value":"x y"}`},
		{[]string{"path^=/api"}, `{"field":"path","op":"prefix","value":"/api"}`},
		{[]string{"l in [a, 1, null]"}, `{"field":"l","op":"in","value":["a",1,null]}`},
		{[]string{"l not in []"}, `{"field":"l","op":"nin","value":[]}`},
		{[]string{"n between 1 and 5"}, `{"field":"n","op":"between","value":[1,5]}`},
		{[]string{"not (a=1 and b>2)"}, `{"not":{"and":[{"field":"a","op":"eq","value":1},{"field":"b","op":"gt","value":2}]}}`},
		{[]string{"u=uuid:0190a4f4-5c3b-7def-8123-456789abcdef"}, `{"field":"u","op":"eq","value":{"$uuid":"0190a4f4-5c3b-7def-8123-456789abcdef"}}`},
		{[]string{`t<{"$date":"2024-05-01T00:00:00Z"}`}, `{"field":"t","op":"lt","value":{"$date":"2024-05-01T00:00:00Z"}}`},
	} {
		var f queryFlags
		f.where = tc.where
		if _, err := f.build(time.Now()); err != nil {
			t.Fatalf("%q: %v", tc.where, err)
		}
		q, err := json.Marshal(query.And(f.selection().Where...))
		if err != nil {
			t.Fatalf("%q: %v", tc.where, err)
		}
		if string(q) != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.where, q, tc.want)
		}
		var c query.Cond
		if err := json.Unmarshal(q, &c); err != nil {
			t.Fatalf("%q: the API cannot read %s: %v", tc.where, q, err)
		}
		if gq, wq := query.All().Where(c).String(), query.All().Where(query.And(f.conds...)).String(); gq != wq {
			t.Errorf("%q: the API reads %s, the file path runs %s", tc.where, gq, wq)
		}
	}
}

// TestRemoteVerifyProblems reads a verify stream with problems (from a
// stand-in server: a healthy file has none) as the file path reports them.
func TestRemoteVerifyProblems(t *testing.T) {
	const problem = `{"problem":{"kind":"checksum","collection":"events","id":"018f3406-a1e8-75e3-9b15-1c5b424ad7c6","detail":"corrupt data: checksum mismatch","text":"checksum \"events\" id 018f3406-a1e8-75e3-9b15-1c5b424ad7c6: corrupt data: checksum mismatch"}}` + "\n"
	body := map[string]string{
		"/api/stats":  `{"backend":"file","collections":[{"name":"events","kind":"log","records":3}]}`,
		"/api/verify": problem + `{"report":{"collections":1,"records":3,"problems":1,"ok":false}}` + "\n",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/verify" && r.URL.Query().Get("collection") == "cut" {
			io.WriteString(w, problem+`{"error":{"kind":"timeout","message":"web: verify: time limit"},"report":{"collections":1,"records":2,"problems":1,"ok":false}}`+"\n")
			return
		}
		if r.URL.Path == "/api/verify" && r.URL.Query().Get("collection") == "short" {
			io.WriteString(w, problem)
			return
		}
		io.WriteString(w, body[r.URL.Path])
	}))
	defer srv.Close()
	out, errs, code := runEnv([]string{"--url", srv.URL, "verify"}, "", nil)
	want := "problem: checksum \"events\" id 018f3406-a1e8-75e3-9b15-1c5b424ad7c6: corrupt data: checksum mismatch\nverified 1 collection, 3 records: 1 problem\n"
	if code != exitError || out != want || !strings.Contains(errs, "verify found 1 problem in "+srv.URL) {
		t.Errorf("verify: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	out, _, code = runEnv([]string{"--url", srv.URL, "--json", "verify"}, "", nil)
	if want := `{"collections":1,"ok":false,"problems":[{"kind":"checksum","collection":"events","id":"018f3406-a1e8-75e3-9b15-1c5b424ad7c6","detail":"corrupt data: checksum mismatch"}],"records":3}` + "\n"; code != exitError || out != want {
		t.Errorf("--json verify: exit %d, stdout %q", code, out)
	}
	a := newApp(context.Background(), nil, nil, nil, func(string) string { return "" })
	a.url = srv.URL
	var n int
	rep, err := a.newHTTPStore().verify(context.Background(), []string{"cut"}, func(storh.Problem) { n++ })
	if !errors.Is(err, context.DeadlineExceeded) || n != 1 || rep.Records != 2 {
		t.Errorf("a verify cut by the time limit: %v, %d problems, %+v", err, n, rep)
	}
	if _, err := a.newHTTPStore().verify(context.Background(), []string{"short"}, func(storh.Problem) {}); err == nil || !strings.Contains(err.Error(), "without a report") {
		t.Errorf("a verify stream without its report: %v", err)
	}
}

// TestRemoteTailFollow follows a log over HTTP while records are written
// to the server's database: each arrives once, in order, across the
// reconnections that a short tail limit forces (Last-Event-ID), and a
// record whose id is older than the last printed is not shown, as on a
// file. Cancelling ends the tail with exit code 0.
func TestRemoteTailFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	seedRemote(t, path)
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.Handler(db, web.WithTailLimit(150*time.Millisecond)))
	defer func() { srv.Close(); db.Close() }()
	events, err := db.Log("events")
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, outW := io.Pipe()
	var stderr bytes.Buffer
	a := newApp(ctx, strings.NewReader(""), outW, &stderr, func(string) string { return "" })
	done := make(chan int, 1)
	go func() {
		root := a.rootCmd()
		root.SetArgs([]string{"--url", srv.URL, "tail", "events", "-f", "-n", "2", "--interval", "5ms"})
		cmd, err := root.ExecuteC()
		code := exitOK
		if err != nil {
			code = a.report(cmd, err)
		}
		outW.Close()
		done <- code
	}()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("tail -f --url ended early")
			}
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("tail -f --url printed nothing for 10s")
		}
		return ""
	}
	for _, i := range []int{10, 11} {
		if l := next(); !strings.HasPrefix(l, `{"id":"`+remoteIDs[i].String()+`"`) {
			t.Fatalf("tail -n 2 printed %s, want record %d", l, i)
		}
	}
	const n = 30
	go func() {
		for i := 0; i < n; i++ {
			if i == n/2 {
				// An id below the last one printed: not shown, as on a file.
				if _, err := events.PutWithID(remoteIDs[0], map[string]any{"old": true}); err != nil {
					t.Error(err)
				}
			}
			if _, err := events.Put(map[string]any{"n": int64(100 + i)}); err != nil {
				t.Error(err)
			}
			time.Sleep(20 * time.Millisecond) // across several tail limits
		}
	}()
	for i := 0; i < n; i++ {
		want := fmt.Sprintf(`"data":{"n":%d}}`, 100+i)
		if l := next(); !strings.HasSuffix(l, want) {
			t.Fatalf("record %d: tail -f --url printed %s, want one ending %s", i, l, want)
		}
	}
	cancel()
	for l := range lines {
		t.Errorf("after the last record, tail -f --url printed %s", l)
	}
	if code := <-done; code != exitOK {
		t.Fatalf("tail -f --url cancelled: exit %d, stderr %s", code, stderr.String())
	}
}
