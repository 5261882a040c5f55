package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// String returns what was written so far.
func (w *notifyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// serving is a storh serve running in-process; stop cancels its context,
// as Ctrl-C or SIGTERM does to the real command.
type serving struct {
	url    string // http://HOST:PORT/
	stderr *notifyWriter
	stdout *notifyWriter
	cancel context.CancelFunc
	done   chan int
	once   sync.Once
	code   int
}

// stop interrupts the server and returns its exit code.
func (s *serving) stop() int {
	s.once.Do(func() {
		s.cancel()
		select {
		case s.code = <-s.done:
		case <-time.After(30 * time.Second):
			panic("storh serve did not stop within 30s of its interruption")
		}
	})
	return s.code
}

var servingURL = regexp.MustCompile(` at (http://\S+/) \(Ctrl-C stops\); try: curl `)

// startServe runs storh with args (which run serve) in-process, with the
// environment env, and waits until it listens. With --json it reads the
// address from stdout, else from the note on stderr.
func startServe(t *testing.T, env map[string]string, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &serving{
		stderr: &notifyWriter{want: "(Ctrl-C stops)", seen: make(chan struct{})},
		stdout: &notifyWriter{want: "\n", seen: make(chan struct{})},
		cancel: cancel,
		done:   make(chan int, 1),
	}
	seen := s.stderr.seen
	jsonOut := false
	for _, arg := range args {
		if arg == "--json" {
			jsonOut, seen = true, s.stdout.seen
		}
	}
	go func() {
		s.done <- run(ctx, args, strings.NewReader(""), s.stdout, s.stderr, func(k string) string { return env[k] })
	}()
	t.Cleanup(func() { s.stop() })
	select {
	case <-seen:
	case code := <-s.done:
		s.once.Do(func() { s.code = code })
		t.Fatalf("storh %s exited %d before listening:\n%s%s", strings.Join(args, " "), code, s.stdout, s.stderr)
	case <-time.After(10 * time.Second):
		t.Fatalf("storh %s did not listen within 10s:\n%s", strings.Join(args, " "), s.stderr)
	}
	if jsonOut {
		var info serveInfo
		if err := json.Unmarshal([]byte(s.stdout.String()), &info); err != nil {
			t.Fatalf("serve --json printed %q: %v", s.stdout, err)
		}
		s.url = info.URL
		return s
	}
	m := servingURL.FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("serve printed no address and curl command:\n%s", s.stderr)
	}
	s.url = m[1]
	return s
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// call sends one request with a bearer token unless token is "" and
// returns the status and body.
func call(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, string(b)
}

// expectStatus calls and fails unless the status is want; it returns the
// body.
func expectStatus(t *testing.T, want int, method, url, token, body string) string {
	t.Helper()
	got, b := call(t, method, url, token, body)
	if got != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, url, got, want, b)
	}
	return b
}

// serveDB makes a database with a docs collection "pages" of n records.
func serveDB(t *testing.T, n int) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "serve.db")
	var rows strings.Builder
	for i := range n {
		fmt.Fprintf(&rows, "{\"n\":%d}\n", i)
	}
	if _, stderr, code := runStorh(context.Background(), rows.String(), "--db", db, "-q", "put", "pages"); code != 0 {
		t.Fatalf("put: %s", stderr)
	}
	return db
}

