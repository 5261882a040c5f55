package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/engine"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/internal/tune"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The crash harness. A child process (crashWriterChild) writes to a database
// through every write path at once. Before each call it announces the
// intent (the operation, the collections, the explicit ids and the tag of
// every record it writes: the tag fixes the record's bytes, see content);
// after the call returns it announces the acknowledgement (with the ids the
// library generated). The parent kills it with SIGKILL at a random moment,
// reopens the file and checks it against a model built from those reports:
//
//   - every acknowledged write is present with exactly the bytes written
//     (acknowledged deletes are absent);
//   - an operation in flight at the kill is all there or not at all (one
//     record, a PutMany batch, an Update across two collections); a
//     PutStream in flight shows a prefix of whole StreamBatch batches;
//   - nothing is present that no reported operation wrote;
//   - Verify reports no problem and Count matches the model;
//   - Stream returns exactly what a raw bbolt read finds.
//
// The same file is reused for crashEpoch cycles, so the child also writes
// to a file recovered from the previous kill.
//
// To cover a new write path, add an operation to crashOps (child side) and
// teach applyOp how to resolve it (parent side).

const (
	crashDocs  = "docs"   // Docs: puts, upserts, deletes
	crashLog   = "events" // Log: inserts only
	crashEpoch = 5        // cycles per database file
)

// crashEffect is one record an operation writes or deletes.
type crashEffect struct {
	C   string `json:"c"`            // collection
	ID  string `json:"id,omitempty"` // explicit id; empty when the library generates it
	Tag string `json:"g,omitempty"`  // tag of the content written; empty for a delete
}

// crashEvent is one line on the report pipe.
type crashEvent struct {
	K   string        `json:"k"` // "R" ready, "I" intent, "A" acknowledged, "F" failed
	Op  int64         `json:"op,omitempty"`
	T   string        `json:"t,omitempty"` // operation type
	Eff []crashEffect `json:"e,omitempty"`
	// PutStream writes N records tagged tagFor(Run, Op, i) into C, with
	// generated ids; it has no Eff.
	C   string   `json:"c,omitempty"`
	N   int      `json:"n,omitempty"`
	Run string   `json:"run,omitempty"`
	IDs []string `json:"ids,omitempty"` // acknowledgement: the id of every Eff, in order
	Err string   `json:"err,omitempty"`
}

func tagFor(run string, op int64, i int) string {
	return run + "." + strconv.FormatInt(op, 10) + "." + strconv.Itoa(i)
}

func init() { roles["crash-writer"] = crashWriterChild }

// crashReporter serialises report lines onto the pipe. Each line is written
// whole under the lock before the caller goes on, so an intent is on the
// pipe before its call starts; a kill can only cut the last line short.
type crashReporter struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *crashReporter) send(ev crashEvent) {
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	b = append(b, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.w.Write(b); err != nil {
		os.Exit(5) // the parent is gone
	}
}

type crashChild struct {
	rep    *crashReporter
	db     *storh.DB
	docs   *storh.Docs
	events *storh.Log
	run    string
	ops    atomic.Int64
	stream atomic.Bool // one PutStream per run keeps the file small
}

// crashTune makes the writer's blocked indexes fold every few dozen
// changes into small blocks, so that kills and power cuts land in folds,
// block splits and merges as often as in plain writes.
const crashTune = "block=512,foldmin=24,foldmax=200,step=2048"

func crashWriterChild() int {
	path := os.Getenv("STORH_REL_DB")
	seed, _ := strconv.ParseUint(os.Getenv("STORH_REL_SEED"), 10, 64)
	c := &crashChild{rep: &crashReporter{w: os.NewFile(3, "report")}, run: os.Getenv("STORH_REL_RUN")}
	if os.Getenv(tune.Env) == "" {
		if _, err := tune.Set(crashTune); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
	}
	var err error
	if c.db, err = storh.Open(path); err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 4
	}
	// Indexes of every shape, so that each kill also tests that index
	// entries commit with their records (the checker's Verify checks them
	// both ways): unique, plain, list elements, compound on a nested field.
	// And a change feed on each collection, which the checker replays: it
	// must rebuild exactly what the collection holds after every kill.
	if c.docs, err = c.db.Docs(crashDocs, storh.WithIndex(storh.Index("t").Unique()), storh.WithIndex(storh.Index("n")),
		storh.WithIndex(storh.Index("l")), storh.WithIndex(storh.Index("m.ok", "f")), storh.WithChangeFeed(crashFeedKeep)); err != nil {
		fmt.Fprintln(os.Stderr, "docs:", err)
		return 4
	}
	if c.events, err = c.db.Log(crashLog, storh.WithIndex(storh.Index("s")), storh.WithChangeFeed(crashFeedKeep)); err != nil {
		fmt.Fprintln(os.Stderr, "events:", err)
		return 4
	}
	c.rep.send(crashEvent{K: "R"})
	for w := range 3 {
		go c.worker(rand.New(rand.NewPCG(seed, uint64(w))))
	}
	// The parent kills long before this; a child still alive is a bug.
	time.Sleep(time.Minute)
	fmt.Fprintln(os.Stderr, "crash-writer: not killed within a minute")
	return 7
}

