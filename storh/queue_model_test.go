package storh_test

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The queue model test drives one queue with random operations on a fake
// clock and checks every result, the counts and the listing of every state
// after each step against a plain in-memory state machine: jobs with their
// due time and place in the enqueue order, state, attempts, lease end, last
// change and last error. Pending jobs are claimed due first, ties in
// enqueue order, and only once due.

type qumJob struct {
	id       uuidv7.UUID
	seq      int
	due      int64 // ms: claimable from then on
	state    storh.JobState
	attempts int
	lease    int64 // ms, while claimed
	changed  int64 // ms
	reason   string
	n        int64  // the payload is {"n": n}
	token    uint64 // of the claim, as the claim returned it; 0 before
}

// qumClaim is a claim as a claim returned it, kept to try its token
// forms later, when it may no longer hold.
type qumClaim struct {
	id    uuidv7.UUID
	token uint64
}

type qumState struct {
	path string
	clk  *testClock
	db   *storh.DB
	q    *storh.Queue
	max  int
	// bmin, bmax: the stored backoff (ms; 0: none), as max the stored max
	// attempts.
	bmin, bmax int64
	jobs       map[uuidv7.UUID]*qumJob
	used       []uuidv7.UUID // every id ever enqueued, purged ones too
	nextSeq    int
	nextN      int64
	claims     []qumClaim // every claim handed out
}

// claimed notes the tokens of jobs a claim returned, as the model's jobs
// want (in the same order): each new, and never 0.
func (s *qumState) claimed(t *rapid.T, got []storh.Job, want []*qumJob) {
	for i, g := range got {
		if g.Token == 0 || slices.Contains(s.claims, qumClaim{g.ID, g.Token}) {
			t.Fatalf("claim of %v: token %d; want a new one, not 0", g.ID, g.Token)
		}
		want[i].token = g.Token
		s.claims = append(s.claims, qumClaim{g.ID, g.Token})
	}
}

// expectClaim is expectClaimed for a token form with claim c: the job
// must be claimed by that claim.
func (s *qumState) expectClaim(c qumClaim) (*qumJob, error) {
	j, err := s.expectClaimed(c.id)
	if err == nil && j.token != c.token {
		return nil, storh.ErrNotClaimed
	}
	return j, err
}

// pickClaim picks a claim to use a token form with: mostly one still
// holding, often a stale one.
func (s *qumState) pickClaim(t *rapid.T) (qumClaim, bool) {
	if len(s.claims) == 0 {
		return qumClaim{}, false
	}
	if js := s.in(storh.JobClaimed); len(js) > 0 && rapid.Bool().Draw(t, "holding") {
		j := rapid.SampledFrom(js).Draw(t, "claimed job")
		return qumClaim{j.id, j.token}, true
	}
	return rapid.SampledFrom(s.claims).Draw(t, "past claim"), true
}

func (s *qumState) open(t *rapid.T) {
	db, err := storh.Open(s.path, storh.WithoutSync(), storh.WithClock(s.clk.Now))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	s.db = db
	if s.q, err = db.Queue("q", s.opts()...); err != nil {
		t.Fatal(err)
	}
}

func (s *qumState) now() int64 { return s.clk.Ms() }

// opts are the options the model's queue stores.
func (s *qumState) opts() []storh.CollectionOption {
	ms := time.Millisecond
	return []storh.CollectionOption{storh.WithMaxAttempts(s.max), storh.WithBackoff(time.Duration(s.bmin)*ms, time.Duration(s.bmax)*ms)}
}

