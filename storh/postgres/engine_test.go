package postgres

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/api"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The engine's writes on a store cost the round trips counted here, once
// the DB knows the collection (its subtree cached, its largest id known):
// a put of a new record sends its lock, the check of the cached subtree,
// its writes and its commit marker in one round trip, one implicit
// transaction;
// a collection with indexes reads their definitions in a first one and
// writes with the COMMIT; a read of a stored record (a replacement, a
// read-modify-write) is a round trip of its own, after the definitions.
func TestEngineRoundTrips(t *testing.T) {
	s, rt := openCounted(t, pgtest.URL(t))
	db := openEngine(t, s)
	value := func(n int) []byte {
		v, err := engine.AppendValue(nil, map[string]any{"n": n, "tag": n % 3, "u": uuidv7.New().String()})
		must(t, err)
		return v
	}
	put := func(h engine.Handle, id uuidv7.UUID, n int) {
		t.Helper()
		op := engine.NewWriteOp()
		defer op.Release()
		op.Coll, op.ID, op.Value = h, id, value(n)
		must(t, db.Submit(op))
	}
	inc := func(h engine.Handle, id uuidv7.UUID) {
		t.Helper()
		must(t, db.Update(func(tx *engine.Tx) error {
			c, err := tx.UseHold(h, false, engine.HoldRows)
			if err != nil {
				return err
			}
			if _, err := tx.Get(c, id); err != nil {
				return err
			}
			return tx.Put(c, id, value(1), false)
		}))
	}
	putMany := func(h engine.Handle, n int) {
		t.Helper()
		must(t, db.Update(func(tx *engine.Tx) error {
			c, err := tx.UseHold(h, true, engine.HoldRows)
			if err != nil {
				return err
			}
			for i := range n {
				if err := tx.Put(c, uuidv7.New(), value(i), false); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	count := func(what string, want int64, fn func()) {
		t.Helper()
		before := rt.n.Load()
		fn()
		if got := rt.n.Load() - before; got != want {
			t.Errorf("%s: %d round trips, want %d", what, got, want)
		} else {
			t.Logf("%s: %d round trips", what, got)
		}
	}
	plain := engine.Handle{Name: "plain", Kind: engine.KindDocs}
	indexed := engine.Handle{Name: "indexed", Kind: engine.KindDocs, Indexes: []engine.IndexSpec{
		{Name: "tag", Paths: [][]string{{"tag"}}}, {Name: "u", Paths: [][]string{{"u"}}, Unique: true},
	}}
	for _, h := range []engine.Handle{plain, indexed} {
		id := uuidv7.New()
		// Warm: the collection made, its subtree cached, the connection's
		// statements prepared.
		for range 3 {
			put(h, id, 0)
			inc(h, id)
			putMany(h, 100)
		}
		put(h, uuidv7.New(), 7)
		// The index definitions are read in a round trip of their own.
		extra := int64(0)
		if len(h.Indexes) > 0 {
			extra = 1
		}
		count(h.Name+": a put of a new record", 1+extra, func() { put(h, uuidv7.New(), 5) })
		count(h.Name+": 100 puts in Update", 1+extra, func() { putMany(h, 100) })
		count(h.Name+": a put of a stored record", 2+extra, func() { put(h, id, 6) })
		count(h.Name+": a read-modify-write in Update", 2+extra, func() { inc(h, id) })
	}

	queueRoundTrips(t, db, rt, count)
}

// queueRoundTrips counts the round trips of a queue's claims and
// completions, once the DB knows the queue. A claim locks the first
// expired claims (none here) and the first pending entries with BEGIN and
// the locks on the queue, then locks the jobs' states and reads their
// payloads, then commits, however many jobs it claims; a completion locks
// the job's state with BEGIN, then commits, and so does a completion of
// many jobs.
func queueRoundTrips(t *testing.T, db *engine.DB, rt *roundTrips, count func(string, int64, func())) {
	h := engine.Handle{Name: "jobs", Kind: engine.KindQueue}
	submit := submitter(t, db, h)
	claim := func(n int) []engine.Job {
		t.Helper()
		var jobs []engine.Job
		submit(engine.HoldMoving, func(tx *engine.Tx, c *engine.Coll) error {
			var err error
			jobs, err = tx.Claim(c, db.Now().UnixMilli(), 60_000, n, engine.QueueRule{MaxAttempts: 5})
			return err
		})
		if len(jobs) != n {
			t.Fatalf("Claim(%d) claimed %d jobs", n, len(jobs))
		}
		return jobs
	}
	complete := func(id uuidv7.UUID) {
		t.Helper()
		submit(engine.HoldMoving, func(tx *engine.Tx, c *engine.Coll) error {
			return tx.Complete(c, id, 0, db.Now().UnixMilli())
		})
	}
	submit(engine.HoldRows, func(tx *engine.Tx, c *engine.Coll) error {
		for i := range 50 + 3*11 {
			v, err := engine.AppendValue(nil, map[string]any{"n": i})
			if err != nil {
				return err
			}
			if err := tx.Enqueue(c, uuidv7.New(), v, db.Now().UnixMilli(), db.Now().UnixMilli()); err != nil {
				return err
			}
		}
		return nil
	})
	// Warm: the queue's subtree cached, the connection's statements
	// prepared; 50 jobs stay pending.
	for range 3 {
		for _, n := range []int{1, 10} {
			for _, j := range claim(n) {
				complete(j.ID)
			}
		}
	}
	var one []engine.Job
	count("queue: Claim(1)", 2, func() { one = claim(1) })
	// The look for expired leases and the read of the pending entries are
	// one statement.
	sqls := rt.record(func() { claim(1) })
	if ranges := slices.IndexFunc(sqls, func(sql string) bool { return strings.Contains(sql, "SKIP LOCKED") }); ranges < 0 ||
		strings.Count(sqls[ranges], "SKIP LOCKED") != 2 || slices.ContainsFunc(sqls[ranges+1:], func(sql string) bool { return strings.Contains(sql, "SKIP LOCKED") }) {
		t.Errorf("Claim(1) read the expired leases and the pending entries in other than one statement:\n%s", strings.Join(sqls, "\n"))
	}
	ten := claim(10)
	count("queue: Complete", 2, func() { complete(one[0].ID) })
	ids := make([]uuidv7.UUID, len(ten))
	for i, j := range ten {
		ids[i] = j.ID
	}
	count("queue: CompleteMany(10)", 2, func() {
		submit(engine.HoldMoving, func(tx *engine.Tx, c *engine.Coll) error {
			n, err := tx.CompleteMany(c, ids, db.Now().UnixMilli())
			if err == nil && n != len(ids) {
				t.Errorf("CompleteMany of %d claimed jobs completed %d", len(ids), n)
			}
			return err
		})
	})
}

// A claim beside other writers reads the payloads with the pending
// entries: one it cannot read (damaged, or missing) sends its job to the
// dead letters, saying why, and the claim takes the next job instead.
func TestEngineClaimUnreadablePayload(t *testing.T) {
	s, err := Open(ctx, pgtest.URL(t))
	must(t, err)
	db := openEngine(t, s)
	h := engine.Handle{Name: "jobs", Kind: engine.KindQueue}
	submit := submitter(t, db, h)
	ids := []uuidv7.UUID{uuidv7.New(), uuidv7.New(), uuidv7.New()}
	submit(engine.HoldRows, func(tx *engine.Tx, c *engine.Coll) error {
		for i, id := range ids {
			v, err := engine.AppendValue(nil, map[string]any{"n": i})
			if err != nil {
				return err
			}
			if err := tx.Enqueue(c, id, v, 1000, 1000); err != nil {
				return err
			}
		}
		return nil
	})
	kt, err := s.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	records := kt.Bucket([]byte("jobs")).Bucket([]byte("r"))
	damaged := bytes.Clone(records.Get(ids[0][:]))
	damaged[len(damaged)-1] ^= 1
	must(t, records.Put(ids[0][:], damaged))
	must(t, records.Delete(ids[1][:]))
	commit(t, kt)

	var claimed []engine.Job
	submit(engine.HoldMoving, func(tx *engine.Tx, c *engine.Coll) error {
		var err error
		claimed, err = tx.Claim(c, 2000, 60_000, 3, engine.QueueRule{MaxAttempts: 5})
		return err
	})
	if len(claimed) != 1 || claimed[0].ID != ids[2] {
		t.Fatalf("Claim(3) took %v; want only %v", claimed, ids[2])
	}
	must(t, db.View(func(tx *engine.Tx) error {
		c, err := tx.Coll("jobs", engine.KindQueue, false)
		if err != nil {
			return err
		}
		if n := tx.JobCounts(c); n != [5]int64{0, 0, 1, 0, 2} {
			t.Errorf("JobCounts = %v; want 1 claimed and 2 dead", n[1:])
		}
		_, err = tx.JobsIn(c, api.JobDead, nil, 10, func(j engine.Job) {
			if j.ID != ids[0] && j.ID != ids[1] || !strings.HasPrefix(j.Reason, "payload unreadable: ") {
				t.Errorf("dead job %s, reason %q; want %s or %s, its payload unreadable", j.ID, j.Reason, ids[0], ids[1])
			}
		})
		return err
	}))
}

// openEngine opens the engine on s, entered, for the test's length.
func openEngine(t *testing.T, s *Store) *engine.DB {
	t.Helper()
	db, err := engine.OpenStore(s, "pg", engine.Options{})
	must(t, err)
	must(t, db.Enter())
	t.Cleanup(func() {
		db.Exit()
		db.Close()
	})
	return db
}

// submitter returns a function that runs fn on collection h through the
// engine's group commit, with hold, creating h when rows are held.
func submitter(t *testing.T, db *engine.DB, h engine.Handle) func(hold engine.Hold, fn func(*engine.Tx, *engine.Coll) error) {
	return func(hold engine.Hold, fn func(*engine.Tx, *engine.Coll) error) {
		t.Helper()
		op := engine.NewWriteOp()
		defer op.Release()
		op.Coll, op.Fn, op.Create, op.Hold = h, fn, hold == engine.HoldRows, hold
		must(t, db.Submit(op))
	}
}