// crashOps is the mix of operations, by weight.
var crashOps = []struct {
	name   string
	weight int
}{
	{"put", 24}, {"logput", 10}, {"upsert", 14}, {"delete", 7}, {"putmany", 14},
	{"update", 16}, {"burst", 8}, {"stream", 7},
}

func pickOp(r *rand.Rand) string {
	total := 0
	for _, o := range crashOps {
		total += o.weight
	}
	n := r.IntN(total)
	for _, o := range crashOps {
		if n < o.weight {
			return o.name
		}
		n -= o.weight
	}
	panic("unreachable")
}

// worker runs operations one after another. It owns the Docs ids it
// created: only it upserts or deletes them, so each id sees one operation
// at a time and the parent can order them by acknowledgement.
func (c *crashChild) worker(r *rand.Rand) {
	var owned []uuidv7.UUID
	for {
		switch pickOp(r) {
		case "put":
			if id, ok := c.put(); ok {
				owned = append(owned, id)
			}
		case "logput":
			op := c.ops.Add(1)
			id, tag := uuidv7.New(), tagFor(c.run, op, 0)
			c.do(crashEvent{Op: op, T: "logput", Eff: []crashEffect{{C: crashLog, ID: id.String(), Tag: tag}}}, func() ([]string, error) {
				_, err := c.events.PutWithID(id, content(tag))
				return []string{id.String()}, err
			})
		case "upsert":
			if len(owned) == 0 {
				continue
			}
			op := c.ops.Add(1)
			id, tag := owned[r.IntN(len(owned))], tagFor(c.run, op, 0)
			c.do(crashEvent{Op: op, T: "upsert", Eff: []crashEffect{{C: crashDocs, ID: id.String(), Tag: tag}}}, func() ([]string, error) {
				_, err := c.docs.PutWithID(id, content(tag))
				return []string{id.String()}, err
			})
		case "delete":
			if len(owned) == 0 {
				continue
			}
			i := r.IntN(len(owned))
			id := owned[i]
			owned = slices.Delete(owned, i, i+1)
			op := c.ops.Add(1)
			c.do(crashEvent{Op: op, T: "delete", Eff: []crashEffect{{C: crashDocs, ID: id.String()}}}, func() ([]string, error) {
				return []string{id.String()}, c.docs.Delete(id)
			})
		case "putmany":
			owned = append(owned, c.putMany(r)...)
		case "update":
			owned = c.update(r, owned)
		case "burst":
			// Many goroutines at once: their single puts share group commits.
			var wg sync.WaitGroup
			for range 4 + r.IntN(28) {
				wg.Go(func() { c.put() })
			}
			wg.Wait()
		case "stream":
			if c.stream.Swap(true) {
				continue
			}
			op := c.ops.Add(1)
			coll := []string{crashDocs, crashLog}[r.IntN(2)]
			n := storh.StreamBatch + 1 + r.IntN(storh.StreamBatch)
			seq := func(yield func(any) bool) {
				for i := range n {
					if !yield(content(tagFor(c.run, op, i))) {
						return
					}
				}
			}
			c.do(crashEvent{Op: op, T: "stream", C: coll, N: n, Run: c.run}, func() ([]string, error) {
				var put func(iter.Seq[any]) (int, error) = c.docs.PutStream
				if coll == crashLog {
					put = c.events.PutStream
				}
				got, err := put(seq)
				if err == nil && got != n {
					err = fmt.Errorf("PutStream stored %d of %d", got, n)
				}
				return nil, err
			})
		}
	}
}

func (c *crashChild) put() (uuidv7.UUID, bool) {
	op := c.ops.Add(1)
	tag := tagFor(c.run, op, 0)
	var id uuidv7.UUID
	ok := c.do(crashEvent{Op: op, T: "put", Eff: []crashEffect{{C: crashDocs, Tag: tag}}}, func() ([]string, error) {
		rec, err := c.docs.Put(content(tag))
		id = rec.ID
		return []string{id.String()}, err
	})
	return id, ok
}