// failed moves the model's job j, whose claim a Fail ended, to pending or
// dead. With a backoff the store draws the jitter: the model checks that
// the due time the store chose is within ±20% of the doubling, capped
// delay, and takes it.
func (s *qumState) failed(t *rapid.T, j *qumJob, reason string) {
	j.state, j.lease, j.changed, j.reason = storh.JobPending, 0, s.now(), reason
	if j.attempts >= s.max {
		j.state = storh.JobDead
		return
	}
	if s.bmin == 0 {
		return
	}
	d := s.bmax
	if j.attempts-1 < 40 && s.bmin<<(j.attempts-1) < s.bmax {
		d = s.bmin << (j.attempts - 1)
	}
	lo, hi := int64(math.Round(float64(d)*0.8)), int64(math.Round(float64(d)*1.2))
	got, err := s.q.Lookup(j.id)
	if err != nil {
		t.Fatalf("Lookup after Fail: %v", err)
	}
	due := got.Due.UnixMilli()
	if due < s.now()+lo || due > s.now()+hi {
		t.Fatalf("job %v failed attempt %d with backoff %d..%d ms: due %d ms after the Fail; want within [%d, %d]",
			j.id, j.attempts, s.bmin, s.bmax, due-s.now(), lo, hi)
	}
	j.due = due
}

func (s *qumState) clone() map[uuidv7.UUID]*qumJob {
	out := make(map[uuidv7.UUID]*qumJob, len(s.jobs))
	for id, j := range s.jobs {
		c := *j
		out[id] = &c
	}
	return out
}

// in lists the model's jobs in state in the order Jobs lists them.
func (s *qumState) in(state storh.JobState) []*qumJob {
	var out []*qumJob
	for _, j := range s.jobs {
		if j.state == state {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b *qumJob) int {
		switch state {
		case storh.JobPending:
			if a.due != b.due {
				return int(a.due - b.due)
			}
			return a.seq - b.seq
		case storh.JobClaimed:
			if a.lease != b.lease {
				return int(a.lease - b.lease)
			}
		default:
			if a.changed != b.changed {
				return int(a.changed - b.changed)
			}
		}
		return a.id.Compare(b.id)
	})
	return out
}

func (s *qumState) requeueExpired() int {
	now := s.now()
	n := 0
	for _, j := range s.in(storh.JobClaimed) {
		if j.lease > now {
			break
		}
		j.state, j.lease, j.changed, j.reason = storh.JobPending, 0, now, "lease expired"
		if j.attempts >= s.max {
			j.state = storh.JobDead
		}
		n++
	}
	return n
}

// due lists the pending jobs due by now, in the order claims take them.
func (s *qumState) due() []*qumJob {
	var out []*qumJob
	for _, j := range s.in(storh.JobPending) {
		if j.due <= s.now() {
			out = append(out, j)
		}
	}
	return out
}

func (s *qumState) claim(n int, leaseMs int64) []*qumJob {
	s.requeueExpired()
	pending := s.due()
	if len(pending) > n {
		pending = pending[:n]
	}
	now := s.now()
	for _, j := range pending {
		j.state, j.attempts, j.lease, j.changed = storh.JobClaimed, j.attempts+1, now+leaseMs, now
		j.token = 0 // drawn by the claim: the model learns it from the result (claimed)
	}
	return pending
}

func (s *qumState) add(id uuidv7.UUID, n int64) { s.addAt(id, n, s.now()) }

func (s *qumState) addAt(id uuidv7.UUID, n, due int64) {
	s.jobs[id] = &qumJob{id: id, seq: s.nextSeq, due: due, state: storh.JobPending, changed: s.now(), n: n}
	s.nextSeq++
	s.used = append(s.used, id)
}

