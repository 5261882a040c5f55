// Command benchreport runs the storh-go peer benchmarks, summarises them
// with benchstat and writes the raw output, a JSON file, SVG charts and a
// Markdown report with the ratios against the project's targets, all
// computed from the same run. It also compares two reports and gates on
// regressed ratios.
//
// Run it from the bench module:
//
//	cd bench && go run ./cmd/benchreport [flags] [output-dir]
//	cd bench && go run ./cmd/benchreport compare [-alpha 0.05] OLD.json NEW.json
//	cd bench && go run ./cmd/benchreport gate [-threshold 0.10] OLD.json NEW.json
//	cd bench && go run ./cmd/benchreport charts REPORT.json DIR
//	cd bench && go run ./cmd/benchreport pgscale [-quick] [-url URL] [flags]
//
// # Running and reporting
//
// The output directory defaults to results/ (git-ignored). Each run writes
// bench-<stamp>.txt (the go test output, benchstat's input), benchstat-<stamp>.txt,
// report-<stamp>.json, report-<stamp>.md and the charts in
// charts-<stamp>/, which the Markdown report embeds. Flags:
//
//	-bench REGEXP     go test -bench (default ".")
//	-count N          go test -count (default 5)
//	-benchtime D      go test -benchtime
//	-timeout D        go test -timeout (default 3h)
//	-large            also run the n=1M engine sizes (STORH_BENCH_LARGE=1)
//	-smoke            every benchmark once at tiny sizes: STORH_BENCH_SMOKE=1,
//	                  -benchtime 1x -count 1, no benchstat; still writes the
//	                  JSON, the Markdown and the charts, and fails if go test does
//	-benchstat CMD    the benchstat command; empty to skip
//	-input FILES      report on existing go test output files (comma-separated),
//	                  joined into bench-<stamp>.txt, instead of running go test
//	-dir DIR          the bench module directory to run go test in
//	-out DIR          the output directory (or the first argument)
//	-charts DIR       also write the charts into DIR under stable names
//	                  (say ../docs/images); the report then links to those
//	-local-charts=false  do not write charts-<stamp>/ next to the report
//
// The charts, drawn with gonum.org/v1/plot: scale-page.svg,
// scale-window.svg, scale-query-eq.svg, scale-query-range.svg and
// scale-get.svg plot µs per operation against the collection size, one
// line per implementation (a chart is left out when fewer than two sizes
// of it ran); ratios.svg has a bar per target, measured/limit for ">="
// targets and limit/measured for "<=" ones, so that 1 is the target and
// more is better (targets with a limit of 0 are only in the Markdown).
//
// # compare
//
// compare prints, for every benchmark in both reports and each of its
// units, the old and new medians, the change, and its significance as
// benchstat computes it (Mann-Whitney U test over the runs; "~" when not
// significant at -alpha, with "(p=… n=…)"), then every target's value old
// → new.
//
// # gate
//
// gate exits with status 1, naming them, when a ratio target judged in
// both reports (met or not met) moved against its direction by more than
// -threshold of its old value: smaller for a ">=" target, larger for a
// "<=" one. Absolute targets are not checked: on a shared machine they
// measure the machine. It prints a table of every ratio it checked.
//
// # charts
//
// charts redraws the charts of an existing report-<stamp>.json into DIR.
//
// # pgscale
//
// pgscale measures storh on PostgreSQL from 1, 2, 4 and 8 OS processes,
// each its own storh.DB on one collection, against hand-written pgx code
// doing the same work from as many processes, in the same run: durable
// single Puts, PutMany(100), queue claim + complete (against SKIP LOCKED
// workers) and cursor pages of 100; and storh's durable Put into a
// collection with a full change feed against its Put without one, alone
// and with one more process following the feed, which must receive every
// change exactly once (putfeed). Workers are this binary re-executed
// ("pgscale-worker"), started together by one signal. Without -url it
// starts a private server (Debian's postgresql package, run as root or
// postgres: a cluster in a temporary directory on a Unix socket, fsync
// on), whose log also gives the transactions PostgreSQL failed and storh
// ran again. It writes pgscale-<stamp>.json and .md into -out (results/)
// and prints the Markdown: the records/s tables, issues 29's and 31's targets judged
// on ratios from the run, and every cell's counters. -quick (400 ms cells,
// 1 and 2 processes) is the smoke run CI makes, through the package's
// tests. docs/benchmarks.md has the flags and what each contender does.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// defaultBenchstat is pinned so that reports from different days format alike.
const defaultBenchstat = "go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"

type config struct {
	out       string
	dir       string
	bench     string
	count     int
	benchtime string
	large     bool
	benchstat string
	input     string
	timeout   string
	smoke     bool
	// charts is an extra directory for the charts, under stable names.
	charts string
	// localCharts writes the charts into charts-<stamp>/ beside the report.
	localCharts bool
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "compare":
			os.Exit(compareMain(os.Args[2:], os.Stdout, os.Stderr))
		case "gate":
			os.Exit(gateMain(os.Args[2:], os.Stdout, os.Stderr))
		case "charts":
			os.Exit(chartsMain(os.Args[2:], os.Stderr))
		case "pgscale":
			os.Exit(pgscaleMain(os.Args[2:], os.Stdout, os.Stderr))
		case "pgscale-worker":
			os.Exit(workerMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		}
	}
	var c config
	flag.StringVar(&c.out, "out", "results", "output `directory` (also accepted as the first argument)")
	flag.StringVar(&c.dir, "dir", ".", "the bench module `directory` to run go test in")
	flag.StringVar(&c.bench, "bench", ".", "benchmark `regexp` passed to go test -bench")
	flag.IntVar(&c.count, "count", 5, "go test -count: runs of each benchmark")
	flag.StringVar(&c.benchtime, "benchtime", "", "go test -benchtime (empty: go test's default)")
	flag.BoolVar(&c.large, "large", false, "also run the n=1M engine sizes (sets STORH_BENCH_LARGE=1)")
	flag.StringVar(&c.benchstat, "benchstat", defaultBenchstat, "benchstat `command`; empty to skip")
	flag.StringVar(&c.input, "input", "", "report on existing go test output `files` (comma-separated) instead of running")
	flag.StringVar(&c.timeout, "timeout", "3h", "go test -timeout")
	flag.BoolVar(&c.smoke, "smoke", false, "run every benchmark once at tiny sizes (STORH_BENCH_SMOKE=1, -benchtime 1x -count 1, no benchstat)")
	flag.StringVar(&c.charts, "charts", "", "also write the SVG charts into `directory` under stable names (e.g. ../docs/images)")
	flag.BoolVar(&c.localCharts, "local-charts", true, "write the SVG charts into charts-<stamp>/ beside the report")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: benchreport [flags] [output-dir]\n"+
			"       benchreport compare [-alpha 0.05] OLD.json NEW.json\n"+
			"       benchreport gate [-threshold 0.10] OLD.json NEW.json\n"+
			"       benchreport charts REPORT.json DIR\n"+
			"       benchreport pgscale [-quick] [-url URL] [flags]   (benchreport pgscale -h)\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	switch flag.NArg() {
	case 0:
	case 1:
		c.out = flag.Arg(0)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

