package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// defaultLease is the lease of a claim or an extension that gives none,
// as the CLI's.
const defaultLease = 5 * time.Minute

// queue opens the existing queue name. WithoutCreate, as for every name
// from a request: a typo must not make a queue. Only an enqueue, and a PUT
// of options that asks for it, create one.
func (h *handler) queue(name string, create bool) (*storh.Queue, error) {
	var opts []storh.CollectionOption
	if !create {
		opts = append(opts, storh.WithoutCreate())
	}
	q, err := h.db.Queue(name, opts...)
	if errors.Is(err, storh.ErrWrongKind) {
		err = &apiError{status: http.StatusConflict, kind: KindWrongKind, err: err,
			msg: fmt.Sprintf("web: collection %q is not a queue: its records are under api/collections", name)}
	}
	return q, err
}

// queueError is err as the queue endpoints answer it: storh's
// ErrInvalidOption is a lease, time or option of the request that storh
// refused (classify reads it as a schema's, the other endpoint that sends
// storh an option).
func queueError(err error) error {
	var ae *apiError
	if errors.Is(err, storh.ErrInvalidOption) && !errors.As(err, &ae) {
		return &apiError{status: http.StatusBadRequest, kind: KindInvalidOption, err: err, msg: err.Error()}
	}
	return err
}

// readJSONBody decodes the body of a queue write into v: a JSON object of
// v's fields and no others, or nothing at all (every field's default).
func (h *handler) readJSONBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r, h.cfg.maxBody)
	if err != nil {
		return err
	}
	return decodeJSONBody(body, v)
}

// decodeJSONBody decodes body as readJSONBody does.
func decodeJSONBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return &apiError{status: http.StatusBadRequest, kind: KindBadRequest, err: storh.ErrInvalidData,
			msg: fmt.Sprintf("web: body: %v", err)}
	}
	if d.More() {
		return badRequest("web: body: one JSON object, and nothing after it")
	}
	return nil
}

// parseDuration reads a duration field of a body: a Go duration, def when
// left out, and positive unless zeroOK (then not negative).
func parseDuration(field, s string, def time.Duration, zeroOK bool) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, badRequest(fmt.Sprintf("web: %s %q: use a Go duration (30s, 5m, 1h30m)", field, s))
	case d < 0 || (d == 0 && !zeroOK):
		// As storh refuses a lease that is not positive.
		return 0, &apiError{status: http.StatusBadRequest, kind: KindInvalidOption, err: storh.ErrInvalidOption,
			msg: fmt.Sprintf("web: %s %q: the duration must be positive", field, s)}
	}
	return d, nil
}

// writeJob answers with job as the API writes it.
func writeJob(w http.ResponseWriter, status int, j storh.Job, withData bool) {
	out, err := jobOf(j, withData)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, status, out)
}

// jobOf is j as the API writes it, with its data when withData.
func jobOf(j storh.Job, withData bool) (Job, error) {
	out := Job{ID: j.ID.String(), Time: j.Time().UTC().Format(jsonl.TimeLayout), State: j.State.String(),
		Attempts: j.Attempts, LastError: j.LastError}
	for _, t := range []struct {
		at  time.Time
		out *string
	}{{j.LeaseUntil, &out.LeaseUntil}, {j.Due, &out.Due}, {j.Changed, &out.Changed}} {
		if !t.at.IsZero() {
			*t.out = t.at.UTC().Format(jsonl.TimeLayout)
		}
	}
	if j.Token != 0 {
		out.Token = strconv.FormatUint(j.Token, 10)
	}
	if withData {
		line, err := jsonl.AppendRecord(nil, j.ID, j.Raw())
		if err != nil {
			return out, err
		}
		var rec struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return out, err
		}
		out.Data = rec.Data
	}
	return out, nil
}

// queueCounts serves GET api/queues/{name}: the jobs in each state. It
// reads a counter per state, whatever the queue's size.
func (h *handler) queueCounts(w http.ResponseWriter, r *http.Request) {
	if !noParams(w, r) {
		return
	}
	name := r.PathValue("name")
	q, err := h.queue(name, false)
	if err != nil {
		writeError(w, err)
		return
	}
	n, err := q.Counts()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, QueueCounts{Name: name, Pending: n.Pending, Scheduled: n.Scheduled, Claimed: n.Claimed, Done: n.Done, Dead: n.Dead})
}

