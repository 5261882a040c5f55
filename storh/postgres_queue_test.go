package storh_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Two processes claim from one queue at the same time: while the first
// holds its claim in an open transaction, the second takes the next job
// (SKIP LOCKED) instead of waiting for the first to end. Were claims to
// take turns, the first would wait for the second forever and the test
// would fail on its timeout.
func TestPostgresClaimsSideBySide(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openPostgres(t, url), openPostgres(t, url)
	qa, err := a.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := qa.EnqueueMany([]any{storh.Map{"n": 1}, storh.Map{"n": 2}, storh.Map{"n": 3}})
	if err != nil {
		t.Fatal(err)
	}
	qb, err := b.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}

	type claim struct {
		id  uuidv7.UUID
		err error
	}
	second := make(chan claim, 1)
	var first uuidv7.UUID
	err = a.Update(func(tx *storh.Tx) error {
		q, err := tx.Queue("jobs")
		if err != nil {
			return err
		}
		j, err := q.Claim(time.Minute)
		if err != nil {
			return err
		}
		first = j.ID
		go func() {
			j, err := qb.Claim(time.Minute)
			second <- claim{j.ID, err}
		}()
		select {
		case c := <-second:
			second <- c
			return nil
		case <-time.After(time.Minute):
			return errors.New("the second process's claim waited for the first's transaction")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	c := <-second
	if c.err != nil {
		t.Fatal(c.err)
	}
	if first != ids[0] || c.id != ids[1] {
		t.Fatalf("claims took %v and %v; want the two oldest, %v and %v", first, c.id, ids[0], ids[1])
	}
	if n, err := qa.Counts(); err != nil || n != (storh.QueueCounts{Pending: 1, Claimed: 2}) {
		t.Fatalf("Counts = %+v, %v; want 1 pending, 2 claimed", n, err)
	}

	// A transaction that claims beside others, then enqueues, holds the
	// queue alone from the enqueue on; its counters land once, not twice.
	err = a.Update(func(tx *storh.Tx) error {
		q, err := tx.Queue("jobs")
		if err != nil {
			return err
		}
		j, err := q.Claim(time.Minute)
		if err != nil {
			return err
		}
		if err := q.Complete(j.ID); err != nil {
			return err
		}
		_, err = q.Enqueue(storh.Map{"n": 4})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := qb.Counts(); err != nil || n != (storh.QueueCounts{Pending: 1, Claimed: 2, Done: 1}) {
		t.Fatalf("Counts = %+v, %v; want 1 pending, 2 claimed, 1 done", n, err)
	}
	rep, err := b.Verify(func(p storh.Problem) { t.Errorf("Verify: %v", p) })
	if err != nil || rep.Problems != 0 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}

// Workers in two processes claim, fail, release and complete jobs until
// none is left: every job is completed exactly once, the counters (kept
// in slots by concurrent workers) add up, and Verify finds nothing.
func TestPostgresQueueWorkers(t *testing.T) {
	skipUnderInvariants(t)
	url := pgtest.URL(t)
	dbs := []*storh.DB{openPostgres(t, url), openPostgres(t, url)}
	q0, err := dbs[0].Queue("work", storh.WithMaxAttempts(3))
	if err != nil {
		t.Fatal(err)
	}
	const jobs, workers = 300, 12
	payloads := make([]any, jobs)
	for i := range payloads {
		payloads[i] = storh.Map{"i": i}
	}
	if _, err := q0.EnqueueMany(payloads); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	done := map[uuidv7.UUID]int{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, err := dbs[w%2].Queue("work", storh.WithMaxAttempts(3))
			if err != nil {
				errs <- err
				return
			}
			for n := 0; ; n++ {
				j, err := q.Claim(time.Minute)
				if errors.Is(err, storh.ErrEmpty) {
					return
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d claim: %w", w, err)
					return
				}
				switch n % 5 {
				case 1:
					err = q.Release(j.ID) // back to its place, not an attempt
				case 2:
					err = q.Fail(j.ID, "transient") // back, or dead on the third
				case 3:
					if _, err = q.Extend(j.ID, time.Hour); err == nil {
						err = q.Complete(j.ID)
					}
				default:
					err = q.Complete(j.ID)
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d on job %s: %w", w, j.ID, err)
					return
				}
				if n%5 != 1 && n%5 != 2 {
					mu.Lock()
					done[j.ID]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	counts, err := q0.Counts()
	p, c, d, x := counts.Pending, counts.Claimed, counts.Done, counts.Dead
	if err != nil {
		t.Fatal(err)
	}
	if p != 0 || c != 0 || d != len(done) || d+x != jobs {
		t.Fatalf("Counts = %d pending, %d claimed, %d done, %d dead; %d completed, %d jobs", p, c, d, x, len(done), jobs)
	}
	for id, n := range done {
		if n != 1 {
			t.Errorf("job %s completed %d times", id, n)
		}
		if j, err := q0.Lookup(id); err != nil || j.State != storh.JobDone {
			t.Errorf("completed job %s: %v, %v", id, j.State, err)
		}
	}
	rep, err := dbs[1].Verify(func(p storh.Problem) { t.Errorf("Verify: %v", p) })
	if err != nil || rep.Problems != 0 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}

// A worker in one store claims the oldest job and stops; once its lease
// has ended, a claim in another store takes it back and hands it out
// before the jobs enqueued after it, and a claim of two takes it with the
// next; before then, the other store passes it by. The two stores read one
// clock, which the test moves.
func TestPostgresExpiredLeaseComesBackToAnotherStore(t *testing.T) {
	url := pgtest.URL(t)
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	clock := storh.WithClock(func() time.Time { return time.UnixMilli(now.Load()) })
	a, b := openPostgres(t, url, clock), openPostgres(t, url, clock)
	qa := qOpen(t, a, "jobs")
	ids, err := qa.EnqueueMany([]any{storh.Map{"n": 0}, storh.Map{"n": 1}, storh.Map{"n": 2}, storh.Map{"n": 3}})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := qa.Claim(time.Minute); err != nil || j.ID != ids[0] {
		t.Fatalf("first claim: %v, %v; want job %v", j.ID, err, ids[0])
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	qb := qOpen(t, b, "jobs")
	now.Add(time.Minute.Milliseconds() - 1)
	if j, err := qb.Claim(time.Minute); err != nil || j.ID != ids[1] {
		t.Fatalf("a claim while the lease holds: %v, %v; want job %v", j.ID, err, ids[1])
	}
	qWantCounts(t, qb, 2, 2, 0, 0)
	now.Add(1)
	jobs, err := qb.ClaimMany(2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var got []uuidv7.UUID
	for _, j := range jobs {
		got = append(got, j.ID)
	}
	if len(got) != 2 || got[0] != ids[0] || got[1] != ids[2] {
		t.Fatalf("ClaimMany(2) once the lease ended: %v; want %v and %v", got, ids[0], ids[2])
	}
	if jobs[0].Attempts != 2 || jobs[0].LastError != "lease expired" {
		t.Errorf("the job taken back: %d attempts, last error %q; want 2, \"lease expired\"", jobs[0].Attempts, jobs[0].LastError)
	}
	qWantCounts(t, qb, 1, 3, 0, 0)
	rep, err := b.Verify(func(p storh.Problem) { t.Errorf("Verify: %v", p) })
	if err != nil || rep.Problems != 0 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}

// A store remembers a collection's kind by its bucket's identity: one
// dropped and created again as another kind by another process is seen
// as what it is now.
func TestPostgresKindAfterRecreate(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openPostgres(t, url), openPostgres(t, url)
	docs, err := a.Docs("x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := docs.Put(storh.Map{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if n, err := docs.Count(); err != nil || n != 1 {
		t.Fatalf("Count = %d, %v", n, err)
	}
	if err := b.Drop("x"); err != nil {
		t.Fatal(err)
	}
	log, err := b.Log("x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.Put(storh.Map{"n": 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := docs.Count(); !errors.Is(err, storh.ErrWrongKind) {
		t.Fatalf("Count through the docs handle of what is now a log: %v, want ErrWrongKind", err)
	}
	if _, err := a.Log("x"); err != nil {
		t.Fatalf("Log(x) in the first store: %v", err)
	}
}

// Workers in two stores complete the same claimed jobs with CompleteMany,
// each its batches in another order: each job is completed once, by one
// of them (their counts add up to the jobs), the counters and Verify
// agree, and the batches, which lock their jobs in key order, never
// deadlock (no rerun).
func TestPostgresCompleteManyAcrossStores(t *testing.T) {
	skipUnderInvariants(t)
	url := pgtest.URL(t)
	dbs := []*storh.DB{openPostgres(t, url), openPostgres(t, url)}
	q0 := qOpen(t, dbs[0], "work")
	const jobs, batch = 240, 40
	payloads := make([]any, jobs)
	for i := range payloads {
		payloads[i] = storh.Map{"i": i}
	}
	if _, err := q0.EnqueueMany(payloads); err != nil {
		t.Fatal(err)
	}
	claimed, err := q0.ClaimMany(jobs, time.Hour)
	if err != nil || len(claimed) != jobs {
		t.Fatalf("ClaimMany(%d) = %d jobs, %v", jobs, len(claimed), err)
	}
	ids := make([]uuidv7.UUID, jobs)
	for i, j := range claimed {
		ids[i] = j.ID
	}
	const workers = 4
	var completed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		// Worker w walks the ids from its own start, forwards or
		// backwards: every pair of workers meets on jobs in opposite
		// orders.
		order := make([]uuidv7.UUID, jobs)
		for i := range order {
			k := (i + w*jobs/workers) % jobs
			if w%2 == 1 {
				k = jobs - 1 - k
			}
			order[i] = ids[k]
		}
		q := qOpen(t, dbs[w%2], "work")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < jobs; i += batch {
				n, err := q.CompleteMany(order[i : i+batch])
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				completed.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := completed.Load(); n != jobs {
		t.Errorf("the workers completed %d jobs; want %d, each once", n, jobs)
	}
	qWantCounts(t, q0, 0, 0, jobs, 0)
	for i, db := range dbs {
		if s, err := db.Stats(); err != nil || s.Reruns != 0 {
			t.Errorf("store %d ran %d transactions again (%v); batches that lock in key order never deadlock", i, s.Reruns, err)
		}
	}
	rep, err := dbs[1].Verify(func(p storh.Problem) { t.Errorf("Verify: %v", p) })
	if err != nil || rep.Problems != 0 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}