// Report is what the JSON file holds.
type Report struct {
	Stamp      string      `json:"stamp"`
	Command    string      `json:"command"`
	Machine    Machine     `json:"machine"`
	Benchmarks []Benchmark `json:"benchmarks"`
	Ratios     []Result    `json:"ratios"`
	Benchstat  string      `json:"benchstat,omitempty"`
}

// Machine describes where the numbers come from.
type Machine struct {
	CPU         string `json:"cpu"`
	Cores       int    `json:"cores"`
	MemTotal    string `json:"mem_total,omitempty"`
	Kernel      string `json:"kernel,omitempty"`
	GoVersion   string `json:"go_version"`
	GOOS        string `json:"goos"`
	GOARCH      string `json:"goarch"`
	LoadBefore  string `json:"loadavg_before,omitempty"`
	LoadAfter   string `json:"loadavg_after,omitempty"`
	StartedUTC  string `json:"started_utc"`
	DurationSec int    `json:"duration_sec"`
}

// Benchmark is one benchmark's runs and the median of each unit.
type Benchmark struct {
	Name   string               `json:"name"` // without the -GOMAXPROCS suffix
	Runs   []map[string]float64 `json:"runs"` // unit → value, plus "iterations"
	Median map[string]float64   `json:"median"`
}

func run(c config) error {
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	start := time.Now()
	stamp := start.UTC().Format("20060102-150405")
	rep := Report{Stamp: stamp, Machine: machine()}
	rep.Machine.StartedUTC = start.UTC().Format(time.RFC3339)

	rawPath := filepath.Join(c.out, "bench-"+stamp+".txt")
	if c.input != "" {
		// Several outputs (say ids at -count 5, engine at -count 3) are
		// joined into one file, which benchstat then reads as one run.
		var joined []byte
		for _, in := range strings.Split(c.input, ",") {
			data, err := os.ReadFile(in)
			if err != nil {
				return err
			}
			joined = append(joined, data...)
		}
		if err := os.WriteFile(rawPath, joined, 0o644); err != nil {
			return err
		}
		rep.Command = "(report on " + c.input + ")"
	} else {
		args, env := goTestCommand(c)
		rep.Command = strings.TrimPrefix(strings.Join(env, " ")+" go "+shellJoin(args), " ")
		fmt.Fprintf(os.Stderr, "benchreport: %s (in %s)\n", rep.Command, c.dir)
		rep.Machine.LoadBefore = loadavg()
		if err := runGoTest(c.dir, args, env, rawPath); err != nil {
			return err
		}
		rep.Machine.LoadAfter = loadavg()
	}
	rep.Machine.DurationSec = int(time.Since(start).Seconds())

	raw, err := os.ReadFile(rawPath)
	if err != nil {
		return err
	}
	var cpu string
	rep.Benchmarks, cpu = parse(raw)
	if cpu != "" {
		rep.Machine.CPU = cpu
	}
	if len(rep.Benchmarks) == 0 {
		return fmt.Errorf("no benchmark results in %s", rawPath)
	}
	rep.Ratios = evaluate(rep.Benchmarks)

	if c.benchstat != "" && !c.smoke {
		out, err := runBenchstat(c.benchstat, rawPath)
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchreport: benchstat failed (the report will list medians instead): %v\n", err)
		} else {
			rep.Benchstat = out
			if err := os.WriteFile(filepath.Join(c.out, "benchstat-"+stamp+".txt"), []byte(out), 0o644); err != nil {
				return err
			}
		}
	}

	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	jsonPath := filepath.Join(c.out, "report-"+stamp+".json")
	if err := os.WriteFile(jsonPath, append(js, '\n'), 0o644); err != nil {
		return err
	}
	files, svgs, err := charts(rep)
	if err != nil {
		return err
	}
	// The report links to the local copies, else to those in -charts.
	var links []chartLink
	var dirs []string
	if c.localCharts {
		dirs = append(dirs, filepath.Join(c.out, "charts-"+stamp))
	}
	if c.charts != "" {
		dirs = append(dirs, c.charts)
	}
	if err := writeCharts(files, svgs, dirs...); err != nil {
		return err
	}
	if len(dirs) > 0 {
		rel, err := filepath.Rel(c.out, dirs[0])
		if err != nil {
			rel = dirs[0]
		}
		for _, f := range files {
			links = append(links, chartLink{Title: f.Title, Path: filepath.ToSlash(filepath.Join(rel, f.Name))})
		}
	}
	mdPath := filepath.Join(c.out, "report-"+stamp+".md")
	if err := os.WriteFile(mdPath, []byte(markdown(rep, links)), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "benchreport: wrote %s, %s and %s", rawPath, jsonPath, mdPath)
	if len(files) > 0 && len(dirs) > 0 {
		fmt.Fprintf(os.Stderr, ", and %d charts into %s", len(files), strings.Join(dirs, " and "))
	}
	fmt.Fprintln(os.Stderr)
	return nil
}

// chartLink is a chart as the Markdown report embeds it.
type chartLink struct {
	Title string
	Path  string // relative to the report
}

// goTestCommand returns go test's arguments and the variables to add to
// its environment.
func goTestCommand(c config) (args, env []string) {
	count, benchtime := c.count, c.benchtime
	if c.smoke {
		count, benchtime = 1, "1x"
		env = append(env, "STORH_BENCH_SMOKE=1")
	}
	if c.large {
		env = append(env, "STORH_BENCH_LARGE=1")
	}
	args = []string{"test", "-run", "^$", "-bench", c.bench, "-count", strconv.Itoa(count), "-timeout", c.timeout}
	if benchtime != "" {
		args = append(args, "-benchtime", benchtime)
	}
	args = append(args, "./...")
	return args, env
}

// chartsMain redraws the charts of a report: benchreport charts REPORT.json DIR.
func chartsMain(args []string, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: benchreport charts REPORT.json DIR")
		return 2
	}
	rep, err := readReport(args[0])
	if err == nil {
		var files []chartFile
		var svgs map[string][]byte
		files, svgs, err = charts(rep)
		if err == nil {
			err = writeCharts(files, svgs, args[1])
		}
		if err == nil {
			for _, f := range files {
				fmt.Fprintln(stderr, "benchreport: wrote", filepath.Join(args[1], f.Name))
			}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "benchreport charts:", err)
		return 1
	}
	return 0
}

// runGoTest runs go test, copying its output to the terminal as it comes
// (a full run takes many minutes) and to rawPath.
func runGoTest(dir string, args, env []string, rawPath string) error {
	f, err := os.Create(rawPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Stdout = io.MultiWriter(f, os.Stdout)
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go test: %w (partial output in %s)", err, rawPath)
	}
	return f.Close()
}

