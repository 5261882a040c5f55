package storh_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// pagedIDs lists state page by page of n with JobsPage, and counts the
// pages.
func pagedIDs(t *testing.T, q *storh.Queue, state storh.JobState, n int) ([]uuidv7.UUID, int) {
	t.Helper()
	var out []uuidv7.UUID
	after, pages := "", 0
	for {
		jobs, next, err := q.JobsPage(state, after, n)
		if err != nil {
			t.Fatalf("JobsPage(%v, %q, %d): %v", state, after, n, err)
		}
		pages++
		for _, j := range jobs {
			if j.State != state {
				t.Errorf("JobsPage(%v) gave a %v job", state, j.State)
			}
			out = append(out, j.ID)
		}
		if next == "" {
			return out, pages
		}
		if len(jobs) != n {
			t.Errorf("a page of %d jobs before the last, want %d", len(jobs), n)
		}
		after = next
	}
}

// TestQueueJobsPage: the pages of every state, of every size, are Jobs in
// its order, with no empty page at the end; a cursor holds its place
// after its job left; a bad cursor or size is ErrInvalidQuery.
func TestQueueJobsPage(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(1))
	// Ids descending in time: id order is no state's order.
	id := qIDsDescending(t, 12)
	for i, x := range id {
		qEnqueueID(t, q, x, storh.Map{"i": i})
	}
	for i, l := range []time.Duration{50 * time.Second, 10 * time.Second, 30 * time.Second, 20 * time.Second, 40 * time.Second, 60 * time.Second, 70 * time.Second, 80 * time.Second} {
		if j := qClaim(t, q, l); j.ID != id[i] {
			t.Fatalf("claim %d = %v; want %v", i, j.ID, id[i])
		}
	}
	for _, x := range []uuidv7.UUID{id[2], id[0], id[4]} {
		clk.Advance(time.Second)
		if err := q.Complete(x); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range []uuidv7.UUID{id[6], id[5]} {
		clk.Advance(time.Second)
		if err := q.Fail(x, "boom"); err != nil {
			t.Fatal(err)
		}
	}
	for _, state := range []storh.JobState{storh.JobPending, storh.JobClaimed, storh.JobDone, storh.JobDead} {
		want := qJobIDs(t, q, state)
		if len(want) < 2 {
			t.Fatalf("%v: %d jobs, the test wants more", state, len(want))
		}
		for n := 1; n <= len(want)+1; n++ {
			got, pages := pagedIDs(t, q, state, n)
			if !slices.Equal(got, want) {
				t.Errorf("%v in pages of %d: %v, want %v", state, n, got, want)
			}
			if wantPages := max(1, (len(want)+n-1)/n); pages != wantPages {
				t.Errorf("%v in pages of %d: %d pages, want %d", state, n, pages, wantPages)
			}
		}
	}

	// The cursor is a place: the job that ends the page may leave, and the
	// next page still starts after it.
	pending := qJobIDs(t, q, storh.JobPending)
	first, next, err := q.JobsPage(storh.JobPending, "", 2)
	if err != nil || len(first) != 2 || next == "" {
		t.Fatalf("first page: %v %q %v", first, next, err)
	}
	if err := q.Cancel(first[1].ID); err != nil {
		t.Fatal(err)
	}
	rest, _, err := q.JobsPage(storh.JobPending, next, 100)
	if err != nil || !slices.Equal(jobIDs(rest), pending[2:]) {
		t.Errorf("after the cursor's job left: %v %v, want %v", jobIDs(rest), err, pending[2:])
	}

	_, claimedNext, err := q.JobsPage(storh.JobClaimed, "", 1)
	if err != nil || claimedNext == "" {
		t.Fatal(claimedNext, err)
	}
	for _, tc := range []struct {
		state  storh.JobState
		cursor string
		n      int
	}{
		{storh.JobPending, "", 0},
		{storh.JobPending, "", -1},
		{storh.JobPending, "!!", 1},
		{storh.JobPending, "AQ", 1},
		{storh.JobPending, claimedNext, 1},
		{storh.JobDone, claimedNext, 1},
		{storh.JobClaimed, claimedNext + "AA", 1},
		{storh.JobState(9), "", 1},
	} {
		if jobs, next, err := q.JobsPage(tc.state, tc.cursor, tc.n); !errors.Is(err, storh.ErrInvalidQuery) || jobs != nil || next != "" {
			t.Errorf("JobsPage(%v, %q, %d) = %v %q %v, want ErrInvalidQuery", tc.state, tc.cursor, tc.n, jobs, next, err)
		}
	}
}

func jobIDs(jobs []storh.Job) []uuidv7.UUID {
	out := make([]uuidv7.UUID, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// TestQueuePurgeBefore: a purge in bounded steps purges the oldest first,
// says whether more remain, and leaves the jobs at or after the cutoff; a
// bound below 1 is ErrInvalidOption and purges nothing. Now is the
// database's clock.
func TestQueuePurgeBefore(t *testing.T) {
	db, clk, _ := openQueueDB(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(1))
	if got, want := q.Now(), clk.Now().Truncate(time.Millisecond); !got.Equal(want) {
		t.Errorf("Now() = %v, want the clock's %v", got, want)
	}
	var done []uuidv7.UUID
	var at []time.Time
	for i := range 5 {
		qEnqueue(t, q, storh.Map{"i": i})
		j := qClaim(t, q, time.Hour)
		clk.Advance(time.Second)
		if err := q.Complete(j.ID); err != nil {
			t.Fatal(err)
		}
		done, at = append(done, j.ID), append(at, clk.Now())
	}
	qEnqueue(t, q, storh.Map{"dead": true})
	clk.Advance(time.Second)
	if err := q.Fail(qClaim(t, q, time.Hour).ID, "boom"); err != nil {
		t.Fatal(err)
	}
	for _, max := range []int{0, -1} {
		if n, more, err := q.PurgeDoneBefore(at[4], max); !errors.Is(err, storh.ErrInvalidOption) || n != 0 || more {
			t.Errorf("PurgeDoneBefore(max %d) = %d %v %v, want ErrInvalidOption", max, n, more, err)
		}
	}
	if got := qJobIDs(t, q, storh.JobDone); !slices.Equal(got, done) {
		t.Fatalf("a refused purge changed the done jobs: %v", got)
	}
	// Before the fourth's time: the first three, in steps of two.
	if n, more, err := q.PurgeDoneBefore(at[3], 2); n != 2 || !more || err != nil {
		t.Errorf("first step: %d %v %v, want 2 true", n, more, err)
	}
	if n, more, err := q.PurgeDoneBefore(at[3], 2); n != 1 || more || err != nil {
		t.Errorf("second step: %d %v %v, want 1 false", n, more, err)
	}
	if n, more, err := q.PurgeDoneBefore(at[3], 2); n != 0 || more || err != nil {
		t.Errorf("a step with nothing left: %d %v %v", n, more, err)
	}
	if got := qJobIDs(t, q, storh.JobDone); !slices.Equal(got, done[3:]) {
		t.Errorf("done jobs left: %v, want %v", got, done[3:])
	}
	if n, more, err := q.PurgeDeadBefore(clk.Now(), 1); n != 0 || more || err != nil {
		t.Errorf("dead purge before the death: %d %v %v", n, more, err)
	}
	clk.Advance(time.Millisecond)
	if n, more, err := q.PurgeDeadBefore(clk.Now(), 1); n != 1 || more || err != nil {
		t.Errorf("dead purge: %d %v %v", n, more, err)
	}
}
