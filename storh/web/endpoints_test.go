package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/web"
)

// TestEndpointStatuses covers every status of the endpoints of the second
// slice: indexes, count, queues, verify, export, import, tail and stats.
func TestEndpointStatuses(t *testing.T) {
	f := newFixture(t, 20, 10)
	ro := f.serve(t)
	rw := f.serve(t, web.WithWrites())
	q := func(s string) string { return url.QueryEscape(s) }
	const (
		jsonCT  = "application/json"
		ndjson  = "application/x-ndjson"
		goodRow = `{"id":"0190a4f4-5c3b-7def-8123-456789abcdef","data":{"n":1}}` + "\n"
	)
	crossSite := http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}
	for _, tc := range []struct {
		c            *client
		method, path string
		body         string
		header       http.Header
		status       int
		kind         string
		ct           string // of a success; errors are always JSON
	}{
		{ro, "GET", "api/collections/posts/indexes", "", nil, 200, "", jsonCT},
		{ro, "GET", "api/collections/events/indexes", "", nil, 200, "", jsonCT},
		{ro, "GET", "api/collections/posts/indexes?x=1", "", nil, 400, "bad_request", ""},
		{ro, "GET", "api/collections/nope/indexes", "", nil, 404, "not_found", ""},
		{ro, "GET", "api/collections/jobs/indexes", "", nil, 409, "wrong_kind", ""},
		{ro, "POST", "api/collections/posts/indexes", "", nil, 405, "method_not_allowed", ""},

		{ro, "GET", "api/collections/posts/count", "", nil, 200, "", jsonCT},
		{ro, "GET", "api/collections/posts/count?q=" + q(`{"field":"score","op":"eq","value":3}`), "", nil, 200, "", jsonCT},
		{ro, "GET", "api/collections/posts/count?limit=100000", "", nil, 200, "", jsonCT},
		{ro, "GET", "api/collections/posts/count?limit=0", "", nil, 400, "bad_request", ""},
		{ro, "GET", "api/collections/posts/count?from=x", "", nil, 400, "bad_request", ""},
		{ro, "GET", "api/collections/posts/count?x=1", "", nil, 400, "bad_request", ""},
		{ro, "GET", "api/collections/posts/count?q=" + q(`{"op":"eq"}`), "", nil, 400, "invalid_query", ""},
		{ro, "GET", "api/collections/posts/count?order=score&after=" + absentID, "", nil, 404, "cursor_not_found", ""},
		{ro, "GET", "api/collections/nope/count", "", nil, 404, "not_found", ""},
		{ro, "GET", "api/collections/jobs/count", "", nil, 409, "wrong_kind", ""},
		{ro, "DELETE", "api/collections/posts/count", "", nil, 405, "method_not_allowed", ""},

		{ro, "GET", "api/queues/jobs", "", nil, 200, "", jsonCT},
		{ro, "GET", "api/queues/jobs?x=1", "", nil, 400, "bad_request", ""},
		{ro, "GET", "api/queues/nope", "", nil, 404, "not_found", ""},
		{ro, "GET", "api/queues/posts", "", nil, 409, "wrong_kind", ""},
		{ro, "GET", "api/queues/events", "", nil, 409, "wrong_kind", ""},
		{ro, "POST", "api/queues/jobs", "", nil, 405, "method_not_allowed", ""},
		{ro, "GET", "api/queues", "", nil, 404, "not_found", ""},

		{ro, "POST", "api/verify", "", nil, 200, "", ndjson},
		{ro, "POST", "api/verify?collection=posts&collection=jobs", "", nil, 200, "", ndjson},
		{ro, "POST", "api/verify?collection=nope", "", nil, 404, "not_found", ""},
		{ro, "POST", "api/verify?x=1", "", nil, 400, "bad_request", ""},
		{ro, "POST", "api/verify", "collection=posts", nil, 400, "bad_request", ""},
		{ro, "POST", "api/verify", "", crossSite, 403, "forbidden", ""},
		{ro, "GET", "api/verify", "", nil, 405, "method_not_allowed", ""},

		{ro, "GET", "api/collections/posts/export", "", nil, 200, "", ndjson},
		{ro, "GET", "api/collections/events/export?newest=1&limit=3", "", nil, 200, "", ndjson},
		{ro, "GET", "api/collections/posts/export?from=2030-01-01T00:00:00Z", "", nil, 200, "", ndjson},
		{ro, "GET", "api/collections/posts/export?limit=0", "", nil, 400, "bad_request", ""},
		{ro, "GET", "api/collections/posts/export?x=1", "", nil, 400, "bad_request", ""},
		{ro, "GET", "api/collections/nope/export", "", nil, 404, "not_found", ""},
		{ro, "GET", "api/collections/jobs/export", "", nil, 409, "wrong_kind", ""},
		{ro, "PUT", "api/collections/posts/export", "", nil, 405, "method_not_allowed", ""},

		{ro, "POST", "api/collections/posts/import", goodRow, nil, 403, "forbidden", ""},
		{rw, "POST", "api/collections/posts/import", goodRow, crossSite, 403, "forbidden", ""},
		{rw, "POST", "api/collections/posts/import?x=1", goodRow, nil, 400, "bad_request", ""},
		{rw, "POST", "api/collections/posts/import?create=queue", goodRow, nil, 400, "bad_request", ""},
		{rw, "POST", "api/collections/posts/import?create=log", goodRow, nil, 409, "wrong_kind", ""},
		{rw, "POST", "api/collections/posts/import", "{\n", nil, 400, "bad_request", ""},
		{rw, "POST", "api/collections/nope/import", goodRow, nil, 404, "not_found", ""},
		{rw, "POST", "api/collections/jobs/import", goodRow, nil, 409, "wrong_kind", ""},
		{rw, "POST", "api/collections/jobs/import?create=docs", goodRow, nil, 409, "wrong_kind", ""},
		{rw, "GET", "api/collections/posts/import", "", nil, 405, "method_not_allowed", ""},

		{ro, "GET", "api/collections/posts/tail?x=1", "", nil, 400, "bad_request", ""},
		{ro, "GET", "api/collections/posts/tail?from=yesterday", "", nil, 400, "bad_request", ""},
		{ro, "GET", "api/collections/posts/tail?from=1&from=2", "", nil, 400, "bad_request", ""},
		{ro, "GET", "api/collections/posts/tail", "", http.Header{"Last-Event-Id": {"nope"}}, 400, "bad_request", ""},
		{ro, "GET", "api/collections/nope/tail", "", nil, 404, "not_found", ""},
		{ro, "GET", "api/collections/jobs/tail", "", nil, 409, "wrong_kind", ""},
		{ro, "POST", "api/collections/posts/tail", "", nil, 405, "method_not_allowed", ""},
		{ro, "HEAD", "api/collections/posts/tail", "", nil, 200, "", "text/event-stream"},

		{ro, "GET", "api/stats", "", nil, 200, "", jsonCT},
		{ro, "GET", "api/stats?x=1", "", nil, 400, "bad_request", ""},
		{ro, "POST", "api/stats", "", nil, 405, "method_not_allowed", ""},
	} {
		before := snapshot(t, f)
		r := tc.c.doHeader(tc.method, tc.path, []byte(tc.body), tc.header)
		name := tc.method + " " + tc.path
		if r.status != tc.status {
			t.Errorf("%s: status %d, want %d: %s", name, r.status, tc.status, r.body)
			continue
		}
		ct := r.header.Get("Content-Type")
		switch {
		case tc.kind != "":
			if ct != jsonCT {
				t.Errorf("%s: error with Content-Type %q", name, ct)
			}
			if got := r.errorKind(t); got != tc.kind {
				t.Errorf("%s: kind %q, want %q: %s", name, got, tc.kind, r.body)
			}
			if after := snapshot(t, f); after != before {
				t.Errorf("%s: a refused request changed the database", name)
			}
		case ct != tc.ct:
			t.Errorf("%s: Content-Type %q, want %q", name, ct, tc.ct)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", name, r.header)
		}
		if tc.status == 405 && r.header.Get("Allow") == "" {
			t.Errorf("%s: 405 without Allow", name)
		}
	}
}

