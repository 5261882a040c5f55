package storh_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The PostgreSQL server starts on the first test that asks for one; the
// others never wait for it.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

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
	if p, c, d, x, err := q.Counts(); err != nil || p != 2 || c != 0 || d != 1 || x != 0 {
		t.Fatalf("Counts = %d %d %d %d, %v", p, c, d, x, err)
	}
}

// Two DBs on one URL are two processes sharing the store: their writers
// conflict on the collection's counters, the engine runs the losers'
// transactions again, and nothing is lost or counted twice.
func TestPostgresConcurrentStores(t *testing.T) {
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

// The URL's password never reaches an error message.
func TestPostgresOpenErrorHidesPassword(t *testing.T) {
	_, err := storh.Open("postgres://app:s3cret@/nosuchdb?host=/nonexistent-dir&connect_timeout=1")
	if err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
	if bytes.Contains([]byte(err.Error()), []byte("s3cret")) {
		t.Fatalf("the error shows the password: %v", err)
	}
}
