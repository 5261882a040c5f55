package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The queue calls of Client mirror storh.Queue's, over the endpoints
// under api/queues/{name} (docs/web.md). The jobs they give are
// storh.Jobs: their Record holds the id and, where the endpoint sends it,
// the data (Decode, Data), and the Job a claim gave carries its Token, so
// it can be passed back to CompleteClaim, FailClaim or ExtendClaim.

func queuePath(queue string) string { return "api/queues/" + url.PathEscape(queue) }

// sendJSON sends v as a JSON body and decodes the JSON answer into out
// (nil: the answer is read and dropped).
func (c *Client) sendJSON(ctx context.Context, method, path string, vals url.Values, v, out any) error {
	var body io.Reader
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("web: client: %w: %v", storh.ErrInvalidData, err)
		}
		body = bytes.NewReader(b)
	}
	resp, err := c.do(ctx, method, path, vals, body, http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err := io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%w of %s: %v", ErrAnswer, c.base, err)
	}
	return nil
}

// EnqueueMany adds a pending job for each payload (a map or a struct, as a
// record's data, written in the mapping of record bodies), in one
// transaction, all or none, creating the queue if needed, and returns
// their ids. A payload the server refuses is an *Error whose Item names
// it (1-based); one the client cannot write wraps storh.ErrInvalidData.
func (c *Client) EnqueueMany(ctx context.Context, queue string, payloads []any) ([]uuidv7.UUID, error) {
	return c.enqueue(ctx, queue, "", payloads)
}

// EnqueueManyAt is EnqueueMany for jobs that no claim takes before at, by
// the server's clock.
func (c *Client) EnqueueManyAt(ctx context.Context, queue string, at time.Time, payloads []any) ([]uuidv7.UUID, error) {
	if at.IsZero() {
		return nil, fmt.Errorf("web: client: enqueue at the zero time: %w", storh.ErrInvalidOption)
	}
	return c.enqueue(ctx, queue, at.UTC().Format(jsonl.TimeLayout), payloads)
}

func (c *Client) enqueue(ctx context.Context, queue, at string, payloads []any) ([]uuidv7.UUID, error) {
	req := EnqueueRequest{Jobs: make([]json.RawMessage, len(payloads)), At: at}
	for i, p := range payloads {
		b, err := payloadJSON(p)
		if err != nil {
			return nil, &storh.Error{Op: "queue enqueue", Collection: queue, Index: i,
				Err: fmt.Errorf("%w: %v", storh.ErrInvalidData, err)}
		}
		req.Jobs[i] = b
	}
	var out Enqueued
	if err := c.sendJSON(ctx, http.MethodPost, queuePath(queue)+"/jobs", nil, req, &out); err != nil {
		return nil, err
	}
	ids := make([]uuidv7.UUID, len(out.IDs))
	for i, s := range out.IDs {
		id, err := uuidv7.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("%w of %s: id %q: %v", ErrAnswer, c.base, s, err)
		}
		ids[i] = id
	}
	return ids, nil
}

// payloadJSON writes a payload as JSON in the mapping of record bodies:
// the values records hold as they are (jsonl.AppendValue), a struct
// through its JSON.
func payloadJSON(p any) (json.RawMessage, error) {
	if b, err := jsonl.AppendValue(nil, p); err == nil {
		return b, nil
	}
	return json.Marshal(p)
}

// Claim leases up to n of the due jobs (the first due first, ties in
// enqueue order; the server lowers an n above its page size to it) until
// lease from now, by the server's clock, and gives
// them with their data and claim tokens. When none is due it waits up to
// wait on the server for one (0: no wait; the server lowers a wait longer
// than half its request time limit to that, 15s by default). None due, after the wait, is an error wrapping
// storh.ErrEmpty, as storh.Queue.ClaimMany's.
func (c *Client) Claim(ctx context.Context, queue string, n int, lease, wait time.Duration) ([]storh.Job, error) {
	req := ClaimRequest{N: n, Lease: lease.String()}
	if wait > 0 {
		req.Wait = wait.String()
	}
	var out Claimed
	if err := c.sendJSON(ctx, http.MethodPost, queuePath(queue)+"/claims", nil, req, &out); err != nil {
		return nil, err
	}
	if len(out.Jobs) == 0 {
		return nil, fmt.Errorf("web: claim from queue %q: %w", queue, storh.ErrEmpty)
	}
	jobs := make([]storh.Job, len(out.Jobs))
	for i, j := range out.Jobs {
		var err error
		if jobs[i], err = c.jobOfWire(j); err != nil {
			return nil, err
		}
	}
	return jobs, nil
}