func TestIndexes(t *testing.T) {
	f := newFixture(t, 12, 3)
	// A compound index, and one over a key that holds a dot.
	if _, err := f.db.Docs("posts", storh.WithIndex(storh.Index("kind", "score").Named("kind_score")),
		storh.WithIndex(storh.IndexFields(query.FieldPath("a.b", "c")).Named("dotted"))); err != nil {
		t.Fatal(err)
	}
	c := f.serve(t)
	var got struct {
		Indexes []map[string]any `json:"indexes"`
	}
	c.get("api/collections/posts/indexes").decode(t, &got)
	want, err := f.posts.Indexes()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Indexes) != len(want) || len(want) != 4 {
		t.Fatalf("indexes %v, want %+v", got.Indexes, want)
	}
	for i, w := range want {
		g := got.Indexes[i]
		paths, _ := json.Marshal(w.Paths)
		gotPaths, _ := json.Marshal(g["paths"])
		if g["name"] != w.Name || string(gotPaths) != string(paths) || g["unique"] != w.Unique ||
			g["entries"] != json.Number(itoa(w.Entries)) || g["building"] != false {
			t.Errorf("index %d: %v, want %+v", i, g, w)
		}
		if _, ok := g["built"]; ok {
			t.Errorf("index %d: built of a built index: %v", i, g)
		}
	}
	byName := map[string]map[string]any{}
	for _, g := range got.Indexes {
		byName[g["name"].(string)] = g
	}
	if byName["slug"]["unique"] != true || byName["slug"]["entries"] != json.Number("12") {
		t.Errorf("slug: %v", byName["slug"])
	}
	if p, _ := json.Marshal(byName["dotted"]["paths"]); string(p) != `[["a.b","c"]]` {
		t.Errorf("dotted paths %s", p)
	}
	var none struct {
		Indexes []any `json:"indexes"`
	}
	r := c.get("api/collections/events/indexes")
	r.decode(t, &none)
	if none.Indexes == nil || len(none.Indexes) != 0 || !strings.Contains(string(r.body), `"indexes":[]`) {
		t.Errorf("events indexes: %s", r.body)
	}
}

