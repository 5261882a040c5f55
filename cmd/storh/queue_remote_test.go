package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// queueTranscript runs every queue subcommand, with their refusals, on the
// store that flags name (--db PATH, --db postgres://…, --url URL), seeded
// by seedRemote, and gives what each printed and its exit code, with the
// store's name, ids, times and tokens replaced by stable names: the
// transcript must not depend on the store. The ids and tokens the steps
// use come from what earlier steps printed, as a script's would.
func queueTranscript(t *testing.T, flags []string, where string) string {
	t.Helper()
	var b strings.Builder
	run := func(stdin string, args ...string) string {
		t.Helper()
		out, errs, code := runEnv(append(slices.Clone(flags), args...), stdin, nil)
		fmt.Fprintf(&b, "$ storh %s\nexit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		return out
	}
	// claimed reads the jobs claim printed.
	claimed := func(out string) []jobJSON {
		t.Helper()
		var jobs []jobJSON
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if line == "" {
				continue
			}
			var j jobJSON
			if err := json.Unmarshal([]byte(line), &j); err != nil {
				t.Fatalf("claim printed %q: %v", line, err)
			}
			if j.Token == "" {
				t.Fatalf("claim printed a job without its token: %s", line)
			}
			jobs = append(jobs, j)
		}
		return jobs
	}
	absent := uuidv7.NewDeterministic(9, 1714564800000, 1).New().String()

	run("", "queue", "stats", "jobs")
	a := strings.TrimSpace(run("", "queue", "enqueue", "jobs", `{"n":4,"at":{"$date":"2024-05-01T00:00:00Z"}}`))
	bc := strings.Fields(run("{\"n\":5}\n{\"n\":6}\n", "queue", "enqueue", "jobs"))
	if len(bc) != 2 {
		t.Fatalf("enqueue of two lines printed %q", bc)
	}
	run("{\"n\":7}\n{\"n\":\n", "queue", "enqueue", "jobs")
	run("{\"n\":8}\n{\"d\":"+strings.Repeat("[", 70)+strings.Repeat("]", 70)+"}\n", "queue", "enqueue", "jobs")
	run("{\"n\":9}\n{\"s\":\""+strings.Repeat("x", 1<<20)+"\"}\n", "queue", "enqueue", "jobs")
	run("", "--json", "queue", "enqueue", "later", `{"x":1}`, "--at", "+1h")
	run("", "queue", "enqueue", "posts", `{"x":1}`)
	run("", "queue", "enqueue", "jobs", `[1]`)
	run("", "queue", "claim", "jobs", "--n", "0")
	first := claimed(run("", "queue", "claim", "jobs", "--n", "2", "--lease", "1h"))
	if len(first) != 2 || first[1].ID != a {
		t.Fatalf("the claim took %+v, want the seeded pending job and %s", first, a)
	}
	run("", "queue", "claim", "later")
	run("", "queue", "claim", "nope")
	run("", "queue", "claim", "posts")
	x, y := first[1], first[0]
	run("", "queue", "extend", "jobs", x.ID, "--lease", "2h", "--token", x.Token)
	run("", "queue", "complete", "jobs", x.ID, "--token", x.Token)
	run("", "queue", "complete", "jobs", x.ID, "--token", x.Token)
	run("", "queue", "complete", "jobs", x.ID, y.ID, "--token", x.Token)
	run("", "queue", "complete", "jobs", x.ID, "--token", "0")
	run("", "queue", "release", "jobs", y.ID, absent, bc[0])
	again := claimed(run("", "queue", "claim", "jobs"))
	if len(again) != 1 || again[0].ID != y.ID || again[0].Token == y.Token {
		t.Fatalf("the claim after a release took %+v, want %s under a new token", again, y.ID)
	}
	run("", "queue", "fail", "jobs", y.ID, "--token", y.Token, "--reason", "stale")
	run("", "queue", "extend", "jobs", y.ID, "--token", y.Token)
	run("", "queue", "complete", "jobs", y.ID, "--token", y.Token)
	run("", "queue", "complete", "jobs", y.ID, bc[0], absent)
	run("", "queue", "options", "jobs", "--max-attempts", "1")
	run("", "queue", "claim", "jobs", "--n", "5")
	run("", "queue", "fail", "jobs", bc[0], "--reason", "boom")
	run("", "queue", "fail", "jobs", bc[0])
	run("", "queue", "jobs", "jobs", "--state", "dead", "--data")
	run("", "queue", "jobs", "jobs", "--state", "claimed")
	run("", "queue", "jobs", "jobs", "--state", "done", "--data")
	run("", "queue", "jobs", "jobs")
	run("", "queue", "jobs", "later")
	run("", "queue", "jobs", "jobs", "--state", "lost")
	run("", "queue", "retry", "jobs", bc[0], bc[1])
	run("", "queue", "cancel", "jobs", bc[1], bc[0], absent)
	run("", "queue", "lookup", "jobs", bc[1], bc[0], a)
	run("", "queue", "lookup", "jobs", absent)
	run("", "queue", "extend", "jobs", bc[0])
	run("", "queue", "extend", "jobs", bc[1], "--lease", "0s")
	run("", "queue", "complete", "jobs", "nope")
	run("", "queue", "lookup", "posts", a)
	run("", "--json", "queue", "stats", "jobs")
	run("", "queue", "stats", "later")
	run("", "queue", "purge", "jobs")
	run("", "queue", "purge", "jobs", "--dead", "--older-than", "1h")
	run("", "queue", "purge", "nope")
	run("", "queue", "options", "jobs", "--backoff", "1s,5m")
	run("", "--json", "queue", "options", "jobs")
	run("", "queue", "options", "jobs", "--backoff", "5m,1s")
	run("", "queue", "options", "jobs", "--max-attempts", "0")
	run("", "queue", "options", "posts", "--max-attempts", "2")
	run("", "queue", "options", "nope")
	run("", "queue", "options", "fresh", "--max-attempts", "3")
	run("", "queue", "stats", "fresh")
	run("", "queue", "jobs", "jobs", "--state", "claimed", "--data")
	// A queue of more jobs than a page of the server (WithMaxPage(2)):
	// the lists are the same, and the commands given many ids do them in
	// one transaction, leaving out (and naming) the ones refused, twice
	// given or missing.
	var many strings.Builder
	for i := range 7 {
		fmt.Fprintf(&many, "{\"m\":%d}\n", i)
	}
	run(many.String(), "queue", "enqueue", "many")
	run("", "queue", "jobs", "many")
	run("", "queue", "jobs", "many", "--data")
	mc := claimed(run("", "queue", "claim", "many", "--n", "3", "--lease", "1h"))
	if len(mc) != 3 {
		t.Fatalf("the claim of 3 took %+v", mc)
	}
	run("", "queue", "jobs", "many", "--state", "claimed", "--data")
	run("", "queue", "release", "many", mc[0].ID, mc[0].ID, absent, mc[1].ID)
	run("", "queue", "cancel", "many", mc[2].ID, mc[1].ID)
	run("", "queue", "complete", "many", mc[2].ID, mc[2].ID, mc[0].ID)
	run("", "queue", "retry", "many", mc[2].ID)
	run("", "queue", "release", "many", mc[0].ID, absent)
	run("", "queue", "jobs", "many")
	run("", "queue", "jobs", "many", "--state", "done", "--data")
	return normQueue(b.String(), where)
}

