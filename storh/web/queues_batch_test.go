package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// batchQueue makes queue "work" with two claimed jobs (a, b), two
// pending (p, r) and a dead one (d).
func batchQueue(t *testing.T, db *storh.DB) (q *storh.Queue, a, b storh.Job, p, r, d uuidv7.UUID) {
	t.Helper()
	if err := db.SetQueueOptions("work", storh.WithMaxAttempts(1)); err != nil {
		t.Fatal(err)
	}
	q, err := db.Queue("work")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := q.EnqueueMany([]any{storh.Map{"n": 1}, storh.Map{"n": 2}, storh.Map{"n": 3}, storh.Map{"n": 4}, storh.Map{"n": 5}})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := q.ClaimMany(3, time.Hour)
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if err := q.Fail(claimed[2].ID, "boom"); err != nil {
		t.Fatal(err)
	}
	return q, claimed[0], claimed[1], ids[3], ids[4], claimed[2].ID
}

// TestQueueBatch: a batch acts on every job in one transaction, or, when
// one job is refused (half-way through, after others were acted on), on
// none: the answer names the job by its place and id, with the kind of
// the refusal, and the database is as it was. On both backends.
func TestQueueBatch(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 1, 0)
		c := f.serve(t, web.WithWrites())
		off := f.serve(t)
		q, a, b, p, r, d := batchQueue(t, f.db)
		A, B, P, R, D := a.ID.String(), b.ID.String(), p.String(), r.String(), d.String()
		tokA := strconv.FormatUint(a.Token, 10)
		missing := uuidv7.New().String()
		ids := func(s ...string) string { b, _ := json.Marshal(s); return string(b) }
		before := queueSnapshot(t, f.db, "work")
		for _, tc := range []struct {
			c      *client
			path   string
			body   string
			status int
			kind   string
			item   int    // the job the error names, 0 for none
			names  string // what the message names
		}{
			// Refused half-way: the jobs before the refused one were
			// acted on in the transaction, and are not afterwards.
			{c, "work", `{"action":"complete","ids":` + ids(A, B, P) + `}`, 409, "not_claimed", 3, P},
			{c, "work", `{"action":"complete","ids":` + ids(A, B) + `,"tokens":["` + tokA + `","` + strconv.FormatUint(b.Token^1, 10) + `"]}`, 409, "not_claimed", 2, B},
			{c, "work", `{"action":"fail","ids":` + ids(A, P) + `,"reason":"x"}`, 409, "not_claimed", 2, P},
			{c, "work", `{"action":"extend","ids":` + ids(A, R) + `,"lease":"2h"}`, 409, "not_claimed", 2, R},
			{c, "work", `{"action":"release","ids":` + ids(A, missing) + `}`, 404, "not_found", 2, missing},
			{c, "work", `{"action":"retry","ids":` + ids(D, P) + `}`, 409, "not_dead", 2, P},
			{c, "work", `{"action":"cancel","ids":` + ids(P, D, A) + `}`, 409, "claimed", 3, A},
			// Refused before anything is written.
			{c, "work", `{"action":"explode","ids":` + ids(A) + `}`, 400, "bad_request", 0, "explode"},
			{c, "work", `{"action":"complete","ids":[]}`, 400, "bad_request", 0, "no ids"},
			{c, "work", `{"action":"complete"}`, 400, "bad_request", 0, "no ids"},
			{c, "work", `{"action":"complete","ids":` + ids(A, B, A) + `}`, 400, "bad_request", 3, A},
			{c, "work", `{"action":"complete","ids":` + ids(A, "nope") + `}`, 400, "bad_request", 2, "nope"},
			{c, "work", `{"action":"retry","ids":` + ids(D) + `,"tokens":["1"]}`, 400, "bad_request", 0, "no tokens"},
			{c, "work", `{"action":"complete","ids":` + ids(A, B) + `,"tokens":["` + tokA + `"]}`, 400, "bad_request", 0, "1 tokens for 2 ids"},
			{c, "work", `{"action":"complete","ids":` + ids(A, B) + `,"tokens":["` + tokA + `","x"]}`, 400, "bad_request", 2, "token 2"},
			{c, "work", `{"action":"complete","ids":` + ids(A) + `,"reason":"x"}`, 400, "bad_request", 0, "no reason"},
			{c, "work", `{"action":"cancel","ids":` + ids(P) + `,"lease":"1m"}`, 400, "bad_request", 0, "cancel takes no lease"},
			{c, "work", `{"action":"extend","ids":` + ids(A) + `,"lease":"-1m"}`, 400, "invalid_option", 0, "positive"},
			{c, "work", `{"action":"complete","ids":` + ids(A) + `,"more":1}`, 400, "bad_request", 0, "more"},
			{c, "nope", `{"action":"complete","ids":` + ids(A) + `}`, 404, "not_found", 0, "nope"},
			{c, "posts", `{"action":"complete","ids":` + ids(A) + `}`, 409, "wrong_kind", 0, "posts"},
			{off, "work", `{"action":"complete","ids":` + ids(A) + `}`, 403, "forbidden", 0, ""},
		} {
			resp := tc.c.do("POST", "api/queues/"+tc.path+"/batch", []byte(tc.body))
			var e web.ErrorResponse
			json.Unmarshal(resp.body, &e)
			if resp.status != tc.status || e.Error.Kind != tc.kind || e.Error.Item != tc.item || !strings.Contains(e.Error.Message, tc.names) {
				t.Errorf("%s %s: %d %s, want %d %s item %d naming %q", tc.path, tc.body, resp.status, resp.body, tc.status, tc.kind, tc.item, tc.names)
			}
			if after := queueSnapshot(t, f.db, "work"); after != before {
				t.Fatalf("refused batch %s changed the database:\n%s\n%s", tc.body, before, after)
			}
		}
		if resp := c.get("api/queues/work/batch"); resp.status != 405 {
			t.Errorf("GET batch: %d %s", resp.status, resp.body)
		}

		// The client: the same refusal as an *Error with its item and
		// sentinel, nothing written; then batches that succeed.
		wc := newClient(t, f, web.WithWrites())
		ctx := context.Background()
		_, err := wc.Batch(ctx, "work", web.JobBatch{Action: "complete", Jobs: []storh.Job{a, {Record: storh.Record{ID: p}}}})
		var we *web.Error
		if !errors.As(err, &we) || we.Item != 2 || !errors.Is(err, storh.ErrNotClaimed) || !strings.Contains(err.Error(), P) {
			t.Errorf("client batch refused: %v", err)
		}
		if after := queueSnapshot(t, f.db, "work"); after != before {
			t.Fatalf("refused client batch changed the database:\n%s\n%s", before, after)
		}
		jobs, err := wc.Batch(ctx, "work", web.JobBatch{Action: "extend", Jobs: []storh.Job{a, b}, Lease: 2 * time.Hour})
		if err != nil || len(jobs) != 2 || jobs[0].LeaseUntil.Sub(a.LeaseUntil) < 30*time.Minute || jobs[1].State != storh.JobClaimed {
			t.Fatalf("extend batch: %+v %v", jobs, err)
		}
		jobs, err = wc.Batch(ctx, "work", web.JobBatch{Action: "complete", Jobs: []storh.Job{a, b}})
		if err != nil || len(jobs) != 2 || jobs[0].State != storh.JobDone || jobs[1].State != storh.JobDone || jobs[0].ID != a.ID {
			t.Fatalf("complete batch with tokens: %+v %v", jobs, err)
		}
		if _, err := wc.Batch(ctx, "work", web.JobBatch{Action: "retry", Jobs: []storh.Job{{Record: storh.Record{ID: d}}}}); err != nil {
			t.Fatal(err)
		}
		jobs, err = wc.Batch(ctx, "work", web.JobBatch{Action: "cancel", Jobs: []storh.Job{{Record: storh.Record{ID: p}}, {Record: storh.Record{ID: d}}}})
		if err != nil || len(jobs) != 2 || jobs[1].ID != d {
			t.Fatalf("cancel batch: %+v %v", jobs, err)
		}
		n, err := q.Counts()
		if err != nil || n != (storh.QueueCounts{Pending: 1, Done: 2}) {
			t.Errorf("counts after the batches: %+v %v", n, err)
		}
		if _, err := q.Lookup(p); !errors.Is(err, storh.ErrNotFound) {
			t.Errorf("cancelled job: %v", err)
		}
	})
}

