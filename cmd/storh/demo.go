package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

const (
	demoEvents     = "demo_events"
	demoPages      = "demo_pages"
	demoEventCount = 3000
	demoPageCount  = 120
	demoPageSize   = 3
	demoFeedKeep   = 1000 // the changes demo_pages' feed keeps
)

func (a *app) demoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "A tour: write an hour of records, then page, window, filter, transact",
		Long: `Demo creates the database (storh.db, or --db) if needed and replaces its two
demo collections: the log "demo_events" (3,000 request events) and the docs
collection "demo_pages" (120 pages), with ids made for creation times spread
over the last hour. Then it shows cursor pagination, a creation-time window, a
newest-first read, a field filter, an atomic transaction across both
collections, and the statistics. Other collections are left alone; running it
again starts the demo over.

It ends with commands to try next, printed so that they run as shown: with
'go run ./cmd/storh' when storh is not installed, and with --db when the
demo was given one.`,
		Example: `  storh demo
  storh --db /tmp/demo.db demo
  go run ./cmd/storh demo          # in a clone, before installing`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := bufio.NewWriter(a.stdout)
			err := a.runDemo(w)
			if ferr := w.Flush(); err == nil {
				err = ferr
			}
			return err
		},
	}
}

// demoRand returns the demo's fixed random source: the same records (but
// for ids and times) on every run.
func demoRand() *rand.Rand { return rand.New(rand.NewPCG(2024, 7)) }

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

var demoSlugs = []string{"home", "pricing", "about", "blog", "docs", "changelog", "careers", "contact", "security", "status"}

func demoEvent(r *rand.Rand) storh.Map {
	level, status := "info", pick(r, 200, 200, 200, 201, 204, 301)
	switch p := r.IntN(100); {
	case p < 5:
		level, status = "error", pick(r, 500, 502, 503)
	case p < 20:
		level, status = "warn", pick(r, 404, 409, 429)
	}
	method, path := "GET", "/pages/"+pick(r, demoSlugs...)
	if r.IntN(3) == 0 {
		method, path = pick(r, "POST", "PUT", "DELETE"), "/api/"+pick(r, "orders", "users", "sessions", "carts")
	}
	return storh.Map{
		"level":   level,
		"service": pick(r, "web", "api", "auth", "billing"),
		"method":  method,
		"path":    path,
		"status":  status,
		"ms":      float64(r.IntN(4000)+5) / 10,
		"user":    fmt.Sprintf("u%04d", r.IntN(800)),
	}
}

func demoPage(r *rand.Rand, i int) storh.Map {
	slug := demoSlugs[i%len(demoSlugs)]
	if i >= len(demoSlugs) {
		slug = fmt.Sprintf("post-%03d", i)
	}
	kind := "post"
	if i < len(demoSlugs) {
		kind = "page"
	}
	return storh.Map{
		"slug":      slug,
		"title":     fmt.Sprintf("%s %d", pick(r, "Notes on", "Shipping", "Inside", "Why we chose", "A year of"), i),
		"kind":      kind,
		"author":    pick(r, "ana", "bo", "chen", "dara", "eli"),
		"words":     int64(200 + r.IntN(3000)),
		"published": r.IntN(4) != 0,
		"tags":      []any{pick(r, "go", "databases", "ops", "design"), pick(r, "release", "howto", "story")},
	}
}

// demoOffsets returns n sorted millisecond offsets within one hour.
func demoOffsets(r *rand.Rand, n int) []int64 {
	offs := make([]int64, n)
	for i := range offs {
		offs[i] = r.Int64N(int64(time.Hour / time.Millisecond))
	}
	slices.Sort(offs)
	return offs
}