var (
	queueTimes  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
	queueTokens = regexp.MustCompile(`("token":"|token )\d+`)
	queueIDs    = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

// normQueue replaces, in a transcript, the store's name with DB, every
// time with TIME, every token with TOKEN, and each id with a name by its
// first appearance.
func normQueue(s, where string) string {
	s = strings.ReplaceAll(s, where, "DB")
	s = queueTimes.ReplaceAllString(s, "TIME")
	s = queueTokens.ReplaceAllString(s, "${1}TOKEN")
	names := map[string]string{}
	return queueIDs.ReplaceAllStringFunc(s, func(id string) string {
		if names[id] == "" {
			names[id] = fmt.Sprintf("ID%d", len(names)+1)
		}
		return names[id]
	})
}

// TestQueueSameEverywhere runs queueTranscript on a file, over --url
// (web.Handler over a file and over PostgreSQL) and on PostgreSQL (--db
// postgres://…), each seeded alike, and wants the same transcript: every
// queue subcommand prints, refuses and exits alike on every store.
func TestQueueSameEverywhere(t *testing.T) {
	local := filepath.Join(t.TempDir(), "local.db")
	seedRemote(t, local)
	want := queueTranscript(t, []string{"--db", local}, local)
	if testing.Verbose() {
		t.Log(want)
	}

	serve := func(t *testing.T, path string) string {
		seedRemote(t, path)
		db, err := storh.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(web.Handler(db, web.WithWrites(), web.WithMaxPage(2)))
		t.Cleanup(func() { srv.Close(); db.Close() })
		return srv.URL
	}
	stores := []struct {
		name string
		open func(t *testing.T) (flags []string, where string)
	}{
		{"url", func(t *testing.T) ([]string, string) {
			u := serve(t, filepath.Join(t.TempDir(), "remote.db"))
			return []string{"--url", u}, u
		}},
		{"postgres", func(t *testing.T) ([]string, string) {
			u := postgresSchema(t)
			seedRemote(t, u)
			return []string{"--db", u}, storh.Redact(u)
		}},
		{"url over postgres", func(t *testing.T) ([]string, string) {
			u := serve(t, postgresSchema(t))
			return []string{"--url", u}, u
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			flags, where := st.open(t)
			got := queueTranscript(t, flags, where)
			if got != want {
				t.Errorf("the transcript differs from the file's:\n%s", diffLines(want, got))
			}
		})
	}
	// The transcript holds what it should: a lost claim refused, the
	// token form's completion done.
	for _, s := range []string{
		"$ storh queue complete jobs ID", "no longer holds: the job is done; nothing changed",
		"no longer holds: another claim holds the job now; nothing changed", `"token":"TOKEN"`,
	} {
		if !strings.Contains(want, s) {
			t.Errorf("the transcript lacks %q:\n%s", s, want)
		}
	}
}

// diffLines shows the first lines where two transcripts part.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			from := max(0, i-6)
			return fmt.Sprintf("at line %d:\nfile:\n%s\nthis store:\n%s", i+1,
				strings.Join(w[from:min(len(w), i+4)], "\n"), strings.Join(g[from:min(len(g), i+4)], "\n"))
		}
	}
	return ""
}