// putMany writes one batch, to either collection, mixing generated and
// explicit ids; it returns the Docs ids the worker now owns.
func (c *crashChild) putMany(r *rand.Rand) []uuidv7.UUID {
	op := c.ops.Add(1)
	coll := []string{crashDocs, crashLog}[r.IntN(2)]
	n := 1 + r.IntN(60)
	ev := crashEvent{Op: op, T: "putmany"}
	items := make([]any, n)
	for i := range n {
		tag := tagFor(c.run, op, i)
		eff := crashEffect{C: coll, Tag: tag}
		if r.IntN(2) == 0 {
			id := uuidv7.New()
			eff.ID = id.String()
			items[i] = storh.Entry{ID: id, Data: content(tag)}
		} else {
			items[i] = content(tag)
		}
		ev.Eff = append(ev.Eff, eff)
	}
	var ids []uuidv7.UUID
	c.do(ev, func() ([]string, error) {
		var recs []storh.Record
		var err error
		if coll == crashDocs {
			recs, err = c.docs.PutMany(items)
		} else {
			recs, err = c.events.PutMany(items)
		}
		out := make([]string, len(recs))
		for i, rec := range recs {
			out[i] = rec.ID.String()
			ids = append(ids, rec.ID)
		}
		return out, err
	})
	if coll != crashDocs {
		return nil
	}
	return ids
}

