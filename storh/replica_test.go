package storh_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The tests of reads from a hot standby name their servers themselves
// (pgtest.Standby), so they run in the file pass only.
func standby(t *testing.T) *pgtest.Pair {
	t.Helper()
	skipOnPostgresPass(t)
	return pgtest.Standby(t)
}

// replicaLogStart is the time of the first id of the log the replica
// tests write: one id per millisecond from there.
const replicaLogStart = 1_700_000_000_000

// writeReplicaData writes round 1 or 2 of what the replica tests read:
// documents with a unique and a plain index, a log, a queue with jobs in
// every state, and a collection that round 2 drops while it adds an
// index and records.
func writeReplicaData(db *storh.DB, round int) error {
	indexes := []storh.CollectionOption{storh.WithIndex(storh.Index("slug").Unique()), storh.WithIndex(storh.Index("score"))}
	if round == 2 {
		indexes = append(indexes, storh.WithIndex(storh.Index("title")))
	}
	posts, err := db.Docs("posts", indexes...)
	if err != nil {
		return err
	}
	var items []any
	for i := range 20 {
		n := (round-1)*20 + i
		items = append(items, storh.Map{"slug": fmt.Sprintf("p%02d", n), "score": n % 5, "title": fmt.Sprintf("post %d", n)})
	}
	recs, err := posts.PutMany(items)
	if err != nil {
		return err
	}
	if err := posts.Delete(recs[3].ID); err != nil {
		return err
	}
	if _, err := posts.PutWithID(recs[4].ID, storh.Map{"slug": fmt.Sprintf("rewritten %d", round), "score": 9, "title": "again"}); err != nil {
		return err
	}
	events, err := db.Log("events", storh.WithDeterministicIDs(uint64(round), replicaLogStart+int64(round-1)*1000))
	if err != nil {
		return err
	}
	items = items[:0]
	for i := range 30 {
		items = append(items, storh.Map{"n": i, "round": round})
	}
	if _, err := events.PutMany(items); err != nil {
		return err
	}
	if round == 2 {
		return db.Drop("gone")
	}
	gone, err := db.Docs("gone")
	if err != nil {
		return err
	}
	if _, err := gone.Put(storh.Map{"x": 1}); err != nil {
		return err
	}
	jobs, err := db.Queue("jobs", storh.WithMaxAttempts(1))
	if err != nil {
		return err
	}
	if _, err := jobs.EnqueueMany([]any{storh.Map{"j": 1}, storh.Map{"j": 2}, storh.Map{"j": 3}, storh.Map{"j": 4}, storh.Map{"j": 5}}); err != nil {
		return err
	}
	claimed, err := jobs.ClaimMany(3, time.Hour)
	if err != nil {
		return err
	}
	if err := jobs.Complete(claimed[0].ID); err != nil {
		return err
	}
	return jobs.Fail(claimed[1].ID, "broken")
}

