package reliability

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The queue crash test. The parent fills a queue with N jobs, each payload
// carrying its index. A victim child (queueVictimChild) works the queue from
// a few goroutines with a short lease: it completes most jobs it claims,
// releases or fails a few, and holds others (claimed, never finished,
// sometimes extended). The parent SIGKILLs it at a seeded random moment
// while it holds claims. Then a drain child (queueDrainChild) works the
// queue from queueDrainWorkers goroutines, two in three with ClaimWait and
// the others polling with Claim or ClaimMany, until no job is pending or
// claimed: it has to wait for the killed worker's leases to end to get its
// held jobs.
//
// Every worker writes a log line before each call (an intent) and after it
// returns (an acknowledgement), each line synced before the worker goes on.
// The victim's goroutines share one file (one process, one order); each
// drain goroutine has its own. From the logs and the file the parent checks:
//
//   - right after the kill: Verify is clean, the counts add up to N, every
//     completion the victim acknowledged is done, and every claim it held
//     with a lease still running at the kill is still claimed with exactly
//     the lease end it was given;
//   - after the drain: every job was completed exactly once across all
//     workers (Complete returned nil once; ErrNotClaimed means another got
//     it), except that a victim Complete in flight at the kill may have
//     committed without its acknowledgement; no job the victim completed
//     was claimed again; no job the victim held was claimed by the drain
//     before its lease ended; a held job ends with two attempts or more and
//     "lease expired" as its last error; Counts shows N done and nothing
//     pending, claimed or dead; Verify is clean; the payload every claim
//     returned is that job's.
//
// STORH_QUEUE_JOBS sets N (2000 with STORH_LONG=1, 500 otherwise);
// STORH_RELIABILITY_SEED replays a run with the seed it logged (the same
// ids, payloads, worker parameters and kill delay; the scheduling is the
// machine's).

const (
	queueCrashName        = "jobs"
	queueCrashMaxAttempts = 8 // a job sees at most victim claims + a drain claim
	queueDrainLease       = 3 * time.Second
	queueDrainWorkers     = 6
)

func init() {
	roles["queue-victim"] = queueVictimChild
	roles["queue-drain"] = queueDrainChild
}

// queueJobPayload is a job's payload: its index and a check string derived
// from the seed and the index, so that a worker can tell a payload that is
// not its job's.
type queueJobPayload struct {
	I     int    `msgpack:"i"`
	Check string `msgpack:"k"`
}

func queueJobCheck(seed uint64, i int) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d", seed, i)
	return fmt.Sprintf("job-%d-%016x", i, h.Sum64())
}

// queueLog is a worker's log file: one line per event, each written whole
// and synced before the caller goes on.
type queueLog struct {
	mu sync.Mutex
	f  *os.File
}

func openQueueLog(path string) *queueLog {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "log:", err)
		os.Exit(4)
	}
	return &queueLog{f: f}
}

func (l *queueLog) put(format string, a ...any) {
	b := fmt.Appendf(nil, format+"\n", a...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(b); err != nil {
		fmt.Fprintln(os.Stderr, "log write:", err)
		os.Exit(5)
	}
	if err := l.f.Sync(); err != nil {
		fmt.Fprintln(os.Stderr, "log sync:", err)
		os.Exit(5)
	}
}

// queueDie ends a child on an unexpected error; the parent shows stderr.
func queueDie(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "queue child: "+format+"\n", a...)
	os.Exit(3)
}

// queueJobIndex checks a claimed job's payload and returns its index.
func queueJobIndex(seed uint64, j storh.Job) int {
	var p queueJobPayload
	if err := j.Decode(&p); err != nil {
		queueDie("job %s: decode payload: %v", j.ID, err)
	}
	if p.Check != queueJobCheck(seed, p.I) {
		queueDie("job %s: payload %+v is not job %d's", j.ID, p, p.I)
	}
	return p.I
}