// update writes across both collections in one transaction: an upsert of
// an owned document (or a new one), one to three log records, and
// sometimes the delete of another owned document.
func (c *crashChild) update(r *rand.Rand, owned []uuidv7.UUID) []uuidv7.UUID {
	op := c.ops.Add(1)
	ev := crashEvent{Op: op, T: "update"}
	var upsert uuidv7.UUID
	if len(owned) > 0 && r.IntN(3) > 0 {
		upsert = owned[r.IntN(len(owned))]
	} else {
		upsert = uuidv7.New()
	}
	ev.Eff = append(ev.Eff, crashEffect{C: crashDocs, ID: upsert.String(), Tag: tagFor(c.run, op, 0)})
	for i := range 1 + r.IntN(3) {
		ev.Eff = append(ev.Eff, crashEffect{C: crashLog, ID: uuidv7.New().String(), Tag: tagFor(c.run, op, i+1)})
	}
	var del uuidv7.UUID
	if len(owned) > 1 && r.IntN(3) == 0 {
		i := r.IntN(len(owned))
		if owned[i] != upsert {
			del = owned[i]
			owned = slices.Delete(owned, i, i+1)
			ev.Eff = append(ev.Eff, crashEffect{C: crashDocs, ID: del.String()})
		}
	}
	ok := c.do(ev, func() ([]string, error) {
		err := c.db.Update(func(tx *storh.Tx) error {
			d, err := tx.Docs(crashDocs)
			if err != nil {
				return err
			}
			l, err := tx.Log(crashLog)
			if err != nil {
				return err
			}
			for _, e := range ev.Eff {
				id := uuidv7.MustParse(e.ID)
				switch {
				case e.Tag == "":
					err = d.Delete(id)
				case e.C == crashDocs:
					_, err = d.PutWithID(id, content(e.Tag))
				default:
					_, err = l.PutWithID(id, content(e.Tag))
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		out := make([]string, len(ev.Eff))
		for i, e := range ev.Eff {
			out[i] = e.ID
		}
		return out, err
	})
	if ok && !slices.Contains(owned, upsert) {
		owned = append(owned, upsert)
	}
	return owned
}

// do announces ev, runs call, and acknowledges it with the ids call
// returns, or reports its failure.
func (c *crashChild) do(ev crashEvent, call func() ([]string, error)) bool {
	ev.K = "I"
	c.rep.send(ev)
	ids, err := call()
	if err != nil {
		c.rep.send(crashEvent{K: "F", Op: ev.Op, Err: err.Error()})
		return false
	}
	c.rep.send(crashEvent{K: "A", Op: ev.Op, IDs: ids})
	return true
}

// ---------------------------------------------------------------------------
// Parent
// ---------------------------------------------------------------------------

// crashStats counts what the kill cycles covered, for the test log.
type crashStats struct {
	cycles, kills  int
	ackedOps       map[string]int
	recordsChecked int
	inflight       map[string]int // type/outcome → count
	partialStreams int
	maxRecords     int
	killModes      map[string]int
}

// TestCrashKill9 runs kill cycles against a writing child process; see the
// comment at the top of this file. STORH_CRASH_CYCLES sets the number of
// cycles (50 with STORH_LONG=1, 15 otherwise).
func TestCrashKill9(t *testing.T) {
	t.Parallel()
	def := 50
	if !testkit.Long() {
		def = 15
	}
	cycles := envInt(t, "STORH_CRASH_CYCLES", def)
	seed := runSeed(t)
	r := rand.New(rand.NewPCG(seed, 99))
	dir := t.TempDir()
	st := crashStats{ackedOps: map[string]int{}, inflight: map[string]int{}, killModes: map[string]int{}}
	cache := map[string][]byte{}
	var path string
	var model map[string]map[uuidv7.UUID]string
	start := time.Now()
	for cycle := range cycles {
		if cycle%crashEpoch == 0 {
			path = fmt.Sprintf("%s/crash-%d.db", dir, cycle/crashEpoch)
			model = map[string]map[uuidv7.UUID]string{crashDocs: {}, crashLog: {}}
			clear(cache)
		}
		evs, mode := runCrashCycle(t, path, fmt.Sprintf("c%d", cycle), seed+uint64(cycle), r, "", nil)
		st.killModes[mode]++
		st.kills++
		model = checkCrashCycle(t, path, model, evs, &st, cache)
		st.cycles++
		if t.Failed() {
			t.Fatalf("cycle %d (kill mode %s) failed; replay with STORH_RELIABILITY_SEED=%d", cycle, mode, seed)
		}
	}
	acked := 0
	for _, n := range st.ackedOps {
		acked += n
	}
	t.Logf("%d kill cycles in %v: %d acknowledged operations checked %v; %d records compared byte for byte (largest file %d records); "+
		"in flight at the kill: %v (%d partial PutStreams, whole batches only); kill modes %v",
		st.cycles, time.Since(start).Round(time.Millisecond), acked, st.ackedOps, st.recordsChecked, st.maxRecords,
		st.inflight, st.partialStreams, st.killModes)
}

// killHook chooses the moment of a kill itself: it returns when the child
// is to be killed, with the name of its mode and, if the child cannot die
// until something is let go (a stalled fsync), what lets it go.
type killHook func(seen <-chan crashEvent) (mode string, release func())

// runCrashCycle starts the child on path, kills it with SIGKILL at a
// moment chosen by one of three modes (or by hook, when not nil), and
// returns every complete report line it wrote.
func runCrashCycle(t *testing.T, path, run string, seed uint64, r *rand.Rand, mode string, hook killHook) ([]crashEvent, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd := childCmd(ctx, "crash-writer", "STORH_REL_DB="+path, "STORH_REL_RUN="+run, "STORH_REL_SEED="+strconv.FormatUint(seed, 10))
	cmd.ExtraFiles = []*os.File{pw}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()

	var evs []crashEvent
	seen := make(chan crashEvent, 64)
	done := make(chan error, 1)
	go func() {
		defer close(seen)
		br := bufio.NewReaderSize(pr, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				// A line cut short by the kill was never completed: its
				// call never started (intents) or its report is lost
				// (acks), which the model treats as in flight.
				if err == io.EOF {
					err = nil
				}
				done <- err
				return
			}
			var ev crashEvent
			if err := json.Unmarshal(line, &ev); err != nil {
				done <- fmt.Errorf("bad report line %q: %v", line, err)
				return
			}
			evs = append(evs, ev)
			select {
			case seen <- ev:
			default:
			}
		}
	}()

	var release func()
	if hook != nil {
		mode, release = hook(seen)
	} else if mode == "" {
		mode = []string{"early", "random", "random", "targeted", "targeted"}[r.IntN(5)]
	}
	var delay time.Duration
	switch mode {
	case "early":
		// Anywhere from process start through Open to the first writes.
		delay = time.Duration(r.IntN(60)) * time.Millisecond
	case "random":
		waitFor(seen, func(ev crashEvent) bool { return ev.K == "R" }, 10*time.Second)
		delay = time.Duration(1+r.IntN(500)) * time.Millisecond
	case "targeted":
		// Right after a multi-record operation starts, when a torn write
		// would show.
		want := []string{"putmany", "update", "stream", "stream"}[r.IntN(4)]
		mode += "-" + want
		waitFor(seen, func(ev crashEvent) bool { return ev.K == "R" }, 10*time.Second)
		waitFor(seen, func(ev crashEvent) bool { return ev.K == "I" && ev.T == want }, 2*time.Second)
		if want == "stream" {
			delay = time.Duration(r.IntN(400)) * time.Millisecond
		} else {
			delay = time.Duration(r.IntN(1500)) * time.Microsecond
		}
	}
	time.Sleep(delay) // the random moment is the point here, not a wait for something
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if release != nil {
		release()
	}
	for range seen { // drain so the reader reaches EOF
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("child did not die of the kill (%v); stderr:\n%s", werr, crashExcerpt(stderr.String()))
	}
	return evs, mode
}

// TestCrashCheckerCatchesDamage makes sure the crash checker could fail: it
// runs one real cycle, then checks copies of the resulting file tampered
// with in ways a broken commit protocol would leave it (an acknowledged
// record lost, an acknowledged record with other bytes, a record nobody
// wrote; counters kept consistent so that only the model can tell) and
// expects the checker to complain about each.
func TestCrashCheckerCatchesDamage(t *testing.T) {
	t.Parallel()
	seed := runSeed(t)
	dir := t.TempDir()
	path := dir + "/real.db"
	empty := func() map[string]map[uuidv7.UUID]string {
		return map[string]map[uuidv7.UUID]string{crashDocs: {}, crashLog: {}}
	}
	var evs []crashEvent
	var ackedID uuidv7.UUID
	var ackedTag string
	for attempt := 0; ackedTag == "" && attempt < 10; attempt++ {
		os.Remove(path)
		// Each attempt its own stream: the same one would kill at the same
		// moment again.
		evs, _ = runCrashCycle(t, path, "m", seed, rand.New(rand.NewPCG(seed, 5+uint64(attempt))), "random", nil)
		in := map[int64]crashEvent{}
		type acked struct {
			id  uuidv7.UUID
			tag string
		}
		var puts []acked
		touched := map[string]int{} // id → operations that name it
		for _, ev := range evs {
			if ev.K == "I" {
				in[ev.Op] = ev
				for _, e := range ev.Eff {
					touched[e.ID]++
				}
			}
			if ev.K == "A" && in[ev.Op].T == "put" {
				puts = append(puts, acked{uuidv7.MustParse(ev.IDs[0]), in[ev.Op].Eff[0].Tag})
			}
		}
		// The tampering needs an acknowledged put that no other operation
		// touched (a later delete or upsert, acknowledged or in flight at
		// the kill, would explain a missing or changed record), and whose
		// record is in the file as the put wrote it.
		puts = slices.DeleteFunc(puts, func(p acked) bool { return touched[p.id.String()] > 0 }) // a put names no id: it gets one
		testkit.ViewBolt(t, path, func(tx *bolt.Tx) {
			root := tx.Bucket([]byte(crashDocs))
			if root == nil {
				return // killed before the collection was made
			}
			recs := root.Bucket([]byte("r"))
			for _, p := range slices.Backward(puts) {
				if v := recs.Get(p.id[:]); v != nil && bytes.Equal(v, encoded(t, p.id, p.tag)) {
					ackedID, ackedTag = p.id, p.tag
					return
				}
			}
		})
	}
	if ackedTag == "" {
		t.Fatal("no acknowledged put left untouched in ten cycles")
	}
	st := crashStats{ackedOps: map[string]int{}, inflight: map[string]int{}}
	checkCrashCycle(t, path, empty(), evs, &st, map[string][]byte{})
	if t.Failed() {
		t.Fatal("the untampered cycle failed")
	}

	tampers := []struct {
		name, want string
		fn         func(recs *bolt.Bucket) (countDelta, bytesDelta int64)
	}{
		{"lost-acknowledged", "is missing", func(recs *bolt.Bucket) (int64, int64) {
			n := int64(len(recs.Get(ackedID[:])))
			recs.Delete(ackedID[:])
			return -1, -n
		}},
		{"changed-acknowledged", "bytes differ", func(recs *bolt.Bucket) (int64, int64) {
			old := int64(len(recs.Get(ackedID[:])))
			v := encoded(t, ackedID, "someone.else")
			recs.Put(ackedID[:], v)
			return 0, int64(len(v)) - old
		}},
		{"phantom", "no reported operation explains it", func(recs *bolt.Bucket) (int64, int64) {
			id := uuidv7.New()
			v := encoded(t, id, "phantom.1.0")
			recs.Put(id[:], v)
			return 1, int64(len(v))
		}},
	}
	for _, tc := range tampers {
		cp := dir + "/" + tc.name + ".db"
		copyFile(t, path, cp)
		rawUpdate(t, cp, func(tx *bolt.Tx) error {
			root := tx.Bucket([]byte(crashDocs))
			dc, db := tc.fn(root.Bucket([]byte("r")))
			meta := root.Bucket([]byte("m"))
			for key, d := range map[string]int64{"count": dc, "bytes": db} {
				var v [8]byte
				binary.BigEndian.PutUint64(v[:], binary.BigEndian.Uint64(meta.Get([]byte(key)))+uint64(d))
				if err := meta.Put([]byte(key), v[:]); err != nil {
					return err
				}
			}
			return nil
		})
		rec := &recorder{TB: t}
		var wg sync.WaitGroup
		wg.Go(func() {
			st := crashStats{ackedOps: map[string]int{}, inflight: map[string]int{}}
			checkCrashCycle(rec, cp, empty(), evs, &st, map[string][]byte{})
		})
		wg.Wait()
		if !rec.saw(tc.want) {
			t.Errorf("%s: the checker did not complain %q; it said %q", tc.name, tc.want, rec.msgs)
		}
	}
}

// recorder is a testing.TB that collects failures instead of failing, to
// test a checker. Fatal ends the calling goroutine, like the real one.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Helper() {}
func (r *recorder) add(s string) {
	r.mu.Lock()
	r.msgs = append(r.msgs, s)
	r.mu.Unlock()
}
func (r *recorder) Errorf(f string, a ...any) { r.add(fmt.Sprintf(f, a...)) }
func (r *recorder) Error(a ...any)            { r.add(fmt.Sprint(a...)) }
func (r *recorder) Fatalf(f string, a ...any) { r.add(fmt.Sprintf(f, a...)); runtime.Goexit() }
func (r *recorder) Fatal(a ...any)            { r.add(fmt.Sprint(a...)); runtime.Goexit() }
func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs) > 0
}

func (r *recorder) saw(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if strings.Contains(m, sub) {
			return true
		}
	}
	return false
}

