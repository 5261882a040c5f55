package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests migrate between database files: package storh's tests run the
// same migrations to and from PostgreSQL (this package cannot reach the
// test server, which is internal to package storh).

// migrateSrc makes a database with the demo's collections, a queue with
// jobs in several states, and n more imported rows.
func migrateSrc(t *testing.T, dir string, n int) string {
	t.Helper()
	db := filepath.Join(dir, "src.db")
	ctx := context.Background()
	steps := [][]string{
		{"--db", db, "demo"},
		{"--db", db, "queue", "enqueue", "jobs", `{"n":1}`},
		{"--db", db, "queue", "enqueue", "jobs", `{"n":2}`},
		{"--db", db, "queue", "enqueue", "jobs", `{"n":3}`},
		{"--db", db, "queue", "claim", "jobs"},
	}
	if n > 0 {
		steps = append(steps, []string{"--db", db, "import", "rows", write(t, "rows.jsonl", genRows(n, -1))})
	}
	for _, args := range steps {
		if _, stderr, code := runStorh(ctx, "", args...); code != 0 {
			t.Fatalf("storh %s: %s", strings.Join(args, " "), stderr)
		}
	}
	return db
}

// sameContent checks that two databases hold the same collections, records
// and jobs, as the commands show them, and that the copy verifies.
func sameContent(t *testing.T, want, got string) {
	t.Helper()
	ctx := context.Background()
	show := func(db string, args ...string) string {
		out, stderr, code := runStorh(ctx, "", append([]string{"--db", db, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("storh --db %s %s: %s", db, strings.Join(args, " "), stderr)
		}
		return out
	}
	stats := func(db string) string {
		// The file's own numbers (size, free pages) differ; the collections must not.
		var st struct{ Collections json.RawMessage }
		if err := json.Unmarshal([]byte(show(db, "stats")), &st); err != nil {
			t.Fatal(err)
		}
		return string(st.Collections)
	}
	if a, b := stats(want), stats(got); a != b {
		t.Fatalf("collections differ:\n%s\nwant\n%s", b, a)
	}
	for _, args := range [][]string{
		{"export", "demo_events"}, {"export", "demo_pages"},
		{"queue", "jobs", "jobs", "--state", "pending"}, {"queue", "jobs", "jobs", "--state", "claimed"},
	} {
		if a, b := show(want, args...), show(got, args...); a != b || a == "" {
			t.Fatalf("storh %s differs:\n%.1000s\nwant\n%.1000s", strings.Join(args, " "), b, a)
		}
	}
	if _, stderr, code := runStorh(ctx, "", "--db", got, "verify"); code != 0 {
		t.Fatalf("verify of the copy: %s", stderr)
	}
}

// TestMigrateCommand migrates a database, with its summary on stderr or as
// JSON on stdout, and the copy holds what the source does.
func TestMigrateCommand(t *testing.T) {
	dir := t.TempDir()
	src := migrateSrc(t, dir, 0)
	ctx := context.Background()
	dst := filepath.Join(dir, "dst.db")
	stdout, stderr, code := runStorh(ctx, "", "migrate", src, dst)
	if code != 0 || stdout != "" {
		t.Fatalf("migrate: exit %d, %s%s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "storh: migrated ") || !strings.Contains(lines[0], " in 3 collections ") ||
		!strings.Contains(lines[0], "to "+dst) || !strings.HasPrefix(lines[1], "storh: verified: ") {
		t.Errorf("summary:\n%s", stderr)
	}
	sameContent(t, src, dst)

	stdout, stderr, code = runStorh(ctx, "", "--json", "migrate", "--batch", "7", src, filepath.Join(dir, "json.db"))
	var st migrateStats
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil || stderr != "" {
		t.Fatalf("--json migrate: exit %d, %v: %s%s", code, err, stdout, stderr)
	}
	if st.Collections != 3 || st.Records < 3000 || st.Copied != st.Records || st.Batches < int(st.Keys/7) || len(st.SHA256) != 64 || st.ResumedAt != "" {
		t.Errorf("JSON summary %+v", st)
	}
	sameContent(t, src, filepath.Join(dir, "json.db"))

	if _, stderr, code := runStorh(ctx, "", "-q", "migrate", src, filepath.Join(dir, "quiet.db")); code != 0 || stderr != "" {
		t.Errorf("-q migrate: exit %d, stderr %q", code, stderr)
	}
}

// TestMigrateCommandRefuses: what migrate will not do, with the exit code
// and message of each case; a refused destination is left as it was.
func TestMigrateCommandRefuses(t *testing.T) {
	dir := t.TempDir()
	src := migrateSrc(t, dir, 0)
	ctx := context.Background()
	other := filepath.Join(dir, "other.db")
	if _, stderr, code := runStorh(ctx, "", "--db", other, "put", "mine", `{"a":1}`); code != 0 {
		t.Fatal(stderr)
	}
	before, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"migrate", src, other}, 1, `storh: migrate ` + src + ` to ` + other + `: ` + other + ` is not empty: it holds collection "mine" (migrate copies into an empty database`},
		{[]string{"migrate", src, "src.db"}, 2, "the source and the destination are the same store"},
		{[]string{"migrate", "missing.db", "new.db"}, 1, "storh: migrate: no database at missing.db"},
		{[]string{"migrate", src}, 2, "missing arguments: storh migrate needs SRC DST"},
		{[]string{"migrate", src, "a.db", "b.db"}, 2, "too many arguments"},
		{[]string{"--db", src, "migrate", src, "x.db"}, 2, "not --db"},
		{[]string{"migrate", "--batch", "0", src, "x.db"}, 2, "--batch 0"},
	} {
		stdout, stderr, code := runStorh(ctx, "", tc.args...)
		if code != tc.code || stdout != "" || !strings.Contains(stderr, tc.msg) || strings.Count(stderr, "storh: ") != 1 {
			t.Errorf("storh %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.code, tc.msg)
		}
	}
	if after, _ := os.ReadFile(other); string(after) != string(before) {
		t.Error("the refused destination changed")
	}
	for _, name := range []string{"missing.db", "new.db", "x.db"} {
		if _, err := os.Stat(name); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was created: %v", name, err)
		}
	}
}

// TestMigrateCommandResumes stops a storh migrate process twice, with
// Ctrl-C (it says how to resume) and with SIGKILL (nothing of it runs
// after), and the same command then finishes the copy.
func TestMigrateCommandResumes(t *testing.T) {
	storhBin, err := exec.LookPath("storh") // the test binary, put on the PATH by TestMain
	if err != nil {
		t.Skip("no storh on the PATH")
	}
	dir := t.TempDir()
	src := migrateSrc(t, dir, 3000)
	dst := filepath.Join(dir, "dst.db")
	// One key per transaction, each with its fsync: slow enough to stop
	// midway.
	stop := func(sig os.Signal) (stderr string, killed bool) {
		t.Helper()
		cmd := exec.Command(storhBin, "migrate", "--batch", "1", src, dst)
		var errb strings.Builder
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if fi, err := os.Stat(dst); err == nil && fi.Size() > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the migration did not start")
			}
		}
		time.Sleep(300 * time.Millisecond)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return errb.String(), false // it finished first
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); sig == syscall.SIGKILL && (!ok || ws.Signal() != syscall.SIGKILL) {
			t.Fatalf("after SIGKILL: %v: %s", err, errb.String())
		}
		return errb.String(), true
	}
	stderr, stopped := stop(os.Interrupt)
	if !stopped {
		t.Skip("the migration finished before it could be interrupted")
	}
	if !strings.Contains(stderr, "interrupted after ") || !strings.Contains(stderr, "run the same command again to resume") {
		t.Errorf("after Ctrl-C: %s", stderr)
	}
	if _, stopped = stop(syscall.SIGKILL); !stopped {
		t.Skip("the migration finished before it could be killed")
	}
	stdout, stderr, code := runStorh(context.Background(), "", "--json", "migrate", src, dst)
	var st migrateStats
	if err := json.Unmarshal([]byte(stdout), &st); code != 0 || err != nil {
		t.Fatalf("the third run: exit %d, %v: %s%s", code, err, stdout, stderr)
	}
	if st.ResumedAt == "" || st.Copied >= st.Records {
		t.Errorf("the third run resumed at %q and copied %d of %d records", st.ResumedAt, st.Copied, st.Records)
	}
	sameContent(t, src, dst)
}