// TestQueueClaimByServerCompleteByProcess: on PostgreSQL, a job is
// claimed through a storh serve running as another OS process, and
// completed by its token through a second store on the same schema (this
// process, --db); the server then sees it done, and the token, its claim
// over, is refused through the server too.
func TestQueueClaimByServerCompleteByProcess(t *testing.T) {
	url := postgresSchema(t)
	seedRemote(t, url)
	_, srv, _ := serveProcess(t, url, "--write")
	out, errs, code := runEnv([]string{"--url", srv, "queue", "claim", "jobs", "--lease", "1h"}, "", nil)
	var j jobJSON
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil || j.Token == "" {
		t.Fatalf("claim through the server: exit %d %q %s", code, out, errs)
	}
	if out, errs, code := runEnv([]string{"--db", url, "queue", "complete", "jobs", j.ID, "--token", j.Token}, "", nil); code != 0 || out != "completed 1 of 1\n" {
		t.Fatalf("complete by token in the second store: exit %d %q %s", code, out, errs)
	}
	out, errs, code = runEnv([]string{"--url", srv, "queue", "lookup", "jobs", j.ID}, "", nil)
	if code != 0 || !strings.Contains(out, `"state":"done"`) {
		t.Errorf("lookup through the server: exit %d %q %s", code, out, errs)
	}
	out, errs, code = runEnv([]string{"--url", srv, "queue", "complete", "jobs", j.ID, "--token", j.Token}, "", nil)
	if code != exitError || out != "completed 0 of 1\n" || !strings.Contains(errs, "no longer holds: the job is done") {
		t.Errorf("complete by the spent token through the server: exit %d %q %s", code, out, errs)
	}
}

