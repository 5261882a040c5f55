package storh

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/storhdb/storh-go/storh/internal/api"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Queue is a durable job queue in the database file, for handing work from
// producers to worker goroutines. A job is a payload (a map or a struct, as
// a record's data) under a UUIDv7 id, and a state: pending, claimed (leased
// to one worker until its lease ends), done, or dead.
//
//   - Enqueue adds a pending job at the end of the enqueue order; EnqueueAt
//     adds one that no claim takes before a given time.
//   - Claim leases the pending job due first, ties in enqueue order (not id
//     order: a job enqueued with an explicit older id still waits its
//     turn).
//   - Cancel deletes a job no worker holds; a held claim is ErrClaimed.
//   - Complete ends a claim in success; Fail ends it in failure, and the job
//     is pending again (after a backoff, with WithBackoff), or dead once it
//     has used its attempts (WithMaxAttempts, default DefaultMaxAttempts).
//     Both are stored with the queue (SetQueueOptions). Release gives a claim
//     back without using an attempt; Extend prolongs a lease.
//   - A claim whose lease ended is pending again at the next Claim (or
//     RequeueExpired): the jobs of a crashed worker are never lost. A job
//     that comes back to pending, by Release, Fail or an expired lease,
//     takes back its own place in the order, ahead of every job enqueued
//     after it.
//
// An attempt is a claim: Attempts counts the claims of the job that were not
// released, so a job whose worker keeps crashing dies like one that keeps
// failing. Every operation is durable when it returns; on a DB-level handle
// concurrent single operations share commits, as Puts do. Claims in one
// process never hand a job to two workers while its lease holds.
//
// The id-based calls (Complete, Fail, Extend) act on whatever claim the
// job has: a worker that lets its lease end may find its job claimed by
// another, and its Complete then completes the other's claim. Their token
// forms (CompleteClaim, FailClaim, ExtendClaim) take the Job a claim
// returned and act only while that claim holds: Job.Token names it.
type Queue struct {
	c coll
	// rule is the handle's options' rule, filled: what its operations
	// apply on a queue that stores none (created before rules were
	// stored). A stored rule wins, read in each operation's transaction.
	rule engine.QueueRule
}

// DefaultMaxAttempts is how many claims a job gets when the handle that
// created the queue gave no WithMaxAttempts (and SetQueueOptions set none
// since).
const DefaultMaxAttempts = 5

// The engine fills a stored rule with its own default: the two must agree
// (a constant that does not fit a uint fails the build).
const _ = uint(DefaultMaxAttempts-engine.DefaultMaxAttempts) + uint(engine.DefaultMaxAttempts-DefaultMaxAttempts)

// JobState is where a job is in its life: JobPending (waiting to be
// claimed), JobClaimed (leased to a worker until its lease ends), JobDone
// (completed, kept until purged) or JobDead (failed its last allowed
// attempt). Its String method gives "pending", "claimed", "done" or "dead".
type JobState = api.JobState

// The states of a job.
const (
	JobPending = api.JobPending
	JobClaimed = api.JobClaimed
	JobDone    = api.JobDone
	JobDead    = api.JobDead
)

// Job is a job as a claim (or Lookup) returned it: the record of its
// payload (ID, Time, Data, Decode…) and its state at that moment.
type Job struct {
	Record
	State      JobState
	Attempts   int       // claims not given back with Release, this one included
	LeaseUntil time.Time // while claimed: when the lease ends
	Changed    time.Time // when the job last changed state
	LastError  string    // the reason of the last Fail, or "lease expired"
	// Due is when the job could first be claimed: when it was enqueued,
	// the time EnqueueAt gave, or, after a Fail with a backoff, the end of
	// the backoff. It is kept while the job is claimed, as its place
	// among the pending jobs. Zero for a job enqueued by a storh from
	// before due times, which was due at once.
	Due time.Time
	// Token names the claim, while the job is claimed: a number each claim
	// draws at random and stores with the job. CompleteClaim, FailClaim
	// and ExtendClaim act only while the claim that drew it holds. Zero
	// when the job is not claimed.
	Token uint64
}

