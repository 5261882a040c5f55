package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// jobQueue is what the queue commands need of a queue: a *storh.Queue of a
// database file or PostgreSQL store this process opened (localQueue), or
// the queue endpoints of a server (httpQueue, --url). The commands call
// only this, so their checks, output and refusals are the same on every
// store. Errors keep storh's sentinels either way.
type jobQueue interface {
	close() error
	// enqueueMany adds the items as pending jobs, all or none, due at at
	// (zero: at once). An error about one item is a *storh.Error whose
	// Index is the item's.
	enqueueMany(at time.Time, items []any) ([]uuidv7.UUID, error)
	// discard takes back a new database file a failed enqueue created.
	discard()
	claimMany(n int, lease time.Duration) ([]storh.Job, error)
	// claimWait is claimMany that, when no job is due, waits up to wait
	// for one (storh.ErrEmpty when none came).
	claimWait(n int, lease, wait time.Duration) ([]storh.Job, error)
	lookup(id uuidv7.UUID) (storh.Job, error)
	// completeMany completes the claimed jobs among ids and counts them;
	// the others are left as they are.
	completeMany(ids []uuidv7.UUID) (int, error)
	// complete, fail and extend act on job.ID: only while the claim
	// job.Token names holds when it is not 0, else on whatever claim the
	// job has.
	complete(job storh.Job) error
	fail(job storh.Job, reason string) error
	extend(job storh.Job, lease time.Duration) (time.Time, error)
	// batch runs action (retry, cancel or release) on each of ids, which
	// are distinct, in one transaction, all or none. A job the action
	// refuses, or that is not in the queue, fails it with a *batchError
	// naming the job's place in ids, and nothing is written.
	batch(action string, ids []uuidv7.UUID) error
	// jobs lists the jobs in state, with their data when withData (a
	// job gone between the listing and the read of its data is left
	// out).
	jobs(state storh.JobState, withData bool) iter.Seq2[storh.Job, error]
	purge(dead bool, olderThan time.Duration) (int, error)
	options() (storh.QueueOptions, bool, error)
}

// openJobQueue opens queue name on the store the command works on: on a
// file or PostgreSQL as openQueue does (write, create), over --url the
// server's queue, which must exist unless create (an enqueue makes it
// there, as on a file). Another kind of collection by that name is the
// same error on every store.
func (a *app) openJobQueue(name string, write, create bool) (jobQueue, error) {
	if a.url == "" {
		db, q, err := a.openQueue(name, write, create)
		if err != nil {
			return nil, err
		}
		return &localQueue{a: a, db: db, q: q}, nil
	}
	if err := checkCollNames([]string{name}); err != nil {
		return nil, err
	}
	s, err := a.openStore(write)
	if err != nil {
		return nil, err
	}
	hs := s.(*httpStore)
	st, err := hs.stats()
	if err != nil {
		hs.close()
		return nil, err
	}
	cs, err := a.lookupIn(st.Collections, name, hs.where())
	if err == nil && cs.Kind != "queue" || err != nil && !create {
		hs.close()
	}
	switch {
	case err == nil && cs.Kind != "queue" && create:
		return nil, fmt.Errorf("collection %s is not a queue: choose another name", qname(name))
	case err == nil && cs.Kind != "queue":
		return nil, notQueue(name, cs.Kind)
	case err != nil && !create:
		return nil, err
	}
	return &httpQueue{s: hs, name: name}, nil
}

// localQueue is a queue of a database this process opened.
type localQueue struct {
	a  *app
	db *storh.DB
	q  *storh.Queue
}

func (l *localQueue) close() error {
	if l.db == nil {
		return nil
	}
	return l.db.Close()
}
func (l *localQueue) discard() { l.a.removeIfNew(l.db) }

func (l *localQueue) enqueueMany(at time.Time, items []any) ([]uuidv7.UUID, error) {
	if at.IsZero() {
		return l.q.EnqueueMany(items)
	}
	return l.q.EnqueueManyAt(at, items)
}

func (l *localQueue) claimMany(n int, lease time.Duration) ([]storh.Job, error) {
	return l.q.ClaimMany(n, lease)
}

