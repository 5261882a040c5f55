package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/web"
)

// BenchmarkChangesRead reads 10,000 records over HTTP as a collection's
// changes (follow=false, from the first) and, as the peer, as an export of
// the same records: what the feed's stream costs per record beside the
// plainest stream of the API. b.N counts records.
func BenchmarkChangesRead(b *testing.B) {
	const n = 10_000
	db, err := storh.Open(filepath.Join(b.TempDir(), "db"), storh.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	notes, err := db.Docs("notes", storh.WithChangeFeed(2*n))
	if err != nil {
		b.Fatal(err)
	}
	items := make([]any, n)
	for i := range items {
		items[i] = storh.Map{"n": int64(i), "title": "a note of some length " + strconv.Itoa(i), "tags": []any{"a", "b"}}
	}
	if _, err := notes.PutMany(items); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(web.Handler(db))
	defer srv.Close()
	read := func(b *testing.B, path string) {
		for done := 0; done < b.N; done += n {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("GET %s: %d", path, resp.StatusCode)
			}
		}
	}
	b.Run("changes", func(b *testing.B) {
		b.ReportAllocs()
		read(b, "/api/collections/notes/changes?after=0&follow=false")
	})
	b.Run("export", func(b *testing.B) {
		b.ReportAllocs()
		read(b, "/api/collections/notes/export")
	})
}