// readReplica reads what writeReplicaData wrote through every read API
// and describes the answers: two stores that hold the same data describe
// it alike.
func readReplica(db *storh.DB) (string, error) {
	var b strings.Builder
	say := func(what string, v ...any) { fmt.Fprintf(&b, "%s: %v\n", what, v) }
	records := func(what string, seq func(func(storh.Record, error) bool)) error {
		var out []string
		for r, err := range seq {
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			out = append(out, fmt.Sprintf("%s %v", r.ID, r.Data()))
		}
		say(what, out)
		return nil
	}
	cols, err := db.Collections()
	if err != nil {
		return "", fmt.Errorf("Collections: %w", err)
	}
	say("Collections", cols)
	if _, err := db.Stats(); err != nil { // its path and commits are the DB's own
		return "", fmt.Errorf("Stats: %w", err)
	}

	posts, err := db.Docs("posts")
	if err != nil {
		return "", fmt.Errorf("Docs: %w", err)
	}
	n, err := posts.Count()
	if err != nil {
		return "", fmt.Errorf("Count: %w", err)
	}
	stats, err := posts.Stats()
	if err != nil {
		return "", fmt.Errorf("Stats: %w", err)
	}
	ixs, err := posts.Indexes()
	if err != nil {
		return "", fmt.Errorf("Indexes: %w", err)
	}
	say("posts", n, stats, ixs)
	first, err := posts.First(query.All())
	if err != nil {
		return "", fmt.Errorf("First: %w", err)
	}
	got, err := posts.Get(first.ID)
	if err != nil {
		return "", fmt.Errorf("Get: %w", err)
	}
	var raw []byte
	if err := posts.GetRaw(first.ID, func(r []byte) error { raw = append(raw, r...); return nil }); err != nil {
		return "", fmt.Errorf("GetRaw: %w", err)
	}
	say("Get", got.ID, got.Data(), raw)
	for _, q := range []query.Query{
		query.All().WhereEqual("slug", "p07"),
		query.All().Where(query.Field("score").Between(1, 2)).OrderBy("score", query.Desc),
		query.All().WhereEqual("title", "post 25"),
		query.All().Reverse().Limit(4),
	} {
		found, err := posts.Find(q)
		if err != nil {
			return "", fmt.Errorf("Find(%s): %w", q, err)
		}
		count, err := posts.CountMatching(q)
		if err != nil {
			return "", fmt.Errorf("CountMatching(%s): %w", q, err)
		}
		plan, err := posts.Explain(q)
		if err != nil {
			return "", fmt.Errorf("Explain(%s): %w", q, err)
		}
		var ids []uuidv7.UUID
		for _, r := range found {
			ids = append(ids, r.ID)
		}
		say("Find "+q.String(), ids, count, plan.Indexes)
	}
	if err := records("Stream posts", posts.Stream(query.All())); err != nil {
		return "", err
	}
	var scanned int
	if err := posts.ScanRaw(query.All(), func(uuidv7.UUID, []byte) error { scanned++; return nil }); err != nil {
		return "", fmt.Errorf("ScanRaw: %w", err)
	}
	say("ScanRaw", scanned)

	events, err := db.Log("events")
	if err != nil {
		return "", fmt.Errorf("Log: %w", err)
	}
	for _, q := range []query.Query{
		query.All().TimeRangeMs(replicaLogStart+5, replicaLogStart+9),
		query.All().TimeRangeMs(replicaLogStart+1000, replicaLogStart+1003).Reverse(),
		query.All().After(first.ID).Limit(3),
	} {
		if err := records("Stream events "+q.String(), events.Stream(q)); err != nil {
			return "", err
		}
	}

	jobs, err := db.Queue("jobs")
	if err != nil {
		return "", fmt.Errorf("Queue: %w", err)
	}
	qs, err := jobs.Stats()
	if err != nil {
		return "", fmt.Errorf("Queue.Stats: %w", err)
	}
	counts, err := jobs.Counts()
	pending, claimed, done, dead := counts.Pending, counts.Claimed, counts.Done, counts.Dead
	if err != nil {
		return "", fmt.Errorf("Counts: %w", err)
	}
	say("jobs", qs, pending, claimed, done, dead)
	for _, state := range []storh.JobState{storh.JobPending, storh.JobClaimed, storh.JobDone, storh.JobDead} {
		var list []string
		for j, err := range jobs.Jobs(state) {
			if err != nil {
				return "", fmt.Errorf("Jobs(%v): %w", state, err)
			}
			looked, err := jobs.Lookup(j.ID)
			if err != nil {
				return "", fmt.Errorf("Lookup: %w", err)
			}
			list = append(list, fmt.Sprintf("%s %v %d %s %v", j.ID, j.State, j.Attempts, j.LastError, looked.State))
		}
		say("Jobs", state, list)
	}

	_, err = db.Docs("gone", storh.WithoutCreate())
	say("gone", errors.Is(err, storh.ErrNotFound))
	err = db.View(func(tx *storh.Tx) error {
		p, err := tx.Docs("posts")
		if err != nil {
			return err
		}
		r, err := p.Get(first.ID)
		say("View", r.ID, err)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("View: %w", err)
	}
	rep, err := db.Verify(nil)
	if err != nil {
		return "", fmt.Errorf("Verify: %w", err)
	}
	say("Verify", rep.Problems)
	return b.String(), nil
}

// sameReads checks that reader answers every read as want does.
func sameReads(t *testing.T, what string, want, reader *storh.DB) {
	t.Helper()
	w, err := readReplica(want)
	if err != nil {
		t.Fatalf("%s: reading the primary: %v", what, err)
	}
	g, err := readReplica(reader)
	if err != nil {
		t.Fatalf("%s: reading the standby: %v", what, err)
	}
	if g != w {
		t.Errorf("%s: the standby reads\n%s\nthe primary\n%s", what, g, w)
	}
}

// Every read API answers on a hot standby as on the primary, once the
// standby has replayed the primary's writes, through later writes that
// add an index and drop a collection; every write there fails with
// ErrReadOnly.
func TestStandbyReads(t *testing.T) {
	p := standby(t)
	writer := openPostgres(t, p.Primary)
	if err := writeReplicaData(writer, 1); err != nil {
		t.Fatal(err)
	}
	p.CatchUp(t)
	reader := openPostgres(t, p.Standby, storh.WithReadOnly())
	sameReads(t, "round 1", writer, reader)
	if err := writeReplicaData(writer, 2); err != nil {
		t.Fatal(err)
	}
	p.CatchUp(t)
	sameReads(t, "round 2", writer, reader)
	refusesWrites(t, reader)
}

// refusesWrites checks that every write on db fails with ErrReadOnly.
func refusesWrites(t *testing.T, db *storh.DB) {
	t.Helper()
	posts, err := db.Docs("posts")
	if err != nil {
		t.Fatal(err)
	}
	events, err := db.Log("events")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := db.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	some, err := posts.First(query.All())
	if err != nil {
		t.Fatal(err)
	}
	for name, write := range map[string]func() error{
		"Put":             func() error { _, err := posts.Put(storh.Map{"a": 1}); return err },
		"PutWithID":       func() error { _, err := posts.PutWithID(some.ID, storh.Map{"a": 1}); return err },
		"PutMany":         func() error { _, err := events.PutMany([]any{storh.Map{"a": 1}}); return err },
		"Delete":          func() error { return posts.Delete(some.ID) },
		"DeleteMatching":  func() error { _, err := posts.DeleteMatching(query.All()); return err },
		"DeleteBefore":    func() error { _, err := events.DeleteBefore(time.Now()); return err },
		"DropIndex":       func() error { return posts.DropIndex("score") },
		"Drop":            func() error { return db.Drop("posts") },
		"Update":          func() error { return db.Update(func(*storh.Tx) error { panic("the callback must not run") }) },
		"Enqueue":         func() error { _, err := jobs.Enqueue(storh.Map{"j": 0}); return err },
		"Claim":           func() error { _, err := jobs.Claim(time.Minute); return err },
		"RequeueExpired":  func() error { _, err := jobs.RequeueExpired(); return err },
		"Repair":          func() error { _, err := db.Repair(nil); return err },
		"a new index":     func() error { _, err := db.Docs("posts", storh.WithIndex(storh.Index("new"))); return err },
		"a write in View": func() error { return db.View(func(tx *storh.Tx) error { return putIn(tx) }) },
	} {
		if err := write(); !errors.Is(err, storh.ErrReadOnly) {
			t.Errorf("%s on a read-only standby: %v, want ErrReadOnly", name, err)
		}
	}
	if _, err := db.Docs("new"); !errors.Is(err, storh.ErrNotFound) {
		t.Errorf("a new collection on a read-only standby: %v, want ErrNotFound", err)
	}
}

func putIn(tx *storh.Tx) error {
	d, err := tx.Docs("posts")
	if err != nil {
		return err
	}
	_, err = d.Put(storh.Map{"a": 1})
	return err
}

// The writer is another process: what it commits on the primary reaches
// the standby, where this process reads it as the primary shows it.
func TestStandbyReadsTwoProcesses(t *testing.T) {
	if os.Getenv(replicaChildEnv) != "" {
		t.Skip("the child's own run")
	}
	p := standby(t)
	cmd, in, out := startChild(t, "TestStandbyWriterChild", replicaChildEnv+"="+p.Primary)
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	answers := bufio.NewScanner(out)
	round := func(n int) {
		t.Helper()
		fmt.Fprintln(in, n)
		for answers.Scan() {
			switch line := answers.Text(); {
			case line == "ok":
				return
			case strings.HasPrefix(line, "err "):
				t.Fatalf("the writer's round %d: %s", n, line)
			}
		}
		t.Fatalf("the writer is gone: %v", answers.Err())
	}
	round(1)
	p.CatchUp(t)
	// The primary read-only too: a read-only store on a primary.
	primary := openPostgres(t, p.Primary, storh.WithReadOnly())
	reader := openPostgres(t, p.Standby, storh.WithReadOnly())
	sameReads(t, "round 1", primary, reader)
	round(2)
	p.CatchUp(t)
	sameReads(t, "round 2", primary, reader)
	before := digestPostgres(t, p.Primary)
	refusesWrites(t, primary)
	if digestPostgres(t, p.Primary) != before {
		t.Error("writes refused by a read-only DB on the primary changed the store")
	}
}

const replicaChildEnv = "STORH_REPLICA_WRITER"

// TestStandbyWriterChild is the writer of TestStandbyReadsTwoProcesses:
// it writes the round each line of its input names, and answers "ok".
func TestStandbyWriterChild(t *testing.T) {
	url := os.Getenv(replicaChildEnv)
	if url == "" {
		t.Skip("run by TestStandbyReadsTwoProcesses")
	}
	db, err := storh.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var n int
		if _, err := fmt.Sscan(in.Text(), &n); err != nil {
			fmt.Println("err", err)
			continue
		}
		if err := writeReplicaData(db, n); err != nil {
			fmt.Println("err", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Println("ok")
	}
}

// A read-only open creates nothing: a search_path naming no schema that
// exists, and a schema without a store, fail with ErrNotFound naming what
// is missing, and leave the database as it was. A hot standby opened to
// write fails with ErrReadOnly.
func TestReadOnlyOpenCreatesNothing(t *testing.T) {
	p := standby(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.Primary)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tables := func() int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	missing := strings.Replace(p.Primary, "search_path=", "search_path=nowhere_", 1)
	_, err = storh.Open(missing, storh.WithReadOnly())
	checkErr(t, err, storh.ErrNotFound, "no schema", `"nowhere_`)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname LIKE 'nowhere_%')").Scan(&exists); err != nil || exists {
		t.Errorf("a read-only open made the schema (%v, %v)", exists, err)
	}
	for _, url := range []string{p.Primary, p.Standby} {
		_, err = storh.Open(url, storh.WithReadOnly())
		checkErr(t, err, storh.ErrNotFound, "storh_buckets", "without storh.WithReadOnly")
	}
	if n := tables(); n != 0 {
		t.Errorf("a read-only open made %d tables", n)
	}

	writer := openPostgres(t, p.Primary)
	if _, err := writer.Log("events"); err != nil {
		t.Fatal(err)
	}
	p.CatchUp(t)
	_, err = storh.Open(p.Standby)
	checkErr(t, err, storh.ErrReadOnly, "hot standby", "WithReadOnly", "WithReadURL")
	_, err = storh.Open(p.Primary, storh.WithReadURL(p.Primary))
	checkErr(t, err, storh.ErrInvalidOption, "not a hot standby")
	_, err = storh.Open(newPathFile(t), storh.WithReadURL(p.Standby))
	checkErr(t, err, storh.ErrUnsupported, "read URL")
}