// queueChildEnv reads the common environment of the queue children.
func queueChildEnv() (path string, seed uint64, lease time.Duration, workers int) {
	path = os.Getenv("STORH_REL_DB")
	seed, _ = strconv.ParseUint(os.Getenv("STORH_REL_SEED"), 10, 64)
	ms, _ := strconv.Atoi(os.Getenv("STORH_REL_LEASE_MS"))
	workers, _ = strconv.Atoi(os.Getenv("STORH_REL_WORKERS"))
	if path == "" || ms < 1 || workers < 1 {
		queueDie("bad environment")
	}
	return path, seed, time.Duration(ms) * time.Millisecond, workers
}

func openQueueChild(path string) (*storh.DB, *storh.Queue) {
	db, err := storh.Open(path)
	if err != nil {
		queueDie("open: %v", err)
	}
	q, err := db.Queue(queueCrashName, storh.WithMaxAttempts(queueCrashMaxAttempts))
	if err != nil {
		queueDie("queue: %v", err)
	}
	return db, q
}

// ---------------------------------------------------------------------------
// The victim: killed while it holds claims.

// queueVictimChild works the queue until it is killed. It writes "R" on fd 3
// once it has logged its first claim.
func queueVictimChild() int {
	path, seed, lease, workers := queueChildEnv()
	hold, _ := strconv.Atoi(os.Getenv("STORH_REL_HOLD_PCT"))
	_, q := openQueueChild(path)
	log := openQueueLog(os.Getenv("STORH_REL_OUT"))
	pipe := os.NewFile(3, "ready")
	var once sync.Once
	ready := func() {
		once.Do(func() {
			if _, err := pipe.Write([]byte("R\n")); err != nil {
				os.Exit(5) // the parent is gone
			}
		})
	}
	limit, _ := strconv.ParseInt(os.Getenv("STORH_REL_MAX_CLAIMS"), 10, 64)
	v := &queueVictimState{q: q, log: log, seed: seed, lease: lease, holdPct: hold, limit: limit, ready: ready}
	for g := range workers {
		go v.work(rand.New(rand.NewPCG(seed, 1000+uint64(g))), g)
	}
	// The parent kills long before this; a child still alive is a bug.
	time.Sleep(time.Minute)
	fmt.Fprintln(os.Stderr, "queue-victim: not killed within a minute")
	return 7
}

type queueHeld struct {
	idx int
	id  uuidv7.UUID
}

// queueVictimState is what the victim's goroutines share.
type queueVictimState struct {
	q       *storh.Queue
	log     *queueLog
	seed    uint64
	lease   time.Duration
	holdPct int
	limit   int64        // claims after which it only keeps its held claims alive
	claims  atomic.Int64 // claims made
	ready   func()
}