// enqueue serves POST api/queues/{name}/jobs (WithWrites): the payloads of
// the body's jobs, in one transaction, all or none. It is the one write
// that creates a missing queue, as storh's first Enqueue does; a failed
// enqueue creates nothing.
func (h *handler) enqueue(w http.ResponseWriter, r *http.Request) {
	if h.writesOff(w) || !noParams(w, r) {
		return
	}
	// Many jobs in one body, as an import's records: its limit and
	// memory budget, not a single record's.
	body, release, err := h.readBulkBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	var req EnqueueRequest
	if err := decodeJSONBody(body, &req); err != nil {
		writeError(w, err)
		return
	}
	if len(req.Jobs) == 0 {
		writeError(w, badRequest(`web: body: no jobs: send {"jobs":[{…payload…}, …]}`))
		return
	}
	var at time.Time
	if req.At != "" {
		ms, err := parseTimeMs("at", req.At)
		if err != nil {
			writeError(w, err)
			return
		}
		at = time.UnixMilli(ms)
	}
	payloads := make([]any, len(req.Jobs))
	for i, raw := range req.Jobs {
		v, err := jsonl.DecodeValue(raw)
		if err == nil {
			if _, ok := v.(map[string]any); !ok {
				err = fmt.Errorf("%w: a job's payload is a JSON object, not %s", storh.ErrInvalidData, kindOfJSON(raw))
			}
		}
		if err != nil {
			writeError(w, &itemError{item: i + 1, err: &apiError{status: http.StatusBadRequest, kind: KindBadRequest,
				err: storh.ErrInvalidData, msg: fmt.Sprintf("web: enqueue into %q, nothing written: job %d: %v", r.PathValue("name"), i+1, err)}})
			return
		}
		payloads[i] = v
	}
	name := r.PathValue("name")
	q, err := h.queue(name, true)
	if err != nil {
		writeError(w, err)
		return
	}
	var ids []uuidv7.UUID
	if req.At != "" {
		ids, err = q.EnqueueManyAt(at, payloads)
	} else {
		ids, err = q.EnqueueMany(payloads)
	}
	if err != nil {
		var se *storh.Error
		if errors.As(err, &se) && se.Index >= 0 && se.Index < len(payloads) && se.Err != nil {
			// Worded as a payload the handler refuses: the job, and
			// what storh said of it.
			err = &itemError{item: se.Index + 1, err: fmt.Errorf("web: enqueue into %q, nothing written: job %d: %w", name, se.Index+1, se.Err)}
		}
		writeError(w, queueError(err))
		return
	}
	out := Enqueued{IDs: make([]string, len(ids))}
	for i, id := range ids {
		out.IDs[i] = id.String()
	}
	writeJSON(w, http.StatusCreated, out)
}

