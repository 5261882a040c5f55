package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	_ "github.com/storhdb/storh-go/storh/postgres"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// TestMain runs the tests with the PostgreSQL server of pgtest, and
// rapid's property tests at their short size outside the long run.
func TestMain(m *testing.M) {
	flag.Parse()
	testkit.ShortRapid()
	os.Exit(pgtest.Run(m))
}

// backends runs test on a database file and on PostgreSQL.
func backends(t *testing.T, test func(t *testing.T, path string)) {
	t.Run("file", func(t *testing.T) { test(t, filepath.Join(t.TempDir(), "db")) })
	t.Run("postgres", func(t *testing.T) { test(t, pgtest.URL(t)) })
}

// newClient serves f's database and returns a client of it.
func newClient(t *testing.T, f *fixture, opts ...web.Option) *web.Client {
	t.Helper()
	srv := httptest.NewServer(web.Handler(f.db, opts...))
	t.Cleanup(srv.Close)
	c, err := web.NewClient(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func recordIDs(t *testing.T, recs []json.RawMessage) []uuidv7.UUID {
	t.Helper()
	out := make([]uuidv7.UUID, len(recs))
	for i, r := range recs {
		var rec struct{ ID uuidv7.UUID }
		if err := json.Unmarshal(r, &rec); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		out[i] = rec.ID
	}
	return out
}

// TestClientReads checks every read of the client against what storh
// gives on the database itself.
func TestClientReads(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 30, 7)
		c := newClient(t, f, web.WithMaxPage(4))
		ctx := context.Background()

		st, err := c.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if onPG := st.Backend == "postgresql"; onPG != (st.Reruns != nil) || onPG != (st.FileSize == nil) {
			t.Errorf("stats of backend %s: reruns %v, file size %v; want only the backend's own", st.Backend, st.Reruns, st.FileSize)
		}
		colls, err := c.Collections(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want, err := f.db.Collections()
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range [][]web.Collection{st.Collections, colls} {
			if len(got) != len(want) {
				t.Fatalf("%d collections, want %d", len(got), len(want))
			}
			for i := range got {
				if got[i].Name != want[i].Name || got[i].Kind != want[i].Kind || got[i].Records != want[i].Records {
					t.Errorf("collection %+v, want %+v", got[i], want[i])
				}
			}
		}

		rec, err := c.Get(ctx, "posts", f.postIDs[3])
		if err != nil || !strings.HasPrefix(string(rec), `{"id":"`+f.postIDs[3].String()+`"`) || strings.HasSuffix(string(rec), "\n") {
			t.Errorf("Get: %s, %v", rec, err)
		}
		if _, err := c.Get(ctx, "posts", f.eventIDs[0]); !errors.Is(err, storh.ErrNotFound) {
			t.Errorf("Get of an absent id: %v, want ErrNotFound", err)
		}
		if _, err := c.Get(ctx, "nope", f.postIDs[0]); !errors.Is(err, storh.ErrNotFound) {
			t.Errorf("Get in an absent collection: %v, want ErrNotFound", err)
		}

		// Pages, continued with Next, walk the whole selection.
		cond, err := query.Parse("kind in [post, page] and score >= 3")
		if err != nil {
			t.Fatal(err)
		}
		q := query.All().Where(cond).OrderBy("score", query.Desc)
		wantIDs := ids(t, f.posts, q)
		sel := web.Selection{Where: []query.Cond{cond}, Order: []string{"score"}, Desc: true}
		var got []uuidv7.UUID
		for pages := 0; ; pages++ {
			page, err := c.Records(ctx, "posts", sel, 100)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, recordIDs(t, page.Records)...)
			if page.Next == "" {
				break
			}
			if pages > len(wantIDs) {
				t.Fatal("the pages do not end")
			}
			sel.After = uuidv7.MustParse(page.Next)
		}
		if !slices.Equal(got, wantIDs) {
			t.Errorf("pages give %v\nwant %v", got, wantIDs)
		}
		sel.After = uuidv7.UUID{}

		n, err := c.Count(ctx, "posts", sel, 0)
		if err != nil || n != len(wantIDs) {
			t.Errorf("Count: %d, %v; want %d", n, err, len(wantIDs))
		}
		from, until := int64(startMs+2000), int64(startMs+4000)
		if n, err := c.Count(ctx, "events", web.Selection{FromMs: &from, UntilMs: &until}, 0); err != nil || n != 3 {
			t.Errorf("Count of a time window: %d, %v; want 3", n, err)
		}
		plan, err := c.Explain(ctx, "posts", sel, 2)
		if err != nil || plan.Returned != 2 || !plan.Sorted && len(plan.Indexes) == 0 {
			t.Errorf("Explain: %+v, %v", plan, err)
		}
		if _, err := c.Count(ctx, "posts", web.Selection{Where: []query.Cond{query.Field("kind").Eq("post")}, RequireIndex: true}, 0); !errors.Is(err, storh.ErrNoIndex) {
			t.Errorf("require_index without an index: %v, want ErrNoIndex", err)
		}
		if _, err := c.Records(ctx, "posts", web.Selection{Order: []string{"score"}, After: f.eventIDs[0]}, 0); !errors.Is(err, storh.ErrCursorNotFound) {
			t.Errorf("a cursor that is not there: %v, want ErrCursorNotFound", err)
		}

		body, err := c.Export(ctx, "events", web.Selection{Newest: true}, 5)
		if err != nil {
			t.Fatal(err)
		}
		var lines []json.RawMessage
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			lines = append(lines, json.RawMessage(slices.Clone(sc.Bytes())))
		}
		body.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if got, want := recordIDs(t, lines), reversed(f.eventIDs)[:5]; !slices.Equal(got, want) {
			t.Errorf("Export gives %v, want %v", got, want)
		}

		ixs, err := c.Indexes(ctx, "posts")
		if err != nil || len(ixs) != 2 {
			t.Fatalf("Indexes: %+v, %v", ixs, err)
		}
		var paths []string
		for _, ix := range ixs {
			paths = append(paths, strings.Join(ix.Paths[0], "."))
		}
		slices.Sort(paths)
		if !slices.Equal(paths, []string{"score", "slug"}) {
			t.Errorf("Indexes on %v, want score and slug", paths)
		}
		qc, err := c.Queue(ctx, "jobs")
		if err != nil || qc.Pending != 1 || qc.Name != "jobs" {
			t.Errorf("Queue: %+v, %v", qc, err)
		}
		if _, err := c.Queue(ctx, "posts"); !errors.Is(err, storh.ErrWrongKind) {
			t.Errorf("Queue of a Docs collection: %v, want ErrWrongKind", err)
		}

		var problems int
		rep, err := c.Verify(ctx, nil, func(web.Problem) { problems++ })
		if err != nil || problems != 0 || rep.Problems != 0 || !rep.OK || rep.Records < 37 {
			t.Errorf("Verify: %+v, %d problems, %v", rep, problems, err)
		}
	})
}

