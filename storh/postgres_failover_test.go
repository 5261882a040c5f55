package storh_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The primary dies mid-write and its synchronous standby is promoted in
// its place: writers in two processes go on through the same multi-host
// URL, and every write they were told succeeded is on the new primary,
// each once. A write that failed plainly is not there (each writer puts
// its sequence numbers in order, and writes one again only when told it
// was not written: a number stored twice is a failed write that was
// stored). A DB of this process writes again without being reopened, and
// a watch that lost its listener ends with ErrWatchLost and can watch
// again.
func TestPostgresFailover(t *testing.T) {
	if os.Getenv(failoverChildEnv) != "" {
		t.Skip("the child's own run")
	}
	skipOnPostgresPass(t)
	skipUnderInvariants(t)
	start := time.Now()
	f := pgtest.NewFailover(t)
	t.Logf("primary and standby up in %v", time.Since(start).Round(time.Millisecond))
	checkFailover(t, f.URL, func() { f.KillPrimary(t) }, func() { f.Promote(t) })
}

// The same with pg_auto_failover promoting the secondary after an
// unplanned crash of the primary's machine (its pg_autoctl and its
// postmaster killed), on the formation's URL. It takes about 21 seconds
// here, half of them for the formation to start: a long test.
func TestPostgresAutoFailover(t *testing.T) {
	if os.Getenv(failoverChildEnv) != "" {
		t.Skip("the child's own run")
	}
	testkit.RequireLong(t)
	skipOnPostgresPass(t)
	skipUnderInvariants(t)
	a := pgtest.NewAutoFailover(t)
	var killed string
	checkFailover(t, a.URL, func() { killed = a.KillPrimary(t) }, func() { a.AwaitPromotion(t, killed) })
}

// checkFailover runs writers in two processes and a watch in this one on
// the store at url, fails the primary over with kill then promote while
// they write, and checks what they were told against what the new primary
// holds.
func checkFailover(t *testing.T, url string, kill, promote func()) {
	start := time.Now()
	db := openPostgres(t, url)
	docs, err := db.Docs(failoverColl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := newCollected()
	started := make(chan uuidv7.UUID, 1)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		watchInto(ctx, docs, uuidv7.UUID{}, before, started)
	}()
	markUntilWatched(t, docs, started)

	writers := []*failoverWriter{startFailoverWriter(t, url, "a"), startFailoverWriter(t, url, "b")}
	for _, w := range writers {
		w.waitAcks(t, 20)
	}
	writing := time.Now()
	kill()
	killed := time.Now()
	select {
	case <-watchDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the watch went on after its listener's server died")
	}
	if !errors.Is(before.err, storh.ErrWatchLost) {
		t.Fatalf("the watch ended with %v, want ErrWatchLost", before.err)
	}
	promote()
	promoted := time.Now()
	for _, w := range writers {
		w.waitAcks(t, w.acked()+20)
	}
	resumed := time.Now()
	for _, w := range writers {
		w.stop(t)
	}

	// This process's DB goes on without a reopen: its connections to the
	// old primary fail the writes that take them, once each.
	failed := 0
	for deadline := time.Now().Add(30 * time.Second); ; failed++ {
		_, err := docs.Put(storh.Map{"from": "parent"})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the DB still fails its writes after the failover: %v", err)
		}
	}
	after := newCollected()
	again := make(chan uuidv7.UUID, 1)
	go watchInto(ctx, docs, uuidv7.UUID{}, after, again)
	marks := markUntilWatched(t, docs, again)

	stored := map[uuidv7.UUID]int{}
	numbers := map[string]int{}
	for r, err := range docs.Stream(query.All()) {
		if err != nil {
			t.Fatal(err)
		}
		stored[r.ID]++
		m := r.Data()
		if w, ok := m["w"]; ok {
			numbers[fmt.Sprint(w, "/", m["n"])]++
		}
	}
	for id, n := range stored {
		if n != 1 {
			t.Errorf("record %s streamed %d times", id, n)
		}
	}
	for key, n := range numbers {
		if n != 1 {
			t.Errorf("writer's number %s stored %d times: a write that failed was stored", key, n)
		}
	}
	var acks, fails, unknowns int
	for _, w := range writers {
		for _, a := range w.acks {
			if stored[a.id] != 1 {
				t.Errorf("writer %s: acknowledged record %s (number %d) is not on the new primary", w.name, a.id, a.n)
			}
		}
		for _, f := range w.failures {
			t.Logf("writer %s: failed: %s", w.name, f)
		}
		acks += len(w.acks)
		fails += w.fails
		unknowns += w.unknowns
	}
	after.mu.Lock()
	for id, n := range after.seen {
		if n != 1 {
			t.Errorf("the watch after the failover yielded %s %d times", id, n)
		}
	}
	after.mu.Unlock()
	round := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	t.Logf("%d writes acknowledged; %d failed plainly, %d ErrCommitUnknown (resolved by Get); this DB failed %d writes before one went through, and watched again (%d marks)",
		acks, fails, unknowns, failed, len(marks))
	t.Logf("steps: writers writing %v after the start, killed in %v, promoted %v after the kill, each writer 20 writes further %v after the promotion, checked in %v",
		round(writing.Sub(start)), round(killed.Sub(writing)), round(promoted.Sub(killed)), round(resumed.Sub(promoted)), round(time.Since(resumed)))
}

