package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// pgscale measures storh on PostgreSQL from several OS processes at once,
// each its own storh.DB on one collection, against hand-written pgx code
// doing the same logical work from as many processes, cell by cell in the
// same run (docs/benchmarks.md, "Several processes on PostgreSQL").
//
// It is a subcommand of benchreport, not a command of its own, because it
// reports as benchreport does (the machine, the load, targets judged
// "met"/"not met", JSON and Markdown), with the same code.
//
// A cell is a workload, a contender and a number of processes. For each,
// the run creates the cell's collection or table, starts that many workers
// (this binary again, "pgscale-worker"), waits until every one is ready,
// sends them the start signal together, and adds up their records per
// second over the fixed duration. Around the window it reads the server's
// counters (pg_stat_database) and, on the private server, the errors its
// log shows by SQLSTATE: the transactions PostgreSQL failed, which storh
// runs again.

// scaleWorkload is one kind of work and the contenders that do it.
type scaleWorkload struct {
	name, title string
	contenders  []string // storh first; the others are pgx variants or storh's own
	// baseline is the workload this one is judged against, when that is
	// storh doing the same work without a feature rather than pgx: where
	// both run, its cells run beside the baseline's at each process count
	// (see cellOrder), and the report compares them in a table of their own.
	baseline string
}

var scaleWorkloads = []scaleWorkload{
	{name: "put", title: "single durable Put", contenders: []string{"storh", "pgx"}},
	// put into a collection with a change feed, its keep already full, so
	// that the window's commits trim it, a step each time it holds more
	// than a slack past its keep: the feed's steady state.
	// storh+reader adds one process following Changes (see feedReader).
	{name: "putfeed", title: "single durable Put, change feed on", contenders: []string{"storh", readerContender}, baseline: "put"},
	{name: "putmany", title: "PutMany(100)", contenders: []string{"storh", "pgx"}},
	{name: "queue", title: "queue claim + complete", contenders: []string{"storh", "pgx", "pgx-1tx"}},
	{name: "page", title: "page of 100 by cursor", contenders: []string{"storh", "pgx"}},
}

// readerContender is the putfeed cell whose writers are followed by one
// more process reading the feed.
const readerContender = "storh+reader"

// isStorh tells storh's contenders from the hand-written ones.
func isStorh(contender string) bool { return strings.HasPrefix(contender, "storh") }

// workloadNames lists the workloads, for messages.
func workloadNames() string {
	var names []string
	for _, w := range scaleWorkloads {
		names = append(names, w.name)
	}
	return strings.Join(names, ", ")
}

// cellStep is one cell of a round at one process count.
type cellStep struct{ workload, contender string }

// cellOrder is the order of a round's cells at one process count, in
// groups: a workload with its dependents (those whose baseline it is),
// which run back to back so that a ratio between them compares cells
// measured moments apart. Within a group the order alternates from round
// to round, so that a drift in the machine does not favour one contender.
func cellOrder(workloads []string, round int) [][]cellStep {
	selected := func(name string) bool { return slices.Contains(workloads, name) }
	var groups [][]cellStep
	for _, w := range scaleWorkloads {
		if !selected(w.name) || (w.baseline != "" && selected(w.baseline)) {
			continue // not run, or run in its baseline's group
		}
		var g []cellStep
		for _, x := range scaleWorkloads {
			if x.name == w.name || (x.baseline == w.name && selected(x.name)) {
				for _, c := range x.contenders {
					g = append(g, cellStep{x.name, c})
				}
			}
		}
		if round%2 == 0 {
			slices.Reverse(g)
		}
		groups = append(groups, g)
	}
	return groups
}

// rerunCodes are the SQLSTATEs storh/postgres turns into kv.ErrConflict,
// on which the engine runs the transaction again: serialization failure,
// deadlock, a unique violation (a bucket a concurrent transaction created,
// or a record or unique claim one inserted), an undefined table (one it
// deleted) and division_by_zero, which a writer's check of a cached bucket
// tree raises on purpose when another store changed the tree.
var rerunCodes = []string{"40001", "40P01", "23505", "42P01", "22012"}

type scaleConfig struct {
	url       string
	out       string
	duration  time.Duration
	procs     []int
	rounds    int
	workloads []string
	queueJobs int
	pageRows  int
	feedKeep  int
	feedFill  int // -1: feedKeep
	quick     bool
	exe       string // the worker binary: this one
}

// ScaleReport is what pgscale-<stamp>.json holds.
type ScaleReport struct {
	Stamp    string      `json:"stamp"`
	Command  string      `json:"command"`
	Commit   string      `json:"commit,omitempty"`
	Machine  Machine     `json:"machine"`
	Server   ScaleServer `json:"server"`
	Duration string      `json:"duration_per_cell"`
	Rounds   int         `json:"rounds"`
	Procs    []int       `json:"processes"`
	// FeedKeep is the putfeed collections' keep, and the changes each
	// held before its cell.
	FeedKeep int `json:"feed_keep,omitempty"`
	// FeedFill is the changes each held before its cell: with FeedKeep,
	// the window's commits trim (a step whenever the feed holds more than
	// a slack past its keep); with 0, none does.
	FeedFill int         `json:"feed_fill"`
	Cells    []ScaleCell `json:"cells"`
	Targets  []Result    `json:"targets"`
}

// ScaleServer describes the PostgreSQL the run measured.
type ScaleServer struct {
	Private  bool              `json:"private"` // started by the run
	Version  string            `json:"version"`
	Settings map[string]string `json:"settings"`
}

// ScaleCell is one workload × contender × process count over every round.
type ScaleCell struct {
	Workload  string `json:"workload"`
	Contender string `json:"contender"`
	Procs     int    `json:"processes"`
	// RecordsPerSec is the median over the rounds of the records per
	// second summed over the processes.
	RecordsPerSec float64    `json:"records_per_sec"`
	Runs          []ScaleRun `json:"runs"`
}

