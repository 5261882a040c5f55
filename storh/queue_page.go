package storh

import (
	"encoding/base64"
	"fmt"
	"time"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/api"
)

// The bounded forms of Jobs and of the purges, for a caller that answers
// in pieces (a server's pages and requests): each is one transaction of a
// bounded size, and says where the next one starts.

// Now returns the time by the database's clock (WithClock), as the
// queue's operations read it: a time worked out from it for EnqueueAt or
// PurgeDoneBefore agrees with theirs.
func (q *Queue) Now() time.Time { return time.UnixMilli(q.now()).UTC() }

// JobsPage lists up to n of the jobs in state, in the order of Jobs,
// without their payloads, in one read transaction. It starts after the
// job the cursor after names ("" for the first page) and returns the
// cursor of the next page, "" when none follows. A cursor is the place of
// a job in the list, not the job: the next page starts right after that
// place even when the job has since moved or gone, so a job that stays in
// state is listed once, and a job that changes state between pages may be
// listed twice or not at all, as with Jobs.
//
// A cursor is text to pass back as it is, made for one state: one that
// JobsPage did not give for state, or n < 1, fails with ErrInvalidQuery.
func (q *Queue) JobsPage(state JobState, after string, n int) ([]Job, string, error) {
	if n < 1 {
		return nil, "", opErr("queue jobs", q.c.name, "", -1, fmt.Errorf("%w: a page of %d jobs: list at least 1", ErrInvalidQuery, n))
	}
	from, err := jobCursorKey(state, after)
	if err != nil {
		return nil, "", opErr("queue jobs", q.c.name, "", -1, err)
	}
	// Room for a page of the usual sizes up front: a Job is large, and
	// growing the slice copied each page about twice.
	jobs := make([]Job, 0, min(n, 1024))
	var next []byte
	err = q.c.read(func(etx *engine.Tx, ec *engine.Coll) error {
		jobs, next = jobs[:0], nil
		if ec == nil {
			return nil
		}
		var err error
		next, err = etx.JobsIn(ec, state, from, n, func(j engine.Job) { jobs = append(jobs, newJob(j)) })
		return err
	})
	if err != nil {
		return nil, "", opErr("queue jobs", q.c.name, "", -1, err)
	}
	if next == nil {
		return jobs, "", nil
	}
	return jobs, jobCursor(state, next), nil
}

// jobCursor writes the place key of the index of state as a cursor: the
// state's number, then the key, in URL-safe base64 (a cursor travels in
// URLs).
func jobCursor(state JobState, key []byte) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{byte(state)}, key...))
}

// jobCursorKey reads a cursor of jobCursor back into the key to start
// after, nil for "".
func jobCursorKey(state JobState, cursor string) ([]byte, error) {
	if cursor == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	// A pending job's place is its due time and enqueue order (only the
	// order in a queue from before due times), any other's a time and its
	// id.
	ok := err == nil && len(b) > 0 && JobState(b[0]) == state
	if ok {
		n := len(b) - 1
		ok = state == api.JobPending && (n == 8 || n == 16) || state != api.JobPending && n == 24
	}
	if !ok {
		return nil, fmt.Errorf("%w: cursor %q is not one a listing of %s jobs gave: pass back the cursor of the page before, as it is", ErrInvalidQuery, cursor, state)
	}
	return b[1:], nil
}

// PurgeDoneBefore is one bounded step of a purge: in one transaction it
// deletes up to max of the jobs completed before t, payloads included,
// the oldest first, and says how many it deleted and whether more done
// jobs completed before t remain. Called until more is false it does what
// PurgeDone(olderThan) does with t = Now() - olderThan, in steps that each
// hold the writers for a bounded time and are each durable. max < 1 fails
// with ErrInvalidOption.
func (q *Queue) PurgeDoneBefore(t time.Time, max int) (n int, more bool, err error) {
	return q.purgeStep("purge", t, max, (*engine.Tx).PurgeDone)
}

// PurgeDeadBefore is PurgeDoneBefore for the dead jobs, by the time they
// died.
func (q *Queue) PurgeDeadBefore(t time.Time, max int) (n int, more bool, err error) {
	return q.purgeStep("purge dead", t, max, (*engine.Tx).PurgeDead)
}

func (q *Queue) purgeStep(op string, t time.Time, max int, purge func(*engine.Tx, *engine.Coll, int64, int) (int, bool, error)) (n int, more bool, err error) {
	if max < 1 {
		return 0, false, opErr("queue "+op, q.c.name, "", -1, fmt.Errorf("%w: purge at most %d jobs: purge at least 1", ErrInvalidOption, max))
	}
	err = q.batch(op, false, func(etx *engine.Tx, ec *engine.Coll) error {
		var err error
		n, more, err = purge(etx, ec, t.UnixMilli(), max)
		return err
	})
	if err != nil {
		return 0, false, err
	}
	return n, more, nil
}
