package web_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// importResult is the answer to an import.
type importResult struct {
	Collection, Kind                    string
	Lines, Imported, Inserted, Replaced int
}

// emptyDB serves a new, empty database.
func emptyDB(t *testing.T, opts ...web.Option) (*storh.DB, *client) {
	t.Helper()
	db, err := storh.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	srv := httptest.NewServer(web.Handler(db, opts...))
	t.Cleanup(srv.Close)
	return db, &client{t: t, base: srv.URL + "/"}
}

// TestExportImport moves every record of a Docs collection and a Log from
// one database to another through the API and compares the exports byte
// for byte.
func TestExportImport(t *testing.T) {
	f := newFixture(t, 1200, 700)
	// Values of every type the mapping has.
	at := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)
	if _, err := f.posts.Put(storh.Map{"slug": "typed", "n": int64(5), "f": 5.0, "at": at, "b": []byte{0, 1, 255},
		"u": uuidv7.MustParse(absentID), "nested": storh.Map{"list": []any{1, "two", nil, true}}, "s": "<&>\n\"é"}); err != nil {
		t.Fatal(err)
	}
	src := f.serve(t)
	_, dst := emptyDB(t, web.WithWrites())

	for _, tc := range []struct{ name, kind string }{{"posts", "docs"}, {"events", "log"}} {
		out := src.get("api/collections/" + tc.name + "/export")
		if out.status != 200 || out.header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("export %s: %d %s", tc.name, out.status, out.body)
		}
		// The API's export is jsonl.Export's, byte for byte.
		coll := map[string]storh.Collection{"posts": f.posts, "events": f.events}[tc.name]
		var direct bytes.Buffer
		if _, err := jsonl.Export(t.Context(), &direct, coll, query.All()); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.body, direct.Bytes()) {
			t.Fatalf("export %s differs from jsonl.Export", tc.name)
		}

		r := dst.do("POST", "api/collections/"+tc.name+"/import?create="+tc.kind, out.body)
		var rep importResult
		r.decode(t, &rep)
		n := bytes.Count(out.body, []byte("\n"))
		if r.status != 200 || rep != (importResult{tc.name, tc.kind, n, n, n, 0}) {
			t.Fatalf("import %s: %d %s", tc.name, r.status, r.body)
		}
		back := dst.get("api/collections/" + tc.name + "/export")
		if !bytes.Equal(back.body, out.body) {
			t.Fatalf("%s: the export of the copy differs from the original's", tc.name)
		}
		var stats map[string]any
		dst.get("api/collections/"+tc.name).decode(t, &stats)
		if stats["kind"] != tc.kind || stats["records"] != json.Number(itoa(n)) {
			t.Errorf("%s in the copy: %v", tc.name, stats)
		}
	}

	// Importing the export again into the Docs collection replaces every
	// record with itself.
	out := src.get("api/collections/posts/export")
	var rep importResult
	dst.do("POST", "api/collections/posts/import", out.body).decode(t, &rep)
	if rep.Imported != 1201 || rep.Replaced != 1201 || rep.Inserted != 0 {
		t.Errorf("import again: %+v", rep)
	}
}

