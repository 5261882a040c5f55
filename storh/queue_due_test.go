package storh_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Due times on a fake clock: a claim takes only jobs that are due, the one
// due first first, ties in enqueue order; a released job keeps its due
// time, so its place; Counts tells due from scheduled.
func TestQueueDueOrder(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q")
	t0 := clk.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	enqueueAt := func(name string, ms int) uuidv7.UUID {
		t.Helper()
		id, err := q.EnqueueAt(at(ms), storh.Map{"name": name})
		if err != nil {
			t.Fatalf("EnqueueAt(%s): %v", name, err)
		}
		return id
	}
	ids := map[string]uuidv7.UUID{}
	ids["now1"] = qEnqueue(t, q, storh.Map{"name": "now1"})
	ids["late"] = enqueueAt("late", 300)
	ids["soon1"] = enqueueAt("soon1", 100)
	ids["past"] = enqueueAt("past", -50) // due before now1: ahead of it
	ids["soon2"] = enqueueAt("soon2", 100)
	batch, err := q.EnqueueManyAt(at(200), []any{storh.Map{"name": "mid1"}, storh.Map{"name": "mid2"}})
	if err != nil {
		t.Fatal(err)
	}
	ids["mid1"], ids["mid2"] = batch[0], batch[1]
	ids["now2"] = qEnqueue(t, q, storh.Map{"name": "now2"})

	counts := func(pending, scheduled int) {
		t.Helper()
		c, err := q.Counts()
		if err != nil || c.Pending != pending || c.Scheduled != scheduled {
			t.Fatalf("Counts = %+v, %v; want %d pending, %d scheduled", c, err, pending, scheduled)
		}
	}
	claimAll := func(want ...string) {
		t.Helper()
		var got []string
		for {
			j, err := q.Claim(time.Hour)
			if errors.Is(err, storh.ErrEmpty) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, j.Data()["name"].(string))
			if err := q.Complete(j.ID); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("at +%v claims %v; want %v", clk.Now().Sub(t0), got, want)
		}
	}

	counts(3, 5)
	if j := qLookup(t, q, ids["late"]); !j.Due.Equal(at(300)) {
		t.Errorf("Lookup(late).Due = %v; want %v", j.Due, at(300))
	}
	// A job due now is claimed, and given back keeps its place: ahead of
	// now2, behind past.
	j := qClaim(t, q, time.Hour)
	if j.ID != ids["past"] {
		t.Fatalf("first claim %v; want past", j.Data())
	}
	if err := q.Release(j.ID); err != nil {
		t.Fatal(err)
	}
	claimAll("past", "now1", "now2")
	clk.Advance(99 * time.Millisecond)
	claimAll()
	counts(0, 5)
	clk.Advance(time.Millisecond)
	counts(2, 3)
	claimAll("soon1", "soon2")
	clk.Advance(500 * time.Millisecond) // mid and late are both due: mid first
	claimAll("mid1", "mid2", "late")
	counts(0, 0)

	// Bad input changes nothing.
	if _, err := q.EnqueueAt(time.Time{}, storh.Map{"name": "zero"}); !errors.Is(err, storh.ErrInvalidOption) {
		t.Errorf("EnqueueAt(zero time) = %v; want ErrInvalidOption", err)
	}
	if _, err := q.EnqueueManyAt(clk.Now(), []any{storh.Map{"ok": 1}, make(chan int)}); err == nil {
		t.Error("EnqueueManyAt with a bad item succeeded")
	}
	if n, err := q.Count(); err != nil || n != 8 {
		t.Errorf("Count after refused enqueues = %d, %v; want 8", n, err)
	}
}