// jobOfWire is the storh.Job of a job as the API writes it.
func (c *Client) jobOfWire(j Job) (storh.Job, error) {
	job, err := JobOf(j)
	if err != nil {
		return job, fmt.Errorf("%w of %s: %v", ErrAnswer, c.base, err)
	}
	return job, nil
}

// JobOf reads a Job of the API back into a storh.Job: its record (id and,
// when the Job holds it, data), state, attempts, times, last error and
// claim token.
func JobOf(j Job) (storh.Job, error) {
	var job storh.Job
	id, err := uuidv7.Parse(j.ID)
	if err != nil {
		return job, fmt.Errorf("job id %q: %v", j.ID, err)
	}
	job.Record = storh.Record{ID: id}
	if len(j.Data) > 0 {
		// Through a record's JSON, so that the data decodes as a
		// record's does (Extended JSON wrappers to times, ids, bytes).
		b, err := json.Marshal(struct {
			ID   string          `json:"id"`
			Data json.RawMessage `json:"data"`
		}{j.ID, j.Data})
		if err == nil {
			err = job.Record.UnmarshalJSON(b)
		}
		if err != nil {
			return job, fmt.Errorf("job %s: data: %v", j.ID, err)
		}
	}
	if j.State != "" {
		st, ok := jobStates[j.State]
		if !ok {
			return job, fmt.Errorf("job %s: state %q", j.ID, j.State)
		}
		job.State = st
	}
	job.Attempts, job.LastError = j.Attempts, j.LastError
	for _, t := range []struct {
		s  string
		to *time.Time
	}{{j.LeaseUntil, &job.LeaseUntil}, {j.Due, &job.Due}, {j.Changed, &job.Changed}} {
		if t.s == "" {
			continue
		}
		if *t.to, err = time.Parse(time.RFC3339Nano, t.s); err != nil {
			return job, fmt.Errorf("job %s: time %q: %v", j.ID, t.s, err)
		}
	}
	if j.Token != "" {
		if job.Token, err = strconv.ParseUint(j.Token, 10, 64); err != nil {
			return job, fmt.Errorf("job %s: token %q: %v", j.ID, j.Token, err)
		}
	}
	return job, nil
}

// Lookup gives a job as it is now, data included. An id not in the queue
// is an *Error wrapping storh.ErrNotFound.
func (c *Client) Lookup(ctx context.Context, queue string, id uuidv7.UUID) (storh.Job, error) {
	var out Job
	if err := c.getJSON(ctx, queuePath(queue)+"/jobs/"+id.String(), nil, &out); err != nil {
		return storh.Job{}, err
	}
	return c.jobOfWire(out)
}

// act runs an action on one job and gives the job as it is right after,
// without its data.
func (c *Client) act(ctx context.Context, queue string, id uuidv7.UUID, action string, req *JobAction) (storh.Job, error) {
	var body any
	if req != nil {
		body = req
	}
	var out Job
	if err := c.sendJSON(ctx, http.MethodPost, queuePath(queue)+"/jobs/"+id.String()+"/"+action, nil, body, &out); err != nil {
		return storh.Job{}, err
	}
	return c.jobOfWire(out)
}

// tokenOf is the token of a Job a claim gave, as the API takes it; a Job
// without one is refused before anything is sent, as storh refuses it.
func tokenOf(op string, job storh.Job) (string, error) {
	if job.Token == 0 {
		return "", fmt.Errorf("web: client: %s job %s: %w: the job carries no claim token: pass the Job a claim returned", op, job.ID, storh.ErrNotClaimed)
	}
	return strconv.FormatUint(job.Token, 10), nil
}