// ScaleRun is one cell in one round.
type ScaleRun struct {
	Round         int     `json:"round"`
	RecordsPerSec float64 `json:"records_per_sec"`
	Ops           int64   `json:"ops"`
	Records       int64   `json:"records"`
	// Conflicts: calls that returned an error wrapping kv.ErrConflict.
	Conflicts int64 `json:"conflicts"`
	// Commits: storh's own count (Stats().Commits), or pgx's transactions.
	Commits int64 `json:"commits"`
	// Server counters over the window (pg_stat_database deltas).
	ServerCommits   int64 `json:"server_commits"`
	ServerRollbacks int64 `json:"server_rollbacks"`
	Deadlocks       int64 `json:"deadlocks"`
	// ServerErrors counts the server log's errors by SQLSTATE; nil (null
	// in the JSON, where none is {}) without a log to read (--url).
	ServerErrors map[string]int64 `json:"server_errors"`
	// Reader is the feed reader's account, in a storh+reader cell.
	Reader *ReaderRun `json:"reader,omitempty"`
	Load   string     `json:"loadavg_after"`
	Errors []string   `json:"errors,omitempty"`
}

// ReaderRun is what the process following a putfeed collection's Changes
// did in one cell. The run checks that it received every change of the
// cell exactly once (a cell whose reader did not fails).
type ReaderRun struct {
	// Delivered: the changes it received, from the cell's first (the
	// writers' warm-up puts included) to the last.
	Delivered int64 `json:"delivered"`
	// InWindow: those it received while the writers were measured.
	InWindow int64 `json:"in_window"`
	// CatchUp: from the window's end to the last change's arrival, when
	// the writers had stopped (0 if it had them all by the end).
	CatchUp time.Duration `json:"catch_up_ns"`
}

// reruns is the transactions the server failed with a code storh runs
// again on, and whether they are known (the server log was read).
func (r ScaleRun) reruns() (int64, bool) {
	if r.ServerErrors == nil {
		return 0, false
	}
	var n int64
	for _, code := range rerunCodes {
		n += r.ServerErrors[code]
	}
	return n, true
}

// rerunsPer1k is the cell's reruns per 1,000 server transactions over all
// its rounds.
func (c ScaleCell) rerunsPer1k() (float64, bool) {
	var reruns, txs int64
	for _, r := range c.Runs {
		n, ok := r.reruns()
		if !ok {
			return 0, false
		}
		reruns += n
		txs += r.ServerCommits + r.ServerRollbacks
	}
	if txs == 0 {
		return 0, true
	}
	return float64(reruns) * 1000 / float64(txs), true
}

func (c ScaleCell) sum(f func(ScaleRun) int64) int64 {
	var n int64
	for _, r := range c.Runs {
		n += f(r)
	}
	return n
}

func (c ScaleCell) errors() []string {
	var out []string
	for _, r := range c.Runs {
		out = append(out, r.Errors...)
	}
	return out
}

func pgscaleMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pgscale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c scaleConfig
	var procs, workloads string
	fs.StringVar(&c.url, "url", "", "PostgreSQL `URL` to measure (a fresh schema is made there and dropped after); empty: start a private server")
	fs.StringVar(&c.out, "out", "results", "output `directory`")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured time of each cell")
	fs.StringVar(&procs, "procs", "1,2,4,8", "process `counts`, comma-separated")
	fs.IntVar(&c.rounds, "rounds", 1, "sweeps over every cell; a cell reports the median of its rounds")
	fs.StringVar(&workloads, "workloads", "put,putfeed,putmany,queue,page", "`workloads` to run, comma-separated")
	fs.IntVar(&c.queueJobs, "queue-jobs", 0, "jobs enqueued before each queue cell (0: 1000 + 8000 per second of -duration)")
	fs.IntVar(&c.pageRows, "page-rows", 20_000, "records of the page workload's collection")
	fs.IntVar(&c.feedKeep, "feed-keep", 100_000, "the putfeed collections' WithChangeFeed keep")
	fs.IntVar(&c.feedFill, "feed-fill", -1, "changes written into each putfeed collection before its cell (-1: -feed-keep's, so that the window's commits trim it as a full feed is trimmed; 0: none, so that no commit does while the window writes fewer than -feed-keep)")
	fs.BoolVar(&c.quick, "quick", false, "a smoke run: -duration 400ms -procs 1,2 -page-rows 1000 -feed-keep 2000 unless given")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: benchreport pgscale [flags]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	if c.quick {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		if !given["duration"] {
			c.duration = 400 * time.Millisecond
		}
		if !given["procs"] {
			procs = "1,2"
		}
		if !given["page-rows"] {
			c.pageRows = 1000
		}
		if !given["feed-keep"] {
			c.feedKeep = 2000
		}
	}
	var err error
	if c.procs, err = parseProcs(procs); err == nil {
		c.workloads, err = parseWorkloads(workloads)
	}
	if c.feedFill == -1 {
		c.feedFill = c.feedKeep
	}
	if err == nil && (c.rounds < 1 || c.duration <= 0 || c.pageRows <= pageRecords || c.feedKeep < 1 || c.feedFill < 0) {
		err = fmt.Errorf("-rounds must be at least 1, -duration positive, -page-rows above %d, -feed-keep at least 1 and -feed-fill not below -1", pageRecords)
	}
	if err == nil {
		c.exe, err = os.Executable()
	}
	if err != nil {
		fmt.Fprintln(stderr, "benchreport pgscale:", err)
		return 2
	}
	if c.queueJobs == 0 {
		c.queueJobs = 1000 + int(8000*c.duration.Seconds())
	}
	rep, err := pgscale(context.Background(), c, args, stderr)
	if err == nil {
		err = writeScaleReport(c.out, rep, stdout, stderr)
	}
	if err == nil {
		for _, cell := range rep.Cells {
			if errs := cell.errors(); len(errs) > 0 {
				err = fmt.Errorf("cell %s/%s/%d failed: %s", cell.Workload, cell.Contender, cell.Procs, errs[0])
				break
			}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "benchreport pgscale:", err)
		return 1
	}
	return 0
}

func parseProcs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-procs: %q is not a process count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseWorkloads(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.ContainsFunc(scaleWorkloads, func(w scaleWorkload) bool { return w.name == f }) {
			return nil, fmt.Errorf("-workloads: unknown workload %q (%s)", f, workloadNames())
		}
		out = append(out, f)
	}
	return out, nil
}

// scaleRun is one pgscale run's connections to its server.
type scaleRun struct {
	c         scaleConfig
	stderr    io.Writer
	srv       *pgServer // nil with --url
	url       string    // the store's URL (its schema in search_path)
	workerURL string
	conn      *pgx.Conn // the run's own: DDL and counters
	db        *storh.DB // the run's own: collections and their fill
}