// freshID mints an id that was never used, at one of a few milliseconds
// well before the ids Enqueue generates: explicit ids are older.
func (s *qumState) freshID(t *rapid.T) uuidv7.UUID {
	for {
		id, err := uuidv7.NewAt(1_700_000_000_000 + rapid.Int64Range(0, 20).Draw(t, "ms"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(s.used, id) {
			return id
		}
	}
}

// pickID picks an id to operate on: mostly a job's, sometimes one never
// used, sometimes a purged one, now and then one that is not a UUIDv7.
func (s *qumState) pickID(t *rapid.T) uuidv7.UUID {
	switch k := rapid.IntRange(0, 19).Draw(t, "id kind"); {
	case k == 0:
		return v4ID
	case k <= 2 || len(s.used) == 0:
		return s.freshID(t)
	case k <= 5:
		return rapid.SampledFrom(s.used).Draw(t, "used id")
	default:
		// Prefer the jobs of a state, so that every transition is tried.
		state := rapid.SampledFrom([]storh.JobState{storh.JobPending, storh.JobClaimed, storh.JobClaimed, storh.JobDone, storh.JobDead}).Draw(t, "of state")
		if js := s.in(state); len(js) > 0 {
			return rapid.SampledFrom(js).Draw(t, "job").id
		}
		return rapid.SampledFrom(s.used).Draw(t, "used id")
	}
}

// expectClaimed returns the error an operation on a claimed job gives for
// id, or nil with the job when it is claimed.
func (s *qumState) expectClaimed(id uuidv7.UUID) (*qumJob, error) {
	if !id.IsV7() {
		return nil, storh.ErrInvalidID
	}
	j, ok := s.jobs[id]
	if !ok {
		return nil, storh.ErrNotFound
	}
	if j.state != storh.JobClaimed {
		return nil, storh.ErrNotClaimed
	}
	return j, nil
}

func qumWant(t *rapid.T, op string, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("%s: %v", op, err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("%s = %v; want %v", op, err, want)
	}
}

func (s *qumState) checkJobs(t *rapid.T, op string, got []storh.Job, want []*qumJob) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d jobs; want %d", op, len(got), len(want))
	}
	for i, g := range got {
		s.checkJob(t, fmt.Sprintf("%s[%d]", op, i), g, want[i], g.Raw() != nil)
	}
}

// checkJob compares a job with the model's. Changed is compared except
// while claimed: Extend moves it (see TestQueueExtendKeepsChanged).
func (s *qumState) checkJob(t *rapid.T, op string, g storh.Job, w *qumJob, payload bool) {
	t.Helper()
	var lease int64
	if !g.LeaseUntil.IsZero() {
		lease = g.LeaseUntil.UnixMilli()
	}
	if g.ID != w.id || g.State != w.state || g.Attempts != w.attempts || lease != w.lease || g.LastError != w.reason ||
		(w.state != storh.JobClaimed && g.Changed.UnixMilli() != w.changed) || g.Due.UnixMilli() != w.due {
		t.Fatalf("%s = %v %v attempts=%d lease=%d changed=%d err=%q due=%d; want %v %v attempts=%d lease=%d changed=%d err=%q due=%d", op,
			g.ID, g.State, g.Attempts, lease, g.Changed.UnixMilli(), g.LastError, g.Due.UnixMilli(),
			w.id, w.state, w.attempts, w.lease, w.changed, w.reason, w.due)
	}
	if (w.state == storh.JobClaimed) != (g.Token != 0) || w.state == storh.JobClaimed && w.token != 0 && g.Token != w.token {
		t.Fatalf("%s: %v %v token %d; want %d", op, g.ID, g.State, g.Token, w.token)
	}
	if payload {
		if d := g.Data(); len(d) != 1 || d["n"] != w.n {
			t.Fatalf("%s: payload %v; want {n: %d}", op, d, w.n)
		}
	}
}

func (s *qumState) check(t *rapid.T) {
	counts, err := s.q.Counts()
	if err != nil {
		t.Fatal(err)
	}
	due := len(s.due())
	want := [5]int{due, len(s.in(storh.JobPending)) - due, len(s.in(storh.JobClaimed)), len(s.in(storh.JobDone)), len(s.in(storh.JobDead))}
	if got := [5]int{counts.Pending, counts.Scheduled, counts.Claimed, counts.Done, counts.Dead}; got != want {
		t.Fatalf("Counts = %v; want %v", got, want)
	}
	if n, err := s.q.Count(); err != nil || n != len(s.jobs) {
		t.Fatalf("Count = %d, %v; want %d", n, err, len(s.jobs))
	}
	for _, state := range []storh.JobState{storh.JobPending, storh.JobClaimed, storh.JobDone, storh.JobDead} {
		var got []storh.Job
		for j, err := range s.q.Jobs(state) {
			if err != nil {
				t.Fatalf("Jobs(%v): %v", state, err)
			}
			got = append(got, j)
		}
		s.checkJobs(t, fmt.Sprintf("Jobs(%v)", state), got, s.in(state))
	}
}