// waitFor reads events until match or the timeout (then it returns; the
// kill happens anyway).
func waitFor(seen <-chan crashEvent, match func(crashEvent) bool, timeout time.Duration) {
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-seen:
			if !ok || match(ev) {
				return
			}
		case <-deadline:
			return
		}
	}
}

type crashLoc struct {
	coll string
	id   uuidv7.UUID
}

// checkCrashCycle reopens the killed database and checks it against model
// (the state before this cycle) and the cycle's reports. It returns the
// new model: the state it found, once proven to be a valid outcome.
func checkCrashCycle(t testing.TB, path string, model map[string]map[uuidv7.UUID]string, evs []crashEvent, st *crashStats, cache map[string][]byte) map[string]map[uuidv7.UUID]string {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if len(evs) > 0 {
			t.Fatalf("the database file is gone after %d reports", len(evs))
		}
		return model // killed before the file was created
	}
	// Through the library: open, verify, count, stream.
	db, err := storh.Open(path)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	rep, err := db.Verify(func(p storh.Problem) { t.Errorf("Verify after kill: %v", p) })
	if err != nil || rep.Problems != 0 {
		t.Errorf("Verify after kill: %+v, %v", rep, err)
	}
	counts := map[string]int{}
	streamed := map[string][]storh.Record{}
	for _, coll := range []string{crashDocs, crashLog} {
		var h collection
		if coll == crashDocs {
			h, err = db.Docs(coll)
		} else {
			h, err = db.Log(coll)
		}
		if err != nil {
			t.Fatalf("%s: %v", coll, err)
		}
		if counts[coll], err = h.Count(); err != nil {
			t.Fatalf("Count(%s): %v", coll, err)
		}
		for rec, err := range h.Stream(query.All()) {
			if err != nil {
				t.Fatalf("Stream(%s): %v", coll, err)
			}
			streamed[coll] = append(streamed[coll], rec)
		}
		checkFeedReplay(t, coll, h.(fed), streamed[coll])
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// And raw, through bbolt.
	obs := readRaw(t, path)
	byTag := map[string]crashLoc{}
	for coll, recs := range obs {
		if coll != crashDocs && coll != crashLog {
			t.Errorf("unexpected collection %q after kill", coll)
		}
		for id, v := range recs {
			tag := tagOf(id, v)
			if tag == "" {
				t.Errorf("%s %s: unreadable value after kill", coll, id)
			}
			if prev, dup := byTag[tag]; dup {
				t.Errorf("record %s stored twice: %s %s and %s %s", tag, prev.coll, prev.id, coll, id)
			}
			byTag[tag] = crashLoc{coll, id}
		}
		if counts[coll] != len(recs) {
			t.Errorf("Count(%s) = %d, the records bucket holds %d", coll, counts[coll], len(recs))
		}
		ids := make([]uuidv7.UUID, 0, len(recs))
		for id := range recs {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, uuidv7.UUID.Compare)
		if len(streamed[coll]) != len(ids) {
			t.Errorf("Stream(%s) gave %d records, bbolt holds %d", coll, len(streamed[coll]), len(ids))
		} else {
			for i, rec := range streamed[coll] {
				if rec.ID != ids[i] || !bytes.Equal(rec.Raw(), recs[ids[i]][engine.HeaderSize:]) {
					t.Errorf("Stream(%s) record %d: %s differs from bbolt's %s", coll, i, rec.ID, ids[i])
					break
				}
			}
		}
	}

	// Replay the reports onto the model.
	exp := map[string]map[uuidv7.UUID]string{}
	for coll, recs := range model {
		exp[coll] = maps.Clone(recs)
	}
	intents := map[int64]crashEvent{}
	acked := map[int64]bool{}
	for _, ev := range evs {
		switch ev.K {
		case "I":
			intents[ev.Op] = ev
		case "F":
			t.Errorf("operation %d (%s) failed in the child: %s", ev.Op, intents[ev.Op].T, ev.Err)
			acked[ev.Op] = true // resolved: nothing to expect
		case "A":
			in, ok := intents[ev.Op]
			if !ok {
				t.Fatalf("acknowledgement of unannounced operation %d", ev.Op)
			}
			acked[ev.Op] = true
			st.ackedOps[in.T]++
			applyAcked(t, exp, in, ev, byTag)
		}
	}
	// Operations in flight at the kill: all or nothing (streams: whole
	// batches), judged by what is on disk.
	var open []int64
	for op := range intents {
		if !acked[op] {
			open = append(open, op)
		}
	}
	sort.Slice(open, func(i, j int) bool { return open[i] < open[j] })
	for _, op := range open {
		outcome := applyInflight(t, exp, obs, intents[op], byTag)
		st.inflight[intents[op].T+"/"+outcome]++
		if intents[op].T == "stream" && outcome == "partial" {
			st.partialStreams++
		}
	}

	// The model must now be exactly what is on disk.
	total := 0
	for _, coll := range []string{crashDocs, crashLog} {
		want, got := exp[coll], obs[coll]
		total += len(got)
		bad := 0
		for id, tag := range want {
			v, ok := got[id]
			if !ok {
				t.Errorf("%s %s (%s): acknowledged or recovered write is missing", coll, id, tag)
				bad++
			} else if !bytes.Equal(v, cachedEncoded(t, cache, id, tag)) {
				t.Errorf("%s %s: stored bytes differ from what %s wrote (found %s)", coll, id, tag, tagOf(id, v))
				bad++
			}
			if bad > 10 {
				t.Fatalf("too many differences")
			}
		}
		for id, v := range got {
			if _, ok := want[id]; !ok {
				t.Errorf("%s %s (%s): present, but no reported operation explains it", coll, id, tagOf(id, v))
				if bad++; bad > 10 {
					t.Fatalf("too many differences")
				}
			}
		}
		st.recordsChecked += len(want)
	}
	st.maxRecords = max(st.maxRecords, total)
	return exp
}