// newPathFile is a path for a new database file, whatever the pass.
func newPathFile(t *testing.T) string { return t.TempDir() + "/test.db" }

// A watch on a hot standby, which no notification reaches, delivers what
// the primary commits once the standby has replayed it: from a cursor,
// every record after it, a rewritten document again with its new data;
// from now, none of what was there before it began.
func TestStandbyWatch(t *testing.T) {
	p := standby(t)
	writer := openPostgres(t, p.Primary)
	posts := mustDocs(t, writer, "posts")
	before, err := posts.Put(storh.Map{"n": -1})
	if err != nil {
		t.Fatal(err)
	}
	p.CatchUp(t)
	reader := openPostgres(t, p.Standby, storh.WithReadOnly())
	watched := mustDocs(t, reader, "posts")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fromCursor, stopCursor := watchFeed(ctx, watched, before.ID)
	defer stopCursor()
	fromNow, stopNow := watchFeed(ctx, watched, uuidv7.UUID{})
	defer stopNow()
	// A read-only store on the primary hears of its commits as any does.
	onPrimary, stopPrimary := watchFeed(ctx, mustDocs(t, openPostgres(t, p.Primary, storh.WithReadOnly()), "posts"), before.ID)
	defer stopPrimary()

	// From now: the watch has begun once a record written after it
	// arrives; the one written before it never does. From then on it
	// delivers every record, as does the watch from the cursor.
	written, first := keepWriting(t, posts, fromNow)
	i := slices.Index(written, first.ID)
	if i < 0 {
		t.Fatalf("a watch from now delivered %s, which was written before it", first.ID)
	}
	for j, id := range written {
		expect(t, fromCursor, id, j)
		expect(t, onPrimary, id, j)
		if j > i {
			expect(t, fromNow, id, j)
		}
	}
	// A rewrite is delivered with its new data.
	if _, err := posts.PutWithID(written[0], storh.Map{"n": 100}); err != nil {
		t.Fatal(err)
	}
	expect(t, fromCursor, written[0], 100)
	expect(t, fromNow, written[0], 100)
	expect(t, onPrimary, written[0], 100)
}

