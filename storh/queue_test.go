package storh_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The queue tests drive time with a fake clock (WithClock), so leases,
// lease ends and completion times are exact milliseconds; only the
// ClaimWait tests use the real clock, since ClaimWait sleeps on real timers.

// qBaseMs is the fake clock's start: a whole millisecond, far from the ids'
// own times so that a test never confuses the two.
const qBaseMs = 1_800_000_000_000

// testClock is a clock for WithClock that moves only when told.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.UnixMilli(qBaseMs).UTC()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *testClock) Ms() int64 { return c.Now().UnixMilli() }

// openQueueDB opens a fresh database on a fake clock.
func openQueueDB(t testing.TB, opts ...storh.Option) (*storh.DB, *testClock, string) {
	t.Helper()
	clk := newTestClock()
	path := newPath(t)
	db := openAt(t, path, append([]storh.Option{storh.WithClock(clk.Now)}, opts...)...)
	return db, clk, path
}

func qOpen(t testing.TB, db *storh.DB, name string, opts ...storh.CollectionOption) *storh.Queue {
	t.Helper()
	q, err := db.Queue(name, opts...)
	if err != nil {
		t.Fatalf("Queue(%q): %v", name, err)
	}
	return q
}

func qEnqueue(t testing.TB, q *storh.Queue, payload any) uuidv7.UUID {
	t.Helper()
	id, err := q.Enqueue(payload)
	if err != nil {
		t.Fatalf("Enqueue(%v): %v", payload, err)
	}
	return id
}

func qEnqueueID(t testing.TB, q *storh.Queue, id uuidv7.UUID, payload any) {
	t.Helper()
	if err := q.EnqueueWithID(id, payload); err != nil {
		t.Fatalf("EnqueueWithID(%v): %v", id, err)
	}
}

func qClaim(t testing.TB, q *storh.Queue, lease time.Duration) storh.Job {
	t.Helper()
	job, err := q.Claim(lease)
	if err != nil {
		t.Fatalf("Claim(%v): %v", lease, err)
	}
	return job
}

func qLookup(t testing.TB, q *storh.Queue, id uuidv7.UUID) storh.Job {
	t.Helper()
	job, err := q.Lookup(id)
	if err != nil {
		t.Fatalf("Lookup(%v): %v", id, err)
	}
	return job
}

// qJobs lists the jobs in state, failing the test on an error.
func qJobs(t testing.TB, q *storh.Queue, state storh.JobState) []storh.Job {
	t.Helper()
	var out []storh.Job
	for job, err := range q.Jobs(state) {
		if err != nil {
			t.Fatalf("Jobs(%v): %v", state, err)
		}
		out = append(out, job)
	}
	return out
}

func qJobIDs(t testing.TB, q *storh.Queue, state storh.JobState) []uuidv7.UUID {
	t.Helper()
	var out []uuidv7.UUID
	for _, j := range qJobs(t, q, state) {
		out = append(out, j.ID)
	}
	return out
}

func qWantIDs(t testing.TB, q *storh.Queue, state storh.JobState, want ...uuidv7.UUID) {
	t.Helper()
	if got := qJobIDs(t, q, state); !sameIDs(got, want) {
		t.Errorf("Jobs(%v) = %v; want %v", state, got, want)
	}
}

func qWantCounts(t testing.TB, q *storh.Queue, pending, claimed, done, dead int) {
	t.Helper()
	counts, err := q.Counts()
	p, c, d, x := counts.Pending, counts.Claimed, counts.Done, counts.Dead
	if err != nil {
		t.Fatalf("Counts: %v", err)
	}
	if p != pending || c != claimed || d != done || x != dead {
		t.Errorf("Counts = %d pending, %d claimed, %d done, %d dead; want %d, %d, %d, %d", p, c, d, x, pending, claimed, done, dead)
	}
}

// qWantJob checks a job's state, attempts and last error.
func qWantJob(t testing.TB, q *storh.Queue, id uuidv7.UUID, state storh.JobState, attempts int, lastErr string) storh.Job {
	t.Helper()
	job := qLookup(t, q, id)
	if job.State != state || job.Attempts != attempts || job.LastError != lastErr {
		t.Errorf("job %v is %v, %d attempts, LastError %q; want %v, %d, %q", id, job.State, job.Attempts, job.LastError, state, attempts, lastErr)
	}
	return job
}

// qVerify runs Verify and fails the test on any problem.
func qVerify(t testing.TB, db *storh.DB, after string) {
	t.Helper()
	var problems []string
	rep, err := db.Verify(func(p storh.Problem) { problems = append(problems, p.String()) })
	if err != nil {
		t.Fatalf("Verify after %s: %v", after, err)
	}
	if rep.Problems != 0 || len(problems) != 0 {
		t.Errorf("Verify after %s: %d problems: %v", after, rep.Problems, problems)
	}
}

// qIDsDescending mints n ids at descending milliseconds: each is older than the one
// before it, so enqueue order and id order disagree.
func qIDsDescending(t testing.TB, n int) []uuidv7.UUID {
	out := make([]uuidv7.UUID, n)
	for i := range out {
		out[i] = idAt(t, int64(1_700_000_000_000+(n-i)*10))
	}
	return out
}

type qTask struct {
	Name string `msgpack:"name"`
	N    int    `msgpack:"n"`
}

func TestQueueEnqueueClaimComplete(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	if q.Name() != "q" {
		t.Errorf("Name = %q", q.Name())
	}
	qWantCounts(t, q, 0, 0, 0, 0)

	enqueuedAt := clk.Ms()
	id := qEnqueue(t, q, qTask{Name: "resize", N: 7})
	if !id.IsV7() {
		t.Fatalf("Enqueue returned %v, not a UUIDv7", id)
	}
	j := qWantJob(t, q, id, storh.JobPending, 0, "")
	if j.Changed.UnixMilli() != enqueuedAt || !j.LeaseUntil.IsZero() {
		t.Errorf("pending job: Changed %v, LeaseUntil %v; want %d ms and zero", j.Changed, j.LeaseUntil, enqueuedAt)
	}
	qWantCounts(t, q, 1, 0, 0, 0)

	clk.Advance(3 * time.Second)
	claimedAt := clk.Ms()
	job := qClaim(t, q, 30*time.Second)
	var task qTask
	if err := job.Decode(&task); err != nil {
		t.Fatal(err)
	}
	if job.ID != id || task != (qTask{"resize", 7}) || !reflect.DeepEqual(job.Data(), storh.Map{"name": "resize", "n": int64(7)}) {
		t.Errorf("Claim = %v %+v %v", job.ID, task, job.Data())
	}
	if job.State != storh.JobClaimed || job.Attempts != 1 || job.LastError != "" ||
		job.LeaseUntil.UnixMilli() != claimedAt+30_000 || job.Changed.UnixMilli() != claimedAt {
		t.Errorf("claimed job: %v, %d attempts, lease %v, changed %v, %q", job.State, job.Attempts, job.LeaseUntil, job.Changed, job.LastError)
	}
	if job.Time() != id.Time() {
		t.Errorf("Time = %v; want the id's %v", job.Time(), id.Time())
	}
	got := qWantJob(t, q, id, storh.JobClaimed, 1, "")
	if !got.LeaseUntil.Equal(job.LeaseUntil) || !reflect.DeepEqual(got.Data(), job.Data()) {
		t.Errorf("Lookup of a claimed job: lease %v, data %v; want %v, %v", got.LeaseUntil, got.Data(), job.LeaseUntil, job.Data())
	}
	qWantCounts(t, q, 0, 1, 0, 0)
	if _, err := q.Claim(time.Minute); !errors.Is(err, storh.ErrEmpty) {
		t.Errorf("Claim with the only job claimed = %v; want ErrEmpty", err)
	}

	clk.Advance(time.Second)
	doneAt := clk.Ms()
	if err := q.Complete(id); err != nil {
		t.Fatal(err)
	}
	j = qWantJob(t, q, id, storh.JobDone, 1, "")
	if j.Changed.UnixMilli() != doneAt || !j.LeaseUntil.IsZero() || j.Data()["name"] != "resize" {
		t.Errorf("done job: changed %v, lease %v, data %v", j.Changed, j.LeaseUntil, j.Data())
	}
	qWantCounts(t, q, 0, 0, 1, 0)
	if n := mustCount(t, q); n != 1 {
		t.Errorf("Count = %d; want 1 (done jobs stay until purged)", n)
	}
	if _, err := q.Claim(time.Minute); !errors.Is(err, storh.ErrEmpty) {
		t.Errorf("Claim after the only job is done = %v; want ErrEmpty", err)
	}
	qVerify(t, db, "enqueue, claim, complete")
}

