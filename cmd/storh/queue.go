package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

func (a *app) queueCmd() *cobra.Command {
	cmd := groupCmd("queue", "Work with a durable job queue: enqueue, claim, complete, fail, retry, cancel, release, extend, lookup, stats, options, purge",
		a.queueEnqueueCmd(), a.queueClaimCmd(), a.queueCompleteCmd(), a.queueFailCmd(),
		a.queueRetryCmd(), a.queueCancelCmd(), a.queueReleaseCmd(), a.queueExtendCmd(), a.queueLookupCmd(),
		a.queueJobsCmd(), a.queueStatsCmd(), a.queueOptionsCmd(), a.queuePurgeCmd())
	cmd.Long = `A queue hands jobs from producers to workers, in the same file as the
collections. A job is a JSON object and a state: pending, claimed (leased to
one worker until its lease ends), done, or dead (it failed its last allowed
attempt). Claims take the due jobs, due first, then in enqueue order; a claim whose
lease ends is pending again at the next claim, so the jobs of a worker that
died are not lost. Programs use the library (db.Queue); these commands are
for scripts, inspection and repair by hand, on a database file, on
PostgreSQL, or over --url through a server's API (storh serve --write).
See docs/queue.md.`
	cmd.Example = `  storh queue enqueue emails '{"to":"ann@example.com"}'
  storh queue claim emails --lease 5m
  storh queue complete emails 0190a4f4-5c3b-7def-8123-456789abcdef
  storh queue fail emails 0190a4f4-5c3b-7def-8123-456789abcdef --reason "smtp timeout"
  storh queue jobs emails --state dead
  storh queue retry emails 0190a4f4-5c3b-7def-8123-456789abcdef
  storh queue cancel emails 0190a4f4-5c3b-7def-8123-456789abcdef
  storh queue release emails 0190a4f4-5c3b-7def-8123-456789abcdef
  storh queue extend emails 0190a4f4-5c3b-7def-8123-456789abcdef --lease 1h
  storh queue lookup emails 0190a4f4-5c3b-7def-8123-456789abcdef
  storh queue stats emails
  storh queue options emails --max-attempts 8 --backoff 1s,5m
  storh queue purge emails --older-than 168h`
	for _, sub := range cmd.Commands() {
		sub.ValidArgsFunction = a.completeColl(1)
	}
	return cmd
}

