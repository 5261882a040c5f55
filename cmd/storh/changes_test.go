package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// feedIDs are the ids of seedFeed's records, the same in every seed.
var feedIDs = func() []uuidv7.UUID {
	g := uuidv7.NewDeterministic(21, 1714564800000, 1000)
	out := make([]uuidv7.UUID, 3)
	for i := range out {
		out[i] = g.New()
	}
	return out
}()

// seedFeed makes, at path, "notes" (docs with a change feed: 3 puts, a
// rewrite, a delete), "plain" (docs without one) and "short" (a feed
// keeping 2 of 80 changes).
func seedFeed(t *testing.T, path string) {
	t.Helper()
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	notes, err := db.Docs("notes", storh.WithChangeFeed(100))
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range feedIDs {
		if _, err := notes.PutWithID(id, storh.Map{"n": i, "s": "a\tb"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := notes.PutWithID(feedIDs[0], storh.Map{"n": 10}); err != nil {
		t.Fatal(err)
	}
	if err := notes.Delete(feedIDs[1]); err != nil {
		t.Fatal(err)
	}
	plain, err := db.Docs("plain")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.PutWithID(feedIDs[0], storh.Map{"n": 1}); err != nil {
		t.Fatal(err)
	}
	short, err := db.Docs("short", storh.WithChangeFeed(2), storh.WithIDGenerator(uuidv7.NewDeterministic(22, 1714564800000, 1000).New))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 80 {
		if _, err := short.Put(storh.Map{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
}

var feedSteps = []remoteStep{
	step("changes", "notes", "--after", "0"),
	step("changes", "notes", "--after", "2", "--json"),
	step("changes", "notes", "--after", "5"),
	step("changes", "short", "--after", "79"),
	step("changes", "notes"),
	step("changes", "notes", "--after", "-1"),
	step("changes", "short", "--after", "1"),
	step("changes", "plain", "--after", "0"),
	step("changes", "nope", "--after", "0"),
}

// TestChangesCommand: storh changes prints the same on a file, over HTTP
// and on PostgreSQL, and what it prints on a file is this.
func TestChangesCommand(t *testing.T) {
	local := filepath.Join(t.TempDir(), "local.db")
	seedFeed(t, local)
	id := func(i int) string { return feedIDs[i].String() }
	for _, tc := range []struct {
		args []string
		out  string
		code int
		says string
	}{
		{[]string{"changes", "notes", "--after", "0"},
			"1\tput\t" + id(0) + "\t{\"n\":0,\"s\":\"a\\tb\"}\n" +
				"2\tput\t" + id(1) + "\t{\"n\":1,\"s\":\"a\\tb\"}\n" +
				"3\tput\t" + id(2) + "\t{\"n\":2,\"s\":\"a\\tb\"}\n" +
				"4\tput\t" + id(0) + "\t{\"n\":10}\n" +
				"5\tdelete\t" + id(1) + "\n", 0, ""},
		{[]string{"changes", "notes", "--after", "3", "--json"},
			`{"seq":4,"op":"put","id":"` + id(0) + `","time":"` + feedIDs[0].Time().UTC().Format(jsonl.TimeLayout) + `","data":{"n":10}}` + "\n" +
				`{"seq":5,"op":"delete","id":"` + id(1) + `","time":"` + feedIDs[1].Time().UTC().Format(jsonl.TimeLayout) + `"}` + "\n", 0, ""},
		{[]string{"changes", "notes"}, "", exitUsage, "--after"},
		{[]string{"changes", "notes", "--after", "6"}, "", exitUsage, "only to 5"},
		{[]string{"changes", "short", "--after", "1"}, "", exitError, "trimmed"},
		{[]string{"changes", "plain", "--after", "0"}, "", exitError, "no change feed"},
	} {
		out, stderr, code := runStorh(context.Background(), "", append([]string{"--db", local}, tc.args...)...)
		if out != tc.out || code != tc.code || !strings.Contains(stderr, tc.says) {
			t.Errorf("storh %s: exit %d, stdout\n%s\nstderr %s\nwant exit %d, stdout\n%s\nstderr with %q", strings.Join(tc.args, " "), code, out, stderr, tc.code, tc.out, tc.says)
		}
	}

	t.Run("http", func(t *testing.T) {
		remote := filepath.Join(t.TempDir(), "remote.db")
		seedFeed(t, remote)
		db, err := storh.Open(remote)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(web.Handler(db))
		defer func() { srv.Close(); db.Close() }()
		compareSteps(t, feedSteps, []string{"--db", local}, []string{"--url", srv.URL}, "http", func(s string) string { return s })
	})
	t.Run("postgres", func(t *testing.T) {
		url := postgresSchema(t)
		seedFeed(t, url)
		compareSteps(t, feedSteps, []string{"--db", local}, []string{"--db", url}, "postgres", func(s string) string { return s })
	})
}

// TestChangesFollow follows a file's feed (-f polls it, opening it for a
// moment) while other "processes" write and delete: the changes come in
// order, deletes included; then it is interrupted and exits 0.
func TestChangesFollow(t *testing.T) {
	db := filepath.Join(t.TempDir(), "feed.db")
	seedFeed(t, db)
	var stderr bytes.Buffer
	expect, stop := followTail(t, &stderr, "--db", db, "changes", "notes", "-f", "--after", "5", "--interval", "2ms")
	fresh := uuidv7.New().String()
	if _, e, code := runStorh(context.Background(), "", "--db", db, "-q", "put", "notes", "--id", fresh, `{"n":20}`); code != 0 {
		t.Fatalf("put: %s", e)
	}
	expect("6\tput\t" + fresh + "\t{\"n\":20}")
	if _, e, code := runStorh(context.Background(), "", "--db", db, "-q", "delete", "notes", fresh); code != 0 {
		t.Fatalf("delete: %s", e)
	}
	expect("7\tdelete\t" + fresh)
	if code := stop(); code != exitOK {
		t.Errorf("interrupted changes -f exit code %d, want 0; stderr:\n%s", code, stderr.String())
	}
}

// TestChangesFollowURL follows a served file's feed with --url; the tail
// -f of a collection with a feed follows it too, and prints a rewrite of
// an old record, which polling by id does not.
func TestChangesFollowURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "feed.db")
	seedFeed(t, path)
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := httptest.NewServer(web.Handler(db, web.WithTailLimit(30*time.Millisecond)))
	defer srv.Close()
	notes, err := db.Docs("notes")
	if err != nil {
		t.Fatal(err)
	}
	var stderr, tailErr bytes.Buffer
	expect, stop := followTail(t, &stderr, "--url", srv.URL, "changes", "notes", "-f", "--after", "4", "--interval", "2ms")
	expect("5\tdelete\t" + feedIDs[1].String())
	tailExpect, tailStop := followTail(t, &tailErr, "--url", srv.URL, "tail", "notes", "-f", "-n", "1", "--interval", "2ms")
	tailExpect(`"data":{"n":2,`)
	// The server ends each stream at its 30ms limit: both connect again
	// after the last Seq, many times over, and miss nothing.
	if _, err := notes.PutWithID(feedIDs[0], storh.Map{"n": 30}); err != nil {
		t.Fatal(err)
	}
	if err := notes.Delete(feedIDs[2]); err != nil {
		t.Fatal(err)
	}
	rec, err := notes.Put(storh.Map{"n": 31})
	if err != nil {
		t.Fatal(err)
	}
	expect("6\tput\t" + feedIDs[0].String() + "\t{\"n\":30}")
	expect("7\tdelete\t" + feedIDs[2].String())
	expect("8\tput\t" + rec.ID.String())
	tailExpect(`"id":"` + feedIDs[0].String() + `"`)
	tailExpect(`"id":"` + rec.ID.String() + `"`)
	if code := stop(); code != exitOK {
		t.Errorf("changes -f exit code %d; stderr:\n%s", code, stderr.String())
	}
	if code := tailStop(); code != exitOK {
		t.Errorf("tail -f exit code %d; stderr:\n%s", code, tailErr.String())
	}
	if strings.Contains(stderr.String()+tailErr.String(), "broke off") {
		t.Errorf("the tail limit is routine, yet: %s %s", stderr.String(), tailErr.String())
	}
}

// TestPostgresChangesFollow: storh changes -f in one OS process on
// PostgreSQL is woken by another process's writes, and prints each change
// once, in order; tail -f there follows the feed too.
func TestPostgresChangesFollow(t *testing.T) {
	url := postgresSchema(t)
	seedFeed(t, url)
	storhBin, err := exec.LookPath("storh") // the test binary, put on the PATH by TestMain
	if err != nil {
		t.Skip("no storh on the PATH")
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envURL+"=") && !strings.HasPrefix(kv, envDB+"=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(storhBin, "--db", url, "changes", "notes", "-f", "--after", "3", "--json")
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	lines := bufio.NewScanner(out)
	expect := func(want string) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("changes -f ended before %s: %v; stderr: %s", want, lines.Err(), stderr.String())
		}
		if !strings.HasPrefix(lines.Text(), want) {
			t.Fatalf("changes -f printed %s, want %s…", lines.Text(), want)
		}
	}
	expect(`{"seq":4,"op":"put","id":"` + feedIDs[0].String())
	expect(`{"seq":5,"op":"delete","id":"` + feedIDs[1].String())

	var tailErr bytes.Buffer
	tailExpect, tailStop := followTail(t, &tailErr, "--db", url, "tail", "notes", "-f", "-n", "1", "--interval", "1h")
	tailExpect(`"data":{"n":2,`)

	// This process writes: the other is woken (no polling: -f there
	// has no interval to poll at, and tail -f's is an hour).
	db, err := storh.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	notes, err := db.Docs("notes")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := notes.PutWithID(feedIDs[0], storh.Map{"n": 100 + i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := notes.Delete(feedIDs[0]); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		expect(`{"seq":` + strconv.Itoa(6+i) + `,"op":"put","id":"` + feedIDs[0].String() + `","time":`)
		if !strings.HasSuffix(lines.Text(), `"data":{"n":`+strconv.Itoa(100+i)+`}}`) {
			t.Fatalf("change %d: %s", 6+i, lines.Text())
		}
		tailExpect(`"data":{"n":` + strconv.Itoa(100+i) + `}`)
	}
	expect(`{"seq":26,"op":"delete","id":"` + feedIDs[0].String())
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("changes -f after Ctrl-C: %v; stderr: %s", err, stderr.String())
	}
	if code := tailStop(); code != exitOK {
		t.Errorf("tail -f exit code %d; stderr:\n%s", code, tailErr.String())
	}
}