func TestQueueOperationErrors(t *testing.T) {
	db, _, _ := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(1))
	var pendingID, claimedID, doneID, deadID uuidv7.UUID
	doneID = qEnqueue(t, q, storh.Map{"k": "done"})
	deadID = qEnqueue(t, q, storh.Map{"k": "dead"})
	claimedID = qEnqueue(t, q, storh.Map{"k": "claimed"})
	pendingID = qEnqueue(t, q, storh.Map{"k": "pending"})
	if j := qClaim(t, q, time.Hour); j.ID != doneID {
		t.Fatalf("claimed %v; want %v", j.ID, doneID)
	}
	if err := q.Complete(doneID); err != nil {
		t.Fatal(err)
	}
	qClaim(t, q, time.Hour)
	if err := q.Fail(deadID, "boom"); err != nil {
		t.Fatal(err)
	}
	qClaim(t, q, time.Hour)
	qWantJob(t, q, deadID, storh.JobDead, 1, "boom")
	qWantCounts(t, q, 1, 1, 1, 1)

	// A queue that exists and has nothing pending.
	idle := qOpen(t, db, "idle")
	qEnqueue(t, idle, storh.Map{"a": 1})
	if err := idle.Complete(qClaim(t, idle, time.Hour).ID); err != nil {
		t.Fatal(err)
	}
	unknown := idAt(t, 1_700_000_000_123)
	zero := uuidv7.UUID{}
	badVariant := badVariantID(t)
	ctx := context.Background()

	type tc struct {
		name    string
		call    func() error
		want    error
		mention []string
	}
	var cases []tc
	add := func(name string, want error, call func() error, mention ...string) {
		cases = append(cases, tc{name, call, want, mention})
	}
	states := map[string]uuidv7.UUID{"pending": pendingID, "done": doneID, "dead": deadID}
	for _, st := range []string{"pending", "done", "dead"} {
		id := states[st]
		add("Complete "+st, storh.ErrNotClaimed, func() error { return q.Complete(id) }, `"q"`, id.String())
		add("Fail "+st, storh.ErrNotClaimed, func() error { return q.Fail(id, "x") }, `"q"`, id.String())
		add("Extend "+st, storh.ErrNotClaimed, func() error { _, err := q.Extend(id, time.Minute); return err }, `"q"`, id.String())
		add("Release "+st, storh.ErrNotClaimed, func() error { return q.Release(id) }, `"q"`, id.String())
	}
	for _, st := range []string{"pending", "done"} {
		id := states[st]
		add("Retry "+st, storh.ErrNotDead, func() error { return q.Retry(id) }, `"q"`, id.String(), st)
	}
	add("Retry claimed", storh.ErrNotDead, func() error { return q.Retry(claimedID) }, `"q"`, claimedID.String(), "claimed")
	add("Cancel claimed", storh.ErrClaimed, func() error { return q.Cancel(claimedID) }, `"q"`, claimedID.String(), "Release")
	for _, id := range []uuidv7.UUID{unknown} {
		add("Complete unknown", storh.ErrNotFound, func() error { return q.Complete(id) }, `"q"`, id.String())
		add("Fail unknown", storh.ErrNotFound, func() error { return q.Fail(id, "x") }, `"q"`, id.String())
		add("Extend unknown", storh.ErrNotFound, func() error { _, err := q.Extend(id, time.Minute); return err }, `"q"`, id.String())
		add("Release unknown", storh.ErrNotFound, func() error { return q.Release(id) }, `"q"`, id.String())
		add("Retry unknown", storh.ErrNotFound, func() error { return q.Retry(id) }, `"q"`, id.String())
		add("Cancel unknown", storh.ErrNotFound, func() error { return q.Cancel(id) }, `"q"`, id.String())
		add("Lookup unknown", storh.ErrNotFound, func() error { _, err := q.Lookup(id); return err }, `"q"`, id.String())
	}
	for name, id := range map[string]uuidv7.UUID{"v4": v4ID, "zero": zero, "bad variant": badVariant} {
		add("Complete "+name, storh.ErrInvalidID, func() error { return q.Complete(id) }, `"q"`)
		add("Fail "+name, storh.ErrInvalidID, func() error { return q.Fail(id, "x") }, `"q"`)
		add("Extend "+name, storh.ErrInvalidID, func() error { _, err := q.Extend(id, time.Minute); return err }, `"q"`)
		add("Release "+name, storh.ErrInvalidID, func() error { return q.Release(id) }, `"q"`)
		add("Retry "+name, storh.ErrInvalidID, func() error { return q.Retry(id) }, `"q"`)
		add("Cancel "+name, storh.ErrInvalidID, func() error { return q.Cancel(id) }, `"q"`)
		add("Lookup "+name, storh.ErrInvalidID, func() error { _, err := q.Lookup(id); return err }, `"q"`)
		add("EnqueueWithID "+name, storh.ErrInvalidID, func() error { return q.EnqueueWithID(id, storh.Map{"a": 1}) }, `"q"`)
		add("CompleteMany "+name, storh.ErrInvalidID, func() error {
			_, err := q.CompleteMany([]uuidv7.UUID{claimedID, id})
			var e *storh.Error
			if errors.As(err, &e) && e.Index != 1 {
				return fmt.Errorf("Index %d, want 1: %w", e.Index, err)
			}
			return err
		}, `"q"`, "item 1")
	}
	for st, id := range map[string]uuidv7.UUID{"pending": pendingID, "claimed": claimedID, "done": doneID, "dead": deadID} {
		add("EnqueueWithID of a "+st+" id", storh.ErrExists, func() error { return q.EnqueueWithID(id, storh.Map{"a": 1}) }, `"q"`, id.String())
	}
	for name, payload := range map[string]any{"nil": nil, "a string": "text", "an int": 3, "a chan": storh.Map{"c": make(chan int)}} {
		add("Enqueue "+name, storh.ErrInvalidData, func() error { _, err := q.Enqueue(payload); return err }, `"q"`)
		add("EnqueueWithID "+name, storh.ErrInvalidData, func() error { return q.EnqueueWithID(idAt(t, 1_700_000_000_999), payload) }, `"q"`)
	}
	for _, lease := range []time.Duration{0, -time.Second, -1} {
		add(fmt.Sprintf("Claim lease %v", lease), storh.ErrInvalidOption, func() error { _, err := q.Claim(lease); return err }, `"q"`)
		add(fmt.Sprintf("ClaimMany lease %v", lease), storh.ErrInvalidOption, func() error { _, err := q.ClaimMany(3, lease); return err }, `"q"`)
		add(fmt.Sprintf("ClaimWait lease %v", lease), storh.ErrInvalidOption, func() error { _, err := q.ClaimWait(ctx, lease); return err }, `"q"`)
		add(fmt.Sprintf("Extend lease %v", lease), storh.ErrInvalidOption, func() error { _, err := q.Extend(claimedID, lease); return err }, `"q"`)
	}
	for _, n := range []int{0, -1} {
		add(fmt.Sprintf("ClaimMany n %d", n), storh.ErrInvalidOption, func() error { _, err := q.ClaimMany(n, time.Minute); return err }, `"q"`, fmt.Sprint(n))
	}
	add("Claim of an idle queue", storh.ErrEmpty, func() error { _, err := idle.Claim(time.Minute); return err }, `"idle"`)
	add("ClaimMany of an idle queue", storh.ErrEmpty, func() error { _, err := idle.ClaimMany(4, time.Minute); return err }, `"idle"`)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := digest(t, db)
			err := c.call()
			checkErr(t, err, c.want, c.mention...)
			if digest(t, db) != before {
				t.Errorf("a failed %s changed the file", c.name)
			}
		})
	}
	// The claimed job is still claimed by its one claim, and nothing else moved.
	qWantJob(t, q, claimedID, storh.JobClaimed, 1, "")
	qWantCounts(t, q, 1, 1, 1, 1)
	qVerify(t, db, "failed operations")
}

func TestQueueEmptyQueueClaim(t *testing.T) {
	db, _, _ := openQueueDB(t)
	q := qOpen(t, db, "fresh")
	_, err := q.Claim(time.Minute)
	checkErr(t, err, storh.ErrEmpty, `"fresh"`)
	_, err = q.ClaimMany(5, time.Minute)
	checkErr(t, err, storh.ErrEmpty, `"fresh"`)
	qWantCounts(t, q, 0, 0, 0, 0)
	if got := qJobs(t, q, storh.JobPending); len(got) != 0 {
		t.Errorf("Jobs of a fresh queue = %v", got)
	}
	_, err = q.Lookup(idAt(t, 1_700_000_000_000))
	checkErr(t, err, storh.ErrNotFound, `"fresh"`)
	if n, err := q.RequeueExpired(); n != 0 || err != nil {
		t.Errorf("RequeueExpired of a fresh queue = %d, %v", n, err)
	}
	if n, err := q.PurgeDone(0); n != 0 || err != nil {
		t.Errorf("PurgeDone of a fresh queue = %d, %v", n, err)
	}
	qVerify(t, db, "claims of a fresh queue")
}

func TestQueueInvalidOptions(t *testing.T) {
	db, _, _ := openQueueDB(t)
	for _, n := range []int{0, -1, -100} {
		_, err := db.Queue("q", storh.WithMaxAttempts(n))
		checkErr(t, err, storh.ErrInvalidOption, fmt.Sprintf("WithMaxAttempts(%d)", n))
	}
	if _, err := db.Queue("q", storh.WithMaxAttempts(1)); err != nil {
		t.Errorf("WithMaxAttempts(1) = %v", err)
	}
	_, err := db.Docs("d", storh.WithMaxAttempts(3))
	checkErr(t, err, storh.ErrInvalidOption, "WithMaxAttempts")
	_, err = db.Log("l", storh.WithMaxAttempts(3))
	checkErr(t, err, storh.ErrInvalidOption, "WithMaxAttempts")
	err = db.Update(func(tx *storh.Tx) error {
		_, err := tx.Docs("d", storh.WithMaxAttempts(3))
		return err
	})
	checkErr(t, err, storh.ErrInvalidOption, "WithMaxAttempts")
	err = db.Update(func(tx *storh.Tx) error {
		_, err := tx.Queue("q", storh.WithMaxAttempts(0))
		return err
	})
	checkErr(t, err, storh.ErrInvalidOption, "WithMaxAttempts(0)")
	// The refused handles created nothing.
	if cs, err := db.Collections(); err != nil || len(cs) != 0 {
		t.Errorf("Collections after refused opens = %v, %v", cs, err)
	}
	_, err = storh.Open(newPath(t), storh.WithClock(nil))
	checkErr(t, err, storh.ErrInvalidOption, "WithClock")

	// A queue name is a queue: the other kinds cannot open it, nor it them.
	q := qOpen(t, db, "jobs")
	qEnqueue(t, q, storh.Map{"a": 1})
	_, err = db.Docs("jobs")
	checkErr(t, err, storh.ErrWrongKind, `"jobs"`)
	d, _ := db.Docs("docs")
	if _, err := d.Put(storh.Map{"a": 1}); err != nil {
		t.Fatal(err)
	}
	_, err = db.Queue("docs")
	checkErr(t, err, storh.ErrWrongKind, `"docs"`)
}

func TestQueueFIFOInEnqueueOrder(t *testing.T) {
	db, _, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	// Ids that go back in time: id order is the reverse of enqueue order.
	old := qIDsDescending(t, 4)
	var want []uuidv7.UUID
	newest := qEnqueue(t, q, storh.Map{"i": 0}) // a fresh id, newer than all of old
	want = append(want, newest)
	for i, id := range old[:2] {
		qEnqueueID(t, q, id, storh.Map{"i": i + 1})
		want = append(want, id)
	}
	many, err := q.EnqueueMany([]any{storh.Entry{ID: old[2], Data: storh.Map{"i": 3}}, storh.Map{"i": 4}, storh.Entry{ID: old[3], Data: storh.Map{"i": 5}}})
	if err != nil {
		t.Fatal(err)
	}
	if many[0] != old[2] || many[2] != old[3] || !many[1].IsV7() {
		t.Fatalf("EnqueueMany ids = %v", many)
	}
	want = append(want, many...)
	want = append(want, qEnqueue(t, q, storh.Map{"i": 6}))
	qWantIDs(t, q, storh.JobPending, want...)

	// Claims, one by one and many at once, follow the same order.
	var got []uuidv7.UUID
	got = append(got, qClaim(t, q, time.Minute).ID)
	js, err := q.ClaimMany(3, time.Minute)
	if err != nil || len(js) != 3 {
		t.Fatalf("ClaimMany(3) = %d jobs, %v", len(js), err)
	}
	for _, j := range js {
		got = append(got, j.ID)
	}
	js, err = q.ClaimMany(10, time.Minute)
	if err != nil || len(js) != 3 {
		t.Fatalf("ClaimMany(10) of 3 pending = %d jobs, %v", len(js), err)
	}
	for _, j := range js {
		got = append(got, j.ID)
		if j.Data()["i"] != int64(slices.Index(want, j.ID)) {
			t.Errorf("job %v carries %v; want i=%d", j.ID, j.Data(), slices.Index(want, j.ID))
		}
	}
	if !sameIDs(got, want) {
		t.Errorf("claim order %v; want enqueue order %v", got, want)
	}
	qWantCounts(t, q, 0, 7, 0, 0)
}