// A delayed job wakes a waiting ClaimWait when it becomes due, by a timer:
// nothing else could (no commit makes a job pending while it waits, no
// lease ends), and the wait's context outlasts the test's deadline for a
// wake, so without the timer qWaitFor fails.
func TestQueueClaimWaitWokenAtDue(t *testing.T) {
	db := openTemp(t)
	q := qOpen(t, db, "q")
	due := time.Now().Add(300 * time.Millisecond)
	id, err := q.EnqueueAt(due, storh.Map{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := qWaitFor(t, qStartWait(ctx, q, time.Hour))
	if r.err != nil || r.job.ID != id {
		t.Fatalf("ClaimWait = %v, %v; want %v", r.job.ID, r.err, id)
	}
	// Claimed when due, not before.
	if r.job.Changed.Before(due.Truncate(time.Millisecond)) {
		t.Errorf("claimed at %v, before it was due at %v", r.job.Changed, due)
	}
}

// The pinned store testdata/queue6/queue6.db was written by the build
// before due times (format 5, commit 23b05d6 of main): a queue "jobs" with
// pending jobs whose order is not their ids' (one failed back to its
// place, one released, one enqueued with an id from 2020), a claimed one
// (leased until 2037), a done one and a dead one; jobs.txt lists them as
// that build's Jobs did, pending in its claim order. Read-only, this build
// reads it as it is; opened for writing it is rewritten to formatDue and
// keeps every job, the pending ones in their order, ahead of the jobs
// enqueued afterwards, even those scheduled in the past.
func TestQueueDueUpgrade(t *testing.T) {
	fileOnly(t)
	want := map[storh.JobState][]string{}
	f, err := os.Open(filepath.Join("testdata", "queue6", "jobs.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		state, id, _ := strings.Cut(sc.Text(), " ")
		id, _, _ = strings.Cut(id, " ")
		for _, s := range []storh.JobState{storh.JobPending, storh.JobClaimed, storh.JobDone, storh.JobDead} {
			if s.String() == state {
				want[s] = append(want[s], id)
			}
		}
	}
	if len(want[storh.JobPending]) != 10 {
		t.Fatalf("jobs.txt lists %d pending jobs; want 10", len(want[storh.JobPending]))
	}
	path := pinnedCopy(t, filepath.Join("testdata", "queue6"), "queue6.db")
	listing := func(q *storh.Queue) map[storh.JobState][]string {
		t.Helper()
		out := map[storh.JobState][]string{}
		for _, s := range []storh.JobState{storh.JobPending, storh.JobClaimed, storh.JobDone, storh.JobDead} {
			for j, err := range q.Jobs(s) {
				if err != nil {
					t.Fatal(err)
				}
				out[s] = append(out[s], j.ID.String())
			}
		}
		return out
	}
	check := func(when string, db *storh.DB) *storh.Queue {
		t.Helper()
		q := qOpen(t, db, "jobs", storh.WithMaxAttempts(3))
		for s, ids := range listing(q) {
			if !slices.Equal(ids, want[s]) {
				t.Errorf("%s: %v jobs %v; want %v", when, s, ids, want[s])
			}
		}
		if c, err := q.Counts(); err != nil || c != (storh.QueueCounts{Pending: 10, Claimed: 1, Done: 1, Dead: 1}) {
			t.Errorf("%s: Counts = %+v, %v", when, c, err)
		}
		var problems []string
		if rep, err := db.Verify(func(p storh.Problem) { problems = append(problems, p.String()) }); err != nil || rep.Problems != 0 {
			t.Errorf("%s: Verify = %+v, %v: %q", when, rep, err, problems)
		}
		return q
	}

	db := openAt(t, path, storh.WithReadOnly())
	check("read-only", db)
	db.Close()
	if m := formatMarker(t, path); m != 5 {
		t.Fatalf("format %d after a read-only open; want 5", m)
	}

	db = openAt(t, path)
	check("upgraded", db)
	db.Close()
	if m := formatMarker(t, path); m != 7 {
		t.Errorf("format %d after an open for writing; want 7 (a build from before refuses it)", m)
	}
	db = openAt(t, path)
	q := check("reopened", db)
	// Jobs enqueued now come after the old ones, even one scheduled in
	// the past: the old ones were due at once, when they were enqueued.
	late := qEnqueue(t, q, storh.Map{"n": "new"})
	past, err := q.EnqueueAt(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), storh.Map{"n": "past"})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := q.ClaimMany(20, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range jobs {
		got = append(got, j.ID.String())
	}
	if wantClaims := append(slices.Clone(want[storh.JobPending]), past.String(), late.String()); !slices.Equal(got, wantClaims) {
		t.Errorf("claims after the upgrade %v; want %v", got, wantClaims)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path)
	if rep, err := db.Verify(nil); err != nil || rep.Problems != 0 {
		t.Errorf("Verify after reopen = %+v, %v", rep, err)
	}
}