// A watch on a standby follows writers whose clocks are ahead of its
// own or behind it by more than its lookback: what is in sight goes by
// the ids it has seen.
func TestStandbyWatchSkewedClocks(t *testing.T) {
	p := standby(t)
	writer := openPostgres(t, p.Primary)
	p.CatchUp(t) // the store's tables
	reader := openPostgres(t, p.Standby, storh.WithReadOnly())
	for _, skew := range []time.Duration{-time.Hour, time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			name := "skew" + skew.String()
			gen := uuidv7.NewGenerator(uuidv7.WithClock(func() time.Time { return time.Now().Add(skew) }))
			posts, err := writer.Docs(name, storh.WithIDGenerator(gen.New))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := posts.Put(storh.Map{"n": -1}); err != nil {
				t.Fatal(err)
			}
			p.CatchUp(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			feed, stop := watchFeed(ctx, mustDocs(t, reader, name), uuidv7.UUID{})
			defer stop()
			written, first := keepWriting(t, posts, feed)
			i := slices.Index(written, first.ID)
			if i < 0 {
				t.Fatalf("the watch delivered %s, which was written before it", first.ID)
			}
			for j := i + 1; j < len(written); j++ {
				expect(t, feed, written[j], j)
			}
		})
	}
}

// keepWriting puts records {"n": 0}, {"n": 1}, ... into c, one every few
// milliseconds, until feed delivers one of them (or another), and returns
// the ids written, in order, and what feed delivered.
func keepWriting(t *testing.T, c *storh.Docs, feed <-chan feedItem) ([]uuidv7.UUID, storh.Record) {
	t.Helper()
	stop, done := make(chan struct{}), make(chan error, 1)
	var written []uuidv7.UUID
	go func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			r, err := c.Put(storh.Map{"n": n})
			if err != nil {
				done <- err
				return
			}
			written = append(written, r.ID)
			select {
			case <-stop:
				done <- nil
				return
			case <-tick.C:
			}
		}
	}()
	first := next(t, feed)
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return written, first
}