func (a *app) runDemo(w io.Writer) error {
	db, err := a.open(true)
	if err != nil {
		return err
	}
	defer db.Close()
	replaced := false
	for _, name := range []string{demoEvents, demoPages} {
		switch err := db.Drop(name); {
		case err == nil:
			replaced = true
		case !errors.Is(err, storh.ErrNotFound):
			return err
		}
	}
	note := "new demo collections"
	if replaced {
		note = "replaced the previous demo collections"
	}
	fmt.Fprintf(w, "storh demo: database %s (%s)\n", a.dbPath, note)

	// Write: explicit ids spread over the last hour, as an import would.
	r := demoRand()
	end := a.now().UTC().Truncate(time.Second)
	startMs := end.Add(-time.Hour).UnixMilli()
	events, err := db.Log(demoEvents)
	if err != nil {
		return err
	}
	// The pages keep a change feed: storh changes shows their writes and
	// deletes in commit order.
	pages, err := db.Docs(demoPages, storh.WithChangeFeed(demoFeedKeep))
	if err != nil {
		return err
	}
	began := time.Now()
	var idErr error
	spread := func(n int, data func(i int) storh.Map) func(func(any) bool) {
		return func(yield func(any) bool) {
			for i, off := range demoOffsets(r, n) {
				id, err := uuidv7.NewAt(startMs + off)
				if err != nil {
					idErr = err
					return
				}
				if !yield(storh.Entry{ID: id, Data: data(i)}) {
					return
				}
			}
		}
	}
	if _, err := events.PutStream(spread(demoEventCount, func(int) storh.Map { return demoEvent(r) })); err != nil {
		return err
	}
	if _, err := pages.PutStream(spread(demoPageCount, func(i int) storh.Map { return demoPage(r, i) })); err != nil {
		return err
	}
	if idErr != nil {
		return idErr
	}
	took := time.Since(began)
	clock := func(t time.Time) string { return t.UTC().Format("15:04:05.000") }
	fmt.Fprintf(w, "\n== Write\n")
	fmt.Fprintf(w, "%s events appended to the log %q and %d pages to the docs collection %q,\n",
		commas(demoEventCount), demoEvents, demoPageCount, demoPages)
	fmt.Fprintf(w, "with ids made for creation times spread over one hour (%s to %s UTC).\n",
		end.Add(-time.Hour).Format("15:04:05"), end.Format("15:04:05"))
	fmt.Fprintf(w, "Bulk writes (PutStream, %s records per transaction): %d ms.\n", commas(storh.StreamBatch), took.Milliseconds())

	line := func(rec storh.Record) {
		d := rec.Data()
		fmt.Fprintf(w, "  %s  %s  %-5v %-6v %-17v %v %6.1fms\n", rec.ID, clock(rec.Time()), d["level"], d["method"], d["path"], d["status"], d["ms"])
	}
	collect := func(q query.Query) ([]storh.Record, error) {
		var out []storh.Record
		for rec, err := range events.Stream(q) {
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
		return out, nil
	}

	fmt.Fprintf(w, "\n== Cursor pagination: pages of %d, each one --after the last id of the page before\n", demoPageSize)
	var after uuidv7.UUID
	for page := 1; page <= 3; page++ {
		q := query.All().Limit(demoPageSize)
		label := fmt.Sprintf("page %d: storh query %s --limit %d", page, demoEvents, demoPageSize)
		if page > 1 {
			q = q.After(after)
			label += " --after " + after.String()
		}
		recs, err := collect(q)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, label)
		for _, rec := range recs {
			line(rec)
		}
		after = recs[len(recs)-1].ID
	}

	from := time.UnixMilli(startMs).Add(30 * time.Minute)
	until := from.Add(5*time.Minute - time.Millisecond)
	fmt.Fprintf(w, "\n== Creation-time window: --from %s --until %s (five minutes)\n", from.UTC().Format(time.RFC3339), until.UTC().Format("2006-01-02T15:04:05.000Z"))
	window, err := collect(query.All().TimeRangeMs(from.UnixMilli(), until.UnixMilli()))
	if err != nil {
		return err
	}
	if len(window) > 0 {
		fmt.Fprintf(w, "%d events, %s to %s: one key-range seek, no scan of the other %s\n",
			len(window), clock(window[0].Time()), clock(window[len(window)-1].Time()), commas(int64(demoEventCount-len(window))))
	}

	fmt.Fprintf(w, "\n== Newest first: --reverse --limit %d\n", demoPageSize)
	newest, err := collect(query.All().Reverse().Limit(demoPageSize))
	if err != nil {
		return err
	}
	for _, rec := range newest {
		line(rec)
	}

	errorsQ := query.All().WhereEqual("level", "error")
	matched, err := collect(errorsQ)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== Field filter: --where level=error (matched on the stored bytes, only matches decoded)\n")
	fmt.Fprintf(w, "%d of %s events; the first %d:\n", len(matched), commas(demoEventCount), min(demoPageSize, len(matched)))
	for _, rec := range matched[:min(demoPageSize, len(matched))] {
		line(rec)
	}

	if err := demoAggregate(w, events); err != nil {
		return err
	}

	if err := a.demoTransaction(w, db); err != nil {
		return err
	}

	st, err := db.Stats()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== Stats: storh stats (file %s: %s)\n", a.dbPath, fileSizes(a.dbPath, st.FileSize))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tRECORDS\tDATA\tOLDEST\tNEWEST")
	for _, c := range st.Collections {
		if c.Name != demoEvents && c.Name != demoPages {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.Kind, commas(int64(c.Records)), humanBytes(c.Bytes), clock(c.FirstTime()), clock(c.LastTime()))
	}
	tw.Flush()

	// Lines that run as printed: this storh, and this database.
	self, note := a.selfCommand()
	if a.dbGiven {
		self += " --db " + shellQuote(a.dbPath)
	}
	fmt.Fprintf(w, "\nTry next:\n")
	fmt.Fprintf(w, "  %s query %s --where level=error --limit 5\n", self, demoEvents)
	fmt.Fprintf(w, "  %s query %s --from -10m --reverse\n", self, demoEvents)
	fmt.Fprintf(w, "  %s aggregate %s --group service --count n --sum total_ms=ms\n", self, demoEvents)
	fmt.Fprintf(w, "  %s tail %s -n 3\n", self, demoEvents)
	fmt.Fprintf(w, "  %s export %s demo.jsonl\n", self, demoPages)
	fmt.Fprintf(w, "  %s changes %s --after 0 | tail -3   # its change feed: every put and delete\n", self, demoPages)
	if note != "" {
		fmt.Fprintf(w, "(%s)\n", note)
	}
	return nil
}