// TestClientWrites checks import and delete through the client, and the
// errors of writes mapped back to storh's sentinels.
func TestClientWrites(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 5, 2)
		c := newClient(t, f, web.WithWrites())
		ctx := context.Background()

		body, err := c.Export(ctx, "posts", web.Selection{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := c.Import(ctx, "copy", "docs", body)
		body.Close()
		if err != nil || rep.Imported != 5 || rep.Inserted != 5 || rep.Kind != "docs" {
			t.Fatalf("Import: %+v, %v", rep, err)
		}
		copied, err := f.db.Docs("copy", storh.WithoutCreate())
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(t, copied, query.All()); !slices.Equal(got, f.postIDs) {
			t.Errorf("the copy holds %v, want %v", got, f.postIDs)
		}

		lines := `{"data":{"slug":"new"}}` + "\n" + `{"data":{"slug":"p001"}}` + "\n"
		_, err = c.Import(ctx, "posts", "", strings.NewReader(lines))
		var we *web.Error
		if !errors.Is(err, storh.ErrUniqueViolation) || !errors.As(err, &we) || we.Line != 2 {
			t.Errorf("an import that a unique index refuses: %v, want ErrUniqueViolation at line 2", err)
		}
		if _, err := c.Import(ctx, "posts", "", strings.NewReader("{\n")); !errors.Is(err, storh.ErrInvalidData) || !errors.As(err, &we) || we.Line != 1 {
			t.Errorf("an import of a bad line: %v, want ErrInvalidData at line 1", err)
		}
		if n, err := f.posts.Count(); err != nil || n != 5 {
			t.Errorf("after refused imports posts holds %d records (%v), want 5", n, err)
		}

		if err := c.Delete(ctx, "posts", f.postIDs[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, "posts", f.postIDs[0]); !errors.Is(err, storh.ErrNotFound) {
			t.Errorf("Get after Delete: %v, want ErrNotFound", err)
		}
		if err := c.Delete(ctx, "events", f.eventIDs[0]); !errors.Is(err, storh.ErrWrongKind) {
			t.Errorf("Delete in a log: %v, want ErrWrongKind", err)
		}

		ro := newClient(t, f)
		if err := ro.Delete(ctx, "posts", f.postIDs[1]); !errors.Is(err, storh.ErrReadOnly) || !errors.As(err, &we) || we.Kind != web.KindForbidden {
			t.Errorf("Delete without WithWrites: %v, want ErrReadOnly", err)
		}
	})
}

