package reliability

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
)

// The CLI rows of the bad-input table. Each runs the storh binary (built
// once by TestMain) against a copy of the template database with the given
// arguments and stdin, and asserts the exit code (2: called wrongly, 1: the
// command failed), a stderr substring, that stderr starts with "storh: ",
// and that the database is byte-for-byte unchanged.
//
// In args, {db} is the database path, {doc} and {log} stored ids of "docs"
// and "events", {dir} the row's scratch directory.

type cliCase struct {
	name   string
	args   []string
	stdin  string
	exit   int
	stderr string
	stdout string // substring expected on stdout (success rows)
	// hold keeps the database open in this process while the CLI runs.
	hold bool
	// after runs extra checks once the command finished.
	after func(t *testing.T, dir string)
}

func deepJSON(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}

func cliCases() []cliCase {
	const v4 = "1b4e28ba-2fa1-41d2-883f-0b4e28ba2fa1"
	const badVariantText = "018bcfe5-6864-732f-ceb7-f4b386f4e0fa"
	db := []string{"--db", "{db}"}
	with := func(args ...string) []string { return append(append([]string(nil), db...), args...) }
	return []cliCase{
		// usage
		{name: "unknown-command", args: []string{"bogus"}, exit: 2, stderr: `unknown command "bogus"`},
		{name: "unknown-flag", args: with("--nope", "stats"), exit: 2, stderr: "unknown flag: --nope"},
		{name: "timeout-zero", args: with("--timeout", "0", "stats"), exit: 2, stderr: "must be positive"},
		{name: "get-missing-args", args: with("get", "docs"), exit: 2, stderr: "missing arguments"},
		{name: "get-too-many-args", args: with("get", "docs", "{doc}", "extra"), exit: 2, stderr: "too many arguments"},
		{name: "put-missing-json", args: with("put", "docs"), exit: 2, stderr: "JSON"},

		// ids
		{name: "get-garbage-id", args: with("get", "docs", "not-an-id"), exit: 2, stderr: `invalid UUIDv7 "not-an-id"`},
		{name: "get-v4-id", args: with("get", "docs", v4), exit: 2, stderr: "version '4'"},
		{name: "get-bad-variant", args: with("get", "docs", badVariantText), exit: 2, stderr: "variant"},
		{name: "get-missing-id", args: with("get", "docs", "0190aaaa-0000-7000-8000-000000000000"), exit: 1, stderr: "not found"},
		{name: "get-upper-case-id", args: with("get", "docs", "{DOC}"), exit: 0, stdout: `"id":"{doc}"`},
		{name: "put-bad-id-flag", args: with("put", "docs", `{"a":1}`, "--id", "zz"), exit: 2, stderr: `--id: invalid UUIDv7 "zz"`},
		{name: "put-log-existing-id", args: with("put", "events", `{"a":1}`, "--id", "{log}"), exit: 1, stderr: "immutable"},
		{name: "delete-bad-id", args: with("delete", "docs", v4), exit: 2, stderr: "version '4'"},
		{name: "delete-from-log", args: with("delete", "events", "{log}"), exit: 1, stderr: "immutable"},
		{name: "uuid-new-zero", args: []string{"uuid", "new", "-n", "0"}, exit: 2, stderr: "-n 0"},
		{name: "objectid-bad", args: []string{"objectid", "to-uuid", "zz"}, exit: 2, stderr: "not an ObjectID"},

		// data and names
		{name: "put-invalid-json", args: with("put", "docs", `{"a":1`), exit: 2, stderr: "invalid JSON"},
		{name: "put-json-array", args: with("put", "docs", `[1,2]`), exit: 2, stderr: "JSON object"},
		{name: "put-too-deep", args: with("put", "docs", deepJSON(storh.MaxDepth+5)), exit: 1, stderr: "nested deeper than 64"},
		{name: "put-empty-name", args: with("put", "", `{"a":1}`), exit: 1, stderr: "invalid collection name"},
		{name: "put-log-flag-on-docs", args: with("put", "docs", `{"a":1}`, "--log"), exit: 1, stderr: "docs collection"},
		{name: "put-stdin-bad-line", args: with("put", "docs"), stdin: "{\"a\":1}\n{\"a\":\n", exit: 1, stderr: "nothing was stored"},

		// queries
		{name: "query-missing-collection", args: with("query", "nope"), exit: 1, stderr: `"nope" does not exist`},
		{name: "query-negative-limit", args: with("query", "docs", "--limit", "-1"), exit: 2, stderr: "--limit -1"},
		{name: "query-bad-where", args: with("query", "docs", "--where", "level"), exit: 2, stderr: "expected an operator after the field level"},
		{name: "query-bad-time", args: with("query", "events", "--from", "garbage"), exit: 2, stderr: `invalid time "garbage"`},
		{name: "query-inverted-window", args: with("query", "events", "--from", "2025-01-02", "--until", "2025-01-01"), exit: 2, stderr: "is after"},
		{name: "tail-negative", args: with("tail", "events", "-n", "-1"), exit: 2, stderr: "-n -1"},
		{name: "export-missing-collection", args: with("export", "nope", "-"), exit: 1, stderr: "does not exist"},

		// import: JSONL and Mongo rows, all refused whole
		{name: "import-bad-json-line", args: with("import", "docs", "-"), stdin: "{\"a\":1}\n{\"b\":\n", exit: 1, stderr: "line 2"},
		{name: "import-array-line", args: with("import", "docs", "-"), stdin: "[1]\n", exit: 1, stderr: "must be a JSON object"},
		{name: "import-scalar-line", args: with("import", "docs", "-"), stdin: "{\"a\":1}\n42\n", exit: 1, stderr: "line 2"},
		{name: "import-bad-id", args: with("import", "events", "-"), stdin: "{\"id\":\"zz\",\"data\":{\"a\":1}}\n", exit: 1, stderr: `invalid UUIDv7 "zz"`},
		{name: "import-existing-log-id", args: with("import", "events", "-"), stdin: "{\"data\":{\"new\":1}}\n{\"id\":\"{log}\",\"data\":{\"a\":1}}\n", exit: 1, stderr: "immutable"},
		{name: "import-too-deep", args: with("import", "docs", "-"), stdin: deepJSON(storh.MaxDepth+5) + "\n", exit: 1, stderr: "nested deeper than 64"},
		{name: "import-missing-file", args: with("import", "docs", "{dir}/none.jsonl"), exit: 1, stderr: "none.jsonl"},
		{name: "import-mongo-bad-oid", args: with("import", "docs", "--mongo", "-"), stdin: "{\"_id\":{\"$oid\":\"zz\"}}\n", exit: 1, stderr: "not an ObjectID"},
		{name: "import-mongo-bad-date", args: with("import", "docs", "--mongo", "-"), stdin: "{\"_id\":{\"$oid\":\"65a1b2c3d4e5f6a7b8c9d0e1\"},\"d\":{\"$date\":\"nope\"}}\n", exit: 1, stderr: `$date "nope"`},
		{name: "import-mongo-bad-number", args: with("import", "docs", "--mongo", "-"), stdin: "{\"_id\":{\"$oid\":\"65a1b2c3d4e5f6a7b8c9d0e1\"},\"n\":{\"$numberLong\":\"twelve\"}}\n", exit: 1, stderr: "$numberLong"},
		{name: "import-mongo-second-row-bad", args: with("import", "docs", "--mongo", "-"), stdin: "{\"_id\":{\"$oid\":\"65a1b2c3d4e5f6a7b8c9d0e1\"}}\n{\"_id\":{\"$oid\":\"65a1b2c3d4e5f6a7b8c9d0\"}}\n", exit: 1, stderr: "line 2"},
		{name: "import-log-flag-on-docs", args: with("import", "docs", "--log", "-"), stdin: "{\"a\":1}\n", exit: 1, stderr: "docs collection"},

		// files and locks
		{name: "db-not-a-database", args: []string{"--db", "{dir}/junk.db", "stats"}, exit: 1, stderr: "not a storh database"},
		{name: "db-missing-not-created", args: []string{"--db", "{dir}/missing.db", "count", "docs"}, exit: 1, stderr: "no database at",
			after: func(t *testing.T, dir string) {
				if _, err := os.Stat(dir + "/missing.db"); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a read command created the database file (%v)", err)
				}
			}},
		{name: "db-locked", args: with("--timeout", "200ms", "put", "docs", `{"a":1}`), hold: true, exit: 1, stderr: "locked"},
		{name: "compact-missing-out", args: with("compact"), exit: 2, stderr: "missing --out"},
		{name: "compact-out-exists", args: with("compact", "--out", "{dir}/junk.db"), exit: 1, stderr: "already exists"},
		{name: "backup-onto-itself", args: with("backup", "{db}"), exit: 1, stderr: "database file itself"},
		{name: "verify-missing-collection", args: with("verify", "nope"), exit: 1, stderr: "does not exist"},
	}
}