// demoAggregate groups the events by level: a count, the mean and the
// greatest of ms, read from the stored bytes of each record.
func demoAggregate(w io.Writer, events *storh.Log) error {
	fmt.Fprintf(w, "\n== Aggregate: storh aggregate %s --group level --count n --avg avg_ms=ms --max slowest_ms=ms\n", demoEvents)
	groups, err := events.Aggregate(query.All(), []string{"level"},
		query.Count("n"), query.Avg("avg_ms", "ms"), query.Max("slowest_ms", "ms"))
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  LEVEL\tN\tAVG_MS\tSLOWEST_MS")
	for _, g := range groups {
		fmt.Fprintf(tw, "  %v\t%s\t%.1f\t%.1f\n", g.Key[0], commas(g.Values["n"].(int64)), g.Values["avg_ms"], g.Values["slowest_ms"])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "(one pass over the stored bytes, reading only level and ms; with an index on level, a count reads index entries alone)")
	return nil
}

var errDemoRollback = errors.New("demo: stop here, roll back")

// demoTransaction publishes a draft page and logs it in one Update, then
// shows a failing Update leaving both collections untouched.
func (a *app) demoTransaction(w io.Writer, db *storh.DB) error {
	pages, err := db.Docs(demoPages)
	if err != nil {
		return err
	}
	var draft storh.Record
	for rec, err := range pages.Stream(query.All().WhereEqual("published", false).Limit(1)) {
		if err != nil {
			return err
		}
		draft = rec
	}
	if draft.ID.IsZero() {
		return errors.New("demo: no draft page to publish")
	}
	data := draft.Data()
	data["published"] = true
	publish := func(fail bool) error {
		return db.Update(func(tx *storh.Tx) error {
			p, err := tx.Docs(demoPages)
			if err != nil {
				return err
			}
			l, err := tx.Log(demoEvents)
			if err != nil {
				return err
			}
			if _, err := p.PutWithID(draft.ID, data); err != nil {
				return err
			}
			if _, err := l.Put(storh.Map{"level": "info", "service": "cms", "method": "PUT",
				"path": "/pages/" + fmt.Sprint(data["slug"]), "status": int64(200), "ms": 3.5, "event": "page.published"}); err != nil {
				return err
			}
			if fail {
				return errDemoRollback
			}
			return nil
		})
	}
	counts := func() (int, int, error) {
		events, err := db.Log(demoEvents)
		if err != nil {
			return 0, 0, err
		}
		ne, err := events.Count()
		if err != nil {
			return 0, 0, err
		}
		np, err := pages.Count()
		return ne, np, err
	}
	fmt.Fprintf(w, "\n== Atomic transaction across both collections (DB.Update)\n")
	fmt.Fprintf(w, "publish draft page %q (replace it in %s) and append a page.published event to %s:\n", data["slug"], demoPages, demoEvents)
	if err := publish(false); err != nil {
		return err
	}
	ne, np, err := counts()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  committed together: %s events, %d pages (a replace adds no page)\n", commas(int64(ne)), np)
	if err := publish(true); !errors.Is(err, errDemoRollback) {
		return fmt.Errorf("demo: the failing transaction returned %v", err)
	}
	ne2, np2, err := counts()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  the same two writes, then an error: both rolled back (%s events, %d pages)\n", commas(int64(ne2)), np2)
	return nil
}