// TestImportAllOrNothing sends imports that fail after more than one of
// jsonl.Import's transactions (storh.StreamBatch rows): nothing is
// written, and the error names the line.
func TestImportAllOrNothing(t *testing.T) {
	f := newFixture(t, 20, 5)
	c := f.serve(t, web.WithWrites())
	n := storh.StreamBatch + 700
	rows := func(bad int, line string) []byte {
		var b bytes.Buffer
		for i := 1; i <= n; i++ {
			if i == bad {
				b.WriteString(line + "\n")
				continue
			}
			fmt.Fprintf(&b, `{"data":{"slug":"new%d","i":%d}}`+"\n", i, i)
		}
		return b.Bytes()
	}
	dupID := uuidv7.New().String()
	dupBody := rows(0, "")
	dupBody = append(dupBody, fmt.Sprintf(`{"id":%q,"data":{}}`+"\n"+`{"id":%q,"data":{}}`+"\n", dupID, dupID)...)
	for _, tc := range []struct {
		name, path string
		body       []byte
		status     int
		kind       string
		line       int
	}{
		{"bad JSON", "posts", rows(n-3, `{"slug":`), 400, "bad_request", n - 3},
		{"not a row", "posts", rows(n-2, `[1,2]`), 400, "bad_request", n - 2},
		{"bad value", "posts", rows(n-1, `{"d":{"$date":"nope"}}`), 400, "bad_request", n - 1},
		{"id twice", "posts", dupBody, 400, "bad_request", n + 2},
		{"unique violation", "posts", rows(n, `{"slug":"p003"}`), 409, "unique_violation", n},
		{"log id exists", "events", rows(n-5, `{"id":"`+f.eventIDs[2].String()+`","data":{}}`), 409, "exists", n - 5},
	} {
		before := snapshot(t, f)
		r := c.do("POST", "api/collections/"+tc.path+"/import", tc.body)
		var e struct {
			Error struct {
				Kind, Message string
				Line          int
			}
		}
		r.decode(t, &e)
		if r.status != tc.status || e.Error.Kind != tc.kind || e.Error.Line != tc.line ||
			!strings.HasPrefix(e.Error.Message, "web: import into") || !strings.Contains(e.Error.Message, fmt.Sprintf("line %d", tc.line)) {
			t.Errorf("%s: %d %s, want %d %s at line %d", tc.name, r.status, r.body, tc.status, tc.kind, tc.line)
		}
		if snapshot(t, f) != before {
			t.Errorf("%s: a failed import wrote records", tc.name)
		}
	}
	// The same body without the bad line is imported whole.
	r := c.do("POST", "api/collections/posts/import", rows(0, ""))
	var rep importResult
	r.decode(t, &rep)
	if r.status != 200 || rep.Imported != n || rep.Inserted != n || rep.Lines != n {
		t.Errorf("good import: %d %s", r.status, r.body)
	}
	if got, _ := f.posts.Count(); got != 20+n {
		t.Errorf("count %d after the import", got)
	}
	// An empty body imports nothing, and creates nothing.
	r = c.do("POST", "api/collections/fresh/import?create=docs", nil)
	if r.decode(t, &rep); r.status != 200 || rep.Lines != 0 || rep.Imported != 0 {
		t.Errorf("empty import: %d %s", r.status, r.body)
	}
	if r := c.get("api/collections/fresh"); r.status != 404 {
		t.Errorf("an empty import created its collection: %d %s", r.status, r.body)
	}
}

func TestTransferLimits(t *testing.T) {
	f := newFixture(t, 40, 0)
	c := f.serve(t, web.WithWrites(), web.WithMaxPage(5), web.WithMaxImport(200), web.WithMaxBody(10))
	before := snapshot(t, f)
	// Over the import limit: 413, nothing written. WithMaxBody (10 bytes)
	// does not apply to an import.
	body := []byte(strings.Repeat(`{"data":{"slug":"x"}}`+"\n", 9) + `{"data":{"slug":"yy"}}` + "\n")
	if r := c.do("POST", "api/collections/posts/import", body); r.status != 413 || r.errorKind(t) != "too_large" {
		t.Errorf("import over the limit (%d bytes): %d %s", len(body), r.status, r.body)
	}
	if snapshot(t, f) != before {
		t.Error("a refused import wrote records")
	}
	if r := c.do("POST", "api/collections/posts/import", []byte(`{"data":{"slug":"under the limit"}}`)); r.status != 200 {
		t.Errorf("import under the limit: %d %s", r.status, r.body)
	}

	// An export is every record, not a page (5), and a limit above the
	// page size is kept.
	lines := func(path string) int {
		r := c.get(path)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
		return bytes.Count(r.body, []byte("\n"))
	}
	for path, want := range map[string]int{
		"api/collections/posts/export":                  41,
		"api/collections/posts/export?limit=7":          7,
		"api/collections/posts/export?limit=7&newest=1": 7,
		// The last 10 seeded, and the one imported above.
		"api/collections/posts/export?from=" + itoa(startMs+30_000):                                                           11,
		"api/collections/posts/export?q=" + `%7B%22field%22%3A%22kind%22%2C%22op%22%3A%22eq%22%2C%22value%22%3A%22post%22%7D`: 14,
	} {
		if got := lines(path); got != want {
			t.Errorf("%s: %d lines, want %d", path, got, want)
		}
	}
	r := c.get("api/collections/posts/export?newest=1&limit=2")
	want := ids(t, f.posts, query.All().Reverse().Limit(2))
	if !strings.HasPrefix(string(r.body), `{"id":"`+want[0].String()) {
		t.Errorf("newest first: %s, want %s first", r.body, want[0])
	}

	// Out of time before the first line: an error status.
	slow := f.serve(t, web.WithTimeout(time.Nanosecond), web.WithWrites())
	if r := slow.get("api/collections/posts/export"); r.status != 503 || r.errorKind(t) != "timeout" {
		t.Errorf("export past the deadline: %d %s", r.status, r.body)
	}
	before = snapshot(t, f)
	if r := slow.do("POST", "api/collections/posts/import", []byte(`{"data":{}}`)); r.status != 503 || r.errorKind(t) != "timeout" {
		t.Errorf("import past the deadline: %d %s", r.status, r.body)
	}
	if snapshot(t, f) != before {
		t.Error("an import past its deadline wrote records")
	}
}

