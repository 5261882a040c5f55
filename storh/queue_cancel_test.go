package storh_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Cancel from each state: a job no worker holds is deleted with its
// payload, counts follow exactly, and its id is free again; a claim whose
// lease holds is ErrClaimed and nothing changes.
func TestQueueCancelFromEachState(t *testing.T) {
	type setup func(t *testing.T, q *storh.Queue, clk *testClock) uuidv7.UUID
	enqueue := func(t *testing.T, q *storh.Queue, _ *testClock) uuidv7.UUID { return qEnqueue(t, q, storh.Map{"k": 1}) }
	claim := func(t *testing.T, q *storh.Queue, clk *testClock) uuidv7.UUID {
		id := enqueue(t, q, clk)
		qClaim(t, q, time.Minute)
		return id
	}
	cases := []struct {
		name  string
		setup setup
		want  error
		// counts before the Cancel: pending, claimed, done, dead
		before [4]int
	}{
		{"pending", enqueue, nil, [4]int{1, 0, 0, 0}},
		{"claimed", claim, storh.ErrClaimed, [4]int{0, 1, 0, 0}},
		{"claimed, lease ending now", func(t *testing.T, q *storh.Queue, clk *testClock) uuidv7.UUID {
			id := claim(t, q, clk)
			clk.Advance(time.Minute - time.Millisecond)
			return id
		}, storh.ErrClaimed, [4]int{0, 1, 0, 0}},
		{"claimed, lease ended", func(t *testing.T, q *storh.Queue, clk *testClock) uuidv7.UUID {
			id := claim(t, q, clk)
			clk.Advance(time.Minute)
			return id
		}, nil, [4]int{0, 1, 0, 0}},
		{"done", func(t *testing.T, q *storh.Queue, clk *testClock) uuidv7.UUID {
			id := claim(t, q, clk)
			if err := q.Complete(id); err != nil {
				t.Fatal(err)
			}
			return id
		}, nil, [4]int{0, 0, 1, 0}},
		{"dead", func(t *testing.T, q *storh.Queue, clk *testClock) uuidv7.UUID {
			id := claim(t, q, clk)
			if err := q.Fail(id, "boom"); err != nil {
				t.Fatal(err)
			}
			return id
		}, nil, [4]int{0, 0, 0, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db, clk, _ := openQueueDB(t)
			q := qOpen(t, db, "q", storh.WithMaxAttempts(1))
			id := c.setup(t, q, clk)
			other := qEnqueue(t, q, storh.Map{"k": "bystander"})
			p, cl, d, x := c.before[0], c.before[1], c.before[2], c.before[3]
			qWantCounts(t, q, p+1, cl, d, x)
			was := qLookup(t, q, id)
			before := digest(t, db)

			err := q.Cancel(id)
			if c.want != nil {
				checkErr(t, err, c.want, `"q"`, id.String())
				if digest(t, db) != before {
					t.Errorf("a refused Cancel changed the store")
				}
				qWantJob(t, q, id, was.State, was.Attempts, was.LastError)
				qWantCounts(t, q, p+1, cl, d, x)
				qVerify(t, db, "a refused Cancel")
				return
			}
			if err != nil {
				t.Fatalf("Cancel of a %s job: %v", c.name, err)
			}
			if _, err := q.Lookup(id); !errors.Is(err, storh.ErrNotFound) {
				t.Errorf("Lookup after Cancel = %v; want ErrNotFound", err)
			}
			qWantCounts(t, q, 1, 0, 0, 0)
			if n := mustCount(t, q); n != 1 {
				t.Errorf("Count after Cancel = %d; want 1", n)
			}
			qVerify(t, db, "Cancel")
			if err := q.Cancel(id); !errors.Is(err, storh.ErrNotFound) {
				t.Errorf("a second Cancel = %v; want ErrNotFound", err)
			}
			// The bystander is the only job a claim hands out.
			if j := qClaim(t, q, time.Minute); j.ID != other {
				t.Errorf("Claim after Cancel = %v; want the bystander %v", j.ID, other)
			}
			if _, err := q.Claim(time.Minute); !errors.Is(err, storh.ErrEmpty) {
				t.Errorf("second Claim after Cancel = %v; want ErrEmpty", err)
			}
			// The id is free: it can be enqueued again, at the end.
			qEnqueueID(t, q, id, storh.Map{"k": 2})
			qWantJob(t, q, id, storh.JobPending, 0, "")
			qVerify(t, db, "enqueueing a cancelled id again")
		})
	}
}

