package storh_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// A worker loop: claim the oldest pending job, do it, complete it; stop
// when the queue is empty.
func ExampleQueue() {
	db, done := exampleDB()
	defer done()

	type email struct {
		To      string `msgpack:"to"`
		Subject string `msgpack:"subject"`
	}
	jobs, err := db.Queue("emails")
	if err != nil {
		panic(err)
	}
	for _, to := range []string{"ada@example.com", "alan@example.com", "grace@example.com"} {
		if _, err := jobs.Enqueue(email{To: to, Subject: "Welcome"}); err != nil {
			panic(err)
		}
	}

	for {
		job, err := jobs.Claim(time.Minute) // ours for a minute
		if errors.Is(err, storh.ErrEmpty) {
			break
		}
		if err != nil {
			panic(err)
		}
		var e email
		if err := job.Decode(&e); err != nil {
			panic(err)
		}
		fmt.Printf("sending %q to %s (attempt %d)\n", e.Subject, e.To, job.Attempts)
		if err := jobs.Complete(job.ID); err != nil {
			panic(err)
		}
	}
	counts, _ := jobs.Counts()
	fmt.Println("pending", counts.Pending, "claimed", counts.Claimed, "done", counts.Done, "dead", counts.Dead)

	// Done jobs stay until purged: a periodic PurgeDone keeps a day of them.
	n, _ := jobs.PurgeDone(24 * time.Hour)
	fmt.Println("purged", n)
	// Output:
	// sending "Welcome" to ada@example.com (attempt 1)
	// sending "Welcome" to alan@example.com (attempt 1)
	// sending "Welcome" to grace@example.com (attempt 1)
	// pending 0 claimed 0 done 3 dead 0
	// purged 0
}