// crashFeedKeep keeps every change the crash children make.
const crashFeedKeep = 1 << 30

// fed is a collection with a change feed.
type fed interface {
	Changes(ctx context.Context, after uint64) iter.Seq2[storh.ChangeEvent, error]
	LastSeq() (uint64, error)
}

// checkFeedReplay replays a collection's change feed from its first
// change: the Seqs must run 1, 2, 3, … (on a file they have no gaps), and
// applying the changes in order must give exactly the records the
// collection holds, byte for byte. A change lost with a commit that
// survived, one left by a commit that did not, or one twice would each
// show. A collection the child never opened has no feed yet.
func checkFeedReplay(t testing.TB, coll string, h fed, records []storh.Record) {
	t.Helper()
	last, err := h.LastSeq()
	if err != nil {
		t.Fatalf("LastSeq(%s): %v", coll, err)
	}
	state := map[uuidv7.UUID][]byte{}
	if last > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		next := uint64(1)
		for ev, err := range h.Changes(ctx, 0) {
			if err != nil && ev.Seq == 0 {
				t.Fatalf("Changes(%s) after %d: %v", coll, next-1, err)
			}
			if err != nil {
				// A put whose record does not read back: reported, and
				// the replay goes on without it, so the checks after it
				// say what else is wrong.
				t.Errorf("Changes(%s), change %d: %v", coll, ev.Seq, err)
				ev.Op = storh.OpDelete
			}
			if ev.Seq != next {
				t.Fatalf("Changes(%s): Seq %d after %d", coll, ev.Seq, next-1)
			}
			if ev.Op == storh.OpDelete {
				delete(state, ev.ID)
			} else {
				state[ev.ID] = ev.Record.Raw()
			}
			if next == last {
				break
			}
			next++
		}
	}
	if len(state) != len(records) {
		t.Errorf("%s: replaying its %d changes gives %d records, it holds %d", coll, last, len(state), len(records))
	}
	for _, rec := range records {
		if v, ok := state[rec.ID]; !ok || !bytes.Equal(v, rec.Raw()) {
			t.Errorf("%s %s: the feed's replay has %x (%v), the collection %x", coll, rec.ID, v, ok, rec.Raw())
			return
		}
	}
}