func TestQueueRequeuedJobsKeepTheirPlace(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	a := qEnqueue(t, q, storh.Map{"n": "a"})
	b := qEnqueue(t, q, storh.Map{"n": "b"})
	c := qEnqueue(t, q, storh.Map{"n": "c"})
	d := qEnqueue(t, q, storh.Map{"n": "d"})

	for _, want := range []uuidv7.UUID{a, b} {
		if j := qClaim(t, q, time.Hour); j.ID != want {
			t.Fatalf("claimed %v; want %v", j.ID, want)
		}
	}
	if j := qClaim(t, q, time.Minute); j.ID != c { // c has the shortest lease
		t.Fatalf("claimed %v; want %v", j.ID, c)
	}
	e := qEnqueue(t, q, storh.Map{"n": "e"})
	qWantIDs(t, q, storh.JobPending, d, e)

	// Released: back ahead of d and e.
	if err := q.Release(b); err != nil {
		t.Fatal(err)
	}
	qWantIDs(t, q, storh.JobPending, b, d, e)
	// Failed: back at the very front.
	if err := q.Fail(a, "retry me"); err != nil {
		t.Fatal(err)
	}
	qWantIDs(t, q, storh.JobPending, a, b, d, e)
	// c's lease ends: the next claim puts it back between b and d, then
	// takes a.
	clk.Advance(time.Minute)
	if j := qClaim(t, q, time.Hour); j.ID != a {
		t.Fatalf("claimed %v; want %v", j.ID, a)
	}
	qWantIDs(t, q, storh.JobPending, b, c, d, e)
	qWantJob(t, q, c, storh.JobPending, 1, "lease expired")
	f := qEnqueue(t, q, storh.Map{"n": "f"})
	js, err := q.ClaimMany(10, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var got []uuidv7.UUID
	for _, j := range js {
		got = append(got, j.ID)
	}
	if want := []uuidv7.UUID{b, c, d, e, f}; !sameIDs(got, want) {
		t.Errorf("ClaimMany order %v; want %v", got, want)
	}
	qVerify(t, db, "requeues")
}

func TestQueueAttempts(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(3))
	x := qEnqueue(t, q, storh.Map{"n": "x"})
	y := qEnqueue(t, q, storh.Map{"n": "y"})

	// Releases do not count.
	for range 5 {
		j := qClaim(t, q, time.Minute)
		if j.ID != x || j.Attempts != 1 {
			t.Fatalf("claim after releases: %v, %d attempts; want %v, 1", j.ID, j.Attempts, x)
		}
		if err := q.Release(x); err != nil {
			t.Fatal(err)
		}
		qWantJob(t, q, x, storh.JobPending, 0, "")
	}
	// A failure counts, and keeps its reason.
	qClaim(t, q, time.Minute)
	if err := q.Fail(x, "first"); err != nil {
		t.Fatal(err)
	}
	qWantJob(t, q, x, storh.JobPending, 1, "first")
	// An expired lease counts, and says so.
	j := qClaim(t, q, time.Minute)
	if j.ID != x || j.Attempts != 2 || j.LastError != "first" {
		t.Fatalf("second claim: %v, %d attempts, %q", j.ID, j.Attempts, j.LastError)
	}
	clk.Advance(time.Minute)
	if n, err := q.RequeueExpired(); n != 1 || err != nil {
		t.Fatalf("RequeueExpired = %d, %v; want 1", n, err)
	}
	qWantJob(t, q, x, storh.JobPending, 2, "lease expired")
	// A release after failures gives back only its own claim.
	qClaim(t, q, time.Minute)
	if err := q.Release(x); err != nil {
		t.Fatal(err)
	}
	qWantJob(t, q, x, storh.JobPending, 2, "lease expired")
	// The third counted attempt fails: dead.
	j = qClaim(t, q, time.Minute)
	if j.ID != x || j.Attempts != 3 {
		t.Fatalf("third claim: %v, %d attempts", j.ID, j.Attempts)
	}
	clk.Advance(time.Second)
	diedAt := clk.Ms()
	if err := q.Fail(x, "third"); err != nil {
		t.Fatal(err)
	}
	dead := qWantJob(t, q, x, storh.JobDead, 3, "third")
	if dead.Changed.UnixMilli() != diedAt || !dead.LeaseUntil.IsZero() || dead.Data()["n"] != "x" {
		t.Errorf("dead job: changed %v, lease %v, data %v", dead.Changed, dead.LeaseUntil, dead.Data())
	}
	qWantCounts(t, q, 1, 0, 0, 1)
	qWantIDs(t, q, storh.JobDead, x)
	// Dead jobs are not claimed: y is next.
	if j := qClaim(t, q, time.Minute); j.ID != y {
		t.Fatalf("claimed %v; want %v", j.ID, y)
	}
	if err := q.Release(y); err != nil {
		t.Fatal(err)
	}

	// Retry: pending at its place (ahead of y), attempts reset.
	if err := q.Retry(x); err != nil {
		t.Fatal(err)
	}
	qWantJob(t, q, x, storh.JobPending, 0, "third")
	qWantIDs(t, q, storh.JobPending, x, y)
	qWantCounts(t, q, 2, 0, 0, 0)
	if j := qClaim(t, q, time.Minute); j.ID != x || j.Attempts != 1 {
		t.Errorf("claim after Retry: %v, %d attempts; want %v, 1", j.ID, j.Attempts, x)
	}

	// Death by expired leases alone, found by Claim: the claim that finds
	// nothing else still leaves the job dead.
	z := qEnqueue(t, qOpen(t, db, "z", storh.WithMaxAttempts(2)), storh.Map{"n": "z"})
	qz := qOpen(t, db, "z", storh.WithMaxAttempts(2))
	for attempt := 1; attempt <= 2; attempt++ {
		if j := qClaim(t, qz, time.Second); j.ID != z || j.Attempts != attempt {
			t.Fatalf("claim %d of z: %v, %d attempts", attempt, j.ID, j.Attempts)
		}
		clk.Advance(time.Second)
	}
	if _, err := qz.Claim(time.Second); !errors.Is(err, storh.ErrEmpty) {
		t.Fatalf("Claim after z's last lease ended = %v; want ErrEmpty", err)
	}
	qWantJob(t, qz, z, storh.JobDead, 2, "lease expired")
	qWantCounts(t, qz, 0, 0, 0, 1)
	qVerify(t, db, "attempts")
}

func TestQueueDefaultMaxAttempts(t *testing.T) {
	db, _, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	id := qEnqueue(t, q, storh.Map{"a": 1})
	for i := 1; i <= storh.DefaultMaxAttempts; i++ {
		qClaim(t, q, time.Minute)
		if err := q.Fail(id, fmt.Sprint("failure ", i)); err != nil {
			t.Fatal(err)
		}
		want := storh.JobPending
		if i == storh.DefaultMaxAttempts {
			want = storh.JobDead
		}
		qWantJob(t, q, id, want, i, fmt.Sprint("failure ", i))
	}
	// The queue may allow more: the count is of the job, the limit of the
	// queue, and a handle that gives none applies the stored one.
	if err := db.SetQueueOptions("q", storh.WithMaxAttempts(7)); err != nil {
		t.Fatal(err)
	}
	q7 := qOpen(t, db, "q")
	if err := q7.Retry(id); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		qClaim(t, q7, time.Minute)
		if err := q7.Fail(id, "again"); err != nil {
			t.Fatal(err)
		}
	}
	qWantJob(t, q7, id, storh.JobPending, 6, "again")
	qClaim(t, q7, time.Minute)
	if err := q7.Fail(id, "last"); err != nil {
		t.Fatal(err)
	}
	qWantJob(t, q7, id, storh.JobDead, 7, "last")
}

func TestQueueFailReason(t *testing.T) {
	db, _, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	id := qEnqueue(t, q, storh.Map{"a": 1})
	for i, reason := range []string{"", "plain", "ünïcödé ✓", strings.Repeat("x", 1024)} {
		qClaim(t, q, time.Minute)
		if err := q.Fail(id, reason); err != nil {
			t.Fatal(err)
		}
		qWantJob(t, q, id, storh.JobPending, i+1, reason)
	}
	// Longer reasons are cut at 1 KiB.
	qClaim(t, q, time.Minute)
	if err := q.Fail(id, strings.Repeat("y", 5000)); err != nil {
		t.Fatal(err)
	}
	if got := qLookup(t, q, id).LastError; got != strings.Repeat("y", 1024) {
		t.Errorf("LastError of a 5000-byte reason has %d bytes; want the first 1024", len(got))
	}
}

func TestQueueFailReasonCutKeepsUTF8(t *testing.T) {
	db, _, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	id := qEnqueue(t, q, storh.Map{"a": 1})
	qClaim(t, q, time.Minute)
	// 1 + 2×600 bytes: a cut at byte 1024 falls inside an "é".
	reason := "a" + strings.Repeat("é", 600)
	if err := q.Fail(id, reason); err != nil {
		t.Fatal(err)
	}
	got := qLookup(t, q, id).LastError
	if len(got) > 1024 || !strings.HasPrefix(reason, got) || len(got) < 1020 {
		t.Errorf("LastError has %d bytes; want a prefix of the reason of at most 1024", len(got))
	}
	if !utf8.ValidString(got) {
		t.Errorf("LastError of a long UTF-8 reason is not valid UTF-8: cut inside a character (ends in %q)", got[len(got)-3:])
	}
}

// TestQueueFailReasonInvalidUTF8: a reason that is not valid UTF-8 is kept
// as text: each byte that is not part of a character becomes U+FFFD, and
// the cut at 1 KiB falls on a character boundary of the repaired text, on
// every backend.
func TestQueueFailReasonInvalidUTF8(t *testing.T) {
	db, _, _ := openQueueDB(t)
	a := strings.Repeat
	for _, c := range []struct{ name, reason, want string }{
		{"one bad byte", "bad \xff byte", "bad \uFFFD byte"},
		{"only a bad byte", "\xff", "\uFFFD"},
		{"a lead byte without its tail", "\xc3(", "\uFFFD("},
		{"a U+FFFD given is kept", "x\uFFFDy", "x\uFFFDy"},
		{"a bad byte at the cut", a("a", 1023) + "\xff" + a("b", 10), a("a", 1023)},
		{"half a character at the cut", a("a", 1022) + "\xe2\x82" + "zz", a("a", 1022)},
		{"a character before a bad byte at the cut", a("a", 1020) + "€" + "\xff\xff", a("a", 1020) + "€"},
		{"bad bytes before the cut grow past it", a("\xff", 400), a("\uFFFD", 341)},
		{"continuation bytes only", a("\x80", 2000), a("\uFFFD", 341)},
		{"short and bad, then long", "\xff" + a("é", 1000), "\uFFFD" + a("é", 510)},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := qOpen(t, db, c.name)
			id := qEnqueue(t, q, storh.Map{"case": c.name})
			qClaim(t, q, time.Minute)
			if err := q.Fail(id, c.reason); err != nil {
				t.Fatal(err)
			}
			got := qLookup(t, q, id).LastError
			if !utf8.ValidString(got) || len(got) > 1024 {
				t.Errorf("LastError is %d bytes, valid UTF-8 %v: want valid UTF-8 of at most 1024 bytes", len(got), utf8.ValidString(got))
			}
			if got != c.want {
				t.Errorf("LastError = %q (%d bytes), want %q (%d bytes)", shorten(got), len(got), shorten(c.want), len(c.want))
			}
			// The listing reads the same stored reason.
			for _, j := range qJobs(t, q, storh.JobPending) {
				if j.ID == id && j.LastError != c.want {
					t.Errorf("Jobs(pending) gives LastError %q, want %q", shorten(j.LastError), shorten(c.want))
				}
			}
		})
	}
}

// shorten cuts a long string for a message, keeping its ends.
func shorten(s string) string {
	if len(s) <= 40 {
		return s
	}
	return s[:16] + "…" + s[len(s)-16:]
}