func runBenchstat(command, rawPath string) (string, error) {
	fields := strings.Fields(command)
	// One table per benchmark, one column per contender, so that every
	// table reads "storh vs its peers" with benchstat's deltas against the
	// first column (storh's own line comes first in every benchmark).
	args := append(fields[1:], "-table", ".name", "-col", "/impl", rawPath)
	cmd := exec.Command(fields[0], args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", command, err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

var procsSuffix = regexp.MustCompile(`-(\d+)$`)

// parse reads go test -bench output: "BenchmarkX/sub-P  N  v unit  v unit ...".
func parse(raw []byte) ([]Benchmark, string) {
	type line struct {
		name string
		vals map[string]float64
	}
	var lines []line
	var cpu string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		text := sc.Text()
		if v, ok := strings.CutPrefix(text, "cpu: "); ok {
			cpu = strings.TrimSpace(v)
			continue
		}
		if !strings.HasPrefix(text, "Benchmark") {
			continue
		}
		f := strings.Fields(text)
		if len(f) < 4 || len(f)%2 != 0 {
			continue
		}
		iters, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		vals := map[string]float64{"iterations": iters}
		ok := true
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				ok = false
				break
			}
			vals[f[i+1]] = v
		}
		if ok {
			lines = append(lines, line{f[0], vals})
		}
	}
	// Strip the -GOMAXPROCS suffix only when every line carries the same
	// one: with GOMAXPROCS=1 there is none, and a name may itself end in
	// "-64g".
	suffix := ""
	for i, l := range lines {
		m := procsSuffix.FindString(l.name)
		if i == 0 {
			suffix = m
		} else if m != suffix {
			suffix = ""
			break
		}
	}
	byName := map[string]*Benchmark{}
	var order []string
	for _, l := range lines {
		name := strings.TrimSuffix(l.name, suffix)
		b, ok := byName[name]
		if !ok {
			b = &Benchmark{Name: name}
			byName[name] = b
			order = append(order, name)
		}
		b.Runs = append(b.Runs, l.vals)
	}
	out := make([]Benchmark, 0, len(order))
	for _, name := range order {
		b := byName[name]
		b.Median = map[string]float64{}
		units := map[string][]float64{}
		for _, r := range b.Runs {
			for u, v := range r {
				units[u] = append(units[u], v)
			}
		}
		for u, vs := range units {
			b.Median[u] = median(vs)
		}
		out = append(out, *b)
	}
	return out, cpu
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ---------------------------------------------------------------------------
// Targets.

// target is one promise checked against the medians. Names may contain
// {n}, expanded to every size present in the results.
type target struct {
	what string
	// Ratio targets: value = median(num.unit) / median(den.unit).
	// Absolute targets (den == ""): value = median(num.unit); a unit
	// "ratio" is one a benchmark measured itself (BenchmarkPagePaired).
	num, den string
	unit     string
	op       string  // ">=", "<=" or "" for information only
	limit    float64 //
	sizes    []string
	// except lists sizes to leave out (those another entry judges).
	except []string
	// scale divides a ratio: 64 turns "64 goroutines vs 1" into the
	// fraction of the 64 × ceiling. 0 means 1.
	scale float64
	// capBy, when set, names a benchmark whose median of unit caps the
	// scaled denominator: the ceiling is min(den × scale, capBy).
	capBy string
}

