package storh_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The queue concurrency tests run on the real clock: many workers claim
// through group commits, and the claims are checked afterwards from the
// times the queue itself gave them.

// qDelivery is one claim as a worker got it, and when the call returned.
type qDelivery struct {
	storh.Job
	returned time.Time
}

// qDeliveries records every claim of every job, and every successful
// completion.
type qDeliveries struct {
	mu        sync.Mutex
	claims    map[uuidv7.UUID][]qDelivery
	completed map[uuidv7.UUID]int
	errs      []error
	total     atomic.Int64 // successful completions
}

func newQDeliveries() *qDeliveries {
	return &qDeliveries{claims: map[uuidv7.UUID][]qDelivery{}, completed: map[uuidv7.UUID]int{}}
}

// claimed records jobs a claim call has just returned.
func (d *qDeliveries) claimed(jobs ...storh.Job) {
	returned := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, j := range jobs {
		d.claims[j.ID] = append(d.claims[j.ID], qDelivery{j, returned})
	}
}

func (d *qDeliveries) done(ids ...uuidv7.UUID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		d.completed[id]++
	}
	d.total.Add(int64(len(ids)))
}

func (d *qDeliveries) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.errs) < 10 {
		d.errs = append(d.errs, err)
	}
}

// check asserts that every job of want was completed exactly once, and
// that no job was claimed again while an earlier claim's lease held: the
// claims of a job, in attempt order, each came back to its worker after
// the lease end of the one before. (The claim's own Changed is not used:
// it is read from the clock before the claim waits for its commit, see
// TestQueueClaimTimeIsCommitTime.)
func (d *qDeliveries) check(t *testing.T, want []uuidv7.UUID, maxClaims int) {
	t.Helper()
	for _, err := range d.errs {
		t.Error(err)
	}
	if len(d.claims) != len(want) {
		t.Errorf("%d jobs claimed; want %d", len(d.claims), len(want))
	}
	bad := 0
	for _, id := range want {
		cs := d.claims[id]
		if d.completed[id] != 1 {
			bad++
			if bad <= 5 {
				t.Errorf("job %v completed %d times; want once", id, d.completed[id])
			}
		}
		if len(cs) == 0 || len(cs) > maxClaims {
			bad++
			if bad <= 5 {
				t.Errorf("job %v claimed %d times; want 1 to %d", id, len(cs), maxClaims)
			}
			continue
		}
		slices.SortFunc(cs, func(a, b qDelivery) int { return a.Attempts - b.Attempts })
		for i, c := range cs {
			if c.Attempts != i+1 || c.State != storh.JobClaimed {
				bad++
				if bad <= 5 {
					t.Errorf("job %v: claim %d is %v with attempt %d (two claims of one attempt: delivered twice)", id, i+1, c.State, c.Attempts)
				}
				break
			}
			if i > 0 && c.returned.Before(cs[i-1].LeaseUntil) {
				bad++
				if bad <= 5 {
					t.Errorf("job %v claimed again (returned at %v) while the lease of claim %d held until %v", id, c.returned, i, cs[i-1].LeaseUntil)
				}
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d problems in all", bad)
	}
}

func qEnqueueN(t *testing.T, q *storh.Queue, n int) []uuidv7.UUID {
	t.Helper()
	var out []uuidv7.UUID
	for len(out) < n {
		items := make([]any, min(1000, n-len(out)))
		for i := range items {
			items[i] = storh.Map{"i": len(out) + i}
		}
		ids, err := q.EnqueueMany(items)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ids...)
	}
	return out
}

// TestQueueConcurrentClaimOnce: 16 workers claim (Claim and ClaimMany)
// and complete (Complete and CompleteMany) every job, with leases that do
// not end: each job is delivered once and completed once.
func TestQueueConcurrentClaimOnce(t *testing.T) {
	n := 10_000
	if smallRun() {
		n = 1_000
	}
	db := openTemp(t)
	q := qOpen(t, db, "q")
	want := qEnqueueN(t, q, n)
	d := newQDeliveries()
	const workers = 16
	within(t, 2*time.Minute, func() {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 42))
				for {
					var jobs []storh.Job
					var err error
					if rng.IntN(2) == 0 {
						var j storh.Job
						if j, err = q.Claim(time.Hour); err == nil {
							jobs = []storh.Job{j}
						}
					} else {
						jobs, err = q.ClaimMany(1+rng.IntN(8), time.Hour)
					}
					if errors.Is(err, storh.ErrEmpty) {
						return // nothing pending, and no lease ends: all taken
					}
					if err != nil {
						d.fail(err)
						return
					}
					d.claimed(jobs...)
					if rng.IntN(2) == 0 {
						for _, j := range jobs {
							if err := q.Complete(j.ID); err != nil {
								d.fail(fmt.Errorf("Complete(%v) of a job this worker holds: %w", j.ID, err))
								continue
							}
							d.done(j.ID)
						}
						continue
					}
					ids := make([]uuidv7.UUID, len(jobs))
					for i, j := range jobs {
						ids[i] = j.ID
					}
					c, err := q.CompleteMany(ids)
					if err != nil || c != len(ids) {
						d.fail(fmt.Errorf("CompleteMany of %d jobs this worker holds = %d, %v", len(ids), c, err))
						continue
					}
					d.done(ids...)
				}
			}()
		}
		wg.Wait()
	})
	d.check(t, want, 1)
	if got := d.total.Load(); got != int64(n) {
		t.Errorf("%d completions; want %d", got, n)
	}
	qWantCounts(t, q, 0, 0, n, 0)
	if done := qJobIDs(t, q, storh.JobDone); len(done) != n {
		t.Errorf("Jobs(done) lists %d; want %d", len(done), n)
	}
}

