package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// startMs is the creation time of the first seeded record; the ids are one
// second apart, so time windows select exact records.
const startMs = 1_714_564_800_000 // 2024-05-01T12:00:00Z

const seeded = 300

// bigInt is beyond JavaScript's exact integers: the page must show it as
// stored, not as JSON.parse would round it.
const bigInt = 9007199254740993

// chromium finds the browser, or skips the test (fails it when
// STORH_REQUIRE_BROWSER=1, as CI sets, so that a missing browser cannot
// pass for a passing test).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("STORH_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium binary found, and STORH_REQUIRE_BROWSER=1")
	}
	t.Skip("no chromium binary found (install Debian's chromium; STORH_REQUIRE_BROWSER=1 makes this a failure)")
	return ""
}

// artifacts is where screenshots go: STORH_ARTIFACTS, for CI to keep, or
// a temporary directory.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("STORH_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// store is a seeded database: docs (Docs, 300 records, an index on
// group), events (Log) and jobs (Queue, 2 pending and 1 claimed).
type store struct {
	db   *storh.DB
	docs *storh.Docs
	ids  []uuidv7.UUID // docs' ids in id order
}

func newStore(t *testing.T) *store {
	t.Helper()
	db, err := storh.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := &store{db: db}
	s.docs, err = db.Docs("docs",
		storh.WithIDGenerator(uuidv7.NewDeterministic(7, startMs, 1000).New),
		storh.WithIndex(storh.Index("group")))
	if err != nil {
		t.Fatal(err)
	}
	for i := range seeded {
		data := storh.Map{"n": int64(i), "group": int64(i % 5), "name": fmt.Sprintf("doc-%03d", i)}
		if i == 0 {
			data["big"] = int64(bigInt)
		}
		rec, err := s.docs.Put(data)
		if err != nil {
			t.Fatal(err)
		}
		s.ids = append(s.ids, rec.ID)
	}
	events, err := db.Log("events")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := events.Put(storh.Map{"n": int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := db.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := jobs.Enqueue(storh.Map{"job": int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := jobs.Claim(time.Hour); err != nil {
		t.Fatal(err)
	}
	return s
}

// page drives one browser tab.
type page struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	bad []string // exceptions and CSP violations the page reported
}

func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // the tests run as root, where the sandbox cannot start
		chromedp.Headless,
		chromedp.WindowSize(1280, 900),
	)
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	return alloc
}

func newPage(t *testing.T, browser context.Context) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	p := &page{t: t, ctx: ctx}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			// Failed requests the tests make on purpose (a bad query's
			// 400) are network entries; only script errors and security
			// (CSP) refusals are the page's faults.
			if m.IsException() || m.Source == "security" || (m.Type == chromedp.ConsoleError && m.Source == "") {
				p.mu.Lock()
				p.bad = append(p.bad, m.String())
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(p.checkConsole)
	return p
}

func (p *page) checkConsole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.bad {
		p.t.Errorf("the page reported: %s", m)
	}
	p.bad = nil
}

func (p *page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.t.Fatal(err)
	}
}