var targets = []target{
	{what: "uuidv7.New vs google NewV7 (speed-up)", num: "BenchmarkUUIDNew/impl=google", den: "BenchmarkUUIDNew/impl=storh", unit: "ns/op", op: ">=", limit: 2},
	{what: "uuidv7.New vs google NewV7, parallel (speed-up)", num: "BenchmarkUUIDNewParallel/impl=google", den: "BenchmarkUUIDNewParallel/impl=storh", unit: "ns/op", op: ">=", limit: 2},
	{what: "uuidv7.New vs google NewV7 with RandPool (speed-up)", num: "BenchmarkUUIDNew/impl=google-randpool", den: "BenchmarkUUIDNew/impl=storh", unit: "ns/op"},
	{what: "uuidv7.New allocs/op", num: "BenchmarkUUIDNew/impl=storh", unit: "allocs/op", op: "<=", limit: 0},
	{what: "uuidv7.NewBatch ns per id", num: "BenchmarkUUIDNew/impl=storh-batch100", unit: "ns/op"},
	{what: "uuidv7.Parse allocs/op", num: "BenchmarkUUIDParse/impl=storh", unit: "allocs/op", op: "<=", limit: 0},
	{what: "uuidv7.IsValid allocs/op", num: "BenchmarkUUIDParse/impl=storh-isvalid", unit: "allocs/op", op: "<=", limit: 0},
	{what: "uuidv7.Validate allocs/op", num: "BenchmarkUUIDParse/impl=storh-validate", unit: "allocs/op", op: "<=", limit: 0},
	{what: "uuidv7.Parse vs google Parse (speed-up)", num: "BenchmarkUUIDParse/impl=google", den: "BenchmarkUUIDParse/impl=storh", unit: "ns/op"},
	{what: "objectid.New vs mongo NewObjectID (speed-up)", num: "BenchmarkObjectIDNew/impl=mongo", den: "BenchmarkObjectIDNew/impl=storh", unit: "ns/op", op: ">=", limit: 1},
	{what: "objectid.New vs mongo NewObjectID, parallel (speed-up)", num: "BenchmarkObjectIDNewParallel/impl=mongo", den: "BenchmarkObjectIDNewParallel/impl=storh", unit: "ns/op", op: ">=", limit: 1},
	{what: "objectid.New vs rs/xid New (speed-up)", num: "BenchmarkObjectIDNew/impl=xid", den: "BenchmarkObjectIDNew/impl=storh", unit: "ns/op"},
	{what: "objectid.NewBatch(100) ns per id", num: "BenchmarkObjectIDNew/impl=storh-batch100", unit: "ns/op", op: "<=", limit: 10},
	{what: "objectid.AppendBatch(100) ns per id", num: "BenchmarkObjectIDNew/impl=storh-appendbatch100", unit: "ns/op", op: "<=", limit: 10},
	{what: "objectid.New allocs/op", num: "BenchmarkObjectIDNew/impl=storh", unit: "allocs/op", op: "<=", limit: 0},
	{what: "objectid.Parse allocs/op", num: "BenchmarkObjectIDParse/impl=storh", unit: "allocs/op", op: "<=", limit: 0},

	{what: "durable Put vs bolt.Update (throughput ratio)", num: "BenchmarkPutDurable/impl=bolt", den: "BenchmarkPutDurable/impl=storh", unit: "ns/op", op: ">=", limit: 0.9},
	{what: "64 goroutines vs 1 goroutine (throughput ratio)", num: "BenchmarkPutConcurrent/impl=storh-64g", den: "BenchmarkPutConcurrent/impl=storh-1g", unit: "records/s", op: ">=", limit: 15},
	{what: "64 goroutines vs their ceiling, min(64 × 1 goroutine, commits of 64) (fraction)", num: "BenchmarkPutConcurrent/impl=storh-64g", den: "BenchmarkPutConcurrent/impl=storh-1g", unit: "records/s", scale: 64, capBy: "BenchmarkPutConcurrent/impl=storh-putmany64", op: ">=", limit: 0.6},
	{what: "64 goroutines vs 64 × 1 goroutine, uncapped (fraction)", num: "BenchmarkPutConcurrent/impl=storh-64g", den: "BenchmarkPutConcurrent/impl=storh-1g", unit: "records/s", scale: 64},
	{what: "durable PutMany of 64 from one goroutine (records/s: the cap)", num: "BenchmarkPutConcurrent/impl=storh-putmany64", unit: "records/s"},
	{what: "group commit, 64 goroutines (records per commit)", num: "BenchmarkPutConcurrent/impl=storh-64g", unit: "records/commit"},
	{what: "group commit, 64 goroutines (commits/s)", num: "BenchmarkPutConcurrent/impl=storh-64g", unit: "commits/s"},
	{what: "4 goroutines vs 1 goroutine (throughput ratio)", num: "BenchmarkPutConcurrent/impl=storh-4g", den: "BenchmarkPutConcurrent/impl=storh-1g", unit: "records/s"},
	{what: "64 goroutines vs bolt db.Batch, 64 goroutines (throughput ratio)", num: "BenchmarkPutConcurrent/impl=storh-64g", den: "BenchmarkPutConcurrent/impl=bolt-batch-64g", unit: "records/s", op: ">=", limit: 10},
	{what: "PutMany vs raw bulk load, {n} (throughput ratio)", num: "BenchmarkBulk/{n}/impl=storh-putmany", den: "BenchmarkBulk/{n}/impl=bolt", unit: "records/s", op: ">=", limit: 0.9},
	{what: "PutStream vs raw bulk load, {n} (throughput ratio)", num: "BenchmarkBulk/{n}/impl=storh-putstream", den: "BenchmarkBulk/{n}/impl=bolt", unit: "records/s", op: ">=", limit: 0.9},
	{what: "PutMany bytes on disk per record, {n}", num: "BenchmarkBulk/{n}/impl=storh-putmany", unit: "B/record", op: "<=", limit: 270},
	{what: "PutStream bytes on disk per record, {n}", num: "BenchmarkBulk/{n}/impl=storh-putstream", unit: "B/record", op: "<=", limit: 270},
	{what: "raw bulk load bytes on disk per record, {n}", num: "BenchmarkBulk/{n}/impl=bolt", unit: "B/record"},
	{what: "back-fill: random vs ascending PutWithID, {n} (slow-down)", num: "BenchmarkBackfill/{n}/impl=storh-random", den: "BenchmarkBackfill/{n}/impl=storh-ascending", unit: "ns/op"},
	{what: "back-fill: random-order bytes per record, {n}", num: "BenchmarkBackfill/{n}/impl=storh-random", unit: "B/record"},
	{what: "decoded page of 100 vs raw seek + Unmarshal, {n} (time ratio)", num: "BenchmarkPage/{n}/impl=storh", den: "BenchmarkPage/{n}/impl=bolt", unit: "ns/op", op: "<=", limit: 0.7},
	{what: "decoded small page vs raw seek + Unmarshal, {n} (time ratio, unpaired)", num: "BenchmarkPageSmall/{n}/impl=storh", den: "BenchmarkPageSmall/{n}/impl=bolt", unit: "ns/op"},
	{what: "decoded small page vs raw seek + Unmarshal, {n} (time ratio, paired)", num: "BenchmarkPagePaired/{n}/pair=small-maps-vs-bolt-maps", unit: "ratio", op: "<=", limit: 0.7},
	{what: "typed small page vs raw seek + Unmarshal to maps, {n} (time ratio, paired)", num: "BenchmarkPagePaired/{n}/pair=small-typed-vs-bolt-maps", unit: "ratio", op: "<=", limit: 0.7},
	{what: "typed small page vs raw seek + Unmarshal to structs, {n} (time ratio)", num: "BenchmarkPageSmall/{n}/impl=storh-typed", den: "BenchmarkPageSmall/{n}/impl=bolt-struct", unit: "ns/op"},
	{what: "decoded page of 100, {n} (µs per page)", num: "BenchmarkPage/{n}/impl=storh", unit: "µs"},
	{what: "undecoded page of 100, {n} (µs per page)", num: "BenchmarkPage/{n}/impl=storh-nodecode", unit: "µs"},
	{what: "undecoded page of 100 vs raw seek + 100 × Next, {n} (time ratio)", num: "BenchmarkPage/{n}/impl=storh-nodecode", den: "BenchmarkPage/{n}/impl=bolt-nodecode", unit: "ns/op"},
	{what: "undecoded page of 100 (Stream, owned) vs raw seek + walk + copy, {n} (time ratio, unpaired)", num: "BenchmarkPage/{n}/impl=storh-nodecode", den: "BenchmarkPage/{n}/impl=bolt-copy", unit: "ns/op"},
	{what: "undecoded page of 100 (Stream, owned) vs raw seek + walk + copy, {n} (time ratio, paired)", num: "BenchmarkPagePaired/{n}/pair=nodecode-vs-bolt-copy", unit: "ratio", op: "<=", limit: 1.5},
	{what: "lent page of 100 (ScanRaw) vs raw seek + walk + copy, {n} (time ratio, unpaired)", num: "BenchmarkPage/{n}/impl=storh-lend", den: "BenchmarkPage/{n}/impl=bolt-copy", unit: "ns/op"},
	{what: "lent page of 100 (ScanRaw) vs raw seek + walk + copy, {n} (time ratio, paired)", num: "BenchmarkPagePaired/{n}/pair=lend-vs-bolt-copy", unit: "ratio", op: "<=", limit: 1.5},
	{what: "lent page of 100 (ScanRaw) vs raw seek + walk without copy, {n} (time ratio)", num: "BenchmarkPage/{n}/impl=storh-lend", den: "BenchmarkPage/{n}/impl=bolt-nodecode", unit: "ns/op"},
	{what: "200-record time window vs raw, {n} (time ratio)", num: "BenchmarkTimeWindow/{n}/impl=storh", den: "BenchmarkTimeWindow/{n}/impl=bolt", unit: "ns/op"},
	{what: "200-record time window, {n} (µs per window)", num: "BenchmarkTimeWindow/{n}/impl=storh", unit: "µs"},
	{what: "unindexed WhereEqual vs decode-and-compare, {n} (speed-up)", num: "BenchmarkWhereEqual/{n}/impl=bolt", den: "BenchmarkWhereEqual/{n}/impl=storh", unit: "ns/op", op: ">=", limit: 10},
	{what: "storh.Open + first Get + Close, {n} (ms)", num: "BenchmarkOpenGet/{n}/impl=storh", unit: "ms", op: "<=", limit: 1, sizes: []string{"n=100k", "n=1M"}},
	{what: "storh.Open + first Get + Close, {n} (ms)", num: "BenchmarkOpenGet/{n}/impl=storh", unit: "ms", sizes: []string{"n=10k"}},

	// Reads (read_test.go).
	{what: "point GetRaw (bytes lent), vs raw View + Get, {n} (time ratio)", num: "BenchmarkGet/{n}/impl=storh-lend", den: "BenchmarkGet/{n}/impl=bolt", unit: "ns/op", op: "<=", limit: 1.2},
	{what: "point Get (bytes owned) vs raw View + Get + copy, {n} (time ratio)", num: "BenchmarkGet/{n}/impl=storh", den: "BenchmarkGet/{n}/impl=bolt-copy", unit: "ns/op", op: "<=", limit: 1.2},
	{what: "point Get (bytes owned) vs raw View + Get without the copy, {n} (time ratio)", num: "BenchmarkGet/{n}/impl=storh", den: "BenchmarkGet/{n}/impl=bolt", unit: "ns/op"},
	{what: "point GetRaw allocations vs raw View + Get, {n} (allocs ratio)", num: "BenchmarkGet/{n}/impl=storh-lend", den: "BenchmarkGet/{n}/impl=bolt", unit: "allocs/op"},
	{what: "point Get allocations vs raw View + Get + copy, {n} (allocs ratio)", num: "BenchmarkGet/{n}/impl=storh", den: "BenchmarkGet/{n}/impl=bolt-copy", unit: "allocs/op", op: "<=", limit: 1},
	{what: "Get + Data() vs raw View + Get + copy + Unmarshal, {n} (time ratio)", num: "BenchmarkGetData/{n}/impl=storh", den: "BenchmarkGetData/{n}/impl=bolt", unit: "ns/op", op: "<=", limit: 1.1},
	{what: "full stream, bytes lent (ScanRaw), {n} (records/s)", num: "BenchmarkStream/{n}/impl=storh-lend", unit: "records/s", op: ">=", limit: 10e6, sizes: []string{"n=1M"}},
	{what: "full stream, bytes lent (ScanRaw), {n} (records/s)", num: "BenchmarkStream/{n}/impl=storh-lend", unit: "records/s", except: []string{"n=1M"}},
	{what: "full stream, bytes lent (ScanRaw), {n} (allocs per record)", num: "BenchmarkStream/{n}/impl=storh-lend", unit: "allocs/record", op: "<=", limit: 1},
	{what: "full stream, bytes lent (ScanRaw), {n} (peak anonymous memory, MiB)", num: "BenchmarkStream/{n}/impl=storh-lend", unit: "peak-anon-MiB"},
	{what: "full stream of owned records (Stream), {n} (records/s)", num: "BenchmarkStream/{n}/impl=storh", unit: "records/s"},
	{what: "full stream of owned records (Stream), {n} (allocs per record)", num: "BenchmarkStream/{n}/impl=storh", unit: "allocs/record", op: "<=", limit: 1},
	{what: "full stream of owned records (Stream), {n} (peak anonymous memory, MiB)", num: "BenchmarkStream/{n}/impl=storh", unit: "peak-anon-MiB"},
	{what: "full stream, bytes lent, vs raw cursor walk, {n} (throughput ratio)", num: "BenchmarkStream/{n}/impl=storh-lend", den: "BenchmarkStream/{n}/impl=bolt", unit: "records/s"},

	// Secondary indexes and queries against bolthold (query_test.go).
	{what: "indexed Eq on status (11%), limit 100, vs bolthold, {n} (speed-up)", num: "BenchmarkQueryEq/field=status/{n}/impl=bolthold", den: "BenchmarkQueryEq/field=status/{n}/impl=storh", unit: "ns/op", op: ">=", limit: 10, sizes: []string{"n=100k"}},
	{what: "indexed Eq on status (11%), limit 100, vs bolthold, {n} (speed-up)", num: "BenchmarkQueryEq/field=status/{n}/impl=bolthold", den: "BenchmarkQueryEq/field=status/{n}/impl=storh", unit: "ns/op", sizes: []string{"n=10k", "n=1M"}},
	{what: "indexed Eq on user (0.1%), limit 100, vs bolthold, {n} (speed-up)", num: "BenchmarkQueryEq/field=user/{n}/impl=bolthold", den: "BenchmarkQueryEq/field=user/{n}/impl=storh", unit: "ns/op", op: ">=", limit: 10, sizes: []string{"n=100k"}},
	{what: "indexed Eq on user (0.1%), limit 100, vs bolthold, {n} (speed-up)", num: "BenchmarkQueryEq/field=user/{n}/impl=bolthold", den: "BenchmarkQueryEq/field=user/{n}/impl=storh", unit: "ns/op", sizes: []string{"n=10k", "n=1M"}},
	{what: "indexed Eq on status, limit 100, {n} (µs per query)", num: "BenchmarkQueryEq/field=status/{n}/impl=storh", unit: "µs"},
	{what: "indexed range ordered by it, limit 100, vs bolthold, {n} (speed-up)", num: "BenchmarkQueryRange/{n}/impl=bolthold", den: "BenchmarkQueryRange/{n}/impl=storh", unit: "ns/op", op: ">=", limit: 10},
	{what: "indexed range ordered by it, limit 100, {n} (µs per query)", num: "BenchmarkQueryRange/{n}/impl=storh", unit: "µs"},
	{what: "durable insert of 1000 with 3 indexes vs bolthold, {n} records (speed-up)", num: "BenchmarkIndexedInsert/{n}/impl=bolthold", den: "BenchmarkIndexedInsert/{n}/impl=storh", unit: "ns/record", op: ">=", limit: 5, sizes: []string{"n=100k"}},
	{what: "durable insert of 1000: 1 index vs none, {n} records (time ratio)", num: "BenchmarkIndexedInsert/{n}/impl=storh-idx1", den: "BenchmarkIndexedInsert/{n}/impl=storh-idx0", unit: "ns/record", op: "<=", limit: 1.5, sizes: []string{"n=100k"}},
	{what: "durable insert of 1000: 2 indexes vs 1, {n} records (time ratio)", num: "BenchmarkIndexedInsert/{n}/impl=storh-idx2", den: "BenchmarkIndexedInsert/{n}/impl=storh-idx1", unit: "ns/record", op: "<=", limit: 1.5, sizes: []string{"n=100k"}},
	{what: "durable insert of 1000: 3 indexes vs 2, {n} records (time ratio)", num: "BenchmarkIndexedInsert/{n}/impl=storh", den: "BenchmarkIndexedInsert/{n}/impl=storh-idx2", unit: "ns/record", op: "<=", limit: 1.5, sizes: []string{"n=100k"}},
	{what: "durable insert of 1000: 3 indexes vs none, {n} records (time ratio)", num: "BenchmarkIndexedInsert/{n}/impl=storh", den: "BenchmarkIndexedInsert/{n}/impl=storh-idx0", unit: "ns/record", sizes: []string{"n=100k"}},
	{what: "durable insert of 1000 with 3 indexes, structs vs maps, {n} records (time ratio)", num: "BenchmarkIndexedInsert/{n}/impl=storh-struct", den: "BenchmarkIndexedInsert/{n}/impl=storh", unit: "ns/record", sizes: []string{"n=100k"}},
	{what: "indexed CountMatching of 1% vs the same count by scan, {n} (speed-up)", num: "BenchmarkQueryCount/{n}/impl=storh-scan", den: "BenchmarkQueryCount/{n}/impl=storh", unit: "ns/op", op: ">=", limit: 20, sizes: []string{"n=1M"}},
	{what: "indexed CountMatching of 1% vs the same count by scan, {n} (speed-up)", num: "BenchmarkQueryCount/{n}/impl=storh-scan", den: "BenchmarkQueryCount/{n}/impl=storh", unit: "ns/op", sizes: []string{"n=10k", "n=100k"}},
	{what: "indexed CountMatching of 1% vs bolthold indexed Count, {n} (speed-up)", num: "BenchmarkQueryCount/{n}/impl=bolthold", den: "BenchmarkQueryCount/{n}/impl=storh", unit: "ns/op"},
	{what: "unindexed Field.Eq count vs bolthold decode-every-record Count, {n} (speed-up)", num: "BenchmarkQueryCount/{n}/impl=bolthold-scan", den: "BenchmarkQueryCount/{n}/impl=storh-scan", unit: "ns/op", op: ">=", limit: 10},
	{what: "bytes on disk per index entry, storh, {n}", num: "BenchmarkIndexBytes/{n}/impl=storh", unit: "B/entry"},
	{what: "bytes on disk per index entry, bolthold, {n}", num: "BenchmarkIndexBytes/{n}/impl=bolthold", unit: "B/entry"},
	{what: "bytes per index entry after compaction, storh, {n}", num: "BenchmarkIndexBytes/{n}/impl=storh", unit: "B/entry-compact"},
	{what: "bytes per index entry after compaction, bolthold, {n}", num: "BenchmarkIndexBytes/{n}/impl=bolthold", unit: "B/entry-compact"},

	// Typed collections (typed_test.go).
	{what: "typed page of 100 vs untyped page + Decode, {n} (time ratio)", num: "BenchmarkTypedPage/{n}/impl=typed", den: "BenchmarkTypedPage/{n}/impl=untyped-decode", unit: "ns/op", op: "<=", limit: 1.0},
	{what: "untyped page + Decode vs + msgpack.Unmarshal, {n} (time ratio)", num: "BenchmarkTypedPage/{n}/impl=untyped-decode", den: "BenchmarkTypedPage/{n}/impl=untyped-msgpack", unit: "ns/op"},
	{what: "typed page of 100, {n} (allocs per page)", num: "BenchmarkTypedPage/{n}/impl=typed", unit: "allocs/op"},
	{what: "typed Get vs Get + Decode (time ratio)", num: "BenchmarkTypedGet/impl=typed", den: "BenchmarkTypedGet/impl=untyped-decode", unit: "ns/op"},
	{what: "typed PutMany of 1000 structs vs untyped PutMany (time ratio)", num: "BenchmarkTypedEncode/impl=typed", den: "BenchmarkTypedEncode/impl=untyped", unit: "ns/op"},

	// The durable job queue (queue_test.go); every measured operation fsyncs.
	{what: "queue: durable Enqueue, 1 goroutine (jobs/s)", num: "BenchmarkQueueEnqueue/impl=storh", unit: "jobs/s"},
	{what: "queue: durable Claim + Complete, 1 goroutine (jobs/s)", num: "BenchmarkQueueClaimComplete/impl=storh-1g", unit: "jobs/s"},
	{what: "queue: durable Claim + Complete, 64 goroutines (jobs/s)", num: "BenchmarkQueueClaimComplete/impl=storh-64g", unit: "jobs/s"},
	{what: "queue: Claim + Complete, 64 goroutines vs 1 goroutine (throughput ratio)", num: "BenchmarkQueueClaimComplete/impl=storh-64g", den: "BenchmarkQueueClaimComplete/impl=storh-1g", unit: "jobs/s", op: ">=", limit: 10},
	{what: "queue: durable EnqueueMany of 1000 (jobs/s, 2 × 191k)", num: "BenchmarkQueueEnqueueMany/impl=storh-batch1000", unit: "jobs/s", op: ">=", limit: 382_000},
	{what: "queue: durable EnqueueMany of 1000 vs Docs.PutMany of 1000 (time ratio)", num: "BenchmarkQueueEnqueueMany/impl=storh-batch1000", den: "BenchmarkQueueEnqueueMany/impl=docs-putmany-batch1000", unit: "ns/op"},
	{what: "queue: durable ClaimMany(100) + CompleteMany (jobs/s, 2 × 6.8k)", num: "BenchmarkQueueClaimCompleteMany/impl=storh-batch100", unit: "jobs/s", op: ">=", limit: 13_600},
	// Watch (watch_test.go): the feed's cost to a durable Put, and delivery.
	{what: "Watch: durable Put watched vs unwatched (time ratio)", num: "BenchmarkWatchPut/impl=storh-watched", den: "BenchmarkWatchPut/impl=storh-unwatched", unit: "ns/op", op: "<=", limit: 1.05},
	{what: "Watch: commit to delivery, median (µs)", num: "BenchmarkWatchLatency/impl=storh", unit: "p50-µs"},
	{what: "Watch: commit to delivery, 99th percentile (µs)", num: "BenchmarkWatchLatency/impl=storh", unit: "p99-µs"},
	{what: "retention: DeleteBefore half of 200k, durable batches (records/s)", num: "BenchmarkRetention/n=200k/impl=storh", unit: "records/s"},
	{what: "retention: DeleteBefore half of 2M, durable batches (records/s)", num: "BenchmarkRetention/n=2M/impl=storh", unit: "records/s"},

	// SQLite (sqlite_test.go): go-sqlite3, WAL, synchronous=FULL, WITHOUT
	// ROWID tables on the same records in the same run. storh's time over
	// SQLite's: below 1 storh-go is faster. Information only.
	{what: "durable Put vs SQLite INSERT, 1 goroutine (time ratio)", num: "BenchmarkPutDurable/impl=storh", den: "BenchmarkPutDurable/impl=sqlite", unit: "ns/op"},
	{what: "durable Put, 64 goroutines, vs SQLite INSERT, 64 goroutines (time ratio per record)", num: "BenchmarkPutConcurrent/impl=storh-64g", den: "BenchmarkPutConcurrent/impl=sqlite-64g", unit: "ns/op"},
	{what: "durable Put, 64 goroutines, vs SQLite INSERT, 64 goroutines on one connection (time ratio per record)", num: "BenchmarkPutConcurrent/impl=storh-64g", den: "BenchmarkPutConcurrent/impl=sqlite-64g-1conn", unit: "ns/op"},
	{what: "PutMany vs SQLite, 5000 per transaction, synchronous=FULL, {n} (time ratio)", num: "BenchmarkBulk/{n}/impl=storh-putmany", den: "BenchmarkBulk/{n}/impl=sqlite", unit: "ns/op"},
	{what: "PutMany vs SQLite, 5000 per transaction, synchronous=OFF, {n} (time ratio)", num: "BenchmarkBulk/{n}/impl=storh-putmany", den: "BenchmarkBulk/{n}/impl=sqlite-nosync", unit: "ns/op"},
	{what: "Get + Data() vs SQLite SELECT by id + Unmarshal, {n} (time ratio)", num: "BenchmarkGetData/{n}/impl=storh", den: "BenchmarkGetData/{n}/impl=sqlite", unit: "ns/op"},
	{what: "decoded page of 100 vs SQLite id > ? LIMIT 100 + Unmarshal, {n} (time ratio)", num: "BenchmarkPage/{n}/impl=storh", den: "BenchmarkPage/{n}/impl=sqlite", unit: "ns/op"},
	{what: "200-record time window vs SQLite id BETWEEN, {n} (time ratio)", num: "BenchmarkTimeWindow/{n}/impl=storh", den: "BenchmarkTimeWindow/{n}/impl=sqlite", unit: "ns/op"},
	{what: "unindexed WhereEqual vs SQLite json_extract count, {n} (time ratio)", num: "BenchmarkWhereEqual/{n}/impl=storh", den: "BenchmarkWhereEqual/{n}/impl=sqlite", unit: "ns/op"},
	{what: "indexed Eq on status (11%), limit 100, vs SQLite expression index, {n} (time ratio)", num: "BenchmarkQueryEq/field=status/{n}/impl=storh", den: "BenchmarkQueryEq/field=status/{n}/impl=sqlite", unit: "ns/op"},
	{what: "indexed Eq on user (0.1%), limit 100, vs SQLite expression index, {n} (time ratio)", num: "BenchmarkQueryEq/field=user/{n}/impl=storh", den: "BenchmarkQueryEq/field=user/{n}/impl=sqlite", unit: "ns/op"},
	{what: "indexed range ordered by it, limit 100, vs SQLite expression index, {n} (time ratio)", num: "BenchmarkQueryRange/{n}/impl=storh", den: "BenchmarkQueryRange/{n}/impl=sqlite", unit: "ns/op"},
	{what: "indexed CountMatching of 1% vs SQLite count(*) on the index, {n} (time ratio)", num: "BenchmarkQueryCount/{n}/impl=storh", den: "BenchmarkQueryCount/{n}/impl=sqlite", unit: "ns/op"},
	// Aggregation (aggregate_test.go), issue 30's goal: a count grouped by
	// an indexed path in at most SQLite's time.
	{what: "count per status (Aggregate on the index's entries) vs SQLite GROUP BY on the expression index, {n} (time ratio)", num: "BenchmarkAggregate/agg=count/{n}/impl=storh", den: "BenchmarkAggregate/agg=count/{n}/impl=sqlite", unit: "ns/op", op: "<=", limit: 1.0, sizes: []string{"n=100k", "n=1M"}},
	{what: "count per status (Aggregate on the index's entries) vs SQLite GROUP BY on the expression index, {n} (time ratio)", num: "BenchmarkAggregate/agg=count/{n}/impl=storh", den: "BenchmarkAggregate/agg=count/{n}/impl=sqlite", unit: "ns/op", except: []string{"n=100k", "n=1M"}},
	{what: "unindexed sum per country vs SQLite GROUP BY json_extract, {n} (time ratio)", num: "BenchmarkAggregate/agg=sum/{n}/impl=storh", den: "BenchmarkAggregate/agg=sum/{n}/impl=sqlite", unit: "ns/op"},
}