// claimWait on PostgreSQL is storh's ClaimWait, woken by the commits of
// every process. A file is locked while this process has it open, so no
// other process could enqueue while it waited there: it polls instead,
// closing the file between claims, every filePoll.
func (l *localQueue) claimWait(n int, lease, wait time.Duration) ([]storh.Job, error) {
	jobs, err := l.q.ClaimMany(n, lease)
	if !errors.Is(err, storh.ErrEmpty) {
		return jobs, err
	}
	ctx, cancel := context.WithTimeout(l.a.ctx, wait)
	defer cancel()
	if !isURL(l.a.dbPath) {
		return l.pollClaim(ctx, n, lease)
	}
	first, err := l.q.ClaimWait(ctx, lease)
	switch {
	case l.a.ctx.Err() != nil:
		return nil, errors.New("interrupted")
	case errors.Is(err, context.DeadlineExceeded):
		return nil, storh.ErrEmpty
	case err != nil:
		return nil, err
	}
	jobs = []storh.Job{first}
	if n > 1 {
		more, err := l.q.ClaimMany(n-1, lease)
		if err != nil && !errors.Is(err, storh.ErrEmpty) {
			return jobs, nil // the first is claimed: the caller has it
		}
		jobs = append(jobs, more...)
	}
	return jobs, nil
}

// filePoll is how often a claim that waits on a database file tries again.
const filePoll = 250 * time.Millisecond

// pollClaim claims from the file every filePoll until a job is due or ctx
// ends, with the file closed in between, so that other processes can
// write to it.
func (l *localQueue) pollClaim(ctx context.Context, n int, lease time.Duration) ([]storh.Job, error) {
	for {
		err := l.db.Close()
		l.db = nil
		if err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			if l.a.ctx.Err() != nil {
				return nil, errors.New("interrupted")
			}
			return nil, storh.ErrEmpty
		case <-time.After(filePoll):
		}
		db, q, err := l.a.openQueue(l.q.Name(), true, false)
		if err != nil {
			return nil, err
		}
		l.db, l.q = db, q
		jobs, err := q.ClaimMany(n, lease)
		if !errors.Is(err, storh.ErrEmpty) {
			return jobs, err
		}
	}
}

func (l *localQueue) lookup(id uuidv7.UUID) (storh.Job, error)    { return l.q.Lookup(id) }
func (l *localQueue) completeMany(ids []uuidv7.UUID) (int, error) { return l.q.CompleteMany(ids) }

func (l *localQueue) complete(job storh.Job) error {
	if job.Token != 0 {
		return l.q.CompleteClaim(job)
	}
	return l.q.Complete(job.ID)
}

func (l *localQueue) fail(job storh.Job, reason string) error {
	if job.Token != 0 {
		return l.q.FailClaim(job, reason)
	}
	return l.q.Fail(job.ID, reason)
}

func (l *localQueue) extend(job storh.Job, lease time.Duration) (time.Time, error) {
	if job.Token != 0 {
		return l.q.ExtendClaim(job, lease)
	}
	return l.q.Extend(job.ID, lease)
}

// batchError is a batch refused at one job: index is its place among the
// ids, err the refusal (storh's sentinels kept).
type batchError struct {
	index int
	err   error
}

func (e *batchError) Error() string { return e.err.Error() }
func (e *batchError) Unwrap() error { return e.err }

// batch runs in one storh transaction (DB.Update), through a handle bound
// to it.
func (l *localQueue) batch(action string, ids []uuidv7.UUID) error {
	return l.db.Update(func(tx *storh.Tx) error {
		q, err := tx.Queue(l.q.Name(), storh.WithoutCreate())
		if err != nil {
			return err
		}
		for i, id := range ids {
			switch action {
			case "retry":
				err = q.Retry(id)
			case "cancel":
				err = q.Cancel(id)
			case "release":
				err = q.Release(id)
			default:
				err = fmt.Errorf("no batch action %q", action)
			}
			if err != nil {
				return &batchError{index: i, err: err}
			}
		}
		return nil
	})
}