const (
	failoverChildEnv = "STORH_FAILOVER_CHILD"
	failoverColl     = "failover"
)

// failoverWriter is a writer process of TestPostgresFailover, and what it
// reported.
type failoverWriter struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	done chan struct{}

	mu       sync.Mutex
	acks     []failoverAck
	fails    int
	failures []string // the errors of the writes that failed plainly
	unknowns int
	grew     chan struct{} // signalled at every acknowledgement
}

type failoverAck struct {
	id uuidv7.UUID
	n  int
}

func startFailoverWriter(t *testing.T, url, name string) *failoverWriter {
	t.Helper()
	cmd, in, out := startChild(t, "TestPostgresFailoverChild", failoverChildEnv+"="+name+"|"+url)
	// A failing test must not leave a writer behind.
	t.Cleanup(func() { cmd.Process.Kill() })
	w := &failoverWriter{name: name, cmd: cmd, in: in, done: make(chan struct{}), grew: make(chan struct{}, 1)}
	go w.read(out)
	return w
}

// read takes in the writer's reports: "ack <id> <n>", "fail <n> <error>",
// "unknown <id> <n>"; other lines are the test framework's.
func (w *failoverWriter) read(out io.Reader) {
	defer close(w.done)
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		kind, rest, _ := strings.Cut(lines.Text(), " ")
		f := strings.Fields(rest)
		w.mu.Lock()
		switch kind {
		case "ack":
			n, _ := strconv.Atoi(f[1])
			w.acks = append(w.acks, failoverAck{id: uuidv7.MustParse(f[0]), n: n})
			select {
			case w.grew <- struct{}{}:
			default:
			}
		case "fail":
			w.fails++
			w.failures = append(w.failures, rest)
		case "unknown":
			w.unknowns++
		default:
			fmt.Fprintf(os.Stderr, "writer %s: %s\n", w.name, lines.Text())
		}
		w.mu.Unlock()
	}
}

func (w *failoverWriter) acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acks)
}

// waitAcks waits until the writer has acknowledged n writes.
func (w *failoverWriter) waitAcks(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for w.acked() < n {
		select {
		case <-w.grew:
		case <-w.done:
			t.Fatalf("writer %s ended after %d acknowledged writes", w.name, w.acked())
		case <-deadline:
			t.Fatalf("writer %s acknowledged %d writes in 30s, want %d", w.name, w.acked(), n)
		}
	}
}

// stop tells the writer to end once its current write is settled, and
// waits for it.
func (w *failoverWriter) stop(t *testing.T) {
	t.Helper()
	w.in.Close()
	<-w.done
	if err := w.cmd.Wait(); err != nil {
		t.Errorf("writer %s: %v", w.name, err)
	}
}

// TestPostgresFailoverChild is a writer of TestPostgresFailover: it puts
// its numbers in order, each until it is stored, and reports every
// outcome, until its stdin closes.
func TestPostgresFailoverChild(t *testing.T) {
	spec := os.Getenv(failoverChildEnv)
	if spec == "" {
		t.Skip("run by TestPostgresFailover")
	}
	name, url, _ := strings.Cut(spec, "|")
	stop := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	db, err := storh.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	docs, err := db.Docs(failoverColl)
	if err != nil {
		t.Fatal(err)
	}
	// pace spaces out the attempts while no server takes writes.
	pace := func() bool {
		select {
		case <-stop:
			return false
		case <-time.After(20 * time.Millisecond):
			return true
		}
	}
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		for stored := false; !stored; {
			r, err := docs.Put(storh.Map{"w": name, "n": n})
			var se *storh.Error
			switch {
			case err == nil:
				fmt.Println("ack", r.ID, n)
				stored = true
			case errors.Is(err, storh.ErrCommitUnknown) && errors.As(err, &se):
				// Stored or not: Get tells, once a server answers.
				id := uuidv7.MustParse(se.ID)
				fmt.Println("unknown", id, n)
				for {
					_, gerr := docs.Get(id)
					if gerr == nil {
						fmt.Println("ack", id, n)
						stored = true
						break
					}
					if errors.Is(gerr, storh.ErrNotFound) || !pace() {
						break
					}
				}
			default:
				fmt.Println("fail", n, strings.ReplaceAll(err.Error(), "\n", " "))
				if !pace() {
					return
				}
			}
			if !stored {
				select {
				case <-stop:
					return
				default:
				}
			}
		}
	}
}