func TestCount(t *testing.T) {
	f := newFixture(t, 40, 9)
	c := f.serve(t, web.WithMaxPage(5))
	eq3 := query.Field("score").Eq(3)
	q := url.QueryEscape
	for _, tc := range []struct {
		path string
		want int
	}{
		{"api/collections/posts/count", 40},
		{"api/collections/events/count", 9},
		// An empty parameter is absent: the counter again.
		{"api/collections/posts/count?q=", 40},
		{"api/collections/posts/count?q=" + q(`{"field":"score","op":"eq","value":3}`), len(ids(t, f.posts, query.All().Where(eq3)))},
		{"api/collections/posts/count?q=" + q(`{"field":"kind","op":"eq","value":"post"}`), 14},
		{"api/collections/posts/count?after=" + f.postIDs[9].String(), 30},
		{"api/collections/posts/count?newest=1&before=" + f.postIDs[9].String(), 9},
		{"api/collections/posts/count?from=" + itoa(startMs+10_000) + "&until=" + itoa(startMs+19_999), 10},
		{"api/collections/posts/count?from=2024-05-01T12:00:30Z", 10},
		// The limit is CountMatching's: it counts up to it, and it is not
		// lowered to the page size (5).
		{"api/collections/posts/count?limit=7", 7},
		{"api/collections/posts/count?limit=1000", 40},
		{"api/collections/posts/count?limit=99999999999999999999999", 40},
		{"api/collections/posts/count?require_index=1&q=" + q(`{"field":"score","op":"gte","value":5}`), len(ids(t, f.posts, query.All().Where(query.Field("score").Gte(5))))},
	} {
		var got struct{ Count json.Number }
		r := c.get(tc.path)
		if r.status != 200 {
			t.Errorf("%s: %d %s", tc.path, r.status, r.body)
			continue
		}
		r.decode(t, &got)
		if got.Count != json.Number(itoa(tc.want)) {
			t.Errorf("%s: count %s, want %d", tc.path, got.Count, tc.want)
		}
	}
	if r := c.get("api/collections/posts/count?require_index=1&q=" + q(`{"field":"kind","op":"eq","value":"post"}`)); r.status != 400 {
		t.Errorf("require_index without an index: %d %s", r.status, r.body)
	}
}

func TestQueueCounts(t *testing.T) {
	f := newFixture(t, 0, 0)
	// The fixture made the queue with the default attempts: one attempt
	// is a change of its stored options.
	if err := f.db.SetQueueOptions("jobs", storh.WithMaxAttempts(1)); err != nil {
		t.Fatal(err)
	}
	jobs, err := f.db.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := jobs.Enqueue(storh.Map{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	// The fixture enqueued one: 7 jobs. Claim 4; complete 1, fail 1 for
	// good (one attempt), leave 2 claimed.
	claimed, err := jobs.ClaimMany(4, time.Hour)
	if err != nil || len(claimed) != 4 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if err := jobs.Complete(claimed[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Fail(claimed[1].ID, "no"); err != nil {
		t.Fatal(err)
	}
	c := f.serve(t)
	r := c.get("api/queues/jobs")
	want := `{"name":"jobs","pending":3,"claimed":2,"done":1,"dead":1,"scheduled":0}` + "\n"
	if r.status != 200 || string(r.body) != want {
		t.Errorf("queue counts: %d %s, want %s", r.status, r.body, want)
	}
}

func TestStats(t *testing.T) {
	f := newFixture(t, 5, 3)
	c := f.serve(t)
	var got map[string]any
	r := c.get("api/stats")
	r.decode(t, &got)
	st, err := f.db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if got["backend"] != "file" || got["file_size"] != json.Number(itoa(int(st.FileSize))) {
		t.Errorf("stats %v, want %+v", got, st)
	}
	for _, k := range []string{"free_bytes", "commits", "page_writes", "commit_io_ms"} {
		if _, ok := got[k]; !ok {
			t.Errorf("stats without %s: %s", k, r.body)
		}
	}
	// Written only when the file's reads go through bbolt's buckets.
	if _, ok := got["direct_reads_off"]; ok {
		t.Errorf("stats of a file read directly hold direct_reads_off: %s", r.body)
	}
	if _, ok := got["path"]; ok || strings.Contains(string(r.body), f.db.Path()) {
		t.Errorf("stats show the file's path: %s", r.body)
	}
	cs, _ := got["collections"].([]any)
	if len(cs) != 3 || cs[0].(map[string]any)["name"] != "events" || cs[2].(map[string]any)["records"] != json.Number("5") {
		t.Errorf("stats collections: %v", got["collections"])
	}
}