// TestQueueJobsPaging lists a queue larger than a page, page by page,
// while jobs are enqueued and claimed between the pages (on PostgreSQL by
// a second store on the same schema): no job is listed twice, the list
// keeps the claim order, and every job that stayed pending throughout is
// listed. With no writes the pages are exactly storh.Queue.Jobs.
func TestQueueJobsPaging(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 0, 0)
		wc := newClient(t, f, web.WithMaxPage(7))
		writer := f.db
		if strings.HasPrefix(path, "postgres") {
			var err error
			if writer, err = storh.Open(path); err != nil {
				t.Fatal(err)
			}
			defer writer.Close()
		}
		q, err := writer.Queue("big")
		if err != nil {
			t.Fatal(err)
		}
		var order []uuidv7.UUID // the enqueue order
		enqueue := func(n int) {
			for range n {
				id, err := q.Enqueue(storh.Map{"n": len(order)})
				if err != nil {
					t.Fatal(err)
				}
				order = append(order, id)
			}
		}
		enqueue(40)
		ctx := context.Background()

		// Quiet: the pages, then the whole list, are Queue.Jobs.
		var want []uuidv7.UUID
		for j, err := range q.Jobs(storh.JobPending) {
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, j.ID)
		}
		var got []uuidv7.UUID
		for j, err := range wc.Jobs(ctx, "big", storh.JobPending, false) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, j.ID)
		}
		if !slices.Equal(got, want) || len(got) != 40 {
			t.Fatalf("quiet list: %d jobs, want the %d of Queue.Jobs in its order", len(got), len(want))
		}

		// Busy: between pages, two jobs come and the first due goes.
		claimed := map[uuidv7.UUID]bool{}
		var listed []uuidv7.UUID
		after, pages := "", 0
		for {
			jobs, next, err := wc.JobsPage(ctx, "big", storh.JobPending, after, 5, true)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, j := range jobs {
				if j.State != storh.JobPending || j.Raw() == nil {
					t.Errorf("listed %s: state %s, data %v", j.ID, j.State, j.Raw())
				}
				listed = append(listed, j.ID)
			}
			if next == "" {
				break
			}
			after = next
			enqueue(2)
			j, err := q.Claim(time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			claimed[j.ID] = true
		}
		if pages < 8 {
			t.Errorf("%d pages of 5 for %d jobs", pages, len(order))
		}
		seen := map[uuidv7.UUID]bool{}
		pos := map[uuidv7.UUID]int{}
		for i, id := range order {
			pos[id] = i
		}
		for i, id := range listed {
			if seen[id] {
				t.Errorf("job %s listed twice", id)
			}
			seen[id] = true
			if i > 0 && pos[id] < pos[listed[i-1]] {
				t.Errorf("job %s listed after %s, enqueued after it", listed[i-1], id)
			}
		}
		for _, id := range order {
			if !claimed[id] && !seen[id] {
				t.Errorf("job %s stayed pending and was not listed", id)
			}
		}
	})
}