func (l *localQueue) jobs(state storh.JobState, withData bool) iter.Seq2[storh.Job, error] {
	return func(yield func(storh.Job, error) bool) {
		for j, err := range l.q.Jobs(state) {
			if err == nil && withData {
				if j, err = l.q.Lookup(j.ID); errors.Is(err, storh.ErrNotFound) {
					continue // purged since it was listed
				}
			}
			if !yield(j, err) || err != nil {
				return
			}
		}
	}
}

func (l *localQueue) purge(dead bool, olderThan time.Duration) (int, error) {
	if dead {
		return l.q.PurgeDead(olderThan)
	}
	return l.q.PurgeDone(olderThan)
}

func (l *localQueue) options() (storh.QueueOptions, bool, error) {
	return l.db.QueueOptions(l.q.Name())
}

// httpQueue is a queue behind the API of a server (--url): each call is
// a request, and its errors are worded by httpStore.fail.
type httpQueue struct {
	s    *httpStore
	name string
}

func (h *httpQueue) close() error { return h.s.close() }
func (h *httpQueue) discard()     {}

func (h *httpQueue) c() *web.Client { return h.s.client }

func (h *httpQueue) word(err error) error { return h.s.fail(h.s.a.ctx, err) }

func (h *httpQueue) enqueueMany(at time.Time, items []any) ([]uuidv7.UUID, error) {
	var ids []uuidv7.UUID
	var err error
	if at.IsZero() {
		ids, err = h.c().EnqueueMany(h.s.a.ctx, h.name, items)
	} else {
		ids, err = h.c().EnqueueManyAt(h.s.a.ctx, h.name, at, items)
	}
	var we *web.Error
	if errors.As(err, &we) && we.Item > 0 {
		// As on a file: the item at fault, and storh's words for it.
		return nil, &storh.Error{Op: "queue enqueue", Collection: h.name, Index: we.Item - 1, Err: itemOnly(we)}
	}
	return ids, h.word(err)
}

// itemOnly cuts the message of an enqueue's error at a job to what was
// said of the job: the handler's is "web: enqueue into …, nothing
// written: job 2: …".
func itemOnly(we *web.Error) *web.Error {
	if _, after, ok := strings.Cut(we.Message, fmt.Sprintf("job %d: ", we.Item)); ok {
		we.Message = after
	}
	return we
}

// claimMany claims until it has n jobs or none is due: the server lowers
// a claim's n to its page size. Each claim is a transaction of its own,
// where a file's claims n jobs in one.
func (h *httpQueue) claimMany(n int, lease time.Duration) ([]storh.Job, error) {
	var jobs []storh.Job
	for len(jobs) < n {
		more, err := h.c().Claim(h.s.a.ctx, h.name, n-len(jobs), lease, 0)
		switch {
		case errors.Is(err, storh.ErrEmpty) && len(jobs) > 0:
			return jobs, nil
		case errors.Is(err, storh.ErrEmpty):
			return nil, err
		case err != nil && len(jobs) > 0:
			// The jobs claimed already are the caller's: their leases
			// bring them back if it cannot use them.
			return jobs, nil
		case err != nil:
			return nil, h.word(err)
		}
		jobs = append(jobs, more...)
	}
	return jobs, nil
}

// claimWait asks the server to wait for the time left, again and again:
// the server lowers a claim's wait to half its request time limit.
func (h *httpQueue) claimWait(n int, lease, wait time.Duration) ([]storh.Job, error) {
	deadline := time.Now().Add(wait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, storh.ErrEmpty
		}
		jobs, err := h.c().Claim(h.s.a.ctx, h.name, n, lease, left)
		switch {
		case errors.Is(err, storh.ErrEmpty):
			continue
		case err != nil:
			return nil, h.word(err)
		}
		if len(jobs) < n {
			// The server lowers n to its page size: the rest that is due.
			more, err := h.claimMany(n-len(jobs), lease)
			if err == nil {
				jobs = append(jobs, more...)
			}
		}
		return jobs, nil
	}
}

func (h *httpQueue) lookup(id uuidv7.UUID) (storh.Job, error) {
	j, err := h.c().Lookup(h.s.a.ctx, h.name, id)
	return j, h.word(err)
}