// openQueue opens the database and the queue name. With create a missing
// queue is made (by the first enqueue); without, it must exist. Another
// kind of collection by that name is an error.
func (a *app) openQueue(name string, write, create bool) (*storh.DB, *storh.Queue, error) {
	if err := checkCollNames([]string{name}); err != nil {
		return nil, nil, err
	}
	var db *storh.DB
	var err error
	if create {
		db, err = a.open(true)
	} else {
		var found []storh.CollectionInfo
		db, found, err = a.openExisting(write, name)
		if err == nil && found[0].Kind != "queue" {
			db.Close()
			return nil, nil, notQueue(name, found[0].Kind)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	q, err := db.Queue(name)
	if err != nil {
		db.Close()
		if errors.Is(err, storh.ErrWrongKind) {
			return nil, nil, fmt.Errorf("collection %s is not a queue: choose another name", qname(name))
		}
		return nil, nil, err
	}
	return db, q, nil
}

// openStoreQueue opens the store (the database read-only, or the server
// of --url) and checks that the queue name exists, as openQueue does
// without create.
func (a *app) openStoreQueue(name string) (store, error) {
	if err := checkCollNames([]string{name}); err != nil {
		return nil, err
	}
	st, found, err := a.openStoreExisting(false, name)
	if err != nil {
		return nil, err
	}
	if found[0].Kind != "queue" {
		st.close()
		return nil, notQueue(name, found[0].Kind)
	}
	return st, nil
}

func notQueue(name, kind string) error {
	if kind == "docs" {
		kind = "docs collection"
	}
	return fmt.Errorf("collection %s is a %s, not a queue", qname(name), kind)
}

type jobJSON struct {
	ID         string          `json:"id"`
	Time       string          `json:"time"`
	State      string          `json:"state"`
	Attempts   int             `json:"attempts"`
	LeaseUntil string          `json:"lease_until,omitempty"`
	Token      string          `json:"token,omitempty"`
	Due        string          `json:"due,omitempty"`
	LastError  string          `json:"last_error,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
}

const jsonTime = "2006-01-02T15:04:05.000Z07:00"

func toJobJSON(j storh.Job, withData bool) (jobJSON, error) {
	out := jobJSON{ID: j.ID.String(), Time: j.Time().UTC().Format(jsonTime), State: j.State.String(), Attempts: j.Attempts, LastError: j.LastError}
	if !j.LeaseUntil.IsZero() {
		out.LeaseUntil = j.LeaseUntil.UTC().Format(jsonTime)
	}
	if j.Token != 0 {
		out.Token = strconv.FormatUint(j.Token, 10)
	}
	if j.State == storh.JobPending && j.Due.After(time.Now()) {
		// Scheduled: say when it is due. A job due already, as most
		// are, from their enqueue, does not repeat its time.
		out.Due = j.Due.UTC().Format(jsonTime)
	}
	if withData {
		b, err := j.Record.MarshalJSON()
		if err != nil {
			return out, err
		}
		var rec struct {
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			return out, err
		}
		out.Data = rec.Data
	}
	return out, nil
}

func (a *app) queueEnqueueCmd() *cobra.Command {
	var invalidUTF8, at string
	cmd := &cobra.Command{
		Use:   "enqueue QUEUE [JSON]",
		Short: "Add jobs: one JSON object, or JSON lines on stdin",
		Long: `Enqueue adds the JSON object given as an argument, or each JSON object
read from stdin (one per line, all in one transaction: all or none), as
pending jobs at the end of the queue, and prints their ids, one per line (with
--json, {"id":…} objects). A queue that does not exist is created. Values use
the import type mapping ({"$date":…} stores a time). With --at, no claim
takes the jobs before that time (RFC 3339, a date, Unix milliseconds, or
relative to now: +15m, +2h, +1d); they count as scheduled until then.`,
		Example: `  storh queue enqueue emails '{"to":"ann@example.com"}'
  printf '{"n":1}\n{"n":2}\n' | storh queue enqueue work
  storh queue enqueue reminders '{"say":"stand up"}' --at +1h`,
		Args: args(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			keepBad, err := keepInvalidUTF8(invalidUTF8)
			if err != nil {
				return err
			}
			var due time.Time
			if at != "" {
				if due, err = parseTime(at, a.now()); err != nil {
					return fmt.Errorf("--at: %w", err)
				}
			}
			items, lines, err := a.putInput(args, keepBad)
			if err != nil {
				return err
			}
			q, err := a.openJobQueue(args[0], true, true)
			if err != nil {
				return err
			}
			defer q.close()
			ids, err := q.enqueueMany(due, items)
			if err != nil {
				q.discard()
				var e *storh.Error
				if len(lines) > 0 && errors.As(err, &e) && e.Index >= 0 && e.Index < len(lines) {
					return fmt.Errorf("stdin line %d: %s (nothing was enqueued)", lines[e.Index], libMsg(e.Err))
				}
				return err
			}
			for _, id := range ids {
				if a.jsonOut {
					if err := a.printJSON(struct {
						ID string `json:"id"`
					}{id.String()}); err != nil {
						return err
					}
					continue
				}
				fmt.Fprintln(a.stdout, id)
			}
			return nil
		},
	}
	addInvalidUTF8Flag(cmd, &invalidUTF8)
	cmd.Flags().StringVar(&at, "at", "", "do not let a claim take the jobs before this time (RFC 3339, date, Unix ms, or +15m, +2h, +1d)")
	return cmd
}

func (a *app) queueClaimCmd() *cobra.Command {
	var lease, wait time.Duration
	var n int
	cmd := &cobra.Command{
		Use:   "claim QUEUE",
		Short: "Lease the oldest pending jobs and print them",
		Long: `Claim leases up to --n of the oldest pending jobs (default 1), in enqueue
order, until --lease from now (default 5m), and prints each as one JSON
line: {"id","time","state","attempts","lease_until","last_error","data"}.
Complete a job with 'storh queue complete', or fail it; a claim whose lease
ends is pending again at the next claim. No job pending exits with 1 and
says so on stderr; with --wait it first waits up to that long for one to
be enqueued, released, failed back or come due. The "token" of each job
names its claim: complete, fail and extend with --token act only while that
claim holds.`,
		Example: `  storh queue claim emails
  storh queue claim emails --n 10 --lease 30s
  storh queue claim emails --wait 1m`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 {
				return usagef("--n must be at least 1, got %d", n)
			}
			if lease <= 0 {
				return usagef("--lease must be positive, got %v", lease)
			}
			if wait < 0 {
				return usagef("--wait must not be negative, got %v", wait)
			}
			q, err := a.openJobQueue(args[0], true, false)
			if err != nil {
				return err
			}
			defer q.close()
			var jobs []storh.Job
			if wait > 0 {
				jobs, err = q.claimWait(n, lease, wait)
			} else {
				jobs, err = q.claimMany(n, lease)
			}
			if errors.Is(err, storh.ErrEmpty) {
				return fmt.Errorf("queue %s has no pending job", qname(args[0]))
			}
			if err != nil {
				return err
			}
			for _, j := range jobs {
				out, err := toJobJSON(j, true)
				if err != nil {
					return err
				}
				if err := a.printJSON(out); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&lease, "lease", 5*time.Minute, "how long the claim holds")
	cmd.Flags().IntVar(&n, "n", 1, "claim up to `N` jobs")
	cmd.Flags().DurationVar(&wait, "wait", 0, "when no job is due, wait up to this long for one")
	return cmd
}

func parseIDs(args []string) ([]uuidv7.UUID, error) {
	ids := make([]uuidv7.UUID, len(args))
	for i, s := range args {
		id, err := parseID("job id", s)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

func (a *app) queueCompleteCmd() *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:   "complete QUEUE ID... [--token TOKEN]",
		Short: "Mark claimed jobs done",
		Long: `Complete marks the claimed jobs among the ids done, in one transaction, and
prints how many it completed. An id that is not claimed (pending, done, dead,
or not in the queue) is left alone and named on stderr; if none completed
the exit code is 1.

With --token, the "token" of the job as claim printed it, it completes the
one job ID only while that claim holds: once the job was released, failed,
completed, or claimed again after its lease ended, it is left alone and
named on stderr, as a worker that lost its claim must not complete another's.`,
		Example: `  storh queue complete emails 0190a4f4-5c3b-7def-8123-456789abcdef
  storh queue complete emails 0190a4f4-5c3b-7def-8123-456789abcdef --token 8413942094571234817`,
		Args: args(2, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args[1:])
			if err != nil {
				return err
			}
			claim, err := claimOf(token, ids)
			if err != nil {
				return err
			}
			q, err := a.openJobQueue(args[0], true, false)
			if err != nil {
				return err
			}
			defer q.close()
			if claim.Token != 0 {
				n := 0
				switch err := q.complete(claim); {
				case err == nil:
					n = 1
				case errors.Is(err, storh.ErrNotFound):
					a.diag("storh: job %s is not in queue %s", claim.ID, qname(args[0]))
				case errors.Is(err, storh.ErrNotClaimed):
					a.diag("storh: %v", lostClaim(q, claim, token))
				default:
					return err
				}
				fmt.Fprintf(a.stdout, "completed %d of 1\n", n)
				if n == 0 {
					return errors.New("no job completed")
				}
				return nil
			}
			var claimed []uuidv7.UUID
			for _, id := range ids {
				j, err := q.lookup(id)
				switch {
				case errors.Is(err, storh.ErrNotFound):
					a.diag("storh: job %s is not in queue %s", id, qname(args[0]))
				case err != nil:
					return err
				case j.State != storh.JobClaimed:
					a.diag("storh: job %s is %s, not claimed", id, j.State)
				default:
					claimed = append(claimed, id)
				}
			}
			n, err := q.completeMany(claimed)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "completed %d of %d\n", n, len(ids))
			if n == 0 {
				return errors.New("no job completed")
			}
			return nil
		},
	}
	addTokenFlag(cmd, &token, "complete")
	return cmd
}

