package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh/postgres/postgrestest"
)

// TestMain lets the test binary be pgscale's worker: a run started by a
// test re-executes os.Executable(), which is this binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "pgscale-worker" {
		os.Exit(workerMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// requireServer skips t when this machine cannot run a private PostgreSQL,
// or fails it under STORH_REQUIRE_POSTGRES=1 (as in CI).
func requireServer(t *testing.T) {
	t.Helper()
	if err := postgrestest.Available(); err != nil {
		if os.Getenv("STORH_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("PostgreSQL required (STORH_REQUIRE_POSTGRES=1) but unusable: %v", err)
		}
		t.Skipf("needs a private PostgreSQL (Debian's postgresql package, run as root): %v", err)
	}
}

// TestPGScaleQuick runs the harness as CI does: -quick, a private server,
// every workload and contender at 1 and 2 processes. Every cell must have
// done work without an error, the server's counters and log must have
// been read, and both reports must hold the table and the targets.
func TestPGScaleQuick(t *testing.T) {
	requireServer(t)
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := pgscaleMain([]string{"-quick", "-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("pgscale -quick exited %d:\n%s", code, stderr.String())
	}
	rep := readScaleReport(t, out)
	if !rep.Server.Private || rep.Server.Settings["fsync"] != "on" || rep.Server.Settings["synchronous_commit"] != "on" {
		t.Errorf("server %+v: want the private one, fsync and synchronous_commit on", rep.Server)
	}
	want := 0
	for _, w := range scaleWorkloads {
		want += 2 * len(w.contenders)
	}
	if len(rep.Cells) != want {
		t.Fatalf("%d cells, want %d (every workload × contender × {1, 2})", len(rep.Cells), want)
	}
	for _, c := range rep.Cells {
		name := c.Workload + "/" + c.Contender
		if len(c.Runs) != 1 || c.RecordsPerSec <= 0 || len(c.errors()) > 0 {
			t.Errorf("%s at %d: %v records/s, runs %+v", name, c.Procs, c.RecordsPerSec, c.Runs)
			continue
		}
		r := c.Runs[0]
		perOp := int64(1)
		if c.Workload == "putmany" || c.Workload == "page" {
			perOp = 100
		}
		if r.Ops == 0 || r.Records != r.Ops*perOp {
			t.Errorf("%s at %d: %d records in %d operations, want %d each", name, c.Procs, r.Records, r.Ops, perOp)
		}
		if r.ServerErrors == nil {
			t.Errorf("%s at %d: the private server's log was not read", name, c.Procs)
		}
		// Every write committed on the server, in the window.
		if c.Workload != "page" && (r.Commits == 0 || r.ServerCommits < r.Commits) {
			t.Errorf("%s at %d: %d commits by the workers, %d by the server", name, c.Procs, r.Commits, r.ServerCommits)
		}
		// The feed reader received every change: the writers' records in
		// the window, and their warm-up puts.
		if c.Contender == readerContender {
			if r.Reader == nil || r.Reader.Delivered != r.Records+int64(c.Procs) || r.Reader.InWindow > r.Reader.Delivered {
				t.Errorf("%s at %d: reader %+v after %d records from %d writers", name, c.Procs, r.Reader, r.Records, c.Procs)
			}
		} else if r.Reader != nil {
			t.Errorf("%s at %d: a reader's account %+v", name, c.Procs, r.Reader)
		}
	}
	if rep.FeedKeep != 2000 || rep.FeedFill != 2000 {
		t.Errorf("feed keep %d, fill %d: want -quick's 2000, and the fill the keep", rep.FeedKeep, rep.FeedFill)
	}
	judged := map[string]string{}
	for _, x := range rep.Targets {
		judged[x.What] = x.Status
	}
	for _, what := range []string{
		"single durable Put, 1 process: storh time ÷ pgx time",
		"PutMany(100), 1 process: storh ÷ pgx (throughput)",
		"page of 100, 1 process: storh time ÷ pgx time",
		"single durable Put, 1 process: time with a change feed ÷ without",
		"reruns per 1,000 transactions, worst storh cell",
	} {
		if s := judged[what]; s != "met" && s != "not met" {
			t.Errorf("target %q: %q, want it judged", what, s)
		}
	}
	if s := judged["PutMany(100), 4 processes: storh ÷ pgx (throughput)"]; s != "not run" {
		t.Errorf("a 4-process target with -procs 1,2: %q, want not run", s)
	}
	md := stdout.String()
	for _, want := range []string{"| single durable Put | 1 / 2 |", "| queue claim + complete (pgx: one transaction per job) | 1 / 2 |",
		"## The change feed", "WithChangeFeed(2000)", "| 2 | ", "## Targets", "## Every cell"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// TestPGScaleQueueDry: a queue that empties before the window ends must
// fail its cell and the run, not report the rate of a worker that found
// nothing to do. It also runs the harness on a server given by --url.
func TestPGScaleQueueDry(t *testing.T) {
	requireServer(t)
	srv, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := pgscaleMain([]string{"-url", srv.URL("postgres"), "-workloads", "queue", "-procs", "1",
		"-queue-jobs", "3", "-duration", "2s", "-out", out}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), errQueueDry.Error()) {
		t.Fatalf("exit %d, want 1 with %q:\n%s", code, errQueueDry, stderr.String())
	}
	rep := readScaleReport(t, out)
	for _, c := range rep.Cells {
		if len(c.errors()) == 0 {
			t.Errorf("%s at %d: no error", c.Contender, c.Procs)
		}
		if r := c.Runs[0]; r.ServerErrors != nil {
			t.Errorf("%s: server errors %v from a server whose log the run cannot read", c.Contender, r.ServerErrors)
		}
	}
	for _, x := range rep.Targets {
		if x.Status != "not run" {
			t.Errorf("target %q judged (%s) on failed cells", x.What, x.Status)
		}
	}
}

// TestPGScaleNoServer: a server that cannot be reached fails the run with
// the reason, at once.
func TestPGScaleNoServer(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := pgscaleMain([]string{"-url", "postgres://nobody@/x?host=" + t.TempDir() + "&connect_timeout=2", "-out", t.TempDir()}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "connecting to postgres://nobody@/x") {
		t.Fatalf("exit %d, want 1 naming the server:\n%s", code, stderr.String())
	}
}

func readScaleReport(t *testing.T, dir string) ScaleReport {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "pgscale-*.json"))
	if len(files) != 1 {
		t.Fatalf("%d JSON reports in %s, want 1", len(files), dir)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var rep ScaleReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if md := strings.TrimSuffix(files[0], ".json") + ".md"; !fileExists(md) {
		t.Errorf("no Markdown report %s", md)
	}
	return rep
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestScaleTargets(t *testing.T) {
	cell := func(workload, contender string, procs int, rate float64, errs ...string) ScaleCell {
		return ScaleCell{Workload: workload, Contender: contender, Procs: procs, RecordsPerSec: rate,
			Runs: []ScaleRun{{RecordsPerSec: rate, Errors: errs, ServerErrors: map[string]int64{}, ServerCommits: 1000}}}
	}
	withReruns := func(c ScaleCell, codes map[string]int64, commits, rollbacks int64) ScaleCell {
		c.Runs[0].ServerErrors, c.Runs[0].ServerCommits, c.Runs[0].ServerRollbacks = codes, commits, rollbacks
		return c
	}
	cells := []ScaleCell{
		cell("put", "storh", 1, 600), cell("put", "pgx", 1, 1200),
		cell("put", "storh", 4, 1800), cell("put", "pgx", 4, 3000),
		cell("putmany", "storh", 1, 30_000), cell("putmany", "pgx", 1, 35_000),
		cell("putmany", "storh", 4, 40_000), cell("putmany", "pgx", 4, 40_000, "worker 2: boom"),
		withReruns(cell("queue", "storh", 4, 800), map[string]int64{"40P01": 3, "23505": 1, "XX000": 7}, 990, 10),
		cell("queue", "pgx", 4, 1000), cell("queue", "pgx-1tx", 4, 1600),
		cell("page", "storh", 1, 100_000), cell("page", "pgx", 1, 110_000),
		cell("putfeed", "storh", 1, 550), cell("putfeed", "storh", 4, 1500),
		cell("putfeed", readerContender, 4, 1200),
	}
	got := map[string]Result{}
	for _, r := range scaleTargets(cells) {
		got[r.What] = r
	}
	for _, c := range []struct {
		what   string
		value  float64
		status string
	}{
		{"single durable Put, 1 process: storh time ÷ pgx time", 2, "not met"},
		{"single durable Put: 4 processes ÷ 1 process (storh throughput)", 3, "met"},
		{"single durable Put, 4 processes: storh ÷ pgx (throughput)", 0.6, "info"},
		{"PutMany(100), 1 process: storh ÷ pgx (throughput)", 30.0 / 35, "met"},
		// A failed cell judges nothing.
		{"PutMany(100), 4 processes: storh ÷ pgx (throughput)", 0, "not run"},
		{"queue claim + complete, 4 processes: storh ÷ pgx SKIP LOCKED lease worker, 2 commits per job (throughput)", 0.8, "met"},
		{"queue claim + complete, 4 processes: storh ÷ pgx SKIP LOCKED one-transaction worker (throughput)", 0.5, "info"},
		{"page of 100, 1 process: storh time ÷ pgx time", 1.1, "met"},
		{"page of 100, 4 processes: storh time ÷ pgx time", 0, "not run"},
		// The feed's cost: storh's Put without it over with it.
		{"single durable Put, 1 process: time with a change feed ÷ without", 600.0 / 550, "met"},
		{"single durable Put, 4 processes: time with a change feed ÷ without", 1.2, "not met"},
		{"single durable Put, 4 processes and a process following Changes: writers' time ÷ without a feed", 1.5, "info"},
		// 4 reruns (XX000 is not one) in 1,000 transactions; below 5 is met.
		{"reruns per 1,000 transactions, worst storh cell", 4, "met"},
	} {
		r, ok := got[c.what]
		if !ok {
			t.Errorf("no target %q", c.what)
			continue
		}
		if r.Status != c.status || (c.status != "not run" && math.Abs(r.Value-c.value) > 1e-9) {
			t.Errorf("%s: %v %s, want %v %s (%s)", c.what, r.Value, r.Status, c.value, c.status, r.Detail)
		}
	}

	// At 5 per 1,000 the rerun target is missed; without a log it is not run.
	five := withReruns(cell("put", "storh", 1, 600), map[string]int64{"40001": 5}, 1000, 0)
	if r := scaleTargets([]ScaleCell{five})[len(scaleTargets(nil))-1]; r.Status != "not met" || r.Value != 5 {
		t.Errorf("5 reruns per 1,000: %v %s, want 5 not met", r.Value, r.Status)
	}
	blind := withReruns(cell("put", "storh", 1, 600), nil, 1000, 0)
	if r := scaleTargets([]ScaleCell{blind})[len(scaleTargets(nil))-1]; r.Status != "not run" {
		t.Errorf("reruns without a server log: %s, want not run", r.Status)
	}
}

func TestServerErrors(t *testing.T) {
	log := "[00000] LOG:  database system is ready to accept connections\n" +
		"[40P01] ERROR:  deadlock detected\n" +
		"[40P01] DETAIL:  Process 1 waits for ShareLock on transaction 2\n" +
		"[40P01] STATEMENT:  COMMIT\n" +
		"[23505] ERROR:  duplicate key value violates unique constraint \"x\"\n" +
		"[40P01] ERROR:  deadlock detected\n" +
		"a line a crash wrote without the prefix ERROR:\n" +
		"[57P01] FATAL:  terminating connection due to administrator command\n" +
		"[40001] ERROR:  could not serialize access" // no newline at the end
	got := serverErrors([]byte(log))
	want := map[string]int64{"40P01": 2, "23505": 1, "40001": 1}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for code, n := range want {
		if got[code] != n {
			t.Errorf("%s: %d, want %d (all: %v)", code, got[code], n, got)
		}
	}
}

func TestFmtRate(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{685, "685"}, {1973.4, "1,973"}, {9999, "9,999"}, {19_800, "19.8k"}, {353_512, "353.5k"}} {
		if got := fmtRate(c.v); got != c.want {
			t.Errorf("fmtRate(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}
