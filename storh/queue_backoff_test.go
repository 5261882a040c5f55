package storh_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// wantDueIn checks that job id is pending and due between lo and hi after
// from (inclusive), and returns its due time.
func wantDueIn(t *testing.T, q *storh.Queue, id uuidv7.UUID, from time.Time, lo, hi time.Duration) time.Time {
	t.Helper()
	j := qLookup(t, q, id)
	if j.State != storh.JobPending {
		t.Fatalf("job is %v; want pending", j.State)
	}
	if d := j.Due.Sub(from); d < lo || d > hi {
		t.Fatalf("job due %v after the Fail; want within [%v, %v]", d, lo, hi)
	}
	return j.Due
}

// A Fail with attempts left makes the job due min·2^(attempts-1) later,
// capped, ±20%, by the database's clock: no claim takes it before, one
// takes it then; its last attempt's Fail kills it; an expired lease is
// not backed off.
func TestQueueBackoffFail(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(5), storh.WithBackoff(time.Second, 4*time.Second))
	id := qEnqueue(t, q, storh.Map{"n": 1})
	for attempt, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		j := qClaim(t, q, time.Minute)
		if j.ID != id || j.Attempts != attempt+1 {
			t.Fatalf("claim %d: job %v with %d attempts; want %v with %d", attempt+1, j.ID, j.Attempts, id, attempt+1)
		}
		failed := clk.Now()
		var err error
		if attempt%2 == 0 {
			err = q.Fail(id, "boom")
		} else {
			err = q.FailClaim(j, "boom")
		}
		if err != nil {
			t.Fatal(err)
		}
		due := wantDueIn(t, q, id, failed, base*8/10, base*12/10)
		if c, err := q.Counts(); err != nil || c.Pending != 0 || c.Scheduled != 1 {
			t.Fatalf("after Fail %d: Counts %+v, %v; want 1 scheduled", attempt+1, c, err)
		}
		clk.Advance(due.Sub(clk.Now()) - time.Millisecond)
		if _, err := q.Claim(time.Minute); !errors.Is(err, storh.ErrEmpty) {
			t.Fatalf("claim 1ms before the backoff ends: %v; want ErrEmpty", err)
		}
		clk.Advance(time.Millisecond)
	}
	j := qClaim(t, q, time.Minute)
	if err := q.FailClaim(j, "last"); err != nil {
		t.Fatal(err)
	}
	if j := qLookup(t, q, id); j.State != storh.JobDead || j.Attempts != 5 {
		t.Fatalf("after the 5th Fail: %v with %d attempts; want dead with 5", j.State, j.Attempts)
	}

	// An expired lease comes back at once, due as before.
	id2 := qEnqueue(t, q, storh.Map{"n": 2})
	before := qLookup(t, q, id2).Due
	qClaim(t, q, time.Second)
	clk.Advance(time.Second)
	if j := qClaim(t, q, time.Minute); j.ID != id2 || !j.Due.Equal(before) || j.Attempts != 2 {
		t.Fatalf("after its lease ended: job %v due %v, %d attempts; want %v due %v, 2", j.ID, j.Due, j.Attempts, id2, before)
	}
}