// addTokenFlag adds --token, a claim's token, to the command that does
// what to a claimed job.
func addTokenFlag(cmd *cobra.Command, token *string, what string) {
	cmd.Flags().StringVar(token, "token", "", "the claim's token, as claim printed it: "+what+" the job only while that claim holds")
}

// claimOf is the job of ids[0] as the claim of token names it, or a job
// without a token when token is "": the form complete, fail and extend
// take. A token names one claim of one job.
func claimOf(token string, ids []uuidv7.UUID) (storh.Job, error) {
	job := storh.Job{Record: storh.Record{ID: ids[0]}}
	if token == "" {
		return job, nil
	}
	if len(ids) > 1 {
		return job, usagef("--token names the claim of one job: give one job id, not %d", len(ids))
	}
	t, err := strconv.ParseUint(token, 10, 64)
	if err != nil || t == 0 {
		return job, usagef("--token %q: give the token of the job as claim printed it (a decimal number)", token)
	}
	job.Token = t
	return job, nil
}

// lostClaim says why the claim of token on job no longer holds, from the
// job's state as it is now.
func lostClaim(q jobQueue, job storh.Job, token string) error {
	j, err := q.lookup(job.ID)
	switch {
	case err != nil:
		return fmt.Errorf("the claim of token %s on job %s no longer holds: nothing changed", token, job.ID)
	case j.State == storh.JobClaimed:
		return fmt.Errorf("the claim of token %s on job %s no longer holds: another claim holds the job now; nothing changed", token, job.ID)
	}
	return fmt.Errorf("the claim of token %s on job %s no longer holds: the job is %s; nothing changed", token, job.ID, j.State)
}