// TestQueueConcurrentAbandonedClaims: workers drop a tenth of their
// first claims without a word, as a crashed worker would; those jobs come
// back when their short lease ends, and only then.
func TestQueueConcurrentAbandonedClaims(t *testing.T) {
	n := 2_000
	if smallRun() {
		n = 400
	}
	db := openTemp(t)
	q := qOpen(t, db, "q", storh.WithMaxAttempts(1000))
	want := qEnqueueN(t, q, n)
	d := newQDeliveries()
	const workers = 16
	const lease = 25 * time.Millisecond
	within(t, 2*time.Minute, func() {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 7))
				for d.total.Load() < int64(n) {
					var jobs []storh.Job
					var err error
					if rng.IntN(2) == 0 {
						var j storh.Job
						if j, err = q.Claim(lease); err == nil {
							jobs = []storh.Job{j}
						}
					} else {
						jobs, err = q.ClaimMany(1+rng.IntN(4), lease)
					}
					if errors.Is(err, storh.ErrEmpty) {
						time.Sleep(time.Millisecond) // abandoned claims come back at their lease end
						continue
					}
					if err != nil {
						d.fail(err)
						return
					}
					d.claimed(jobs...)
					for _, j := range jobs {
						if j.Attempts == 1 && rng.IntN(10) == 0 {
							continue // abandoned
						}
						// A worker slower than its lease may find its job
						// completed by the next holder, or complete the
						// next holder's claim: a job is still done once.
						err := q.Complete(j.ID)
						switch {
						case err == nil:
							d.done(j.ID)
						case errors.Is(err, storh.ErrNotClaimed):
						default:
							d.fail(err)
						}
					}
				}
			}()
		}
		wg.Wait()
	})
	d.check(t, want, 1000)
	again := 0
	for _, cs := range d.claims {
		if len(cs) > 1 {
			again++
		}
	}
	if again < n/20 {
		t.Errorf("only %d jobs were claimed again; about a tenth were abandoned", again)
	}
	qWantCounts(t, q, 0, 0, n, 0)
}