// watchFeed runs a Watch of c from id and hands over what it yields.
func watchFeed(ctx context.Context, c *storh.Docs, from uuidv7.UUID) (<-chan feedItem, func()) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan feedItem)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r, err := range c.Watch(ctx, from) {
			select {
			case ch <- feedItem{r, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ch, func() { cancel(); <-done }
}

type feedItem struct {
	r   storh.Record
	err error
}

// next is the next record of a watch, within the test's deadline.
func next(t *testing.T, ch <-chan feedItem) storh.Record {
	t.Helper()
	select {
	case it := <-ch:
		if it.err != nil {
			t.Fatalf("watch: %v", it.err)
		}
		return it.r
	case <-time.After(20 * time.Second):
		t.Fatal("watch: nothing delivered in 20s")
	}
	return storh.Record{}
}

// expect checks that the next record of a watch is id with n.
func expect(t *testing.T, ch <-chan feedItem, id uuidv7.UUID, n int) {
	t.Helper()
	r := next(t, ch)
	if got := r.Data()["n"]; r.ID != id || fmt.Sprint(got) != fmt.Sprint(n) {
		t.Fatalf("watch delivered %s n=%v, want %s n=%d", r.ID, got, id, n)
	}
}

// With WithReadURL a DB reads from the standby, and still reads its own
// writes at once, however far behind the standby is: while replay is
// paused, another store's write is not seen until replay resumes, this
// DB's own writes are, and so is a record its watch was told of.
func TestReadURLReadsYourWrites(t *testing.T) {
	p := standby(t)
	// Opened while replay is paused, the new store's tables are on the
	// primary only: reads go there.
	p.PauseReplay(t)
	db := openPostgres(t, p.Primary, storh.WithReadURL(p.Standby))
	posts := mustDocs(t, db, "posts")
	if n := mustCount(t, posts); n != 0 {
		t.Fatalf("Count = %d", n)
	}
	p.ResumeReplay(t)
	other := openPostgres(t, p.Primary)
	otherLog, err := other.Log("events")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := otherLog.Put(storh.Map{"who": "other"}); err != nil {
		t.Fatal(err)
	}
	p.CatchUp(t)

	p.PauseReplay(t)
	theirs, err := otherLog.Put(storh.Map{"who": "other"})
	if err != nil {
		t.Fatal(err)
	}
	events, err := db.Log("events")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.Get(theirs.ID); !errors.Is(err, storh.ErrNotFound) {
		t.Fatalf("Get of another store's write with replay paused: %v; want ErrNotFound (read from the standby)", err)
	}
	mine, err := posts.Put(storh.Map{"who": "me"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := posts.Get(mine.ID); err != nil || got.Data()["who"] != "me" {
		t.Fatalf("Get of this DB's write with replay paused: %v, %v", got.Data(), err)
	}
	if n := len(collect(t, posts.Stream(query.All()))); n != 1 {
		t.Errorf("Stream after this DB's write: %d records, want 1", n)
	}
	err = db.View(func(tx *storh.Tx) error {
		d, err := tx.Docs("posts")
		if err != nil {
			return err
		}
		_, err = d.Get(mine.ID)
		return err
	})
	if err != nil {
		t.Errorf("View after this DB's write: %v", err)
	}
	err = db.Update(func(tx *storh.Tx) error {
		d, err := tx.Docs("posts")
		if err != nil {
			return err
		}
		r, err := d.Put(storh.Map{"who": "tx"})
		if err != nil {
			return err
		}
		_, err = d.Get(r.ID)
		return err
	})
	if err != nil {
		t.Errorf("a read of the transaction's own write inside Update: %v", err)
	}
	if n := mustCount(t, posts); n != 2 {
		t.Errorf("Count after the Update = %d, want 2", n)
	}

	// The watch listens on the primary. Its catch-up sees what was
	// committed before it, unannounced, and it reads what a notice of
	// another store's commit announces where that commit is, even when
	// the standby has replayed everything else the DB knows of.
	p.ResumeReplay(t)
	p.CatchUp(t)
	p.PauseReplay(t)
	watchedByOther := mustDocs(t, other, "watched")
	early, err := watchedByOther.Put(storh.Map{"n": -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	feed, stop := watchFeed(ctx, mustDocs(t, db, "watched"), idAt(t, 1))
	defer stop()
	expect(t, feed, early.ID, -1)
	for round := range 2 {
		written, first := keepWriting(t, watchedByOther, feed)
		i := slices.Index(written, first.ID)
		if i < 0 {
			t.Fatalf("the watch delivered %s, which nobody wrote", first.ID)
		}
		for j := i + 1; j < len(written); j++ {
			expect(t, feed, written[j], j)
		}
		if round == 0 {
			p.ResumeReplay(t)
			p.CatchUp(t)
			p.PauseReplay(t)
		}
	}
	p.ResumeReplay(t)
	p.CatchUp(t)
	if _, err := events.Get(theirs.ID); err != nil {
		t.Errorf("Get of another store's write once replayed: %v", err)
	}
}

// A write whose connection was lost after its COMMIT, which the server
// then said had committed, is read at once too: its WAL position was lost
// with the connection, so reads go to the primary until it is asked.
func TestReadURLLostCommit(t *testing.T) {
	p := standby(t)
	proxy := pgtest.NewProxy(t, p.Primary)
	db := openPostgres(t, proxy.URL, storh.WithReadURL(p.Standby))
	docs := mustDocs(t, db, "notes")
	if _, err := docs.Put(storh.Map{"n": 0}); err != nil {
		t.Fatal(err)
	}
	p.CatchUp(t)
	if n := mustCount(t, docs); n != 1 { // from the standby, caught up
		t.Fatalf("Count = %d", n)
	}
	p.PauseReplay(t)
	proxy.Arm(pgtest.AfterCommit, false)
	rec, err := docs.Put(storh.Map{"n": 1})
	if proxy.Cuts() != 1 || err != nil {
		t.Fatalf("Put whose COMMIT's answer was lost: %v (%d cuts); want it committed", err, proxy.Cuts())
	}
	if _, err := docs.Get(rec.ID); err != nil {
		t.Errorf("Get of that write with replay paused: %v", err)
	}
}