func pgscale(ctx context.Context, c scaleConfig, args []string, stderr io.Writer) (ScaleReport, error) {
	// The workers' stderr goes to the run's: os/exec copies each into a
	// writer that is not a file from a goroutine of its own.
	stderr = &lockedWriter{w: stderr}
	start := time.Now()
	rep := ScaleReport{
		Stamp:    start.UTC().Format("20060102-150405"),
		Command:  strings.TrimSpace("benchreport pgscale " + shellJoin(args)),
		Commit:   gitCommit(),
		Machine:  machine(),
		Duration: c.duration.String(),
		Rounds:   c.rounds,
		Procs:    c.procs,
	}
	if slices.Contains(c.workloads, "putfeed") {
		rep.FeedKeep, rep.FeedFill = c.feedKeep, c.feedFill
	}
	rep.Machine.StartedUTC = start.UTC().Format(time.RFC3339)
	rep.Machine.LoadBefore = loadavg()
	h := &scaleRun{c: c, stderr: stderr}
	cleanup, err := h.open(ctx, rep.Stamp)
	if err != nil {
		return rep, err
	}
	defer func() {
		if cerr := cleanup(); cerr != nil {
			fmt.Fprintln(stderr, "benchreport pgscale: cleaning up:", cerr)
		}
	}()
	if rep.Server, err = h.server(ctx); err != nil {
		return rep, err
	}
	if slices.Contains(c.workloads, "page") {
		if err := h.fillPages(ctx); err != nil {
			return rep, err
		}
	}
	cells := map[string]*ScaleCell{}
	for round := 1; round <= c.rounds; round++ {
		for _, group := range cellOrder(c.workloads, round) {
			for _, n := range c.procs {
				for _, step := range group {
					key := fmt.Sprintf("%s/%s/%d", step.workload, step.contender, n)
					cell := cells[key]
					if cell == nil {
						cell = &ScaleCell{Workload: step.workload, Contender: step.contender, Procs: n}
						cells[key] = cell
					}
					run, err := h.cell(ctx, step.workload, step.contender, n, round)
					if err != nil {
						run.Errors = append(run.Errors, err.Error())
					}
					cell.Runs = append(cell.Runs, run)
					fmt.Fprintf(stderr, "pgscale: round %d %-8s %-12s %d proc: %9.0f records/s%s\n",
						round, step.workload, step.contender, n, run.RecordsPerSec, runNote(run))
				}
			}
		}
	}
	for _, w := range scaleWorkloads {
		for _, n := range c.procs {
			for _, contender := range w.contenders {
				if cell := cells[fmt.Sprintf("%s/%s/%d", w.name, contender, n)]; cell != nil {
					var rates []float64
					for _, r := range cell.Runs {
						rates = append(rates, r.RecordsPerSec)
					}
					cell.RecordsPerSec = median(rates)
					rep.Cells = append(rep.Cells, *cell)
				}
			}
		}
	}
	rep.Targets = scaleTargets(rep.Cells)
	rep.Machine.LoadAfter = loadavg()
	rep.Machine.DurationSec = int(time.Since(start).Seconds())
	return rep, nil
}

// lockedWriter lets several goroutines write to one writer, a line (one
// Write) at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// runNote is what the progress line adds after a run's rate.
func runNote(r ScaleRun) string {
	var notes []string
	if n, ok := r.reruns(); ok && n > 0 {
		notes = append(notes, fmt.Sprintf("%d reruns", n))
	}
	if r.Conflicts > 0 {
		notes = append(notes, fmt.Sprintf("%d conflicts returned", r.Conflicts))
	}
	if len(r.Errors) > 0 {
		notes = append(notes, "FAILED: "+r.Errors[0])
	}
	notes = append(notes, "load "+r.Load)
	return " (" + strings.Join(notes, "; ") + ")"
}

// open connects to the server, starting a private one without --url, and
// makes the run's schema there; cleanup undoes it.
func (h *scaleRun) open(ctx context.Context, stamp string) (cleanup func() error, err error) {
	var undo []func() error
	cleanup = func() error {
		var errs []error
		for i := len(undo) - 1; i >= 0; i-- {
			errs = append(errs, undo[i]())
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, cleanup())
		}
	}()
	base := h.c.url
	if base == "" {
		if h.srv, err = startServer(); err != nil {
			return cleanup, err
		}
		undo = append(undo, h.srv.Stop)
		base = h.srv.URL("postgres")
	}
	if h.conn, err = pgx.Connect(ctx, base); err != nil {
		return cleanup, fmt.Errorf("connecting to %s: %w", storh.Redact(base), err)
	}
	undo = append(undo, func() error { return h.conn.Close(context.Background()) })
	// A schema of the run's own keeps it apart from whatever else the
	// database holds, and from earlier runs.
	schema := "pgscale_" + strings.ReplaceAll(stamp, "-", "_")
	if _, err = h.conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return cleanup, fmt.Errorf("creating schema %s: %w", schema, err)
	}
	undo = append(undo, func() error {
		_, err := h.conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		return err
	})
	if _, err = h.conn.Exec(ctx, "SET search_path = "+schema); err != nil {
		return cleanup, err
	}
	if h.url, err = withParam(base, "search_path", schema); err != nil {
		return cleanup, err
	}
	if h.workerURL, err = withParam(h.url, "application_name", workerApp); err != nil {
		return cleanup, err
	}
	if h.db, err = storh.Open(h.url); err != nil {
		return cleanup, err
	}
	undo = append(undo, h.db.Close)
	return cleanup, nil
}

