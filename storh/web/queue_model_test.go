package web_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// outcome names how a queue call ended, for comparing two queues whose
// ids and tokens differ: nil, one of the queue's sentinels, or a failure
// the test reports.
func outcome(err error) string {
	for _, s := range []error{storh.ErrEmpty, storh.ErrNotClaimed, storh.ErrClaimed, storh.ErrNotDead, storh.ErrNotFound} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if err != nil {
		return "unexpected: " + err.Error()
	}
	return "ok"
}

// TestClientQueueModel runs random sequences of queue operations on two
// databases at once: storh's Queue on one, the reference, and web.Client
// through the handler on the other. Every call must end alike (the same
// sentinel, the same jobs claimed in the same order, the same attempts and
// reasons), the stale tokens of claims that ended included, and the counts
// must agree after each step. Jobs and claims are named by their place in
// the sequence, since the ids and tokens differ between the two.
func TestClientQueueModel(t *testing.T) {
	ref, err := storh.Open(filepath.Join(t.TempDir(), "ref.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	f := newFixture(t, 0, 0)
	c := newClient(t, f, web.WithWrites())
	ctx := context.Background()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		name := fmt.Sprintf("q%d", run)
		// Two attempts, no backoff: jobs die, and a failed one is due
		// again at once, on both.
		for _, db := range []*storh.DB{ref, f.db} {
			if err := db.SetQueueOptions(name, storh.WithMaxAttempts(2)); err != nil {
				rt.Fatal(err)
			}
		}
		q, err := ref.Queue(name, storh.WithoutCreate())
		if err != nil {
			rt.Fatal(err)
		}
		var refIDs, webIDs []uuidv7.UUID     // job i
		var refClaims, webClaims []storh.Job // claim k, as the claim gave it
		index := map[uuidv7.UUID]int{}       // either side's id → i
		job := func(rt *rapid.T) (uuidv7.UUID, uuidv7.UUID, int, bool) {
			if len(refIDs) == 0 {
				return uuidv7.UUID{}, uuidv7.UUID{}, 0, false
			}
			i := rapid.IntRange(0, len(refIDs)-1).Draw(rt, "job")
			return refIDs[i], webIDs[i], i, true
		}
		claim := func(rt *rapid.T) (storh.Job, storh.Job, bool) {
			if len(refClaims) == 0 {
				return storh.Job{}, storh.Job{}, false
			}
			k := rapid.IntRange(0, len(refClaims)-1).Draw(rt, "claim")
			return refClaims[k], webClaims[k], true
		}
		same := func(rt *rapid.T, what string, refErr, webErr error) {
			if a, b := outcome(refErr), outcome(webErr); a != b || a[0] == 'u' {
				rt.Fatalf("%s: the queue says %s, the client %s", what, a, b)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"enqueue": func(rt *rapid.T) {
				n := rapid.IntRange(1, 3).Draw(rt, "n")
				items := make([]any, n)
				for i := range items {
					items[i] = storh.Map{"i": int64(len(refIDs) + i)}
				}
				a, errA := q.EnqueueMany(items)
				b, errB := c.EnqueueMany(ctx, name, items)
				same(rt, "enqueue", errA, errB)
				for i := range a {
					index[a[i]], index[b[i]] = len(refIDs), len(refIDs)
					refIDs, webIDs = append(refIDs, a[i]), append(webIDs, b[i])
				}
			},
			"claim": func(rt *rapid.T) {
				n := rapid.IntRange(1, 3).Draw(rt, "n")
				a, errA := q.ClaimMany(n, time.Hour)
				b, errB := c.Claim(ctx, name, n, time.Hour, 0)
				same(rt, "claim", errA, errB)
				if len(a) != len(b) {
					rt.Fatalf("claim %d: the queue gave %d jobs, the client %d", n, len(a), len(b))
				}
				for i := range a {
					if index[a[i].ID] != index[b[i].ID] || a[i].Attempts != b[i].Attempts || b[i].Token == 0 ||
						a[i].Data()["i"] != b[i].Data()["i"] {
						rt.Fatalf("claim: the queue gave job %d (%d attempts), the client job %d (%d attempts, token %d, data %v)",
							index[a[i].ID], a[i].Attempts, index[b[i].ID], b[i].Attempts, b[i].Token, b[i].Data())
					}
				}
				refClaims, webClaims = append(refClaims, a...), append(webClaims, b...)
			},
			"complete by id": func(rt *rapid.T) {
				if a, b, _, ok := job(rt); ok {
					_, errB := c.Complete(ctx, name, b)
					same(rt, "complete", q.Complete(a), errB)
				}
			},
			"complete by token": func(rt *rapid.T) {
				if a, b, ok := claim(rt); ok {
					_, errB := c.CompleteClaim(ctx, name, b)
					same(rt, "complete by token", q.CompleteClaim(a), errB)
				}
			},
			"fail by id": func(rt *rapid.T) {
				if a, b, _, ok := job(rt); ok {
					_, errB := c.Fail(ctx, name, b, "boom")
					same(rt, "fail", q.Fail(a, "boom"), errB)
				}
			},
			"fail by token": func(rt *rapid.T) {
				if a, b, ok := claim(rt); ok {
					_, errB := c.FailClaim(ctx, name, b, "lost")
					same(rt, "fail by token", q.FailClaim(a, "lost"), errB)
				}
			},
			"extend by token": func(rt *rapid.T) {
				if a, b, ok := claim(rt); ok {
					_, errA := q.ExtendClaim(a, 2*time.Hour)
					_, errB := c.ExtendClaim(ctx, name, b, 2*time.Hour)
					same(rt, "extend by token", errA, errB)
				}
			},
			"release": func(rt *rapid.T) {
				if a, b, _, ok := job(rt); ok {
					_, errB := c.Release(ctx, name, b)
					same(rt, "release", q.Release(a), errB)
				}
			},
			"retry": func(rt *rapid.T) {
				if a, b, _, ok := job(rt); ok {
					_, errB := c.Retry(ctx, name, b)
					same(rt, "retry", q.Retry(a), errB)
				}
			},
			"cancel": func(rt *rapid.T) {
				if a, b, _, ok := job(rt); ok {
					same(rt, "cancel", q.Cancel(a), c.Cancel(ctx, name, b))
				}
			},
			"lookup": func(rt *rapid.T) {
				if a, b, i, ok := job(rt); ok {
					ja, errA := q.Lookup(a)
					jb, errB := c.Lookup(ctx, name, b)
					same(rt, "lookup", errA, errB)
					if errA == nil && (ja.State != jb.State || ja.Attempts != jb.Attempts || ja.LastError != jb.LastError ||
						(ja.Token == 0) != (jb.Token == 0) || jb.Data()["i"] != int64(i)) {
						rt.Fatalf("lookup of job %d: the queue has %v/%d/%q, the client %v/%d/%q (data %v)",
							i, ja.State, ja.Attempts, ja.LastError, jb.State, jb.Attempts, jb.LastError, jb.Data())
					}
				}
			},
			"": func(rt *rapid.T) {
				a, err := q.Counts()
				if err != nil {
					rt.Fatal(err)
				}
				b, err := c.Queue(ctx, name)
				if err != nil {
					rt.Fatal(err)
				}
				if a.Pending != b.Pending || a.Claimed != b.Claimed || a.Done != b.Done || a.Dead != b.Dead || a.Scheduled != b.Scheduled {
					rt.Fatalf("counts: the queue has %+v, the client %+v", a, b)
				}
			},
		})
	})
}
