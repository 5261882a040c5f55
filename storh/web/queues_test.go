package web_test

import (
	"context"
	"encoding/base64"
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
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// queueSnapshot is every job of queue name in every state, with its
// attempts, lease, due time, last error and data, the queue's options,
// and the names of the database's collections: what a refused request
// must leave as it was.
func queueSnapshot(t testing.TB, db *storh.DB, name string) string {
	t.Helper()
	var b strings.Builder
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Collections {
		fmt.Fprintf(&b, "collection %s %s\n", c.Name, c.Kind)
	}
	q, err := db.Queue(name, storh.WithoutCreate())
	if errors.Is(err, storh.ErrNotFound) {
		return b.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, state := range []storh.JobState{storh.JobPending, storh.JobClaimed, storh.JobDone, storh.JobDead} {
		for j, err := range q.Jobs(state) {
			if err != nil {
				t.Fatal(err)
			}
			full, err := q.Lookup(j.ID)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := json.Marshal(full.Record)
			fmt.Fprintf(&b, "%s %s %d %v %v %q %d %s\n", j.ID, full.State, full.Attempts, full.LeaseUntil, full.Due, full.LastError, full.Token, data)
		}
	}
	o, stored, err := db.QueueOptions(name)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "options %+v %v\n", o, stored)
	return b.String()
}

// jobBody decodes an answer that is one job.
func jobBody(t testing.TB, r response) web.Job {
	t.Helper()
	var j web.Job
	r.decode(t, &j)
	return j
}

// TestQueueEndpoints drives a job through every queue endpoint, on both
// backends, and checks each answer against the queue as storh sees it.
func TestQueueEndpoints(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 0, 0)
		c := f.serve(t, web.WithWrites())
		// Enqueue two jobs, one with a typed value, into a new queue.
		r := c.do("POST", "api/queues/mail/jobs", []byte(`{"jobs":[{"to":"ann","at":{"$date":"2024-05-01T12:00:00Z"}},{"to":"bo"}]}`))
		var enq web.Enqueued
		r.decode(t, &enq)
		if r.status != 201 || len(enq.IDs) != 2 {
			t.Fatalf("enqueue: %d %s", r.status, r.body)
		}
		mail, err := f.db.Queue("mail", storh.WithoutCreate())
		if err != nil {
			t.Fatalf("the enqueue made no queue: %v", err)
		}
		first := uuidv7.MustParse(enq.IDs[0])
		j, err := mail.Lookup(first)
		if err != nil || j.State != storh.JobPending || !j.Data()["at"].(time.Time).Equal(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)) {
			t.Fatalf("the enqueued job is %+v %v (%v)", j, j.Data(), err)
		}
		// Scheduled: counted as such, and not claimed.
		r = c.do("POST", "api/queues/mail/jobs", []byte(`{"jobs":[{"later":true}],"at":"2999-01-01T00:00:00Z"}`))
		r.decode(t, &enq)
		if r.status != 201 {
			t.Fatalf("enqueue at: %d %s", r.status, r.body)
		}
		later := uuidv7.MustParse(enq.IDs[0])
		if n, _ := mail.Counts(); n.Scheduled != 1 || n.Pending != 2 {
			t.Errorf("counts after an enqueue at: %+v", n)
		}
		if j := jobBody(t, c.get("api/queues/mail/jobs/"+later.String())); !strings.HasPrefix(j.Due, "2999-01-01T00:00:00") {
			t.Errorf("the scheduled job's due: %q", j.Due)
		}

		// Claim both due jobs: data and tokens come with them.
		r = c.do("POST", "api/queues/mail/claims", []byte(`{"n":5,"lease":"1h"}`))
		var claimed web.Claimed
		r.decode(t, &claimed)
		if r.status != 200 || len(claimed.Jobs) != 2 {
			t.Fatalf("claim: %d %s", r.status, r.body)
		}
		for _, cj := range claimed.Jobs {
			sj, err := mail.Lookup(uuidv7.MustParse(cj.ID))
			if err != nil || cj.State != "claimed" || cj.Token != strconv.FormatUint(sj.Token, 10) || cj.Attempts != 1 || cj.LeaseUntil == "" {
				t.Errorf("claimed %+v, stored %+v (%v)", cj, sj, err)
			}
		}
		if string(claimed.Jobs[1].Data) != `{"to":"bo"}` {
			t.Errorf("claimed data %s", claimed.Jobs[1].Data)
		}
		// Nothing due now: an empty list, at once or after a short wait.
		for _, body := range []string{`{}`, `{"wait":"20ms"}`} {
			r = c.do("POST", "api/queues/mail/claims", []byte(body))
			if r.status != 200 || string(r.body) != `{"jobs":[]}`+"\n" {
				t.Errorf("claim %s with nothing due: %d %s", body, r.status, r.body)
			}
		}

		a, b := claimed.Jobs[0], claimed.Jobs[1]
		// Extend by token, then complete by token.
		r = c.do("POST", "api/queues/mail/jobs/"+a.ID+"/extend", []byte(`{"token":"`+a.Token+`","lease":"2h"}`))
		if j := jobBody(t, r); r.status != 200 || j.LeaseUntil <= a.LeaseUntil || j.State != "claimed" {
			t.Errorf("extend: %d %s", r.status, r.body)
		}
		r = c.do("POST", "api/queues/mail/jobs/"+a.ID+"/complete", []byte(`{"token":"`+a.Token+`"}`))
		if j := jobBody(t, r); r.status != 200 || j.State != "done" || j.Token != "" {
			t.Errorf("complete by token: %d %s", r.status, r.body)
		}
		// Release b, claim it again: the old token has lost its claim.
		if r := c.do("POST", "api/queues/mail/jobs/"+b.ID+"/release", nil); r.status != 200 || jobBody(t, r).State != "pending" {
			t.Errorf("release: %d %s", r.status, r.body)
		}
		r = c.do("POST", "api/queues/mail/claims", nil)
		r.decode(t, &claimed)
		if len(claimed.Jobs) != 1 || claimed.Jobs[0].ID != b.ID || claimed.Jobs[0].Token == b.Token {
			t.Fatalf("claim after release: %s", r.body)
		}
		before := queueSnapshot(t, f.db, "mail")
		for _, action := range []string{"complete", "fail", "extend"} {
			r := c.do("POST", "api/queues/mail/jobs/"+b.ID+"/"+action, []byte(`{"token":"`+b.Token+`"}`))
			if r.status != 409 || r.errorKind(t) != web.KindNotClaimed {
				t.Errorf("%s with a token that lost its claim: %d %s, want 409 not_claimed", action, r.status, r.body)
			}
		}
		if after := queueSnapshot(t, f.db, "mail"); after != before {
			t.Errorf("a lost token changed the queue:\n%s\n%s", before, after)
		}
		// Fail by id, with one attempt allowed: dead; retry; cancel.
		if r := c.do("PUT", "api/queues/mail/options", []byte(`{"max_attempts":1,"backoff_min":"1s","backoff_max":"1m"}`)); r.status != 200 ||
			string(r.body) != `{"name":"mail","max_attempts":1,"backoff_min":"1s","backoff_max":"1m0s","stored":true}`+"\n" {
			t.Errorf("put options: %d %s", r.status, r.body)
		}
		if o := c.get("api/queues/mail/options"); o.status != 200 || !strings.Contains(string(o.body), `"max_attempts":1`) {
			t.Errorf("get options: %d %s", o.status, o.body)
		}
		r = c.do("POST", "api/queues/mail/jobs/"+b.ID+"/fail", []byte(`{"reason":"smtp down"}`))
		if j := jobBody(t, r); r.status != 200 || j.State != "dead" || j.LastError != "smtp down" || j.Attempts != 1 {
			t.Errorf("fail: %d %s", r.status, r.body)
		}
		if r := c.do("POST", "api/queues/mail/jobs/"+b.ID+"/retry", nil); r.status != 200 || jobBody(t, r).State != "pending" {
			t.Errorf("retry: %d %s", r.status, r.body)
		}
		if r := c.do("DELETE", "api/queues/mail/jobs/"+b.ID, nil); r.status != 204 {
			t.Errorf("cancel: %d %s", r.status, r.body)
		}
		if _, err := mail.Lookup(uuidv7.MustParse(b.ID)); !errors.Is(err, storh.ErrNotFound) {
			t.Errorf("lookup after cancel: %v", err)
		}

		// List: the done job, with and without data.
		var page web.JobsPage
		r = c.get("api/queues/mail/jobs?state=done&data=1")
		r.decode(t, &page)
		if r.status != 200 || r.header.Get("Content-Type") != "application/json" || len(page.Jobs) != 1 || page.Next != "" ||
			!strings.Contains(string(r.body), `"data":{"at":{"$date":`) {
			t.Errorf("list done: %d %s", r.status, r.body)
		}
		if r := c.get("api/queues/mail/jobs?state=done"); strings.Contains(string(r.body), `"data"`) {
			t.Errorf("list without data: %s", r.body)
		}
		page = web.JobsPage{}
		r = c.get("api/queues/mail/jobs?state=pending")
		if r.decode(t, &page); r.status != 200 || len(page.Jobs) != 1 || page.Jobs[0].ID != later.String() {
			t.Errorf("list of the pending (the scheduled job): %d %s", r.status, r.body)
		}
		// Purge the done job.
		var purged web.Purged
		r = c.do("POST", "api/queues/mail/purge", []byte(`{"state":"done"}`))
		if r.decode(t, &purged); r.status != 200 || purged.Purged != 1 || purged.More || purged.Before == "" {
			t.Errorf("purge: %d %s", r.status, r.body)
		}
		if r := c.get("api/queues/mail"); string(r.body) != `{"name":"mail","pending":0,"claimed":0,"done":0,"dead":0,"scheduled":1}`+"\n" {
			t.Errorf("counts at the end: %s", r.body)
		}
	})
}