func (v *queueVictimState) work(r *rand.Rand, g int) {
	q, log, seed, lease := v.q, v.log, v.seed, v.lease
	var held []queueHeld
	for {
		// Now and then extend a held claim; always once the victim has
		// made its share of claims (on a fast disk it would otherwise
		// finish the queue and hold nothing when it is killed).
		idle := v.claims.Load() >= v.limit
		if len(held) > 0 && (idle || r.IntN(5) == 0) {
			k := r.IntN(len(held))
			h := held[k]
			log.put("e %d %d %s", g, h.idx, h.id)
			until, err := q.Extend(h.id, lease)
			switch {
			case err == nil:
				log.put("E %d %d %s %d", g, h.idx, h.id, until.UnixMilli())
			case errors.Is(err, storh.ErrNotClaimed):
				// Its lease ended and it went back to pending (or a
				// claim of this process took it and finished it).
				log.put("N %d %d %s extend", g, h.idx, h.id)
				held = slices.Delete(held, k, k+1)
			default:
				queueDie("extend %s: %v", h.id, err)
			}
		}
		if idle {
			time.Sleep(lease / 10)
			continue
		}
		n := 1
		if r.IntN(2) == 0 {
			n = 1 + r.IntN(8)
		}
		log.put("q %d", g)
		var jobs []storh.Job
		var err error
		if n == 1 {
			var j storh.Job
			if j, err = q.Claim(lease); err == nil {
				jobs = []storh.Job{j}
			}
		} else {
			jobs, err = q.ClaimMany(n, lease)
		}
		if errors.Is(err, storh.ErrEmpty) {
			log.put("Q %d 0", g)
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err != nil {
			queueDie("claim: %v", err)
		}
		wall := time.Now().UnixMilli()
		idx := make([]int, len(jobs))
		for i, j := range jobs {
			idx[i] = queueJobIndex(seed, j)
			log.put("H %d %d %s %d %d %d %d", g, idx[i], j.ID, j.Attempts, j.LeaseUntil.UnixMilli(), j.Changed.UnixMilli(), wall)
		}
		log.put("Q %d %d", g, len(jobs))
		v.claims.Add(int64(len(jobs)))
		v.ready()
		for i, j := range jobs {
			x := r.IntN(100)
			switch {
			case j.Attempts == 1 && x < v.holdPct:
				held = append(held, queueHeld{idx[i], j.ID})
			case j.Attempts < 3 && x >= 90 && x < 95:
				log.put("r %d %d %s", g, idx[i], j.ID)
				queueAck(log, g, idx[i], j.ID, "R", "release", q.Release(j.ID))
			case j.Attempts < 3 && x >= 95:
				log.put("f %d %d %s", g, idx[i], j.ID)
				queueAck(log, g, idx[i], j.ID, "F", "fail", q.Fail(j.ID, "victim failed it"))
			default:
				log.put("c %d %d %s", g, idx[i], j.ID)
				queueAck(log, g, idx[i], j.ID, "C", "complete", q.Complete(j.ID))
			}
		}
	}
}

// queueAck logs the outcome of a Complete, Release or Fail: mark on
// success, "N" for ErrNotClaimed (another claim finished the job first).
func queueAck(log *queueLog, g, idx int, id uuidv7.UUID, mark, op string, err error) {
	switch {
	case err == nil:
		log.put("%s %d %d %s", mark, g, idx, id)
	case errors.Is(err, storh.ErrNotClaimed):
		log.put("N %d %d %s %s", g, idx, id, op)
	default:
		queueDie("%s %s: %v", op, id, err)
	}
}

// ---------------------------------------------------------------------------
// The drain: works the queue until nothing is pending or claimed.

// queueDrainChild runs the drain workers, each logging to
// STORH_REL_OUT.<worker>, and exits 0 once the queue is drained.
func queueDrainChild() int {
	path, seed, lease, workers := queueChildEnv()
	db, q := openQueueChild(path)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	drained := func() bool {
		counts, err := q.Counts()
		p, c, _, _ := counts.Pending, counts.Claimed, counts.Done, counts.Dead
		if err != nil {
			queueDie("counts: %v", err)
		}
		return p == 0 && c == 0
	}
	var wg sync.WaitGroup
	for g := range workers {
		log := openQueueLog(os.Getenv("STORH_REL_OUT") + "." + strconv.Itoa(g))
		r := rand.New(rand.NewPCG(seed, 2000+uint64(g)))
		wg.Go(func() {
			for stopCtx.Err() == nil {
				var jobs []storh.Job
				var err error
				log.put("q %d", g)
				switch g % 3 {
				case 0, 1: // ClaimWait: woken by the end of the earliest lease
					var j storh.Job
					if j, err = q.ClaimWait(stopCtx, lease); err == nil {
						jobs = []storh.Job{j}
					} else if stopCtx.Err() != nil && errors.Is(err, context.Canceled) {
						log.put("Q %d 0", g)
						return
					}
				default: // Claim or ClaimMany, polling
					if k := r.IntN(4); k == 0 {
						var j storh.Job
						if j, err = q.Claim(lease); err == nil {
							jobs = []storh.Job{j}
						}
					} else {
						jobs, err = q.ClaimMany(1+k, lease)
					}
					if errors.Is(err, storh.ErrEmpty) {
						log.put("Q %d 0", g)
						if drained() {
							stop()
							return
						}
						time.Sleep(2 * time.Millisecond)
						continue
					}
				}
				if err != nil {
					queueDie("drain claim: %v", err)
				}
				// After the claim returned: the clock the claim read was
				// no later than this.
				wall := time.Now().UnixMilli()
				idx := make([]int, len(jobs))
				for i, j := range jobs {
					idx[i] = queueJobIndex(seed, j)
					log.put("H %d %d %s %d %d %d %d", g, idx[i], j.ID, j.Attempts, j.LeaseUntil.UnixMilli(), j.Changed.UnixMilli(), wall)
				}
				log.put("Q %d %d", g, len(jobs))
				for i, j := range jobs {
					log.put("c %d %d %s", g, idx[i], j.ID)
					queueAck(log, g, idx[i], j.ID, "C", "complete", q.Complete(j.ID))
				}
				if drained() {
					stop()
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		queueDie("the queue was not drained within a minute")
	}
	if err := db.Close(); err != nil {
		queueDie("close: %v", err)
	}
	return 0
}

// ---------------------------------------------------------------------------
// Parent

// queueEvent is one parsed log line.
type queueEvent struct {
	kind     byte // q Q H c C r R f F e E N
	worker   int
	idx      int
	id       uuidv7.UUID
	attempts int   // H
	lease    int64 // H, E: lease end (ms)
	changed  int64 // H: claim time (ms), as the claim recorded it
	wall     int64 // H: wall clock (ms) when the claim had returned
	op       string
}

// readQueueLog parses a worker's log. A last line without its newline was
// cut by the kill: its call was never acknowledged, and it is dropped.
func readQueueLog(t *testing.T, path string) []queueEvent {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 != len(data) {
		data = data[:i+1]
	}
	var evs []queueEvent
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		bad := func() { t.Fatalf("%s: bad log line %q", filepath.Base(path), line) }
		num := func(i int) int64 {
			if i >= len(f) {
				bad()
			}
			v, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				bad()
			}
			return v
		}
		if len(f) < 2 || len(f[0]) != 1 {
			bad()
		}
		ev := queueEvent{kind: f[0][0], worker: int(num(1))}
		switch ev.kind {
		case 'q':
		case 'Q':
			ev.idx = int(num(2))
		default:
			ev.idx = int(num(2))
			if len(f) < 4 {
				bad()
			}
			if ev.id, err = uuidv7.Parse(f[3]); err != nil {
				bad()
			}
			switch ev.kind {
			case 'H':
				ev.attempts, ev.lease, ev.changed, ev.wall = int(num(4)), num(5), num(6), num(7)
			case 'E':
				ev.lease = num(4)
			case 'N':
				if len(f) < 5 {
					bad()
				}
				ev.op = f[4]
			case 'c', 'C', 'r', 'R', 'f', 'F', 'e':
			default:
				bad()
			}
		}
		evs = append(evs, ev)
	}
	return evs
}

// queueVictimJob is what the victim's log says about one job at the kill.
type queueVictimJob struct {
	last      byte  // the kind of the last line about it
	lease     int64 // the last acknowledged lease end
	completed bool  // a Complete returned nil
}

// TestQueueCrashKill9 is the queue crash test; see the comment at the top
// of this file.
func TestQueueCrashKill9(t *testing.T) {
	t.Parallel()
	def := 2000
	if !testkit.Long() {
		def = 500
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "queue.db")
	queueCrash(t, envInt(t, "STORH_QUEUE_JOBS", def), queueSite{parent: path, child: path, logs: dir})
}

// queueSite says where queueCrash keeps its database: the path the test
// process opens and the one the children open, and what moves the file
// between them. The power-loss suite puts the children's on the power-cut
// mount and the test process's on the backing file (the test process
// serves the mount and must not map a file on it); toChildren mounts,
// toParent unmounts, after a kill cutting the power first.
type queueSite struct {
	parent, child, logs string
	toChildren          func()
	toParent            func(killed bool)
	// beforeKill, when set, runs when the victim is due to be killed and
	// may hold the kill back until a moment of its choosing; what it
	// returns (if not nil) runs right after the victim is signalled, to
	// let go of what would keep it from dying.
	beforeKill func() (onKill func())
}

func (s queueSite) children() {
	if s.toChildren != nil {
		s.toChildren()
	}
}

func (s queueSite) parentAfter(killed bool) {
	if s.toParent != nil {
		s.toParent(killed)
	}
}

// queueCrash runs the test above with n jobs at site.
func queueCrash(t *testing.T, n int, site queueSite) {
	seed := runSeed(t)
	r := rand.New(rand.NewPCG(seed, 0x9e3))
	dir, path := site.logs, site.parent
	start := time.Now()

	// The queue: batches of random size, and now and then a single Enqueue.
	ids := make([]uuidv7.UUID, n)
	byID := map[uuidv7.UUID]int{}
	func() {
		db, err := storh.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		q, err := db.Queue(queueCrashName, storh.WithMaxAttempts(queueCrashMaxAttempts), storh.WithDeterministicIDs(seed, 1_700_000_000_000))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; {
			if r.IntN(20) == 0 {
				id, err := q.Enqueue(queueJobPayload{I: i, Check: queueJobCheck(seed, i)})
				if err != nil {
					t.Fatalf("Enqueue %d: %v", i, err)
				}
				ids[i] = id
				i++
				continue
			}
			m := min(n-i, 1+r.IntN(300))
			items := make([]any, m)
			for k := range items {
				items[k] = queueJobPayload{I: i + k, Check: queueJobCheck(seed, i+k)}
			}
			got, err := q.EnqueueMany(items)
			if err != nil || len(got) != m {
				t.Fatalf("EnqueueMany of %d at %d: %d ids, %v", m, i, len(got), err)
			}
			copy(ids[i:], got)
			i += m
		}
		if counts, err := q.Counts(); err != nil || counts != (storh.QueueCounts{Pending: n}) {
			t.Fatalf("after enqueueing %d: Counts = %+v, %v", n, counts, err)
		}
	}()
	for i, id := range ids {
		if _, dup := byID[id]; dup {
			t.Fatalf("id %s given twice", id)
		}
		byID[id] = i
	}
	enqueued := time.Since(start)

	// The victim, killed while it holds claims.
	lease := time.Duration(300+r.IntN(701)) * time.Millisecond
	holdPct := 25 + r.IntN(36)
	victims := 2 + r.IntN(3)
	delay := time.Duration(50+r.IntN(1200)) * time.Millisecond
	victimLog := filepath.Join(dir, "victim.log")
	site.children()
	killMs := runQueueVictim(t, site.child, victimLog, seed, lease, holdPct, victims, n/2, delay, site.beforeKill)
	site.parentAfter(true)
	killed := time.Since(start)

	vevs := readQueueLog(t, victimLog)
	vjobs := map[int]*queueVictimJob{}
	claimInFlight := map[int]bool{} // victim goroutine → a claim without its "Q"
	// A Complete in flight at the kill is its goroutine's last line, not
	// its job's: another goroutine that held the job before its lease
	// ended may log an extension of it after the "c", and learn
	// ErrNotClaimed from a Complete that committed but was never answered.
	completeInFlight := map[int]int{} // victim goroutine → job of a "c" without its answer
	var vstats struct{ claims, completes, releases, fails, extends, notClaimed int }
	for _, ev := range vevs {
		delete(completeInFlight, ev.worker) // a goroutine calls one thing at a time
		switch ev.kind {
		case 'q':
			claimInFlight[ev.worker] = true
			continue
		case 'Q':
			claimInFlight[ev.worker] = false
			continue
		}
		if ev.idx < 0 || ev.idx >= n || ids[ev.idx] != ev.id {
			t.Fatalf("victim log: job %d is %s, enqueued as %s", ev.idx, ev.id, ids[min(max(ev.idx, 0), n-1)])
		}
		vj := vjobs[ev.idx]
		if vj == nil {
			vj = &queueVictimJob{}
			vjobs[ev.idx] = vj
		}
		vj.last = ev.kind
		switch ev.kind {
		case 'c':
			completeInFlight[ev.worker] = ev.idx
		case 'H':
			vj.lease = ev.lease
			vstats.claims++
		case 'E':
			vj.lease = ev.lease
			vstats.extends++
		case 'C':
			if vj.completed {
				t.Errorf("victim: job %d completed twice", ev.idx)
			}
			vj.completed = true
			vstats.completes++
		case 'R':
			vstats.releases++
		case 'F':
			vstats.fails++
		case 'N':
			vstats.notClaimed++
		}
	}
	anyClaimInFlight := false
	for _, v := range claimInFlight {
		anyClaimInFlight = anyClaimInFlight || v
	}
	// held: jobs whose last line is an acknowledged claim or extension, and
	// live: those of them whose lease was still running at the kill.
	held, live := map[int]int64{}, 0
	inflightComplete := map[int]bool{}
	for _, i := range completeInFlight {
		inflightComplete[i] = true
	}
	for i, vj := range vjobs {
		// A job with a Complete in flight may be done: it is checked as
		// one, not as held (its holder is the goroutine completing it).
		if (vj.last == 'H' || vj.last == 'E') && !inflightComplete[i] {
			held[i] = vj.lease
			if vj.lease > killMs {
				live++
			}
		}
	}
	if len(held) == 0 {
		t.Fatalf("the victim held no claim at the kill (%d claims logged); nothing was tested", vstats.claims)
	}

	// Right after the kill.
	func() {
		db, err := storh.Open(path)
		if err != nil {
			t.Fatalf("reopen after kill: %v", err)
		}
		defer db.Close()
		verifyQueueDB(t, db, "after the kill")
		q, err := db.Queue(queueCrashName, storh.WithoutCreate())
		if err != nil {
			t.Fatal(err)
		}
		counts, err := q.Counts()
		p, c, d, x := counts.Pending, counts.Claimed, counts.Done, counts.Dead
		if err != nil || p+c+d+x != n || x != 0 {
			t.Errorf("after the kill: Counts = %d pending, %d claimed, %d done, %d dead (%v); want %d jobs, none dead", p, c, d, x, err, n)
		}
		if d < vstats.completes || d > vstats.completes+len(inflightComplete) {
			t.Errorf("after the kill: %d done; the victim acknowledged %d completions and had %d in flight", d, vstats.completes, len(inflightComplete))
		}
		bad := 0
		for i, vj := range vjobs {
			j, err := q.Lookup(ids[i])
			if err != nil {
				t.Fatalf("Lookup job %d: %v", i, err)
			}
			switch {
			case vj.completed && j.State != storh.JobDone:
				t.Errorf("job %d: the victim's Complete returned nil, but after the kill it is %s: an acknowledged completion was lost", i, j.State)
				bad++
			case inflightComplete[i]:
				// Done or still claimed: the Complete's commit raced the kill.
			case (vj.last == 'H' || vj.last == 'E') && vj.lease > killMs:
				// A lease running at the kill: nothing could requeue it.
				if j.State != storh.JobClaimed || j.LeaseUntil.UnixMilli() != vj.lease {
					t.Errorf("job %d: held with a lease until %d (kill at %d), after the kill it is %s until %d", i, vj.lease, killMs, j.State, j.LeaseUntil.UnixMilli())
					bad++
				}
			case vj.last == 'H' || vj.last == 'E':
				// Ended before the kill: still claimed, or requeued by a
				// later claim of the victim.
				if !(j.State == storh.JobClaimed && j.LeaseUntil.UnixMilli() >= vj.lease) &&
					!(j.State == storh.JobPending && j.LastError == "lease expired") {
					t.Errorf("job %d: held until %d (before the kill at %d), after the kill it is %s until %d, last error %q",
						i, vj.lease, killMs, j.State, j.LeaseUntil.UnixMilli(), j.LastError)
					bad++
				}
			}
			if bad > 10 {
				t.Fatalf("too many differences; replay with STORH_RELIABILITY_SEED=%d", seed)
			}
		}
	}()
	if t.Failed() {
		t.Fatalf("the state after the kill is wrong; replay with STORH_RELIABILITY_SEED=%d", seed)
	}

	// The drain.
	drainLog := filepath.Join(dir, "drain.log")
	site.children()
	res := runChild(t, "queue-drain", "STORH_REL_DB="+site.child, "STORH_REL_OUT="+drainLog,
		"STORH_REL_SEED="+strconv.FormatUint(seed, 10), "STORH_REL_LEASE_MS="+strconv.FormatInt(queueDrainLease.Milliseconds(), 10),
		"STORH_REL_WORKERS="+strconv.Itoa(queueDrainWorkers))
	site.parentAfter(false)
	if res.Exit != 0 {
		t.Fatalf("drain child: exit %d %s\n%s", res.Exit, res.Signal, crashExcerpt(res.Stderr))
	}
	drained := time.Since(start)

	completedBy := make([][]string, n) // who got nil from Complete, per job
	for i, vj := range vjobs {
		if vj.completed {
			completedBy[i] = append(completedBy[i], "victim")
		}
	}
	firstDrainClaim := map[int]queueEvent{}
	perWorker := make([]int, queueDrainWorkers)
	drainNotClaimed, drainClaims := 0, 0
	for g := range queueDrainWorkers {
		for _, ev := range readQueueLog(t, drainLog+"."+strconv.Itoa(g)) {
			if ev.kind == 'q' || ev.kind == 'Q' {
				continue
			}
			if ev.idx < 0 || ev.idx >= n || ids[ev.idx] != ev.id {
				t.Fatalf("drain log %d: job %d is %s", g, ev.idx, ev.id)
			}
			switch ev.kind {
			case 'H':
				drainClaims++
				if vj := vjobs[ev.idx]; vj != nil && vj.completed {
					t.Errorf("job %d: claimed by drain worker %d (attempt %d) after the victim's acknowledged completion", ev.idx, g, ev.attempts)
				}
				if prev, ok := firstDrainClaim[ev.idx]; !ok || ev.changed < prev.changed {
					firstDrainClaim[ev.idx] = ev
				}
			case 'C':
				completedBy[ev.idx] = append(completedBy[ev.idx], "drain-"+strconv.Itoa(g))
				perWorker[g]++
			case 'N':
				drainNotClaimed++
			}
		}
	}
	zeroInFlight := 0
	for i, by := range completedBy {
		switch {
		case len(by) == 1:
		case len(by) == 0 && inflightComplete[i]:
			zeroInFlight++ // the victim's Complete committed; its acknowledgement died with it
		case len(by) == 0:
			t.Errorf("job %d: no worker's Complete returned nil for it", i)
		default:
			t.Errorf("job %d: completed %d times, by %v", i, len(by), by)
		}
	}
	for i, leaseEnd := range held {
		// By the claim's own timestamp, and by the wall clock: a claim
		// that returned before the lease end cannot have seen it ended.
		if ev, ok := firstDrainClaim[i]; ok && (ev.changed < leaseEnd || ev.wall < leaseEnd) {
			t.Errorf("job %d: the victim held it until %d, drain worker %d claimed it at %d (returned at %d by the wall clock)",
				i, leaseEnd, ev.worker, ev.changed, ev.wall)
		}
	}

	// The final state.
	func() {
		db, err := storh.Open(path)
		if err != nil {
			t.Fatalf("reopen after the drain: %v", err)
		}
		defer db.Close()
		verifyQueueDB(t, db, "after the drain")
		q, err := db.Queue(queueCrashName, storh.WithoutCreate())
		if err != nil {
			t.Fatal(err)
		}
		if counts, err := q.Counts(); err != nil || counts != (storh.QueueCounts{Done: n}) {
			t.Errorf("after the drain: Counts = %+v (%v); want %d done", counts, err, n)
		}
		done := 0
		for j, err := range q.Jobs(storh.JobDone) {
			if err != nil {
				t.Fatalf("Jobs(done): %v", err)
			}
			if _, ok := byID[j.ID]; !ok {
				t.Errorf("Jobs(done) lists %s, which was never enqueued", j.ID)
			}
			done++
		}
		if done != n {
			t.Errorf("Jobs(done) lists %d jobs, want %d", done, n)
		}
		bad := 0
		for i := range held {
			j, err := q.Lookup(ids[i])
			if err != nil {
				t.Fatalf("Lookup job %d: %v", i, err)
			}
			if j.State != storh.JobDone || j.Attempts < 2 || j.LastError != "lease expired" {
				t.Errorf("job %d, held by the victim at the kill: %s after %d attempts, last error %q; want done after 2 or more, \"lease expired\"",
					i, j.State, j.Attempts, j.LastError)
				if bad++; bad > 10 {
					t.Fatal("too many differences")
				}
			}
		}
	}()
	if t.Failed() {
		t.Fatalf("replay with STORH_RELIABILITY_SEED=%d", seed)
	}
	t.Logf("%d jobs (enqueued in %v); victim: %d goroutines, lease %v, holding %d%%, killed %v after its first claim "+
		"(at %v): %d claims, %d completions, %d releases, %d failures, %d extensions, %d not claimed; "+
		"at the kill %d held (%d with a running lease), %d completions in flight (%d of them committed), a claim in flight: %v; "+
		"drain: %d claims, completions per worker %v, %d ErrNotClaimed; drained at %v",
		n, enqueued.Round(time.Millisecond), victims, lease, holdPct, delay, killed.Round(time.Millisecond),
		vstats.claims, vstats.completes, vstats.releases, vstats.fails, vstats.extends, vstats.notClaimed,
		len(held), live, len(inflightComplete), zeroInFlight, anyClaimInFlight,
		drainClaims, perWorker, drainNotClaimed, drained.Round(time.Millisecond))
}

// runQueueVictim starts the victim, waits for its first claim, lets it run
// for delay and kills it with SIGKILL. It returns the time of the kill
// (ms), after which no victim claim can have been made.
func runQueueVictim(t *testing.T, path, logPath string, seed uint64, lease time.Duration, holdPct, workers, maxClaims int, delay time.Duration, beforeKill func() (onKill func())) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd := childCmd(ctx, "queue-victim", "STORH_REL_DB="+path, "STORH_REL_OUT="+logPath,
		"STORH_REL_SEED="+strconv.FormatUint(seed, 10), "STORH_REL_LEASE_MS="+strconv.FormatInt(lease.Milliseconds(), 10),
		"STORH_REL_WORKERS="+strconv.Itoa(workers), "STORH_REL_HOLD_PCT="+strconv.Itoa(holdPct),
		"STORH_REL_MAX_CLAIMS="+strconv.Itoa(maxClaims))
	cmd.ExtraFiles = []*os.File{pw}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(pr).ReadString('\n')
		ready <- line == "R\n"
	}()
	select {
	case ok := <-ready:
		if !ok {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the victim ended before its first claim:\n%s", crashExcerpt(stderr.String()))
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the victim made no claim in 20 s:\n%s", crashExcerpt(stderr.String()))
	}
	time.Sleep(delay) // the random moment is the point here, not a wait for something
	var onKill func()
	if beforeKill != nil {
		onKill = beforeKill()
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if onKill != nil {
		onKill()
	}
	// Taken after the signal: every claim the victim made used an earlier
	// clock reading.
	killMs := time.Now().UnixMilli()
	werr := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("the victim did not die of the kill (%v); stderr:\n%s", werr, crashExcerpt(stderr.String()))
	}
	return killMs
}

// verifyQueueDB fails the test on any problem Verify reports.
func verifyQueueDB(t *testing.T, db *storh.DB, when string) {
	t.Helper()
	rep, err := db.Verify(func(p storh.Problem) { t.Errorf("Verify %s: %v", when, p) })
	if err != nil || rep.Problems != 0 {
		t.Errorf("Verify %s: %+v, %v", when, rep, err)
	}
}