// QueueStats is a queue's statistics: its collection's, and its jobs by
// state.
type QueueStats struct {
	CollectionInfo
	// Pending counts the jobs due, Scheduled those not due yet (see
	// QueueCounts).
	Pending, Scheduled, Claimed, Done, Dead int
}

func newQueue(c coll, opts []CollectionOption) (*Queue, error) {
	cfg, err := collOptions(engine.KindQueue, opts)
	if err != nil {
		return nil, err
	}
	return &Queue{c: c, rule: cfg.queueRule().Filled()}, nil
}

func newJob(j engine.Job) Job {
	out := Job{Record: Record{ID: j.ID, payload: j.Payload}, State: j.State, Attempts: j.Attempts,
		Changed: time.UnixMilli(j.Changed).UTC(), LastError: j.Reason}
	if j.State == api.JobClaimed {
		out.LeaseUntil = time.UnixMilli(j.LeaseUntil).UTC()
		out.Token = j.Claim
	}
	if j.Due > 0 {
		out.Due = time.UnixMilli(j.Due).UTC()
	}
	return out
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.c.name }

// Count returns the number of jobs in the queue, in every state.
func (q *Queue) Count() (int, error) { return q.c.Count() }

func (q *Queue) now() int64 { return q.c.db.eng.Now().UnixMilli() }

// do runs fn on the queue: in the handle's transaction, or as one op of a
// group commit. Every fn reads the clock itself, inside the transaction: an
// op that waited for its commit must not be stamped with the time it was
// called (a lease handed out already over, a claim dated before the requeue
// that freed its job). Only an enqueue creates the queue: on a queue not in the
// file the other operations fail with missing, and change nothing.
func (q *Queue) do(op, id string, missing error, fn func(*engine.Tx, *engine.Coll) error) error {
	return q.run(op, id, missing, engine.HoldAlone, fn)
}

// doMoving is do for an operation that only moves jobs between states
// (claims, completions, failures, extensions, releases, requeues): on a
// store shared by many processes it runs beside the others' and locks
// the jobs it moves, so that workers do not take turns (see
// engine.HoldMoving).
func (q *Queue) doMoving(op, id string, missing error, fn func(*engine.Tx, *engine.Coll) error) error {
	return q.run(op, id, missing, engine.HoldMoving, fn)
}

func (q *Queue) run(op, id string, missing error, hold engine.Hold, fn func(*engine.Tx, *engine.Coll) error) error {
	create := missing == nil && hold != engine.HoldMoving
	guarded := func(etx *engine.Tx, ec *engine.Coll) error {
		if ec == nil {
			return missing
		}
		return fn(etx, ec)
	}
	var err error
	if q.c.tx != nil {
		if err = q.c.tx.usable(true); err == nil {
			err = q.c.inTxUse(create, hold, guarded)
		}
	} else {
		err = q.c.submitOp(create, hold, guarded)
	}
	return opErr("queue "+op, q.c.name, id, -1, err)
}

// noJob is the error of an operation on a job of a queue not in the file.
func noJob(id uuidv7.UUID) error { return fmt.Errorf("%w: no job %s", ErrNotFound, id) }

// batch runs fn on the queue in one transaction of its own (or the
// handle's): many jobs, all or nothing.
// With create a missing queue is made; without, fn is not called for it.
func (q *Queue) batch(op string, create bool, fn func(*engine.Tx, *engine.Coll) error) error {
	return q.batchUse(op, create, engine.HoldAlone, fn)
}

// batchMoving is batch for jobs that only move between states (see
// doMoving).
func (q *Queue) batchMoving(op string, fn func(*engine.Tx, *engine.Coll) error) error {
	return q.batchUse(op, false, engine.HoldMoving, fn)
}