// TestQueueConcurrentProducersAndWaiters: producers enqueue (one by one,
// in batches, and in transactions) while consumers wait in ClaimWait; every
// job reaches one consumer once.
func TestQueueConcurrentProducersAndWaiters(t *testing.T) {
	perProducer := 500
	if smallRun() {
		perProducer = 100
	}
	const producers, consumers = 4, 8
	total := producers * perProducer
	db := openTemp(t)
	q := qOpen(t, db, "q")
	d := newQDeliveries()
	var produced sync.Map // id → "p/k"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	within(t, 2*time.Minute, func() {
		var cw sync.WaitGroup
		for range consumers {
			cw.Add(1)
			go func() {
				defer cw.Done()
				for {
					j, err := q.ClaimWait(ctx, time.Hour)
					if err != nil {
						if !errors.Is(err, context.Canceled) {
							d.fail(err)
						}
						return
					}
					d.claimed(j)
					if err := q.Complete(j.ID); err != nil {
						d.fail(err)
						continue
					}
					if d.completedAndCount(j.ID) == int64(total) {
						cancel()
					}
				}
			}()
		}
		var pw sync.WaitGroup
		// A producer that fails stops the consumers: they would wait for
		// its jobs forever.
		pfail := func(err error) { d.fail(err); cancel() }
		for p := range producers {
			pw.Add(1)
			go func() {
				defer pw.Done()
				rng := rand.New(rand.NewPCG(uint64(p), 3))
				for k := 0; k < perProducer; {
					switch batch := min(perProducer-k, 1+rng.IntN(5)); rng.IntN(3) {
					case 0:
						id, err := q.Enqueue(storh.Map{"p": p, "k": k})
						if err != nil {
							pfail(err)
							return
						}
						produced.Store(id, fmt.Sprintf("%d/%d", p, k))
						k++
					case 1:
						items := make([]any, batch)
						for i := range items {
							items[i] = storh.Map{"p": p, "k": k + i}
						}
						ids, err := q.EnqueueMany(items)
						if err != nil {
							pfail(err)
							return
						}
						for i, id := range ids {
							produced.Store(id, fmt.Sprintf("%d/%d", p, k+i))
						}
						k += batch
					default:
						var ids []uuidv7.UUID
						err := db.Update(func(tx *storh.Tx) error {
							ids = ids[:0]
							tq, err := tx.Queue("q")
							if err != nil {
								return err
							}
							for i := range batch {
								id, err := tq.Enqueue(storh.Map{"p": p, "k": k + i})
								if err != nil {
									return err
								}
								ids = append(ids, id)
							}
							return nil
						})
						if err != nil {
							pfail(err)
							return
						}
						for i, id := range ids {
							produced.Store(id, fmt.Sprintf("%d/%d", p, k+i))
						}
						k += batch
					}
					if rng.IntN(8) == 0 {
						time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // let the consumers drain and wait
					}
				}
			}()
		}
		pw.Wait()
		cw.Wait()
	})
	var want []uuidv7.UUID
	produced.Range(func(k, _ any) bool { want = append(want, k.(uuidv7.UUID)); return true })
	if len(want) != total {
		t.Fatalf("%d jobs produced; want %d", len(want), total)
	}
	d.check(t, want, 1)
	// Each consumer got the payload its producer wrote.
	for id, cs := range d.claims {
		v, _ := produced.Load(id)
		if len(cs) > 0 && fmt.Sprintf("%v/%v", cs[0].Data()["p"], cs[0].Data()["k"]) != v {
			t.Errorf("job %v carries %v; produced as %v", id, cs[0].Data(), v)
		}
	}
	qWantCounts(t, q, 0, 0, total, 0)
}

// completedAndCount records one completion of id and returns the total.
func (d *qDeliveries) completedAndCount(id uuidv7.UUID) int64 {
	d.mu.Lock()
	d.completed[id]++
	d.mu.Unlock()
	return d.total.Add(1)
}

// smallRun says to run the concurrency tests at a small size: outside the
// long run (testkit.Long), and under the storh_invariants build, which checks the whole queue at
// every commit (the full size would take minutes there).
func smallRun() bool { return !testkit.Long() || engine.Invariants }
