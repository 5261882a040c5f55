package storh_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
)

// wakeRounds is how many jobs the tests below hand from one store to a
// waiter in another. In a round the enqueue may commit before the waiter's
// first claim, which then takes the job without waiting; in most rounds it
// commits while the waiter waits, and only a notice from the enqueuer's
// commit ends that wait before its context does (no lease, no scheduled
// job, no commit of the waiter's own process could). Without such notices
// the test fails on the context of its first such round.
const wakeRounds = 20

// wakeWait bounds each wait: far longer than any wake takes, short enough
// that a missing wake fails the test in reasonable time.
const wakeWait = 20 * time.Second

// A waiter in one store is woken by another store's enqueues, releases and
// failures on the same PostgreSQL schema, as two processes would be.
func TestPostgresClaimWaitWokenAcrossStores(t *testing.T) {
	skipOnPostgresPass(t)
	url := pgtest.URL(t)
	a, b := openPostgres(t, url), openPostgres(t, url)
	qa, qb := qOpen(t, a, "jobs"), qOpen(t, b, "jobs")
	for i := range wakeRounds {
		ctx, cancel := context.WithTimeout(context.Background(), wakeWait)
		ch := qStartWait(ctx, qb, time.Hour)
		id := qEnqueue(t, qa, storh.Map{"n": i})
		r := qWaitFor(t, ch)
		cancel()
		if r.err != nil || r.job.ID != id {
			t.Fatalf("round %d: ClaimWait in the other store = %v, %v; want %v (woken by the enqueue)", i, r.job.ID, r.err, id)
		}
		if err := qb.Complete(id); err != nil {
			t.Fatal(err)
		}
		if i%3 != 0 {
			continue
		}
		// The enqueuer's store claims a job and gives it back, by
		// Release and by Fail in turn: each wakes a wait of b.
		id = qEnqueue(t, qa, storh.Map{"n": "back"})
		if j := qClaim(t, qa, time.Hour); j.ID != id {
			t.Fatalf("claimed %v; want %v", j.ID, id)
		}
		ctx, cancel = context.WithTimeout(context.Background(), wakeWait)
		ch = qStartWait(ctx, qb, time.Hour)
		var err error
		if i%2 == 0 {
			err = qa.Release(id)
		} else {
			err = qa.Fail(id, "again")
		}
		if err != nil {
			t.Fatal(err)
		}
		r = qWaitFor(t, ch)
		cancel()
		if r.err != nil || r.job.ID != id {
			t.Fatalf("round %d: ClaimWait after the other store gave the job back = %v, %v; want %v", i, r.job.ID, r.err, id)
		}
		if err := qb.Complete(id); err != nil {
			t.Fatal(err)
		}
	}
}

// wakeChildEnv names the URL the child of the test below opens.
const wakeChildEnv = "STORH_WAKE_CHILD"

// A waiter in a second OS process is woken by this process's enqueues:
// the child answers "waiting" and then waits, and this process enqueues
// once it has the answer; the job must reach the child within its long
// wait.
func TestPostgresClaimWaitWokenAcrossProcesses(t *testing.T) {
	skipOnPostgresPass(t)
	url := pgtest.URL(t)
	db := openPostgres(t, url)
	q := qOpen(t, db, "jobs")
	cmd, in, out := startChild(t, "TestPostgresClaimWaitChild", wakeChildEnv+"="+url)
	defer func() {
		in.Close()
		cmd.Wait()
	}()
	lines := bufio.NewScanner(out)
	next := func() string {
		t.Helper()
		for lines.Scan() {
			if kind, rest, _ := strings.Cut(lines.Text(), " "); kind == "ok" {
				return rest
			} else if kind == "err" {
				t.Fatalf("child: %s", rest)
			}
		}
		t.Fatalf("child gone: %v", lines.Err())
		return ""
	}
	for i := range wakeRounds {
		fmt.Fprintln(in, "wait")
		if got := next(); got != "waiting" {
			t.Fatalf("child said %q; want waiting", got)
		}
		id := qEnqueue(t, q, storh.Map{"n": i})
		if got := next(); got != id.String() {
			t.Fatalf("round %d: the child claimed %s; want %v", i, got, id)
		}
	}
}

// TestPostgresClaimWaitChild is the child of the test above: for each
// "wait" line it answers "ok waiting", waits in ClaimWait (wakeWait at
// most), completes the job and answers "ok <id>", or "err …".
func TestPostgresClaimWaitChild(t *testing.T) {
	url := os.Getenv(wakeChildEnv)
	if url == "" {
		t.Skip("run by TestPostgresClaimWaitWokenAcrossProcesses")
	}
	db, err := storh.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := db.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Println("ok waiting")
		ctx, cancel := context.WithTimeout(context.Background(), wakeWait)
		job, err := q.ClaimWait(ctx, time.Hour)
		cancel()
		if err == nil {
			err = q.Complete(job.ID)
		}
		if err != nil {
			fmt.Println("err " + strconv.Quote(err.Error()))
			continue
		}
		fmt.Println("ok " + job.ID.String())
	}
}