func (q *Queue) batchUse(op string, create bool, hold engine.Hold, fn func(*engine.Tx, *engine.Coll) error) error {
	c := &q.c
	guarded := func(etx *engine.Tx, ec *engine.Coll) error {
		if ec == nil {
			return nil
		}
		return fn(etx, ec)
	}
	var err error
	if c.tx != nil {
		if err = c.tx.usable(true); err == nil {
			err = c.inTxUse(create, hold, guarded)
		}
	} else {
		err = c.updateUse(create, hold, guarded)
	}
	return opErr("queue "+op, c.name, "", -1, err)
}

// Enqueue adds a pending job with payload (a map or a struct) under a new
// id from the queue's generator, and returns the id.
func (q *Queue) Enqueue(payload any) (uuidv7.UUID, error) {
	value, err := engine.AppendValue(nil, payload)
	if err != nil {
		return uuidv7.UUID{}, opErr("queue enqueue", q.c.name, "", -1, err)
	}
	id := q.c.newID()
	if err := checkID(id, true); err != nil {
		return uuidv7.UUID{}, opErr("queue enqueue", q.c.name, id.String(), -1, err)
	}
	return id, q.enqueue(id, value, -1)
}

// EnqueueAt adds a pending job with payload under a new id, as Enqueue,
// that no claim takes before at, by the database's clock (WithClock): it
// counts as Scheduled until then. Among the jobs that are due, the one due
// first is claimed first, ties in enqueue order, so a time in the past
// puts the job ahead of every job due after it. ClaimWait wakes when it
// becomes due. The zero time is ErrInvalidOption.
func (q *Queue) EnqueueAt(at time.Time, payload any) (uuidv7.UUID, error) {
	due, err := dueMs("EnqueueAt", at)
	if err != nil {
		return uuidv7.UUID{}, opErr("queue enqueue", q.c.name, "", -1, err)
	}
	value, err := engine.AppendValue(nil, payload)
	if err != nil {
		return uuidv7.UUID{}, opErr("queue enqueue", q.c.name, "", -1, err)
	}
	id := q.c.newID()
	if err := checkID(id, true); err != nil {
		return uuidv7.UUID{}, opErr("queue enqueue", q.c.name, id.String(), -1, err)
	}
	return id, q.enqueue(id, value, due)
}

// dueMs is at as a due time (ms), for op.
func dueMs(op string, at time.Time) (int64, error) {
	if at.IsZero() {
		return 0, fmt.Errorf("%w: %s needs a time; the zero time.Time is likely a mistake (use Enqueue to run a job at once)", ErrInvalidOption, op)
	}
	return max(0, at.UnixMilli()), nil
}

// EnqueueWithID adds a pending job under an explicit id, which must be a
// UUIDv7; an id already in the queue, in any state, fails with ErrExists.
func (q *Queue) EnqueueWithID(id uuidv7.UUID, payload any) error {
	if err := checkID(id, false); err != nil {
		return opErr("queue enqueue", q.c.name, id.String(), -1, err)
	}
	value, err := engine.AppendValue(nil, payload)
	if err != nil {
		return opErr("queue enqueue", q.c.name, id.String(), -1, err)
	}
	return q.enqueue(id, value, -1)
}

// enqueue adds job id, due at due (ms), or at once for -1.
func (q *Queue) enqueue(id uuidv7.UUID, value []byte, due int64) error {
	// Beside other writers: enqueuers take their places in turn, claimers
	// need not wait (engine.Tx.nextSeq).
	return q.run("enqueue", id.String(), nil, engine.HoldRows, func(etx *engine.Tx, ec *engine.Coll) error {
		now := q.now()
		return etx.Enqueue(ec, id, value, now, dueAt(due, now))
	})
}

// dueAt is due, or now for -1 (a job due at once).
func dueAt(due, now int64) int64 {
	if due < 0 {
		return now
	}
	return due
}

// EnqueueMany adds jobs in one transaction, in order, all or none, and
// returns their ids. An item is a payload, or an Entry carrying an explicit
// id. A bad item fails the whole call with an *Error whose Index names it.
func (q *Queue) EnqueueMany(payloads []any) ([]uuidv7.UUID, error) {
	return q.enqueueMany(payloads, -1)
}