// TestQueueEndpointsRefuse: every bad request to a queue endpoint answers
// a typed error and leaves the database as it was.
func TestQueueEndpointsRefuse(t *testing.T) {
	f := newFixture(t, 1, 0)
	c := f.serve(t, web.WithWrites(), web.WithMaxBody(100), web.WithMaxImport(200), web.WithTimeout(2*time.Second))
	off := f.serve(t)
	q, err := f.db.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	pendingID := uuidv7.UUID{}
	for j, err := range q.Jobs(storh.JobPending) {
		if err != nil {
			t.Fatal(err)
		}
		pendingID = j.ID
	}
	if _, err := q.Enqueue(storh.Map{"n": 2}); err != nil {
		t.Fatal(err)
	}
	held, err := q.Claim(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if held.ID != pendingID {
		t.Fatalf("claimed %s, want the fixture's job %s", held.ID, pendingID)
	}
	var other uuidv7.UUID
	for j := range q.Jobs(storh.JobPending) {
		other = j.ID
	}
	h, p := held.ID.String(), other.String()
	tok := strconv.FormatUint(held.Token, 10)
	missing := uuidv7.New().String()
	// A cursor of the pending list: a due time and an enqueue order.
	pendingCursor := base64.RawURLEncoding.EncodeToString(append([]byte{byte(storh.JobPending)}, make([]byte, 16)...))
	before := queueSnapshot(t, f.db, "jobs")
	for _, tc := range []struct {
		c                  *client
		method, path, body string
		status             int
		kind               string
	}{
		{c, "POST", "api/queues/jobs/jobs", `{"jobs":[{"a":1},[1]]}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/jobs", `{"jobs":[{"a":1},{"d":{"$date":"nope"}}]}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/jobs", `{"jobs":[]}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/jobs", ``, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/jobs", `{"job":{"a":1}}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/jobs", `{"jobs":[{"a":1}],"at":"tomorrow"}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/jobs", `{"jobs":[{"a":1}]} {}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/jobs", `{"jobs":[{"s":"` + strings.Repeat("x", 200) + `"}]}`, 413, "too_large"},
		{c, "POST", "api/queues/jobs/claims", `{"lease":"` + strings.Repeat("1", 100) + `s"}`, 413, "too_large"},
		{c, "POST", "api/queues/new/jobs", `{"jobs":[{"a":1},7]}`, 400, "bad_request"},
		{c, "POST", "api/queues/posts/jobs", `{"jobs":[{"a":1}]}`, 409, "wrong_kind"},
		{c, "POST", "api/queues/jobs/jobs?x=1", `{"jobs":[{"a":1}]}`, 400, "bad_request"},
		{off, "POST", "api/queues/jobs/jobs", `{"jobs":[{"a":1}]}`, 403, "forbidden"},
		{c, "POST", "api/queues/jobs/claims", `{"n":-1}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/claims", `{"lease":"0s"}`, 400, "invalid_option"},
		{c, "POST", "api/queues/jobs/claims", `{"lease":"soon"}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/claims", `{"wait":"-2s"}`, 400, "invalid_option"},
		{c, "POST", "api/queues/jobs/claims", `{"n":"1"}`, 400, "bad_request"},
		{c, "POST", "api/queues/nope/claims", `{}`, 404, "not_found"},
		{c, "POST", "api/queues/posts/claims", `{}`, 409, "wrong_kind"},
		{off, "POST", "api/queues/jobs/claims", `{}`, 403, "forbidden"},
		{c, "GET", "api/queues/jobs/claims", ``, 405, "method_not_allowed"},
		{c, "POST", "api/queues/jobs/jobs/" + h + "/complete", `{"token":"12x"}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/jobs/" + h + "/complete", `{"token":"0"}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/jobs/" + h + "/complete", `{"token":"` + strconv.FormatUint(held.Token^1, 10) + `"}`, 409, "not_claimed"},
		{c, "POST", "api/queues/jobs/jobs/" + h + "/complete", `{"reason":"x"}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/jobs/" + p + "/complete", ``, 409, "not_claimed"},
		{c, "POST", "api/queues/jobs/jobs/" + p + "/fail", `{"reason":"x"}`, 409, "not_claimed"},
		{c, "POST", "api/queues/jobs/jobs/" + p + "/extend", `{}`, 409, "not_claimed"},
		{c, "POST", "api/queues/jobs/jobs/" + h + "/extend", `{"lease":"-1m"}`, 400, "invalid_option"},
		{c, "POST", "api/queues/jobs/jobs/" + h + "/extend", `{"lease":"1m","reason":"x"}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/jobs/" + p + "/release", ``, 409, "not_claimed"},
		{c, "POST", "api/queues/jobs/jobs/" + p + "/retry", ``, 409, "not_dead"},
		{c, "POST", "api/queues/jobs/jobs/" + p + "/retry", `{"token":"` + tok + `"}`, 400, "bad_request"},
		{c, "DELETE", "api/queues/jobs/jobs/" + h, ``, 409, "claimed"},
		{c, "DELETE", "api/queues/jobs/jobs/" + missing, ``, 404, "not_found"},
		{c, "DELETE", "api/queues/jobs/jobs/nope", ``, 400, "bad_request"},
		{c, "GET", "api/queues/jobs/jobs/" + missing, ``, 404, "not_found"},
		{c, "POST", "api/queues/jobs/jobs/" + missing + "/complete", ``, 404, "not_found"},
		{c, "POST", "api/queues/nope/jobs/" + h + "/complete", ``, 404, "not_found"},
		{off, "POST", "api/queues/jobs/jobs/" + h + "/complete", ``, 403, "forbidden"},
		{off, "DELETE", "api/queues/jobs/jobs/" + p, ``, 403, "forbidden"},
		{c, "GET", "api/queues/jobs/jobs?state=lost", ``, 400, "bad_request"},
		{c, "GET", "api/queues/jobs/jobs?limit=0", ``, 400, "bad_request"},
		{c, "GET", "api/queues/jobs/jobs?sort=1", ``, 400, "bad_request"},
		{c, "GET", "api/queues/nope/jobs", ``, 404, "not_found"},
		{c, "GET", "api/queues/jobs/jobs?after=%21%21", ``, 400, "invalid_query"},
		{c, "GET", "api/queues/jobs/jobs?state=done&after=" + pendingCursor, ``, 400, "invalid_query"},
		{c, "GET", "api/queues/jobs/jobs?after=a&after=b", ``, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/purge", `{"older_than":"1h","before":"2024-01-01T00:00:00Z"}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/purge", `{"before":"soon"}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/purge", `{"limit":-1}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/purge", `{"state":"pending"}`, 400, "bad_request"},
		{c, "POST", "api/queues/jobs/purge", `{"older_than":"-1h"}`, 400, "invalid_option"},
		{c, "POST", "api/queues/nope/purge", `{}`, 404, "not_found"},
		{off, "POST", "api/queues/jobs/purge", `{}`, 403, "forbidden"},
		{c, "PUT", "api/queues/jobs/options", `{"max_attempts":0}`, 400, "invalid_option"},
		{c, "PUT", "api/queues/jobs/options", `{"backoff_min":"1s"}`, 400, "bad_request"},
		{c, "PUT", "api/queues/jobs/options", `{"backoff_min":"1m","backoff_max":"1s"}`, 400, "invalid_option"},
		{c, "PUT", "api/queues/jobs/options", `{}`, 400, "bad_request"},
		{c, "PUT", "api/queues/nope/options", `{"max_attempts":3}`, 404, "not_found"},
		{c, "PUT", "api/queues/posts/options?create=1", `{"max_attempts":3}`, 409, "wrong_kind"},
		{c, "PUT", "api/queues/jobs/options?create=maybe", `{"max_attempts":3}`, 400, "bad_request"},
		{off, "PUT", "api/queues/jobs/options", `{"max_attempts":3}`, 403, "forbidden"},
		{c, "GET", "api/queues/nope/options", ``, 404, "not_found"},
	} {
		r := tc.c.do(tc.method, tc.path, []byte(tc.body))
		if r.status != tc.status || r.errorKind(t) != tc.kind {
			t.Errorf("%s %s %s: %d %s, want %d %s", tc.method, tc.path, tc.body, r.status, r.body, tc.status, tc.kind)
		}
	}
	if after := queueSnapshot(t, f.db, "jobs"); after != before {
		t.Errorf("refused requests changed the database:\n%s\n%s", before, after)
	}
	// A wait longer than half the request time limit is lowered to it:
	// the claim answers, empty, before the limit cuts the request.
	if err := f.db.SetQueueOptions("idle", storh.WithMaxAttempts(2)); err != nil {
		t.Fatal(err)
	}
	short := f.serve(t, web.WithWrites(), web.WithTimeout(100*time.Millisecond))
	if r := short.do("POST", "api/queues/idle/claims", []byte(`{"wait":"1h"}`)); r.status != 200 || string(r.body) != `{"jobs":[]}`+"\n" {
		t.Errorf("a claim waiting an hour on a 100ms limit: %d %s", r.status, r.body)
	}
	// A bad job of an enqueue is named by its place: one the handler
	// cannot read, and one storh refuses (nested too deep).
	before = queueSnapshot(t, f.db, "jobs")
	for body, item := range map[string]int{
		`{"jobs":[{"a":1},{"b":2},"x"]}`: 3,
		`{"jobs":[{"a":1},{"d":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}]}`: 2,
	} {
		r := c.do("POST", "api/queues/jobs/jobs", []byte(body))
		var e web.ErrorResponse
		r.decode(t, &e)
		if r.status != 400 || e.Error.Kind != web.KindBadRequest || e.Error.Item != item ||
			!strings.HasPrefix(e.Error.Message, fmt.Sprintf(`web: enqueue into "jobs", nothing written: job %d: `, item)) {
			t.Errorf("enqueue of a bad job %d: %s", item, r.body)
		}
	}
	if after := queueSnapshot(t, f.db, "jobs"); after != before {
		t.Errorf("refused enqueues changed the database:\n%s\n%s", before, after)
	}
}

// TestClientQueue runs a job's life through web.Client on both backends:
// the client gives storh.Jobs, and its errors wrap storh's sentinels.
func TestClientQueue(t *testing.T) {
	backends(t, func(t *testing.T, path string) {
		f := newFixtureAt(t, path, 0, 0)
		c := newClient(t, f, web.WithWrites())
		ctx := context.Background()

		ids, err := c.EnqueueMany(ctx, "work", []any{storh.Map{"n": int64(1)}, storh.Map{"n": int64(2)}})
		if err != nil || len(ids) != 2 {
			t.Fatalf("EnqueueMany: %v %v", ids, err)
		}
		if _, err := c.EnqueueMany(ctx, "work", []any{storh.Map{"n": 3}, func() {}}); err == nil {
			t.Error("EnqueueMany of a func: nil error")
		}
		later, err := c.EnqueueManyAt(ctx, "work", time.Now().Add(time.Hour), []any{storh.Map{"later": true}})
		if err != nil {
			t.Fatal(err)
		}
		if j, err := c.Lookup(ctx, "work", later[0]); err != nil || j.State != storh.JobPending || j.Due.Before(time.Now().Add(50*time.Minute)) {
			t.Errorf("Lookup of the scheduled job: %+v %v", j, err)
		}
		jobs, err := c.Claim(ctx, "work", 5, time.Minute, 0)
		if err != nil || len(jobs) != 2 || jobs[0].ID != ids[0] || jobs[0].Token == 0 || jobs[0].Data()["n"] != int64(1) {
			t.Fatalf("Claim: %+v %v", jobs, err)
		}
		if _, err := c.Claim(ctx, "work", 1, time.Minute, 10*time.Millisecond); !errors.Is(err, storh.ErrEmpty) {
			t.Errorf("Claim with nothing due: %v, want ErrEmpty", err)
		}
		q, err := f.db.Queue("work", storh.WithoutCreate())
		if err != nil {
			t.Fatal(err)
		}
		// The token the client gave works on the database itself.
		if j, err := c.ExtendClaim(ctx, "work", jobs[0], time.Hour); err != nil || j.LeaseUntil.Before(time.Now().Add(50*time.Minute)) {
			t.Errorf("ExtendClaim: %+v %v", j, err)
		}
		if err := q.CompleteClaim(jobs[0]); err != nil {
			t.Errorf("CompleteClaim on the database of a job the client claimed: %v", err)
		}
		if _, err := c.CompleteClaim(ctx, "work", jobs[0]); !errors.Is(err, storh.ErrNotClaimed) {
			t.Errorf("CompleteClaim twice: %v, want ErrNotClaimed", err)
		}
		if _, err := c.CompleteClaim(ctx, "work", storh.Job{Record: storh.Record{ID: ids[1]}}); !errors.Is(err, storh.ErrNotClaimed) {
			t.Errorf("CompleteClaim without a token: %v, want ErrNotClaimed", err)
		}
		if _, err := c.Release(ctx, "work", ids[1]); err != nil {
			t.Fatal(err)
		}
		if _, err := c.FailClaim(ctx, "work", jobs[1], "lost"); !errors.Is(err, storh.ErrNotClaimed) {
			t.Errorf("FailClaim after a release: %v, want ErrNotClaimed", err)
		}
		if _, err := c.Retry(ctx, "work", ids[1]); !errors.Is(err, storh.ErrNotDead) {
			t.Errorf("Retry of a pending job: %v, want ErrNotDead", err)
		}
		again, err := c.Claim(ctx, "work", 1, time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Cancel(ctx, "work", ids[1]); !errors.Is(err, storh.ErrClaimed) {
			t.Errorf("Cancel of a held claim: %v, want ErrClaimed", err)
		}
		o, stored, err := c.SetQueueOptions(ctx, "work", web.QueueOptionsChange{MaxAttempts: ptr(1)}, false)
		if err != nil || o.MaxAttempts != 1 || !stored {
			t.Errorf("SetQueueOptions: %+v %v %v", o, stored, err)
		}
		if j, err := c.FailClaim(ctx, "work", again[0], "no"); err != nil || j.State != storh.JobDead || j.LastError != "no" {
			t.Errorf("FailClaim: %+v %v", j, err)
		}
		var dead []uuidv7.UUID
		for j, err := range c.Jobs(ctx, "work", storh.JobDead, true) {
			if err != nil {
				t.Fatal(err)
			}
			if j.Data()["n"] != int64(2) {
				t.Errorf("dead job's data %v", j.Data())
			}
			dead = append(dead, j.ID)
		}
		if !slices.Equal(dead, ids[1:]) {
			t.Errorf("Jobs(dead) = %v, want %v", dead, ids[1:])
		}
		// PurgeDead purges jobs that died more than olderThan ago, to the
		// millisecond: one that died in this millisecond is not older than
		// 0 yet. Let the clock pass it (at most a millisecond).
		for next := time.Now().Truncate(time.Millisecond).Add(time.Millisecond); time.Now().Before(next); {
			runtime.Gosched()
		}
		if n, err := c.PurgeDead(ctx, "work", 0); err != nil || n != 1 {
			t.Errorf("PurgeDead: %d %v", n, err)
		}
		if n, err := c.PurgeDone(ctx, "work", time.Hour); err != nil || n != 0 {
			t.Errorf("PurgeDone older than an hour: %d %v", n, err)
		}
		if _, _, err := c.QueueOptions(ctx, "nope"); !errors.Is(err, storh.ErrNotFound) {
			t.Errorf("QueueOptions of no queue: %v, want ErrNotFound", err)
		}
		if _, err := c.Claim(ctx, "work", 1, 0, 0); !errors.Is(err, storh.ErrInvalidOption) {
			t.Errorf("Claim with no lease: %v, want ErrInvalidOption, as storh's", err)
		}
		if _, _, err := c.SetQueueOptions(ctx, "work", web.QueueOptionsChange{MaxAttempts: ptr(0)}, false); !errors.Is(err, storh.ErrInvalidOption) {
			t.Errorf("SetQueueOptions(0 attempts): %v, want ErrInvalidOption", err)
		}
	})
}

// TestQueueTwoStores: on PostgreSQL, a job claimed through a server over
// one store is completed, by its token, through a second store on the
// same schema, and the server sees it done; a token that lost its claim
// there is refused here.
func TestQueueTwoStores(t *testing.T) {
	url := pgtest.URL(t)
	f := newFixtureAt(t, url, 0, 0)
	c := newClient(t, f, web.WithWrites())
	ctx := context.Background()
	other, err := storh.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	oq, err := other.Queue("jobs", storh.WithoutCreate())
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Claim(ctx, "jobs", 1, time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := oq.CompleteClaim(jobs[0]); err != nil {
		t.Fatalf("CompleteClaim in the second store: %v", err)
	}
	if j, err := c.Lookup(ctx, "jobs", jobs[0].ID); err != nil || j.State != storh.JobDone {
		t.Errorf("the server sees %+v %v, want done", j, err)
	}
	if _, err := c.CompleteClaim(ctx, "jobs", jobs[0]); !errors.Is(err, storh.ErrNotClaimed) {
		t.Errorf("CompleteClaim through the server after the second store's: %v, want ErrNotClaimed", err)
	}
	// And the other way: enqueued in the second store, a claim through
	// the server that waits is woken by it.
	done := make(chan []storh.Job)
	go func() {
		jobs, err := c.Claim(ctx, "jobs", 1, time.Minute, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- jobs
	}()
	id, err := oq.Enqueue(storh.Map{"from": "other"})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-done; len(got) != 1 || got[0].ID != id {
		t.Errorf("the waiting claim got %+v, want the job %s", got, id)
	}
}