// TestQueueClaimWait: claim --wait takes a job enqueued while it waits
// (by another command, which on a file must get the file between the
// waiting claim's polls), on a file, on PostgreSQL and over --url; with
// nothing enqueued it gives up after the wait, as a claim that finds
// nothing does.
func TestQueueClaimWait(t *testing.T) {
	for _, store := range []string{"file", "postgres", "url"} {
		t.Run(store, func(t *testing.T) {
			var flags []string
			switch store {
			case "file":
				flags = []string{"--db", filepath.Join(t.TempDir(), "w.db")}
			case "postgres":
				flags = []string{"--db", postgresSchema(t)}
			case "url":
				db, err := storh.Open(filepath.Join(t.TempDir(), "w.db"))
				if err != nil {
					t.Fatal(err)
				}
				srv := httptest.NewServer(web.Handler(db, web.WithWrites(), web.WithTimeout(time.Second)))
				t.Cleanup(func() { srv.Close(); db.Close() })
				flags = []string{"--url", srv.URL}
			}
			cli := func(args ...string) (string, string, int) {
				return runEnv(append(slices.Clone(flags), args...), "", nil)
			}
			if _, errs, code := cli("queue", "options", "work", "--max-attempts", "3"); code != 0 {
				t.Fatal(errs)
			}
			if out, errs, code := cli("queue", "claim", "work", "--wait", "30ms"); code != exitError || out != "" || !strings.Contains(errs, `queue "work" has no pending job`) {
				t.Errorf("claim --wait on an empty queue: exit %d %q %s", code, out, errs)
			}
			type result struct {
				out, errs string
				code      int
			}
			done := make(chan result, 1)
			go func() {
				// Over --url, 20s is more than one request's wait (half
				// the server's 1s limit): the claim asks again.
				out, errs, code := cli("queue", "claim", "work", "--wait", "20s", "--n", "2")
				done <- result{out, errs, code}
			}()
			id, errs, code := cli("queue", "enqueue", "work", `{"n":1}`)
			if code != 0 {
				t.Fatalf("enqueue beside a waiting claim: exit %d %s", code, errs)
			}
			r := <-done
			if r.code != 0 || !strings.Contains(r.out, `"id":"`+strings.TrimSpace(id)+`"`) || strings.Count(r.out, "\n") != 1 {
				t.Errorf("the waiting claim: exit %d %q %s, want the job %s", r.code, r.out, r.errs, id)
			}
		})
	}
}