// Options are stored with the queue at its creation: a handle that gives
// others is refused, naming the stored value; one that gives none applies
// the stored ones; SetQueueOptions changes them for every handle.
func TestQueueOptionsStored(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	if _, _, err := db.QueueOptions("q"); !errors.Is(err, storh.ErrNotFound) {
		t.Fatalf("QueueOptions of a missing queue: %v; want ErrNotFound", err)
	}
	qa := qOpen(t, db, "q", storh.WithMaxAttempts(2))
	// Not stored until the first write creates the queue.
	qOpen(t, db, "q", storh.WithMaxAttempts(4))
	id := qEnqueue(t, qa, storh.Map{"n": 1})
	if o, ok, err := db.QueueOptions("q"); err != nil || !ok || o != (storh.QueueOptions{MaxAttempts: 2}) {
		t.Fatalf("QueueOptions = %+v, %v, %v; want max attempts 2, no backoff, stored", o, ok, err)
	}
	for _, tc := range []struct {
		opts []storh.CollectionOption
		want string // "" : accepted
	}{
		{nil, ""},
		{[]storh.CollectionOption{storh.WithMaxAttempts(2)}, ""},
		{[]storh.CollectionOption{storh.WithBackoff(0, 0)}, ""},
		{[]storh.CollectionOption{storh.WithMaxAttempts(3)}, `queue "q" stores max attempts 2; WithMaxAttempts(3) differs: use SetQueueOptions`},
		{[]storh.CollectionOption{storh.WithBackoff(time.Second, time.Minute)}, `queue "q" stores no backoff; WithBackoff(1s, 1m0s) differs`},
	} {
		_, err := db.Queue("q", tc.opts...)
		err2 := db.Update(func(tx *storh.Tx) error { _, err := tx.Queue("q", tc.opts...); return err })
		for i, err := range []error{err, err2} {
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("handle %d with %d options: %v; want accepted", i, len(tc.opts), err)
			case tc.want != "" && (!errors.Is(err, storh.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("handle %d: %v; want ErrInvalidOption saying %q", i, err, tc.want)
			}
		}
	}
	for _, tc := range []struct {
		name string
		opts []storh.CollectionOption
		want error
	}{
		{"a docs option", []storh.CollectionOption{storh.WithTTL("1h")}, storh.ErrInvalidOption},
		{"a bad backoff", []storh.CollectionOption{storh.WithBackoff(time.Second, time.Millisecond)}, storh.ErrInvalidOption},
		{"a backoff below 1ms", []storh.CollectionOption{storh.WithBackoff(time.Microsecond, time.Second)}, storh.ErrInvalidOption},
		{"a backoff in parts of ms", []storh.CollectionOption{storh.WithBackoff(1500*time.Microsecond, time.Second)}, storh.ErrInvalidOption},
		{"no attempt", []storh.CollectionOption{storh.WithMaxAttempts(0)}, storh.ErrInvalidOption},
	} {
		if err := db.SetQueueOptions("q", tc.opts...); !errors.Is(err, tc.want) {
			t.Errorf("SetQueueOptions with %s: %v; want %v", tc.name, err, tc.want)
		}
	}
	if o, _, _ := db.QueueOptions("q"); o != (storh.QueueOptions{MaxAttempts: 2}) {
		t.Fatalf("refused SetQueueOptions changed the options: %+v", o)
	}
	if _, err := db.Docs("d"); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *storh.Tx) error { d, _ := tx.Docs("d"); _, err := d.Put(storh.Map{"a": 1}); return err }); err != nil {
		t.Fatal(err)
	}
	if err := db.SetQueueOptions("d", storh.WithMaxAttempts(3)); !errors.Is(err, storh.ErrWrongKind) {
		t.Errorf("SetQueueOptions of a docs collection: %v; want ErrWrongKind", err)
	}

	// A handle with no options applies the stored max attempts.
	qn := qOpen(t, db, "q")
	for i := 1; i <= 2; i++ {
		j := qClaim(t, qn, time.Minute)
		if err := qn.Fail(j.ID, "no"); err != nil {
			t.Fatal(err)
		}
	}
	if j := qLookup(t, qn, id); j.State != storh.JobDead {
		t.Fatalf("after 2 Fails through a handle without options: %v; want dead (max attempts 2 stored)", j.State)
	}

	// SetQueueOptions keeps what it is not given, and applies to the
	// handles opened before.
	if err := db.SetQueueOptions("q", storh.WithBackoff(time.Second, time.Second)); err != nil {
		t.Fatal(err)
	}
	if o, ok, err := db.QueueOptions("q"); err != nil || !ok || o != (storh.QueueOptions{MaxAttempts: 2, BackoffMin: time.Second, BackoffMax: time.Second}) {
		t.Fatalf("after SetQueueOptions(backoff): %+v, %v, %v", o, ok, err)
	}
	id2 := qEnqueue(t, qa, storh.Map{"n": 2})
	qClaim(t, qa, time.Minute)
	failed := clk.Now()
	if err := qa.Fail(id2, "later"); err != nil {
		t.Fatal(err)
	}
	wantDueIn(t, qa, id2, failed, 800*time.Millisecond, 1200*time.Millisecond)
	if _, err := db.Queue("q", storh.WithMaxAttempts(2), storh.WithBackoff(time.Second, time.Second)); err != nil {
		t.Fatalf("a handle with the stored options: %v", err)
	}
	if err := db.SetQueueOptions("q", storh.WithMaxAttempts(9), storh.WithBackoff(0, 0)); err != nil {
		t.Fatal(err)
	}
	if o, _, err := db.QueueOptions("q"); err != nil || o != (storh.QueueOptions{MaxAttempts: 9}) {
		t.Fatalf("after SetQueueOptions(9, no backoff): %+v, %v", o, err)
	}
	// SetQueueOptions creates a queue it does not find.
	if err := db.SetQueueOptions("new", storh.WithMaxAttempts(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Queue("new", storh.WithMaxAttempts(5)); !errors.Is(err, storh.ErrInvalidOption) {
		t.Fatalf("a handle differing from the options SetQueueOptions stored on a new queue: %v", err)
	}
}

// Two stores on one PostgreSQL schema: options one sets apply to the
// other's next Fail, through a handle it opened before.
func TestPostgresQueueOptionsAcrossStores(t *testing.T) {
	url := pgtest.URL(t)
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	clock := storh.WithClock(func() time.Time { return time.UnixMilli(now.Load()) })
	a, b := openPostgres(t, url, clock), openPostgres(t, url, clock)
	qa := qOpen(t, a, "jobs")
	id := qEnqueue(t, qa, storh.Map{"n": 1})
	if err := b.SetQueueOptions("jobs", storh.WithMaxAttempts(2), storh.WithBackoff(10*time.Second, time.Minute)); err != nil {
		t.Fatal(err)
	}
	qClaim(t, qa, time.Minute)
	failed := time.UnixMilli(now.Load())
	if err := qa.Fail(id, "first"); err != nil {
		t.Fatal(err)
	}
	due := wantDueIn(t, qa, id, failed, 8*time.Second, 12*time.Second)
	if _, err := qa.Claim(time.Minute); !errors.Is(err, storh.ErrEmpty) {
		t.Fatalf("claim during the backoff: %v; want ErrEmpty", err)
	}
	now.Store(due.UnixMilli())
	j := qClaim(t, qa, time.Minute)
	if err := qa.FailClaim(j, "second"); err != nil {
		t.Fatal(err)
	}
	if j := qLookup(t, qa, id); j.State != storh.JobDead {
		t.Fatalf("after the 2nd Fail: %v; want dead (b stored max attempts 2)", j.State)
	}
	if _, err := a.Queue("jobs", storh.WithMaxAttempts(5)); !errors.Is(err, storh.ErrInvalidOption) || !strings.Contains(err.Error(), "stores max attempts 2") {
		t.Fatalf("a handle in a with max attempts 5: %v; want ErrInvalidOption naming 2", err)
	}
}

// queueOptionsChildEnv gives TestQueueOptionsChild its store and what to
// set: "<path or URL>|<max attempts>|<backoff min>|<backoff max>".
const queueOptionsChildEnv = "STORH_QUEUE_OPTIONS_CHILD"

// TestQueueOptionsChild is the second OS process of
// TestPostgresQueueOptionsAcrossProcesses: it sets the options of queue
// "jobs" and exits.
func TestQueueOptionsChild(t *testing.T) {
	spec := os.Getenv(queueOptionsChildEnv)
	if spec == "" {
		t.Skip("run by TestPostgresQueueOptionsAcrossProcesses")
	}
	parts := strings.Split(spec, "|")
	if len(parts) != 4 {
		t.Fatalf("spec %q", spec)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	lo, err1 := time.ParseDuration(parts[2])
	hi, err2 := time.ParseDuration(parts[3])
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	db, err := storh.Open(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.SetQueueOptions("jobs", storh.WithMaxAttempts(n), storh.WithBackoff(lo, hi)); err != nil {
		t.Fatal(err)
	}
}

// A second OS process's SetQueueOptions applies to this process's next
// Fail, through a handle opened before it ran.
func TestPostgresQueueOptionsAcrossProcesses(t *testing.T) {
	url := pgtest.URL(t)
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	db := openPostgres(t, url, storh.WithClock(func() time.Time { return time.UnixMilli(now.Load()) }))
	q := qOpen(t, db, "jobs")
	id := qEnqueue(t, q, storh.Map{"n": 1})
	qClaim(t, q, time.Minute)

	cmd, in, _ := startChild(t, "TestQueueOptionsChild", queueOptionsChildEnv+"="+url+"|2|30s|30s")
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the child: %v", err)
	}
	failed := time.UnixMilli(now.Load())
	if err := q.Fail(id, "first"); err != nil {
		t.Fatal(err)
	}
	due := wantDueIn(t, q, id, failed, 24*time.Second, 36*time.Second)
	now.Store(due.UnixMilli())
	qClaim(t, q, time.Minute)
	if err := q.Fail(id, "second"); err != nil {
		t.Fatal(err)
	}
	if j := qLookup(t, q, id); j.State != storh.JobDead {
		t.Fatalf("after the 2nd Fail: %v; want dead (the child stored max attempts 2)", j.State)
	}
}