// Complete marks a claimed job done, whatever claim it has, and gives the
// job as it then is. A job that is not claimed is an *Error wrapping
// storh.ErrNotClaimed.
func (c *Client) Complete(ctx context.Context, queue string, id uuidv7.UUID) (storh.Job, error) {
	return c.act(ctx, queue, id, "complete", nil)
}

// CompleteClaim is Complete for the claim that gave job: only while that
// claim holds, else an *Error wrapping storh.ErrNotClaimed and nothing
// changes.
func (c *Client) CompleteClaim(ctx context.Context, queue string, job storh.Job) (storh.Job, error) {
	t, err := tokenOf("complete", job)
	if err != nil {
		return storh.Job{}, err
	}
	return c.act(ctx, queue, job.ID, "complete", &JobAction{Token: t})
}

// Fail ends a job's claim in failure, keeping reason as its last error:
// the job is pending again (after the queue's backoff), or dead once it
// has used its attempts. It gives the job as it then is.
func (c *Client) Fail(ctx context.Context, queue string, id uuidv7.UUID, reason string) (storh.Job, error) {
	return c.act(ctx, queue, id, "fail", &JobAction{Reason: reason})
}

// FailClaim is Fail for the claim that gave job, only while it holds.
func (c *Client) FailClaim(ctx context.Context, queue string, job storh.Job, reason string) (storh.Job, error) {
	t, err := tokenOf("fail", job)
	if err != nil {
		return storh.Job{}, err
	}
	return c.act(ctx, queue, job.ID, "fail", &JobAction{Token: t, Reason: reason})
}

// Extend moves a claimed job's lease end to lease from now, by the
// server's clock, and gives the job with its new LeaseUntil.
func (c *Client) Extend(ctx context.Context, queue string, id uuidv7.UUID, lease time.Duration) (storh.Job, error) {
	return c.act(ctx, queue, id, "extend", &JobAction{Lease: lease.String()})
}

// ExtendClaim is Extend for the claim that gave job, only while it holds.
func (c *Client) ExtendClaim(ctx context.Context, queue string, job storh.Job, lease time.Duration) (storh.Job, error) {
	t, err := tokenOf("extend", job)
	if err != nil {
		return storh.Job{}, err
	}
	return c.act(ctx, queue, job.ID, "extend", &JobAction{Token: t, Lease: lease.String()})
}

// Release gives a job's claim back without using an attempt: the job is
// pending again at its place. One not claimed is an *Error wrapping
// storh.ErrNotClaimed.
func (c *Client) Release(ctx context.Context, queue string, id uuidv7.UUID) (storh.Job, error) {
	return c.act(ctx, queue, id, "release", nil)
}

// Retry makes a dead job pending again with no attempts used. One that is
// not dead is an *Error wrapping storh.ErrNotDead.
func (c *Client) Retry(ctx context.Context, queue string, id uuidv7.UUID) (storh.Job, error) {
	return c.act(ctx, queue, id, "retry", nil)
}

// Cancel deletes a job no worker holds. One claimed under a lease that
// holds is an *Error wrapping storh.ErrClaimed, an unknown one
// storh.ErrNotFound.
func (c *Client) Cancel(ctx context.Context, queue string, id uuidv7.UUID) error {
	return c.sendJSON(ctx, http.MethodDelete, queuePath(queue)+"/jobs/"+id.String(), nil, nil, nil)
}

// JobsPage lists a page of the jobs in state, in the order
// storh.Queue.Jobs gives them, with their data when withData: up to limit
// of them (0: the server's page size, which also lowers a larger limit),
// after the cursor after ("" for the first page). It returns the cursor of
// the next page, "" after the last. A cursor the server did not give for
// state is an *Error wrapping storh.ErrInvalidQuery.
func (c *Client) JobsPage(ctx context.Context, queue string, state storh.JobState, after string, limit int, withData bool) ([]storh.Job, string, error) {
	var jobs []storh.Job
	next, err := c.jobsPage(ctx, queue, state, after, limit, withData, func(j storh.Job) bool {
		jobs = append(jobs, j)
		return true
	})
	if err != nil {
		return nil, "", err
	}
	return jobs, next, nil
}