// withParam sets a query parameter of a connection URL.
func withParam(raw, key, value string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("%s is not a postgres:// URL", storh.Redact(raw))
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// server reads the server's version and the settings that decide what a
// durable commit costs.
func (h *scaleRun) server(ctx context.Context) (ScaleServer, error) {
	s := ScaleServer{Private: h.srv != nil, Settings: map[string]string{}}
	if err := h.conn.QueryRow(ctx, "SHOW server_version").Scan(&s.Version); err != nil {
		return s, err
	}
	for _, name := range []string{"fsync", "synchronous_commit", "wal_sync_method", "full_page_writes", "shared_buffers", "max_wal_size", "deadlock_timeout"} {
		var v string
		if err := h.conn.QueryRow(ctx, "SHOW "+name).Scan(&v); err != nil {
			return s, err
		}
		s.Settings[name] = v
	}
	return s, nil
}

// Collections and tables: the page workload's are shared by its cells,
// every other cell has its own.
const (
	pageColl  = "page"
	pageTable = "pgx_page"
)

// fillPages loads the page workload's records into storh's collection and
// the same ids and payloads into the hand-written side's table.
func (h *scaleRun) fillPages(ctx context.Context) error {
	docs, _, err := benchDocs()
	if err != nil {
		return err
	}
	d, err := h.db.Docs(pageColl)
	if err != nil {
		return err
	}
	if err := h.createTable(ctx, pageTable, false); err != nil {
		return err
	}
	for left := h.c.pageRows; left > 0; {
		items := make([]any, min(left, 1000))
		for i := range items {
			items[i] = docs[(h.c.pageRows-left+i)%len(docs)]
		}
		recs, err := d.PutMany(items)
		if err != nil {
			return err
		}
		keys, values := make([][]byte, len(recs)), make([][]byte, len(recs))
		for i, r := range recs {
			keys[i], values[i] = r.ID[:], r.Raw()
		}
		if _, err := h.conn.Exec(ctx, "INSERT INTO "+pageTable+" (id, data) SELECT * FROM unnest($1::bytea[], $2::bytea[])", keys, values); err != nil {
			return err
		}
		left -= len(items)
	}
	// Both sides read pages from their primary key; fresh statistics keep
	// the planner from guessing.
	_, err = h.conn.Exec(ctx, "ANALYZE")
	return err
}

// createTable makes a hand-written side's table: an id and the payload,
// and for a queue a state (0 pending, 1 claimed, 2 done), a lease end and
// the partial index a SKIP LOCKED worker scans.
func (h *scaleRun) createTable(ctx context.Context, name string, queue bool) error {
	stmt := "CREATE TABLE " + name + " (id bytea PRIMARY KEY, data bytea NOT NULL)"
	if queue {
		stmt = "CREATE TABLE " + name + " (id bytea PRIMARY KEY, data bytea NOT NULL, state smallint NOT NULL DEFAULT 0, lease_until timestamptz);" +
			" CREATE INDEX ON " + name + " (id) WHERE state = 0"
	}
	_, err := h.conn.Exec(ctx, stmt)
	return err
}

// prepare makes a cell's collection or table, and fills a queue or a
// feed, and returns its name.
func (h *scaleRun) prepare(ctx context.Context, workload, contender string, procs, round int) (string, error) {
	if workload == "page" {
		if contender == "storh" {
			return pageColl, nil
		}
		return pageTable, nil
	}
	name := fmt.Sprintf("%s_p%d_r%d", workload, procs, round)
	docs, raw, err := benchDocs()
	if err != nil {
		return "", err
	}
	if workload == "putfeed" {
		if contender == readerContender {
			name = "reader_" + name
		}
		return name, h.fillFeed(name, docs)
	}
	if contender != "storh" {
		name = strings.ReplaceAll(contender, "-", "") + "_" + name
		if err := h.createTable(ctx, name, workload == "queue"); err != nil {
			return "", err
		}
		if workload != "queue" {
			return name, nil
		}
		ids := make([]uuidv7.UUID, 1000)
		for left := h.c.queueJobs; left > 0; left -= len(ids) {
			ids = ids[:min(left, len(ids))]
			uuidv7.NewBatch(ids)
			keys, values := make([][]byte, len(ids)), make([][]byte, len(ids))
			for i := range ids {
				keys[i], values[i] = ids[i][:], raw[i%len(raw)]
			}
			if _, err := h.conn.Exec(ctx, "INSERT INTO "+name+" (id, data) SELECT * FROM unnest($1::bytea[], $2::bytea[])", keys, values); err != nil {
				return "", err
			}
		}
		_, err := h.conn.Exec(ctx, "ANALYZE "+name)
		return name, err
	}
	if workload == "queue" {
		q, err := h.db.Queue(name)
		if err != nil {
			return "", err
		}
		for left := h.c.queueJobs; left > 0; {
			payloads := make([]any, min(left, 1000))
			for i := range payloads {
				payloads[i] = docs[i%len(docs)]
			}
			if _, err := q.EnqueueMany(payloads); err != nil {
				return "", err
			}
			left -= len(payloads)
		}
		return name, nil
	}
	// A first record makes the collection, so that the workers open it
	// rather than race to create it.
	d, err := h.db.Docs(name)
	if err == nil {
		_, err = d.Put(docs[0])
	}
	return name, err
}

// fillFeed makes a putfeed cell's collection, with its feed, and writes
// -feed-fill records (and so changes) before the window: by default the
// feed's keep, so that the workers' commits trim it (a step whenever it
// holds more than a slack of keep/8 past keep), the steady state of a feed
// that has run for a while. The workers open the
// collection without the option; its stored setting applies to them.
func (h *scaleRun) fillFeed(name string, docs []storh.Map) error {
	d, err := h.db.Docs(name, storh.WithChangeFeed(h.c.feedKeep))
	if err != nil {
		return err
	}
	for left := h.c.feedFill; left > 0; {
		items := make([]any, min(left, 1000))
		for i := range items {
			items[i] = docs[(h.c.feedFill-left+i)%len(docs)]
		}
		if _, err := d.PutMany(items); err != nil {
			return err
		}
		left -= len(items)
	}
	return nil
}

// collectionDigest is the digest of the ids of a collection's records.
func (h *scaleRun) collectionDigest(name string) (idDigest, error) {
	var dg idDigest
	d, err := h.db.Docs(name, storh.WithoutCreate())
	if err != nil {
		return dg, err
	}
	err = d.ScanRaw(query.All(), func(id uuidv7.UUID, _ []byte) error {
		dg.add(id)
		return nil
	})
	return dg, err
}

// serverCounters are pg_stat_database's counters of the run's database.
type serverCounters struct{ commits, rollbacks, deadlocks int64 }

func (h *scaleRun) counters(ctx context.Context) (serverCounters, error) {
	var s serverCounters
	err := h.conn.QueryRow(ctx, "SELECT xact_commit, xact_rollback, deadlocks FROM pg_stat_database WHERE datname = current_database()").
		Scan(&s.commits, &s.rollbacks, &s.deadlocks)
	return s, err
}

// waitWorkersGone waits until no backend of a worker is left: a backend
// flushes its statistics as it exits, so the counters are complete only
// then.
func (h *scaleRun) waitWorkersGone(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := h.conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", workerApp).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d worker connections still open 30 s after their processes ended", n)
		}
		time.Sleep(20 * time.Millisecond) // polling the server: there is nothing to wait on
	}
}