var qumReasons = []string{"", "boom", "timeout", strings.Repeat("r", 1100)}

func qumCut(reason string) string {
	if len(reason) > 1024 {
		return reason[:1024]
	}
	return reason
}

func (s *qumState) drawLease(t *rapid.T) (time.Duration, int64) {
	ms := rapid.Int64Range(1, 40).Draw(t, "lease ms")
	return time.Duration(ms) * time.Millisecond, ms
}

// TestQueueModel runs the model on a file, and in the PostgreSQL pass on
// PostgreSQL, a fresh schema per run: due times, claims and counts come
// from the backend's range reads there (LockRange up to the due bound, a
// walk back over the scheduled).
func TestQueueModel(t *testing.T) {
	dir := t.TempDir()
	run := 0
	runQueueModel(t, func() string {
		if onPostgres {
			return pgtest.SchemaURL(t)
		}
		run++
		return filepath.Join(dir, fmt.Sprintf("queue-model-%d.db", run))
	})
}

func runQueueModel(t *testing.T, newPath func() string) {
	rapid.Check(t, func(t *rapid.T) {
		s := &qumState{
			path: newPath(),
			clk:  newTestClock(),
			max:  rapid.IntRange(1, 4).Draw(t, "max attempts"),
			jobs: map[uuidv7.UUID]*qumJob{},
		}
		defer os.Remove(s.path) // a file's; nothing for a URL
		s.open(t)
		defer func() { s.db.Close() }()

		t.Repeat(map[string]func(*rapid.T){
			"enqueue": func(t *rapid.T) {
				s.nextN++
				id, err := s.q.Enqueue(storh.Map{"n": s.nextN})
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := s.jobs[id]; ok || !id.IsV7() {
					t.Fatalf("Enqueue returned %v, taken or not a UUIDv7", id)
				}
				s.add(id, s.nextN)
			},
			"enqueue at": func(t *rapid.T) {
				// Due a little before now (ahead of the jobs due after
				// it), now, or later; several jobs at one time keep their
				// enqueue order.
				at := s.now() + rapid.SampledFrom([]int64{-10, 0, 5, 5, 20, 60}).Draw(t, "due in ms")
				s.nextN++
				id, err := s.q.EnqueueAt(time.UnixMilli(at), storh.Map{"n": s.nextN})
				if err != nil {
					t.Fatal(err)
				}
				s.addAt(id, s.nextN, at)
			},
			"enqueue many at": func(t *rapid.T) {
				at := s.now() + rapid.Int64Range(-5, 40).Draw(t, "due in ms")
				k := rapid.IntRange(1, 3).Draw(t, "batch size")
				items := make([]any, k)
				for i := range items {
					items[i] = storh.Map{"n": s.nextN + int64(i) + 1}
				}
				got, err := s.q.EnqueueManyAt(time.UnixMilli(at), items)
				if err != nil || len(got) != k {
					t.Fatalf("EnqueueManyAt = %v, %v; want %d ids", got, err, k)
				}
				for _, id := range got {
					s.nextN++
					s.addAt(id, s.nextN, at)
				}
			},
			"enqueue at the zero time": func(t *rapid.T) {
				_, err := s.q.EnqueueAt(time.Time{}, storh.Map{"n": 0})
				qumWant(t, "EnqueueAt(zero time)", err, storh.ErrInvalidOption)
				_, err = s.q.EnqueueManyAt(time.Time{}, []any{storh.Map{"n": 0}})
				qumWant(t, "EnqueueManyAt(zero time)", err, storh.ErrInvalidOption)
			},
			"enqueue with id": func(t *rapid.T) {
				id := s.pickID(t)
				s.nextN++
				err := s.q.EnqueueWithID(id, storh.Map{"n": s.nextN})
				var want error
				if !id.IsV7() {
					want = storh.ErrInvalidID
				} else if _, ok := s.jobs[id]; ok {
					want = storh.ErrExists
				}
				qumWant(t, "EnqueueWithID", err, want)
				if want == nil {
					s.add(id, s.nextN)
				}
			},
			"enqueue many": func(t *rapid.T) {
				k := rapid.IntRange(0, 4).Draw(t, "batch size")
				items := make([]any, k)
				explicit := make([]uuidv7.UUID, k)
				ns := make([]int64, k)
				for i := range items {
					s.nextN++
					ns[i] = s.nextN
					payload := storh.Map{"n": s.nextN}
					pointer := false
					switch rapid.IntRange(0, 9).Draw(t, "item kind") {
					case 0, 1:
						items[i] = payload
						continue
					case 2:
						items[i] = storh.Entry{Data: payload} // no id: a new one
						continue
					case 3:
						pointer = true
						explicit[i] = s.freshID(t)
					case 4:
						explicit[i] = s.pickID(t) // maybe taken, maybe bad
					case 5:
						if i > 0 && !explicit[i-1].IsZero() {
							explicit[i] = explicit[i-1] // twice in the batch
						} else {
							explicit[i] = s.freshID(t)
						}
					default:
						explicit[i] = s.freshID(t)
					}
					if pointer {
						items[i] = &storh.Entry{ID: explicit[i], Data: payload}
					} else {
						items[i] = storh.Entry{ID: explicit[i], Data: payload}
					}
				}
				// A bad id fails the batch, else a taken one: an id in the
				// queue, or one the batch holds twice (either item may be
				// named). The error names a bad item and its id.
				var wantErr error
				bad := map[int]bool{}
				for i, id := range explicit {
					if !id.IsZero() && !id.IsV7() {
						wantErr, bad[i] = storh.ErrInvalidID, true
					}
				}
				if wantErr == nil {
					for i, id := range explicit {
						if id.IsZero() {
							continue
						}
						_, taken := s.jobs[id]
						for j, other := range explicit {
							taken = taken || (j != i && other == id)
						}
						if taken {
							wantErr, bad[i] = storh.ErrExists, true
						}
					}
				}
				got, err := s.q.EnqueueMany(items)
				qumWant(t, "EnqueueMany", err, wantErr)
				if err != nil {
					var e *storh.Error
					if !errors.As(err, &e) || !bad[e.Index] || e.ID != explicit[e.Index].String() {
						t.Fatalf("EnqueueMany error %v; want one naming a bad item of %v", err, bad)
					}
					return
				}
				if len(got) != k {
					t.Fatalf("EnqueueMany returned %d ids for %d items", len(got), k)
				}
				for i, id := range got {
					if !explicit[i].IsZero() && id != explicit[i] {
						t.Fatalf("EnqueueMany item %d: id %v; want %v", i, id, explicit[i])
					}
					if _, ok := s.jobs[id]; ok {
						t.Fatalf("EnqueueMany item %d: id %v taken", i, id)
					}
					s.add(id, ns[i])
				}
			},
			"claim": func(t *rapid.T) {
				lease, ms := s.drawLease(t)
				want := s.claim(1, ms)
				job, err := s.q.Claim(lease)
				if len(want) == 0 {
					qumWant(t, "Claim", err, storh.ErrEmpty)
					return
				}
				qumWant(t, "Claim", err, nil)
				s.checkJob(t, "Claim", job, want[0], true)
				s.claimed(t, []storh.Job{job}, want)
				if job.Changed.UnixMilli() != s.now() {
					t.Fatalf("Claim: Changed %v; want now", job.Changed)
				}
			},
			"claim many": func(t *rapid.T) {
				lease, ms := s.drawLease(t)
				n := rapid.IntRange(1, 5).Draw(t, "n")
				want := s.claim(n, ms)
				jobs, err := s.q.ClaimMany(n, lease)
				if len(want) == 0 {
					qumWant(t, "ClaimMany", err, storh.ErrEmpty)
					return
				}
				qumWant(t, "ClaimMany", err, nil)
				s.checkJobs(t, "ClaimMany", jobs, want)
				s.claimed(t, jobs, want)
			},
			"bad claim": func(t *rapid.T) {
				lease := rapid.SampledFrom([]time.Duration{0, -time.Millisecond}).Draw(t, "lease")
				_, err := s.q.ClaimMany(rapid.IntRange(-1, 2).Draw(t, "n"), lease)
				qumWant(t, "ClaimMany with a bad lease", err, storh.ErrInvalidOption)
			},
			"complete": func(t *rapid.T) {
				id := s.pickID(t)
				j, want := s.expectClaimed(id)
				qumWant(t, "Complete", s.q.Complete(id), want)
				if want == nil {
					j.state, j.lease, j.changed = storh.JobDone, 0, s.now()
				}
			},
			"complete many": func(t *rapid.T) {
				var list []uuidv7.UUID
				for range rapid.IntRange(0, 5).Draw(t, "k") {
					id := s.pickID(t)
					if !id.IsV7() {
						id = s.freshID(t)
					}
					list = append(list, id)
				}
				wantN := 0
				for _, id := range list {
					if j, err := s.expectClaimed(id); err == nil {
						j.state, j.lease, j.changed = storh.JobDone, 0, s.now()
						wantN++
					}
				}
				n, err := s.q.CompleteMany(list)
				if err != nil || n != wantN {
					t.Fatalf("CompleteMany(%v) = %d, %v; want %d", list, n, err, wantN)
				}
			},
			"fail": func(t *rapid.T) {
				id := s.pickID(t)
				reason := rapid.SampledFrom(qumReasons).Draw(t, "reason")
				j, want := s.expectClaimed(id)
				qumWant(t, "Fail", s.q.Fail(id, reason), want)
				if want == nil {
					s.failed(t, j, qumCut(reason))
				}
			},
			"complete claim": func(t *rapid.T) {
				c, ok := s.pickClaim(t)
				if !ok {
					return
				}
				j, want := s.expectClaim(c)
				qumWant(t, "CompleteClaim", s.q.CompleteClaim(storh.Job{Record: storh.Record{ID: c.id}, Token: c.token}), want)
				if want == nil {
					j.state, j.lease, j.changed = storh.JobDone, 0, s.now()
				}
			},
			"fail claim": func(t *rapid.T) {
				c, ok := s.pickClaim(t)
				if !ok {
					return
				}
				j, want := s.expectClaim(c)
				qumWant(t, "FailClaim", s.q.FailClaim(storh.Job{Record: storh.Record{ID: c.id}, Token: c.token}, "token"), want)
				if want == nil {
					s.failed(t, j, "token")
				}
			},
			"extend claim": func(t *rapid.T) {
				c, ok := s.pickClaim(t)
				if !ok {
					return
				}
				lease, ms := s.drawLease(t)
				j, want := s.expectClaim(c)
				until, err := s.q.ExtendClaim(storh.Job{Record: storh.Record{ID: c.id}, Token: c.token}, lease)
				qumWant(t, "ExtendClaim", err, want)
				if want == nil {
					j.lease = s.now() + ms
					if until.UnixMilli() != j.lease {
						t.Fatalf("ExtendClaim = %v; want %d ms", until, j.lease)
					}
				}
			},
			"set queue options": func(t *rapid.T) {
				// Through the DB, as another process would: the handle
				// opened before applies them from its next Fail on.
				s.max = rapid.IntRange(1, 4).Draw(t, "max attempts")
				s.bmin, s.bmax = 0, 0
				if rapid.Bool().Draw(t, "backoff") {
					s.bmin = rapid.SampledFrom([]int64{1, 3, 10}).Draw(t, "backoff min ms")
					s.bmax = s.bmin * rapid.Int64Range(1, 8).Draw(t, "backoff max/min")
				}
				if err := s.db.SetQueueOptions("q", s.opts()...); err != nil {
					t.Fatalf("SetQueueOptions: %v", err)
				}
				o, ok, err := s.db.QueueOptions("q")
				if want := (storh.QueueOptions{MaxAttempts: s.max, BackoffMin: time.Duration(s.bmin) * time.Millisecond,
					BackoffMax: time.Duration(s.bmax) * time.Millisecond}); err != nil || !ok || o != want {
					t.Fatalf("QueueOptions = %+v, %v, %v; want %+v", o, ok, err, want)
				}
			},
			"open a handle with other options": func(t *rapid.T) {
				_, err := s.db.Queue("q", storh.WithMaxAttempts(s.max+1))
				// Before the first write nothing is stored: any handle goes.
				if _, stored, _ := s.db.QueueOptions("q"); stored {
					qumWant(t, "Queue(other max attempts)", err, storh.ErrInvalidOption)
				}
				_, err = s.db.Queue("q", storh.WithBackoff(time.Duration(s.bmin+1)*time.Millisecond, time.Duration(s.bmax+10)*time.Millisecond))
				if _, stored, _ := s.db.QueueOptions("q"); stored {
					qumWant(t, "Queue(other backoff)", err, storh.ErrInvalidOption)
				}
			},
			"token form without a token": func(t *rapid.T) {
				id := s.pickID(t)
				job := storh.Job{Record: storh.Record{ID: id}}
				qumWant(t, "CompleteClaim(no token)", s.q.CompleteClaim(job), storh.ErrNotClaimed)
				qumWant(t, "FailClaim(no token)", s.q.FailClaim(job, "x"), storh.ErrNotClaimed)
				_, err := s.q.ExtendClaim(job, time.Second)
				qumWant(t, "ExtendClaim(no token)", err, storh.ErrNotClaimed)
			},
			"extend": func(t *rapid.T) {
				id := s.pickID(t)
				lease, ms := s.drawLease(t)
				j, want := s.expectClaimed(id)
				until, err := s.q.Extend(id, lease)
				qumWant(t, "Extend", err, want)
				if want == nil {
					j.lease = s.now() + ms
					if until.UnixMilli() != j.lease {
						t.Fatalf("Extend = %v; want %d ms", until, j.lease)
					}
				}
			},
			"release": func(t *rapid.T) {
				id := s.pickID(t)
				j, want := s.expectClaimed(id)
				qumWant(t, "Release", s.q.Release(id), want)
				if want == nil {
					j.state, j.lease, j.changed, j.attempts = storh.JobPending, 0, s.now(), max(0, j.attempts-1)
				}
			},
			"retry": func(t *rapid.T) {
				id := s.pickID(t)
				var want error
				j, ok := s.jobs[id]
				switch {
				case !id.IsV7():
					want = storh.ErrInvalidID
				case !ok:
					want = storh.ErrNotFound
				case j.state != storh.JobDead:
					want = storh.ErrNotDead
				}
				qumWant(t, "Retry", s.q.Retry(id), want)
				if want == nil {
					j.state, j.attempts, j.changed = storh.JobPending, 0, s.now()
				}
			},
			"cancel": func(t *rapid.T) {
				id := s.pickID(t)
				var want error
				j, ok := s.jobs[id]
				switch {
				case !id.IsV7():
					want = storh.ErrInvalidID
				case !ok:
					want = storh.ErrNotFound
				case j.state == storh.JobClaimed && j.lease > s.now():
					want = storh.ErrClaimed
				}
				qumWant(t, "Cancel", s.q.Cancel(id), want)
				if want == nil {
					delete(s.jobs, id)
				}
			},
			"requeue expired": func(t *rapid.T) {
				want := s.requeueExpired()
				if n, err := s.q.RequeueExpired(); err != nil || n != want {
					t.Fatalf("RequeueExpired = %d, %v; want %d", n, err, want)
				}
			},
			"purge done": func(t *rapid.T) {
				older := rapid.Int64Range(0, 60).Draw(t, "older than ms")
				before := s.now() - older
				want := 0
				for id, j := range s.jobs {
					if j.state == storh.JobDone && j.changed < before {
						delete(s.jobs, id)
						want++
					}
				}
				if n, err := s.q.PurgeDone(time.Duration(older) * time.Millisecond); err != nil || n != want {
					t.Fatalf("PurgeDone(%d ms) = %d, %v; want %d", older, n, err, want)
				}
			},
			"lookup": func(t *rapid.T) {
				id := s.pickID(t)
				got, err := s.q.Lookup(id)
				j, ok := s.jobs[id]
				switch {
				case !id.IsV7():
					qumWant(t, "Lookup", err, storh.ErrInvalidID)
				case !ok:
					qumWant(t, "Lookup", err, storh.ErrNotFound)
				default:
					qumWant(t, "Lookup", err, nil)
					s.checkJob(t, "Lookup", got, j, true)
				}
			},
			"advance clock": func(t *rapid.T) {
				s.clk.Advance(time.Duration(rapid.Int64Range(0, 30).Draw(t, "ms")) * time.Millisecond)
			},
			"turn clock back": func(t *rapid.T) {
				// The database's clock may step back (NTP): a job due in
				// the future of the clock before is not due yet again.
				s.clk.Advance(-time.Duration(rapid.Int64Range(1, 10).Draw(t, "ms")) * time.Millisecond)
			},
			"update": func(t *rapid.T) {
				// A few operations in one transaction, committed or
				// rolled back: the model follows only a commit.
				saved, savedSeq, savedUsed, savedClaims := s.clone(), s.nextSeq, slices.Clone(s.used), slices.Clone(s.claims)
				commit := rapid.Bool().Draw(t, "commit")
				errRollback := errors.New("roll back")
				err := s.db.Update(func(tx *storh.Tx) error {
					tq, err := tx.Queue("q", s.opts()...)
					if err != nil {
						return err
					}
					s.nextN++
					id, err := tq.Enqueue(storh.Map{"n": s.nextN})
					if err != nil {
						return err
					}
					s.add(id, s.nextN)
					lease, ms := s.drawLease(t)
					want := s.claim(2, ms)
					got, err := tq.ClaimMany(2, lease)
					if err != nil {
						return err
					}
					s.checkJobs(t, "ClaimMany in Update", got, want)
					s.claimed(t, got, want)
					if rapid.Bool().Draw(t, "complete one") {
						if err := tq.Complete(got[0].ID); err != nil {
							return err
						}
						want[0].state, want[0].lease, want[0].changed = storh.JobDone, 0, s.now()
					}
					if !commit {
						return errRollback
					}
					return nil
				})
				if !commit {
					if !errors.Is(err, errRollback) {
						t.Fatalf("Update = %v", err)
					}
					s.jobs, s.nextSeq, s.used, s.claims = saved, savedSeq, savedUsed, savedClaims
					return
				}
				if err != nil {
					t.Fatalf("Update: %v", err)
				}
			},
			"reopen": func(t *rapid.T) {
				if err := s.db.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				s.open(t)
				var problems []string
				rep, err := s.db.Verify(func(p storh.Problem) { problems = append(problems, p.String()) })
				if err != nil || rep.Problems != 0 {
					t.Fatalf("Verify after reopen: %v, %d problems: %v", err, rep.Problems, problems)
				}
			},
			"": s.check,
		})
		// Every payload the model holds is still the job's.
		for _, id := range slices.SortedFunc(maps.Keys(s.jobs), uuidv7.UUID.Compare) {
			got, err := s.q.Lookup(id)
			if err != nil {
				t.Fatalf("Lookup(%v): %v", id, err)
			}
			s.checkJob(t, "final Lookup", got, s.jobs[id], true)
		}
	})
}