// TestClientTail follows a log from its first record until the server's
// tail limit ends the stream.
func TestClientTail(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 1, 6)
		c := newClient(t, f, web.WithTailLimit(300*time.Millisecond))
		var got []uuidv7.UUID
		started, err := c.Tail(context.Background(), "events", "0", uuidv7.UUID{}, func(rec json.RawMessage, more bool) error {
			got = append(got, recordIDs(t, []json.RawMessage{rec})...)
			return nil
		})
		var we *web.Error
		if !started || !errors.As(err, &we) || we.Kind != web.KindTimeout {
			t.Errorf("Tail ended with %v (started %v), want the tail limit's timeout", err, started)
		}
		if !slices.Equal(got, f.eventIDs) {
			t.Errorf("Tail gave %v, want %v", got, f.eventIDs)
		}
		// Resuming after the third record gives the rest.
		got = got[:0]
		c.Tail(context.Background(), "events", "0", f.eventIDs[2], func(rec json.RawMessage, more bool) error {
			got = append(got, recordIDs(t, []json.RawMessage{rec})...)
			return nil
		})
		if !slices.Equal(got, f.eventIDs[3:]) {
			t.Errorf("Tail after Last-Event-ID gave %v, want %v", got, f.eventIDs[3:])
		}
		stop := errors.New("enough")
		if _, err := c.Tail(context.Background(), "events", "0", uuidv7.UUID{}, func(json.RawMessage, bool) error { return stop }); !errors.Is(err, stop) {
			t.Errorf("Tail whose callback fails: %v, want that error", err)
		}
	})
}

// TestClientErrors checks the client's own errors and those of the
// handler's guards.
func TestClientErrors(t *testing.T) {
	for _, bad := range []string{"", "127.0.0.1:7070", "ftp://x", "http://"} {
		if _, err := web.NewClient(bad, ""); err == nil {
			t.Errorf("NewClient(%q) = nil error", bad)
		}
	}
	f := newFixture(t, 2, 1)
	srv := httptest.NewServer(web.Handler(f.db, web.WithToken("s3cret")))
	defer srv.Close()
	ctx := context.Background()
	c, err := web.NewClient(srv.URL+"/", "")
	if err != nil {
		t.Fatal(err)
	}
	var we *web.Error
	if _, err := c.Stats(ctx); !errors.As(err, &we) || we.Kind != web.KindUnauthorized || we.Status != 401 {
		t.Errorf("Stats without the token: %v, want unauthorized", err)
	}
	c, _ = web.NewClient(srv.URL, "s3cret")
	if _, err := c.Stats(ctx); err != nil {
		t.Errorf("Stats with the token: %v", err)
	}
	if _, err := c.Records(ctx, "posts", web.Selection{Where: []query.Cond{query.Field("score").Gt(1)}, Order: []string{""}}, 0); !errors.Is(err, storh.ErrInvalidQuery) {
		t.Errorf("an empty order path: %v, want ErrInvalidQuery", err)
	}
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	c, _ = web.NewClient(other.URL, "")
	if _, err := c.Stats(ctx); !errors.Is(err, web.ErrNotAPI) {
		t.Errorf("a server that is not the API: %v, want ErrNotAPI", err)
	}
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	c, _ = web.NewClient(srv.URL, "s3cret")
	if _, err := c.Stats(ctx); !errors.Is(err, storh.ErrClosed) {
		t.Errorf("Stats of a closed database: %v, want ErrClosed", err)
	}
}

// endlessLine answers with a stream whose line never ends, as a server
// that is not storh's (or a broken one) may send.
func endlessLine(prefix, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write([]byte(prefix))
		chunk := []byte(strings.Repeat("x", 1<<20))
		for {
			if _, err := w.Write(chunk); err != nil || r.Context().Err() != nil {
				return
			}
		}
	})
}

// TestClientBoundsLines: the client reads the lines of a tail or a verify
// up to the longest a record's JSON can take, and fails with ErrAnswer past
// it, rather than keep reading into memory what a server sends without end.
func TestClientBoundsLines(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, prefix, contentType string
		call                      func(*web.Client) error
	}{
		{"tail", ": start\n\ndata: ", "text/event-stream", func(c *web.Client) error {
			_, err := c.Tail(ctx, "events", "0", uuidv7.UUID{}, func(json.RawMessage, bool) error { return nil })
			return err
		}},
		{"verify", "", "application/x-ndjson", func(c *web.Client) error {
			_, err := c.Verify(ctx, nil, func(web.Problem) {})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(endlessLine(tc.prefix, tc.contentType))
			defer srv.Close()
			c, err := web.NewClient(srv.URL, "")
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.call(c); !errors.Is(err, web.ErrAnswer) {
				t.Fatalf("a line without end: %v, want ErrAnswer", err)
			}
		})
	}
}