// process is a worker process and its pipes.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // its stdout, line by line; closed at EOF
}

// cell runs one cell: prepare, start the workers, release them together,
// collect their results and the server's counters.
func (h *scaleRun) cell(ctx context.Context, workload, contender string, procs, round int) (run ScaleRun, err error) {
	run.Round = round
	defer func() { run.Load = loadavg() }()
	name, err := h.prepare(ctx, workload, contender, procs, round)
	if err != nil {
		return run, fmt.Errorf("preparing: %w", err)
	}
	// A storh+reader cell: the writers are storh's, and one more process
	// follows the feed from its last change before the cell.
	writer, reading := contender, contender == readerContender
	var feed feedCheck
	if reading {
		writer = "storh"
		if feed, err = h.feedBefore(name); err != nil {
			return run, fmt.Errorf("preparing: %w", err)
		}
	}
	var ps []*process // the writers, then the reader
	defer func() {
		// Only on failure are workers left running: end them.
		for _, p := range ps {
			if p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
		}
	}()
	for i := range procs {
		p, err := h.startWorker(workload, writer, name, i+1+100*round)
		if err != nil {
			return run, err
		}
		ps = append(ps, p)
	}
	if reading {
		p, err := h.startWorker(workload, "reader", name, 0, "-after", strconv.FormatUint(feed.after, 10))
		if err != nil {
			return run, err
		}
		ps = append(ps, p)
	}
	for i, p := range ps {
		line, err := p.next(2 * time.Minute)
		if err != nil {
			return run, fmt.Errorf("%s: %w", workerName(i, procs), err)
		}
		if line != workerReady {
			return run, fmt.Errorf("%s: %s", workerName(i, procs), workerFailure(line))
		}
	}
	before, err := h.counters(ctx)
	if err != nil {
		return run, err
	}
	var logFrom int64
	if h.srv != nil {
		if logFrom, err = h.srv.logSize(); err != nil {
			return run, err
		}
	}
	for _, p := range ps {
		if _, err := io.WriteString(p.stdin, workerGo+"\n"); err != nil {
			return run, err
		}
	}
	var errs []string
	for i, p := range ps[:procs] {
		line, err := p.next(h.c.duration + 2*time.Minute)
		if err != nil {
			return run, fmt.Errorf("worker %d: %w", i+1, err)
		}
		var res workerResult
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			return run, fmt.Errorf("worker %d: %q: %w", i+1, line, err)
		}
		if res.Err != "" {
			errs = append(errs, fmt.Sprintf("worker %d: %s", i+1, res.Err))
		}
		if res.Elapsed > 0 {
			run.RecordsPerSec += float64(res.Records) / res.Elapsed.Seconds()
		}
		run.Ops += res.Ops
		run.Records += res.Records
		run.Conflicts += res.Conflicts
		run.Commits += res.Commits
	}
	if reading {
		// The writers have ended: every change of the cell is committed.
		rd, err := h.readerResult(ps[procs], name, feed)
		if err != nil {
			errs = append(errs, "reader: "+err.Error())
		}
		run.Reader = rd
	}
	for i, p := range ps {
		p.stdin.Close()
		if err := p.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", workerName(i, procs), err))
		}
	}
	run.Errors = errs
	if err := h.waitWorkersGone(ctx); err != nil {
		return run, err
	}
	after, err := h.counters(ctx)
	if err != nil {
		return run, err
	}
	run.ServerCommits = after.commits - before.commits
	run.ServerRollbacks = after.rollbacks - before.rollbacks
	run.Deadlocks = after.deadlocks - before.deadlocks
	if h.srv != nil {
		log, err := h.srv.logSince(logFrom)
		if err != nil {
			return run, err
		}
		run.ServerErrors = serverErrors(log)
	}
	return run, nil
}

// workerName names the i-th process of a cell of procs writers: the one
// after them is the feed reader.
func workerName(i, procs int) string {
	if i >= procs {
		return "reader"
	}
	return fmt.Sprintf("worker %d", i+1)
}

// feedCheck is what a storh+reader cell's reader is checked against: the
// feed's last change before the cell, which the reader follows from, and
// the records the collection held then.
type feedCheck struct {
	after  uint64
	before idDigest
}

func (h *scaleRun) feedBefore(name string) (feedCheck, error) {
	var f feedCheck
	d, err := h.db.Docs(name, storh.WithoutCreate())
	if err != nil {
		return f, err
	}
	if f.after, err = d.LastSeq(); err != nil {
		return f, err
	}
	f.before, err = h.collectionDigest(name)
	return f, err
}

// readerResult tells the reader where the feed ends now that the writers
// have, takes its account, and checks it: every record the cell added is
// an insert, so the changes it received must be exactly those records,
// each once. The reader checks the order and that no id came twice; the
// digests check that the ids are the records'.
func (h *scaleRun) readerResult(p *process, name string, f feedCheck) (*ReaderRun, error) {
	d, err := h.db.Docs(name, storh.WithoutCreate())
	if err != nil {
		return nil, err
	}
	last, err := d.LastSeq()
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(p.stdin, "%s %d\n", readerEnd, last); err != nil {
		return nil, err
	}
	line, err := p.next(2 * time.Minute)
	if err != nil {
		return nil, err
	}
	var res workerResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return nil, fmt.Errorf("%q: %w", line, err)
	}
	if res.Err != "" {
		return nil, errors.New(res.Err)
	}
	if res.Reader == nil {
		return nil, fmt.Errorf("no account in %q", line)
	}
	after, err := h.collectionDigest(name)
	if err != nil {
		return nil, err
	}
	rd := &ReaderRun{Delivered: res.Reader.Digest.N, InWindow: res.Reader.InWindow, CatchUp: res.Reader.CatchUp}
	return rd, checkReader(res.Reader.Digest, after.minus(f.before), f.after, last)
}

// checkReader compares the changes a reader received with the records its
// cell added.
func checkReader(got, want idDigest, after, last uint64) error {
	if got != want {
		return fmt.Errorf("received %d changes after seq %d up to %d (id digest %016x), but the cell added %d records (digest %016x): a change was lost, repeated or wrong",
			got.N, after, last, got.Sum, want.N, want.Sum)
	}
	return nil
}