// flatness targets: the largest size's time over the smallest size's.
var flat = []struct{ what, pattern string }{
	{"decoded page of 100: largest n vs smallest n (time ratio, flat ≤ 1.5)", "BenchmarkPage/{n}/impl=storh"},
	{"200-record time window: largest n vs smallest n (time ratio, flat ≤ 1.5)", "BenchmarkTimeWindow/{n}/impl=storh"},
	{"indexed range ordered by it, limit 100: largest n vs smallest n (time ratio, flat ≤ 1.5)", "BenchmarkQueryRange/{n}/impl=storh"},
	{"indexed Eq on status, limit 100: largest n vs smallest n (time ratio, flat ≤ 1.5)", "BenchmarkQueryEq/field=status/{n}/impl=storh"},
}

// Result is one evaluated target.
type Result struct {
	What   string  `json:"what"`
	Value  float64 `json:"value"`
	Op     string  `json:"op,omitempty"`
	Limit  float64 `json:"limit,omitempty"`
	Status string  `json:"status"` // "met", "not met", "info", "not run"
	Detail string  `json:"detail"`
	// Ratio tells whether Value divides two benchmarks' medians (true) or
	// is one median (false). Reports written before it existed lack it
	// (nil, unknown): see isRatio.
	Ratio *bool `json:"ratio,omitempty"`
}