// jobsPage reads a page of jobs, passing each to fn as it is decoded
// (the page is not held), and returns the next page's cursor; fn
// returning false stops it, with no error.
func (c *Client) jobsPage(ctx context.Context, queue string, state storh.JobState, after string, limit int, withData bool, fn func(storh.Job) bool) (string, error) {
	vals := url.Values{"state": {state.String()}}
	if withData {
		vals.Set("data", "1")
	}
	if after != "" {
		vals.Set("after", after)
	}
	if limit > 0 {
		vals.Set("limit", strconv.Itoa(limit))
	}
	resp, err := c.do(ctx, http.MethodGet, queuePath(queue)+"/jobs", vals, nil, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	bad := func(err error) error { return fmt.Errorf("%w of %s: a page of jobs: %v", ErrAnswer, c.base, err) }
	// {"jobs":[…],"next":"…"}, read a job at a time.
	d := json.NewDecoder(resp.Body)
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return "", bad(fmt.Errorf("not an object (%v)", err))
	}
	next := ""
	for d.More() {
		key, err := d.Token()
		if err != nil {
			return "", bad(err)
		}
		switch key {
		case "next":
			if err := d.Decode(&next); err != nil {
				return "", bad(err)
			}
		case "jobs":
			if t, err := d.Token(); err != nil || t != json.Delim('[') {
				return "", bad(fmt.Errorf("jobs is not a list (%v)", err))
			}
			for d.More() {
				var j Job
				if err := d.Decode(&j); err != nil {
					return "", bad(err)
				}
				job, err := c.jobOfWire(j)
				if err != nil {
					return "", err
				}
				if !fn(job) {
					return "", nil
				}
			}
			if _, err := d.Token(); err != nil {
				return "", bad(err)
			}
		default:
			var skip json.RawMessage
			if err := d.Decode(&skip); err != nil {
				return "", bad(err)
			}
		}
	}
	if _, err := d.Token(); err != nil {
		return "", bad(err)
	}
	return next, nil
}

// Jobs lists the jobs in state, in the order storh.Queue.Jobs gives them,
// with their data when withData, a page (a request) at a time, each job
// as it is read. As with storh.Queue.Jobs, a job that stays in state is
// listed once, and one that changes state meanwhile may be listed twice
// or not at all.
func (c *Client) Jobs(ctx context.Context, queue string, state storh.JobState, withData bool) iter.Seq2[storh.Job, error] {
	return func(yield func(storh.Job, error) bool) {
		after := ""
		for {
			stopped := false
			next, err := c.jobsPage(ctx, queue, state, after, 0, withData, func(j storh.Job) bool {
				stopped = !yield(j, nil)
				return !stopped
			})
			switch {
			case stopped:
				return
			case err != nil:
				yield(storh.Job{}, err)
				return
			case next == "":
				return
			}
			after = next
		}
	}
}

// JobBatch is one action on many jobs, for Client.Batch.
type JobBatch struct {
	// Action is complete, fail, extend, retry, release or cancel.
	Action string
	// Jobs are the jobs, by ID. A Job that carries a claim's Token
	// (complete, fail, extend) is acted on only while that claim holds.
	Jobs []storh.Job
	// Reason is a failure's last error; Lease an extension's new lease
	// from now (0: the server's default, 5m).
	Reason string
	Lease  time.Duration
}