func (h *scaleRun) startWorker(workload, contender, name string, seed int, extra ...string) (*process, error) {
	args := append([]string{"pgscale-worker",
		"-workload", workload, "-contender", contender, "-url", h.workerURL, "-name", name,
		"-duration", h.c.duration.String(), "-seed", strconv.Itoa(seed)}, extra...)
	cmd := exec.Command(h.c.exe, args...)
	cmd.Stderr = h.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, stdin: stdin, lines: make(chan string, 2)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	return p, nil
}

// next returns the worker's next line, or an error if it ends or stays
// silent for longer than patience.
func (p *process) next(patience time.Duration) (string, error) {
	t := time.NewTimer(patience)
	defer t.Stop()
	select {
	case line, ok := <-p.lines:
		if !ok {
			return "", errors.New("exited without a word (its stderr is above)")
		}
		return line, nil
	case <-t.C:
		return "", fmt.Errorf("silent for %v", patience)
	}
}

// workerFailure is what a worker that did not get ready said: its result
// with the error, or whatever else it printed.
func workerFailure(line string) string {
	var res workerResult
	if json.Unmarshal([]byte(line), &res) == nil && res.Err != "" {
		return res.Err
	}
	return fmt.Sprintf("expected %q, got %q", workerReady, line)
}

// serverErrors counts the ERROR lines of a server log (written with
// logPrefix) by SQLSTATE.
func serverErrors(log []byte) map[string]int64 {
	out := map[string]int64{}
	for line := range bytes.Lines(log) {
		rest, ok := bytes.CutPrefix(line, []byte("["))
		if !ok || len(rest) < 6 || rest[5] != ']' {
			continue
		}
		if bytes.HasPrefix(rest[6:], []byte(" ERROR:")) {
			out[string(rest[:5])]++
		}
	}
	return out
}

// gitCommit names the commit the run measured, "+dirty" when the tree has
// changes; "" outside a repository.
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		commit += "+dirty"
	}
	return commit
}

// ---------------------------------------------------------------------------
// Targets (issue 29), all judged on ratios from the same run.

// scaleTargets judges the cells against issue 29's targets.
func scaleTargets(cells []ScaleCell) []Result {
	rate := func(workload, contender string, procs int) (float64, bool) {
		for _, c := range cells {
			if c.Workload == workload && c.Contender == contender && c.Procs == procs && len(c.errors()) == 0 && c.RecordsPerSec > 0 {
				return c.RecordsPerSec, true
			}
		}
		return 0, false
	}
	ratio := func(what, op string, limit float64, num, den [3]string, procsNum, procsDen int) Result {
		r := Result{What: what, Op: op, Limit: limit, Ratio: boolPtr(true)}
		a, okA := rate(num[0], num[1], procsNum)
		b, okB := rate(den[0], den[1], procsDen)
		if !okA || !okB {
			r.Status, r.Detail = "not run", fmt.Sprintf("%s %s at %d and %s %s at %d processes", num[0], num[1], procsNum, den[0], den[1], procsDen)
			return r
		}
		r.Value = a / b
		r.Detail = fmt.Sprintf("%s / %s %s", fmtNum(a), fmtNum(b), num[2])
		r.Status = judge(r.Value, op, limit)
		return r
	}
	storh := func(w string) [3]string { return [3]string{w, "storh", "records/s"} }
	fedRead := [3]string{"putfeed", readerContender, "records/s"}
	pgxOf := func(w, contender string) [3]string { return [3]string{w, contender, "records/s"} }
	out := []Result{
		// A time ratio is the inverse of the rates': pgx's rate over storh's.
		ratio("single durable Put, 1 process: storh time ÷ pgx time", "<=", 1.5, pgxOf("put", "pgx"), storh("put"), 1, 1),
		ratio("single durable Put: 4 processes ÷ 1 process (storh throughput)", ">=", 2.5, storh("put"), storh("put"), 4, 1),
		// What the machine allows: the hand-written side's scaling, in the
		// same run (on 2 cores, 4 clients and their 4 backends share them).
		ratio("single durable Put: 4 processes ÷ 1 process (pgx throughput)", "", 0, pgxOf("put", "pgx"), pgxOf("put", "pgx"), 4, 1),
		ratio("single durable Put, 4 processes: storh ÷ pgx (throughput)", "", 0, storh("put"), pgxOf("put", "pgx"), 4, 4),
		ratio("PutMany(100), 1 process: storh ÷ pgx (throughput)", ">=", 0.8, storh("putmany"), pgxOf("putmany", "pgx"), 1, 1),
		ratio("PutMany(100), 4 processes: storh ÷ pgx (throughput)", ">=", 0.8, storh("putmany"), pgxOf("putmany", "pgx"), 4, 4),
		ratio("queue claim + complete, 4 processes: storh ÷ pgx SKIP LOCKED lease worker, 2 commits per job (throughput)", ">=", 0.8, storh("queue"), pgxOf("queue", "pgx"), 4, 4),
		ratio("queue claim + complete, 4 processes: storh ÷ pgx SKIP LOCKED one-transaction worker (throughput)", "", 0, storh("queue"), pgxOf("queue", "pgx-1tx"), 4, 4),
		ratio("page of 100, 1 process: storh time ÷ pgx time", "<=", 1.2, pgxOf("page", "pgx"), storh("page"), 1, 1),
		ratio("page of 100, 4 processes: storh time ÷ pgx time", "<=", 1.2, pgxOf("page", "pgx"), storh("page"), 4, 4),
		// Issue 31: what the change feed costs a durable Put, against
		// storh's own Put without a feed.
		ratio("single durable Put, 1 process: time with a change feed ÷ without", "<=", 1.10, storh("put"), storh("putfeed"), 1, 1),
		ratio("single durable Put, 4 processes: time with a change feed ÷ without", "<=", 1.10, storh("put"), storh("putfeed"), 4, 4),
		ratio("single durable Put, 4 processes and a process following Changes: writers' time ÷ without a feed", "", 0, storh("put"), fedRead, 4, 4),
	}
	// Reruns: the worst storh cell, which must stay below 5 per 1,000
	// transactions.
	r := Result{What: "reruns per 1,000 transactions, worst storh cell", Op: "<", Limit: 5, Ratio: boolPtr(false)}
	known, worst := false, ""
	for _, c := range cells {
		if !isStorh(c.Contender) {
			continue
		}
		v, ok := c.rerunsPer1k()
		if !ok {
			continue
		}
		if !known || v > r.Value {
			r.Value, worst = v, fmt.Sprintf("%s at %d processes", c.Workload, c.Procs)
		}
		known = true
	}
	if known {
		r.Status, r.Detail = judge(r.Value, r.Op, r.Limit), worst
	} else {
		r.Status, r.Detail = "not run", "no server log to count them in (a private server's only)"
	}
	return append(out, r)
}