// ClaimWait blocks until a job is pending: here a producer enqueues one a
// moment later. A context bounds the wait.
func ExampleQueue_ClaimWait() {
	db, done := exampleDB()
	defer done()
	jobs, err := db.Queue("thumbnails")
	if err != nil {
		panic(err)
	}

	go func() {
		time.Sleep(20 * time.Millisecond)
		if _, err := jobs.Enqueue(storh.Map{"image": "cat.png"}); err != nil {
			panic(err)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	job, err := jobs.ClaimWait(ctx, time.Minute)
	if err != nil {
		panic(err)
	}
	fmt.Println("got", job.Data()["image"])
	if err := jobs.Complete(job.ID); err != nil {
		panic(err)
	}

	// Nothing else comes: the wait ends with the context.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err = jobs.ClaimWait(ctx, time.Minute)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// got cat.png
	// true
}

// A job that keeps failing ends in the dead letters, with the reason of
// its last failure; Retry gives it another round.
func ExampleQueue_Fail() {
	db, done := exampleDB()
	defer done()
	jobs, err := db.Queue("payments", storh.WithMaxAttempts(2))
	if err != nil {
		panic(err)
	}
	id, err := jobs.Enqueue(storh.Map{"amount": 42})
	if err != nil {
		panic(err)
	}

	for _, reason := range []string{"card declined", "card declined again"} {
		job, err := jobs.Claim(time.Minute)
		if err != nil {
			panic(err)
		}
		if err := jobs.Fail(job.ID, reason); err != nil {
			panic(err)
		}
		job, _ = jobs.Lookup(id)
		fmt.Println(job.State, job.Attempts, job.LastError)
	}
	_, err = jobs.Claim(time.Minute)
	fmt.Println("claim:", errors.Is(err, storh.ErrEmpty))

	for job, err := range jobs.Jobs(storh.JobDead) {
		if err != nil {
			panic(err)
		}
		fmt.Println("dead letter:", job.ID == id, job.LastError)
	}

	if err := jobs.Retry(id); err != nil {
		panic(err)
	}
	job, _ := jobs.Lookup(id)
	fmt.Println(job.State, job.Attempts)
	// Output:
	// pending 1 card declined
	// dead 2 card declined again
	// claim: true
	// dead letter: true card declined again
	// pending 0
}

// Jobs lists the jobs of one state: pending ones in the order claims take
// them (enqueue order, whatever their ids), claimed ones by lease end.
func ExampleQueue_Jobs() {
	db, done := exampleDB()
	defer done()
	jobs, err := db.Queue("reports")
	if err != nil {
		panic(err)
	}
	names := map[uuidv7.UUID]string{}
	for _, name := range []string{"daily", "weekly", "monthly", "yearly"} {
		id, err := jobs.Enqueue(storh.Map{"name": name})
		if err != nil {
			panic(err)
		}
		names[id] = name
	}
	// Two claims: the longer lease first.
	if _, err := jobs.Claim(time.Hour); err != nil {
		panic(err)
	}
	if _, err := jobs.Claim(time.Minute); err != nil {
		panic(err)
	}

	for _, state := range []storh.JobState{storh.JobPending, storh.JobClaimed} {
		fmt.Print(state, ":")
		for job, err := range jobs.Jobs(state) {
			if err != nil {
				panic(err)
			}
			// Listings carry no payload; Lookup reads one.
			fmt.Print(" ", names[job.ID])
		}
		fmt.Println()
	}
	// Output:
	// pending: monthly yearly
	// claimed: weekly daily
}

// WithMaxAttempts sets how many claims a job gets. An expired lease uses
// an attempt, as a failure does (a crashed worker's job does not come back
// forever); Release gives the claim back without using one.
func ExampleWithMaxAttempts() {
	db, done := exampleDB()
	defer done()
	jobs, err := db.Queue("fragile", storh.WithMaxAttempts(1))
	if err != nil {
		panic(err)
	}
	id, err := jobs.Enqueue(storh.Map{"task": "resize"})
	if err != nil {
		panic(err)
	}

	// Released: the attempt does not count.
	job, _ := jobs.Claim(time.Minute)
	if err := jobs.Release(job.ID); err != nil {
		panic(err)
	}
	job, _ = jobs.Lookup(id)
	fmt.Println(job.State, job.Attempts)

	// A lease that ends uses the one attempt: dead.
	if _, err := jobs.Claim(time.Millisecond); err != nil {
		panic(err)
	}
	time.Sleep(5 * time.Millisecond)
	n, _ := jobs.RequeueExpired()
	job, _ = jobs.Lookup(id)
	fmt.Println(n, job.State, job.Attempts, job.LastError)

	_, err = db.Docs("users", storh.WithMaxAttempts(3))
	fmt.Println(errors.Is(err, storh.ErrInvalidOption))
	// Output:
	// pending 0
	// 1 dead 1 lease expired
	// true
}

// A job scheduled for later is not claimed before it is due, and counts as
// Scheduled until then. The database's clock decides (WithClock); here it
// is a fixed one that the example moves on by hand.
func ExampleQueue_EnqueueAt() {
	dir, err := os.MkdirTemp("", "storh-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	now := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	db, err := storh.Open(filepath.Join(dir, "app.db"), storh.WithClock(func() time.Time { return now }))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	jobs, err := db.Queue("reminders")
	if err != nil {
		panic(err)
	}
	if _, err := jobs.EnqueueAt(now.Add(time.Hour), storh.Map{"say": "stand up"}); err != nil {
		panic(err)
	}
	if _, err := jobs.Enqueue(storh.Map{"say": "good morning"}); err != nil {
		panic(err)
	}
	counts, _ := jobs.Counts()
	fmt.Println(counts.Pending, "pending,", counts.Scheduled, "scheduled")

	job, _ := jobs.Claim(time.Minute)
	fmt.Println(job.Data()["say"])
	jobs.Complete(job.ID)
	_, err = jobs.Claim(time.Minute)
	fmt.Println(errors.Is(err, storh.ErrEmpty)) // the reminder is not due yet

	now = now.Add(time.Hour)
	job, _ = jobs.Claim(time.Minute)
	fmt.Println(job.Data()["say"], "at", job.Due.Format("15:04"))
	// Output:
	// 1 pending, 1 scheduled
	// good morning
	// true
	// stand up at 10:00
}

// A worker whose lease ended while another claim took its job cannot
// complete it by mistake: CompleteClaim names the claim by the Job's Token,
// and only the claim that holds the job completes it.
func ExampleQueue_CompleteClaim() {
	dir, err := os.MkdirTemp("", "storh-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	now := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	db, err := storh.Open(filepath.Join(dir, "app.db"), storh.WithClock(func() time.Time { return now }))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	jobs, err := db.Queue("reports")
	if err != nil {
		panic(err)
	}
	if _, err := jobs.Enqueue(storh.Map{"month": "2029-12"}); err != nil {
		panic(err)
	}

	slow, _ := jobs.Claim(time.Minute)
	now = now.Add(2 * time.Minute) // slow's lease ended: the next claim takes the job back
	fast, _ := jobs.Claim(time.Minute)
	fmt.Println(slow.ID == fast.ID, slow.Token != fast.Token)

	_, err = jobs.ExtendClaim(slow, time.Minute) // slow learns it lost the job
	fmt.Println(errors.Is(err, storh.ErrNotClaimed))
	fmt.Println(errors.Is(jobs.CompleteClaim(slow), storh.ErrNotClaimed))
	fmt.Println(jobs.CompleteClaim(fast))
	// Output:
	// true true
	// true
	// true
	// <nil>
}

// A failed job waits before its next attempt: 1s after its first failure,
// 2s after its second, … capped at a minute, each ±20% so that jobs that
// failed together spread out. The database's clock decides (WithClock);
// here it is a fixed one that the example moves on by hand. The options
// are stored with the queue: every handle and process applies them, and
// SetQueueOptions changes them.
func ExampleWithBackoff() {
	dir, err := os.MkdirTemp("", "storh-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	now := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	db, err := storh.Open(filepath.Join(dir, "app.db"), storh.WithClock(func() time.Time { return now }))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	jobs, err := db.Queue("webhooks", storh.WithMaxAttempts(3), storh.WithBackoff(time.Second, time.Minute))
	if err != nil {
		panic(err)
	}
	id, err := jobs.Enqueue(storh.Map{"url": "https://example.com/hook"})
	if err != nil {
		panic(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		job, _ := jobs.Claim(time.Minute)
		jobs.FailClaim(job, "503 from the peer")
		job, _ = jobs.Lookup(id)
		wait := job.Due.Sub(now)
		fmt.Println("attempt", attempt, "failed; waits about", wait.Round(time.Second))
		_, err := jobs.Claim(time.Minute)
		fmt.Println("claimable at once:", !errors.Is(err, storh.ErrEmpty))
		now = job.Due
	}

	// Another handle gets the stored options; one that differs is refused.
	_, err = db.Queue("webhooks", storh.WithMaxAttempts(5))
	fmt.Println(errors.Is(err, storh.ErrInvalidOption))
	if err := db.SetQueueOptions("webhooks", storh.WithMaxAttempts(5)); err != nil {
		panic(err)
	}
	opts, _, _ := db.QueueOptions("webhooks")
	fmt.Println(opts.MaxAttempts, opts.BackoffMin, opts.BackoffMax)
	// Output:
	// attempt 1 failed; waits about 1s
	// claimable at once: false
	// attempt 2 failed; waits about 2s
	// claimable at once: false
	// true
	// 5 1s 1m0s
}