// cachedEncoded is encoded with the encoding cached per tag; only the
// checksum, which covers the id, is computed per record.
func cachedEncoded(t testing.TB, cache map[string][]byte, id uuidv7.UUID, tag string) []byte {
	v, ok := cache[tag]
	if !ok {
		v = encoded(t, uuidv7.Nil, tag)
		cache[tag] = v
	}
	v = append([]byte(nil), v...)
	seal(v, id)
	return v
}

// applyAcked applies an acknowledged operation to the model.
func applyAcked(t testing.TB, exp map[string]map[uuidv7.UUID]string, in, ack crashEvent, byTag map[string]crashLoc) {
	t.Helper()
	if in.T == "stream" {
		for i := range in.N {
			tag := tagFor(in.Run, in.Op, i)
			loc, ok := byTag[tag]
			if !ok || loc.coll != in.C {
				t.Errorf("acknowledged PutStream %d: record %d of %d (%s) is missing", in.Op, i, in.N, tag)
				return
			}
			exp[in.C][loc.id] = tag
		}
		return
	}
	if len(ack.IDs) != len(in.Eff) {
		t.Fatalf("operation %d (%s): %d ids acknowledged for %d effects", in.Op, in.T, len(ack.IDs), len(in.Eff))
	}
	for i, e := range in.Eff {
		id := uuidv7.MustParse(ack.IDs[i])
		if e.ID != "" && e.ID != ack.IDs[i] {
			t.Fatalf("operation %d: effect %d written under %s, announced %s", in.Op, i, ack.IDs[i], e.ID)
		}
		if e.Tag == "" {
			delete(exp[e.C], id)
		} else {
			exp[e.C][id] = e.Tag
		}
	}
}