func TestQueueExtend(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	a := qEnqueue(t, q, storh.Map{"n": "a"})
	b := qEnqueue(t, q, storh.Map{"n": "b"})
	ja := qClaim(t, q, 10*time.Second)
	jb := qClaim(t, q, 20*time.Second)
	qWantIDs(t, q, storh.JobClaimed, a, b)

	clk.Advance(5 * time.Second)
	until, err := q.Extend(a, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := clk.Ms() + 60_000; until.UnixMilli() != want {
		t.Errorf("Extend = %v; want %d ms", until, want)
	}
	if got := qLookup(t, q, a); !got.LeaseUntil.Equal(until) || got.State != storh.JobClaimed || got.Attempts != 1 {
		t.Errorf("after Extend: lease %v, %v, %d attempts; want %v, claimed, 1", got.LeaseUntil, got.State, got.Attempts, until)
	}
	// The claimed listing is by lease end: b first now.
	qWantIDs(t, q, storh.JobClaimed, b, a)
	// a's first lease end passes: still claimed. b's passes: b is back.
	clk.Advance(ja.LeaseUntil.Sub(clk.Now()) + time.Millisecond)
	if _, err := q.Claim(time.Minute); !errors.Is(err, storh.ErrEmpty) {
		t.Fatalf("Claim after a's old lease end = %v; want ErrEmpty", err)
	}
	clk.Advance(jb.LeaseUntil.Sub(clk.Now()) - time.Millisecond)
	if _, err := q.Claim(time.Minute); !errors.Is(err, storh.ErrEmpty) {
		t.Fatalf("Claim 1 ms before b's lease end = %v; want ErrEmpty", err)
	}
	clk.Advance(time.Millisecond) // exactly b's lease end: ended
	if j := qClaim(t, q, time.Minute); j.ID != b || j.Attempts != 2 || j.LastError != "lease expired" {
		t.Errorf("Claim at b's lease end = %v, %d attempts, %q; want b again, 2", j.ID, j.Attempts, j.LastError)
	}
	// Extend shortens too: the lease end is lease from now, whatever it was.
	until, err = q.Extend(a, time.Millisecond)
	if err != nil || until.UnixMilli() != clk.Ms()+1 {
		t.Fatalf("Extend(1ms) = %v, %v; want %d ms", until, err, clk.Ms()+1)
	}
	// A sub-millisecond lease is one millisecond.
	until, err = q.Extend(a, time.Microsecond)
	if err != nil || until.UnixMilli() != clk.Ms()+1 {
		t.Fatalf("Extend(1µs) = %v, %v; want %d ms", until, err, clk.Ms()+1)
	}
	qWantIDs(t, q, storh.JobClaimed, a, b)
	clk.Advance(time.Millisecond)
	if n, err := q.RequeueExpired(); n != 1 || err != nil {
		t.Fatalf("RequeueExpired = %d, %v; want 1 (a)", n, err)
	}
	qWantJob(t, q, a, storh.JobPending, 1, "lease expired")
	qVerify(t, db, "extends")
}

func TestQueueExtendErrorReturnsZeroTime(t *testing.T) {
	db, _, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	id := qEnqueue(t, q, storh.Map{"a": 1})
	for name, call := range map[string]func() (time.Time, error){
		"pending":   func() (time.Time, error) { return q.Extend(id, time.Minute) },
		"unknown":   func() (time.Time, error) { return q.Extend(idAt(t, 1_700_000_000_000), time.Minute) },
		"bad id":    func() (time.Time, error) { return q.Extend(v4ID, time.Minute) },
		"bad lease": func() (time.Time, error) { return q.Extend(id, 0) },
	} {
		until, err := call()
		if err == nil {
			t.Errorf("Extend of %s: no error", name)
		}
		if !until.IsZero() {
			t.Errorf("Extend of %s failed (%v) but returned the time %v; want the zero time", name, err, until)
		}
	}
}

func TestQueuePurgeDone(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(1))
	var done []uuidv7.UUID
	// Five done jobs, completed a minute apart.
	for i := range 5 {
		id := qEnqueue(t, q, storh.Map{"i": i})
		qClaim(t, q, time.Hour)
		if err := q.Complete(id); err != nil {
			t.Fatal(err)
		}
		done = append(done, id)
		clk.Advance(time.Minute)
	}
	// Old jobs in every other state: purge leaves them alone.
	pending := qEnqueue(t, q, storh.Map{"s": "pending"})
	claimed := qEnqueue(t, q, storh.Map{"s": "claimed"})
	dead := qEnqueue(t, q, storh.Map{"s": "dead"})
	js, err := q.ClaimMany(3, 100*time.Hour)
	if err != nil || len(js) != 3 {
		t.Fatal(len(js), err)
	}
	if err := q.Release(pending); err != nil {
		t.Fatal(err)
	}
	if err := q.Fail(dead, "x"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Hour)
	qWantCounts(t, q, 1, 1, 5, 1)
	qWantIDs(t, q, storh.JobDone, done...)
	// now = done[0] + 5 min + 10 h: jobs done more than 10h 2min ago are
	// done[0], done[1] and done[2] (10h 5m, 10h 4m, 10h 3m ago), done[3]
	// is exactly 10h 2m ago: not more.
	n, err := q.PurgeDone(10*time.Hour + 2*time.Minute)
	if err != nil || n != 3 {
		t.Fatalf("PurgeDone = %d, %v; want 3", n, err)
	}
	qWantIDs(t, q, storh.JobDone, done[3:]...)
	qWantCounts(t, q, 1, 1, 2, 1)
	for _, id := range done[:3] {
		if _, err := q.Lookup(id); !errors.Is(err, storh.ErrNotFound) {
			t.Errorf("Lookup of a purged job = %v; want ErrNotFound", err)
		}
	}
	if c := mustCount(t, q); c != 5 {
		t.Errorf("Count after purge = %d; want 5", c)
	}
	// Nothing more is that old.
	if n, err := q.PurgeDone(10*time.Hour + 2*time.Minute); n != 0 || err != nil {
		t.Errorf("second PurgeDone = %d, %v; want 0", n, err)
	}
	// A purged id is free again: it is a new job at the end.
	qEnqueueID(t, q, done[0], storh.Map{"again": true})
	qWantIDs(t, q, storh.JobPending, pending, done[0])
	if j := qLookup(t, q, done[0]); j.State != storh.JobPending || j.Attempts != 0 || j.Data()["again"] != true {
		t.Errorf("re-enqueued purged id: %v, %d attempts, %v", j.State, j.Attempts, j.Data())
	}
	// PurgeDone(0) takes every done job completed before now.
	if n, err := q.PurgeDone(0); n != 2 || err != nil {
		t.Errorf("PurgeDone(0) = %d, %v; want 2", n, err)
	}
	qWantCounts(t, q, 2, 1, 0, 1)
	qWantJob(t, q, claimed, storh.JobClaimed, 1, "")
	qWantJob(t, q, dead, storh.JobDead, 1, "x")
	qVerify(t, db, "purges")
}

func TestQueuePurgeDoneInBatches(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	const n = 5000 + 37 // more than one purge transaction
	items := make([]any, n)
	for i := range items {
		items[i] = storh.Map{"i": i}
	}
	idList, err := q.EnqueueMany(items)
	if err != nil {
		t.Fatal(err)
	}
	js, err := q.ClaimMany(n, time.Hour)
	if err != nil || len(js) != n {
		t.Fatalf("ClaimMany(%d) = %d, %v", n, len(js), err)
	}
	if c, err := q.CompleteMany(idList); c != n || err != nil {
		t.Fatalf("CompleteMany = %d, %v", c, err)
	}
	keep := qEnqueue(t, q, storh.Map{"keep": true})
	clk.Advance(time.Second)
	got, err := q.PurgeDone(time.Millisecond)
	if err != nil || got != n {
		t.Fatalf("PurgeDone = %d, %v; want %d", got, err, n)
	}
	qWantCounts(t, q, 1, 0, 0, 0)
	if c := mustCount(t, q); c != 1 {
		t.Errorf("Count = %d; want 1", c)
	}
	qWantIDs(t, q, storh.JobPending, keep)
	qVerify(t, db, "a purge in batches")
}

func TestQueueCountsAndStats(t *testing.T) {
	db, _, _ := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(1))
	st, err := q.Stats()
	if err != nil || st.Name != "q" || st.Kind != "queue" || st.Records != 0 || st.Pending+st.Claimed+st.Done+st.Dead != 0 {
		t.Errorf("Stats of a fresh queue = %+v, %v", st, err)
	}
	var all []uuidv7.UUID
	for i := range 10 {
		all = append(all, qEnqueue(t, q, storh.Map{"i": i}))
	}
	js, err := q.ClaimMany(6, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := q.CompleteMany([]uuidv7.UUID{js[0].ID, js[1].ID, js[2].ID}); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	if err := q.Fail(js[3].ID, "x"); err != nil {
		t.Fatal(err)
	}
	if err := q.Fail(js[4].ID, "y"); err != nil {
		t.Fatal(err)
	}
	qWantCounts(t, q, 4, 1, 3, 2)
	st, err = q.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Pending != 4 || st.Claimed != 1 || st.Done != 3 || st.Dead != 2 || st.Records != 10 || st.Kind != "queue" || st.Name != "q" {
		t.Errorf("Stats = %+v; want 4 pending, 1 claimed, 3 done, 2 dead, 10 records", st)
	}
	if st.FirstID != all[0] || st.LastID != all[9] || st.Bytes <= 0 {
		t.Errorf("Stats ids %v..%v, %d bytes; want %v..%v", st.FirstID, st.LastID, st.Bytes, all[0], all[9])
	}
	if c := mustCount(t, q); c != 10 {
		t.Errorf("Count = %d; want 10", c)
	}
	// The counts are the listings' lengths.
	for state, want := range map[storh.JobState]int{storh.JobPending: 4, storh.JobClaimed: 1, storh.JobDone: 3, storh.JobDead: 2} {
		if got := len(qJobs(t, q, state)); got != want {
			t.Errorf("Jobs(%v) lists %d; want %d", state, got, want)
		}
	}
	// Two handles on one queue see one set of counts.
	other := qOpen(t, db, "q")
	qWantCounts(t, other, 4, 1, 3, 2)
	// A queue never written has no jobs.
	qWantCounts(t, qOpen(t, db, "never"), 0, 0, 0, 0)
}

func TestQueueJobStateString(t *testing.T) {
	for s, want := range map[storh.JobState]string{storh.JobPending: "pending", storh.JobClaimed: "claimed", storh.JobDone: "done", storh.JobDead: "dead"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q; want %q", s, s.String(), want)
		}
	}
}