// expectClosed checks that nothing holds the database file any more: it
// opens for writing, which needs bbolt's exclusive lock.
func expectClosed(t *testing.T, path string) {
	t.Helper()
	db, err := storh.Open(path, storh.WithLockTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatalf("the database is still held after serve stopped: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

type page struct {
	Records []struct {
		ID   string         `json:"id"`
		Data map[string]any `json:"data"`
	} `json:"records"`
	Next string `json:"next"`
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return v
}

// TestServeReadOnly serves a file without a token or --write: collections
// and pages answer, a write is 403 and stores nothing, other processes can
// read the file meanwhile but not write it, and an interruption exits 0
// with the file closed.
func TestServeReadOnly(t *testing.T) {
	db := serveDB(t, 3)
	s := startServe(t, nil, "--db", db, "serve", "--addr", "127.0.0.1:0")
	note := s.stderr.String()
	if want := "storh: serving " + db + " read-only at " + s.url + " (Ctrl-C stops); try: curl " + s.url + "api/collections\n"; note != want {
		t.Errorf("serve printed\n%q, want\n%q", note, want)
	}
	if !strings.HasPrefix(s.url, "http://127.0.0.1:") || strings.HasSuffix(s.url, ":0/") {
		t.Errorf("serve printed the address %s, want 127.0.0.1 and the port it bound", s.url)
	}

	colls := decode[struct {
		Collections []struct {
			Name    string `json:"name"`
			Kind    string `json:"kind"`
			Records int    `json:"records"`
		} `json:"collections"`
	}](t, expectStatus(t, 200, "GET", s.url+"api/collections", "", ""))
	if len(colls.Collections) != 1 || colls.Collections[0].Name != "pages" || colls.Collections[0].Kind != "docs" || colls.Collections[0].Records != 3 {
		t.Errorf("api/collections: %+v", colls)
	}

	// Two pages by cursor.
	first := decode[page](t, expectStatus(t, 200, "GET", s.url+"api/collections/pages/records?limit=2", "", ""))
	if len(first.Records) != 2 || first.Next == "" {
		t.Fatalf("first page: %+v", first)
	}
	second := decode[page](t, expectStatus(t, 200, "GET", s.url+"api/collections/pages/records?limit=2&after="+first.Next, "", ""))
	if len(second.Records) != 1 || second.Next != "" || second.Records[0].ID <= first.Next {
		t.Fatalf("second page after %s: %+v", first.Next, second)
	}
	expectStatus(t, 200, "GET", s.url+"api/collections/pages/records/"+first.Records[0].ID, "", "")

	// Writes are off.
	id := uuidv7.New().String()
	if b := expectStatus(t, 403, "PUT", s.url+"api/collections/pages/records/"+id, "", `{"n":9}`); !strings.Contains(b, `"forbidden"`) {
		t.Errorf("PUT without --write: %s", b)
	}
	expectStatus(t, 403, "DELETE", s.url+"api/collections/pages/records/"+first.Records[0].ID, "", "")

	// The file is open with a shared lock: readers get in, writers not.
	if out, stderr, code := runStorh(context.Background(), "", "--db", db, "count", "pages"); code != 0 || strings.TrimSpace(out) != "3" {
		t.Errorf("count beside serve: exit %d, %q, %s", code, out, stderr)
	}
	if _, stderr, code := runStorh(context.Background(), "", "--db", db, "--timeout", "50ms", "put", "pages", `{"n":9}`); code != exitError || !strings.Contains(stderr, "is locked by another process") {
		t.Errorf("put beside serve: exit %d, %s", code, stderr)
	}

	if code := s.stop(); code != exitOK {
		t.Fatalf("interrupted serve: exit %d:\n%s", code, s.stderr)
	}
	if got := s.stderr.String(); got != note {
		t.Errorf("serve printed more than its note:\n%s", got)
	}
	expectClosed(t, db)
	if _, err := httpClient.Get(s.url + "api/collections"); err == nil {
		t.Error("the server still answers after serve stopped")
	}
	if out, _, _ := runStorh(context.Background(), "", "--db", db, "count", "pages"); strings.TrimSpace(out) != "3" {
		t.Errorf("after serve, count %q, want 3: the database changed", out)
	}
}

// TestServeToken serves with a token, from STORH_TOKEN and from --token:
// requests without it or with another are 401, and the token is not
// printed. With --write, PUT and DELETE work.
func TestServeToken(t *testing.T) {
	db := serveDB(t, 1)
	const envTok, flagTok = "env-secret-8c1f", "flag-secret-27ad"

	s := startServe(t, map[string]string{envToken: envTok}, "--db", db, "serve", "--addr", "127.0.0.1:0", "--write")
	if note := s.stderr.String(); !strings.Contains(note, " read-write at ") ||
		!strings.Contains(note, `try: curl -H "Authorization: Bearer $STORH_TOKEN" `+s.url+"api/collections") {
		t.Errorf("serve --write with a token printed %q", note)
	}
	coll := s.url + "api/collections"
	expectStatus(t, 401, "GET", coll, "", "")
	expectStatus(t, 401, "GET", coll, "wrong", "")
	expectStatus(t, 401, "GET", s.url+"no/such/path", "", "")
	expectStatus(t, 200, "GET", coll, envTok, "")

	id := uuidv7.New().String()
	rec := s.url + "api/collections/pages/records/" + id
	expectStatus(t, 401, "PUT", rec, "", `{"n":7}`)
	expectStatus(t, 200, "PUT", rec, envTok, `{"n":7}`)
	if b := expectStatus(t, 200, "GET", rec, envTok, ""); !strings.Contains(b, `"data":{"n":7}`) {
		t.Errorf("GET after PUT: %s", b)
	}
	expectStatus(t, 204, "DELETE", rec, envTok, "")
	expectStatus(t, 404, "GET", rec, envTok, "")
	expectStatus(t, 200, "PUT", rec, envTok, `{"n":8}`)
	if code := s.stop(); code != exitOK {
		t.Fatalf("serve: exit %d:\n%s", code, s.stderr)
	}
	if strings.Contains(s.stderr.String(), envTok) {
		t.Errorf("serve printed its token:\n%s", s.stderr)
	}
	expectClosed(t, db)
	if out, stderr, code := runStorh(context.Background(), "", "--db", db, "get", "pages", id); code != 0 || !strings.Contains(out, `"data":{"n":8}`) {
		t.Errorf("the PUT is not in the file: exit %d, %s%s", code, out, stderr)
	}

	// --token wins over STORH_TOKEN.
	s = startServe(t, map[string]string{envToken: envTok}, "--db", db, "serve", "--addr", "127.0.0.1:0", "--token", flagTok)
	expectStatus(t, 401, "GET", s.url+"api/collections", envTok, "")
	expectStatus(t, 200, "GET", s.url+"api/collections", flagTok, "")
	if code := s.stop(); code != exitOK {
		t.Fatalf("serve: exit %d:\n%s", code, s.stderr)
	}
	if strings.Contains(s.stderr.String(), flagTok) {
		t.Errorf("serve printed its token:\n%s", s.stderr)
	}
}

// TestServeAddr refuses to serve beyond loopback without a token, before
// opening the database or listening, and serves there with one.
func TestServeAddr(t *testing.T) {
	db := serveDB(t, 1)
	// A writer holds the file: a serve that opened it would say "locked".
	holder, err := bolt.Open(db, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "example.com:0"} {
		start := time.Now()
		out, stderr, code := runStorh(context.Background(), "", "--db", db, "--timeout", "5s", "serve", "--addr", addr)
		if code != exitUsage || out != "" ||
			!strings.HasPrefix(stderr, "storh: --addr "+addr+" reaches beyond this machine, so serve needs a token: set STORH_TOKEN (or pass --token)") {
			t.Errorf("serve --addr %s without a token: exit %d, %s%s", addr, code, out, stderr)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("serve --addr %s took %v to refuse: it waited for the database", addr, d)
		}
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"serve", "--addr", "127.0.0.1"}, nil, `storh: --addr "127.0.0.1": missing port in address: give HOST:PORT`},
		{[]string{"serve", "--addr", "127.0.0.1:0", "--token", " padded"}, nil, "storh: the token of --token starts or ends with white space"},
		{[]string{"serve", "--addr", "127.0.0.1:0"}, map[string]string{envToken: "padded-secret\n"}, "storh: the token of STORH_TOKEN starts or ends with white space"},
		{[]string{"serve", db}, nil, "storh: serve takes its database as DB or as --db, not both"},
		{[]string{"serve", "a.db", "b.db"}, nil, "storh: too many arguments"},
	} {
		var out, errb strings.Builder
		code := run(context.Background(), append([]string{"--db", db}, c.args...), strings.NewReader(""), &out, &errb,
			func(k string) string { return c.env[k] })
		if code != exitUsage || out.Len() != 0 || !strings.HasPrefix(errb.String(), c.want) || strings.Contains(errb.String(), "secret") {
			t.Errorf("storh %s: exit %d, %s%s", strings.Join(c.args, " "), code, out.String(), errb.String())
		}
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}

	// With a token it serves on every interface.
	s := startServe(t, nil, "serve", "--addr", "0.0.0.0:0", "--token", "t0k", db)
	port := s.url[strings.LastIndex(s.url, ":"):]
	if !strings.HasPrefix(s.url, "http://0.0.0.0:") {
		t.Errorf("serve printed %s, want the address it bound, 0.0.0.0", s.url)
	}
	expectStatus(t, 401, "GET", "http://127.0.0.1"+port+"api/collections", "", "")
	expectStatus(t, 200, "GET", "http://127.0.0.1"+port+"api/collections", "t0k", "")
	if code := s.stop(); code != exitOK {
		t.Fatalf("serve: exit %d:\n%s", code, s.stderr)
	}
	expectClosed(t, db)
}

// TestServeOpen: serve opens what exists and creates nothing; a database
// that cannot be opened is exit 1, and a URL's password is not shown.
func TestServeOpen(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	for _, args := range [][]string{{"serve", missing}, {"serve", "--write", missing}} {
		_, stderr, code := runStorh(context.Background(), "", args...)
		if code != exitError || !strings.HasPrefix(stderr, "storh: no database at "+missing) {
			t.Errorf("storh %s: exit %d, %s", strings.Join(args, " "), code, stderr)
		}
		if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("storh %s created the file: %v", strings.Join(args, " "), err)
		}
	}

	// A writer holds the file: the locked database error, exit 1.
	db := serveDB(t, 1)
	holder, err := bolt.Open(db, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runStorh(context.Background(), "", "--timeout", "50ms", "serve", "--addr", "127.0.0.1:0", db)
	holder.Close()
	if code != exitError || !strings.HasPrefix(stderr, "storh: database "+db+" is locked by another process (waited 50ms)") {
		t.Errorf("serve of a locked file: exit %d, %s", code, stderr)
	}

	// A URL goes to PostgreSQL (nothing listens on port 1), never to the
	// file system, and its password stays out of the message.
	url := "postgres://ana:hunter2@127.0.0.1:1/app?connect_timeout=5"
	_, stderr, code = runStorh(context.Background(), "", "serve", "--addr", "127.0.0.1:0", url)
	if code != exitError || !strings.HasPrefix(stderr, "storh: cannot open the database postgres://ana:xxxxx@127.0.0.1:1/app") || strings.Contains(stderr, "hunter2") {
		t.Errorf("serve %s: exit %d, %s", url, code, stderr)
	}
}

// TestServeRedact: the database a note names shows no password, from the
// user part of a URL or from its parameters.
func TestServeRedact(t *testing.T) {
	for _, url := range []string{
		"postgres://ana:hunter2@db.internal/app",
		"postgresql:///app?host=/run/pg&password=hunter2&sslmode=disable",
	} {
		if got := storh.Redact(url); strings.Contains(got, "hunter2") || !strings.Contains(got, "xxxxx") {
			t.Errorf("storh.Redact(%q) = %q", url, got)
		}
	}
	if got := storh.Redact("/data/pass=word.db"); got != "/data/pass=word.db" {
		t.Errorf("redact changed a path: %q", got)
	}
}

// TestServeJSON prints where it listens as JSON on stdout.
func TestServeJSON(t *testing.T) {
	db := serveDB(t, 1)
	s := startServe(t, nil, "--db", db, "--json", "serve", "--addr", "127.0.0.1:0", "--write", "--token", "tk")
	info := decode[serveInfo](t, s.stdout.String())
	if info.Addr == "" || info.URL != "http://"+info.Addr+"/" || info.Database != db || !info.Write || !info.Token {
		t.Errorf("serve --json printed %+v", info)
	}
	expectStatus(t, 200, "GET", s.url+"api/collections", "tk", "")
	if code := s.stop(); code != exitOK || s.stderr.String() != "" {
		t.Fatalf("serve: exit %d:\n%s", code, s.stderr)
	}
	expectClosed(t, db)
}

// TestServeSignals runs storh serve as a process and stops it with SIGTERM
// and with SIGINT: exit code 0, and the file is closed.
func TestServeSignals(t *testing.T) {
	storhBin, err := exec.LookPath("storh") // the test binary, put on the PATH by TestMain
	if err != nil {
		t.Skip("no storh on the PATH")
	}
	db := serveDB(t, 2)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envToken+"=") && !strings.HasPrefix(kv, envDB+"=") {
			env = append(env, kv)
		}
	}
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		cmd := exec.Command(storhBin, "--db", db, "serve", "--addr", "127.0.0.1:0", "--write")
		cmd.Env = env
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewReader(stderr)
		line, err := lines.ReadString('\n')
		m := servingURL.FindStringSubmatch(line)
		if m == nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("storh serve printed %q (%v)", line, err)
		}
		expectStatus(t, 200, "GET", m[1]+"api/collections", "", "")
		expectStatus(t, 200, "PUT", m[1]+"api/collections/pages/records/"+uuidv7.New().String(), "", `{"n":1}`)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(lines)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("after %v: %v:\n%s", sig, err, rest)
		}
		if len(rest) > 0 {
			t.Errorf("after %v serve printed:\n%s", sig, rest)
		}
		expectClosed(t, db)
	}
	if out, _, _ := runStorh(context.Background(), "", "--db", db, "count", "pages"); strings.TrimSpace(out) != "4" {
		t.Errorf("count %q after two PUTs to 2 records, want 4", out)
	}
}