// EnqueueManyAt is EnqueueMany for jobs that no claim takes before at (see
// EnqueueAt); they keep their order among themselves.
func (q *Queue) EnqueueManyAt(at time.Time, payloads []any) ([]uuidv7.UUID, error) {
	due, err := dueMs("EnqueueManyAt", at)
	if err != nil {
		return nil, opErr("queue enqueue", q.c.name, "", -1, err)
	}
	return q.enqueueMany(payloads, due)
}

func (q *Queue) enqueueMany(payloads []any, due int64) ([]uuidv7.UUID, error) {
	// Encoded into a put batch, as PutMany does, with the same handling
	// of Entry, *Entry and missing ids.
	b := newBatch(len(payloads))
	defer b.release()
	for i := range payloads {
		if err := b.add(payloads[i]); err != nil {
			id := ""
			switch e := payloads[i].(type) {
			case Entry:
				id = e.ID.String()
			case *Entry:
				if e != nil {
					id = e.ID.String()
				}
			}
			if id == (uuidv7.UUID{}).String() {
				id = ""
			}
			return nil, opErr("queue enqueue", q.c.name, id, i, err)
		}
	}
	b.seal()
	if i, err := q.c.fillIDs(b, 0); err != nil {
		return nil, opErr("queue enqueue", q.c.name, b.ids[i].String(), i, err)
	}
	ids, values := b.ids, b.values
	failed := -1
	seen := make(map[uuidv7.UUID]int, len(ids))
	for i, id := range ids {
		if first, dup := seen[id]; dup {
			return nil, opErr("queue enqueue", q.c.name, id.String(), i, fmt.Errorf("%w: the batch holds this id twice (items %d and %d)", ErrExists, first, i))
		}
		seen[id] = i
	}
	err := q.batchUse("enqueue", true, engine.HoldRows, func(etx *engine.Tx, ec *engine.Coll) error {
		now := q.now()
		// Every id is checked before anything is written, so inside an
		// Update too a refused batch leaves nothing behind.
		for i, id := range ids {
			if exists, err := etx.JobExists(ec, id); err != nil || exists {
				failed = i
				if err == nil {
					err = fmt.Errorf("%w: a job with this id is in the queue", ErrExists)
				}
				return err
			}
		}
		for i, id := range ids {
			if err := etx.Enqueue(ec, id, values[i], now, dueAt(due, now)); err != nil {
				failed = i
				return err
			}
		}
		return nil
	})
	if err != nil {
		var e *Error
		if failed >= 0 && errors.As(err, &e) {
			e.Index, e.ID = failed, ids[failed].String()
		}
		return nil, err
	}
	return ids, nil
}

func leaseMs(lease time.Duration) (int64, error) {
	if lease <= 0 {
		return 0, fmt.Errorf("%w: a lease must be positive, got %v", ErrInvalidOption, lease)
	}
	return max(1, lease.Milliseconds()), nil
}

// Claim leases the pending job due first (ties: the oldest in enqueue
// order) until lease from now. None due is ErrEmpty.
func (q *Queue) Claim(lease time.Duration) (Job, error) {
	jobs, err := q.ClaimMany(1, lease)
	if err != nil {
		return Job{}, err
	}
	return jobs[0], nil
}