// firstRead signals the first read of the body of each request marked
// X-Test-Signal, by the handler it wraps: then the handler is reading it.
func firstRead(h http.Handler, reading chan<- string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := r.Header.Get("X-Test-Signal"); name != "" {
			r.Body = &signalBody{ReadCloser: r.Body, name: name, reading: reading}
		}
		h.ServeHTTP(w, r)
	})
}

type signalBody struct {
	io.ReadCloser
	name    string
	reading chan<- string
	once    sync.Once
}

func (b *signalBody) Read(p []byte) (int, error) {
	b.once.Do(func() { b.reading <- b.name })
	return b.ReadCloser.Read(p)
}

// slowClient sends a request on a connection of its own: the headers,
// which declare a Content-Length of declared, and head at once, then, with
// every > 0, one newline each interval until its connection is closed;
// with every 0 nothing more. It is a client on a bad link, or one that
// means to hold the server up.
func slowClient(t *testing.T, addr, method, path, name string, head []byte, declared int, every time.Duration) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); conn.Close() })
	fmt.Fprintf(conn, "%s /%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\nX-Test-Signal: %s\r\n\r\n",
		method, path, declared, name)
	if _, err := conn.Write(head); err != nil {
		t.Fatal(err)
	}
	if every > 0 {
		go func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := conn.Write([]byte("\n")); err != nil {
					return
				}
			}
		}()
	}
	return conn
}

// slowResponse reads the response a slowClient gets, waiting at most
// within, and whether it closes the connection.
func slowResponse(t *testing.T, conn net.Conn, within time.Duration) (response, bool) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response to the slow request within %v: %v", within, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}, resp.Close
}

// await waits for the name a firstRead signals, failing after within.
func await(t *testing.T, reading <-chan string, want string, within time.Duration) {
	t.Helper()
	select {
	case got := <-reading:
		if got != want {
			t.Fatalf("the handler read the body of %s, want %s", got, want)
		}
	case <-time.After(within):
		t.Fatalf("the handler did not read the body of %s within %v", want, within)
	}
}

