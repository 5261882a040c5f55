package web_test

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// walk follows next from page to page and returns every id seen, failing
// on a page that comes back twice.
func walk(t *testing.T, c *client, base string, newest bool) []uuidv7.UUID {
	t.Helper()
	var all []uuidv7.UUID
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("%s: no end after 1000 pages", base)
		}
		path := base
		if cursor != "" {
			key := "after"
			if newest {
				key = "before"
			}
			path += "&" + key + "=" + cursor
		}
		p := c.page(path)
		all = append(all, p.ids(t)...)
		if p.Next == "" {
			return all
		}
		if p.Next != p.Records[len(p.Records)-1].ID {
			t.Fatalf("%s: next %s is not the page's last id", path, p.Next)
		}
		cursor = p.Next
	}
}

func TestPaging(t *testing.T) {
	f := newFixture(t, 53, 20)
	c := f.serve(t)
	for _, limit := range []int{1, 7, 53, 60} {
		base := fmt.Sprintf("api/collections/posts/records?limit=%d", limit)
		if got := walk(t, c, base, false); !slices.Equal(got, f.postIDs) {
			t.Errorf("limit %d, oldest first: %d ids, want the %d of the collection", limit, len(got), len(f.postIDs))
		}
		if got := walk(t, c, base+"&newest=1", true); !slices.Equal(got, reversed(f.postIDs)) {
			t.Errorf("limit %d, newest first: %d ids", limit, len(got))
		}
	}
	// A full last page has no next: the handler reads one record ahead.
	if p := c.page("api/collections/posts/records?limit=53"); p.Next != "" {
		t.Errorf("exact page: next %q", p.Next)
	}

	// Keyset pages in a field's order, both ways, give exactly what storh
	// gives for the same order.
	for _, order := range []string{"score", "-score", "ratio", "-author.name", `["kind"]`} {
		q := query.All()
		switch order {
		case "score":
			q = q.OrderBy("score", query.Asc)
		case "-score":
			q = q.OrderBy("score", query.Desc)
		case "ratio":
			q = q.OrderBy("ratio", query.Asc)
		case "-author.name":
			q = q.OrderBy("author.name", query.Desc)
		case `["kind"]`:
			q = q.OrderByField(query.FieldPath("kind"), query.Asc)
		}
		want := ids(t, f.posts, q)
		base := "api/collections/posts/records?limit=6&order=" + url.QueryEscape(order)
		if got := walk(t, c, base, false); !slices.Equal(got, want) {
			t.Errorf("order %s: %v\nwant %v", order, got, want)
		}
		if got := walk(t, c, base+"&newest=1", true); !slices.Equal(got, reversed(want)) {
			t.Errorf("order %s, newest first: %v\nwant %v", order, got, reversed(want))
		}
	}
}

// TestTimeWindow reads windows of the seeded records, whose ids are one
// second apart from startMs, in both forms of time.
func TestTimeWindow(t *testing.T) {
	f := newFixture(t, 40, 0)
	c := f.serve(t)
	rfc := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
	for _, w := range []struct{ from, until int64 }{
		{startMs, startMs},
		{startMs + 5000, startMs + 9000},
		{startMs + 5001, startMs + 8999},
		{startMs - 1e6, startMs + 2500},
		{startMs + 39000, math.MaxInt64},
		{math.MinInt64, startMs + 3000},
		{startMs + 1e6, startMs + 2e6},
	} {
		var want []uuidv7.UUID
		for _, id := range f.postIDs {
			if ms := id.Time().UnixMilli(); ms >= w.from && ms <= w.until {
				want = append(want, id)
			}
		}
		if direct := ids(t, f.posts, query.All().TimeRangeMs(w.from, w.until)); !slices.Equal(direct, want) {
			t.Fatalf("window %v: storh gives %d ids, the ids' times %d", w, len(direct), len(want))
		}
		forms := []string{}
		params := func(from, until string) string {
			s := ""
			if w.from != math.MinInt64 {
				s += "&from=" + url.QueryEscape(from)
			}
			if w.until != math.MaxInt64 {
				s += "&until=" + url.QueryEscape(until)
			}
			return s
		}
		forms = append(forms, params(strconv.FormatInt(w.from, 10), strconv.FormatInt(w.until, 10)))
		forms = append(forms, params(rfc(w.from), rfc(w.until)))
		// The same instants with an offset.
		cet := time.FixedZone("CET", 3600)
		forms = append(forms, params(time.UnixMilli(w.from).In(cet).Format(time.RFC3339Nano), time.UnixMilli(w.until).In(cet).Format(time.RFC3339Nano)))
		for _, form := range forms {
			got := walk(t, c, "api/collections/posts/records?limit=4"+form, false)
			if !slices.Equal(got, want) {
				t.Errorf("window %s: %d ids, want %d", form, len(got), len(want))
			}
			got = walk(t, c, "api/collections/posts/records?limit=3&newest=1"+form, true)
			if !slices.Equal(got, reversed(want)) {
				t.Errorf("window %s newest first: %d ids, want %d", form, len(got), len(want))
			}
		}
	}
}

// TestPageStreams reads a page larger than what the handler holds before
// it starts the response.
func TestPageStreams(t *testing.T) {
	f := newFixture(t, 0, 0)
	big := make([]byte, 300<<10)
	for i := range 10 {
		if _, err := f.posts.Put(storh.Map{"i": int64(i), "blob": big}); err != nil {
			t.Fatal(err)
		}
	}
	c := f.serve(t)
	p := c.page("api/collections/posts/records?limit=9")
	if len(p.Records) != 9 || p.Next != p.Records[8].ID {
		t.Errorf("%d records, next %q", len(p.Records), p.Next)
	}
}