// Cancel on a queue nothing was enqueued to is ErrNotFound and creates
// nothing; inside a transaction it is undone with it.
func TestQueueCancelMissingQueueAndRollback(t *testing.T) {
	db, _, _ := openQueueDB(t)
	empty := qOpen(t, db, "empty")
	before := digest(t, db)
	id := idAt(t, 1_700_000_000_321)
	checkErr(t, empty.Cancel(id), storh.ErrNotFound, `"empty"`, id.String())
	if digest(t, db) != before {
		t.Errorf("Cancel on a queue never enqueued to changed the store")
	}

	q := qOpen(t, db, "q")
	kept := qEnqueue(t, q, storh.Map{"k": 1})
	errRollback := errors.New("roll back")
	err := db.Update(func(tx *storh.Tx) error {
		tq, err := tx.Queue("q")
		if err != nil {
			return err
		}
		if err := tq.Cancel(kept); err != nil {
			return err
		}
		if n, err := tq.Counts(); err != nil || n != (storh.QueueCounts{}) {
			return fmt.Errorf("Counts in the transaction after Cancel = %+v, %v; want none", n, err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Update = %v", err)
	}
	qWantJob(t, q, kept, storh.JobPending, 0, "")
	qWantCounts(t, q, 1, 0, 0, 0)
	qVerify(t, db, "a rolled back Cancel")
}

// A Cancel and a Claim of the same pending job race: exactly one wins.
// Either Cancel returns nil and the claim never hands the job out, or the
// claim has it and Cancel is ErrClaimed. On PostgreSQL the claimer is a
// second DB on the same schema, as a second process would be.
func TestQueueCancelRacesClaim(t *testing.T) {
	db, clk, path := openQueueDB(t)
	claimDB := db
	if onPostgres {
		claimDB = openAt(t, path, storh.WithClock(clk.Now))
	}
	q := qOpen(t, db, "q")
	cq := qOpen(t, claimDB, "q")
	rounds := 200
	if testing.Short() {
		rounds = 50
	}
	wins := map[string]int{}
	for round := range rounds {
		id := qEnqueue(t, q, storh.Map{"round": round})
		var wg sync.WaitGroup
		var cancelErr, claimErr error
		var claimed storh.Job
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			cancelErr = q.Cancel(id)
		}()
		go func() {
			defer wg.Done()
			<-start
			claimed, claimErr = cq.Claim(time.Minute)
		}()
		close(start)
		wg.Wait()
		switch {
		case cancelErr == nil && errors.Is(claimErr, storh.ErrEmpty):
			wins["cancel"]++
			if _, err := q.Lookup(id); !errors.Is(err, storh.ErrNotFound) {
				t.Fatalf("round %d: Cancel won, yet Lookup = %v", round, err)
			}
		case errors.Is(cancelErr, storh.ErrClaimed) && claimErr == nil && claimed.ID == id:
			wins["claim"]++
			qWantJob(t, q, id, storh.JobClaimed, 1, "")
			if err := cq.Complete(id); err != nil {
				t.Fatalf("round %d: Complete: %v", round, err)
			}
		default:
			t.Fatalf("round %d: Cancel = %v, Claim = %v, %v: want exactly one winner", round, cancelErr, claimed.ID, claimErr)
		}
	}
	t.Logf("wins: %v", wins)
	qWantCounts(t, q, 0, 0, wins["claim"], 0)
	qVerify(t, db, "Cancel racing Claim")
}