// kindOfJSON names the JSON type of b, for a message.
func kindOfJSON(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// claim serves POST api/queues/{name}/claims (WithWrites): up to n of the
// due jobs (n above the page size, WithMaxPage, is lowered to it), leased
// until lease from now, each with its data and claim token. With wait
// (lowered to maxClaimWait), when none is due, it waits up to wait for
// one (storh.Queue.ClaimWait) and then claims it and up to n-1 more that
// are due by then. None due, after the wait, is an empty list: a poll
// that finds nothing has not failed. Claims whose answer never reaches
// the client hold their jobs until their leases end, as a worker that
// died does.
func (h *handler) claim(w http.ResponseWriter, r *http.Request) {
	if h.writesOff(w) || !noParams(w, r) {
		return
	}
	var req ClaimRequest
	if err := h.readJSONBody(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	n := req.N
	switch {
	case n == 0:
		n = 1
	case n < 0:
		writeError(w, badRequest(fmt.Sprintf("web: n %d: claim at least 1 job", n)))
		return
	case n > h.cfg.maxPage:
		// As a page's limit: lowered to the page size, which bounds
		// the answer held in memory.
		n = h.cfg.maxPage
	}
	lease, err := parseDuration("lease", req.Lease, defaultLease, false)
	if err != nil {
		writeError(w, err)
		return
	}
	wait, err := parseDuration("wait", req.Wait, 0, true)
	// A longer wait is lowered to the bound, as a page's limit is to the
	// page size: a client that wants to wait longer asks again.
	wait = min(wait, h.maxClaimWait())
	if err != nil {
		writeError(w, err)
		return
	}
	q, err := h.queue(r.PathValue("name"), false)
	if err != nil {
		writeError(w, err)
		return
	}
	jobs, err := q.ClaimMany(n, lease)
	if errors.Is(err, storh.ErrEmpty) && wait > 0 {
		jobs, err = claimWaiting(r.Context(), q, n, lease, wait)
	}
	if errors.Is(err, storh.ErrEmpty) {
		jobs, err = nil, nil
	}
	if err != nil {
		writeError(w, queueError(err))
		return
	}
	out := Claimed{Jobs: make([]Job, 0, len(jobs))}
	for _, j := range jobs {
		job, err := jobOf(j, true)
		if err != nil {
			writeError(w, err)
			return
		}
		out.Jobs = append(out.Jobs, job)
	}
	writeJSON(w, http.StatusOK, out)
}

// maxClaimWait is the longest a claim waits: half the request
// time limit, so that a claim made at the end of its wait has the other
// half to commit and answer.
func (h *handler) maxClaimWait() time.Duration {
	if h.cfg.timeout <= 0 {
		return DefaultTimeout / 2
	}
	return h.cfg.timeout / 2
}

// claimWaiting waits up to wait for a job to be due and claims it, then up
// to n-1 more that are due (storh.ErrEmpty when none came).
func claimWaiting(ctx context.Context, q *storh.Queue, n int, lease, wait time.Duration) ([]storh.Job, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	first, err := q.ClaimWait(wctx, lease)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, storh.ErrEmpty
		}
		return nil, err
	}
	jobs := []storh.Job{first}
	if n > 1 {
		more, err := q.ClaimMany(n-1, lease)
		if err != nil && !errors.Is(err, storh.ErrEmpty) {
			// The first claim is made: answer with it, and let the
			// error come at the next claim. Its lease brings it
			// back if nobody reads this answer.
			return jobs, nil
		}
		jobs = append(jobs, more...)
	}
	return jobs, nil
}

// jobTarget opens the queue and reads the job id a job's path names,
// answering with the error when it cannot.
func (h *handler) jobTarget(w http.ResponseWriter, r *http.Request) (*storh.Queue, uuidv7.UUID, bool) {
	q, err := h.queue(r.PathValue("name"), false)
	if err == nil {
		var id uuidv7.UUID
		if id, err = uuidv7.Parse(r.PathValue("id")); err == nil {
			return q, id, true
		}
		err = &apiError{status: http.StatusBadRequest, kind: KindBadRequest, err: storh.ErrInvalidID,
			msg: "web: job id: " + err.Error()}
	}
	writeError(w, err)
	return nil, uuidv7.UUID{}, false
}