// completeMany completes the claimed jobs among ids in one batch request,
// one transaction on the server, counting them: as CompleteMany on a file,
// a job that is not claimed, or not there, is left alone. The batch is
// all or none, so such a job (the command looked them up before, but
// another worker may have moved one since) is left out and the rest sent
// again.
func (h *httpQueue) completeMany(ids []uuidv7.UUID) (int, error) {
	rest := make([]storh.Job, 0, len(ids))
	seen := map[uuidv7.UUID]bool{}
	for _, id := range ids {
		if !seen[id] { // the second would find it done
			seen[id] = true
			rest = append(rest, storh.Job{Record: storh.Record{ID: id}})
		}
	}
	for len(rest) > 0 {
		_, err := h.c().Batch(h.s.a.ctx, h.name, web.JobBatch{Action: "complete", Jobs: rest})
		var we *web.Error
		switch {
		case err == nil:
			return len(rest), nil
		case errors.As(err, &we) && we.Item > 0 && we.Item <= len(rest) &&
			(errors.Is(err, storh.ErrNotClaimed) || errors.Is(err, storh.ErrNotFound)):
			rest = slices.Delete(rest, we.Item-1, we.Item)
		default:
			return 0, h.word(err)
		}
	}
	return 0, nil
}

func (h *httpQueue) complete(job storh.Job) error {
	var err error
	if job.Token != 0 {
		_, err = h.c().CompleteClaim(h.s.a.ctx, h.name, job)
	} else {
		_, err = h.c().Complete(h.s.a.ctx, h.name, job.ID)
	}
	return h.word(err)
}

func (h *httpQueue) fail(job storh.Job, reason string) error {
	var err error
	if job.Token != 0 {
		_, err = h.c().FailClaim(h.s.a.ctx, h.name, job, reason)
	} else {
		_, err = h.c().Fail(h.s.a.ctx, h.name, job.ID, reason)
	}
	return h.word(err)
}

func (h *httpQueue) extend(job storh.Job, lease time.Duration) (time.Time, error) {
	var j storh.Job
	var err error
	if job.Token != 0 {
		j, err = h.c().ExtendClaim(h.s.a.ctx, h.name, job, lease)
	} else {
		j, err = h.c().Extend(h.s.a.ctx, h.name, job.ID, lease)
	}
	return j.LeaseUntil, h.word(err)
}

// batch is one batch request: one transaction on the server.
func (h *httpQueue) batch(action string, ids []uuidv7.UUID) error {
	jobs := make([]storh.Job, len(ids))
	for i, id := range ids {
		jobs[i] = storh.Job{Record: storh.Record{ID: id}}
	}
	_, err := h.c().Batch(h.s.a.ctx, h.name, web.JobBatch{Action: action, Jobs: jobs})
	var we *web.Error
	if errors.As(err, &we) && we.Item > 0 && we.Item <= len(ids) {
		return &batchError{index: we.Item - 1, err: err}
	}
	return h.word(err)
}

// jobs reads the list with the data in it (data=1): the server reads each
// job's data as it lists, where a lookup per job would be a request each.
func (h *httpQueue) jobs(state storh.JobState, withData bool) iter.Seq2[storh.Job, error] {
	return func(yield func(storh.Job, error) bool) {
		for j, err := range h.c().Jobs(h.s.a.ctx, h.name, state, withData) {
			if !yield(j, h.word(err)) || err != nil {
				return
			}
		}
	}
}

func (h *httpQueue) purge(dead bool, olderThan time.Duration) (int, error) {
	var n int
	var err error
	if dead {
		n, err = h.c().PurgeDead(h.s.a.ctx, h.name, olderThan)
	} else {
		n, err = h.c().PurgeDone(h.s.a.ctx, h.name, olderThan)
	}
	return n, h.word(err)
}

func (h *httpQueue) options() (storh.QueueOptions, bool, error) {
	o, stored, err := h.c().QueueOptions(h.s.a.ctx, h.name)
	return o, stored, h.word(err)
}