var sizeRE = regexp.MustCompile(`/(n=[0-9]+[kM]?)/`)

// sizesIn lists the n=… sizes present in the results, smallest first.
func sizesIn(bs []Benchmark) []string {
	seen := map[string]bool{}
	var out []string
	for _, b := range bs {
		if m := sizeRE.FindStringSubmatch(b.Name); m != nil && !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	sort.Slice(out, func(i, j int) bool { return sizeValue(out[i]) < sizeValue(out[j]) })
	return out
}

func sizeValue(s string) float64 {
	s = strings.TrimPrefix(s, "n=")
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, strings.TrimSuffix(s, "M")
	}
	v, _ := strconv.ParseFloat(s, 64)
	return v * mult
}

func evaluate(bs []Benchmark) []Result {
	med := map[string]map[string]float64{}
	for _, b := range bs {
		med[b.Name] = b.Median
	}
	// lookup returns a median; µs and ms are ns/op converted.
	lookup := func(name, unit string) (float64, bool) {
		m, ok := med[name]
		if !ok {
			return 0, false
		}
		switch unit {
		case "µs":
			v, ok := m["ns/op"]
			return v / 1e3, ok
		case "ms":
			v, ok := m["ns/op"]
			return v / 1e6, ok
		}
		v, ok := m[unit]
		return v, ok
	}
	sizes := sizesIn(bs)
	var out []Result
	for _, t := range targets {
		expand := []string{""}
		if strings.Contains(t.num, "{n}") {
			expand = sizes
			if t.sizes != nil {
				expand = slices.DeleteFunc(slices.Clone(t.sizes), func(s string) bool { return !slices.Contains(sizes, s) })
			}
			expand = slices.DeleteFunc(slices.Clone(expand), func(s string) bool { return slices.Contains(t.except, s) })
		}
		for _, n := range expand {
			sub := func(s string) string { return strings.ReplaceAll(s, "{n}", n) }
			r := Result{What: sub(t.what), Op: t.op, Limit: t.limit, Ratio: boolPtr(t.den != "" || t.unit == "ratio")}
			num, okNum := lookup(sub(t.num), t.unit)
			if t.den == "" {
				r.Value = num
				r.Detail = fmt.Sprintf("%s %s", fmtNum(num), t.unit)
				if !okNum {
					r.Status, r.Detail = "not run", sub(t.num)
				}
			} else {
				den, okDen := lookup(sub(t.den), t.unit)
				if !okNum || !okDen || den == 0 {
					r.Status, r.Detail = "not run", sub(t.num)+" / "+sub(t.den)
					out = append(out, r)
					continue
				}
				r.Value = num / den
				r.Detail = fmt.Sprintf("%s / %s %s", fmtNum(num), fmtNum(den), t.unit)
				if t.scale != 0 {
					r.Value /= t.scale
					r.Detail += fmt.Sprintf(" / %s", fmtNum(t.scale))
				}
				if t.capBy != "" {
					capV, okCap := lookup(sub(t.capBy), t.unit)
					if !okCap || capV == 0 {
						r.Status, r.Detail = "not run", sub(t.capBy)
						out = append(out, r)
						continue
					}
					ceiling := den * max(t.scale, 1)
					if capV < ceiling {
						ceiling = capV
					}
					r.Value = num / ceiling
					r.Detail = fmt.Sprintf("%s / min(%s × %g, %s) %s", fmtNum(num), fmtNum(den), max(t.scale, 1), fmtNum(capV), t.unit)
				}
			}
			if r.Status == "" {
				r.Status = judge(r.Value, t.op, t.limit)
			}
			out = append(out, r)
		}
	}
	for _, f := range flat {
		r := Result{What: f.what, Op: "<=", Limit: 1.5, Ratio: boolPtr(true)}
		// The sizes this benchmark ran at: others (BenchmarkRetention's
		// n=2M) may be larger.
		var ran []string
		for _, n := range sizes {
			if _, ok := med[strings.ReplaceAll(f.pattern, "{n}", n)]; ok {
				ran = append(ran, n)
			}
		}
		if len(ran) < 2 {
			r.Status = "not run"
			out = append(out, r)
			continue
		}
		lo, hi := ran[0], ran[len(ran)-1]
		a, okA := lookup(strings.ReplaceAll(f.pattern, "{n}", lo), "ns/op")
		z, okZ := lookup(strings.ReplaceAll(f.pattern, "{n}", hi), "ns/op")
		if !okA || !okZ || a == 0 {
			r.Status = "not run"
			out = append(out, r)
			continue
		}
		r.Value = z / a
		r.Detail = fmt.Sprintf("%s: %s µs, %s: %s µs", hi, fmtNum(z/1e3), lo, fmtNum(a/1e3))
		r.Status = judge(r.Value, r.Op, r.Limit)
		out = append(out, r)
	}
	return out
}