func (a *app) queueFailCmd() *cobra.Command {
	var reason, token string
	cmd := &cobra.Command{
		Use:   "fail QUEUE ID [--reason TEXT] [--token TOKEN]",
		Short: "End a claim in failure: the job is pending again, or dead",
		Long: `Fail ends the claim of the job ID in failure, keeping --reason as its last
error: the job is pending again, or dead if it has used the queue's max
attempts (see queue options). With a backoff the pending job waits for it
before a claim takes it again; without, it is back at its place at once. It
prints the job's state afterwards. With --token (the "token" claim printed)
it fails the job only while that claim holds, else exits 1 and changes
nothing.`,
		Example: `  storh queue fail emails 0190a4f4-5c3b-7def-8123-456789abcdef --reason "smtp timeout"`,
		Args:    args(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args[1:])
			if err != nil {
				return err
			}
			claim, err := claimOf(token, ids)
			if err != nil {
				return err
			}
			q, err := a.openJobQueue(args[0], true, false)
			if err != nil {
				return err
			}
			defer q.close()
			if err := q.fail(claim, reason); err != nil {
				if claim.Token != 0 && errors.Is(err, storh.ErrNotClaimed) {
					return lostClaim(q, claim, token)
				}
				return err
			}
			j, err := q.lookup(ids[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "job %s is %s after %s\n", j.ID, j.State, plural(j.Attempts, "attempt"))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the job failed (kept as its last error)")
	addTokenFlag(cmd, &token, "fail")
	return cmd
}

func (a *app) queueRetryCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "retry QUEUE ID...",
		Short: "Make dead jobs pending again, with no attempts used",
		Long: `Retry makes each dead job among the ids pending again, at its place in the
queue, with no attempts used, in one transaction, and prints how many it
retried. An id that is not dead (pending, claimed, done, or not in the queue)
is left alone and named on stderr; if none was retried the exit code is 1.
Any other error retries none.`,
		Example: `  storh queue jobs emails --state dead
  storh queue retry emails 0190a4f4-5c3b-7def-8123-456789abcdef`,
		Args: args(2, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.eachJob(args, "retry", "retried", storh.ErrNotDead, func(j storh.Job) string {
				return fmt.Sprintf("job %s is %s, not dead", j.ID, j.State)
			})
		},
	}
}