func TestQueueLookup(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(1))
	type payload struct {
		Name string   `msgpack:"name"`
		Tags []string `msgpack:"tags"`
	}
	want := map[uuidv7.UUID]payload{}
	for _, p := range []payload{{"a", []string{"x"}}, {"b", nil}, {"c", []string{"y", "z"}}, {"d", nil}} {
		want[qEnqueue(t, q, p)] = p
		clk.Advance(time.Millisecond)
	}
	js, err := q.ClaimMany(3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := q.Complete(js[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := q.Fail(js[1].ID, "nope"); err != nil {
		t.Fatal(err)
	}
	for id, p := range want {
		j := qLookup(t, q, id)
		var got payload
		if err := j.Decode(&got); err != nil {
			t.Fatal(err)
		}
		if j.ID != id || !reflect.DeepEqual(got, p) {
			t.Errorf("Lookup(%v) = %v %+v; want %+v", id, j.ID, got, p)
		}
		// Lookup agrees with the listing of the job's state.
		found := false
		for _, l := range qJobs(t, q, j.State) {
			if l.ID == id {
				found = true
				if l.State != j.State || l.Attempts != j.Attempts || !l.LeaseUntil.Equal(j.LeaseUntil) || !l.Changed.Equal(j.Changed) || l.LastError != j.LastError {
					t.Errorf("Jobs lists %+v; Lookup says %+v", l, j)
				}
			}
		}
		if !found {
			t.Errorf("job %v (%v) is not in Jobs(%v)", id, j.State, j.State)
		}
	}
	if j := qLookup(t, q, js[2].ID); j.State != storh.JobClaimed || j.LeaseUntil.UnixMilli() != js[2].LeaseUntil.UnixMilli() {
		t.Errorf("claimed job: %v until %v", j.State, j.LeaseUntil)
	}
	// Lookup inside transactions, read and write.
	err = db.View(func(tx *storh.Tx) error {
		tq, err := tx.Queue("q")
		if err != nil {
			return err
		}
		j, err := tq.Lookup(js[1].ID)
		if err != nil || j.State != storh.JobDead || j.LastError != "nope" || j.Data()["name"] != want[js[1].ID].Name {
			return fmt.Errorf("Lookup in View = %+v, %v", j, err)
		}
		_, err = tq.Lookup(idAt(t, 1_700_000_000_000))
		if !errors.Is(err, storh.ErrNotFound) {
			return fmt.Errorf("Lookup of an unknown id in View = %v", err)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

func TestQueueJobsOrderPerState(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(1))
	// Ids descending in time, enqueued in that order: every index order
	// below differs from id order.
	id := qIDsDescending(t, 8)
	for i, x := range id {
		qEnqueueID(t, q, x, storh.Map{"i": i})
	}
	qWantIDs(t, q, storh.JobPending, id...)

	// Claimed: by lease end, not claim order.
	leases := []time.Duration{50 * time.Second, 10 * time.Second, 30 * time.Second, 20 * time.Second, 40 * time.Second, 60 * time.Second}
	for i, l := range leases {
		if j := qClaim(t, q, l); j.ID != id[i] {
			t.Fatalf("claim %d = %v; want %v", i, j.ID, id[i])
		}
	}
	qWantIDs(t, q, storh.JobClaimed, id[1], id[3], id[2], id[4], id[0], id[5])
	claimed := qJobs(t, q, storh.JobClaimed)
	for i := 1; i < len(claimed); i++ {
		if claimed[i].LeaseUntil.Before(claimed[i-1].LeaseUntil) {
			t.Errorf("claimed listing out of lease order at %d", i)
		}
	}
	// Done: by completion time, not claim or id order.
	for _, x := range []uuidv7.UUID{id[2], id[0], id[4]} {
		clk.Advance(time.Second)
		if err := q.Complete(x); err != nil {
			t.Fatal(err)
		}
	}
	qWantIDs(t, q, storh.JobDone, id[2], id[0], id[4])
	// Dead: by time of death.
	for _, x := range []uuidv7.UUID{id[5], id[1]} {
		clk.Advance(time.Second)
		if err := q.Fail(x, "x"); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute) // id[3]'s lease (20 s) has ended: it dies now
	if n, err := q.RequeueExpired(); n != 1 || err != nil {
		t.Fatalf("RequeueExpired = %d, %v", n, err)
	}
	qWantIDs(t, q, storh.JobDead, id[5], id[1], id[3])
	qWantIDs(t, q, storh.JobPending, id[6], id[7])
	qWantIDs(t, q, storh.JobClaimed)
	// Listings carry no payload.
	for _, s := range []storh.JobState{storh.JobPending, storh.JobDone, storh.JobDead} {
		for _, j := range qJobs(t, q, s) {
			if j.Raw() != nil || j.State != s {
				t.Errorf("Jobs(%v) lists %v as %v with a %d-byte payload", s, j.ID, j.State, len(j.Raw()))
			}
		}
	}
	// An early break stops the listing.
	n := 0
	for _, err := range q.Jobs(storh.JobDead) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		break
	}
	if n != 1 {
		t.Errorf("a listing broken after one job yielded %d", n)
	}
}

func TestQueueJobsUnknownState(t *testing.T) {
	db, _, _ := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(1))
	id := qEnqueue(t, q, storh.Map{"a": 1})
	qClaim(t, q, time.Minute)
	if err := q.Fail(id, "dead"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []storh.JobState{0, 5, 255} {
		var listed []string
		var lastErr error
		for j, err := range q.Jobs(s) {
			if err != nil {
				lastErr = err
				break
			}
			listed = append(listed, fmt.Sprintf("%v (%v)", j.ID, j.State))
		}
		if len(listed) != 0 {
			t.Errorf("Jobs(%v) listed %v (error %v); want no jobs for a state that does not exist", s, listed, lastErr)
		}
	}
}

func TestQueueJobsPaging(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	const n = 600 // a few read chunks
	id := qIDsDescending(t, n)
	items := make([]any, n)
	for i := range items {
		items[i] = storh.Entry{ID: id[i], Data: storh.Map{"i": i}}
	}
	if _, err := q.EnqueueMany(items); err != nil {
		t.Fatal(err)
	}
	qWantIDs(t, q, storh.JobPending, id...)
	// Claim them all with leases in reverse order: the listing by lease
	// end is reverse enqueue order.
	for i := range n {
		j := qClaim(t, q, time.Duration(n-i)*time.Second)
		if j.ID != id[i] {
			t.Fatalf("claim %d = %v; want %v", i, j.ID, id[i])
		}
	}
	rev := slices.Clone(id)
	slices.Reverse(rev)
	qWantIDs(t, q, storh.JobClaimed, rev...)
	// Complete at one instant: done jobs of one millisecond are in id
	// order, and there are more than a chunk of them.
	clk.Advance(time.Millisecond)
	if c, err := q.CompleteMany(id); c != n || err != nil {
		t.Fatal(c, err)
	}
	byID := slices.Clone(id)
	slices.SortFunc(byID, uuidv7.UUID.Compare)
	qWantIDs(t, q, storh.JobDone, byID...)
}

func TestQueueEnqueueMany(t *testing.T) {
	db, _, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	existing := qEnqueue(t, q, storh.Map{"first": true})
	fresh := qIDsDescending(t, 3)

	got, err := q.EnqueueMany([]any{storh.Map{"i": 0}, storh.Entry{ID: fresh[0], Data: storh.Map{"i": 1}}, qTask{Name: "t", N: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1] != fresh[0] || !got[0].IsV7() || !got[2].IsV7() || got[0] == got[2] {
		t.Fatalf("EnqueueMany ids = %v", got)
	}
	qWantIDs(t, q, storh.JobPending, existing, got[0], got[1], got[2])
	var task qTask
	if err := qLookup(t, q, got[2]).Decode(&task); err != nil || task != (qTask{"t", 2}) {
		t.Errorf("struct payload = %+v, %v", task, err)
	}
	if d := qLookup(t, q, got[1]).Data(); d["i"] != int64(1) {
		t.Errorf("Entry payload = %v", d)
	}
	if ids, err := q.EnqueueMany(nil); err != nil || len(ids) != 0 {
		t.Errorf("EnqueueMany(nil) = %v, %v", ids, err)
	}

	// got[1] done: its id is taken for good (until purged).
	if js, err := q.ClaimMany(4, time.Hour); err != nil || len(js) != 4 {
		t.Fatal(js, err)
	}
	if err := q.Complete(got[1]); err != nil {
		t.Fatal(err)
	}
	// All or nothing: each bad batch leaves the file as it was, and its
	// error names the item.
	for _, c := range []struct {
		name  string
		items []any
		want  error
		index int
		id    uuidv7.UUID
	}{
		{"an id already queued", []any{storh.Map{"a": 1}, storh.Entry{ID: fresh[1], Data: storh.Map{"a": 2}}, storh.Entry{ID: existing, Data: storh.Map{"a": 3}}}, storh.ErrExists, 2, existing},
		{"an id twice in the batch", []any{storh.Entry{ID: fresh[1], Data: storh.Map{"a": 1}}, storh.Map{"a": 2}, storh.Entry{ID: fresh[1], Data: storh.Map{"a": 3}}}, storh.ErrExists, 2, fresh[1]},
		{"an id of a done job", []any{storh.Map{"a": 1}, storh.Entry{ID: got[1], Data: storh.Map{"a": 2}}}, storh.ErrExists, 1, got[1]},
		{"a bad id", []any{storh.Map{"a": 1}, storh.Entry{ID: v4ID, Data: storh.Map{"a": 2}}}, storh.ErrInvalidID, 1, v4ID},
		{"bad data", []any{storh.Map{"a": 1}, storh.Map{"a": 2}, "text"}, storh.ErrInvalidData, 2, uuidv7.UUID{}},
		{"bad data in an Entry", []any{storh.Entry{ID: fresh[2], Data: nil}}, storh.ErrInvalidData, 0, uuidv7.UUID{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := digest(t, db)
			counts, _ := q.Counts()
			p0, c0, d0, x0 := counts.Pending, counts.Claimed, counts.Done, counts.Dead
			ids, err := q.EnqueueMany(c.items)
			checkErr(t, err, c.want, `"q"`, fmt.Sprintf("item %d", c.index))
			var e *storh.Error
			if !errors.As(err, &e) || e.Index != c.index {
				t.Errorf("error %v: Index %v; want %d", err, e, c.index)
			} else if !c.id.IsZero() && e.ID != c.id.String() {
				t.Errorf("error ID %q; want %v", e.ID, c.id)
			}
			if ids != nil {
				t.Errorf("a failed EnqueueMany returned ids %v", ids)
			}
			if digest(t, db) != before {
				t.Error("a failed EnqueueMany changed the file")
			}
			qWantCounts(t, q, p0, c0, d0, x0)
		})
	}
	if _, err := q.Lookup(fresh[1]); !errors.Is(err, storh.ErrNotFound) {
		t.Errorf("a job of a failed batch is there: %v", err)
	}
	qVerify(t, db, "EnqueueMany")
}

// EnqueueMany takes its items as PutMany does: an Entry with a zero id is
// a payload under a new id, and a *Entry is an Entry.
func TestQueueEnqueueManyEntryWithoutID(t *testing.T) {
	db, _, _ := openQueueDB(t)
	d, err := db.Docs("d")
	if err != nil {
		t.Fatal(err)
	}
	q := qOpen(t, db, "q")
	items := []any{storh.Map{"a": 0}, storh.Entry{Data: storh.Map{"a": 1}}}
	if recs, err := d.PutMany(items); err != nil || len(recs) != 2 || !recs[1].ID.IsV7() {
		t.Fatalf("PutMany of the same items = %v, %v", recs, err)
	}
	got, err := q.EnqueueMany(items)
	if err != nil {
		t.Fatalf("EnqueueMany(Entry without an id) = %v; PutMany gives it a new id", err)
	}
	if len(got) != 2 || !got[1].IsV7() {
		t.Errorf("EnqueueMany ids = %v", got)
	}
}

func TestQueueEnqueueManyEntryPointer(t *testing.T) {
	db, _, _ := openQueueDB(t)
	d, err := db.Docs("d")
	if err != nil {
		t.Fatal(err)
	}
	q := qOpen(t, db, "q")
	explicit := idAt(t, 1_700_000_000_000)
	items := []any{&storh.Entry{ID: explicit, Data: storh.Map{"a": 2}}}
	if recs, err := d.PutMany(items); err != nil || len(recs) != 1 || recs[0].ID != explicit {
		t.Fatalf("PutMany of the same items = %v, %v", recs, err)
	}
	got, err := q.EnqueueMany(items)
	if err != nil {
		t.Fatalf("EnqueueMany(*Entry) = %v", err)
	}
	j, err := q.Lookup(got[0])
	if got[0] != explicit || err != nil || !reflect.DeepEqual(j.Data(), storh.Map{"a": int64(2)}) {
		t.Errorf("EnqueueMany(&Entry{ID: %v, Data: {a: 2}}) enqueued id %v with payload %v (%v); want the Entry's id and data, as PutMany", explicit, got[0], j.Data(), err)
	}
}

func TestQueueEnqueueManyAllOrNothingInUpdate(t *testing.T) {
	db, _, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	existing := qEnqueue(t, q, storh.Map{"a": 0})
	err := db.Update(func(tx *storh.Tx) error {
		tq, err := tx.Queue("q")
		if err != nil {
			return err
		}
		_, err = tq.EnqueueMany([]any{storh.Map{"a": 1}, storh.Map{"a": 2}, storh.Entry{ID: existing, Data: storh.Map{"a": 3}}})
		if !errors.Is(err, storh.ErrExists) {
			return fmt.Errorf("EnqueueMany with an existing id in Update = %v; want ErrExists", err)
		}
		// "all or none": the failed batch left nothing in the transaction.
		if n, err := tq.Counts(); err != nil || n.Pending != 1 {
			return fmt.Errorf("after a failed EnqueueMany the transaction holds %d pending jobs (%v); want 1", n.Pending, err)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

func TestQueueCompleteMany(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(1))
	var id []uuidv7.UUID
	for i := range 8 {
		id = append(id, qEnqueue(t, q, storh.Map{"i": i}))
	}
	if _, err := q.ClaimMany(6, time.Minute); err != nil {
		t.Fatal(err)
	}
	// id[0..5] claimed, id[6..7] pending. Make id[4] done and id[5] dead.
	if err := q.Complete(id[4]); err != nil {
		t.Fatal(err)
	}
	if err := q.Fail(id[5], "x"); err != nil {
		t.Fatal(err)
	}
	// id[3]'s lease ended, and no claim took it back: it still completes.
	clk.Advance(2 * time.Minute)
	doneAt := clk.Ms()
	unknown := idAt(t, 1_700_000_000_000)
	n, err := q.CompleteMany([]uuidv7.UUID{id[0], id[6], id[1], unknown, id[4], id[5], id[0], id[3]})
	if err != nil || n != 3 {
		t.Fatalf("CompleteMany = %d, %v; want 3 (id[0], id[1], id[3])", n, err)
	}
	for _, x := range []uuidv7.UUID{id[0], id[1], id[3]} {
		if j := qWantJob(t, q, x, storh.JobDone, 1, ""); j.Changed.UnixMilli() != doneAt {
			t.Errorf("completed at %v; want %d ms", j.Changed, doneAt)
		}
	}
	qWantJob(t, q, id[2], storh.JobClaimed, 1, "")
	qWantJob(t, q, id[6], storh.JobPending, 0, "")
	qWantJob(t, q, id[5], storh.JobDead, 1, "x")
	qWantCounts(t, q, 2, 1, 4, 1)
	if n, err := q.CompleteMany(nil); n != 0 || err != nil {
		t.Errorf("CompleteMany(nil) = %d, %v", n, err)
	}
	if n, err := q.CompleteMany([]uuidv7.UUID{id[0], unknown}); n != 0 || err != nil {
		t.Errorf("CompleteMany of nothing claimed = %d, %v", n, err)
	}
	// A bad id fails the whole call before anything is completed.
	before := digest(t, db)
	_, err = q.CompleteMany([]uuidv7.UUID{id[2], v4ID})
	checkErr(t, err, storh.ErrInvalidID, "item 1")
	if digest(t, db) != before {
		t.Error("a failed CompleteMany changed the file")
	}
	qWantJob(t, q, id[2], storh.JobClaimed, 1, "")
	qVerify(t, db, "CompleteMany")
}

func TestQueueInUpdate(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	pre := qEnqueue(t, q, storh.Map{"pre": true})

	// A committed Update: everything it did is there.
	var a, b uuidv7.UUID
	err := db.Update(func(tx *storh.Tx) error {
		tq, err := tx.Queue("q")
		if err != nil {
			return err
		}
		if a, err = tq.Enqueue(storh.Map{"n": "a"}); err != nil {
			return err
		}
		ids, err := tq.EnqueueMany([]any{storh.Map{"n": "b"}})
		if err != nil {
			return err
		}
		b = ids[0]
		js, err := tq.ClaimMany(2, time.Minute)
		if err != nil || len(js) != 2 || js[0].ID != pre || js[1].ID != a {
			return fmt.Errorf("ClaimMany in Update = %v, %v", js, err)
		}
		if err := tq.Complete(pre); err != nil {
			return err
		}
		if _, err := tq.Extend(a, time.Hour); err != nil {
			return err
		}
		// The transaction sees its own work.
		if n, err := tq.Counts(); n != (storh.QueueCounts{Pending: 1, Claimed: 1, Done: 1}) || err != nil {
			return fmt.Errorf("Counts in Update = %+v, %v", n, err)
		}
		var pending []uuidv7.UUID
		for j, err := range tq.Jobs(storh.JobPending) {
			if err != nil {
				return err
			}
			pending = append(pending, j.ID)
		}
		if !sameIDs(pending, []uuidv7.UUID{b}) {
			return fmt.Errorf("Jobs(pending) in Update = %v", pending)
		}
		_, err = tq.ClaimWait(context.Background(), time.Minute)
		if !errors.Is(err, storh.ErrNestedTx) {
			return fmt.Errorf("ClaimWait in Update = %v; want ErrNestedTx", err)
		}
		// The DB-level handle cannot be used from inside the callback.
		if _, err := q.Enqueue(storh.Map{"x": 1}); !errors.Is(err, storh.ErrNestedTx) {
			return fmt.Errorf("DB-level Enqueue inside Update = %v; want ErrNestedTx", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	qWantJob(t, q, pre, storh.JobDone, 1, "")
	if j := qWantJob(t, q, a, storh.JobClaimed, 1, ""); j.LeaseUntil.UnixMilli() != clk.Ms()+3_600_000 {
		t.Errorf("lease extended in Update: %v", j.LeaseUntil)
	}
	qWantIDs(t, q, storh.JobPending, b)
	qWantCounts(t, q, 1, 1, 1, 0)

	// A rolled back Update leaves nothing of its work.
	before := digest(t, db)
	errRollback := errors.New("roll back")
	err = db.Update(func(tx *storh.Tx) error {
		tq, err := tx.Queue("q")
		if err != nil {
			return err
		}
		if _, err := tq.Enqueue(storh.Map{"n": "c"}); err != nil {
			return err
		}
		if _, err := tq.Claim(time.Minute); err != nil {
			return err
		}
		if err := tq.Complete(a); err != nil {
			return err
		}
		if _, err := tq.PurgeDone(0); err != nil {
			return err
		}
		other, err := tx.Queue("other")
		if err != nil {
			return err
		}
		if _, err := other.Enqueue(storh.Map{"n": "d"}); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Update = %v", err)
	}
	if digest(t, db) != before {
		t.Error("a rolled back Update changed the file")
	}
	qWantCounts(t, q, 1, 1, 1, 0)
	qWantCounts(t, qOpen(t, db, "other"), 0, 0, 0, 0)

	// A View reads but cannot write.
	err = db.View(func(tx *storh.Tx) error {
		tq, err := tx.Queue("q")
		if err != nil {
			return err
		}
		if n, err := tq.Counts(); n != (storh.QueueCounts{Pending: 1, Claimed: 1, Done: 1}) || err != nil {
			return fmt.Errorf("Counts in View = %+v, %v", n, err)
		}
		if n := len(slices.Collect(func(yield func(storh.Job) bool) {
			for j, err := range tq.Jobs(storh.JobDone) {
				if err != nil || !yield(j) {
					return
				}
			}
		})); n != 1 {
			return fmt.Errorf("Jobs(done) in View lists %d", n)
		}
		for name, call := range map[string]func() error{
			"Enqueue":        func() error { _, err := tq.Enqueue(storh.Map{"a": 1}); return err },
			"EnqueueWithID":  func() error { return tq.EnqueueWithID(idAt(t, 1_700_000_000_000), storh.Map{"a": 1}) },
			"EnqueueMany":    func() error { _, err := tq.EnqueueMany([]any{storh.Map{"a": 1}}); return err },
			"Claim":          func() error { _, err := tq.Claim(time.Minute); return err },
			"ClaimMany":      func() error { _, err := tq.ClaimMany(2, time.Minute); return err },
			"Complete":       func() error { return tq.Complete(a) },
			"CompleteMany":   func() error { _, err := tq.CompleteMany([]uuidv7.UUID{a}); return err },
			"Fail":           func() error { return tq.Fail(a, "x") },
			"Extend":         func() error { _, err := tq.Extend(a, time.Minute); return err },
			"Release":        func() error { return tq.Release(a) },
			"RequeueExpired": func() error { _, err := tq.RequeueExpired(); return err },
			"PurgeDone":      func() error { _, err := tq.PurgeDone(0); return err },
		} {
			if err := call(); !errors.Is(err, storh.ErrReadOnly) {
				return fmt.Errorf("%s in View = %v; want ErrReadOnly", name, err)
			}
		}
		if _, err := tq.ClaimWait(context.Background(), time.Minute); !errors.Is(err, storh.ErrNestedTx) {
			return fmt.Errorf("ClaimWait in View = %v; want ErrNestedTx", err)
		}
		// A queue not in the file is not found in a View.
		if _, err := tx.Queue("missing"); !errors.Is(err, storh.ErrNotFound) {
			return fmt.Errorf("tx.Queue of a missing queue in View = %v; want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	// A handle from an ended transaction is closed.
	var kept *storh.Queue
	if err := db.Update(func(tx *storh.Tx) error { var err error; kept, err = tx.Queue("q"); return err }); err != nil {
		t.Fatal(err)
	}
	if _, err := kept.Enqueue(storh.Map{"late": true}); !errors.Is(err, storh.ErrClosed) {
		t.Errorf("Enqueue through an ended transaction's handle = %v; want ErrClosed", err)
	}
	qWantCounts(t, q, 1, 1, 1, 0)
	qVerify(t, db, "transactions")
}

// qSnapshot describes a queue completely: counts, and every job of every
// state in listing order with all its fields and payload.
func qSnapshot(t testing.TB, q *storh.Queue) string {
	t.Helper()
	var b strings.Builder
	counts, err := q.Counts()
	p, c, d, x := counts.Pending, counts.Claimed, counts.Done, counts.Dead
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "counts %d %d %d %d\n", p, c, d, x)
	for _, s := range []storh.JobState{storh.JobPending, storh.JobClaimed, storh.JobDone, storh.JobDead} {
		for _, l := range qJobs(t, q, s) {
			j := qLookup(t, q, l.ID)
			fmt.Fprintf(&b, "%v %v %v attempts=%d lease=%d changed=%d err=%q data=%v\n", s, j.ID, j.State, j.Attempts,
				j.LeaseUntil.UnixMilli(), j.Changed.UnixMilli(), j.LastError, j.Data())
		}
	}
	return b.String()
}

func TestQueueSurvivesReopen(t *testing.T) {
	clk := newTestClock()
	path := newPath(t)
	db, err := storh.Open(path, storh.WithoutSync(), storh.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	q := qOpen(t, db, "q", storh.WithMaxAttempts(2))
	// Enqueue order: three ids going back in time, then fresh ones.
	old := qIDsDescending(t, 3)
	var id []uuidv7.UUID
	for i := range 8 {
		if i < 3 {
			qEnqueueID(t, q, old[i], storh.Map{"i": i})
			id = append(id, old[i])
		} else {
			id = append(id, qEnqueue(t, q, storh.Map{"i": i}))
		}
		clk.Advance(time.Millisecond)
	}
	js, err := q.ClaimMany(7, 10*time.Second)
	if err != nil || len(js) != 7 || js[6].ID != id[6] {
		t.Fatal(js, err)
	}
	clk.Advance(time.Second)
	if err := q.Complete(id[0]); err != nil {
		t.Fatal(err)
	}
	if err := q.Fail(id[1], "once"); err != nil {
		t.Fatal(err)
	}
	if err := q.Release(id[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Extend(id[3], time.Hour); err != nil {
		t.Fatal(err)
	}
	// id[1] again, failed for good.
	if j := qClaim(t, q, time.Minute); j.ID != id[1] {
		t.Fatalf("claimed %v; want %v", j.ID, id[1])
	}
	if err := q.Fail(id[1], "twice"); err != nil {
		t.Fatal(err)
	}
	// The leases of id[4], id[5], id[6] end; id[5]'s is extended, id[6]
	// released, id[4] put back by RequeueExpired.
	clk.Advance(10 * time.Second)
	if _, err := q.Extend(id[5], 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := q.Release(id[6]); err != nil {
		t.Fatal(err)
	}
	if n, err := q.RequeueExpired(); n != 1 || err != nil {
		t.Fatalf("RequeueExpired = %d, %v; want 1", n, err)
	}
	// id[2] is claimed again, and its lease ends before the close.
	if j := qClaim(t, q, 5*time.Millisecond); j.ID != id[2] {
		t.Fatalf("claimed %v; want %v", j.ID, id[2])
	}
	clk.Advance(10 * time.Millisecond)
	qWantCounts(t, q, 3, 3, 1, 1)
	qWantIDs(t, q, storh.JobPending, id[4], id[6], id[7])
	qWantIDs(t, q, storh.JobClaimed, id[2], id[3], id[5])
	qWantJob(t, q, id[4], storh.JobPending, 1, "lease expired")
	qWantJob(t, q, id[1], storh.JobDead, 2, "twice")
	want := qSnapshot(t, q)
	wantDigest := digest(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openAt(t, path, storh.WithClock(clk.Now))
	if digest(t, db) != wantDigest {
		t.Error("the file changed across Close and Open")
	}
	q = qOpen(t, db, "q", storh.WithMaxAttempts(2))
	if got := qSnapshot(t, q); got != want {
		t.Errorf("after reopen:\n%s\nwant\n%s", got, want)
	}
	qVerify(t, db, "reopen")
	// The order goes on: a new job comes after every old one, and claims
	// take the old ones in their order, id[2] (its lease ended) at its place.
	newest := qEnqueue(t, q, storh.Map{"new": true})
	wantOrder := []uuidv7.UUID{id[2], id[4], id[6], id[7], newest}
	var got []uuidv7.UUID
	for {
		j, err := q.Claim(time.Hour)
		if errors.Is(err, storh.ErrEmpty) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, j.ID)
	}
	if !sameIDs(got, wantOrder) {
		t.Errorf("claims after reopen %v; want %v", got, wantOrder)
	}
	qWantJob(t, q, id[2], storh.JobClaimed, 2, "lease expired")
	// A claim made before the close keeps its lease: it ends when it said.
	ext := qLookup(t, q, id[3])
	clk.Advance(ext.LeaseUntil.Sub(clk.Now()))
	if n, err := q.RequeueExpired(); n != 1 || err != nil {
		t.Fatalf("RequeueExpired at the old lease end = %d, %v", n, err)
	}
	qWantJob(t, q, id[3], storh.JobPending, 1, "lease expired")
}

// TestQueueVerifyAfterEveryOperation checks the queue's bookkeeping with
// Verify after each kind of operation, failed ones included.
func TestQueueVerifyAfterEveryOperation(t *testing.T) {
	db, clk, path := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(2))
	step := func(name string, fn func() error) {
		t.Helper()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		qVerify(t, db, name)
	}
	fails := func(name string, want error, fn func() error) {
		t.Helper()
		if err := fn(); !errors.Is(err, want) {
			t.Fatalf("%s = %v; want %v", name, err, want)
		}
		qVerify(t, db, name)
	}
	var a, b, c uuidv7.UUID
	old := idAt(t, 1_700_000_000_000)
	step("Enqueue", func() (err error) { a, err = q.Enqueue(storh.Map{"n": "a"}); return })
	step("EnqueueWithID", func() error { return q.EnqueueWithID(old, storh.Map{"n": "old"}) })
	step("EnqueueMany", func() error {
		ids, err := q.EnqueueMany([]any{storh.Map{"n": "b"}, storh.Map{"n": "c"}})
		if err == nil {
			b, c = ids[0], ids[1]
		}
		return err
	})
	fails("EnqueueWithID existing", storh.ErrExists, func() error { return q.EnqueueWithID(a, storh.Map{}) })
	fails("EnqueueMany existing", storh.ErrExists, func() error {
		_, err := q.EnqueueMany([]any{storh.Map{"n": 1}, storh.Entry{ID: b, Data: storh.Map{}}})
		return err
	})
	step("Claim", func() error { _, err := q.Claim(time.Minute); return err })
	step("ClaimMany", func() error { _, err := q.ClaimMany(2, time.Second); return err })
	step("Extend", func() error { _, err := q.Extend(a, 2*time.Minute); return err })
	step("Release", func() error { return q.Release(old) })
	step("Fail", func() error { return q.Fail(b, "boom") })
	fails("Complete pending", storh.ErrNotClaimed, func() error { return q.Complete(b) })
	step("Complete", func() error { return q.Complete(a) })
	step("CompleteMany", func() error { _, err := q.CompleteMany([]uuidv7.UUID{c, a, old}); return err })
	clk.Advance(time.Second)
	step("Claim after an expired lease", func() error { _, err := q.ClaimMany(5, time.Second); return err })
	step("Fail to dead", func() error { return q.Fail(b, "boom again") })
	clk.Advance(time.Second)
	step("RequeueExpired", func() error { _, err := q.RequeueExpired(); return err })
	step("Retry", func() error { return q.Retry(b) })
	fails("Claim of nothing", storh.ErrEmpty, func() error {
		_, _ = q.ClaimMany(10, time.Hour)
		_, err := q.Claim(time.Hour)
		return err
	})
	clk.Advance(2 * time.Hour)
	fails("Claim that kills expired claims", storh.ErrEmpty, func() error {
		if err := db.SetQueueOptions("q", storh.WithMaxAttempts(1)); err != nil {
			return err
		}
		_, err := q.Claim(time.Hour)
		if err := db.SetQueueOptions("q", storh.WithMaxAttempts(2)); err != nil {
			return err
		}
		return err
	})
	step("PurgeDone", func() error { _, err := q.PurgeDone(time.Millisecond); return err })
	step("Update", func() error {
		return db.Update(func(tx *storh.Tx) error {
			tq, err := tx.Queue("q")
			if err != nil {
				return err
			}
			x, err := tq.Enqueue(storh.Map{"n": "tx"})
			if err != nil {
				return err
			}
			if _, err := tq.Claim(time.Minute); err != nil {
				return err
			}
			if err := tq.Complete(x); err != nil {
				return err
			}
			_, err = tq.PurgeDone(-time.Hour)
			return err
		})
	})
	step("reopen", func() error {
		if err := db.Close(); err != nil {
			return err
		}
		db = openAt(t, path, storh.WithClock(clk.Now))
		q = qOpen(t, db, "q", storh.WithMaxAttempts(2))
		return nil
	})
	step("Enqueue after reopen", func() error { _, err := q.Enqueue(storh.Map{"n": "late"}); return err })
}

// ClaimWait runs on the real clock: its waits are real timers.

func TestQueueClaimWaitReturnsAtOnce(t *testing.T) {
	db := openTemp(t)
	q := qOpen(t, db, "q")
	id := qEnqueue(t, q, storh.Map{"a": 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	j, err := q.ClaimWait(ctx, time.Minute)
	if err != nil || j.ID != id || j.State != storh.JobClaimed || j.Attempts != 1 || j.Data()["a"] != int64(1) {
		t.Fatalf("ClaimWait = %+v, %v", j, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("ClaimWait with a job pending took %v", d)
	}
	// An ended context wins even over a pending job.
	qEnqueue(t, q, storh.Map{"a": 2})
	done, stop := context.WithCancel(context.Background())
	stop()
	_, err = q.ClaimWait(done, time.Minute)
	checkErr(t, err, context.Canceled, `"q"`)
	qWantCounts(t, q, 1, 1, 0, 0)
}

// qWaitResult is what a ClaimWait in a goroutine returned.
type qWaitResult struct {
	job storh.Job
	err error
	at  time.Time
}

func qStartWait(ctx context.Context, q *storh.Queue, lease time.Duration) <-chan qWaitResult {
	ch := make(chan qWaitResult, 1)
	go func() {
		j, err := q.ClaimWait(ctx, lease)
		ch <- qWaitResult{j, err, time.Now()}
	}()
	return ch
}

// qStillWaiting fails the test if the waiter returned within d.
func qStillWaiting(t *testing.T, ch <-chan qWaitResult, d time.Duration) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("ClaimWait returned %v, %v while nothing was pending", r.job.ID, r.err)
	case <-time.After(d):
	}
}

func qWaitFor(t *testing.T, ch <-chan qWaitResult) qWaitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("ClaimWait was not woken")
	}
	panic("unreachable")
}

func TestQueueClaimWaitWokenByEnqueue(t *testing.T) {
	db := openTemp(t)
	for _, how := range []string{"Enqueue", "EnqueueWithID", "EnqueueMany", "Update"} {
		t.Run(how, func(t *testing.T) {
			q := qOpen(t, db, "q-"+how)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ch := qStartWait(ctx, q, time.Minute)
			qStillWaiting(t, ch, 50*time.Millisecond)
			var id uuidv7.UUID
			var err error
			switch how {
			case "Enqueue":
				id, err = q.Enqueue(storh.Map{"a": 1})
			case "EnqueueWithID":
				id = uuidv7.New()
				err = q.EnqueueWithID(id, storh.Map{"a": 1})
			case "EnqueueMany":
				var got []uuidv7.UUID
				got, err = q.EnqueueMany([]any{storh.Map{"a": 1}})
				if err == nil {
					id = got[0]
				}
			case "Update":
				err = db.Update(func(tx *storh.Tx) error {
					tq, err := tx.Queue("q-" + how)
					if err != nil {
						return err
					}
					id, err = tq.Enqueue(storh.Map{"a": 1})
					return err
				})
			}
			if err != nil {
				t.Fatal(err)
			}
			r := qWaitFor(t, ch)
			if r.err != nil || r.job.ID != id || r.job.State != storh.JobClaimed {
				t.Errorf("ClaimWait = %v %v, %v; want %v", r.job.ID, r.job.State, r.err, id)
			}
			qWantCounts(t, q, 0, 1, 0, 0)
		})
	}
}

func TestQueueClaimWaitWokenByReleaseAndFail(t *testing.T) {
	db := openTemp(t)
	q := qOpen(t, db, "q")
	for _, how := range []string{"Release", "Fail", "Retry"} {
		t.Run(how, func(t *testing.T) {
			id := qEnqueue(t, q, storh.Map{"how": how})
			if j := qClaim(t, q, time.Hour); j.ID != id {
				t.Fatalf("claimed %v", j.ID)
			}
			if how == "Retry" {
				if err := db.SetQueueOptions("q", storh.WithMaxAttempts(1)); err != nil {
					t.Fatal(err)
				}
				if err := q.Fail(id, "dead"); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ch := qStartWait(ctx, q, time.Minute)
			qStillWaiting(t, ch, 50*time.Millisecond)
			var err error
			switch how {
			case "Release":
				err = q.Release(id)
			case "Fail":
				err = q.Fail(id, "try again")
			case "Retry":
				err = q.Retry(id)
			}
			if err != nil {
				t.Fatal(err)
			}
			r := qWaitFor(t, ch)
			if r.err != nil || r.job.ID != id {
				t.Fatalf("ClaimWait = %v, %v; want %v", r.job.ID, r.err, id)
			}
			if err := q.Complete(id); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestQueueClaimWaitWokenByLeaseEnd(t *testing.T) {
	db := openTemp(t)
	q := qOpen(t, db, "q")
	long := qEnqueue(t, q, storh.Map{"n": "long"})
	short := qEnqueue(t, q, storh.Map{"n": "short"})
	qClaim(t, q, time.Hour)
	const lease = 150 * time.Millisecond
	j := qClaim(t, q, lease)
	if j.ID != short {
		t.Fatalf("claimed %v; want %v", j.ID, short)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch := qStartWait(ctx, q, time.Hour)
	r := qWaitFor(t, ch)
	if r.err != nil || r.job.ID != short || r.job.Attempts != 2 || r.job.LastError != "lease expired" {
		t.Fatalf("ClaimWait = %v, %d attempts, %q, %v; want %v after its lease", r.job.ID, r.job.Attempts, r.job.LastError, r.err, short)
	}
	// Not before the lease ended.
	if r.job.Changed.Before(j.LeaseUntil) || r.at.Before(j.LeaseUntil) {
		t.Errorf("re-claimed at %v (returned at %v), before the lease end %v", r.job.Changed, r.at, j.LeaseUntil)
	}
	qWantJob(t, q, long, storh.JobClaimed, 1, "")
}

func TestQueueClaimWaitCancelled(t *testing.T) {
	db := openTemp(t)
	q := qOpen(t, db, "q")
	ctx, cancel := context.WithCancel(context.Background())
	ch := qStartWait(ctx, q, time.Minute)
	qStillWaiting(t, ch, 50*time.Millisecond)
	cancel()
	r := qWaitFor(t, ch)
	checkErr(t, r.err, context.Canceled, `"q"`)

	ctx, cancel = context.WithTimeout(context.Background(), 80*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := q.ClaimWait(ctx, time.Minute)
	checkErr(t, err, context.DeadlineExceeded, `"q"`)
	if d := time.Since(start); d < 70*time.Millisecond {
		t.Errorf("ClaimWait returned after %v, before its deadline", d)
	}
	// A lease that ends while the dead job cannot come back: still waits.
	q1 := qOpen(t, db, "one", storh.WithMaxAttempts(1))
	qEnqueue(t, q1, storh.Map{"a": 1})
	qClaim(t, q1, 30*time.Millisecond)
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = q1.ClaimWait(ctx, time.Minute)
	checkErr(t, err, context.DeadlineExceeded, `"one"`)
	qWantCounts(t, q1, 0, 0, 0, 1)
}

func TestQueueClaimWaitManyWaiters(t *testing.T) {
	db := openTemp(t)
	q := qOpen(t, db, "q")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const waiters = 5
	results := make(chan qWaitResult, waiters)
	for range waiters {
		go func() {
			j, err := q.ClaimWait(ctx, time.Minute)
			results <- qWaitResult{j, err, time.Now()}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	seen := map[uuidv7.UUID]bool{}
	for i := range waiters {
		id := qEnqueue(t, q, storh.Map{"i": i})
		var r qWaitResult
		select {
		case r = <-results:
		case <-time.After(10 * time.Second):
			t.Fatalf("no waiter woke for job %d", i)
		}
		if r.err != nil || r.job.ID != id || seen[id] {
			t.Fatalf("waiter got %v, %v; want %v once", r.job.ID, r.err, id)
		}
		seen[id] = true
		// The others keep waiting.
		select {
		case r := <-results:
			t.Fatalf("a second waiter returned %v, %v for one job", r.job.ID, r.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	qWantCounts(t, q, 0, waiters, 0, 0)
}

func TestQueueClaimWaitInTransaction(t *testing.T) {
	db := openTemp(t)
	q := qOpen(t, db, "q")
	qEnqueue(t, q, storh.Map{"a": 1})
	for name, run := range map[string]func(func(*storh.Tx) error) error{"Update": db.Update, "View": db.View} {
		err := run(func(tx *storh.Tx) error {
			tq, err := tx.Queue("q")
			if err != nil {
				return err
			}
			_, err = tq.ClaimWait(context.Background(), time.Minute)
			return err
		})
		if !errors.Is(err, storh.ErrNestedTx) {
			t.Errorf("ClaimWait in %s = %v; want ErrNestedTx", name, err)
		}
		checkErr(t, err, storh.ErrNestedTx, `"q"`)
	}
	qWantCounts(t, q, 1, 0, 0, 0)
}

func TestQueueClaimWaitEndsOnClose(t *testing.T) {
	db, err := storh.Open(newPath(t), storh.WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	q := qOpen(t, db, "q")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ch := qStartWait(ctx, q, time.Minute)
	qStillWaiting(t, ch, 50*time.Millisecond)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if !errors.Is(r.err, storh.ErrClosed) {
		t.Errorf("ClaimWait across Close returned %v; want ErrClosed when the database closes, not a wait until its context ends", r.err)
	}
}

func TestQueueSurvivesCompact(t *testing.T) {
	fileOnly(t)
	db, clk, path := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(1))
	for i := range 40 {
		qEnqueue(t, q, storh.Map{"i": i})
	}
	js, err := q.ClaimMany(30, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range js {
		var err error
		switch i % 3 {
		case 0:
			err = q.Complete(j.ID)
		case 1:
			err = q.Fail(j.ID, fmt.Sprint("failure ", i))
		}
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
	}
	want := qSnapshot(t, q)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	dst := newPath(t)
	if _, err := storh.Compact(path, dst); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, dst, storh.WithClock(clk.Now))
	q = qOpen(t, db, "q", storh.WithMaxAttempts(1))
	if got := qSnapshot(t, q); got != want {
		t.Errorf("after Compact:\n%s\nwant\n%s", got, want)
	}
	qVerify(t, db, "Compact")
	// And it still works: the next claim is the first pending job.
	if j := qClaim(t, q, time.Minute); j.Data()["i"] != int64(30) {
		t.Errorf("claim after Compact = %v", j.Data())
	}
}

func TestQueueDrop(t *testing.T) {
	db, _, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	id := qEnqueue(t, q, storh.Map{"a": 1})
	qClaim(t, q, time.Minute)
	qEnqueue(t, q, storh.Map{"a": 2})
	if err := db.Drop("q"); err != nil {
		t.Fatal(err)
	}
	// The old handle's queue is gone.
	if _, err := q.Enqueue(storh.Map{"a": 3}); !errors.Is(err, storh.ErrNotFound) {
		t.Errorf("Enqueue through a handle of a dropped queue = %v; want ErrNotFound", err)
	}
	q2 := qOpen(t, db, "q")
	qWantCounts(t, q2, 0, 0, 0, 0)
	if _, err := q2.Lookup(id); !errors.Is(err, storh.ErrNotFound) {
		t.Errorf("Lookup in a re-created queue = %v; want ErrNotFound", err)
	}
	// A new queue of that name starts afresh.
	qEnqueueID(t, q2, id, storh.Map{"again": true})
	if j := qClaim(t, q2, time.Minute); j.ID != id || j.Attempts != 1 || j.Data()["again"] != true {
		t.Errorf("claim from the re-created queue = %v, %d attempts, %v", j.ID, j.Attempts, j.Data())
	}
	qWantCounts(t, q2, 0, 1, 0, 0)
	qVerify(t, db, "Drop")
}

func TestQueueReadOnly(t *testing.T) {
	db, clk, path := openQueueDB(t)
	q := qOpen(t, db, "q")
	id := qEnqueue(t, q, storh.Map{"a": 1})
	qEnqueue(t, q, storh.Map{"a": 2})
	qClaim(t, q, time.Minute)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro := openAt(t, path, storh.WithReadOnly(), storh.WithClock(clk.Now))
	rq := qOpen(t, ro, "q")
	qWantCounts(t, rq, 1, 1, 0, 0)
	qWantJob(t, rq, id, storh.JobClaimed, 1, "")
	for name, call := range map[string]func() error{
		"Enqueue":        func() error { _, err := rq.Enqueue(storh.Map{"a": 1}); return err },
		"EnqueueMany":    func() error { _, err := rq.EnqueueMany([]any{storh.Map{"a": 1}}); return err },
		"Claim":          func() error { _, err := rq.Claim(time.Minute); return err },
		"Complete":       func() error { return rq.Complete(id) },
		"CompleteMany":   func() error { _, err := rq.CompleteMany([]uuidv7.UUID{id}); return err },
		"RequeueExpired": func() error { _, err := rq.RequeueExpired(); return err },
		"PurgeDone":      func() error { _, err := rq.PurgeDone(0); return err },
	} {
		if err := call(); !errors.Is(err, storh.ErrReadOnly) {
			t.Errorf("%s on a read-only database = %v; want ErrReadOnly", name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := rq.ClaimWait(ctx, time.Minute); !errors.Is(err, storh.ErrReadOnly) {
		t.Errorf("ClaimWait on a read-only database = %v; want ErrReadOnly at once", err)
	}
}

func TestQueueIDGenerator(t *testing.T) {
	db, _, _ := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithDeterministicIDs(7, 1_700_000_000_000))
	a := qEnqueue(t, q, storh.Map{"a": 1})
	ids, err := q.EnqueueMany([]any{storh.Map{"a": 2}, storh.Map{"a": 3}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Time().UnixMilli() < 1_700_000_000_000 || a.Time().UnixMilli() > 1_700_000_001_000 || ids[0].Compare(a) <= 0 || ids[1].Compare(ids[0]) <= 0 {
		t.Errorf("ids from the queue's generator: %v %v", a, ids)
	}
	bad := qOpen(t, db, "bad", storh.WithIDGenerator(func() uuidv7.UUID { return v4ID }))
	_, err = bad.Enqueue(storh.Map{"a": 1})
	checkErr(t, err, storh.ErrInvalidID, `"bad"`)
	_, err = bad.EnqueueMany([]any{storh.Map{"a": 1}})
	checkErr(t, err, storh.ErrInvalidID, `"bad"`, "item 0")
	qWantCounts(t, bad, 0, 0, 0, 0)
}

// Job.Changed is "when the job last changed state": an Extend moves the
// lease, not the state.
func TestQueueExtendKeepsChanged(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	id := qEnqueue(t, q, storh.Map{"a": 1})
	claimed := qClaim(t, q, time.Minute)
	clk.Advance(30 * time.Second)
	if _, err := q.Extend(id, time.Minute); err != nil {
		t.Fatal(err)
	}
	if j := qLookup(t, q, id); !j.Changed.Equal(claimed.Changed) {
		t.Errorf("after Extend, Changed = %v; want the claim's %v (Extend changes no state)", j.Changed, claimed.Changed)
	}
}

// A failed call changes nothing: on a queue nothing was ever enqueued to,
// a claim that finds nothing, or a call about a job that is not there,
// does not create the queue in the file (a Docs Delete does not either).
func TestQueueFailedCallsCreateNoQueue(t *testing.T) {
	db, _, _ := openQueueDB(t)
	missing := idAt(t, 1_700_000_000_000)
	for name, call := range map[string]func(q *storh.Queue) error{
		"Claim":     func(q *storh.Queue) error { _, err := q.Claim(time.Minute); return err },
		"ClaimMany": func(q *storh.Queue) error { _, err := q.ClaimMany(3, time.Minute); return err },
		"Complete":  func(q *storh.Queue) error { return q.Complete(missing) },
		"Fail":      func(q *storh.Queue) error { return q.Fail(missing, "x") },
		"Extend":    func(q *storh.Queue) error { _, err := q.Extend(missing, time.Minute); return err },
		"Release":   func(q *storh.Queue) error { return q.Release(missing) },
		"Retry":     func(q *storh.Queue) error { return q.Retry(missing) },
	} {
		t.Run(name, func(t *testing.T) {
			q := qOpen(t, db, "never-"+strings.ToLower(name))
			before := digest(t, db)
			if err := call(q); err == nil {
				t.Fatalf("%s on an empty queue succeeded", name)
			}
			if digest(t, db) != before {
				cs, _ := db.Collections()
				t.Errorf("a failed %s on a queue never written changed the file: collections now %v", name, cs)
			}
		})
	}
}

// qGoroutineID returns the calling goroutine's id, from its stack header.
func qGoroutineID() uint64 {
	var b [64]byte
	f := strings.Fields(string(b[:runtime.Stack(b[:], false)]))
	id, _ := strconv.ParseUint(f[1], 10, 64)
	return id
}

// A claim is stamped with the time it takes effect. Here a worker reads
// the clock while another worker's lease holds and is then held up (as a
// preempted goroutine, or one queued behind a slow group commit, is): by
// the time its claim commits, that lease has ended and the job was put
// back. The claim must not come back with a lease that had ended before
// it was made, nor move the job's history back in time.
func TestQueueClaimTimeIsCommitTime(t *testing.T) {
	clk := newTestClock()
	var slow atomic.Uint64 // the goroutine whose clock reading is held up
	reading, release := make(chan struct{}), make(chan struct{})
	clock := func() time.Time {
		now := clk.Now()
		if id := slow.Load(); id != 0 && id == qGoroutineID() && slow.CompareAndSwap(id, 0) {
			close(reading)
			<-release
		}
		return now
	}
	db := openAt(t, newPath(t), storh.WithClock(clock))
	q := qOpen(t, db, "q")
	id := qEnqueue(t, q, storh.Map{"a": 1})
	first := qClaim(t, q, 25*time.Millisecond)
	clk.Advance(10 * time.Millisecond) // the first lease holds

	type result struct {
		job storh.Job
		err error
	}
	late := make(chan result, 1)
	go func() {
		slow.Store(qGoroutineID())
		j, err := q.Claim(25 * time.Millisecond)
		late <- result{j, err}
	}()
	select {
	case <-reading:
	case r := <-late:
		// The claim read no clock in its own goroutine: it cannot be
		// stamped with a stale time. Nothing was pending.
		if !errors.Is(r.err, storh.ErrEmpty) {
			t.Fatalf("Claim while the only job is claimed = %v, %v", r.job.ID, r.err)
		}
		return
	case <-time.After(10 * time.Second):
		t.Fatal("the claim neither read the clock nor returned")
	}
	// While the late claim is held up, the first lease ends and the job
	// is put back.
	clk.Advance(90 * time.Millisecond)
	if n, err := q.RequeueExpired(); n != 1 || err != nil {
		t.Fatalf("RequeueExpired = %d, %v", n, err)
	}
	requeued := qWantJob(t, q, id, storh.JobPending, 1, "lease expired")
	close(release)
	r := <-late
	if r.err != nil || r.job.ID != id {
		t.Fatalf("late Claim = %v, %v; want %v", r.job.ID, r.err, id)
	}
	now := clk.Now()
	if !r.job.LeaseUntil.After(now) {
		t.Errorf("Claim committed at %d ms returned a lease that ended at %d ms: already over when it was given", now.UnixMilli(), r.job.LeaseUntil.UnixMilli())
	}
	if r.job.Changed.Before(requeued.Changed) || r.job.Changed.Before(first.LeaseUntil) {
		t.Errorf("the job went back in time: put back at %d ms (its first lease ended at %d ms), then claimed at %d ms",
			requeued.Changed.UnixMilli(), first.LeaseUntil.UnixMilli(), r.job.Changed.UnixMilli())
	}
	// A claim made now takes it from the late worker at once.
	if j, err := q.Claim(25 * time.Millisecond); err == nil {
		t.Errorf("a claim right after the late one took the job again (%v, attempt %d): the late worker's lease was over before it began", j.ID, j.Attempts)
	}
}

// TestQueuePurgeDead: dead letters leave by PurgeDead, by the time they
// died; other states stay.
func TestQueuePurgeDead(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	db := openTemp(t, storh.WithClock(func() time.Time { return now }))
	q, err := db.Queue("q", storh.WithMaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	var ids []uuidv7.UUID
	for i := range 4 {
		id, err := q.Enqueue(storh.Map{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, id := range ids[:3] {
		if _, err := q.Claim(time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := q.Fail(id, "boom"); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Hour)
	}
	// Dead at +0h, +1h, +2h; now is +3h. Older than 90 minutes: the first two.
	if n, err := q.PurgeDead(90 * time.Minute); err != nil || n != 2 {
		t.Fatalf("PurgeDead = %d, %v; want 2", n, err)
	}
	counts, err := q.Counts()
	pending, claimed, done, dead := counts.Pending, counts.Claimed, counts.Done, counts.Dead
	if err != nil || pending != 1 || claimed != 0 || done != 0 || dead != 1 {
		t.Fatalf("Counts = %d %d %d %d, %v; want 1 pending, 1 dead", pending, claimed, done, dead, err)
	}
	if _, err := q.Lookup(ids[0]); !errors.Is(err, storh.ErrNotFound) {
		t.Fatalf("a purged dead job: %v", err)
	}
	if n, _ := q.PurgeDone(0); n != 0 {
		t.Fatalf("PurgeDone took %d dead jobs", n)
	}
	var problems []string
	if _, err := db.Verify(func(p storh.Problem) { problems = append(problems, p.String()) }); err != nil || len(problems) > 0 {
		t.Fatalf("Verify: %v %q", err, problems)
	}
}

// TestQueueClaimWaitFollowsShortenedLease: a ClaimWait that waits for a
// long lease to end is woken by an Extend that shortens it, and claims the
// job when the new, earlier end comes.
func TestQueueClaimWaitFollowsShortenedLease(t *testing.T) {
	db := openTemp(t)
	q, err := db.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	id, err := q.Enqueue(storh.Map{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Claim(time.Hour); err != nil {
		t.Fatal(err)
	}
	got := make(chan storh.Job, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		j, err := q.ClaimWait(ctx, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- j
	}()
	time.Sleep(50 * time.Millisecond) // the waiter times the hour-long lease
	if _, err := q.Extend(id, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case j := <-got:
		if j.ID != id || j.Attempts != 2 {
			t.Fatalf("ClaimWait claimed %s after %d attempts; want %s on its second", j.ID, j.Attempts, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ClaimWait still waits for the lease end from before the Extend")
	}
}
