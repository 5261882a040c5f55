package web_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
	"github.com/storhdb/storh-go/storh/web/ui"
)

// A valid UUIDv7 that no fixture stores.
const absentID = "0190a4f4-5c3b-7def-8123-456789abcdef"

func TestStatuses(t *testing.T) {
	f := newFixture(t, 20, 10)
	c := f.serve(t)
	post := f.postIDs[3].String()
	q := func(s string) string { return url.QueryEscape(s) }
	for _, tc := range []struct {
		method, path string
		status       int
		kind         string
	}{
		{"GET", "api/collections", 200, ""},
		{"GET", "api/collections?x=1", 400, "bad_request"},
		{"GET", "api/collections/posts", 200, ""},
		{"GET", "api/collections/jobs", 200, ""},
		{"GET", "api/collections/nope", 404, "not_found"},
		{"GET", "api/collections/posts/records", 200, ""},
		{"GET", "api/collections/events/records", 200, ""},
		{"GET", "api/collections/nope/records", 404, "not_found"},
		{"GET", "api/collections/jobs/records", 409, "wrong_kind"},
		{"GET", "api/collections/posts/records?limit=0", 400, "bad_request"},
		{"GET", "api/collections/posts/records?limit=x", 400, "bad_request"},
		{"GET", "api/collections/posts/records?limit=5&limit=6", 400, "bad_request"},
		{"GET", "api/collections/posts/records?after=nope", 400, "bad_request"},
		{"GET", "api/collections/posts/records?before=" + strings.Replace(absentID, "7def", "4def", 1), 400, "bad_request"},
		{"GET", "api/collections/posts/records?from=yesterday", 400, "bad_request"},
		{"GET", "api/collections/posts/records?from=2024-05-01T12:00:00+02:00", 400, "bad_request"},
		{"GET", "api/collections/posts/records?from=2&until=1", 400, "bad_request"},
		{"GET", "api/collections/posts/records?newest=maybe", 400, "bad_request"},
		{"GET", "api/collections/posts/records?newset=1", 400, "bad_request"},
		{"GET", "api/collections/posts/records?q=" + q(`{"field":"score","op":"gt","value":null}`), 400, "invalid_query"},
		{"GET", "api/collections/posts/records?q=" + q(`{"field":"score"`), 400, "invalid_query"},
		{"GET", "api/collections/posts/records?order=", 200, ""},
		{"GET", "api/collections/posts/records?order=-", 400, "invalid_query"},
		{"GET", "api/collections/posts/records?order=" + q(`["a",1]`), 400, "bad_request"},
		{"GET", "api/collections/posts/records?order=score&after=" + absentID, 404, "cursor_not_found"},
		{"GET", "api/collections/posts/records?require_index=1&q=" + q(`{"field":"kind","op":"eq","value":"post"}`), 400, "no_index"},
		{"GET", "api/collections/posts/records?require_index=1&q=" + q(`{"field":"score","op":"eq","value":3}`), 200, ""},
		{"GET", "api/collections/posts/records/" + post, 200, ""},
		{"GET", "api/collections/posts/records/" + absentID, 404, "not_found"},
		{"GET", "api/collections/posts/records/nope", 400, "bad_request"},
		{"GET", "api/collections/posts/records/" + post + "?x=1", 400, "bad_request"},
		{"GET", "api/collections/nope/records/" + post, 404, "not_found"},
		{"HEAD", "api/collections/posts/records/" + post, 200, ""},
		{"GET", "api/collections/posts/explain", 200, ""},
		{"GET", "api/collections/posts/explain?q=" + q(`{"field":"score","op":"eq","value":3}`), 200, ""},
		{"GET", "api/collections/posts/explain?q=" + q(`{"op":"eq"}`), 400, "invalid_query"},
		{"GET", "api/collections/nope/explain", 404, "not_found"},
		{"PUT", "api/collections/posts/records/" + post, 403, "forbidden"},
		{"DELETE", "api/collections/posts/records/" + post, 403, "forbidden"},
		{"POST", "api/collections/posts/records/" + post, 405, "method_not_allowed"},
		{"POST", "api/collections", 405, "method_not_allowed"},
		{"DELETE", "api/collections/posts", 405, "method_not_allowed"},
		{"GET", "api", 404, "not_found"},
		{"GET", "favicon.ico", 404, "not_found"},
		{"GET", "api/collections/posts/other", 404, "not_found"},
	} {
		r := c.do(tc.method, tc.path, nil)
		if r.status != tc.status {
			t.Errorf("%s %s: status %d, want %d: %s", tc.method, tc.path, r.status, tc.status, r.body)
			continue
		}
		if ct := r.header.Get("Content-Type"); tc.method != "HEAD" && ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q", tc.method, tc.path, ct)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s %s: headers %v", tc.method, tc.path, r.header)
		}
		if tc.kind != "" {
			if got := r.errorKind(t); got != tc.kind {
				t.Errorf("%s %s: kind %q, want %q: %s", tc.method, tc.path, got, tc.kind, r.body)
			}
		}
		if tc.status == 405 && r.header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
		}
	}
}