func (a *app) queueCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel QUEUE ID...",
		Short: "Delete jobs no worker holds: pending, done or dead",
		Long: `Cancel deletes each job among the ids that no worker holds, data included:
a pending job (no claim will hand it out), a done or dead one, or a claimed
one whose lease has ended, in one transaction. It prints how many it
cancelled. A job claimed under a lease that still holds is left alone, as is
an id not in the queue, and named on stderr; if none was cancelled the exit
code is 1. Any other error cancels none.`,
		Example: `  storh queue cancel emails 0190a4f4-5c3b-7def-8123-456789abcdef`,
		Args:    args(2, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.eachJob(args, "cancel", "cancelled", storh.ErrClaimed, func(j storh.Job) string {
				return fmt.Sprintf("job %s is claimed until %s: its worker must complete, fail or release it first",
					j.ID, j.LeaseUntil.Format(jsonTime))
			})
		},
	}
}

func (a *app) queueReleaseCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "release QUEUE ID...",
		Short: "Give claims back: the jobs are pending again, the claims not counted as attempts",
		Long: `Release gives back the claim of each job among the ids, in one transaction:
the job is pending again at its place in the queue, and the claim does not
count as an attempt. It prints how many it released. An id that is not claimed (pending, done,
dead, or not in the queue) is left alone and named on stderr; if none was
released the exit code is 1. Its worker, if it still runs, finds the job
no longer claimed (ErrNotClaimed) at its next complete, fail or extend.`,
		Example: `  storh queue release emails 0190a4f4-5c3b-7def-8123-456789abcdef`,
		Args:    args(2, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.eachJob(args, "release", "released", storh.ErrNotClaimed, func(j storh.Job) string {
				return fmt.Sprintf("job %s is %s, not claimed", j.ID, j.State)
			})
		},
	}
}

func (a *app) queueExtendCmd() *cobra.Command {
	var lease time.Duration
	var token string
	cmd := &cobra.Command{
		Use:   "extend QUEUE ID [--lease D] [--token TOKEN]",
		Short: "Move a claimed job's lease end to --lease from now",
		Long: `Extend moves the lease end of the claimed job ID to --lease from now
(default 5m), by the database's clock, and prints the new lease end. A job
that is not claimed fails with exit code 1. With --token (the "token" claim
printed) it extends the lease only while that claim holds: a worker whose
lease ended and whose job another claim took learns it here.`,
		Example: `  storh queue extend emails 0190a4f4-5c3b-7def-8123-456789abcdef --lease 1h`,
		Args:    args(2, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args[1:])
			if err != nil {
				return err
			}
			if lease <= 0 {
				return usagef("--lease must be positive, got %v", lease)
			}
			claim, err := claimOf(token, ids)
			if err != nil {
				return err
			}
			q, err := a.openJobQueue(args[0], true, false)
			if err != nil {
				return err
			}
			defer q.close()
			until, err := q.extend(claim, lease)
			if err != nil {
				if claim.Token != 0 && errors.Is(err, storh.ErrNotClaimed) {
					return lostClaim(q, claim, token)
				}
				return err
			}
			fmt.Fprintf(a.stdout, "job %s is claimed until %s\n", ids[0], until.Format(jsonTime))
			return nil
		},
	}
	cmd.Flags().DurationVar(&lease, "lease", 5*time.Minute, "the new lease, from now")
	addTokenFlag(cmd, &token, "extend")
	return cmd
}

