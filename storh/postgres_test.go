package storh_test

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The PostgreSQL server starts on the first test that asks for one; the
// others never wait for it. TestMain also applies the index tuning of
// STORH_TEST_TUNE: CI runs the package once more with tiny blocks and
// folds, so that every test folds, splits and merges blocks.
func TestMain(m *testing.M) {
	flag.Parse()
	testkit.ShortRapid()
	if err := tune.FromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	startPostgresPass()
	os.Exit(pgtest.Run(m))
}

// openPostgres opens a fresh PostgreSQL store, closed when the test ends.
func openPostgres(t *testing.T, url string, opts ...storh.Option) *storh.DB {
	t.Helper()
	db, err := storh.Open(url, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// The front door on PostgreSQL: the same calls as on a file, and the same
// answers, through a reopen.
func TestPostgresDocs(t *testing.T) {
	url := pgtest.URL(t)
	db := openPostgres(t, url)
	docs, err := db.Docs("posts", storh.WithIndex(storh.Index("slug").Unique()), storh.WithIndex(storh.Index("score")))
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	items := make([]any, n)
	for i := range items {
		items[i] = storh.Map{"slug": fmt.Sprintf("post-%03d", i), "score": i % 10, "tags": []any{"go", fmt.Sprint(i % 3)}}
	}
	recs, err := docs.PutMany(items)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := docs.Count(); err != nil || c != n {
		t.Fatalf("Count = %d, %v; want %d", c, err, n)
	}
	got, err := docs.Get(recs[7].ID)
	if err != nil || got.Data()["slug"] != "post-007" || !bytes.Equal(got.Raw(), recs[7].Raw()) {
		t.Fatalf("Get = %v, %v", got.Data(), err)
	}
	// A cursor page and a time window are id ranges.
	page, err := docs.Find(query.All().After(recs[99].ID).Limit(50))
	if err != nil || len(page) != 50 || page[0].ID != recs[100].ID || page[49].ID != recs[149].ID {
		t.Fatalf("page after record 99: %d records, %v", len(page), err)
	}
	from, until := recs[10].ID.Time().UnixMilli(), recs[20].ID.Time().UnixMilli()
	window, err := docs.Find(query.All().TimeRangeMs(from, until))
	if err != nil || len(window) < 1 {
		t.Fatalf("window: %d records, %v", len(window), err)
	}
	for _, r := range window {
		if ms := r.ID.Time().UnixMilli(); ms < from || ms > until {
			t.Fatalf("window returned %s at %d ms, outside [%d, %d]", r.ID, ms, from, until)
		}
	}
	// Indexed queries, and the plan that says so.
	q := query.All().Where(query.Field("score").Eq(3)).Limit(100)
	hits, err := docs.Find(q)
	if err != nil || len(hits) != n/10 {
		t.Fatalf("score = 3: %d records, %v", len(hits), err)
	}
	plan, err := docs.Explain(q)
	if err != nil || len(plan.Indexes) != 1 {
		t.Fatalf("Explain: %+v, %v", plan, err)
	}
	if _, err := docs.Put(storh.Map{"slug": "post-001"}); !errors.Is(err, storh.ErrUniqueViolation) {
		t.Fatalf("duplicate slug: %v, want ErrUniqueViolation", err)
	}
	if err := docs.Delete(recs[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := docs.Get(recs[0].ID); !errors.Is(err, storh.ErrNotFound) {
		t.Fatalf("Get of a deleted record: %v", err)
	}
	// A failed transaction writes nothing.
	boom := errors.New("boom")
	err = db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("posts")
		if err != nil {
			return err
		}
		if _, err := d.Put(storh.Map{"slug": "never"}); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("Update returned %v, want the callback's error", err)
	}
	rep, err := db.Verify(func(p storh.Problem) { t.Errorf("Verify: %v", p) })
	if err != nil || rep.Problems != 0 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}

	// Everything is in the server, not in the process.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openPostgres(t, url)
	docs, err = db.Docs("posts")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := docs.Count(); err != nil || c != n-1 {
		t.Fatalf("after reopen: Count = %d, %v; want %d", c, err, n-1)
	}
	if hits, err := docs.Find(query.All().Where(query.Field("slug").Eq("never"))); err != nil || len(hits) != 0 {
		t.Fatalf("the rolled back put is there: %d, %v", len(hits), err)
	}
	if r, err := docs.First(query.All().Where(query.Field("slug").Eq("post-150"))); err != nil || r.ID != recs[150].ID {
		t.Fatalf("by slug after reopen: %v, %v", r.ID, err)
	}
}

func TestPostgresQueue(t *testing.T) {
	db := openPostgres(t, pgtest.URL(t))
	q, err := db.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := q.EnqueueMany([]any{storh.Map{"n": 1}, storh.Map{"n": 2}, storh.Map{"n": 3}})
	if err != nil {
		t.Fatal(err)
	}
	job, err := q.Claim(time.Minute)
	if err != nil || job.ID != ids[0] {
		t.Fatalf("Claim = %v, %v; want the oldest job %v", job.ID, err, ids[0])
	}
	if err := q.Complete(job.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Counts(); err != nil || n != (storh.QueueCounts{Pending: 2, Done: 1}) {
		t.Fatalf("Counts = %+v, %v", n, err)
	}
}

// Two DBs on one URL are two processes sharing the store: their writers
// conflict on the collection's counters, the engine runs the losers'
// transactions again, and nothing is lost or counted twice.
func TestPostgresConcurrentStores(t *testing.T) {
	skipUnderInvariants(t)
	url := pgtest.URL(t)
	dbs := []*storh.DB{openPostgres(t, url), openPostgres(t, url)}
	const writers, each = 8, 25
	var mu sync.Mutex
	var acked []uuidv7.UUID
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			docs, err := dbs[w%2].Docs("shared")
			if err != nil {
				errs <- err
				return
			}
			for i := range each {
				r, err := docs.Put(storh.Map{"w": w, "i": i})
				if err != nil {
					errs <- fmt.Errorf("writer %d put %d: %w", w, i, err)
					return
				}
				mu.Lock()
				acked = append(acked, r.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	docs, err := dbs[0].Docs("shared")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := docs.Count(); err != nil || c != writers*each {
		t.Fatalf("Count = %d, %v; want %d", c, err, writers*each)
	}
	for _, id := range acked {
		if _, err := docs.Get(id); err != nil {
			t.Fatalf("acknowledged %s: %v", id, err)
		}
	}
}

// What only a file has fails with ErrUnsupported, and says why.
func TestPostgresUnsupported(t *testing.T) {
	url := pgtest.URL(t)
	if _, err := storh.Open(url, storh.WithMaxSize(1<<20)); !errors.Is(err, storh.ErrUnsupported) {
		t.Errorf("Open with WithMaxSize: %v, want ErrUnsupported", err)
	}
	db := openPostgres(t, url, storh.WithoutSync()) // synchronous_commit=off
	var buf bytes.Buffer
	if _, err := db.Backup(&buf); !errors.Is(err, storh.ErrUnsupported) {
		t.Errorf("Backup: %v, want ErrUnsupported", err)
	}
	if _, err := db.BackupFile(t.TempDir() + "/copy.db"); !errors.Is(err, storh.ErrUnsupported) {
		t.Errorf("BackupFile: %v, want ErrUnsupported", err)
	}
	if _, err := storh.Compact(url, t.TempDir()+"/c.db"); !errors.Is(err, storh.ErrUnsupported) {
		t.Errorf("Compact: %v, want ErrUnsupported", err)
	}
}

// No password of the URL reaches an error message, in whatever form pgx
// takes it, and the error still says what went wrong. A keyword/value
// connection string, which Open would take for a file's name, is refused.
func TestPostgresOpenErrorHidesPassword(t *testing.T) {
	const base = "postgres://app@/nosuchdb?host=/nonexistent-dir&connect_timeout=1"
	unreachable := "no such file or directory"
	for _, tc := range []struct {
		path    string
		secrets []string
		says    string
	}{
		{"postgres://app:hunter2@/nosuchdb?host=/nonexistent-dir&connect_timeout=1", nil, unreachable},
		{base + "&password=hunter2", nil, unreachable},
		{base + "&password=first1&password=hunter2", []string{"first1"}, unreachable},
		{base + "&pass%77ord=hunter2", nil, unreachable},
		{base + "&password=hunter%32", []string{"hunter%32"}, unreachable},
		{base + "&sslpassword=hunter2", nil, unreachable},
		{base + "&application_name=hunter2&password=hunter2", nil, "application_name=hunter2&password=xxxxx"},
		{base + "&password=hunter2&port=abc", nil, "invalid port"},
		{"postgres://app:hun/ter2@/nosuchdb?host=/nonexistent-dir", []string{"hun/ter2", "ter2"}, "invalid port"},
		{"host=/nonexistent-dir user=app password=hunter2 dbname=x", nil, "keyword/value"},
		{"host=/nonexistent-dir password = 'hun ter2' dbname=x", []string{"hun ter2", "ter2"}, "keyword/value"},
	} {
		_, err := storh.Open(tc.path)
		if err == nil {
			t.Errorf("Open(%q) succeeded", tc.path)
			continue
		}
		msg := err.Error()
		for _, secret := range append(tc.secrets, "hunter2") {
			if strings.Count(msg, secret) > strings.Count(storh.Redact(tc.path), secret) {
				t.Errorf("Open(%q): the error shows %q: %s", tc.path, secret, msg)
			}
		}
		if !strings.Contains(msg, tc.says) || !strings.Contains(msg, storh.Redact(tc.path)) {
			t.Errorf("Open(%q) = %s; want it to name %s and say %q", tc.path, msg, storh.Redact(tc.path), tc.says)
		}
		if strings.HasPrefix(tc.path, "host=") && !errors.Is(err, storh.ErrInvalidOption) {
			t.Errorf("Open(%q) = %v, want ErrInvalidOption", tc.path, err)
		}
	}
}

// Four processes write and work a queue at once on one PostgreSQL store,
// and one of them is killed with SIGKILL in the middle. Afterwards every
// write a process acknowledged is there exactly once, no batch is there in
// part, and every acknowledged completion stuck.
func TestPostgresManyProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("the child's own run")
	}
	skipUnderInvariants(t)
	url := pgtest.URL(t)
	const procs, rounds = 4, 40
	type child struct {
		cmd  *exec.Cmd
		out  *bufio.Scanner
		done chan []string
	}
	children := make([]*child, procs)
	for i := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPostgresManyProcessesChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d|%d", childEnv, url, i, rounds))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A failing test must not leave children writing to a server
		// that stops when the test binary ends.
		t.Cleanup(func() { cmd.Process.Kill() })
		c := &child{cmd: cmd, out: bufio.NewScanner(stdout), done: make(chan []string, 1)}
		children[i] = c
	}
	victimReady := make(chan struct{})
	victimGone := make(chan struct{})
	for i, c := range children {
		go func() {
			if i == 0 {
				defer close(victimGone)
			}
			var lines []string
			for c.out.Scan() {
				line := c.out.Text()
				if kind, _, _ := strings.Cut(line, " "); kind != "put" && kind != "job" && kind != "done" {
					fmt.Fprintf(os.Stderr, "child %d: %s\n", i, line) // the test framework's, or a failure
					continue
				}
				lines = append(lines, line)
				if i == 0 && len(lines) == 10 {
					close(victimReady)
				}
			}
			c.done <- lines
		}()
	}
	// Kill the first child mid-run: after it has acknowledged a few
	// writes, while it is writing more.
	select {
	case <-victimReady:
	case <-victimGone:
		t.Fatal("the first child ended before it acknowledged ten writes")
	}
	children[0].cmd.Process.Signal(syscall.SIGKILL)
	acked := map[string][]string{} // kind → ids
	for i, c := range children {
		lines := <-c.done
		err := c.cmd.Wait()
		if i > 0 && err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		for _, l := range lines {
			kind, ids, _ := strings.Cut(l, " ")
			acked[kind] = append(acked[kind], strings.Split(ids, ",")...)
		}
	}

	db := openPostgres(t, url)
	docs, err := db.Docs("shared")
	if err != nil {
		t.Fatal(err)
	}
	batches := map[string]int{}
	seen := map[uuidv7.UUID]bool{}
	for r, err := range docs.Stream(query.All()) {
		if err != nil {
			t.Fatal(err)
		}
		if seen[r.ID] {
			t.Fatalf("record %s twice", r.ID)
		}
		seen[r.ID] = true
		batches[fmt.Sprint(r.Data()["batch"])]++
	}
	for b, n := range batches {
		if n != 3 {
			t.Errorf("batch %s has %d of its 3 records", b, n)
		}
	}
	for _, s := range acked["put"] {
		if !seen[uuidv7.MustParse(s)] {
			t.Errorf("acknowledged record %s is missing", s)
		}
	}
	if c, err := docs.Count(); err != nil || c != len(seen) {
		t.Errorf("Count = %d, %v; the collection holds %d", c, err, len(seen))
	}
	q, err := db.Queue("work")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range acked["job"] {
		if _, err := q.Lookup(uuidv7.MustParse(s)); err != nil {
			t.Errorf("acknowledged job %s: %v", s, err)
		}
	}
	for _, s := range acked["done"] {
		if j, err := q.Lookup(uuidv7.MustParse(s)); err != nil || j.State != storh.JobDone {
			t.Errorf("acknowledged completion of %s: state %v, %v", s, j.State, err)
		}
	}
	rep, err := db.Verify(func(p storh.Problem) { t.Errorf("Verify: %v", p) })
	if err != nil || rep.Problems != 0 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	if len(acked["put"]) < (procs-1)*rounds*3 {
		t.Fatalf("only %d acknowledged records: the children did not run", len(acked["put"]))
	}
}

const childEnv = "STORH_PG_CHILD"

// skipUnderInvariants skips the tests of writers in several processes
// under the storh_invariants tag: its checks read every record of a
// collection before each commit, and a serializable transaction that
// read everything conflicts with every concurrent writer, so busy
// writers rerun until they give up. The checks are about the engine's
// logic, which the single-process tests cover on this backend.
func skipUnderInvariants(t *testing.T) {
	t.Helper()
	if engine.Invariants {
		t.Skip("storh_invariants: every commit reads the whole collection, which conflicts with every writer in another process")
	}
}

// TestPostgresManyProcessesChild is one process of
// TestPostgresManyProcesses: it writes batches, enqueues, claims and
// completes, and prints each acknowledged write on stdout.
func TestPostgresManyProcessesChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("run by TestPostgresManyProcesses")
	}
	parts := strings.Split(spec, "|")
	worker, rounds := parts[1], 0
	fmt.Sscan(parts[2], &rounds)
	db, err := storh.Open(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	docs, err := db.Docs("shared")
	if err != nil {
		t.Fatal(err)
	}
	q, err := db.Queue("work")
	if err != nil {
		t.Fatal(err)
	}
	for i := range rounds {
		batch := worker + "/" + fmt.Sprint(i)
		recs, err := docs.PutMany([]any{storh.Map{"batch": batch}, storh.Map{"batch": batch}, storh.Map{"batch": batch}})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("put %s,%s,%s\n", recs[0].ID, recs[1].ID, recs[2].ID)
		id, err := q.Enqueue(storh.Map{"from": batch})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("job %s\n", id)
		job, err := q.Claim(time.Minute)
		if errors.Is(err, storh.ErrEmpty) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Complete(job.ID); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("done %s\n", job.ID)
	}
}

// A DB remembers a collection's buckets between reads. Another process
// that drops the collection and makes it again, or adds an index to it,
// leaves the DB's reads right: a query, a stream and a count see the
// collection as it is now; only a View callback that had opened it
// before its first read fails, with kv.ErrStale, and runs again cleanly.
func TestPostgresReadAfterRecreate(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openPostgres(t, url), openPostgres(t, url)
	put := func(db *storh.DB, n int) []uuidv7.UUID {
		t.Helper()
		docs, err := db.Docs("x")
		if err != nil {
			t.Fatal(err)
		}
		var ids []uuidv7.UUID
		for i := range n {
			rec, err := docs.Put(storh.Map{"n": i})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, rec.ID)
		}
		return ids
	}
	put(a, 3)
	docs, err := a.Docs("x")
	if err != nil {
		t.Fatal(err)
	}
	if page, err := docs.Find(query.All()); err != nil || len(page) != 3 {
		t.Fatalf("Find: %d records, %v", len(page), err)
	}

	// Made again with other records: the next query reads them.
	if err := b.Drop("x"); err != nil {
		t.Fatal(err)
	}
	want := put(b, 5)
	page, err := docs.Find(query.All())
	if err != nil || len(page) != 5 || page[0].ID != want[0] {
		t.Fatalf("Find after the collection was made again: %d records, %v", len(page), err)
	}

	// An index added by the other process: the query is answered, by it.
	bd, err := b.Docs("x", storh.WithIndex(storh.Index("n")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bd.Put(storh.Map{"n": 7}); err != nil { // builds the index
		t.Fatal(err)
	}
	got, err := docs.Find(query.All().Where(query.Field("n").Eq(7)).RequireIndex())
	if err != nil || len(got) != 1 {
		t.Fatalf("Find by the new index: %d records, %v", len(got), err)
	}
	if n, err := docs.Count(); err != nil || n != 6 {
		t.Fatalf("Count = %d, %v", n, err)
	}

	// Dropped and made again between a View's open and its first read.
	if err := b.Drop("x"); err != nil {
		t.Fatal(err)
	}
	put(b, 2)
	var n int
	view := func() error {
		return a.View(func(tx *storh.Tx) error {
			d, err := tx.Docs("x")
			if err != nil {
				return err
			}
			n, err = d.Count()
			return err
		})
	}
	if err := view(); !errors.Is(err, kv.ErrStale) {
		t.Fatalf("View that opened the collection before it was made again: %v, want kv.ErrStale", err)
	}
	if err := view(); err != nil || n != 2 {
		t.Fatalf("View run again: Count %d, %v", n, err)
	}
}

// A DB that has read a collection another process then drops finds it
// gone: opening it WithoutCreate fails with ErrNotFound, though the DB's
// first look, from what it remembered, found it there.
func TestPostgresOpenAfterDrop(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openPostgres(t, url), openPostgres(t, url)
	if _, err := mustDocs(t, b, "x").Put(storh.Map{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if n := mustCount(t, mustDocs(t, a, "x")); n != 1 {
		t.Fatalf("Count = %d", n)
	}
	if err := b.Drop("x"); err != nil {
		t.Fatal(err)
	}
	_, err := a.Docs("x", storh.WithoutCreate())
	checkErr(t, err, storh.ErrNotFound, `"x"`)
}

func mustDocs(t *testing.T, db *storh.DB, name string) *storh.Docs {
	t.Helper()
	d, err := db.Docs(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