// applyInflight decides from the disk whether an unacknowledged operation
// happened, checks that it happened whole, and applies it if so. It returns
// "applied", "absent" or (streams) "partial".
func applyInflight(t testing.TB, exp map[string]map[uuidv7.UUID]string, obs rawDB, in crashEvent, byTag map[string]crashLoc) string {
	t.Helper()
	if in.T == "stream" {
		c := 0
		for i := range in.N {
			loc, ok := byTag[tagFor(in.Run, in.Op, i)]
			if !ok || loc.coll != in.C {
				break
			}
			exp[in.C][loc.id] = tagFor(in.Run, in.Op, i)
			c++
		}
		for i := c; i < in.N; i++ {
			if _, ok := byTag[tagFor(in.Run, in.Op, i)]; ok {
				t.Errorf("PutStream %d in flight: record %d present after a gap at %d", in.Op, i, c)
				break
			}
		}
		if c%storh.StreamBatch != 0 && c != in.N {
			t.Errorf("PutStream %d in flight: %d of %d records present, not a whole number of %d-record batches", in.Op, c, in.N, storh.StreamBatch)
		}
		switch c {
		case 0:
			return "absent"
		case in.N:
			return "applied"
		}
		return "partial"
	}
	// Is each effect visible?
	visible := make([]bool, len(in.Eff))
	ids := make([]uuidv7.UUID, len(in.Eff))
	for i, e := range in.Eff {
		switch {
		case e.Tag == "": // delete: visible when gone
			ids[i] = uuidv7.MustParse(e.ID)
			_, present := obs[e.C][ids[i]]
			visible[i] = !present
		case e.ID == "": // generated id: find the record by its tag
			loc, ok := byTag[e.Tag]
			visible[i] = ok && loc.coll == e.C
			ids[i] = loc.id
		default:
			ids[i] = uuidv7.MustParse(e.ID)
			v, ok := obs[e.C][ids[i]]
			visible[i] = ok && tagOf(ids[i], v) == e.Tag
		}
	}
	for i := range visible {
		if visible[i] != visible[0] {
			var desc []string
			for j, e := range in.Eff {
				desc = append(desc, fmt.Sprintf("%s %s %q visible=%v", e.C, ids[j], e.Tag, visible[j]))
			}
			t.Errorf("operation %d (%s) in flight is partly visible: %s", in.Op, in.T, strings.Join(desc, "; "))
			return "torn"
		}
	}
	if !visible[0] {
		return "absent"
	}
	for i, e := range in.Eff {
		if e.Tag == "" {
			delete(exp[e.C], ids[i])
		} else {
			exp[e.C][ids[i]] = e.Tag
		}
	}
	return "applied"
}