func (a *app) queueLookupCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "lookup QUEUE ID...",
		Short: "Print jobs as they are now, data included",
		Long: `Lookup prints each job among the ids as a JSON line, state and data
included, as claim prints them. An id not in the queue is named on stderr;
if none was found the exit code is 1.`,
		Example: `  storh queue lookup emails 0190a4f4-5c3b-7def-8123-456789abcdef`,
		Args:    args(2, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args[1:])
			if err != nil {
				return err
			}
			q, err := a.openJobQueue(args[0], false, false)
			if err != nil {
				return err
			}
			defer q.close()
			found := 0
			for _, id := range ids {
				j, err := q.lookup(id)
				if errors.Is(err, storh.ErrNotFound) {
					a.diag("storh: job %s is not in queue %s", id, qname(args[0]))
					continue
				}
				if err != nil {
					return err
				}
				out, err := toJobJSON(j, true)
				if err != nil {
					return err
				}
				if err := a.printJSON(out); err != nil {
					return err
				}
				found++
			}
			if found == 0 {
				return errors.New("no job found")
			}
			return nil
		},
	}
}

// eachJob runs action (retry, cancel or release) on the jobs of args[1:]
// in queue args[0], in one transaction, and prints "<done> N of M". A job
// not in the queue, or one the action refuses (want), is left out, and
// the others run again in one transaction; those left out are named on
// stderr afterwards, worded by say from the job's state then. If none was
// done the command fails. Any other error stops it with nothing written.
// An id given twice is done once and, like a second call on it, refused.
func (a *app) eachJob(args []string, action, done string, want error, say func(storh.Job) string) error {
	ids, err := parseIDs(args[1:])
	if err != nil {
		return err
	}
	q, err := a.openJobQueue(args[0], true, false)
	if err != nil {
		return err
	}
	defer q.close()
	left := map[int]bool{} // places of the ids left out
	var rest []int         // places of the ids the batch runs on
	seen := map[uuidv7.UUID]bool{}
	for i, id := range ids {
		if seen[id] {
			left[i] = true
			continue
		}
		seen[id] = true
		rest = append(rest, i)
	}
	for len(rest) > 0 {
		batch := make([]uuidv7.UUID, len(rest))
		for k, i := range rest {
			batch[k] = ids[i]
		}
		err := q.batch(action, batch)
		if err == nil {
			break
		}
		var be *batchError
		if !errors.As(err, &be) || !errors.Is(be.err, storh.ErrNotFound) && !errors.Is(be.err, want) {
			return err
		}
		left[rest[be.index]] = true
		rest = slices.Delete(rest, be.index, be.index+1)
	}
	for i, id := range ids {
		if !left[i] {
			continue
		}
		switch j, err := q.lookup(id); {
		case errors.Is(err, storh.ErrNotFound):
			a.diag("storh: job %s is not in queue %s", id, qname(args[0]))
		case err != nil:
			return err
		default:
			a.diag("storh: %s", say(j))
		}
	}
	n := len(rest)
	fmt.Fprintf(a.stdout, "%s %d of %d\n", done, n, len(ids))
	if n == 0 {
		return fmt.Errorf("no job %s", done)
	}
	return nil
}