// ---------------------------------------------------------------------------
// Output.

func writeScaleReport(dir string, rep ScaleReport, stdout, stderr io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	jsonPath := filepath.Join(dir, "pgscale-"+rep.Stamp+".json")
	if err := os.WriteFile(jsonPath, append(js, '\n'), 0o644); err != nil {
		return err
	}
	md := scaleMarkdown(rep)
	mdPath := filepath.Join(dir, "pgscale-"+rep.Stamp+".md")
	if err := os.WriteFile(mdPath, []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Fprint(stdout, md)
	fmt.Fprintf(stderr, "benchreport pgscale: wrote %s and %s\n", jsonPath, mdPath)
	return nil
}

// scaleMarkdown writes the report: issue 29's table (storh and pgx side by
// side, process counts joined by " / "), the targets, and every cell.
func scaleMarkdown(r ScaleReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# storh-go on PostgreSQL from several processes, %s\n\n", r.Stamp)
	fmt.Fprintf(&b, "Command (in bench/): `go run ./cmd/%s`", r.Command)
	if r.Commit != "" {
		fmt.Fprintf(&b, ", commit %s", r.Commit)
	}
	fmt.Fprintf(&b, ". Each cell %s, %d round(s); a cell's rate is the median of its rounds.\n\n", r.Duration, r.Rounds)
	m := r.Machine
	fmt.Fprintf(&b, "Machine: %s, %d cores", m.CPU, m.Cores)
	if m.MemTotal != "" {
		fmt.Fprintf(&b, ", %s RAM", m.MemTotal)
	}
	fmt.Fprintf(&b, "; %s. Load average before / after: %s / %s. Started %s, took %d s.\n\n",
		m.GoVersion, m.LoadBefore, m.LoadAfter, m.StartedUTC, m.DurationSec)
	server := "given with --url"
	if r.Server.Private {
		server = "a private server on a Unix socket"
	}
	var settings []string
	for k, v := range r.Server.Settings {
		settings = append(settings, k+"="+v)
	}
	sort.Strings(settings)
	fmt.Fprintf(&b, "PostgreSQL %s, %s: %s.\n\n", r.Server.Version, server, strings.Join(settings, ", "))
	if busy(m.LoadBefore, m.Cores) || busy(m.LoadAfter, m.Cores) {
		b.WriteString("**Warning:** the load average exceeded the number of cores: other processes " +
			"competed for the CPU during the run.\n\n")
	}

	procs := func(cs []ScaleCell, f func(ScaleCell) string) string {
		var parts []string
		for _, n := range r.Procs {
			v := "–"
			for _, c := range cs {
				if c.Procs == n {
					v = f(c)
				}
			}
			parts = append(parts, v)
		}
		return strings.Join(parts, " / ")
	}
	of := func(workload, contender string) []ScaleCell {
		var out []ScaleCell
		for _, c := range r.Cells {
			if c.Workload == workload && c.Contender == contender {
				out = append(out, c)
			}
		}
		return out
	}
	var counts []string
	for _, n := range r.Procs {
		counts = append(counts, strconv.Itoa(n))
	}
	b.WriteString("## Records per second, summed over the processes\n\n")
	b.WriteString("| work | processes | storh rec/s | pgx rec/s | storh ÷ pgx | storh reruns per 1k tx |\n|---|---|---|---|---|---|\n")
	for _, w := range scaleWorkloads {
		if w.baseline != "" {
			continue // in a table of its own, below
		}
		st := of(w.name, "storh")
		for _, contender := range w.contenders[1:] {
			px := of(w.name, contender)
			if len(st) == 0 && len(px) == 0 {
				continue
			}
			title := w.title
			if len(w.contenders) > 2 {
				title += " (pgx: " + contenderTitle(w.name, contender) + ")"
			}
			ratio := procs(st, func(c ScaleCell) string {
				for _, p := range px {
					if p.Procs == c.Procs && p.RecordsPerSec > 0 {
						return strconv.FormatFloat(c.RecordsPerSec/p.RecordsPerSec, 'f', 2, 64)
					}
				}
				return "–"
			})
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", title, strings.Join(counts, " / "),
				procs(st, func(c ScaleCell) string { return fmtRate(c.RecordsPerSec) }),
				procs(px, func(c ScaleCell) string { return fmtRate(c.RecordsPerSec) }),
				ratio, procs(st, fmtReruns))
		}
	}

	if put, fed, read := of("put", "storh"), of("putfeed", "storh"), of("putfeed", readerContender); len(fed) > 0 || len(read) > 0 {
		feedMarkdown(&b, r, put, fed, read)
	}

	b.WriteString("\n## Targets\n\n| Target | Measured | Limit | Result | Rates |\n|---|---:|---:|---|---|\n")
	for _, x := range r.Targets {
		limit, val, status := "", fmtNum(x.Value), x.Status
		if x.Op != "" {
			limit = x.Op + " " + fmtNum(x.Limit)
		}
		if x.Status == "not run" {
			val = "–"
		}
		if status == "not met" {
			status = "**not met**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", x.What, val, limit, status, x.Detail)
	}

	b.WriteString("\n## Every cell\n\n" +
		"Sums over the rounds. Conflicts returned: calls that failed with an error wrapping kv.ErrConflict " +
		"(storh gives up after 30 runs of a transaction). Server transactions and deadlocks: pg_stat_database over the " +
		"windows (storh ends its read-only transactions with a rollback). Server errors: the server log's ERROR lines by SQLSTATE; " +
		"reruns are those storh runs again on (" + strings.Join(rerunCodes, ", ") + ").\n\n")
	b.WriteString("| work | contender | processes | rec/s (median) | rec/s by round | operations | commits (client) | conflicts returned | server commits / rollbacks | deadlocks | server errors | reruns per 1k tx | load after |\n" +
		"|---|---|---:|---:|---|---:|---:|---:|---|---:|---|---:|---|\n")
	for _, c := range r.Cells {
		var rounds, loads []string
		for _, run := range c.Runs {
			rounds = append(rounds, fmtRate(run.RecordsPerSec))
			one, _, _ := strings.Cut(run.Load, " ") // the 1-minute average
			loads = append(loads, one)
		}
		rate := fmtRate(c.RecordsPerSec)
		if errs := c.errors(); len(errs) > 0 {
			rate = "**failed**: " + errs[0]
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %d | %d | %d | %d / %d | %d | %s | %s | %s |\n",
			c.Workload, c.Contender, c.Procs, rate, strings.Join(rounds, ", "),
			c.sum(func(r ScaleRun) int64 { return r.Ops }),
			c.sum(func(r ScaleRun) int64 { return r.Commits }),
			c.sum(func(r ScaleRun) int64 { return r.Conflicts }),
			c.sum(func(r ScaleRun) int64 { return r.ServerCommits }),
			c.sum(func(r ScaleRun) int64 { return r.ServerRollbacks }),
			c.sum(func(r ScaleRun) int64 { return r.Deadlocks }),
			fmtServerErrors(c), fmtReruns(c), strings.Join(loads, ", "))
	}
	b.WriteString("\nContenders: storh is a storh.DB per process (one goroutine); pgx is hand-written pgx code, " +
		"one connection per process, writing the same msgpack payloads into (id bytea primary key, data bytea), " +
		"one durable commit per operation; pgx reads a page in a REPEATABLE READ READ ONLY transaction, as storh does; " +
		"pgx's queue worker leases a job with UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED) and completes it " +
		"in a second transaction, as storh's Claim and Complete do; pgx-1tx holds the job's row lock in one transaction " +
		"(SELECT … FOR UPDATE SKIP LOCKED, DELETE, COMMIT).\n")
	return b.String()
}