// TestQueuePurgeSteps: a purge over HTTP goes in bounded steps, all by the
// cutoff of the first; a job done after it stays. The client's purge
// loops over the steps and counts them all.
func TestQueuePurgeSteps(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 0, 0)
		c := f.serve(t, web.WithWrites())
		q, err := f.db.Queue("old")
		if err != nil {
			t.Fatal(err)
		}
		done := func(n int) {
			if _, err := q.EnqueueMany(slices.Repeat([]any{storh.Map{"x": 1}}, n)); err != nil {
				t.Fatal(err)
			}
			jobs, err := q.ClaimMany(n, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				if err := q.Complete(j.ID); err != nil {
					t.Fatal(err)
				}
			}
		}
		done(7)
		passMillisecond()
		var steps []web.Purged
		body := `{"limit":3}`
		for {
			var out web.Purged
			r := c.do("POST", "api/queues/old/purge", []byte(body))
			if r.decode(t, &out); r.status != 200 {
				t.Fatalf("purge step: %d %s", r.status, r.body)
			}
			steps = append(steps, out)
			if len(steps) == 1 {
				// Done after the cutoff: no later step takes it.
				done(1)
			}
			if !out.More {
				break
			}
			body = fmt.Sprintf(`{"limit":3,"before":%q}`, out.Before)
		}
		if len(steps) != 3 || steps[0].Purged != 3 || steps[1].Purged != 3 || steps[2].Purged != 1 || steps[1].Before != steps[0].Before {
			t.Errorf("steps: %+v", steps)
		}
		if n, _ := q.Counts(); n.Done != 1 {
			t.Errorf("done jobs left: %d, want the one done after the cutoff", n.Done)
		}

		wc := newClient(t, f, web.WithWrites())
		web.SetPurgeStep(wc, 2)
		done(4)
		passMillisecond()
		if n, err := wc.PurgeDone(context.Background(), "old", 0); n != 5 || err != nil {
			t.Errorf("client purge in steps of 2: %d %v, want 5", n, err)
		}
		if n, err := wc.PurgeDead(context.Background(), "old", 0); n != 0 || err != nil {
			t.Errorf("client purge of no dead job: %d %v", n, err)
		}
	})
}

// passMillisecond lets the clock pass the millisecond it is in (at most a
// millisecond): a purge takes the jobs done more than olderThan ago, to
// the millisecond, so one done in the purge's millisecond is not older
// than 0 yet.
func passMillisecond() {
	for next := time.Now().Truncate(time.Millisecond).Add(time.Millisecond); time.Now().Before(next); {
		runtime.Gosched()
	}
}