func (a *app) queueJobsCmd() *cobra.Command {
	var state string
	var withData bool
	cmd := &cobra.Command{
		Use:   "jobs QUEUE",
		Short: "List the jobs in one state",
		Long: `Jobs lists the jobs of QUEUE in --state (pending, claimed, done or dead;
default pending), one JSON line each: pending jobs in the order claims take
them, claimed ones by lease end, done and dead ones by when they got there.
--data adds each job's data.`,
		Example: `  storh queue jobs emails --state dead
  storh queue jobs emails --state claimed --data`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, ok := map[string]storh.JobState{"pending": storh.JobPending, "claimed": storh.JobClaimed, "done": storh.JobDone, "dead": storh.JobDead}[state]
			if !ok {
				return usagef("--state %q: want pending, claimed, done or dead", state)
			}
			q, err := a.openJobQueue(args[0], false, false)
			if err != nil {
				return err
			}
			defer q.close()
			for j, err := range q.jobs(st, withData) {
				if err != nil {
					return err
				}
				out, err := toJobJSON(j, withData)
				if err != nil {
					return err
				}
				if err := a.printJSON(out); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state", "pending", "pending, claimed, done or dead")
	cmd.Flags().BoolVar(&withData, "data", false, "print each job's data too")
	return cmd
}

func (a *app) queueStatsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "stats QUEUE",
		Short: "Count the jobs of a queue by state",
		Long: `Stats prints how many jobs QUEUE holds in each state (with --json, one
object {"queue","pending","claimed","done","dead","scheduled","bytes"}).
Pending jobs are due; scheduled ones wait for their time (enqueue --at).
Claims whose lease has ended count as claimed until the next claim takes them
back.`,
		Example: `  storh queue stats emails
  storh --json queue stats emails`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := a.openStoreQueue(args[0])
			if err != nil {
				return err
			}
			defer st.close()
			s, err := st.queueStats(args[0])
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(struct {
					Queue     string `json:"queue"`
					Pending   int    `json:"pending"`
					Claimed   int    `json:"claimed"`
					Done      int    `json:"done"`
					Dead      int    `json:"dead"`
					Scheduled int    `json:"scheduled"`
					Bytes     int64  `json:"bytes"`
				}{s.Name, s.Pending, s.Claimed, s.Done, s.Dead, s.Scheduled, s.Bytes})
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "PENDING\tCLAIMED\tDONE\tDEAD\tSCHEDULED\tSIZE")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", commas(s.Pending), commas(s.Claimed), commas(s.Done), commas(s.Dead), commas(s.Scheduled), humanBytes(s.Bytes))
			return tw.Flush()
		},
	}
}

func (a *app) queuePurgeCmd() *cobra.Command {
	var olderThan time.Duration
	var dead bool
	cmd := &cobra.Command{
		Use:   "purge QUEUE",
		Short: "Delete the done (or, with --dead, dead) jobs older than --older-than",
		Long: `Purge deletes the jobs of QUEUE that were completed more than --older-than
ago (default 0: all done jobs), data included, in transactions of a few
thousand, and prints how many. Pending, claimed and dead jobs stay; with
--dead it deletes the dead jobs (the dead letters) instead, by the time
they died. The file does not shrink: its free pages are reused by later
writes, and 'storh compact' gives them back to the file system.`,
		Example: `  storh queue purge emails
  storh queue purge emails --older-than 168h
  storh queue purge emails --dead --older-than 720h`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if olderThan < 0 {
				return usagef("--older-than must not be negative, got %v", olderThan)
			}
			q, err := a.openJobQueue(args[0], true, false)
			if err != nil {
				return err
			}
			defer q.close()
			what := "done job"
			if dead {
				what = "dead job"
			}
			n, err := q.purge(dead, olderThan)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "purged %s\n", plural(n, what))
			return nil
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "only jobs completed (or dead) longer ago than this")
	cmd.Flags().BoolVar(&dead, "dead", false, "purge the dead jobs instead of the done ones")
	return cmd
}