// Batch runs b's action on each of its jobs in one transaction on the
// server, all or none, and gives the jobs as they are right after, without
// their data (a cancelled one by its id alone). A job the action refuses
// fails the batch and nothing is written: the error is an *Error whose
// Item is the job's place in b.Jobs (1-based), whose message names its id,
// and which wraps the refusal's sentinel (storh.ErrNotClaimed,
// storh.ErrNotDead, storh.ErrClaimed, storh.ErrNotFound). A job given
// twice is refused before anything is written (kind bad_request), as is a
// body over the server's limit (WithMaxBody).
func (c *Client) Batch(ctx context.Context, queue string, b JobBatch) ([]storh.Job, error) {
	req := BatchRequest{Action: b.Action, Reason: b.Reason, IDs: make([]string, len(b.Jobs))}
	if b.Lease != 0 {
		req.Lease = b.Lease.String()
	}
	for i, j := range b.Jobs {
		req.IDs[i] = j.ID.String()
		if j.Token != 0 {
			if req.Tokens == nil {
				req.Tokens = make([]string, len(b.Jobs))
			}
			req.Tokens[i] = strconv.FormatUint(j.Token, 10)
		}
	}
	var out Batched
	if err := c.sendJSON(ctx, http.MethodPost, queuePath(queue)+"/batch", nil, req, &out); err != nil {
		return nil, err
	}
	jobs := make([]storh.Job, len(out.Jobs))
	for i, j := range out.Jobs {
		var err error
		if jobs[i], err = c.jobOfWire(j); err != nil {
			return nil, err
		}
	}
	return jobs, nil
}

// PurgeDone deletes the jobs completed more than olderThan ago and says
// how many; PurgeDead does it for the dead ones. The server purges in
// bounded steps, a request each, all by the cutoff its first step took
// from its clock; each step is durable, so an error leaves the jobs of
// the steps before it purged (the count says how many).
func (c *Client) PurgeDone(ctx context.Context, queue string, olderThan time.Duration) (int, error) {
	return c.purge(ctx, queue, "done", olderThan)
}

// PurgeDead deletes the dead jobs that died more than olderThan ago.
func (c *Client) PurgeDead(ctx context.Context, queue string, olderThan time.Duration) (int, error) {
	return c.purge(ctx, queue, "dead", olderThan)
}

func (c *Client) purge(ctx context.Context, queue, state string, olderThan time.Duration) (int, error) {
	req := PurgeRequest{State: state, OlderThan: olderThan.String(), Limit: c.purgeStep}
	total := 0
	for {
		var out Purged
		if err := c.sendJSON(ctx, http.MethodPost, queuePath(queue)+"/purge", nil, req, &out); err != nil {
			return total, err
		}
		total += out.Purged
		if !out.More {
			return total, nil
		}
		if out.Before == "" {
			return total, fmt.Errorf("%w of %s: a purge step with more to do and no cutoff", ErrAnswer, c.base)
		}
		req.OlderThan, req.Before = "", out.Before
	}
}

// QueueOptions gives the options stored with a queue, and false for a
// queue from a storh from before options were stored, as
// storh.DB.QueueOptions.
func (c *Client) QueueOptions(ctx context.Context, queue string) (storh.QueueOptions, bool, error) {
	var out QueueOptions
	if err := c.getJSON(ctx, queuePath(queue)+"/options", nil, &out); err != nil {
		return storh.QueueOptions{}, false, err
	}
	return c.optionsOfWire(out)
}

// SetQueueOptions changes the options stored with a queue, as
// storh.DB.SetQueueOptions: what change gives replaces its value, the rest
// keeps it. A missing queue is an *Error wrapping storh.ErrNotFound unless
// create, which makes it. It gives the options as they then are.
func (c *Client) SetQueueOptions(ctx context.Context, queue string, change QueueOptionsChange, create bool) (storh.QueueOptions, bool, error) {
	var vals url.Values
	if create {
		vals = url.Values{"create": {"1"}}
	}
	var out QueueOptions
	if err := c.sendJSON(ctx, http.MethodPut, queuePath(queue)+"/options", vals, change, &out); err != nil {
		return storh.QueueOptions{}, false, err
	}
	return c.optionsOfWire(out)
}

func (c *Client) optionsOfWire(out QueueOptions) (storh.QueueOptions, bool, error) {
	o := storh.QueueOptions{MaxAttempts: out.MaxAttempts}
	var err1, err2 error
	o.BackoffMin, err1 = time.ParseDuration(out.BackoffMin)
	o.BackoffMax, err2 = time.ParseDuration(out.BackoffMax)
	if err := errors.Join(err1, err2); err != nil {
		return o, false, fmt.Errorf("%w of %s: backoff: %v", ErrAnswer, c.base, err)
	}
	return o, out.Stored, nil
}