func TestCollections(t *testing.T) {
	f := newFixture(t, 5, 3)
	c := f.serve(t)
	var list struct {
		Collections []map[string]any `json:"collections"`
	}
	c.get("api/collections").decode(t, &list)
	if len(list.Collections) != 3 {
		t.Fatalf("collections: %v", list.Collections)
	}
	byName := map[string]map[string]any{}
	for _, m := range list.Collections {
		byName[m["name"].(string)] = m
	}
	posts := byName["posts"]
	want := map[string]any{
		"name": "posts", "kind": "docs", "records": json.Number("5"),
		"first_id": f.postIDs[0].String(), "last_id": f.postIDs[4].String(),
		"first_time": "2024-05-01T12:00:00.000Z", "last_time": "2024-05-01T12:00:04.000Z",
	}
	for k, v := range want {
		if posts[k] != v {
			t.Errorf("posts %s = %v, want %v", k, posts[k], v)
		}
	}
	if b, _ := posts["bytes"].(json.Number).Int64(); b <= 0 {
		t.Errorf("posts bytes = %v", posts["bytes"])
	}
	if byName["events"]["kind"] != "log" || byName["jobs"]["kind"] != "queue" {
		t.Errorf("kinds: %v", byName)
	}
	var one map[string]any
	c.get("api/collections/posts").decode(t, &one)
	for k, v := range want {
		if one[k] != v {
			t.Errorf("GET posts: %s = %v, want %v", k, one[k], v)
		}
	}

	// An emptied collection still exists, with no ids or times.
	for _, id := range f.postIDs {
		if err := f.posts.Delete(id); err != nil {
			t.Fatal(err)
		}
	}
	one = nil
	c.get("api/collections/posts").decode(t, &one)
	if one["records"] != json.Number("0") || one["first_id"] != nil || one["last_time"] != nil {
		t.Errorf("emptied posts: %v", one)
	}
}

// TestRecordJSON checks that a record comes out as its line of a JSON
// lines export, typed values included.
func TestRecordJSON(t *testing.T) {
	f := newFixture(t, 0, 0)
	at := time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)
	rec, err := f.posts.Put(storh.Map{"n": int64(5), "f": 5.0, "at": at, "b": []byte("hi"), "u": uuidv7.MustParse(absentID), "s": "<&>"})
	if err != nil {
		t.Fatal(err)
	}
	var line bytes.Buffer
	if _, err := jsonl.Export(t.Context(), &line, f.posts, query.All()); err != nil {
		t.Fatal(err)
	}
	c := f.serve(t)
	got := c.get("api/collections/posts/records/" + rec.ID.String())
	if !bytes.Equal(got.body, line.Bytes()) {
		t.Errorf("GET record:\n%s\nexport:\n%s", got.body, line.Bytes())
	}
	p := c.get("api/collections/posts/records")
	want := `{"records":[` + strings.TrimSuffix(line.String(), "\n") + `],"next":""}` + "\n"
	if string(p.body) != want {
		t.Errorf("page:\n%s\nwant:\n%s", p.body, want)
	}
}