// ClaimMany leases up to n of the pending jobs that are due, the first due
// first, ties in enqueue order, in one transaction. None due is ErrEmpty.
func (q *Queue) ClaimMany(n int, lease time.Duration) ([]Job, error) {
	ms, err := leaseMs(lease)
	if err == nil && n < 1 {
		err = fmt.Errorf("%w: ClaimMany(%d): n must be at least 1", ErrInvalidOption, n)
	}
	if err != nil {
		return nil, opErr("queue claim", q.c.name, "", -1, err)
	}
	var claimed []engine.Job
	err = q.doMoving("claim", "", ErrEmpty, func(etx *engine.Tx, ec *engine.Coll) error {
		now := q.now()
		var err error
		claimed, err = etx.Claim(ec, now, ms, n, q.rule)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Job, len(claimed))
	for i, j := range claimed {
		out[i] = newJob(j)
	}
	return out, nil
}

// ClaimWait is Claim that waits while no job is due, until one is or ctx
// ends (then it returns ctx's error). It is woken by the commits that make
// a job pending (enqueues, releases, failures): this process's, and on
// PostgreSQL every process's, by a notice per queue that the commit sends
// (LISTEN/NOTIFY) while some process waits on the queue; by the
// time the first scheduled job becomes due and by the end of the earliest
// lease (timers, by the database's clock), never by polling the file. It
// needs a DB-level handle: inside a transaction nothing could arrive.
func (q *Queue) ClaimWait(ctx context.Context, lease time.Duration) (Job, error) {
	if q.c.tx != nil {
		return Job{}, opErr("queue claim", q.c.name, "", -1, fmt.Errorf("%w: ClaimWait cannot wait inside a transaction; use Claim", ErrNestedTx))
	}
	for {
		if err := ctx.Err(); err != nil {
			return Job{}, opErr("queue claim", q.c.name, "", -1, err)
		}
		// Other processes' commits wake it too, from here on (on a store
		// they share).
		if err := q.c.db.eng.WatchQueue(q.c.name); err != nil {
			return Job{}, opErr("queue claim", q.c.name, "", -1, err)
		}
		// Taken before the claim: a wake after it closes this channel.
		woken := q.c.db.eng.JobSignal(q.c.name)
		job, err := q.Claim(lease)
		if !errors.Is(err, ErrEmpty) {
			return job, err
		}
		end, ok, err := q.nextWake()
		if err != nil {
			return Job{}, err
		}
		var expiry <-chan time.Time
		var timer *time.Timer
		if ok {
			timer = time.NewTimer(time.Duration(max(1, end-q.now())) * time.Millisecond)
			expiry = timer.C
		}
		select {
		case <-ctx.Done():
			err = opErr("queue claim", q.c.name, "", -1, ctx.Err())
		case <-q.c.db.eng.Closing():
			err = opErr("queue claim", q.c.name, "", -1, ErrClosed)
		case <-woken:
		case <-expiry:
		}
		if timer != nil {
			timer.Stop()
		}
		if err != nil {
			return Job{}, err
		}
	}
}

// nextWake returns when a claim may next find a job without a commit
// making one pending: the earliest lease end or due time (ms), whichever
// comes first.
func (q *Queue) nextWake() (int64, bool, error) {
	var end int64
	var ok bool
	err := q.c.read(func(etx *engine.Tx, ec *engine.Coll) error {
		if ec == nil {
			return nil
		}
		end, ok = etx.NextLeaseEnd(ec)
		if due, has := etx.NextDue(ec); has && (!ok || due < end) {
			end, ok = due, true
		}
		return nil
	})
	return end, ok, opErr("queue claim", q.c.name, "", -1, err)
}

// Complete marks a claimed job done. A job that is not claimed (pending,
// done, dead) fails with ErrNotClaimed, an unknown one with ErrNotFound. A
// claim whose lease ended but that no other claim took still completes.
func (q *Queue) Complete(id uuidv7.UUID) error { return q.complete(id, 0) }

// CompleteClaim is Complete for the claim that returned job: it marks the
// job done only while that claim holds (its lease may have ended, as long
// as no other claim took the job). Once another claim took it, or the
// job was released, failed or completed, it is ErrNotClaimed and nothing
// changes, whatever the clock did meanwhile. A Job that no claim returned
// (Token 0) is ErrNotClaimed.
func (q *Queue) CompleteClaim(job Job) error {
	if err := noToken("complete", job); err != nil {
		return opErr("queue complete", q.c.name, job.ID.String(), -1, err)
	}
	return q.complete(job.ID, job.Token)
}

// noToken is the error of a token form called with a Job no claim returned.
func noToken(op string, job Job) error {
	if job.Token != 0 {
		return nil
	}
	return fmt.Errorf("%w: the job carries no claim token: pass the Job a claim returned (or use the id form to %s whatever claim the job has)", ErrNotClaimed, op)
}

func (q *Queue) complete(id uuidv7.UUID, token uint64) error {
	if err := checkID(id, false); err != nil {
		return opErr("queue complete", q.c.name, id.String(), -1, err)
	}
	return q.doMoving("complete", id.String(), noJob(id), func(etx *engine.Tx, ec *engine.Coll) error {
		now := q.now()
		return etx.Complete(ec, id, token, now)
	})
}

// CompleteMany completes the claimed jobs among ids in one transaction and
// returns how many it completed; ids that are not claimed, or not in the
// queue, are left as they are.
func (q *Queue) CompleteMany(ids []uuidv7.UUID) (int, error) {
	for i, id := range ids {
		if err := checkID(id, false); err != nil {
			return 0, opErr("queue complete", q.c.name, id.String(), i, err)
		}
	}
	var n int
	err := q.batchMoving("complete", func(etx *engine.Tx, ec *engine.Coll) error {
		var err error
		n, err = etx.CompleteMany(ec, ids, q.now())
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// errNoQueue is RequeueExpired's signal that the queue is not in the file
// yet: nothing to requeue.
var errNoQueue = fmt.Errorf("%w: the queue holds no job", ErrNotFound)

// Fail ends a claim in failure, keeping reason as the job's LastError: the
// job is pending again, or dead if it has used the queue's max attempts.
// Without a backoff the pending job is back at its place, claimable at
// once; with one (WithBackoff) it is due after it, by the database's
// clock, and Job.Due says when. The rule is the queue's stored one, read
// in the Fail's transaction: a SetQueueOptions that committed before,
// in any process, applies.
// LastError is always text: each byte of reason that is not part of a
// UTF-8 character becomes U+FFFD, and the result is cut at 1 KiB on a
// character boundary.
func (q *Queue) Fail(id uuidv7.UUID, reason string) error { return q.fail(id, 0, reason) }

// FailClaim is Fail for the claim that returned job: only while that claim
// holds, as CompleteClaim.
func (q *Queue) FailClaim(job Job, reason string) error {
	if err := noToken("fail", job); err != nil {
		return opErr("queue fail", q.c.name, job.ID.String(), -1, err)
	}
	return q.fail(job.ID, job.Token, reason)
}

func (q *Queue) fail(id uuidv7.UUID, token uint64, reason string) error {
	if err := checkID(id, false); err != nil {
		return opErr("queue fail", q.c.name, id.String(), -1, err)
	}
	return q.doMoving("fail", id.String(), noJob(id), func(etx *engine.Tx, ec *engine.Coll) error {
		now := q.now()
		_, err := etx.Fail(ec, id, token, reason, now, q.rule)
		return err
	})
}

// Extend moves a claimed job's lease end to lease from now and returns it.
func (q *Queue) Extend(id uuidv7.UUID, lease time.Duration) (time.Time, error) {
	return q.extend(id, 0, lease)
}

// ExtendClaim is Extend for the claim that returned job: only while that
// claim holds, as CompleteClaim. A worker whose lease ended and whose job
// another claim took learns it here, before doing more of the work.
func (q *Queue) ExtendClaim(job Job, lease time.Duration) (time.Time, error) {
	if err := noToken("extend", job); err != nil {
		return time.Time{}, opErr("queue extend", q.c.name, job.ID.String(), -1, err)
	}
	return q.extend(job.ID, job.Token, lease)
}

func (q *Queue) extend(id uuidv7.UUID, token uint64, lease time.Duration) (time.Time, error) {
	ms, err := leaseMs(lease)
	if err == nil {
		err = checkID(id, false)
	}
	if err != nil {
		return time.Time{}, opErr("queue extend", q.c.name, id.String(), -1, err)
	}
	var until int64
	err = q.doMoving("extend", id.String(), noJob(id), func(etx *engine.Tx, ec *engine.Coll) error {
		now := q.now()
		var err error
		until, err = etx.Extend(ec, id, token, now, ms)
		return err
	})
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(until).UTC(), nil
}

// Release gives a claim back: the job is pending again at its place, and
// the claim does not count as an attempt.
func (q *Queue) Release(id uuidv7.UUID) error {
	if err := checkID(id, false); err != nil {
		return opErr("queue release", q.c.name, id.String(), -1, err)
	}
	return q.doMoving("release", id.String(), noJob(id), func(etx *engine.Tx, ec *engine.Coll) error {
		now := q.now()
		return etx.Release(ec, id, now)
	})
}

// Retry makes a dead job pending again, at its place, with no attempts
// used. A job that is not dead (pending, claimed or done) fails with
// ErrNotDead and stays as it is.
func (q *Queue) Retry(id uuidv7.UUID) error {
	if err := checkID(id, false); err != nil {
		return opErr("queue retry", q.c.name, id.String(), -1, err)
	}
	return q.do("retry", id.String(), noJob(id), func(etx *engine.Tx, ec *engine.Coll) error {
		now := q.now()
		return etx.Retry(ec, id, now)
	})
}

// Cancel deletes a job no worker holds, payload included: a pending, done
// or dead one, or a claimed one whose lease has ended (the next claim would
// have taken it back). Once Cancel returns nil no claim will hand the job
// out; a done one had already run, and Cancel only forgets it (Lookup
// tells which it was). A claimed job whose lease holds fails with
// ErrClaimed and stays as it is, an unknown id with ErrNotFound. Its id
// can be enqueued again afterwards.
func (q *Queue) Cancel(id uuidv7.UUID) error {
	if err := checkID(id, false); err != nil {
		return opErr("queue cancel", q.c.name, id.String(), -1, err)
	}
	// Held alone: a claim in another process waits for it, or it for the
	// claim, so one of them wins and the other sees what it left.
	return q.do("cancel", id.String(), noJob(id), func(etx *engine.Tx, ec *engine.Coll) error {
		now := q.now()
		return etx.Cancel(ec, id, now)
	})
}

// RequeueExpired returns every claim whose lease has ended to pending (or
// to dead, if it used its last attempt) and says how many. Claims do it
// anyway; this is for a queue nobody claims from for a while, so that its
// counts show the truth.
func (q *Queue) RequeueExpired() (int, error) {
	var n int
	err := q.doMoving("requeue", "", errNoQueue, func(etx *engine.Tx, ec *engine.Coll) error {
		now := q.now()
		var err error
		n, err = etx.RequeueExpired(ec, now, q.rule)
		return err
	})
	if errors.Is(err, errNoQueue) {
		return 0, nil
	}
	return n, err
}

// purgeBatch is how many done jobs one PurgeDone transaction deletes.
const purgeBatch = 5000

// PurgeDone deletes the jobs completed more than olderThan ago, payloads
// included, and says how many. On a DB-level handle it deletes in
// transactions of a few thousand, so a large purge never holds the writers
// for long; each is durable, so an error leaves the ones before it purged.
// The file does not shrink: its free pages are reused by later writes, and
// `storh compact` gives them back.
func (q *Queue) PurgeDone(olderThan time.Duration) (int, error) {
	return q.purge("purge", olderThan, (*engine.Tx).PurgeDone)
}

// PurgeDead deletes the dead jobs (dead letters) that died more than
// olderThan ago, payloads included, as PurgeDone does for done ones.
func (q *Queue) PurgeDead(olderThan time.Duration) (int, error) {
	return q.purge("purge dead", olderThan, (*engine.Tx).PurgeDead)
}

func (q *Queue) purge(op string, olderThan time.Duration, purge func(*engine.Tx, *engine.Coll, int64, int) (int, bool, error)) (int, error) {
	before := q.now() - olderThan.Milliseconds()
	total := 0
	for {
		var n int
		var more bool
		limit := purgeBatch
		if q.c.tx != nil {
			limit = int(^uint(0) >> 1)
		}
		err := q.batch(op, false, func(etx *engine.Tx, ec *engine.Coll) error {
			var err error
			n, more, err = purge(etx, ec, before, limit)
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if !more {
			return total, nil
		}
	}
}

// QueueCounts is the number of a queue's jobs in each state.
type QueueCounts struct {
	// Pending counts the jobs a claim could take now: waiting and due.
	Pending int
	// Scheduled counts the jobs waiting that are not due yet (EnqueueAt,
	// or a failure's backoff); they are Pending once due.
	Scheduled int
	Claimed   int
	Done      int
	Dead      int
}

// Counts returns the number of jobs in each state, by the database's
// clock. It reads a counter per state, and walks the jobs not due yet (a
// counter cannot count a job down when it becomes due, with no write): it
// costs the same for any number of other jobs.
func (q *Queue) Counts() (QueueCounts, error) {
	var n [5]int64
	var scheduled int64
	err := q.c.read(func(etx *engine.Tx, ec *engine.Coll) error {
		if ec != nil {
			n = etx.JobCounts(ec)
			scheduled = etx.Scheduled(ec, q.now())
		}
		return nil
	})
	if err != nil {
		return QueueCounts{}, opErr("queue counts", q.c.name, "", -1, err)
	}
	return QueueCounts{Pending: int(n[api.JobPending] - scheduled), Scheduled: int(scheduled), Claimed: int(n[api.JobClaimed]),
		Done: int(n[api.JobDone]), Dead: int(n[api.JobDead])}, nil
}

// Stats returns the queue's statistics.
func (q *Queue) Stats() (QueueStats, error) {
	info, err := q.c.Stats()
	if err != nil {
		return QueueStats{}, err
	}
	n, err := q.Counts()
	return QueueStats{CollectionInfo: info, Pending: n.Pending, Scheduled: n.Scheduled, Claimed: n.Claimed, Done: n.Done, Dead: n.Dead}, err
}

// Lookup returns job id as it is now, payload and state.
func (q *Queue) Lookup(id uuidv7.UUID) (Job, error) {
	if err := checkID(id, false); err != nil {
		return Job{}, opErr("queue lookup", q.c.name, id.String(), -1, err)
	}
	var j engine.Job
	err := q.c.read(func(etx *engine.Tx, ec *engine.Coll) error {
		if ec == nil {
			return fmt.Errorf("%w: no job %s", ErrNotFound, id)
		}
		var err error
		j, err = etx.LookupJob(ec, id)
		return err
	})
	if err != nil {
		return Job{}, opErr("queue lookup", q.c.name, id.String(), -1, err)
	}
	return newJob(j), nil
}

// jobsChunk is how many jobs one read transaction of Jobs lists.
const jobsChunk = 256

// Jobs lists the jobs in state, without their payloads (Lookup reads one):
// pending jobs in the order Claim takes them, claimed ones by lease end,
// done and dead ones by the time they got there. It reads in short
// transactions, so it never holds up writers; a job that changes state
// meanwhile may be listed twice or not at all.
func (q *Queue) Jobs(state JobState) iter.Seq2[Job, error] {
	return func(yield func(Job, error) bool) {
		var after []byte
		for {
			var chunk []engine.Job
			from := after
			err := q.c.read(func(etx *engine.Tx, ec *engine.Coll) error {
				chunk = chunk[:0]
				if ec == nil {
					after = nil
					return nil
				}
				var err error
				after, err = etx.JobsIn(ec, state, from, jobsChunk, func(j engine.Job) { chunk = append(chunk, j) })
				return err
			})
			if err != nil {
				yield(Job{}, opErr("queue jobs", q.c.name, "", -1, err))
				return
			}
			for _, j := range chunk {
				if !yield(newJob(j), nil) {
					return
				}
			}
			if after == nil {
				return
			}
		}
	}
}
