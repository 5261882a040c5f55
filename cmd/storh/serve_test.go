package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
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
	if _, stderr, code := runStorh(context.Background(), "", "--db", db, "--timeout", "50ms", "put", "pages", `{"n":9}`); code != exitError ||
		!strings.Contains(stderr, "is locked (waited 50ms): other processes have the file open read-only, which keeps writers out; close them") {
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
	if code != exitError || !strings.HasPrefix(stderr, "storh: database "+db+" is locked (waited 50ms): another process has the file open for writing") {
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

// serveProcess starts storh serve on db as a process of its own, with
// args after "serve", and returns it once it listens, with the URL it
// printed and the rest of its stderr to read. The test kills it at its end
// if it still runs.
func serveProcess(t *testing.T, db string, args ...string) (*exec.Cmd, string, *bufio.Reader) {
	t.Helper()
	storhBin, err := exec.LookPath("storh") // the test binary, put on the PATH by TestMain
	if err != nil {
		t.Skip("no storh on the PATH")
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envToken+"=") && !strings.HasPrefix(kv, envDB+"=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(storhBin, append([]string{"--db", db, "serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	lines := bufio.NewReader(stderr)
	line, err := lines.ReadString('\n')
	m := servingURL.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("storh serve printed %q (%v)", line, err)
	}
	return cmd, m[1], lines
}

// TestServeSignals runs storh serve as a process and stops it with SIGTERM
// and with SIGINT: exit code 0, and the file is closed.
func TestServeSignals(t *testing.T) {
	db := serveDB(t, 2)
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		cmd, url, lines := serveProcess(t, db, "--write")
		expectStatus(t, 200, "GET", url+"api/collections", "", "")
		expectStatus(t, 200, "PUT", url+"api/collections/pages/records/"+uuidv7.New().String(), "", `{"n":1}`)
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

// TestServeLockMessages: beside a storh serve in another process, a
// command that cannot open the file says what holds it: a read-only serve
// has it open read-only, which keeps writers out (readers get in), and a
// serve --write has it open for writing, which keeps everyone out.
func TestServeLockMessages(t *testing.T) {
	db := serveDB(t, 1)
	cmd, _, _ := serveProcess(t, db)
	if out, stderr, code := runStorh(context.Background(), "", "--db", db, "count", "pages"); code != 0 || strings.TrimSpace(out) != "1" {
		t.Errorf("count beside a read-only serve: exit %d, %q, %s", code, out, stderr)
	}
	want := "storh: database " + db + " is locked (waited 50ms): other processes have the file open read-only, which keeps writers out; close them, or wait longer with --timeout\n"
	if _, stderr, code := runStorh(context.Background(), "", "--db", db, "--timeout", "50ms", "put", "pages", `{"n":2}`); code != exitError || stderr != want {
		t.Errorf("put beside a read-only serve: exit %d, %s; want:\n%s", code, stderr, want)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()

	cmd, _, _ = serveProcess(t, db, "--write")
	want = "storh: database " + db + " is locked (waited 50ms): another process has the file open for writing; close it, or wait longer with --timeout\n"
	for _, args := range [][]string{{"count", "pages"}, {"put", "pages", `{"n":2}`}} {
		if _, stderr, code := runStorh(context.Background(), "", append([]string{"--db", db, "--timeout", "50ms"}, args...)...); code != exitError || stderr != want {
			t.Errorf("%s beside serve --write: exit %d, %s; want:\n%s", args[0], code, stderr, want)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}

// callHost is call for a request that names host in its Host header,
// whatever address it is sent to: what a page that rebound its own name to
// 127.0.0.1 sends.
func callHost(t *testing.T, method, url, host, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, url, host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestServeHosts: serve --write on loopback without a token refuses, and
// does not write, a request for another host (DNS rebinding), and serves
// the loopback names and addresses and the hosts of --allow-host, at any
// port. Off loopback, where a token is needed, every host is served unless
// --allow-host is given.
func TestServeHosts(t *testing.T) {
	db := serveDB(t, 1)
	s := startServe(t, nil, "--db", db, "serve", "--addr", "127.0.0.1:0", "--write", "--allow-host", "storh.internal")
	port := s.url[strings.LastIndex(s.url, ":")+1 : len(s.url)-1]
	put := func(host string) (int, string) {
		return callHost(t, "PUT", s.url+"api/collections/pages/records/"+uuidv7.New().String(), host, "", `{"n":1}`)
	}
	for _, host := range []string{"rebind.attacker.example", "rebind.attacker.example:" + port, "storh.internal.attacker.example:" + port} {
		if code, body := put(host); code != http.StatusMisdirectedRequest || !strings.Contains(body, `"misdirected"`) {
			t.Errorf("PUT for host %s: %d %s, want 421 misdirected", host, code, body)
		}
		if code, _ := callHost(t, "GET", s.url, host, "", ""); code != http.StatusMisdirectedRequest {
			t.Errorf("the page for host %s: %d, want 421", host, code)
		}
	}
	if body := expectStatus(t, 200, "GET", s.url+"api/collections/pages/count", "", ""); strings.TrimSpace(body) != `{"count":1}` {
		t.Errorf("count %s after PUTs for other hosts, want 1: they wrote", body)
	}
	want := 1
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "localhost", "storh.internal:" + port, "STORH.internal"} {
		if code, body := put(host); code != 200 {
			t.Errorf("PUT for host %s: %d %s", host, code, body)
		}
		want++
	}
	if code := s.stop(); code != exitOK {
		t.Fatalf("serve: exit %d:\n%s", code, s.stderr)
	}
	if out, _, _ := runStorh(context.Background(), "", "--db", db, "count", "pages"); strings.TrimSpace(out) != fmt.Sprint(want) {
		t.Errorf("count %q, want %d", out, want)
	}

	// Off loopback a token keeps pages out; the Host is checked only with
	// --allow-host.
	s = startServe(t, nil, "--db", db, "serve", "--addr", "0.0.0.0:0", "--token", "t0k")
	local := "http://127.0.0.1" + s.url[strings.LastIndex(s.url, ":"):]
	if code, body := callHost(t, "GET", local+"api/collections", "storh.example.com", "t0k", ""); code != 200 {
		t.Errorf("off loopback, host storh.example.com: %d %s", code, body)
	}
	s.stop()
	s = startServe(t, nil, "--db", db, "serve", "--addr", "0.0.0.0:0", "--token", "t0k", "--allow-host", "storh.example.com")
	local = "http://127.0.0.1" + s.url[strings.LastIndex(s.url, ":"):]
	for host, want := range map[string]int{"storh.example.com": 200, "127.0.0.1": 200, "other.example.com": 421} {
		if code, body := callHost(t, "GET", local+"api/collections", host, "t0k", ""); code != want {
			t.Errorf("off loopback with --allow-host, host %s: %d %s, want %d", host, code, body, want)
		}
	}
	s.stop()

	if _, stderr, code := runStorh(context.Background(), "", "--db", db, "serve", "--allow-host", ""); code != exitUsage || !strings.Contains(stderr, "--allow-host") {
		t.Errorf("serve --allow-host '': exit %d, %s", code, stderr)
	}
}

// TestServeTimeouts: serve's timeouts reach its server and handler. A
// client that trickles an import's body gets 408 at --request-timeout and
// holds up no other import; one that trickles its headers, or keeps an
// idle connection, is disconnected at --header-timeout or --idle-timeout.
func TestServeTimeouts(t *testing.T) {
	db := serveDB(t, 1)
	for _, args := range [][]string{{"--request-timeout", "0s"}, {"--header-timeout", "-1s"}, {"--idle-timeout", "0s"}} {
		if _, stderr, code := runStorh(context.Background(), "", append([]string{"--db", db, "serve"}, args...)...); code != exitUsage || !strings.Contains(stderr, args[0]+" ") || !strings.Contains(stderr, "must be positive") {
			t.Errorf("serve %s: exit %d, %s", strings.Join(args, " "), code, stderr)
		}
	}
	s := startServe(t, nil, "--db", db, "serve", "--addr", "127.0.0.1:0", "--write",
		"--request-timeout", "1s", "--header-timeout", "300ms", "--idle-timeout", "300ms")
	addr := strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/")
	dial := func(head string) net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		return conn
	}

	line := `{"data":{"from":"trickle"}}` + "\n"
	trickle := dial(fmt.Sprintf("POST /api/collections/pages/import HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s", addr, len(line)+1000, line))
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := io.WriteString(trickle, "\n"); err != nil {
				return
			}
		}
	}()
	if b := expectStatus(t, 200, "POST", s.url+"api/collections/pages/import", "", `{"data":{"from":"normal"}}`); !strings.Contains(b, `"imported":1`) {
		t.Errorf("an import beside a trickling one: %s", b)
	}
	resp, err := http.ReadResponse(bufio.NewReader(trickle), nil)
	if err != nil {
		t.Fatalf("the trickling import got no response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), `"timeout"`) || !resp.Close {
		t.Errorf("the trickling import: %d (close %v) %s, want 408 timeout and the connection closed", resp.StatusCode, resp.Close, b)
	}

	// Headers that never end, and a connection left idle after a request:
	// the server closes both.
	slowHead := dial("GET /api/collections HTTP/1.1\r\nHost: " + addr + "\r\n")
	if n, err := slowHead.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a request whose headers never end: read %d bytes, %v; want the connection closed", n, err)
	}
	idle := dial("GET /api/collections HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")
	r := bufio.NewReader(idle)
	resp, err = http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a kept-alive request: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	if n, err := r.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("an idle connection: read %d bytes, %v; want it closed", n, err)
	}

	if code := s.stop(); code != exitOK {
		t.Fatalf("serve: exit %d:\n%s", code, s.stderr)
	}
	if out, _, _ := runStorh(context.Background(), "", "--db", db, "count", "pages"); strings.TrimSpace(out) != "2" {
		t.Errorf("count %q, want 2: the seeded record and the normal import's", out)
	}
}

// TestServeFileCutWhileServing runs storh serve as a process and cuts its
// database file while it serves: requests are answered with an error
// rather than left waiting, SIGTERM still stops the server (whose Close
// reports the failure), and the file is released.
func TestServeFileCutWhileServing(t *testing.T) {
	storhBin, err := exec.LookPath("storh") // the test binary, put on the PATH by TestMain
	if err != nil {
		t.Skip("no storh on the PATH")
	}
	db := serveDB(t, 2000)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envToken+"=") && !strings.HasPrefix(kv, envDB+"=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(storhBin, "--db", db, "serve", "--addr", "127.0.0.1:0", "--write")
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := bufio.NewReader(stderr)
	line, err := lines.ReadString('\n')
	m := servingURL.FindStringSubmatch(line)
	if m == nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("storh serve printed %q (%v)", line, err)
	}
	var rest []byte
	go func() {
		rest, _ = io.ReadAll(lines)
		exited <- cmd.Wait()
	}()
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
	}()
	expectStatus(t, 200, "GET", m[1]+"api/collections/pages/records?limit=5", "", "")

	if err := os.Truncate(db, int64(os.Getpagesize())); err != nil {
		t.Fatal(err)
	}
	for _, req := range []struct{ method, path, body string }{
		{"GET", "api/collections/pages/records?limit=5", ""},
		{"GET", "api/stats", ""},
		{"PUT", "api/collections/pages/records/" + uuidv7.New().String(), `{"n":1}`},
		{"GET", "api/collections", ""},
	} {
		if code, body := call(t, req.method, m[1]+req.path, "", req.body); code < 500 || !strings.Contains(body, "corrupt") {
			t.Errorf("%s %s after the cut: %d %s; want a 5xx saying the data is corrupt", req.method, req.path, code, body)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err == nil || !strings.Contains(string(rest), "restore") {
			t.Errorf("serve after SIGTERM: %v, printed:\n%s\nwant it to fail saying to restore the file", err, rest)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("storh serve did not stop within 60s of SIGTERM")
	}
	again, err := storh.Open(db, storh.WithLockTimeout(100*time.Millisecond))
	if err == nil {
		again.Close()
	}
	if errors.Is(err, storh.ErrLocked) {
		t.Errorf("the file is still locked after serve stopped: %v", err)
	}
}