func TestToken(t *testing.T) {
	f := newFixture(t, 3, 0)
	c := f.serve(t, web.WithToken("s3cret"))
	for _, tc := range []struct {
		auth   string
		status int
	}{
		{"", 401},
		{"Bearer", 401},
		{"Bearer ", 401},
		{"Bearer s3cre", 401},
		{"Bearer s3cret2", 401},
		{"Basic s3cret", 401},
		{"Bearer s3cret", 200},
		{"bearer s3cret", 200},
	} {
		req, _ := http.NewRequest("GET", c.base+"api/collections", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("Authorization %q: %d, want %d", tc.auth, resp.StatusCode, tc.status)
		}
		if tc.status == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("Authorization %q: WWW-Authenticate %q", tc.auth, resp.Header.Get("WWW-Authenticate"))
		}
	}
	// The token is checked before routing: without it, even a missing
	// endpoint or collection says nothing but 401.
	for _, path := range []string{"nope", "api/collections/nope/records"} {
		if r := c.get(path); r.status != 401 || r.errorKind(t) != "unauthorized" {
			t.Errorf("GET %s without token: %d %s", path, r.status, r.body)
		}
	}
	c.token = "s3cret"
	if r := c.get("api/collections/posts/records"); r.status != 200 {
		t.Errorf("with token: %d %s", r.status, r.body)
	}
}

