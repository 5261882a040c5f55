package storh_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/query"
)

// migrateSource writes a store of every kind into the file at path: docs
// with a unique and a plain index, a log, and a queue with jobs pending,
// claimed, done and dead. n scales the docs and the log.
func migrateSource(t testing.TB, path string, n int) {
	t.Helper()
	db, err := storh.Open(path, storh.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	docs, err := db.Docs("pages", storh.WithIndex(storh.Index("slug").Unique()), storh.WithIndex(storh.Index("score")))
	if err != nil {
		t.Fatal(err)
	}
	events, err := db.Log("events")
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, n)
	for i := range items {
		items[i] = storh.Map{"slug": fmt.Sprintf("p-%05d", i), "score": i % 7, "tags": []any{"x", i % 3}}
	}
	if _, err := docs.PutMany(items); err != nil {
		t.Fatal(err)
	}
	for i := range items {
		items[i] = storh.Map{"n": i, "at": time.UnixMilli(int64(i)).UTC(), "blob": []byte{byte(i), 0, 0xff}}
	}
	if _, err := events.PutMany(items); err != nil {
		t.Fatal(err)
	}
	jobs, err := db.Queue("jobs", storh.WithMaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if _, err := jobs.Enqueue(storh.Map{"job": i}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		j, err := jobs.Claim(time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 0:
			err = jobs.Complete(j.ID)
		case 1:
			err = jobs.Fail(j.ID, fmt.Sprintf("failure %d", i)) // its only attempt: dead
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// snapshot renders what a user of the store sees: the collections, every
// record's id and bytes, indexed queries (which must use their index), and
// the queue's counts and jobs in every state.
func snapshot(t testing.TB, path string) string {
	t.Helper()
	db, err := storh.Open(path, storh.WithReadOnly())
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	defer db.Close()
	var b strings.Builder
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Collections {
		fmt.Fprintf(&b, "%s %s %d records %d bytes %s..%s\n", c.Name, c.Kind, c.Records, c.Bytes, c.FirstID, c.LastID)
	}
	docs, err := db.Docs("pages")
	if err != nil {
		t.Fatal(err)
	}
	events, err := db.Log("events")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []storh.Collection{docs, events} {
		recs, err := c.Find(query.All())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			fmt.Fprintf(&b, "%s %s\n", r.ID, hex.EncodeToString(r.Raw()))
		}
	}
	for _, q := range []query.Query{
		query.All().WhereEqual("slug", "p-00007"),
		query.All().WhereEqual("score", 3).Limit(5),
		query.All().OrderBy("slug", query.Desc).Limit(3),
	} {
		recs, err := docs.Find(q.RequireIndex())
		if err != nil {
			t.Fatalf("indexed query: %v", err)
		}
		fmt.Fprintf(&b, "query: %v\n", ids(recs))
	}
	jobs, err := db.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	counts, err := jobs.Counts()
	p, c, d, x := counts.Pending, counts.Claimed, counts.Done, counts.Dead
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "jobs %d pending %d claimed %d done %d dead\n", p, c, d, x)
	for _, state := range []storh.JobState{storh.JobPending, storh.JobClaimed, storh.JobDone, storh.JobDead} {
		for j, err := range jobs.Jobs(state) {
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "job %s %v attempts %d lease %v changed %v %q %x\n", j.ID, j.State, j.Attempts, j.LeaseUntil, j.Changed, j.LastError, j.Raw())
		}
	}
	return b.String()
}

// verifyPath runs Verify on the store at path and fails on any problem.
func verifyPath(t testing.TB, path string) {
	t.Helper()
	db, err := storh.Open(path, storh.WithReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	verifyClean(t, db)
}

// A store goes from a file to PostgreSQL and back, and the file at the end
// holds the same bytes as the one at the start; every step verifies, and
// what a user sees is the same on all three.
func TestMigrateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	first, last := filepath.Join(dir, "first.db"), filepath.Join(dir, "last.db")
	url := pgtest.URL(t)
	migrateSource(t, first, 500)
	want := snapshot(t, first)

	var calls []storh.MigrateProgress
	rep, err := storh.Migrate(context.Background(), first, url, storh.WithMigrateBatch(100, 1<<20),
		storh.WithMigrateProgress(func(p storh.MigrateProgress) { calls = append(calls, p) }))
	if err != nil {
		t.Fatalf("file to PostgreSQL: %v", err)
	}
	if rep.Collections != 3 || rep.Records != 1012 || rep.Copied.Records != 1012 || rep.Copied.TotalRecords != 1012 || rep.ResumedAt != "" {
		t.Errorf("report: %+v", rep)
	}
	if rep.Source != first || strings.Contains(rep.Destination, "password") || !strings.HasPrefix(rep.Destination, "postgres://") {
		t.Errorf("report names %q and %q", rep.Source, rep.Destination)
	}
	if last := calls[len(calls)-1]; len(calls) < 10 || last.Phase != "verify" || last.Records != 1012 {
		t.Errorf("%d progress calls, the last %+v", len(calls), last)
	}
	if got := snapshot(t, url); got != want {
		t.Fatalf("on PostgreSQL:\n%.3000s\nwant\n%.3000s", got, want)
	}
	verifyPath(t, url)

	back, err := storh.Migrate(context.Background(), url, last)
	if err != nil {
		t.Fatalf("PostgreSQL to file: %v", err)
	}
	if back.Checksum != rep.Checksum || back.Keys != rep.Keys || back.Buckets != rep.Buckets {
		t.Errorf("the two migrations verified different stores: %x, %d keys, %d buckets against %x, %d, %d",
			back.Checksum, back.Keys, back.Buckets, rep.Checksum, rep.Keys, rep.Buckets)
	}
	if got := snapshot(t, last); got != want {
		t.Fatalf("back in a file:\n%.3000s\nwant\n%.3000s", got, want)
	}
	verifyPath(t, last)
	if a, b := boltDigest(t, first), boltDigest(t, last); a != b {
		t.Errorf("the file after the round trip differs from the first one: digest %s, was %s", b, a)
	}
	if a, b := boltDigest(t, first), digestPostgres(t, url); a != b {
		t.Errorf("PostgreSQL's store differs from the file: digest %s, file %s", b, a)
	}
}

// A file's blocked indexes, migrated to PostgreSQL, keep their layout
// there and keep working: writes journal and fold on the server (tiny
// folds, so that many do), readers in another process see them, and
// Verify is clean on both.
func TestMigratedBlockedIndexOnPostgres(t *testing.T) {
	tuneFor(t, tinyFolds)
	file := filepath.Join(t.TempDir(), "blocked.db")
	url := pgtest.URL(t)
	migrateSource(t, file, 200)
	if _, err := storh.Migrate(context.Background(), file, url); err != nil {
		t.Fatal(err)
	}
	db := openAt(t, url)
	docs, err := db.Docs("pages")
	if err != nil {
		t.Fatal(err)
	}
	if infos, _ := docs.Indexes(); len(infos) != 2 || infos[0].Layout != "blocks" || infos[1].Layout != "blocks" {
		t.Fatalf("Indexes on PostgreSQL = %+v; want both blocked", infos)
	}
	other := openAt(t, url) // a second DB: its views come from the journal
	otherDocs, err := other.Docs("pages")
	if err != nil {
		t.Fatal(err)
	}
	score3 := query.All().WhereEqual("score", 3).RequireIndex()
	want := 0
	for i := range 200 {
		if i%7 == 3 {
			want++
		}
	}
	for round := range 5 {
		var items []any
		for i := range 20 {
			n := 200 + round*20 + i
			items = append(items, storh.Map{"slug": fmt.Sprintf("p-%05d", n), "score": n % 7})
			if n%7 == 3 {
				want++
			}
		}
		if _, err := docs.PutMany(items); err != nil {
			t.Fatal(err)
		}
		if _, err := docs.PutMany([]any{storh.Map{"slug": "p-00001", "score": 0}}); !errors.Is(err, storh.ErrUniqueViolation) {
			t.Fatalf("a duplicate slug on PostgreSQL: %v; want ErrUniqueViolation", err)
		}
		for _, d := range []*storh.Docs{docs, otherDocs} {
			if n, err := d.CountMatching(score3); err != nil || n != want {
				t.Fatalf("round %d: CountMatching = %d, %v; want %d", round, n, err, want)
			}
		}
	}
	if infos, _ := docs.Indexes(); infos[0].Journaled >= infos[0].Entries {
		t.Errorf("no fold ran on PostgreSQL: %+v", infos)
	}
	verifyClean(t, db)
}

// A migration cancelled midway, several times, resumes each time where it
// stopped and copies nothing twice; one from a file that another process
// writes cannot start.
func TestMigrateResumesAfterCancel(t *testing.T) {
	dir := t.TempDir()
	src, url := filepath.Join(dir, "src.db"), pgtest.URL(t)
	migrateSource(t, src, 2000)
	var copied storh.MigrateProgress
	resumed := int64(0)
	for run := 1; ; run++ {
		ctx, cancel := context.WithCancel(context.Background())
		rep, err := storh.Migrate(ctx, src, url, storh.WithMigrateBatch(200, 1<<20),
			storh.WithMigrateProgress(func(p storh.MigrateProgress) {
				if p.Phase == "copy" && p.Batches == 3 {
					cancel()
				}
			}))
		cancel()
		copied.Keys += rep.Copied.Keys
		copied.Buckets += rep.Copied.Buckets
		copied.Records += rep.Copied.Records
		if run > 1 && (rep.ResumedAt == "" || rep.Copied.ResumedRecords < resumed || rep.Copied.ResumedRecords > rep.Copied.TotalRecords) {
			t.Errorf("run %d: resumed at %q with %d of %d records known copied (before: %d)",
				run, rep.ResumedAt, rep.Copied.ResumedRecords, rep.Copied.TotalRecords, resumed)
		}
		resumed = rep.Copied.ResumedRecords
		if err == nil {
			if run < 4 || resumed == 0 {
				t.Fatalf("finished in %d runs, resuming with %d records known copied; want more", run, resumed)
			}
			if copied.Keys != rep.Keys || copied.Buckets != rep.Buckets || copied.Records != rep.Records {
				t.Fatalf("the runs copied %d keys, %d buckets, %d records; the store has %d, %d, %d",
					copied.Keys, copied.Buckets, copied.Records, rep.Keys, rep.Buckets, rep.Records)
			}
			break
		}
		var se *storh.Error
		if !errors.Is(err, context.Canceled) || !errors.As(err, &se) || se.Op != "migrate" || !strings.Contains(se.Hint, "resume") {
			t.Fatalf("run %d: %v", run, err)
		}
		// Until it finishes, the destination cannot pass for a store.
		if db, err := storh.Open(url); err == nil {
			db.Close()
			t.Fatalf("run %d: Open of an unfinished destination succeeded", run)
		} else if !errors.Is(err, storh.ErrUnfinishedMigration) || !errors.As(err, &se) || !strings.Contains(se.Hint, "storh migrate") {
			t.Fatalf("run %d: Open of an unfinished destination: %v, want ErrUnfinishedMigration with a hint", run, err)
		}
	}
	if got, want := snapshot(t, url), snapshot(t, src); got != want {
		t.Fatalf("after resumed runs:\n%.3000s\nwant\n%.3000s", got, want)
	}
	verifyPath(t, url)

	// A source file held by a writer cannot be opened read-only.
	w, err := storh.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, err = storh.Migrate(context.Background(), src, filepath.Join(dir, "other.db"), storh.WithMigrateLockTimeout(50*time.Millisecond))
	checkErr(t, err, storh.ErrLocked)
}

const migrateChildEnv = "STORH_MIGRATE_CHILD"

// TestMigrateChild is the process TestMigrateResumesAfterKill kills: it
// migrates, printing a line per batch and dawdling after each.
func TestMigrateChild(t *testing.T) {
	spec := os.Getenv(migrateChildEnv)
	if spec == "" {
		t.Skip("run by TestMigrateResumesAfterKill")
	}
	src, dst, _ := strings.Cut(spec, "|")
	_, err := storh.Migrate(context.Background(), src, dst, storh.WithMigrateBatch(100, 1<<20),
		storh.WithMigrateProgress(func(p storh.MigrateProgress) {
			if p.Phase == "copy" {
				fmt.Printf("batch %d\n", p.Batches)
				time.Sleep(20 * time.Millisecond)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("finished")
}

// A migration from PostgreSQL to a file whose process is killed midway
// (SIGKILL: nothing of it runs after) resumes in the next run, and ends
// with the same store.
func TestMigrateResumesAfterKill(t *testing.T) {
	if os.Getenv(migrateChildEnv) != "" {
		t.Skip("the child's own run")
	}
	dir := t.TempDir()
	src, url, dst := filepath.Join(dir, "src.db"), pgtest.URL(t), filepath.Join(dir, "dst.db")
	migrateSource(t, src, 1500)
	if _, err := storh.Migrate(context.Background(), src, url); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMigrateChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), migrateChildEnv+"="+url+"|"+dst)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(out)
	killedAt := 0
	for lines.Scan() {
		var n int
		if _, err := fmt.Sscanf(lines.Text(), "batch %d", &n); err == nil && n == 5 {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killedAt = n
			break
		}
	}
	cmd.Wait()
	if killedAt == 0 {
		t.Fatal("the child ended before it copied 5 batches")
	}
	rep, err := storh.Migrate(context.Background(), url, dst, storh.WithMigrateBatch(100, 1<<20))
	if err != nil {
		t.Fatalf("resuming after the kill: %v", err)
	}
	if rep.ResumedAt == "" || rep.Copied.Keys >= rep.Keys {
		t.Errorf("the run after the kill resumed at %q and copied %d of %d keys", rep.ResumedAt, rep.Copied.Keys, rep.Keys)
	}
	if got, want := snapshot(t, dst), snapshot(t, src); got != want {
		t.Fatalf("after the kill and the resume:\n%.3000s\nwant\n%.3000s", got, want)
	}
	verifyPath(t, dst)
	if a, b := boltDigest(t, src), boltDigest(t, dst); a != b {
		t.Errorf("the file differs from the first one: digest %s, was %s", b, a)
	}
}

// A destination with data is refused and left as it was, on PostgreSQL and
// in a file, and so is a migration into its own source; a finished
// migration is not run twice.
func TestMigrateRefuses(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	migrateSource(t, src, 20)

	url := pgtest.SchemaURL(t)
	db := openPostgres(t, url)
	docs, err := db.Docs("mine")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := docs.Put(storh.Map{"a": 1}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before := digestPostgres(t, url)
	_, err = storh.Migrate(context.Background(), src, url)
	checkErr(t, err, storh.ErrNotEmpty, `"mine"`)
	var se *storh.Error
	if !errors.As(err, &se) || se.Op != "migrate" {
		t.Errorf("error %v is not a migrate *Error", err)
	}
	if after := digestPostgres(t, url); after != before {
		t.Error("a refused destination changed")
	}

	full := filepath.Join(dir, "full.db")
	migrateSource(t, full, 1)
	before = boltDigest(t, full)
	_, err = storh.Migrate(context.Background(), url, full)
	checkErr(t, err, storh.ErrNotEmpty)
	if after := boltDigest(t, full); after != before {
		t.Error("a refused destination file changed")
	}

	// The same store, however it is spelt.
	rel, err := filepath.Rel(mustGetwd(t), src)
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]string{{src, src}, {src, rel}, {url, url}, {url, url + "&application_name=x"}} {
		_, err := storh.Migrate(context.Background(), pair[0], pair[1])
		checkErr(t, err, storh.ErrInvalidOption, "same store")
	}
	if err := os.Link(src, filepath.Join(dir, "link.db")); err == nil {
		_, err := storh.Migrate(context.Background(), src, filepath.Join(dir, "link.db"))
		checkErr(t, err, storh.ErrInvalidOption, "same store")
	}

	// A finished migration is a store like any other.
	dst := filepath.Join(dir, "dst.db")
	if _, err := storh.Migrate(context.Background(), src, dst); err != nil {
		t.Fatal(err)
	}
	_, err = storh.Migrate(context.Background(), src, dst)
	checkErr(t, err, storh.ErrNotEmpty)

	// A source that does not exist is not created.
	_, err = storh.Migrate(context.Background(), filepath.Join(dir, "missing.db"), filepath.Join(dir, "new.db"))
	checkErr(t, err, storh.ErrNotFound)
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the missing source was created: %v", err)
	}
}

func mustGetwd(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// A source written between an interrupted run and the next (a collection
// added before the point the copy had reached) fails the verification at
// the end, naming the collection; the destination stays unfinished.
func TestMigrateVerificationFindsChanges(t *testing.T) {
	dir := t.TempDir()
	src, url := filepath.Join(dir, "src.db"), pgtest.SchemaURL(t)
	migrateSource(t, src, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := storh.Migrate(ctx, src, url, storh.WithMigrateBatch(100, 1<<20),
		storh.WithMigrateProgress(func(p storh.MigrateProgress) {
			if p.Batches == 4 {
				cancel()
			}
		}))
	checkErr(t, err, context.Canceled)
	db, err := storh.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	early, err := db.Docs("early") // sorts before "events", copied first
	if err == nil {
		_, err = early.Put(storh.Map{"late": true})
	}
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for range 2 {
		_, err = storh.Migrate(context.Background(), src, url)
		var mm *storh.MigrateMismatch
		if !errors.As(err, &mm) || mm.Collection != "early" || !errors.Is(err, storh.ErrMismatch) {
			t.Fatalf("resumed after a write to the source: %v; want a mismatch in \"early\"", err)
		}
		var se *storh.Error
		if !errors.As(err, &se) || se.Op != "migrate" || se.Collection != "early" || !strings.Contains(se.Hint, "empty the destination") {
			t.Errorf("error %#v", err)
		}
	}
	// Another source is refused by the unfinished destination.
	other := filepath.Join(dir, "other.db")
	migrateSource(t, other, 1)
	_, err = storh.Migrate(context.Background(), other, url)
	checkErr(t, err, storh.ErrNotEmpty, src)
}

// BenchmarkMigrate measures a migration of small records from a file to
// PostgreSQL and back; it reports records per second.
func BenchmarkMigrate(b *testing.B) {
	n := 100_000
	if s := os.Getenv("STORH_MIGRATE_RECORDS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	dir := b.TempDir()
	src := filepath.Join(dir, "src.db")
	db, err := storh.Open(src, storh.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	events, err := db.Log("events")
	if err != nil {
		b.Fatal(err)
	}
	items := make([]any, 1000)
	for i := 0; i < n; i += len(items) {
		for j := range items {
			items[j] = storh.Map{"n": i + j, "service": "api", "status": 200}
		}
		if _, err := events.PutMany(items); err != nil {
			b.Fatal(err)
		}
	}
	db.Close()
	for i := 0; i < b.N; i++ {
		url := pgtest.URL(b)
		back := filepath.Join(dir, fmt.Sprintf("back%d.db", i))
		start := time.Now()
		if _, err := storh.Migrate(context.Background(), src, url); err != nil {
			b.Fatal(err)
		}
		toPG := time.Since(start)
		start = time.Now()
		if _, err := storh.Migrate(context.Background(), url, back); err != nil {
			b.Fatal(err)
		}
		fromPG := time.Since(start)
		b.ReportMetric(float64(n)/toPG.Seconds(), "records/s-to-pg")
		b.ReportMetric(float64(n)/fromPG.Seconds(), "records/s-from-pg")
	}
}