func (a *app) queueOptionsCmd() *cobra.Command {
	var maxAttempts int
	var backoff string
	cmd := &cobra.Command{
		Use:   "options QUEUE [--max-attempts N] [--backoff MIN,MAX]",
		Short: "Print or set the options stored with a queue: max attempts and backoff",
		Long: `Options prints the options stored with QUEUE (with --json, one object
{"queue","max_attempts","backoff_min","backoff_max","stored"}, the backoff in
Go durations, "0s" for none): how many claims a job gets, and how long a job
that failed waits before its next claim (MIN·2^(attempts-1), capped at MAX,
±20%). Every program and process that opens the queue applies them.

With --max-attempts or --backoff it sets them first (creating the queue if
needed); what is not given keeps its value. --backoff none removes the
backoff. A queue created by a storh from before options were stored has
none stored: its programs' own options apply until this sets some.`,
		Example: `  storh queue options emails
  storh queue options emails --max-attempts 8
  storh queue options emails --backoff 1s,5m
  storh queue options emails --backoff none`,
		Args: args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts []storh.CollectionOption
			var change web.QueueOptionsChange
			if cmd.Flags().Changed("max-attempts") {
				if maxAttempts < 1 {
					return fmt.Errorf("--max-attempts %d: a job needs at least one attempt", maxAttempts)
				}
				opts = append(opts, storh.WithMaxAttempts(maxAttempts))
				change.MaxAttempts = &maxAttempts
			}
			if cmd.Flags().Changed("backoff") {
				lo, hi, err := parseBackoff(backoff)
				if err != nil {
					return err
				}
				opts = append(opts, storh.WithBackoff(lo, hi))
				los, his := lo.String(), hi.String()
				change.BackoffMin, change.BackoffMax = &los, &his
			}
			name := args[0]
			o, stored, err := a.queueOptions(name, opts, change)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(struct {
					Queue       string `json:"queue"`
					MaxAttempts int    `json:"max_attempts"`
					BackoffMin  string `json:"backoff_min"`
					BackoffMax  string `json:"backoff_max"`
					Stored      bool   `json:"stored"`
				}{name, o.MaxAttempts, o.BackoffMin.String(), o.BackoffMax.String(), stored})
			}
			b := "no backoff"
			if o.BackoffMin > 0 {
				b = fmt.Sprintf("backoff %v to %v", o.BackoffMin, o.BackoffMax)
			}
			fmt.Fprintf(a.stdout, "queue %s: max attempts %d, %s\n", qname(name), o.MaxAttempts, b)
			if !stored {
				fmt.Fprintln(a.stdout, "(none stored: the queue is from an older storh, and each program's own options apply)")
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&maxAttempts, "max-attempts", 0, "how many claims a job gets (at least 1)")
	cmd.Flags().StringVar(&backoff, "backoff", "", "MIN,MAX: a failed job waits MIN·2^(attempts-1), capped at MAX, ±20% (none: no backoff)")
	return cmd
}

// queueOptions sets the options opts (change, over --url) of queue name,
// when there are any, creating the queue if needed, and gives them as
// they then are.
func (a *app) queueOptions(name string, opts []storh.CollectionOption, change web.QueueOptionsChange) (storh.QueueOptions, bool, error) {
	wrongKind := func(err error) error {
		if errors.Is(err, storh.ErrWrongKind) {
			return fmt.Errorf("collection %s is not a queue: choose another name", qname(name))
		}
		return err
	}
	if len(opts) == 0 {
		q, err := a.openJobQueue(name, false, false)
		if err != nil {
			return storh.QueueOptions{}, false, err
		}
		defer q.close()
		return q.options()
	}
	if err := checkCollNames([]string{name}); err != nil {
		return storh.QueueOptions{}, false, err
	}
	if a.url != "" {
		s, err := a.openStore(true)
		if err != nil {
			return storh.QueueOptions{}, false, err
		}
		defer s.close()
		hs := s.(*httpStore)
		o, stored, err := hs.client.SetQueueOptions(a.ctx, name, change, true)
		return o, stored, wrongKind(hs.fail(a.ctx, err))
	}
	db, err := a.open(true)
	if err != nil {
		return storh.QueueOptions{}, false, err
	}
	defer db.Close()
	if err := db.SetQueueOptions(name, opts...); err != nil {
		return storh.QueueOptions{}, false, wrongKind(err)
	}
	return db.QueueOptions(name)
}

// parseBackoff reads --backoff: MIN,MAX as Go durations, or none.
func parseBackoff(s string) (time.Duration, time.Duration, error) {
	if s == "none" {
		return 0, 0, nil
	}
	lo, hi, ok := strings.Cut(s, ",")
	if !ok {
		return 0, 0, fmt.Errorf("--backoff %q: give MIN,MAX (e.g. 1s,5m) or none", s)
	}
	min, err := time.ParseDuration(strings.TrimSpace(lo))
	if err != nil {
		return 0, 0, fmt.Errorf("--backoff %q: MIN: %v", s, err)
	}
	max, err := time.ParseDuration(strings.TrimSpace(hi))
	if err != nil {
		return 0, 0, fmt.Errorf("--backoff %q: MAX: %v", s, err)
	}
	return min, max, nil
}