func TestWrites(t *testing.T) {
	f := newFixture(t, 5, 3)
	off := f.serve(t)
	c := f.serve(t, web.WithWrites())
	id := f.postIDs[2].String()
	path := "api/collections/posts/records/" + id

	// Writes off: nothing changes.
	if r := off.do("PUT", path, []byte(`{"slug":"x"}`)); r.status != 403 || r.errorKind(t) != "forbidden" {
		t.Errorf("PUT with writes off: %d %s", r.status, r.body)
	}
	if r := off.do("DELETE", path, nil); r.status != 403 {
		t.Errorf("DELETE with writes off: %d %s", r.status, r.body)
	}
	if n, _ := f.posts.Count(); n != 5 {
		t.Fatalf("count %d after refused writes", n)
	}

	// Replace a record with typed values; GET gives back what PUT stored.
	r := c.do("PUT", path, []byte(`{"slug":"new","n":5,"f":5.0,"at":{"$date":"2024-05-01T12:00:00.5Z"}}`))
	if r.status != 200 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	got, err := f.posts.Get(f.postIDs[2])
	if err != nil {
		t.Fatal(err)
	}
	d := got.Data()
	if d["slug"] != "new" || d["n"] != int64(5) || d["f"] != 5.0 || !d["at"].(time.Time).Equal(time.Date(2024, 5, 1, 12, 0, 0, 5e8, time.UTC)) {
		t.Errorf("stored %v", d)
	}
	if g := c.get(path); !bytes.Equal(g.body, r.body) {
		t.Errorf("GET %s after PUT %s", g.body, r.body)
	}
	// The record as GET gives it can be PUT back as it is.
	if r2 := c.do("PUT", path, r.body); r2.status != 200 || !bytes.Equal(r2.body, r.body) {
		t.Errorf("PUT of GET's record: %d %s", r2.status, r2.body)
	}
	// A new id in a Docs collection is stored.
	newID := uuidv7.New().String()
	if r := c.do("PUT", "api/collections/posts/records/"+newID, []byte(`{"slug":"fresh"}`)); r.status != 200 {
		t.Errorf("PUT new: %d %s", r.status, r.body)
	}

	before := snapshot(t, f)
	for _, tc := range []struct {
		method, path, body string
		status             int
		kind               string
	}{
		{"PUT", path, `{"slug":"p000"}`, 409, "unique_violation"},
		{"PUT", path, `[1]`, 400, "bad_request"},
		{"PUT", path, `{"a":1,"a":2}`, 400, "bad_request"},
		{"PUT", path, `{"a":`, 400, "bad_request"},
		{"PUT", path, ``, 400, "bad_request"},
		{"PUT", path, `{"id":"` + f.postIDs[1].String() + `","data":{}}`, 400, "bad_request"},
		{"PUT", path, `{"d":{"$date":"nope"}}`, 400, "bad_request"},
		{"PUT", path + "?x=1", `{}`, 400, "bad_request"},
		{"PUT", "api/collections/posts/records/nope", `{}`, 400, "bad_request"},
		{"PUT", "api/collections/nope/records/" + id, `{}`, 404, "not_found"},
		{"PUT", "api/collections/jobs/records/" + id, `{}`, 409, "wrong_kind"},
		{"PUT", "api/collections/events/records/" + f.eventIDs[0].String(), `{"n":1}`, 409, "exists"},
		{"DELETE", "api/collections/events/records/" + f.eventIDs[0].String(), ``, 405, "append_only"},
		{"DELETE", "api/collections/posts/records/nope", ``, 400, "bad_request"},
		{"DELETE", "api/collections/nope/records/" + id, ``, 404, "not_found"},
		{"PUT", path, `{"deep":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, 400, "bad_request"},
	} {
		r := c.do(tc.method, tc.path, []byte(tc.body))
		if r.status != tc.status || r.errorKind(t) != tc.kind {
			t.Errorf("%s %s %s: %d %s, want %d %s", tc.method, tc.path, tc.body, r.status, r.body, tc.status, tc.kind)
		}
	}
	if after := snapshot(t, f); after != before {
		t.Errorf("bad requests changed the database:\n%s\n%s", before, after)
	}

	// A log takes a new id (append) but no delete.
	if r := c.do("PUT", "api/collections/events/records/"+uuidv7.New().String(), []byte(`{"n":99}`)); r.status != 200 {
		t.Errorf("PUT new log record: %d %s", r.status, r.body)
	}
	if r := c.do("DELETE", path, nil); r.status != 204 || len(r.body) != 0 {
		t.Errorf("DELETE: %d %s", r.status, r.body)
	}
	if _, err := f.posts.Get(f.postIDs[2]); !errors.Is(err, storh.ErrNotFound) {
		t.Errorf("Get after DELETE: %v", err)
	}
	// Deleting what is not there succeeds, as Docs.Delete does.
	if r := c.do("DELETE", path, nil); r.status != 204 {
		t.Errorf("second DELETE: %d %s", r.status, r.body)
	}
}

// TestPutTime: a PUT's record may carry its time, as GET gives it, but the
// id carries the time, so a time that contradicts the id is refused, with
// nothing written, rather than silently dropped.
func TestPutTime(t *testing.T) {
	f := newFixture(t, 3, 1)
	c := f.serve(t, web.WithWrites())
	post := f.postIDs[1]
	fresh := uuidv7.New()
	idTime := func(id uuidv7.UUID) string { return id.Time().UTC().Format(jsonl.TimeLayout) }
	path := func(coll string, id uuidv7.UUID) string { return "api/collections/" + coll + "/records/" + id.String() }
	before := snapshot(t, f)
	for _, tc := range []struct{ name, path, body, msg string }{
		{"a time a second off", path("posts", post),
			`{"id":"` + post.String() + `","time":"` + post.Time().Add(time.Second).UTC().Format(jsonl.TimeLayout) + `","data":{"slug":"x"}}`,
			"is not the creation time of id " + post.String()},
		{"a time a millisecond off, without an id", path("posts", post),
			`{"time":"` + post.Time().Add(time.Millisecond).UTC().Format(jsonl.TimeLayout) + `","data":{"slug":"x"}}`,
			"is not the creation time of id"},
		{"a time within the millisecond but not on it", path("posts", post),
			`{"time":"` + post.Time().Add(time.Microsecond).UTC().Format(time.RFC3339Nano) + `","data":{"slug":"x"}}`,
			"is not the creation time of id"},
		{"an appended log record", path("events", fresh),
			`{"time":"2001-01-01T00:00:00.000Z","data":{"n":7}}`, "is not the creation time of id " + fresh.String()},
		{"a time that is not one", path("posts", post), `{"time":"yesterday","data":{"slug":"x"}}`, "is not an RFC 3339 time"},
		{"a time that is not a string", path("posts", post), `{"time":1714564800000,"data":{"slug":"x"}}`, "time must be a string"},
		{"a $date that is not the id's", path("posts", post), `{"time":{"$date":"2001-01-01T00:00:00Z"},"data":{"slug":"x"}}`, "is not the creation time of id"},
	} {
		r := c.do("PUT", tc.path, []byte(tc.body))
		if r.status != 400 || r.errorKind(t) != "bad_request" || !strings.Contains(string(r.body), tc.msg) {
			t.Errorf("%s: PUT %s: %d %s, want 400 bad_request saying %q", tc.name, tc.body, r.status, r.body, tc.msg)
		}
	}
	if after := snapshot(t, f); after != before {
		t.Errorf("refused PUTs changed the database:\n%s\n%s", before, after)
	}

	// The id's own time, in any zone or as a $date, is taken; a "time" among
	// other fields is data, not the record's time.
	for _, body := range []string{
		`{"id":"` + post.String() + `","time":"` + idTime(post) + `","data":{"slug":"same"}}`,
		`{"time":"` + post.Time().In(time.FixedZone("", 2*3600)).Format(time.RFC3339Nano) + `","data":{"slug":"zoned"}}`,
		`{"time":{"$date":"` + idTime(post) + `"},"data":{"slug":"dated"}}`,
	} {
		if r := c.do("PUT", path("posts", post), []byte(body)); r.status != 200 {
			t.Errorf("PUT %s: %d %s", body, r.status, r.body)
		}
	}
	r := c.do("PUT", path("posts", post), []byte(`{"time":"2001-01-01T00:00:00Z","slug":"data"}`))
	if r.status != 200 {
		t.Fatalf("PUT of data with a time field: %d %s", r.status, r.body)
	}
	if got, err := f.posts.Get(post); err != nil || got.Data()["time"] != "2001-01-01T00:00:00Z" {
		t.Errorf("a time field in the data: stored %v, %v", got.Data(), err)
	}
}

// snapshot is every record of the fixture's collections, as JSON lines.
func snapshot(t testing.TB, f *fixture) string {
	t.Helper()
	var b bytes.Buffer
	for _, c := range []storh.Collection{f.posts, f.events} {
		if _, err := jsonl.Export(t.Context(), &b, c, query.All()); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func TestLimits(t *testing.T) {
	f := newFixture(t, 12, 0)
	c := f.serve(t, web.WithWrites(), web.WithMaxBody(100), web.WithMaxPage(5))
	path := "api/collections/posts/records/" + f.postIDs[0].String()
	before := snapshot(t, f)
	big := []byte(`{"s":"` + strings.Repeat("x", 100) + `"}`)
	if r := c.do("PUT", path, big); r.status != 413 || r.errorKind(t) != "too_large" {
		t.Errorf("big body: %d %s", r.status, r.body)
	}
	if snapshot(t, f) != before {
		t.Error("a refused body changed the database")
	}
	if r := c.do("PUT", path, big[:90]); r.status != 400 {
		t.Errorf("body under the limit: %d %s", r.status, r.body)
	}

	// A limit above the page size is lowered to it; no limit is a full page.
	for _, lim := range []string{"", "&limit=6", "&limit=1000000", "&limit=99999999999999999999999"} {
		p := c.page("api/collections/posts/records?newest=0" + lim)
		if len(p.Records) != 5 || p.Next != p.Records[4].ID {
			t.Errorf("limit %q: %d records, next %q", lim, len(p.Records), p.Next)
		}
	}
	if p := c.page("api/collections/posts/records?limit=3"); len(p.Records) != 3 {
		t.Errorf("limit=3: %d records", len(p.Records))
	}
	if r := c.get("api/collections/posts/records?limit=-99999999999999999999999"); r.status != 400 {
		t.Errorf("huge negative limit: %d", r.status)
	}
	if r := c.get("api/collections/posts/records?q=" + url.QueryEscape(strings.Repeat(" ", query.MaxCondBytes+1))); r.status != 400 {
		t.Errorf("huge q: %d", r.status)
	}
}

func TestTimeout(t *testing.T) {
	f := newFixture(t, 3, 0)
	c := f.serve(t, web.WithTimeout(time.Nanosecond))
	r := c.get("api/collections/posts/records")
	if r.status != 503 || r.errorKind(t) != "timeout" {
		t.Errorf("records past the deadline: %d %s", r.status, r.body)
	}
	if r := c.get("api/collections/posts/explain"); r.status != 503 {
		t.Errorf("explain past the deadline: %d %s", r.status, r.body)
	}
	for _, path := range []string{"api/collections/posts/aggregate?agg=count:n", "api/collections/posts/aggregate?agg=count:n&explain=1"} {
		if r := c.get(path); r.status != 503 || r.errorKind(t) != "timeout" {
			t.Errorf("%s past the deadline: %d %s", path, r.status, r.body)
		}
	}
}

func TestClosed(t *testing.T) {
	f := newFixture(t, 3, 0)
	c := f.serve(t)
	f.db.Close()
	for _, path := range []string{"api/collections", "api/collections/posts", "api/collections/posts/records"} {
		if r := c.get(path); r.status != 503 || r.errorKind(t) != "unavailable" {
			t.Errorf("GET %s on a closed database: %d %s", path, r.status, r.body)
		}
	}
}

func TestReadOnlyDatabase(t *testing.T) {
	f := newFixture(t, 3, 0)
	path := f.db.Path()
	f.db.Close()
	db, err := storh.Open(path, storh.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := httptest.NewServer(web.Handler(db, web.WithWrites()))
	defer srv.Close()
	c := &client{t: t, base: srv.URL + "/"}
	if r := c.do("PUT", "api/collections/posts/records/"+f.postIDs[0].String(), []byte(`{}`)); r.status != 403 || r.errorKind(t) != "read_only" {
		t.Errorf("PUT on a read-only database: %d %s", r.status, r.body)
	}
	if p := c.page("api/collections/posts/records"); len(p.Records) != 3 {
		t.Errorf("read-only page: %d records", len(p.Records))
	}
}

// TestMount serves the handler under a prefix, stripped with and without
// its final slash.
func TestMount(t *testing.T) {
	f := newFixture(t, 4, 0)
	ab, err := f.db.Docs("a/b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ab.Put(storh.Map{"x": 1}); err != nil {
		t.Fatal(err)
	}
	for _, strip := range []string{"/debug/storh", "/debug/storh/"} {
		mux := http.NewServeMux()
		mux.Handle("/debug/storh/", http.StripPrefix(strip, web.Handler(f.db, web.WithWrites())))
		srv := httptest.NewServer(mux)
		c := &client{t: t, base: srv.URL + "/debug/storh/"}
		if p := c.page("api/collections/posts/records?limit=2"); len(p.Records) != 2 || p.Next == "" {
			t.Errorf("strip %q: page %+v", strip, p)
		}
		if r := c.get("api/collections/posts/records/" + f.postIDs[1].String()); r.status != 200 {
			t.Errorf("strip %q: record %d %s", strip, r.status, r.body)
		}
		if r := c.do("DELETE", "api/collections/posts/records/"+f.postIDs[3].String(), nil); r.status != 204 {
			t.Errorf("strip %q: DELETE %d %s", strip, r.status, r.body)
		}
		if r := c.get("api/nope"); r.status != 404 || r.errorKind(t) != "not_found" {
			t.Errorf("strip %q: unknown endpoint %d %s", strip, r.status, r.body)
		}
		// An escaped slash in a name survives the stripping.
		if r := c.get("api/collections/a%2Fb"); r.status != 200 {
			t.Errorf("strip %q: collection a/b: %d %s", strip, r.status, r.body)
		}
		srv.Close()
	}
}

// TestNames reaches collections whose names need escaping in a path.
func TestNames(t *testing.T) {
	f := newFixture(t, 0, 0)
	for _, name := range []string{"a/b", "with space", "ünï", "50%", "a?b"} {
		d, err := f.db.Docs(name)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := d.Put(storh.Map{"name": name})
		if err != nil {
			t.Fatal(err)
		}
		c := f.serve(t)
		p := c.page("api/collections/" + url.PathEscape(name) + "/records")
		if len(p.Records) != 1 || p.Records[0].ID != rec.ID.String() {
			t.Errorf("%q: %+v", name, p)
		}
		var stats map[string]any
		c.get("api/collections/"+url.PathEscape(name)).decode(t, &stats)
		if stats["name"] != name {
			t.Errorf("%q: stats %v", name, stats)
		}
	}
}

func TestExplain(t *testing.T) {
	f := newFixture(t, 30, 0)
	c := f.serve(t)
	var plan map[string]any
	c.get("api/collections/posts/explain?q="+url.QueryEscape(`{"field":"score","op":"eq","value":3}`)).decode(t, &plan)
	want, err := f.posts.Explain(query.All().Where(query.Field("score").Eq(3)).Limit(web.DefaultMaxPage))
	if err != nil {
		t.Fatal(err)
	}
	if plan["text"] != want.String() || plan["query"] != want.Query || plan["returned"] != json.Number(itoa(want.Returned)) {
		t.Errorf("explain %v, want %+v", plan, want)
	}
	if idx, _ := plan["indexes"].([]any); len(idx) != 1 || idx[0] != "score" {
		t.Errorf("indexes %v", plan["indexes"])
	}
	c.get("api/collections/posts/explain").decode(t, &plan)
	if idx, ok := plan["indexes"].([]any); !ok || len(idx) != 0 {
		t.Errorf("scan: indexes %#v", plan["indexes"])
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// The handler serves the web page at its root, without the token (the
// page is where a person types it, and holds no data), and nothing else
// of the API without it.
func TestPage(t *testing.T) {
	f := newFixture(t, 3, 0)
	c := f.serve(t, web.WithToken("s3cret"))
	for _, path := range []string{"", "index.html", "app.js", "style.css"} {
		r := c.get(path)
		if r.status != http.StatusOK || r.header.Get("Content-Security-Policy") != ui.ContentSecurityPolicy {
			t.Errorf("GET %q without the token: %d, headers %v", path, r.status, r.header)
		}
	}
	if r := c.get(""); !bytes.Contains(r.body, []byte("<!doctype html>")) {
		t.Errorf("GET the root: not the page: %.80s", r.body)
	}
	for _, path := range []string{"api/collections", "app.js/../api/collections", "index.html?x=1/api"} {
		r := c.get(path)
		if path == "index.html?x=1/api" {
			if r.status != http.StatusOK || !bytes.HasPrefix(r.body, []byte("<!doctype html>")) {
				t.Errorf("GET %q: %d %.80s", path, r.status, r.body)
			}
			continue
		}
		if r.status != http.StatusUnauthorized {
			t.Errorf("GET %q without the token: %d, want 401", path, r.status)
		}
	}
	if r := c.do("PUT", "index.html", []byte("x")); r.status != http.StatusMethodNotAllowed {
		t.Errorf("PUT the page: %d, want 405", r.status)
	}
}

// TestAllowedHosts: with WithAllowedHosts, a request for another Host (a
// page that rebound its own name to this machine) gets 421 and changes
// nothing, the page included; loopback names and addresses and the hosts
// given, with any port, are served. Without the option every Host is.
func TestAllowedHosts(t *testing.T) {
	f := newFixture(t, 3, 0)
	put := func(h http.Handler, host string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest("PUT", "/api/collections/posts/records/"+uuidv7.New().String(), strings.NewReader(`{"host":"`+host+`"}`))
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	open := web.Handler(f.db, web.WithWrites())
	if rec := put(open, "rebind.attacker.example"); rec.Code != 200 {
		t.Errorf("without WithAllowedHosts, another host: %d %s", rec.Code, rec.Body)
	}

	h := web.Handler(f.db, web.WithWrites(), web.WithAllowedHosts("App.Example:9000", "[fd00::7]"))
	loopbackOnly := web.Handler(f.db, web.WithWrites(), web.WithAllowedHosts())
	before := snapshot(t, f)
	for _, host := range []string{"rebind.attacker.example", "rebind.attacker.example:7070", "localhost.attacker.example",
		"app.example.attacker.example", "127.0.0.1.nip.io:7070", "10.0.0.1:7070", "[fd00::8]:7070", ""} {
		rec := put(h, host)
		var e struct {
			Error struct{ Kind, Message string }
		}
		json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != http.StatusMisdirectedRequest || e.Error.Kind != web.KindMisdirected ||
			!strings.Contains(e.Error.Message, "it serves localhost, loopback addresses and app.example, fd00::7") {
			t.Errorf("PUT for host %q: %d %s, want 421 misdirected naming the hosts served", host, rec.Code, rec.Body)
		}
		for _, path := range []string{"/", "/app.js", "/api/collections"} {
			req := httptest.NewRequest("GET", path, nil)
			req.Host = host
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusMisdirectedRequest {
				t.Errorf("GET %s for host %q: %d, want 421", path, host, rec.Code)
			}
		}
	}
	if rec := put(loopbackOnly, "app.example"); rec.Code != http.StatusMisdirectedRequest ||
		!strings.Contains(rec.Body.String(), "localhost and loopback addresses only") {
		t.Errorf("WithAllowedHosts() and host app.example: %d %s", rec.Code, rec.Body)
	}
	if after := snapshot(t, f); after != before {
		t.Errorf("requests for other hosts changed the database:\n%s\n%s", before, after)
	}

	for _, host := range []string{"localhost", "localhost:7070", "LocalHost:1", "127.0.0.1", "127.0.0.1:7070", "127.9.9.9:80",
		"[::1]:7070", "[::1]", "::1", "[::ffff:127.0.0.1]:80", "app.example", "APP.example:8443", "[fd00::7]:7070"} {
		if rec := put(h, host); rec.Code != 200 {
			t.Errorf("PUT for host %q: %d %s", host, rec.Code, rec.Body)
		}
	}
	if rec := put(loopbackOnly, "127.0.0.1:7070"); rec.Code != 200 {
		t.Errorf("WithAllowedHosts() and host 127.0.0.1:7070: %d %s", rec.Code, rec.Body)
	}
}
