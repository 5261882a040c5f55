package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// startMs is the creation time of the first seeded record: ids come from
// deterministic generators, one second apart, so windows are exact.
const startMs = 1_714_564_800_000 // 2024-05-01T12:00:00Z

// fixture is a seeded database: posts (Docs, a unique index on slug and
// an index on score), events (Log) and jobs (Queue).
type fixture struct {
	db     *storh.DB
	posts  *storh.Docs
	events *storh.Log
	// postIDs and eventIDs are the ids in id order.
	postIDs, eventIDs []uuidv7.UUID
}

func newFixture(t testing.TB, posts, events int) *fixture {
	t.Helper()
	return newFixtureAt(t, filepath.Join(t.TempDir(), "db"), posts, events)
}

// newFixtureAt is newFixture on the database at path: a file, or a
// PostgreSQL URL.
func newFixtureAt(t testing.TB, path string, posts, events int) *fixture {
	t.Helper()
	db, err := storh.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{db: db}
	f.posts, err = db.Docs("posts",
		storh.WithIDGenerator(uuidv7.NewDeterministic(1, startMs, 1000).New),
		storh.WithIndex(storh.Index("slug").Unique()),
		storh.WithIndex(storh.Index("score")))
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{"post", "page", "note"}
	for i := range posts {
		data := storh.Map{"slug": fmt.Sprintf("p%03d", i), "score": int64(i * 7 % 11), "kind": kinds[i%3],
			"tags": []any{kinds[(i+1)%3], "all"}}
		if i%4 == 0 {
			data["ratio"] = float64(i) / 4
		}
		if i%5 == 0 {
			data["author"] = storh.Map{"name": fmt.Sprintf("a%d", i%2)}
		}
		rec, err := f.posts.Put(data)
		if err != nil {
			t.Fatal(err)
		}
		f.postIDs = append(f.postIDs, rec.ID)
	}
	f.events, err = db.Log("events", storh.WithIDGenerator(uuidv7.NewDeterministic(2, startMs, 1000).New))
	if err != nil {
		t.Fatal(err)
	}
	for i := range events {
		rec, err := f.events.Put(storh.Map{"n": int64(i), "level": []string{"info", "warn", "error"}[i%3]})
		if err != nil {
			t.Fatal(err)
		}
		f.eventIDs = append(f.eventIDs, rec.ID)
	}
	jobs, err := db.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Enqueue(storh.Map{"to": "ada"}); err != nil {
		t.Fatal(err)
	}
	return f
}

// serve starts a test server with the handler over f's database.
func (f *fixture) serve(t testing.TB, opts ...web.Option) *client {
	t.Helper()
	srv := httptest.NewServer(web.Handler(f.db, opts...))
	t.Cleanup(srv.Close)
	return &client{t: t, base: srv.URL + "/"}
}

// ids returns the ids a query selects, run straight through storh.
func ids(t testing.TB, c storh.Collection, q query.Query) []uuidv7.UUID {
	t.Helper()
	recs, err := c.Find(q)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uuidv7.UUID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

type client struct {
	t     testing.TB
	base  string // ends in "/"
	token string
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (c *client) do(method, path string, body []byte) response {
	c.t.Helper()
	return c.doHeader(method, path, body, nil)
}

// doHeader is do with extra headers, which win over the client's token.
func (c *client) doHeader(method, path string, body []byte, header http.Header) response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (c *client) get(path string) response { return c.do("GET", path, nil) }

// decode decodes a JSON body into v, failing the test otherwise.
func (r response) decode(t testing.TB, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(r.body))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		t.Fatalf("status %d, body %s: %v", r.status, r.body, err)
	}
}

// errorKind returns the kind of an error body, "" for another body.
func (r response) errorKind(t testing.TB) string {
	t.Helper()
	var e struct {
		Error struct{ Kind, Message string }
	}
	r.decode(t, &e)
	if e.Error.Message == "" && e.Error.Kind != "" {
		t.Errorf("error %q without a message", e.Error.Kind)
	}
	return e.Error.Kind
}

// pageJSON is a page of records.
type pageJSON struct {
	Records []struct {
		ID   string          `json:"id"`
		Time string          `json:"time"`
		Data json.RawMessage `json:"data"`
	} `json:"records"`
	Next string `json:"next"`
}

func (p pageJSON) ids(t testing.TB) []uuidv7.UUID {
	t.Helper()
	out := make([]uuidv7.UUID, len(p.Records))
	for i, r := range p.Records {
		out[i] = uuidv7.MustParse(r.ID)
	}
	return out
}

// page reads one page, failing the test on any status but 200.
func (c *client) page(path string) pageJSON {
	c.t.Helper()
	r := c.get(path)
	if r.status != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", path, r.status, r.body)
	}
	var p pageJSON
	r.decode(c.t, &p)
	return p
}

func reversed(ids []uuidv7.UUID) []uuidv7.UUID {
	out := slices.Clone(ids)
	slices.Reverse(out)
	return out
}