func eval[T any](p *page, expr string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// wait waits until the expression is truthy; on timeout it fails with
// what show evaluates to, which says what the page shows instead.
func (p *page) wait(expr, show string) {
	p.t.Helper()
	_, err := chromedp.Run(p.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil {
		got, _ := chromedp.Run(p.ctx, chromedp.Evaluate[any](show))
		p.t.Fatalf("waiting for %s: %v; the page shows %v", expr, err, got)
	}
}

func (p *page) click(id string) { p.t.Helper(); p.do(chromedp.Click(chromedp.ID(id))) }

// set sets a form field's value, as a person's typing would end up; the
// page reads its fields when a form is submitted, not as they change.
func (p *page) set(id, value string) {
	p.t.Helper()
	js, _ := json.Marshal(value)
	if !eval[bool](p, fmt.Sprintf(`(e => { e.value = %s; return e.value === %s; })(document.getElementById(%q))`, js, js, id)) {
		p.t.Fatalf("cannot set #%s to %q", id, value)
	}
}

func (p *page) text(id string) string {
	p.t.Helper()
	return eval[string](p, fmt.Sprintf(`document.getElementById(%q).textContent`, id))
}

func (p *page) screenshot(dir, name string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

const shownIDs = `Array.from(document.querySelectorAll("#records-table tbody button[data-id]"), b => b.dataset.id)`

// expectIDs waits for the record list to show want, in order.
func (p *page) expectIDs(want []uuidv7.UUID) {
	p.t.Helper()
	ws := make([]string, len(want))
	for i, id := range want {
		ws[i] = id.String()
	}
	js, _ := json.Marshal(ws)
	p.wait(fmt.Sprintf(`JSON.stringify(%s) === %q`, shownIDs, js),
		shownIDs+`.concat(["error: " + document.getElementById("records-error").textContent])`)
}

func (p *page) clickCSS(sel string) { p.t.Helper(); p.do(chromedp.Click(chromedp.CSS(sel))) }

func (p *page) enabled(id string) bool {
	p.t.Helper()
	return !eval[bool](p, fmt.Sprintf(`document.getElementById(%q).disabled`, id))
}

func reversed(ids []uuidv7.UUID) []uuidv7.UUID {
	r := slices.Clone(ids)
	slices.Reverse(r)
	return r
}

func utc(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000") + " UTC"
}

// apiError asks the API what the page asked it, and returns the message
// of the error it answers with: the page must show exactly that.
func apiError(t *testing.T, base, path string, params url.Values) string {
	t.Helper()
	res, err := http.Get(base + path + "?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var e struct {
		Error struct{ Message string }
	}
	if err := json.NewDecoder(res.Body).Decode(&e); err != nil || res.StatusCode < 400 || e.Error.Message == "" {
		t.Fatalf("GET %s?%s: status %d, %v: want an API error", path, params.Encode(), res.StatusCode, err)
	}
	return e.Error.Message
}

func apiJSON(t *testing.T, base, path string, params url.Values, v any) {
	t.Helper()
	res, err := http.Get(base + path + "?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s: status %d: %s", path, res.StatusCode, b)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// serve starts web.Handler, which serves the page at its root and the API
// beside it.
func serve(t *testing.T, db *storh.DB, opts ...web.Option) *httptest.Server {
	srv := httptest.NewServer(web.Handler(db, opts...))
	t.Cleanup(srv.Close)
	return srv
}

func TestBrowser(t *testing.T) {
	browser := newBrowser(t)
	dir := artifacts(t)
	s := newStore(t)
	srv := serve(t, s.db)
	p := newPage(t, browser)
	p.do(chromedp.Navigate(srv.URL + "/"))
	p.do(chromedp.WaitVisible(chromedp.CSS(`button[data-collection="docs"]`)))

	t.Run("collections", func(t *testing.T) {
		p.t = t
		rows := eval[[][]string](p, `Array.from(document.querySelectorAll("#collections-table tbody tr"),
			tr => Array.from(tr.cells, c => c.textContent))`)
		want := [][]string{
			{"docs", "docs", "300", utc(s.ids[0].TimestampMs()), utc(s.ids[seeded-1].TimestampMs())},
			{"events", "log", "5"},
			{"jobs", "queue", "3"},
		}
		if len(rows) != len(want) {
			t.Fatalf("collections %q, want %d rows", rows, len(want))
		}
		for i, w := range want {
			if len(rows[i]) != 5 || !slices.Equal(rows[i][:len(w)], w) {
				t.Errorf("row %d = %q, want %q", i, rows[i], w)
			}
		}
	})

	t.Run("paging", func(t *testing.T) {
		p.t = t
		p.set("limit", "25")
		// By keyboard: focus the collection's button and press Enter.
		p.do(chromedp.Focus(chromedp.CSS(`button[data-collection="docs"]`)), chromedp.KeyEvent("\r"))
		p.expectIDs(s.ids[0:25])
		if p.enabled("prev") || !p.enabled("next") {
			t.Errorf("first page: previous enabled %v, next %v; want false, true", p.enabled("prev"), p.enabled("next"))
		}
		p.click("next")
		p.expectIDs(s.ids[25:50])
		p.click("next")
		p.expectIDs(s.ids[50:75])
		p.click("prev")
		p.expectIDs(s.ids[25:50])
		p.click("prev")
		p.expectIDs(s.ids[0:25])
		if p.enabled("prev") {
			t.Error("back on the first page, previous is enabled")
		}

		p.click("newest")
		p.click("run")
		p.expectIDs(reversed(s.ids[275:300]))
		p.click("next")
		p.expectIDs(reversed(s.ids[250:275]))
		p.click("prev")
		p.expectIDs(reversed(s.ids[275:300]))
		p.click("newest")

		// The last page of 300 in pages of 25 ends without a next.
		p.set("limit", "150")
		p.click("run")
		p.expectIDs(s.ids[0:150])
		p.click("next")
		p.expectIDs(s.ids[150:300])
		if p.enabled("next") || !p.enabled("prev") {
			t.Errorf("last page: next enabled %v, previous %v; want false, true", p.enabled("next"), p.enabled("prev"))
		}
		p.set("limit", "25")
	})

	t.Run("time window", func(t *testing.T) {
		p.t = t
		// Seconds 10 to 19 after the first record; until covers the whole
		// second it shows.
		p.set("from", "2024-05-01T12:00:10")
		p.set("until", "2024-05-01T12:00:19")
		p.click("run")
		p.expectIDs(s.ids[10:20])
		p.set("from", "2024-05-01T12:04")
		p.set("until", "")
		p.click("run")
		p.expectIDs(s.ids[240:265])
		p.set("from", "")
	})

	q := `group=2` // the text syntax; the JSON form is tried below
	t.Run("query", func(t *testing.T) {
		p.t = t
		var group2 []uuidv7.UUID // group 2, by n descending
		for i := seeded - 1; i >= 0; i-- {
			if i%5 == 2 {
				group2 = append(group2, s.ids[i])
			}
		}
		p.set("q", q)
		p.set("order", "-n")
		p.click("run")
		p.expectIDs(group2[0:25])
		p.click("next")
		p.expectIDs(group2[25:50])
		p.click("next")
		p.expectIDs(group2[50:60])
		if p.enabled("next") {
			t.Error("last page of the query: next is enabled")
		}
		p.click("prev")
		p.expectIDs(group2[25:50])

		for _, bad := range []struct{ q, order string }{
			{`{"fild":"group","op":"eq","value":2}`, "-n"},
			{`group==2`, "-n"},
			{`{"field":"group","op":"eq","value":2`, "-n"},
			{q, `-[1]`},
		} {
			p.set("q", bad.q)
			p.set("order", bad.order)
			p.click("run")
			msg := apiError(t, srv.URL, "/api/collections/docs/records", url.Values{"q": {bad.q}, "order": {bad.order}, "limit": {"25"}})
			p.wait(fmt.Sprintf(`!document.getElementById("records-error").hidden && document.getElementById("records-error").textContent === %q`, msg),
				`document.getElementById("records-error").textContent`)
		}
		p.set("q", `{"field":"group","op":"eq","value":2}`)
		p.set("order", "-n")
		p.click("run")
		p.expectIDs(group2[0:25])
		p.wait(`document.getElementById("records-error").hidden`, `document.getElementById("records-error").textContent`)
	})

	t.Run("explain", func(t *testing.T) {
		p.t = t
		var plan struct{ Text string }
		apiJSON(t, srv.URL, "/api/collections/docs/explain", url.Values{"q": {q}, "order": {"-n"}, "limit": {"25"}}, &plan)
		p.click("explain-run")
		p.wait(fmt.Sprintf(`document.getElementById("explain-text").textContent === %q`, plan.Text), `document.getElementById("explain-text").textContent`)
		if j := p.text("explain-json"); !strings.Contains(j, `"indexes": [`) || !strings.Contains(j, "\n  \"query\": ") {
			t.Errorf("explain JSON not shown pretty-printed:\n%s", j)
		}
	})

	t.Run("schema", func(t *testing.T) {
		p.t = t
		if err := s.db.SetSchema("docs", []byte(`{"type":"object","properties":{"n":{"type":"integer","minimum":0}}}`)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.db.SetSchema("docs", nil) })
		p.do(chromedp.Click(chromedp.CSS(`button[data-collection="events"]`)))
		p.wait(`document.getElementById("records-name").textContent === "in events" && document.getElementById("schema").hidden`,
			`document.getElementById("schema-json").textContent`)
		p.do(chromedp.Click(chromedp.CSS(`button[data-collection="docs"]`)))
		p.wait(`!document.getElementById("schema").hidden`, `document.getElementById("schema-json").textContent`)
		if j := p.text("schema-json"); !strings.Contains(j, "\n  \"properties\": {") || !strings.Contains(j, `"minimum": 0`) {
			t.Errorf("schema not shown pretty-printed:\n%s", j)
		}
	})

	t.Run("detail", func(t *testing.T) {
		p.t = t
		p.set("q", "")
		p.set("order", "")
		p.click("run")
		p.expectIDs(s.ids[0:25])
		id := s.ids[0].String()
		p.clickCSS(fmt.Sprintf(`#records-table button[data-id=%q]`, id))
		p.wait(fmt.Sprintf(`document.getElementById("detail-id").textContent === %q`, id), `document.getElementById("detail-error").textContent`)
		if got, want := p.text("detail-created"), utc(s.ids[0].TimestampMs()); got != want {
			t.Errorf("created %q, want %q", got, want)
		}
		body := p.text("detail-json")
		for _, want := range []string{
			"{\n  \"id\": \"" + id + "\",\n  \"time\": \"2024-05-01T12:00:00.000Z\",\n  \"data\": {\n",
			fmt.Sprintf(`"big": %d,`, bigInt), // every digit, as stored
			`"n": 0`,
			`"name": "doc-000"`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("detail lacks %q:\n%s", want, body)
			}
		}
		// The list shows the record's data as sent, too.
		if cell := eval[string](p, `document.querySelector("#records-table tbody td.data").textContent`); !strings.Contains(cell, fmt.Sprint(bigInt)) {
			t.Errorf("the list shows %s", cell)
		}
	})

	t.Run("aggregate", func(t *testing.T) {
		p.t = t
		// docs is the collection shown. Group 0 holds the record of bigInt,
		// which the table must show with every digit.
		p.set("agg-group", " group ")
		p.set("agg-aggs", "count:n\nsum:total:n\n\nmax:big:big\navg:mean:n")
		p.set("agg-q", "n<200")
		p.click("agg-run")
		const shown = `Array.from(document.querySelectorAll("#aggregate-table tr"), tr => Array.from(tr.cells, c => c.textContent))`
		p.wait(`document.querySelectorAll("#aggregate-table tbody tr").length === 5`, shown+`.concat([[document.getElementById("aggregate-error").textContent]])`)
		cond, err := query.Parse("n<200")
		if err != nil {
			t.Fatal(err)
		}
		groups, err := s.docs.Aggregate(query.All().Where(cond), []string{"group"},
			query.Count("n"), query.Sum("total", "n"), query.Max("big", "big"), query.Avg("mean", "n"))
		if err != nil {
			t.Fatal(err)
		}
		want := [][]string{{"group", "n", "total", "big", "mean"}}
		for _, g := range groups {
			row := []string{}
			for _, v := range []any{g.Key[0], g.Values["n"], g.Values["total"], g.Values["big"], g.Values["mean"]} {
				b, err := jsonl.AppendValue(nil, v)
				if err != nil {
					t.Fatal(err)
				}
				row = append(row, string(b))
			}
			want = append(want, row)
		}
		if got := eval[[][]string](p, shown); !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("the aggregate table shows\n%q\nwant\n%q", got, want)
		}
		if want[1][3] != fmt.Sprint(bigInt) {
			t.Errorf("group 0's max of big is %s, want %d", want[1][3], bigInt)
		}

		// A count grouped by the indexed path reads index entries only.
		p.set("agg-q", "")
		p.set("agg-aggs", "count:n")
		var plan struct{ Text string }
		apiJSON(t, srv.URL, "/api/collections/docs/aggregate", url.Values{"group": {"group"}, "agg": {"count:n"}, "explain": {"1"}}, &plan)
		if !strings.Contains(plan.Text, "0 records read") {
			t.Errorf("plan %q: want a count from index entries", plan.Text)
		}
		p.click("agg-explain")
		p.wait(fmt.Sprintf(`document.getElementById("aggregate-plan").textContent === %q`, plan.Text), `document.getElementById("aggregate-plan").textContent`)

		// A refusal shows the API's message.
		p.set("agg-aggs", "median:m:n")
		p.click("agg-run")
		msg := apiError(t, srv.URL, "/api/collections/docs/aggregate", url.Values{"group": {"group"}, "agg": {"median:m:n"}})
		p.wait(fmt.Sprintf(`!document.getElementById("aggregate-error").hidden && document.getElementById("aggregate-error").textContent === %q`, msg),
			`document.getElementById("aggregate-error").textContent`)
		p.set("agg-aggs", "count:n")
		p.set("agg-group", "")
		p.click("agg-run")
		p.wait(`document.getElementById("aggregate-error").hidden && document.querySelectorAll("#aggregate-table tbody tr").length === 1`,
			shown+`.concat([[document.getElementById("aggregate-error").textContent]])`)
		if got := eval[[][]string](p, shown); !slices.EqualFunc(got, [][]string{{"n"}, {"300"}}, slices.Equal) {
			t.Errorf("no group-by: the table shows %q, want one group of 300", got)
		}
	})

	t.Run("queues", func(t *testing.T) {
		p.t = t
		p.clickCSS(`button[data-collection="jobs"]`)
		p.wait(`document.querySelector('#queues-table tr[data-queue="jobs"]') !== null`, `document.getElementById("queues-error").textContent`)
		cells := eval[[]string](p, `Array.from(document.querySelector('#queues-table tr[data-queue="jobs"]').cells, c => c.textContent)`)
		if want := []string{"jobs", "2", "1", "0", "0", "Refresh"}; !slices.Equal(cells, want) {
			t.Errorf("queue counts %q, want %q", cells, want)
		}
	})

	p.t = t
	p.screenshot(dir, "page-1280.png")

	t.Run("tail", func(t *testing.T) {
		p.t = t
		tailRecord(t, p, s)
	})

	t.Run("feed tail", func(t *testing.T) {
		p.t = t
		tailFeed(t, p, s, 1)
	})

	t.Run("objectid", func(t *testing.T) {
		p.t = t
		p.set("oid-count", "100")
		before := time.Now()
		p.click("oid-generate")
		p.wait(`document.getElementById("oid-out").value.split("\n").length === 100`, `document.getElementById("oid-out").value`)
		after := time.Now()
		first := strings.Split(eval[string](p, `document.getElementById("oid-out").value`), "\n")
		random := eval[string](p, `storhIDs.objectid.random()`)
		checkObjectIDs(t, first, random, before, after)

		// A second batch: the same random value, the counter going on.
		p.set("oid-count", "3")
		p.click("oid-generate")
		p.wait(`document.getElementById("oid-out").value.split("\n").length === 3`, `document.getElementById("oid-out").value`)
		second := strings.Split(eval[string](p, `document.getElementById("oid-out").value`), "\n")
		checkObjectIDs(t, second, random, before, time.Now())
		last, next := objectid.MustParse(first[99]), objectid.MustParse(second[0])
		if next.Counter() != (last.Counter()+1)&objectid.MaxCounter {
			t.Errorf("the second batch starts at counter %#x after %#x", next.Counter(), last.Counter())
		}

		// Decode by keyboard: type, then Enter.
		p.do(chromedp.SendKeys(chromedp.ID("oid-in"), "507f1f77bcf86cd799439011\n"))
		p.wait(`document.getElementById("oid-result").textContent.includes("2012-10-17 21:13:27 UTC")`, `document.getElementById("oid-result").textContent`)
		if got := p.text("oid-result"); !strings.Contains(got, "seconds 1350508407 · random bcf86cd799 · counter 4427793 (0x439011)") {
			t.Errorf("decoded as %q", got)
		}
		p.set("oid-in", "")
		p.do(chromedp.SendKeys(chromedp.ID("oid-in"), "507F1F77BCF86CD79943901Z\n"))
		_, err := objectid.Parse("507F1F77BCF86CD79943901Z")
		p.wait(fmt.Sprintf(`document.getElementById("oid-result").textContent === %q`, err.Error()), `document.getElementById("oid-result").textContent`)
	})

	t.Run("uuidv7", func(t *testing.T) {
		p.t = t
		p.set("u7-count", "100")
		before := time.Now().UnixMilli()
		p.click("u7-generate")
		p.wait(`document.getElementById("u7-out").value.split("\n").length === 100`, `document.getElementById("u7-out").value`)
		first := strings.Split(eval[string](p, `document.getElementById("u7-out").value`), "\n")
		p.click("u7-generate")
		p.wait(fmt.Sprintf(`document.getElementById("u7-out").value.split("\n")[0] !== %q`, first[0]), `document.getElementById("u7-out").value`)
		second := strings.Split(eval[string](p, `document.getElementById("u7-out").value`), "\n")
		after := time.Now().UnixMilli()
		var prev uuidv7.UUID
		for i, s := range append(first, second...) {
			u, err := uuidv7.Parse(s)
			if err != nil {
				t.Fatalf("id %d: %v", i, err)
			}
			if u.String() != s {
				t.Errorf("id %d: %s is not canonical (lowercase) text", i, s)
			}
			if ms := u.TimestampMs(); ms < before || ms > after {
				t.Errorf("id %d: %s made at %d ms, not between %d and %d", i, s, ms, before, after)
			}
			if i > 0 && u.Compare(prev) <= 0 {
				t.Errorf("id %d: %s does not follow %s", i, u, prev)
			}
			prev = u
		}

		id := s.ids[42]
		p.set("u7-in", strings.ToUpper(id.String()))
		p.click("u7-decode")
		p.wait(fmt.Sprintf(`document.getElementById("u7-result").textContent.includes(%q)`, utc(id.TimestampMs())), `document.getElementById("u7-result").textContent`)
		bad := "018f3406-9e00-605b-8fce-435dcccd0863"
		_, err := uuidv7.Parse(bad)
		p.set("u7-in", bad)
		p.click("u7-decode")
		p.wait(fmt.Sprintf(`document.getElementById("u7-result").classList.contains("bad") && document.getElementById("u7-result").textContent.includes(%q)`, err.Error()),
			`document.getElementById("u7-result").textContent`)

		ms := int64(startMs + 123)
		for _, in := range []string{fmt.Sprint(ms), "2024-05-01T12:00:00.123Z", "2024-05-01T14:00:00.123+02:00", "2024-05-01 12:00:00.123"} {
			eval[bool](p, `(document.getElementById("u7-min").textContent = "") === ""`)
			p.set("u7-time", in)
			p.click("u7-range")
			p.wait(fmt.Sprintf(`document.getElementById("u7-min").textContent === %q && document.getElementById("u7-max").textContent === %q`,
				uuidv7.MinForTimestampMs(ms), uuidv7.MaxForTimestampMs(ms)),
				`[document.getElementById("u7-min").textContent, document.getElementById("u7-max").textContent, document.getElementById("u7-range-error").textContent]`)
		}
	})

	t.Run("js agrees with go", func(t *testing.T) {
		p.t = t
		compareObjectID(t, p)
		compareUUIDv7(t, p)
	})

	t.Run("keyboard", func(t *testing.T) {
		p.t = t
		p.do(chromedp.Focus(chromedp.ID("token")), chromedp.KeyEvent("\t"))
		if got := eval[string](p, `document.activeElement.id`); got != "token-use" {
			t.Errorf("Tab from the token field went to %q, want the token-use button", got)
		}
		// Focus must show: the outline of :focus-visible.
		if w := eval[string](p, `getComputedStyle(document.activeElement).outlineStyle`); w != "solid" {
			t.Errorf("the focused button's outline is %q, want solid", w)
		}
	})

	t.Run("375px", func(t *testing.T) {
		p.t = t
		p.do(chromedp.EmulateViewport(375, 812))
		p.wait(`window.innerWidth === 375`, `window.innerWidth`)
		if w := eval[int](p, `document.documentElement.scrollWidth`); w > 375 {
			t.Errorf("at 375px the page is %dpx wide: it scrolls sideways", w)
		}
		p.screenshot(dir, "page-375.png")
	})
}

// tailRecord starts the live tail of docs, stores a record, and waits for
// the page to show it.
func tailRecord(t *testing.T, p *page, s *store) {
	t.Helper()
	p.clickCSS(`button[data-collection="docs"]`)
	p.wait(`!document.getElementById("tail-start").disabled`, `document.getElementById("tail-status").textContent`)
	p.click("tail-start")
	p.wait(`document.getElementById("tail-status").textContent.startsWith("Live")`, `document.getElementById("tail-status").textContent`)
	rec, err := s.docs.Put(storh.Map{"n": int64(1000), "tail": true})
	if err != nil {
		t.Fatal(err)
	}
	p.wait(fmt.Sprintf(`document.querySelector('#tail-list button[data-id=%q]') !== null`, rec.ID),
		`Array.from(document.querySelectorAll("#tail-list li"), li => li.textContent)`)
	if li := eval[string](p, `document.querySelector("#tail-list li:last-child").textContent`); !strings.Contains(li, `{"n":1000,"tail":true}`) {
		t.Errorf("the tail shows %q", li)
	}
	p.click("tail-stop")
	p.wait(`document.getElementById("tail-status").textContent === "Stopped."`, `document.getElementById("tail-status").textContent`)
}

// tailFeed gives docs a change feed, starts its live tail, stores a
// record and deletes the seeded record del, and waits for the page to
// show both changes: the tail follows the feed, deletes included.
func tailFeed(t *testing.T, p *page, s *store, del int) {
	t.Helper()
	if _, err := s.db.Docs("docs", storh.WithChangeFeed(100)); err != nil {
		t.Fatal(err)
	}
	p.clickCSS(`button[data-collection="docs"]`)
	p.wait(`!document.getElementById("tail-start").disabled`, `document.getElementById("tail-status").textContent`)
	p.click("tail-start")
	p.wait(`document.getElementById("tail-status").textContent.startsWith("Live: the changes of docs")`, `document.getElementById("tail-status").textContent`)
	rec, err := s.docs.Put(storh.Map{"n": int64(2000), "feed": true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.docs.Delete(s.ids[del]); err != nil {
		t.Fatal(err)
	}
	items := `Array.from(document.querySelectorAll("#tail-list li"), li => li.textContent)`
	p.wait(fmt.Sprintf(`document.querySelector('#tail-list li.deleted[data-id=%q]') !== null`, s.ids[del]), items)
	got := eval[[]string](p, items+`.slice(-2)`)
	if len(got) != 2 || !strings.HasPrefix(got[0], rec.ID.String()) || !strings.Contains(got[0], `{"feed":true,"n":2000}`) ||
		!strings.HasPrefix(got[1], s.ids[del].String()) || !strings.HasSuffix(got[1], "deleted") {
		t.Errorf("the tail of the feed shows %q; want the put of %s, then the delete of %s", got, rec.ID, s.ids[del])
	}
	// The put's id opens its record; the deleted one's is text.
	if eval[bool](p, fmt.Sprintf(`document.querySelector('#tail-list button[data-id=%q]') === null`, rec.ID)) ||
		eval[bool](p, `document.querySelector('#tail-list li.deleted button') !== null`) {
		t.Errorf("the tail's ids: %q", eval[[]string](p, `Array.from(document.querySelectorAll("#tail-list li"), li => li.innerHTML)`))
	}
	p.click("tail-stop")
	p.wait(`document.getElementById("tail-status").textContent === "Stopped."`, `document.getElementById("tail-status").textContent`)
}

var objectIDText = regexp.MustCompile(`^[0-9a-f]{24}$`)

// checkObjectIDs checks a batch from the page: the format, the one random
// value, consecutive counters and the time.
func checkObjectIDs(t *testing.T, ids []string, random string, before, after time.Time) {
	t.Helper()
	var first objectid.ObjectID
	for i, s := range ids {
		if !objectIDText.MatchString(s) {
			t.Fatalf("id %d: %q is not 24 lowercase hex characters", i, s)
		}
		id := objectid.MustParse(s)
		if i == 0 {
			first = id
		}
		if got := fmt.Sprintf("%010x", id.Random()); got != random {
			t.Errorf("id %d: random value %s, want the page's %s", i, got, random)
		}
		if want := (first.Counter() + uint32(i)) & objectid.MaxCounter; id.Counter() != want {
			t.Errorf("id %d: counter %#x, want %#x", i, id.Counter(), want)
		}
		if id.Seconds() != first.Seconds() {
			t.Errorf("id %d: second %d, but the batch began in %d", i, id.Seconds(), first.Seconds())
		}
		if ts := id.Timestamp(); ts.Before(before.Truncate(time.Second).Add(-time.Second)) || ts.After(after.Add(time.Second)) {
			t.Errorf("id %d: made at %v, not within a second of %v", i, ts, before)
		}
	}
}

// compareObjectID runs the page's ObjectID functions and package objectid
// on the same inputs.
func compareObjectID(t *testing.T, p *page) {
	t.Helper()
	inputs := []string{
		"507f1f77bcf86cd799439011", "507F1F77BCF86CD799439011", "6553f1003f2a91c8d4003039",
		"000000000000000000000000", "7fffffff0000000000ffffff", "80000000ffffffffff000000", "ffffffffffffffffffffffff",
		"", "507f1f77bcf86cd79943901", "507f1f77bcf86cd7994390111", "507f1f77bcf86cd79943901z",
		"g07f1f77bcf86cd799439011", "5g7f1f77bcf86cd799439011", " 07f1f77bcf86cd799439011", "507f1f77-bcf86cd799439011",
		"0x7f1f77bcf86cd799439011", "ObjectId(\"507f1f77bcf86cd799439011\")", "507f1f77bcf86cd79943901é",
	}
	type result struct {
		OK      bool   `json:"ok"`
		Hex     string `json:"hex"`
		Seconds uint32 `json:"seconds"`
		Random  string `json:"random"`
		Counter uint32 `json:"counter"`
		TimeMs  int64  `json:"timeMs"`
		Err     string `json:"err"`
	}
	in, _ := json.Marshal(inputs)
	got := eval[[]result](p, fmt.Sprintf(`%s.map(s => { try { return Object.assign({ok: true}, storhIDs.objectid.parse(s)); }
		catch (e) { return {ok: false, err: e.message}; } })`, in))
	for i, s := range inputs {
		id, err := objectid.Parse(s)
		g := got[i]
		if err != nil {
			if g.OK {
				t.Errorf("objectid %q: the page accepts what Go refuses: %v", s, err)
			} else if g.Err != err.Error() && isASCII(s) {
				t.Errorf("objectid %q: the page says\n%s\nGo says\n%s", s, g.Err, err)
			}
			continue
		}
		want := result{OK: true, Hex: id.Hex(), Seconds: id.Seconds(), Random: fmt.Sprintf("%010x", id.Random()),
			Counter: id.Counter(), TimeMs: id.Timestamp().UnixMilli()}
		if g != want {
			t.Errorf("objectid %q: the page reads %+v, Go %+v", s, g, want)
		}
	}

	// Generators with the same clock, random value and counter start make
	// the same ids, through the counter's wrap and the clock's.
	for _, tc := range []struct {
		ms      int64
		random  uint64
		counter uint32
	}{
		{1_700_000_000_000, 0x3f2a91c8d4, 12345},
		{1_700_000_000_999, 0x0000000001, 0xfffffd}, // the counter wraps to 0
		{(1<<32 + 5) * 1000, 0xffffffffff, 0},       // after 2106: seconds wrap to 5
		{-1, 0x123456789a, 7},                       // before 1970: 0xffffffff
	} {
		g := objectid.NewGenerator(objectid.WithClock(func() time.Time { return time.UnixMilli(tc.ms) }),
			objectid.WithProcessRandom(tc.random), objectid.WithCounterStart(tc.counter))
		var want []string
		for _, n := range []int{1, 5} {
			batch, err := g.NewBatch(n)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range batch {
				want = append(want, id.Hex())
			}
		}
		got := eval[[]string](p, fmt.Sprintf(`(() => {
			const g = storhIDs.objectid.newGenerator({now: () => %d, random: "%010x", counterStart: %d});
			return g.generate(1).concat(g.generate(5)); })()`, tc.ms, tc.random, tc.counter))
		if !slices.Equal(got, want) {
			t.Errorf("generator %+v: the page makes\n%q\nGo makes\n%q", tc, got, want)
		}
	}
	for _, n := range []int{0, 101} {
		_, err := objectid.NewBatch(n)
		got := eval[string](p, fmt.Sprintf(`(() => { try { storhIDs.objectid.generate(%d); return ""; } catch (e) { return e.message; } })()`, n))
		if err == nil || got != err.Error() {
			t.Errorf("batch of %d: the page says %q, Go %v", n, got, err)
		}
	}
}

// compareUUIDv7 runs the page's UUIDv7 functions and package uuidv7 on the
// same inputs.
func compareUUIDv7(t *testing.T, p *page) {
	t.Helper()
	inputs := []string{
		"018f3406-9e00-705b-8fce-435dcccd0863", "018F3406-9E00-705B-BFCE-435DCCCD0863", "00000000-0000-7000-8000-000000000000",
		"ffffffff-ffff-7fff-bfff-ffffffffffff", uuidv7.New().String(), uuidv7.MinForTimestampMs(startMs).String(),
		"", "00000000-0000-0000-0000-000000000000", "550e8400-e29b-41d4-a716-446655440000",
		"018f3406-9e00-705b-cfce-435dcccd0863", "018f3406-9e00-705b-7fce-435dcccd0863", "018f3406-9e00-705b-8fce-435dcccd086",
		"018f3406-9e00-705b-8fce-435dcccd08633", "018f3406_9e00-705b-8fce-435dcccd0863", "018f3406-9e00-705b-8fce-435dcccd086g",
		"{018f3406-9e00-705b-8fce-435dcccd0863}", "urn:uuid:018f3406-9e00-705b-8fce-435dcccd0863", "018f34069e00705b8fce435dcccd0863",
		" 18f3406-9e00-705b-8fce-435dcccd0863", "018f3406-9e00-705b-8fce-435dcccd086é", "018f3406-9e00-705b-8fce-435dcccd08é",
	}
	type result struct {
		Valid   bool   `json:"valid"`
		Ms      int64  `json:"ms"`
		Offset  int    `json:"offset"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	in, _ := json.Marshal(inputs)
	got := eval[[]result](p, fmt.Sprintf(`%s.map(s => { const bad = storhIDs.uuidv7.validate(s);
		return bad ? {valid: false, offset: bad.offset, reason: bad.reason, message: bad.message}
			: {valid: storhIDs.uuidv7.isValid(s), ms: storhIDs.uuidv7.timestampMs(s)}; })`, in))
	for i, s := range inputs {
		u, err := uuidv7.Parse(s)
		want := result{Valid: true, Ms: u.TimestampMs()}
		var pe *uuidv7.ParseError
		if errors.As(err, &pe) {
			want = result{Offset: pe.Offset, Reason: pe.Reason, Message: pe.Error()}
		}
		if got[i] != want {
			t.Errorf("uuidv7 %q: the page says %+v, Go %+v", s, got[i], want)
		}
	}

	ms := []int64{0, 1, 999, startMs, startMs + 123, 253_402_300_799_999, uuidv7.MaxTimestampMs, uuidv7.MaxTimestampMs + 1, -1, -startMs}
	js, _ := json.Marshal(ms)
	bounds := eval[[][2]string](p, fmt.Sprintf(`%s.map(ms => [storhIDs.uuidv7.minForTimestampMs(ms), storhIDs.uuidv7.maxForTimestampMs(ms)])`, js))
	for i, m := range ms {
		if want := [2]string{uuidv7.MinForTimestampMs(m).String(), uuidv7.MaxForTimestampMs(m).String()}; bounds[i] != want {
			t.Errorf("bounds of %d ms: the page says %q, Go %q", m, bounds[i], want)
		}
	}

	// Generators with the same clock readings and the same random bytes
	// make the same ids: fresh bits on a new millisecond, +1 within one
	// and when the clock goes back, a carry from rand_b into rand_a, and
	// a batch of one clock reading.
	type step struct {
		ms    int64
		batch int // 0: New
	}
	steps := []step{{1000, 0}, {1000, 0}, {1000, 0}, {999, 0}, {1001, 3}, {1001, 0}, {5000, 0}, {4000, 2}, {5001, 4}}
	for _, source := range [][]byte{seq(200, 0), bytes.Repeat([]byte{0xff}, 200), seq(200, 0x7f)} {
		clock := 0
		g := uuidv7.NewGenerator(uuidv7.WithRandom(bytes.NewReader(source)),
			uuidv7.WithClock(func() time.Time { ms := steps[clock].ms; clock++; return time.UnixMilli(ms) }))
		var want []string
		for _, st := range steps {
			if st.batch == 0 {
				want = append(want, g.New().String())
				continue
			}
			dst := make([]uuidv7.UUID, st.batch)
			g.NewBatch(dst)
			for _, u := range dst {
				want = append(want, u.String())
			}
		}
		stepsJS, _ := json.Marshal(func() (out [][2]int64) {
			for _, st := range steps {
				out = append(out, [2]int64{st.ms, int64(max(st.batch, 1))})
			}
			return out
		}())
		srcJS, _ := json.Marshal(source)
		got := eval[[]string](p, fmt.Sprintf(`(() => {
			const steps = %s, src = Uint8Array.from(atob(%s), c => c.charCodeAt(0));
			let at = 0, pos = 0;
			const g = storhIDs.uuidv7.newGenerator({
				now: () => steps[at][0],
				random: (n) => { const b = src.slice(pos, pos + n); pos += n; return b; },
			});
			const out = [];
			for (; at < steps.length; at++) out.push(...g.generate(steps[at][1]));
			return out; })()`, stepsJS, srcJS))
		if !slices.Equal(got, want) {
			t.Errorf("generator with source % x...: the page makes\n%q\nGo makes\n%q", source[:10], got, want)
		}
	}
}

// seq is n bytes counting up from start.
func seq(n int, start byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i*37)
	}
	return b
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// TestBrowserToken runs the page against an API that needs a token, under
// a prefix, as an application mounts it: the page asks for the token,
// sends it, and tails with it, which an EventSource could not.
func TestBrowserToken(t *testing.T) {
	browser := newBrowser(t)
	s := newStore(t)
	outer := http.NewServeMux()
	outer.Handle("/debug/storh/", http.StripPrefix("/debug/storh", web.Handler(s.db, web.WithToken("s3cret"))))
	srv := httptest.NewServer(outer)
	t.Cleanup(srv.Close)

	p := newPage(t, browser)
	p.do(chromedp.Navigate(srv.URL + "/debug/storh"))
	p.wait(`!document.getElementById("collections-error").hidden`, `document.getElementById("collections-error").textContent`)
	if msg := p.text("collections-error"); !strings.Contains(msg, "bearer token") {
		t.Errorf("without a token the page says %q", msg)
	}
	p.do(chromedp.SendKeys(chromedp.ID("token"), "s3cret\n"))
	p.do(chromedp.WaitVisible(chromedp.CSS(`button[data-collection="docs"]`)))
	if got := eval[string](p, `sessionStorage.getItem("storh.token")`); got != "s3cret" {
		t.Errorf("sessionStorage holds %q", got)
	}
	p.clickCSS(`button[data-collection="docs"]`)
	p.expectIDs(s.ids[0:50])
	tailRecord(t, p, s)
	tailFeed(t, p, s, 2)

	p.click("token-forget")
	if got := eval[bool](p, `sessionStorage.getItem("storh.token") === null`); !got {
		t.Error("Forget left the token in sessionStorage")
	}
}