// TestImportTrickle: a client that sends its import's body a byte at a
// time holds up no other import, which runs at once; it gets 408 when its
// request's time runs out, and writes nothing. A record's PUT is bounded
// the same way.
func TestImportTrickle(t *testing.T) {
	db, err := storh.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	events, err := db.Log("events")
	if err != nil {
		t.Fatal(err)
	}
	reading := make(chan string, 4)
	// A normal import runs in milliseconds: 2s is far longer, and short
	// enough for the slow client's request to run out in the test.
	const limit = 2 * time.Second
	srv := httptest.NewServer(firstRead(web.Handler(db, web.WithWrites(), web.WithTimeout(limit)), reading))
	t.Cleanup(srv.Close)
	c := &client{t: t, base: srv.URL + "/"}
	addr := srv.Listener.Addr().String()

	head := []byte(`{"data":{"from":"trickle"}}` + "\n")
	slow := slowClient(t, addr, "POST", "api/collections/events/import?create=log", "trickle", head, len(head)+1000, 50*time.Millisecond)
	await(t, reading, "trickle", 10*time.Second)
	r := c.do("POST", "api/collections/events/import?create=log", []byte(`{"data":{"from":"normal"}}`+"\n"))
	if r.status != 200 {
		t.Fatalf("an import beside a trickling one: %d %s, want 200 at once", r.status, r.body)
	}
	r, closing := slowResponse(t, slow, 5*limit)
	if r.status != http.StatusRequestTimeout || r.errorKind(t) != "timeout" || !strings.Contains(string(r.body), "did not arrive within the request's time limit") {
		t.Errorf("the trickling import: %d %s, want 408 timeout", r.status, r.body)
	}
	if !closing {
		t.Error("the trickling import's response keeps the connection; the rest of its body is still on its way")
	}
	recs, err := events.Find(query.All())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Data()["from"] != "normal" {
		t.Errorf("events hold %d records, want the normal import's only", len(recs))
	}

	put := `{"from":"slow put"}`
	slow = slowClient(t, addr, "PUT", "api/collections/events/records/"+uuidv7.New().String(), "put", []byte(put), len(put)+100, 50*time.Millisecond)
	await(t, reading, "put", 10*time.Second)
	if r, _ := slowResponse(t, slow, 5*limit); r.status != http.StatusRequestTimeout || r.errorKind(t) != "timeout" {
		t.Errorf("a trickling PUT: %d %s, want 408 timeout", r.status, r.body)
	}
	if n, err := events.Count(); err != nil || n != 1 {
		t.Errorf("events hold %d records (%v) after a trickling PUT, want 1", n, err)
	}
}

// TestImportBudget: import bodies in memory, counted as they arrive, are
// bounded together by twice WithMaxImport; an import past that is 503
// busy, and the bytes of a body are given back when its request ends.
func TestImportBudget(t *testing.T) {
	db, err := storh.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Log("events"); err != nil {
		t.Fatal(err)
	}
	reading := make(chan string, 4)
	h := web.Handler(db, web.WithWrites(), web.WithMaxImport(1000))
	srv := httptest.NewServer(firstRead(h, reading))
	t.Cleanup(srv.Close)
	c := &client{t: t, base: srv.URL + "/"}
	addr := srv.Listener.Addr().String()
	held := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for web.ImportBytes(h) != want {
			if time.Now().After(deadline) {
				t.Fatalf("import bodies hold %d bytes, want %d", web.ImportBytes(h), want)
			}
			<-tick.C
		}
	}

	// Two stalled bodies of 900 bytes each (of 1000 declared: a
	// Content-Length is not charged, only bytes that came).
	line := []byte(`{"data":{"pad":"` + strings.Repeat("x", 900-len(`{"data":{"pad":""}}`)-1) + `"}}` + "\n")
	a := slowClient(t, addr, "POST", "api/collections/events/import?create=log", "a", line, 1000, 0)
	slowClient(t, addr, "POST", "api/collections/events/import?create=log", "b", line, 1000, 0)
	held(1800)
	body := []byte(strings.Repeat(`{"data":{"n":1}}`+"\n", 20)) // 340 bytes: 2140 in all
	r := c.do("POST", "api/collections/events/import?create=log", body)
	if r.status != http.StatusServiceUnavailable || r.errorKind(t) != "busy" || r.header.Get("Retry-After") == "" {
		t.Errorf("an import past the budget: %d %v %s, want 503 busy with Retry-After", r.status, r.header, r.body)
	}
	held(1800)
	a.Close()
	held(900)
	if r := c.do("POST", "api/collections/events/import?create=log", body); r.status != 200 {
		t.Errorf("an import within the budget: %d %s", r.status, r.body)
	}
	held(900)
}