// feedMarkdown writes the change feed's table: storh's Put into a fed
// collection, with and without a process following it, against its Put
// without a feed, a row per process count.
func feedMarkdown(b *strings.Builder, r ScaleReport, put, fed, read []ScaleCell) {
	at := func(cs []ScaleCell, n int) (ScaleCell, bool) {
		for _, c := range cs {
			if c.Procs == n && len(c.errors()) == 0 && c.RecordsPerSec > 0 {
				return c, true
			}
		}
		return ScaleCell{}, false
	}
	rate := func(cs []ScaleCell, n int) string {
		if c, ok := at(cs, n); ok {
			return fmtRate(c.RecordsPerSec)
		}
		return "–"
	}
	// The time ratio is the inverse of the rates': that of the medians,
	// then each round's, whose two cells ran seconds apart and so shared
	// more of the machine's moods than the medians of different rounds.
	timeRatio := func(cs []ScaleCell, n int) string {
		c, ok1 := at(cs, n)
		p, ok2 := at(put, n)
		if !ok1 || !ok2 {
			return "–"
		}
		out := strconv.FormatFloat(p.RecordsPerSec/c.RecordsPerSec, 'f', 2, 64)
		var rounds []string
		for _, cr := range c.Runs {
			for _, pr := range p.Runs {
				if pr.Round == cr.Round && cr.RecordsPerSec > 0 {
					rounds = append(rounds, strconv.FormatFloat(pr.RecordsPerSec/cr.RecordsPerSec, 'f', 2, 64))
				}
			}
		}
		if len(rounds) > 1 {
			out += " (" + strings.Join(rounds, ", ") + ")"
		}
		return out
	}
	trims := "so that the window's commits trim it, a step whenever it holds more than keep/8 past its keep"
	if r.FeedFill < r.FeedKeep {
		trims = "so that a commit trims only once the feed holds more than its keep"
	}
	fmt.Fprintf(b, "\n## The change feed\n\n"+
		"storh's single durable Put into a collection opened WithChangeFeed(%d) that held %d changes before the cell, "+
		"%s, against its Put without a feed (the table above); time ratios are "+
		"the rate without the feed over the rate with it, of the medians and (in brackets) of each round's cells. With a reader: the same writers and one more process "+
		"following Changes from the feed's last change before the cell; it must receive every change of the cell "+
		"exactly once (the cell fails otherwise). Its changes are summed over the rounds; catch-up is the longest, "+
		"from the window's end to the last change's arrival.\n\n", r.FeedKeep, r.FeedFill, trims)
	b.WriteString("| processes | no feed rec/s | feed rec/s | feed time ÷ no feed | feed + reader: writers rec/s | ÷ no feed (time) | reader: changes received / in the window | reader catch-up |\n" +
		"|---:|---:|---:|---:|---:|---:|---|---:|\n")
	for _, n := range r.Procs {
		received, catchUp := "–", "–"
		if c, ok := at(read, n); ok {
			var all, in int64
			var longest time.Duration
			for _, run := range c.Runs {
				if run.Reader != nil {
					all, in = all+run.Reader.Delivered, in+run.Reader.InWindow
					longest = max(longest, run.Reader.CatchUp)
				}
			}
			received = addThousands(strconv.FormatInt(all, 10)) + " / " + addThousands(strconv.FormatInt(in, 10))
			catchUp = longest.Round(time.Millisecond).String()
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", n, rate(put, n), rate(fed, n), timeRatio(fed, n),
			rate(read, n), timeRatio(read, n), received, catchUp)
	}
}

func contenderTitle(workload, contender string) string {
	switch {
	case workload == "queue" && contender == "pgx":
		return "lease, 2 commits per job"
	case contender == "pgx-1tx":
		return "one transaction per job"
	}
	return contender
}

func fmtRate(v float64) string {
	switch {
	case v >= 10_000:
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + "k"
	default:
		return addThousands(strconv.FormatFloat(v, 'f', 0, 64))
	}
}

// addThousands puts commas in a whole number: 1973 → 1,973.
func addThousands(s string) string {
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func fmtReruns(c ScaleCell) string {
	v, ok := c.rerunsPer1k()
	if !ok {
		return "?"
	}
	return fmtNum(v)
}

func fmtServerErrors(c ScaleCell) string {
	sum := map[string]int64{}
	for _, r := range c.Runs {
		if r.ServerErrors == nil {
			return "?"
		}
		for code, n := range r.ServerErrors {
			sum[code] += n
		}
	}
	if len(sum) == 0 {
		return "none"
	}
	var parts []string
	for code, n := range sum {
		parts = append(parts, fmt.Sprintf("%s × %d", code, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