// TestQueuePagesBatchesPurgeAcrossProcesses: on PostgreSQL, a storh serve
// process serves a queue that this process (a second store on the same
// schema) writes to. Pages read through the server while this process
// enqueues and claims between them list no job twice and every job that
// stayed pending; a batch through the server refused half-way leaves
// the jobs as this process sees them; the CLI's retry over --url retries
// the dead job in one batch; a purge through the server goes in steps
// by one cutoff.
func TestQueuePagesBatchesPurgeAcrossProcesses(t *testing.T) {
	url := postgresSchema(t)
	_, srv, _ := serveProcess(t, url, "--write")
	db, err := storh.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.SetQueueOptions("work", storh.WithMaxAttempts(1)); err != nil {
		t.Fatal(err)
	}
	q, err := db.Queue("work")
	if err != nil {
		t.Fatal(err)
	}
	var order []uuidv7.UUID
	enqueue := func(n int) {
		for range n {
			id, err := q.Enqueue(storh.Map{"n": len(order)})
			if err != nil {
				t.Fatal(err)
			}
			order = append(order, id)
		}
	}
	enqueue(20)
	c, err := web.NewClient(srv, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx := context.Background()

	claimed := map[uuidv7.UUID]bool{}
	seen := map[uuidv7.UUID]bool{}
	after, pages := "", 0
	for {
		jobs, next, err := c.JobsPage(ctx, "work", storh.JobPending, after, 4, false)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, j := range jobs {
			if seen[j.ID] {
				t.Errorf("job %s listed twice", j.ID)
			}
			seen[j.ID] = true
		}
		if next == "" {
			break
		}
		after = next
		enqueue(1)
		j, err := q.Claim(time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		claimed[j.ID] = true
	}
	if pages < 5 {
		t.Errorf("%d pages of 4 for %d jobs", pages, len(order))
	}
	for _, id := range order {
		if !claimed[id] && !seen[id] {
			t.Errorf("job %s stayed pending and was not listed", id)
		}
	}

	// A dead job and a pending one: a batch retry of both is refused at
	// the second, and the first stays dead.
	var dead uuidv7.UUID
	for id := range claimed {
		dead = id
		break
	}
	if err := q.Fail(dead, "boom"); err != nil {
		t.Fatal(err)
	}
	pending := order[len(order)-1]
	_, err = c.Batch(ctx, "work", web.JobBatch{Action: "retry", Jobs: []storh.Job{{Record: storh.Record{ID: dead}}, {Record: storh.Record{ID: pending}}}})
	var we *web.Error
	if !errors.As(err, &we) || we.Item != 2 || !errors.Is(err, storh.ErrNotDead) {
		t.Fatalf("batch retry refused at its second job: %v", err)
	}
	if j, err := q.Lookup(dead); err != nil || j.State != storh.JobDead {
		t.Fatalf("after the refused batch, this store sees the dead job %v %v", j.State, err)
	}
	out, errs, code := runEnv([]string{"--url", srv, "queue", "retry", "work", dead.String(), pending.String()}, "", nil)
	if code != 0 || out != "retried 1 of 2\n" || !strings.Contains(errs, pending.String()+" is pending, not dead") {
		t.Errorf("retry over --url: exit %d %q %s", code, out, errs)
	}
	if j, err := q.Lookup(dead); err != nil || j.State != storh.JobPending {
		t.Errorf("after the CLI's retry, this store sees %v %v", j.State, err)
	}

	// Five done jobs, purged through the server two at a time.
	jobs, err := q.ClaimMany(5, time.Hour)
	if err != nil || len(jobs) != 5 {
		t.Fatal(len(jobs), err)
	}
	for _, j := range jobs {
		if err := q.Complete(j.ID); err != nil {
			t.Fatal(err)
		}
	}
	for next := time.Now().Truncate(time.Millisecond).Add(time.Millisecond); time.Now().Before(next); {
		runtime.Gosched() // a purge takes jobs done before its millisecond
	}
	purged, steps := 0, 0
	req := web.PurgeRequest{Limit: 2}
	for {
		body, _ := json.Marshal(req)
		resp, err := http.Post(srv+"/api/queues/work/purge", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var step web.Purged
		err = json.NewDecoder(resp.Body).Decode(&step)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("purge step: %d %v", resp.StatusCode, err)
		}
		purged, steps = purged+step.Purged, steps+1
		if !step.More {
			break
		}
		req = web.PurgeRequest{Limit: 2, Before: step.Before}
	}
	if purged != 5 || steps != 3 {
		t.Errorf("purged %d in %d steps, want 5 in 3", purged, steps)
	}
	if n, err := q.Counts(); err != nil || n.Done != 0 {
		t.Errorf("done jobs after the purge: %+v %v", n, err)
	}
}