func boolPtr(b bool) *bool { return &b }

func judge(v float64, op string, limit float64) string {
	switch op {
	case ">=":
		if v >= limit {
			return "met"
		}
		return "not met"
	case "<=":
		if v <= limit {
			return "met"
		}
		return "not met"
	case "<":
		if v < limit {
			return "met"
		}
		return "not met"
	}
	return "info"
}

func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 1e6:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// ---------------------------------------------------------------------------
// Output.

func markdown(r Report, charts []chartLink) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# storh-go benchmark report %s\n\n", r.Stamp)
	fmt.Fprintf(&b, "Command (in bench/): `%s`\n\n", r.Command)
	m := r.Machine
	fmt.Fprintf(&b, "Machine: %s, %d cores", m.CPU, m.Cores)
	if m.MemTotal != "" {
		fmt.Fprintf(&b, ", %s RAM", m.MemTotal)
	}
	fmt.Fprintf(&b, "; %s/%s", m.GOOS, m.GOARCH)
	if m.Kernel != "" {
		fmt.Fprintf(&b, ", Linux %s", m.Kernel)
	}
	fmt.Fprintf(&b, "; %s.", m.GoVersion)
	if m.LoadBefore != "" {
		fmt.Fprintf(&b, " Load average before / after: %s / %s.", m.LoadBefore, m.LoadAfter)
	}
	fmt.Fprintf(&b, " Started %s, took %d s.\n\n", m.StartedUTC, m.DurationSec)
	if busy(m.LoadBefore, m.Cores) || busy(m.LoadAfter, m.Cores) {
		b.WriteString("**Warning:** the load average exceeded the number of cores: other processes " +
			"competed for the CPU during the run, so the numbers (and ratios between benchmarks " +
			"measured at different moments) are unreliable.\n\n")
	}

	b.WriteString("## Targets\n\nRatios are of medians from this one run.\n\n")
	b.WriteString("| Target | Measured | Limit | Result | Medians |\n|---|---:|---:|---|---|\n")
	for _, x := range r.Ratios {
		limit := ""
		if x.Op != "" {
			limit = x.Op + " " + fmtNum(x.Limit)
		}
		val := fmtNum(x.Value)
		if x.Status == "not run" {
			val = "–"
		}
		status := x.Status
		if status == "not met" {
			status = "**not met**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", x.What, val, limit, status, x.Detail)
	}
	if len(charts) > 0 {
		b.WriteString("\n## Charts\n\nMedians of this run. The targets chart shows measured/limit for ≥ targets and " +
			"limit/measured for ≤ targets, so that 1 is the target and more is better; targets with a limit of 0 " +
			"are only in the table above.\n\n")
		for _, c := range charts {
			fmt.Fprintf(&b, "![%s](%s)\n\n", c.Title, c.Path)
		}
	}
	if r.Benchstat != "" {
		b.WriteString("\n## benchstat\n\n`benchstat -table .name -col /impl`: one table per benchmark, " +
			"deltas against the first column.\n\n```\n")
		b.WriteString(strings.TrimRight(r.Benchstat, "\n"))
		b.WriteString("\n```\n")
	} else {
		b.WriteString("\n## Medians\n\n(benchstat was not run.)\n\n| Benchmark | ns/op | B/op | allocs/op | other |\n|---|---:|---:|---:|---|\n")
		for _, x := range r.Benchmarks {
			var other []string
			for u, v := range x.Median {
				switch u {
				case "ns/op", "B/op", "allocs/op", "iterations":
				default:
					other = append(other, fmtNum(v)+" "+u)
				}
			}
			sort.Strings(other)
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", x.Name, fmtNum(x.Median["ns/op"]),
				fmtNum(x.Median["B/op"]), fmtNum(x.Median["allocs/op"]), strings.Join(other, ", "))
		}
	}
	return b.String()
}

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version()}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		m.GoVersion = strings.TrimPrefix(strings.TrimSpace(string(out)), "go version ")
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				m.MemTotal = fmt.Sprintf("%.0f GiB", kb/(1<<20))
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	return m
}

// busy reports whether a one-minute load average exceeds the core count.
func busy(load string, cores int) bool {
	f := strings.Fields(load)
	if len(f) == 0 || cores == 0 {
		return false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return err == nil && v > float64(cores)
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " ^$*?|()[]{}'\"\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