// TestBadInputCLI runs the CLI rows of the bad-input table.
func TestBadInputCLI(t *testing.T) {
	t.Parallel()
	if cliPath == "" {
		t.Skipf("CLI not built: %v", cliErr)
	}
	template, man := badTemplate(t)
	doc, log := sortedIDs(man["docs"])[7].String(), sortedIDs(man["events"])[7].String()
	cases := cliCases()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := dir + "/cli.db"
			copyFile(t, template, path)
			if err := os.WriteFile(dir+"/junk.db", []byte(strings.Repeat("junk ", 5000)), 0o600); err != nil {
				t.Fatal(err)
			}
			before, junk := fileDigest(t, path), fileDigest(t, dir+"/junk.db")
			subst := strings.NewReplacer("{db}", path, "{doc}", doc, "{DOC}", strings.ToUpper(doc), "{log}", log, "{dir}", dir)
			args := make([]string, len(c.args))
			for i, a := range c.args {
				args[i] = subst.Replace(a)
			}
			var held *storh.DB
			if c.hold {
				var err error
				if held, err = storh.Open(path); err != nil {
					t.Fatal(err)
				}
			}
			code, stdout, stderr := runCLI(t, args, subst.Replace(c.stdin))
			if held != nil {
				held.Close()
			}
			if code != c.exit {
				t.Errorf("exit %d, want %d\nstderr: %s", code, c.exit, stderr)
			}
			if c.exit != 0 {
				if !strings.HasPrefix(stderr, "storh: ") {
					t.Errorf("stderr does not start with %q: %q", "storh: ", stderr)
				}
				if want := subst.Replace(c.stderr); !strings.Contains(stderr, want) {
					t.Errorf("stderr does not mention %q:\n%s", want, stderr)
				}
			}
			if want := subst.Replace(c.stdout); !strings.Contains(stdout, want) {
				t.Errorf("stdout does not contain %q:\n%s", want, stdout)
			}
			if after := fileDigest(t, path); after != before {
				t.Errorf("the database changed")
			}
			if after := fileDigest(t, dir+"/junk.db"); after != junk {
				t.Errorf("the non-database file changed")
			}
			if c.after != nil {
				c.after(t, dir)
			}
		})
	}
	t.Logf("%d CLI rows", len(cases))
}

// runCLI runs the built CLI with args and stdin, with STORH_DB unset and a
// hang guard, and returns its exit code and output.
func runCLI(t *testing.T, args []string, stdin string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliPath, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STORH_DB=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("storh %v hung for a minute", args)
	}
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("run storh: %v", err)
		}
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}