// lookupJob serves GET api/queues/{name}/jobs/{id}: the job as it is now,
// data included.
func (h *handler) lookupJob(w http.ResponseWriter, r *http.Request) {
	if !noParams(w, r) {
		return
	}
	q, id, ok := h.jobTarget(w, r)
	if !ok {
		return
	}
	j, err := q.Lookup(id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJob(w, http.StatusOK, j, true)
}

// cancelJob serves DELETE api/queues/{name}/jobs/{id} (WithWrites):
// storh.Queue.Cancel, which deletes a job no worker holds and refuses one
// whose claim holds (409 claimed).
func (h *handler) cancelJob(w http.ResponseWriter, r *http.Request) {
	if h.writesOff(w) || !noParams(w, r) {
		return
	}
	q, id, ok := h.jobTarget(w, r)
	if !ok {
		return
	}
	if err := q.Cancel(id); err != nil {
		writeError(w, queueError(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// jobAction serves POST api/queues/{name}/jobs/{id}/{action}
// (WithWrites): complete, fail, extend (each by id, or by the claim's
// token when the body gives one), retry and release. It answers with the
// job as it is right after, without its data; a job gone by then (another
// request cancelled or purged it) is answered with its id alone.
func (h *handler) jobAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.writesOff(w) || !noParams(w, r) {
			return
		}
		var req JobAction
		if err := h.readJSONBody(w, r, &req); err != nil {
			writeError(w, err)
			return
		}
		if err := checkAction(action, req); err != nil {
			writeError(w, err)
			return
		}
		q, id, ok := h.jobTarget(w, r)
		if !ok {
			return
		}
		job := storh.Job{Record: storh.Record{ID: id}}
		if req.Token != "" {
			t, ok := parseToken(req.Token)
			if !ok {
				writeError(w, badRequest(fmt.Sprintf("web: token %q: send the token a claim gave, a decimal number", req.Token)))
				return
			}
			job.Token = t
		}
		lease, _ := parseDuration("lease", req.Lease, defaultLease, false)
		until, err := actOn(q, action, job, req.Reason, lease)
		if err != nil {
			writeError(w, queueError(err))
			return
		}
		after, err := q.Lookup(id)
		if err != nil {
			// Gone already (or unreadable): the action is done, and
			// failing the request would say it was not.
			out := Job{ID: id.String(), Time: id.Time().UTC().Format(jsonl.TimeLayout)}
			if !until.IsZero() {
				out.LeaseUntil = until.UTC().Format(jsonl.TimeLayout)
			}
			writeJSON(w, http.StatusOK, out)
			return
		}
		if !until.IsZero() {
			// The lease the extension set, whatever the lookup raced
			// with.
			after.LeaseUntil = until
		}
		writeJob(w, http.StatusOK, after, false)
	}
}

// parseToken reads a claim's token as a request gives it: a decimal
// number, never 0.
func parseToken(s string) (uint64, bool) {
	t, err := strconv.ParseUint(s, 10, 64)
	return t, err == nil && t != 0
}

// actOn does action (complete, fail, extend, retry, release or cancel) to
// job in q, by the claim's token where job has one and the action takes
// it, and returns the lease an extension set.
func actOn(q *storh.Queue, action string, job storh.Job, reason string, lease time.Duration) (until time.Time, err error) {
	switch action {
	case "complete":
		if job.Token != 0 {
			return until, q.CompleteClaim(job)
		}
		return until, q.Complete(job.ID)
	case "fail":
		if job.Token != 0 {
			return until, q.FailClaim(job, reason)
		}
		return until, q.Fail(job.ID, reason)
	case "extend":
		if job.Token != 0 {
			return q.ExtendClaim(job, lease)
		}
		return q.Extend(job.ID, lease)
	case "retry":
		return until, q.Retry(job.ID)
	case "release":
		return until, q.Release(job.ID)
	case "cancel":
		return until, q.Cancel(job.ID)
	}
	return until, fmt.Errorf("web: unknown job action %q", action)
}

// checkAction refuses the fields of a JobAction that action does not
// take, and a bad lease, before anything is written.
func checkAction(action string, req JobAction) error {
	takes := map[string][]string{"complete": {"token"}, "fail": {"token", "reason"}, "extend": {"token", "lease"}}[action]
	for _, f := range []struct {
		name string
		set  bool
	}{{"token", req.Token != ""}, {"reason", req.Reason != ""}, {"lease", req.Lease != ""}} {
		if !f.set {
			continue
		}
		if !slices.Contains(takes, f.name) {
			return badRequest(fmt.Sprintf("web: %s takes no %s", action, f.name))
		}
	}
	if action == "extend" {
		if _, err := parseDuration("lease", req.Lease, defaultLease, false); err != nil {
			return err
		}
	}
	return nil
}

// jobStates are the states a list of jobs names.
var jobStates = map[string]storh.JobState{"pending": storh.JobPending, "claimed": storh.JobClaimed, "done": storh.JobDone, "dead": storh.JobDead}

// listJobs serves GET api/queues/{name}/jobs: a page of the jobs in state
// (default pending), in the order storh.Queue.Jobs gives them, with their
// data when data=1, and the cursor of the next page, which the after
// parameter takes (storh.Queue.JobsPage). A page holds limit jobs, lowered
// to the page size (WithMaxPage), its default.
func (h *handler) listJobs(w http.ResponseWriter, r *http.Request) {
	vals := r.URL.Query()
	for k, vs := range vals {
		if k != "state" && k != "data" && k != "limit" && k != "after" {
			writeError(w, badRequest(fmt.Sprintf("web: unknown parameter %q; the parameters are state, data, limit and after", k)))
			return
		}
		if len(vs) > 1 {
			writeError(w, badRequest(fmt.Sprintf("web: parameter %q is given %d times; give it once", k, len(vs))))
			return
		}
	}
	state := storh.JobPending
	if s := vals.Get("state"); s != "" {
		var ok bool
		if state, ok = jobStates[s]; !ok {
			writeError(w, badRequest(fmt.Sprintf("web: parameter state=%q: use pending, claimed, done or dead", s)))
			return
		}
	}
	withData, err := flag(vals, "data")
	limit := h.cfg.maxPage
	if err == nil && vals.Get("limit") != "" {
		limit, err = parseLimit(vals.Get("limit"), h.cfg.maxPage)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	q, err := h.queue(r.PathValue("name"), false)
	if err != nil {
		writeError(w, err)
		return
	}
	jobs, next, err := q.JobsPage(state, vals.Get("after"), limit)
	if err != nil {
		writeError(w, err)
		return
	}
	// A job without its data is about 200 bytes of JSON: room for the
	// page, up to the point where it streams.
	buf := append(make([]byte, 0, min(streamAfter, 4096+len(jobs)*256)), `{"jobs":[`...)
	started := false
	n := 0
	for _, j := range jobs {
		err := r.Context().Err()
		if err == nil && withData {
			if j, err = q.Lookup(j.ID); errors.Is(err, storh.ErrNotFound) {
				continue // purged since it was listed
			}
		}
		var out Job
		if err == nil {
			out, err = jobOf(j, withData)
		}
		if err == nil {
			if n > 0 {
				buf = append(buf, ',')
			}
			buf, err = appendJSON(buf, out)
			buf = bytes.TrimSuffix(buf, []byte("\n"))
		}
		if err != nil {
			if !started {
				writeError(w, err)
				return
			}
			if errors.Is(r.Context().Err(), context.Canceled) {
				return // the client went away
			}
			// The status is sent: cut the connection, so that the client
			// sees a broken page, not a short one.
			panic(http.ErrAbortHandler)
		}
		n++
		if len(buf) >= streamAfter {
			// A page of big payloads is sent as it is read, not held.
			if !started {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				started = true
			}
			if _, err := w.Write(buf); err != nil {
				return
			}
			buf = buf[:0]
		}
	}
	buf = append(buf, `],"next":`...)
	buf = strconv.AppendQuote(buf, next)
	buf = append(buf, "}\n"...)
	if !started {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
	}
	w.Write(buf)
}

// batchActions are the actions a batch takes, and whether each takes a
// claim's token.
var batchActions = map[string]bool{"complete": true, "fail": true, "extend": true, "retry": false, "release": false, "cancel": false}

// batchJobs serves POST api/queues/{name}/batch (WithWrites): one action
// on many jobs in one transaction (storh.DB.Update), all or none. The
// first job the action refuses (or that is not in the queue) fails the
// batch with that job's error, its place in the body as the error's item
// and its id in the message, and nothing is written. The body's limit
// (WithMaxBody) bounds a batch, some 20 000 ids by default.
func (h *handler) batchJobs(w http.ResponseWriter, r *http.Request) {
	if h.writesOff(w) || !noParams(w, r) {
		return
	}
	var req BatchRequest
	if err := h.readJSONBody(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	name := r.PathValue("name")
	jobs, lease, err := checkBatch(req)
	if err != nil {
		writeError(w, err)
		return
	}
	if _, err := h.queue(name, false); err != nil {
		writeError(w, err)
		return
	}
	out := Batched{Jobs: make([]Job, len(jobs))}
	err = h.db.Update(func(tx *storh.Tx) error {
		q, err := tx.Queue(name, storh.WithoutCreate())
		if err != nil {
			return err
		}
		for i, job := range jobs {
			until, err := actOn(q, req.Action, job, req.Reason, lease)
			if err != nil {
				return &itemError{item: i + 1, err: fmt.Errorf("web: %s in queue %q, nothing written: job %d (%s): %w", req.Action, name, i+1, job.ID, err)}
			}
			out.Jobs[i] = Job{ID: job.ID.String(), Time: job.ID.Time().UTC().Format(jsonl.TimeLayout)}
			if req.Action == "cancel" {
				continue
			}
			after, err := q.Lookup(job.ID)
			if err != nil {
				return err
			}
			if !until.IsZero() {
				after.LeaseUntil = until
			}
			if out.Jobs[i], err = jobOf(after, false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		writeError(w, queueError(err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// checkBatch reads a batch's jobs, and its lease for an extension,
// refusing what the action does not take before anything is written.
func checkBatch(req BatchRequest) ([]storh.Job, time.Duration, error) {
	takesToken, ok := batchActions[req.Action]
	switch {
	case !ok:
		return nil, 0, badRequest(fmt.Sprintf("web: action %q: use complete, fail, extend, retry, release or cancel", req.Action))
	case len(req.IDs) == 0:
		return nil, 0, badRequest(`web: body: no ids: send {"action":…,"ids":["…", …]}`)
	case len(req.Tokens) > 0 && !takesToken:
		return nil, 0, badRequest(fmt.Sprintf("web: %s takes no tokens", req.Action))
	case len(req.Tokens) > 0 && len(req.Tokens) != len(req.IDs):
		return nil, 0, badRequest(fmt.Sprintf("web: %d tokens for %d ids: give one for each id (\"\" for none), in the same order", len(req.Tokens), len(req.IDs)))
	}
	// The single action's checks of reason and lease (cancel takes
	// neither).
	if err := checkAction(req.Action, JobAction{Reason: req.Reason, Lease: req.Lease}); err != nil {
		return nil, 0, err
	}
	lease, _ := parseDuration("lease", req.Lease, defaultLease, false)
	jobs := make([]storh.Job, len(req.IDs))
	seen := make(map[uuidv7.UUID]int, len(req.IDs))
	for i, s := range req.IDs {
		id, err := uuidv7.Parse(s)
		if err != nil {
			return nil, 0, &itemError{item: i + 1, err: &apiError{status: http.StatusBadRequest, kind: KindBadRequest, err: storh.ErrInvalidID,
				msg: fmt.Sprintf("web: batch, nothing written: id %d %q: %v", i+1, s, err)}}
		}
		if first, ok := seen[id]; ok {
			return nil, 0, &itemError{item: i + 1, err: badRequest(fmt.Sprintf("web: batch, nothing written: id %d (%s) is id %d again: give each job once", i+1, id, first))}
		}
		seen[id] = i + 1
		jobs[i] = storh.Job{Record: storh.Record{ID: id}}
		if len(req.Tokens) > 0 && req.Tokens[i] != "" {
			t, ok := parseToken(req.Tokens[i])
			if !ok {
				return nil, 0, &itemError{item: i + 1, err: badRequest(fmt.Sprintf("web: batch, nothing written: token %d %q: send the token a claim gave, a decimal number", i+1, req.Tokens[i]))}
			}
			jobs[i].Token = t
		}
	}
	return jobs, lease, nil
}

// purgeLimit is the most jobs one purge request deletes: one transaction
// of storh's own purge step, which holds the writers for a short time and
// keeps the request far within its time limit however large the purge.
const purgeLimit = 5000

// purgeJobs serves POST api/queues/{name}/purge (WithWrites): one bounded
// step of a purge of the done (or dead) jobs older than older_than (or
// than before, the cutoff of an earlier step), as
// storh.Queue.PurgeDoneBefore and PurgeDeadBefore, in one transaction of
// at most limit jobs (purgeLimit and its default). It answers how many
// went, whether more remain, and the cutoff, so that a client loops until
// more is false with every step purging by the same time.
func (h *handler) purgeJobs(w http.ResponseWriter, r *http.Request) {
	if h.writesOff(w) || !noParams(w, r) {
		return
	}
	var req PurgeRequest
	if err := h.readJSONBody(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.State != "" && req.State != "done" && req.State != "dead" {
		writeError(w, badRequest(fmt.Sprintf("web: state %q: purge done or dead jobs", req.State)))
		return
	}
	if req.OlderThan != "" && req.Before != "" {
		writeError(w, badRequest("web: give older_than or before, not both: before is the cutoff an earlier step answered"))
		return
	}
	limit := purgeLimit
	switch {
	case req.Limit < 0:
		writeError(w, badRequest(fmt.Sprintf("web: limit %d: purge at least 1 job a step", req.Limit)))
		return
	case req.Limit > 0:
		limit = min(req.Limit, purgeLimit)
	}
	older, err := parseDuration("older_than", req.OlderThan, 0, true)
	if err != nil {
		writeError(w, err)
		return
	}
	var before time.Time
	if req.Before != "" {
		ms, err := parseTimeMs("before", req.Before)
		if err != nil {
			writeError(w, err)
			return
		}
		before = time.UnixMilli(ms).UTC()
	}
	q, err := h.queue(r.PathValue("name"), false)
	if err != nil {
		writeError(w, err)
		return
	}
	if before.IsZero() {
		before = q.Now().Add(-older.Truncate(time.Millisecond))
	}
	purge := q.PurgeDoneBefore
	if req.State == "dead" {
		purge = q.PurgeDeadBefore
	}
	n, more, err := purge(before, limit)
	if err != nil {
		writeError(w, queueError(err))
		return
	}
	writeJSON(w, http.StatusOK, Purged{Purged: n, More: more, Before: before.Format(jsonl.TimeLayout)})
}

// getQueueOptions serves GET api/queues/{name}/options: the options
// stored with the queue.
func (h *handler) getQueueOptions(w http.ResponseWriter, r *http.Request) {
	if !noParams(w, r) {
		return
	}
	h.writeQueueOptions(w, r.PathValue("name"))
}

func (h *handler) writeQueueOptions(w http.ResponseWriter, name string) {
	if _, err := h.queue(name, false); err != nil {
		writeError(w, err)
		return
	}
	o, stored, err := h.db.QueueOptions(name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, QueueOptions{Name: name, MaxAttempts: o.MaxAttempts,
		BackoffMin: o.BackoffMin.String(), BackoffMax: o.BackoffMax.String(), Stored: stored})
}

// putQueueOptions serves PUT api/queues/{name}/options (WithWrites):
// storh.DB.SetQueueOptions with the fields the body gives. A missing
// queue is 404 unless the parameter create=1 asks to make it, as the
// CLI's options command makes one on a file.
func (h *handler) putQueueOptions(w http.ResponseWriter, r *http.Request) {
	if h.writesOff(w) {
		return
	}
	vals := r.URL.Query()
	for k, vs := range vals {
		if k != "create" || len(vs) > 1 {
			writeError(w, badRequest(fmt.Sprintf("web: parameter %q: the one parameter is create=1, given once", k)))
			return
		}
	}
	create, err := flag(vals, "create")
	if err != nil {
		writeError(w, err)
		return
	}
	var req QueueOptionsChange
	if err := h.readJSONBody(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	opts, err := optionsOf(req)
	if err != nil {
		writeError(w, err)
		return
	}
	name := r.PathValue("name")
	if !create {
		if _, err := h.queue(name, false); err != nil {
			writeError(w, err)
			return
		}
	}
	if err := h.db.SetQueueOptions(name, opts...); err != nil {
		if errors.Is(err, storh.ErrWrongKind) {
			err = &apiError{status: http.StatusConflict, kind: KindWrongKind, err: err,
				msg: fmt.Sprintf("web: collection %q is not a queue: its records are under api/collections", name)}
		}
		writeError(w, queueError(err))
		return
	}
	h.writeQueueOptions(w, name)
}

// optionsOf reads a change of options into storh's options.
func optionsOf(req QueueOptionsChange) ([]storh.CollectionOption, error) {
	var opts []storh.CollectionOption
	if req.MaxAttempts != nil {
		if *req.MaxAttempts < 1 {
			return nil, &apiError{status: http.StatusBadRequest, kind: KindInvalidOption, err: storh.ErrInvalidOption,
				msg: fmt.Sprintf("web: max_attempts %d: a job needs at least one attempt", *req.MaxAttempts)}
		}
		opts = append(opts, storh.WithMaxAttempts(*req.MaxAttempts))
	}
	if (req.BackoffMin == nil) != (req.BackoffMax == nil) {
		return nil, badRequest("web: give backoff_min and backoff_max together (\"0s\" and \"0s\" for no backoff)")
	}
	if req.BackoffMin != nil {
		lo, err := parseDuration("backoff_min", *req.BackoffMin, 0, true)
		if err != nil {
			return nil, err
		}
		hi, err := parseDuration("backoff_max", *req.BackoffMax, 0, true)
		if err != nil {
			return nil, err
		}
		opts = append(opts, storh.WithBackoff(lo, hi))
	}
	if len(opts) == 0 {
		return nil, badRequest("web: body: no option to set: give max_attempts, or backoff_min and backoff_max")
	}
	return opts, nil
}
