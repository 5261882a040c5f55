package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/storhdb/storh-go/bench
cpu: Test CPU 9000
BenchmarkUUIDNew/impl=storh-2         	 1000	       100.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkUUIDNew/impl=storh-2         	 1000	       120.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkUUIDNew/impl=storh-2         	 1000	       110.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkUUIDNew/impl=google-2        	 1000	       300.0 ns/op	      16 B/op	       1 allocs/op
BenchmarkUUIDNew/impl=google-2        	 1000	       200.0 ns/op	      16 B/op	       1 allocs/op
BenchmarkUUIDNew/impl=google-2        	 1000	       250.0 ns/op	      16 B/op	       1 allocs/op
BenchmarkPutConcurrent/impl=storh-64g-2 	 500	 10000 ns/op	 100000 records/s	 10 B/op	 1 allocs/op
BenchmarkPutConcurrent/impl=storh-1g-2  	 500	 100000 ns/op	 10000 records/s	 10 B/op	 1 allocs/op
BenchmarkPage/n=10k/impl=storh-2  	 500	 200000 ns/op
BenchmarkPage/n=10k/impl=bolt-2   	 500	 190000 ns/op
BenchmarkPage/n=100k/impl=storh-2 	 500	 260000 ns/op
BenchmarkPage/n=100k/impl=bolt-2  	 500	 200000 ns/op
--- some noise line
PASS
`

func TestParse(t *testing.T) {
	bs, cpu := parse([]byte(sample))
	if cpu != "Test CPU 9000" {
		t.Errorf("cpu = %q", cpu)
	}
	if len(bs) != 8 {
		t.Fatalf("%d benchmarks, want 8: %+v", len(bs), bs)
	}
	b := bs[0]
	if b.Name != "BenchmarkUUIDNew/impl=storh" || len(b.Runs) != 3 {
		t.Fatalf("first benchmark = %s with %d runs", b.Name, len(b.Runs))
	}
	if got := b.Median["ns/op"]; got != 110 {
		t.Errorf("median ns/op = %v, want 110", got)
	}
	// The -2 suffix is stripped, but "-64g" and "-1g" in the names stay.
	if bs[2].Name != "BenchmarkPutConcurrent/impl=storh-64g" || bs[3].Name != "BenchmarkPutConcurrent/impl=storh-1g" {
		t.Errorf("names = %s, %s", bs[2].Name, bs[3].Name)
	}
	if got := bs[2].Median["records/s"]; got != 100000 {
		t.Errorf("records/s = %v", got)
	}
}

func TestParseWithoutProcsSuffix(t *testing.T) {
	// GOMAXPROCS=1: go test adds no suffix, and names must not be cut.
	bs, _ := parse([]byte("BenchmarkPutConcurrent/impl=storh-64g \t 10 \t 5 ns/op\nBenchmarkX/impl=a \t 10 \t 5 ns/op\n"))
	if len(bs) != 2 || bs[0].Name != "BenchmarkPutConcurrent/impl=storh-64g" {
		t.Fatalf("got %+v", bs)
	}
}

func TestMedianEven(t *testing.T) {
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Fatalf("median = %v, want 2.5", got)
	}
}

func TestEvaluate(t *testing.T) {
	bs, _ := parse([]byte(sample))
	results := map[string]Result{}
	for _, r := range evaluate(bs) {
		results[r.What] = r
	}
	check := func(what, status string, value float64) {
		t.Helper()
		r, ok := results[what]
		if !ok {
			t.Fatalf("no result %q", what)
		}
		if r.Status != status {
			t.Errorf("%s: status %q, want %q (%+v)", what, r.Status, status, r)
		}
		if status != "not run" && (r.Value < value*0.999 || r.Value > value*1.001) {
			t.Errorf("%s: value %v, want %v", what, r.Value, value)
		}
	}
	check("uuidv7.New vs google NewV7 (speed-up)", "met", 250.0/110)
	check("uuidv7.New allocs/op", "met", 0)
	check("64 goroutines vs 1 goroutine (throughput ratio)", "not met", 10)
	check("64 goroutines vs 64 × 1 goroutine, uncapped (fraction)", "info", 10.0/64)
	check("64 goroutines vs their ceiling, min(64 × 1 goroutine, commits of 64) (fraction)", "not run", 0)
	check("decoded page of 100 vs raw seek + Unmarshal, n=10k (time ratio)", "not met", 200000.0/190000)
	check("decoded page of 100 vs raw seek + Unmarshal, n=100k (time ratio)", "not met", 1.3)
	check("decoded page of 100: largest n vs smallest n (time ratio, flat ≤ 1.5)", "met", 1.3)
	check("durable Put vs bolt.Update (throughput ratio)", "not run", 0)
	if _, ok := results["storh.Open + first Get + Close, n=1M (ms)"]; ok {
		t.Error("a target for a size that was not run was expanded")
	}
}

func TestSizesOrder(t *testing.T) {
	bs := []Benchmark{{Name: "BenchmarkA/n=1M/impl=x"}, {Name: "BenchmarkA/n=10k/impl=x"}, {Name: "BenchmarkA/n=100k/impl=x"}}
	if got := strings.Join(sizesIn(bs), ","); got != "n=10k,n=100k,n=1M" {
		t.Fatalf("sizes = %s", got)
	}
}

func TestMarkdownMarksMisses(t *testing.T) {
	bs, _ := parse([]byte(sample))
	md := markdown(Report{Stamp: "x", Benchmarks: bs, Ratios: evaluate(bs)}, nil)
	for _, want := range []string{"| 64 goroutines vs 1 goroutine (throughput ratio) | 10.0 | >= 15.0 | **not met** |", "## Medians"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestBusy(t *testing.T) {
	for _, c := range []struct {
		load  string
		cores int
		want  bool
	}{{"0.50 1.00 1.00", 2, false}, {"2.01 0.1 0.1", 2, true}, {"", 2, false}, {"junk", 2, false}} {
		if got := busy(c.load, c.cores); got != c.want {
			t.Errorf("busy(%q, %d) = %v, want %v", c.load, c.cores, got, c.want)
		}
	}
}

const querySample = `BenchmarkQueryEq/field=status/n=10k/impl=storh-2    	 100	 400000 ns/op
BenchmarkQueryEq/field=status/n=10k/impl=bolthold-2 	 100	 8000000 ns/op
BenchmarkQueryEq/field=status/n=100k/impl=storh-2   	 100	 500000 ns/op
BenchmarkQueryEq/field=status/n=100k/impl=bolthold-2	 100	 4000000 ns/op
BenchmarkIndexedInsert/n=100k/impl=storh-2          	 1	 6000000000 ns/op	 30000 ns/record
BenchmarkIndexedInsert/n=100k/impl=storh-idx0-2     	 1	 1000000000 ns/op	 10000 ns/record
BenchmarkIndexedInsert/n=100k/impl=storh-idx1-2     	 1	 2400000000 ns/op	 12000 ns/record
BenchmarkIndexedInsert/n=100k/impl=storh-idx2-2     	 1	 4000000000 ns/op	 20000 ns/record
BenchmarkIndexedInsert/n=100k/impl=bolthold-2       	 1	 3000000000 ns/op	 3000000 ns/record
BenchmarkIndexBytes/n=100k/impl=storh-2             	 1000	 50000 ns/op	 104.5 B/entry	 230 B/record
`

// TestEvaluateQueryTargets: sizes inside longer names, targets judged at
// one size and informative at the others, and the per-index insert steps.
func TestEvaluateQueryTargets(t *testing.T) {
	bs, _ := parse([]byte(querySample))
	results := map[string][]Result{}
	for _, r := range evaluate(bs) {
		results[r.What] = append(results[r.What], r)
	}
	check := func(what, status string, value float64) {
		t.Helper()
		rs := results[what]
		if len(rs) != 1 {
			t.Fatalf("%d results %q", len(rs), what)
		}
		if r := rs[0]; r.Status != status || r.Value < value*0.999 || r.Value > value*1.001 {
			t.Errorf("%s: %s %v, want %s %v", what, r.Status, r.Value, status, value)
		}
	}
	check("indexed Eq on status (11%), limit 100, vs bolthold, n=100k (speed-up)", "not met", 8)
	check("indexed Eq on status (11%), limit 100, vs bolthold, n=10k (speed-up)", "info", 20)
	check("indexed Eq on status, limit 100: largest n vs smallest n (time ratio, flat ≤ 1.5)", "met", 1.25)
	check("durable insert of 1000 with 3 indexes vs bolthold, n=100k records (speed-up)", "met", 100)
	check("durable insert of 1000: 1 index vs none, n=100k records (time ratio)", "met", 1.2)
	check("durable insert of 1000: 2 indexes vs 1, n=100k records (time ratio)", "not met", 20.0/12)
	check("durable insert of 1000: 3 indexes vs 2, n=100k records (time ratio)", "met", 1.5)
	check("bytes on disk per index entry, storh, n=100k", "info", 104.5)
	if rs := results["indexed CountMatching of 1% vs the same count by scan, n=1M (speed-up)"]; len(rs) != 0 {
		t.Errorf("a target for a size that was not run was expanded: %+v", rs)
	}
}

// chartSample has BenchmarkPage at three sizes (four implementations),
// BenchmarkGet at two, BenchmarkTimeWindow at one (no chart) and nothing
// of the query charts.
const chartSample = `cpu: Test CPU 9000
BenchmarkPage/n=10k/impl=storh-2           	 500	 20000 ns/op
BenchmarkPage/n=10k/impl=storh-nodecode-2  	 500	 5000 ns/op
BenchmarkPage/n=10k/impl=bolt-2            	 500	 30000 ns/op
BenchmarkPage/n=10k/impl=bolt-copy-2       	 500	 4000 ns/op
BenchmarkPage/n=100k/impl=storh-2          	 500	 21000 ns/op
BenchmarkPage/n=100k/impl=storh-nodecode-2 	 500	 5200 ns/op
BenchmarkPage/n=100k/impl=bolt-2           	 500	 31000 ns/op
BenchmarkPage/n=100k/impl=bolt-copy-2      	 500	 4100 ns/op
BenchmarkPage/n=1M/impl=storh-2            	 500	 23000 ns/op
BenchmarkPage/n=1M/impl=bolt-2             	 500	 35000 ns/op
BenchmarkPagePaired/n=10k/pair=nodecode-vs-bolt-copy-2 	 500	 30000 ns/op	 1.4 ratio	 12500 raw-ns/page	 17500 storh-ns/page
BenchmarkPagePaired/n=10k/pair=small-maps-vs-bolt-maps-2 	 500	 30000 ns/op	 0.75 ratio	 12500 raw-ns/page	 17500 storh-ns/page
BenchmarkGet/n=10k/impl=storh-2            	 500	 300 ns/op	 48 B/op	 1 allocs/op
BenchmarkGet/n=10k/impl=bolt-2             	 500	 280 ns/op	 0 B/op	 0 allocs/op
BenchmarkGet/n=10k/impl=bolt-copy-2        	 500	 310 ns/op	 48 B/op	 1 allocs/op
BenchmarkGet/n=100k/impl=storh-2           	 500	 400 ns/op	 48 B/op	 1 allocs/op
BenchmarkGet/n=100k/impl=bolt-2            	 500	 350 ns/op	 0 B/op	 0 allocs/op
BenchmarkGet/n=100k/impl=bolt-copy-2       	 500	 380 ns/op	 48 B/op	 1 allocs/op
BenchmarkTimeWindow/n=10k/impl=storh-2     	 500	 9000 ns/op
BenchmarkTimeWindow/n=10k/impl=bolt-2      	 500	 9500 ns/op
BenchmarkUUIDNew/impl=storh-2              	 1000	 100.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkUUIDNew/impl=google-2             	 1000	 250.0 ns/op	 16 B/op	 1 allocs/op
BenchmarkPutConcurrent/impl=storh-64g-2    	 50	 10000 ns/op	 500000 records/s	 40 records/commit	 12500 commits/s
BenchmarkPutConcurrent/impl=storh-4g-2     	 50	 10000 ns/op	 35000 records/s
BenchmarkPutConcurrent/impl=storh-1g-2     	 50	 10000 ns/op	 10000 records/s
BenchmarkPutConcurrent/impl=storh-putmany64-2	 50	 10000 ns/op	 600000 records/s
BenchmarkStream/n=10k/impl=storh-lend-2    	 5	 1000000 ns/op	 12000000 records/s	 0.01 allocs/record	 3.5 peak-anon-MiB
BenchmarkStream/n=10k/impl=storh-2         	 5	 1000000 ns/op	 6000000 records/s	 0.1 allocs/record	 3.5 peak-anon-MiB
BenchmarkStream/n=10k/impl=bolt-2          	 5	 1000000 ns/op	 15000000 records/s
BenchmarkStream/n=1M/impl=storh-lend-2     	 5	 1000000 ns/op	 9000000 records/s	 0.01 allocs/record	 3.5 peak-anon-MiB
`

// wellFormedSVG fails the test unless data parses as XML with an <svg>
// root element.
func wellFormedSVG(t *testing.T, name string, data []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", name, err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root element %q, want svg", name, root)
	}
}

func TestCharts(t *testing.T) {
	bs, _ := parse([]byte(chartSample))
	rep := Report{Benchmarks: bs, Ratios: evaluate(bs)}
	files, svgs, err := charts(rep)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
		wellFormedSVG(t, f.Name, svgs[f.Name])
	}
	// scale-window.svg has one size and the query charts none: skipped.
	if got, want := strings.Join(names, ","), "scale-page.svg,scale-get.svg,ratios.svg"; got != want {
		t.Fatalf("charts %s, want %s", got, want)
	}
	for name, wants := range map[string][]string{
		"scale-page.svg": {"storh-go, decoded", "raw bbolt seek + msgpack.Unmarshal", "storh-go, not decoded", "raw bbolt, copied, not decoded", "10k", "100k", "1M", "µs per operation"},
		"scale-get.svg":  {"storh-go Get", "raw bbolt View + Get", "raw bbolt View + Get + copy"},
		"ratios.svg": {"target", "uuidv7.New vs google NewV7", "64 goroutines vs their ceiling",
			"point Get (bytes owned) vs raw View + Get + copy, n=10k", "full stream, bytes lent (ScanRaw), n=1M"},
	} {
		svg := html.UnescapeString(string(svgs[name]))
		for _, w := range wants {
			if !strings.Contains(svg, w) {
				t.Errorf("%s lacks %q", name, w)
			}
		}
	}
	ratios := html.UnescapeString(string(svgs["ratios.svg"]))
	// Limit 0 (allocation counts) cannot be scaled, and info results and
	// targets not run have no bar.
	for _, absent := range []string{"uuidv7.New allocs/op", "(speed-up)", "raw bulk load", "durable Put vs bolt.Update"} {
		if strings.Contains(ratios, absent) {
			t.Errorf("ratios.svg has %q", absent)
		}
	}
}

func TestChartSkippedWithOneSize(t *testing.T) {
	bs, _ := parse([]byte("BenchmarkTimeWindow/n=10k/impl=storh-2 \t 10 \t 9000 ns/op\nBenchmarkTimeWindow/n=10k/impl=bolt-2 \t 10 \t 9500 ns/op\n"))
	files, _, err := charts(Report{Benchmarks: bs, Ratios: evaluate(bs)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasPrefix(f.Name, "scale-") {
			t.Errorf("chart %s drawn from one size", f.Name)
		}
	}
}

func TestScore(t *testing.T) {
	for _, c := range []struct {
		r    Result
		want float64
		ok   bool
	}{
		{Result{Op: ">=", Limit: 10, Value: 20, Status: "met"}, 2, true},
		{Result{Op: "<=", Limit: 1.5, Value: 3, Status: "not met"}, 0.5, true},
		{Result{Op: "<=", Limit: 0, Value: 0, Status: "met"}, 0, false},
		{Result{Op: "", Value: 3, Status: "info"}, 0, false},
		{Result{Op: ">=", Limit: 1, Status: "not run"}, 0, false},
		{Result{Op: "<=", Limit: 1, Value: 0, Status: "met"}, 0, false},
	} {
		got, ok := score(c.r)
		if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("score(%+v) = %v, %v; want %v, %v", c.r, got, ok, c.want, c.ok)
		}
	}
}

func TestRunWritesChartsAndSmokeSkipsBenchstat(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte(chartSample), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	docs := filepath.Join(dir, "docs", "images")
	c := config{out: out, input: in, smoke: true, benchstat: "benchstat-that-must-not-run", charts: docs, localCharts: true}
	if err := run(c); err != nil {
		t.Fatal(err)
	}
	mds, _ := filepath.Glob(filepath.Join(out, "report-*.md"))
	jsons, _ := filepath.Glob(filepath.Join(out, "report-*.json"))
	stats, _ := filepath.Glob(filepath.Join(out, "benchstat-*"))
	local, _ := filepath.Glob(filepath.Join(out, "charts-*", "*.svg"))
	stable, _ := filepath.Glob(filepath.Join(docs, "*.svg"))
	if len(mds) != 1 || len(jsons) != 1 || len(stats) != 0 || len(local) != 3 || len(stable) != 3 {
		t.Fatalf("md %v json %v benchstat %v local charts %v stable charts %v", mds, jsons, stats, local, stable)
	}
	md, _ := os.ReadFile(mds[0])
	stamp := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(mds[0]), "report-"), ".md")
	if want := "](charts-" + stamp + "/scale-page.svg)"; !strings.Contains(string(md), want) {
		t.Errorf("report does not embed %s:\n%s", want, md)
	}
	if _, err := os.Stat(filepath.Join(docs, "ratios.svg")); err != nil {
		t.Error(err)
	}

	// Only into -charts: the report links there.
	out2 := filepath.Join(dir, "out2")
	c = config{out: out2, input: in, charts: docs}
	if err := run(c); err != nil {
		t.Fatal(err)
	}
	mds, _ = filepath.Glob(filepath.Join(out2, "report-*.md"))
	md, _ = os.ReadFile(mds[0])
	if !strings.Contains(string(md), "](../docs/images/scale-get.svg)") {
		t.Errorf("report does not link to -charts:\n%s", md)
	}
	if local, _ := filepath.Glob(filepath.Join(out2, "charts-*")); len(local) != 0 {
		t.Errorf("local charts written: %v", local)
	}
}

func TestGoTestCommand(t *testing.T) {
	base := config{bench: ".", count: 5, benchtime: "2s", timeout: "3h"}
	args, env := goTestCommand(base)
	if got := strings.Join(args, " "); got != "test -run ^$ -bench . -count 5 -timeout 3h -benchtime 2s ./..." || len(env) != 0 {
		t.Errorf("normal: %s, env %v", got, env)
	}
	smoke := base
	smoke.smoke = true
	args, env = goTestCommand(smoke)
	if got := strings.Join(args, " "); got != "test -run ^$ -bench . -count 1 -timeout 3h -benchtime 1x ./..." {
		t.Errorf("smoke args: %s", got)
	}
	if strings.Join(env, " ") != "STORH_BENCH_SMOKE=1" {
		t.Errorf("smoke env: %v", env)
	}
	large := base
	large.large = true
	if _, env = goTestCommand(large); strings.Join(env, " ") != "STORH_BENCH_LARGE=1" {
		t.Errorf("large env: %v", env)
	}
}

func TestEvaluateNewTargets(t *testing.T) {
	bs, _ := parse([]byte(chartSample))
	results := map[string]Result{}
	for _, r := range evaluate(bs) {
		results[r.What] = r
	}
	check := func(what, status string, value float64, ratio bool) {
		t.Helper()
		r, ok := results[what]
		if !ok {
			t.Fatalf("no result %q", what)
		}
		if r.Status != status || math.Abs(r.Value-value) > 1e-9*math.Max(1, math.Abs(value)) {
			t.Errorf("%s: %s %v, want %s %v (%s)", what, r.Status, r.Value, status, value, r.Detail)
		}
		if r.Ratio == nil || *r.Ratio != ratio {
			t.Errorf("%s: ratio %v, want %v", what, r.Ratio, ratio)
		}
	}
	check("64 goroutines vs their ceiling, min(64 × 1 goroutine, commits of 64) (fraction)", "met", 500000.0/600000, true)
	check("64 goroutines vs 64 × 1 goroutine, uncapped (fraction)", "info", 50.0/64, true)
	check("group commit, 64 goroutines (records per commit)", "info", 40, false)
	check("group commit, 64 goroutines (commits/s)", "info", 12500, false)
	check("4 goroutines vs 1 goroutine (throughput ratio)", "info", 3.5, true)
	check("point Get (bytes owned) vs raw View + Get without the copy, n=10k (time ratio)", "info", 300.0/280, true)
	check("point Get allocations vs raw View + Get + copy, n=100k (allocs ratio)", "met", 1, true)
	check("decoded page of 100 vs raw seek + Unmarshal, n=1M (time ratio)", "met", 23000.0/35000, true)
	check("undecoded page of 100 (Stream, owned) vs raw seek + walk + copy, n=10k (time ratio, unpaired)", "info", 1.25, true)
	check("undecoded page of 100 (Stream, owned) vs raw seek + walk + copy, n=10k (time ratio, paired)", "met", 1.4, true)
	check("decoded small page vs raw seek + Unmarshal, n=10k (time ratio, paired)", "not met", 0.75, true)
	check("full stream, bytes lent (ScanRaw), n=1M (records/s)", "not met", 9e6, false)
	check("full stream, bytes lent (ScanRaw), n=10k (records/s)", "info", 12e6, false)
	check("full stream, bytes lent (ScanRaw), n=10k (allocs per record)", "met", 0.01, false)
	check("full stream of owned records (Stream), n=10k (allocs per record)", "met", 0.1, false)
	check("full stream, bytes lent, vs raw cursor walk, n=10k (throughput ratio)", "info", 0.8, true)
	if r := results["lent page of 100 (ScanRaw) vs raw seek + walk without copy, n=10k (time ratio)"]; r.Status != "not run" {
		t.Errorf("lent page: %+v", r)
	}
	if d := results["64 goroutines vs 64 × 1 goroutine, uncapped (fraction)"].Detail; !strings.Contains(d, " / 64") {
		t.Errorf("scaled detail: %s", d)
	}
	if d := results["64 goroutines vs their ceiling, min(64 × 1 goroutine, commits of 64) (fraction)"].Detail; !strings.Contains(d, "min(10000 × 64, 600000)") {
		t.Errorf("capped detail: %s", d)
	}
}

// runs builds a benchmark with the given ns/op runs.
func runs(name string, ns ...float64) Benchmark {
	b := Benchmark{Name: name, Median: map[string]float64{"ns/op": median(ns), "allocs/op": 2}}
	for _, v := range ns {
		b.Runs = append(b.Runs, map[string]float64{"ns/op": v, "allocs/op": 2, "iterations": 100})
	}
	return b
}

func TestCompare(t *testing.T) {
	oldR := Report{Stamp: "old", Benchmarks: []Benchmark{
		runs("BenchmarkA/impl=storh", 100, 101, 102, 103, 104),
		runs("BenchmarkB/impl=storh", 100, 110, 90, 105, 95),
		runs("BenchmarkOnlyOld/impl=storh", 1, 2, 3),
	}, Ratios: []Result{{What: "r1", Value: 2, Op: ">=", Limit: 1.5, Status: "met", Detail: "2 / 1 ns/op"}}}
	newR := Report{Stamp: "new", Benchmarks: []Benchmark{
		runs("BenchmarkA/impl=storh", 200, 201, 202, 203, 204),
		runs("BenchmarkB/impl=storh", 101, 108, 92, 104, 96),
		runs("BenchmarkOnlyNew/impl=storh", 1, 2, 3),
	}, Ratios: []Result{{What: "r1", Value: 1, Op: ">=", Limit: 1.5, Status: "not met", Detail: "1 / 1 ns/op"}}}
	var buf bytes.Buffer
	compare(&buf, oldR, newR, 0.05)
	out := buf.String()
	line := func(prefix, unit string) string {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == prefix && f[1] == unit {
				return l
			}
		}
		t.Fatalf("no %s %s line in:\n%s", prefix, unit, out)
		return ""
	}
	if l := line("BenchmarkA/impl=storh", "ns/op"); !strings.Contains(l, "+98.04%") || !strings.Contains(l, "(p=0.008 n=5)") {
		t.Errorf("significant change not marked: %q", l)
	}
	if l := line("BenchmarkB/impl=storh", "ns/op"); !strings.Contains(l, " ~ ") || !strings.Contains(l, "n=5)") {
		t.Errorf("noise not marked ~: %q", l)
	}
	if l := line("BenchmarkA/impl=storh", "allocs/op"); !strings.Contains(l, " ~ ") {
		t.Errorf("equal allocs not ~: %q", l)
	}
	if strings.Contains(out, "OnlyOld") || strings.Contains(out, "OnlyNew") || strings.Contains(out, "iterations") {
		t.Errorf("compared a benchmark not in both, or iterations:\n%s", out)
	}
	if l := line("r1", ">="); !strings.Contains(l, "-50.00%") || !strings.Contains(l, "met → not met") {
		t.Errorf("ratio line: %q", l)
	}
}

func TestGate(t *testing.T) {
	ratio := func(what, op string, limit, v float64) Result {
		r := Result{What: what, Op: op, Limit: limit, Value: v, Status: judge(v, op, limit), Ratio: boolPtr(true),
			Detail: "1 / 1 ns/op"}
		return r
	}
	cases := []struct {
		name     string
		op       string
		old, new float64
		fail     bool
	}{
		{">= within threshold", ">=", 10, 9.2, false},
		{">= past threshold", ">=", 10, 8.5, true},
		{">= improved a lot", ">=", 10, 30, false},
		{"<= within threshold", "<=", 1.0, 1.08, false},
		{"<= past threshold", "<=", 1.0, 1.15, true},
		{"<= improved a lot", "<=", 1.0, 0.3, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			oldR := Report{Ratios: []Result{ratio("x", c.op, 5, c.old)}}
			newR := Report{Ratios: []Result{ratio("x", c.op, 5, c.new)}}
			var buf bytes.Buffer
			err := gate(&buf, oldR, newR, 0.10)
			if (err != nil) != c.fail {
				t.Fatalf("gate error %v, want failure %v:\n%s", err, c.fail, buf.String())
			}
			if c.fail && !strings.Contains(buf.String(), "REGRESSED") {
				t.Errorf("no REGRESSED in:\n%s", buf.String())
			}
			if !strings.Contains(buf.String(), "1 ratio targets checked") {
				t.Errorf("table:\n%s", buf.String())
			}
		})
	}
}

func TestGateSkipsAbsoluteAndUnjudged(t *testing.T) {
	abs := Result{What: "abs", Op: "<=", Limit: 10, Value: 5, Status: "met", Ratio: boolPtr(false), Detail: "5 ns/op"}
	absWorse := abs
	absWorse.Value = 9
	info := Result{What: "info", Value: 1, Status: "info", Ratio: boolPtr(true), Detail: "1 / 1 ns/op"}
	infoWorse := info
	infoWorse.Value = 100
	notRun := Result{What: "nr", Op: ">=", Limit: 1, Status: "not run", Ratio: boolPtr(true)}
	var buf bytes.Buffer
	if err := gate(&buf, Report{Ratios: []Result{abs, info, notRun}}, Report{Ratios: []Result{absWorse, infoWorse, notRun}}, 0.10); err != nil {
		t.Fatalf("gate failed on absolute/info/not-run results: %v\n%s", err, buf.String())
	}
	if !strings.Contains(buf.String(), "0 ratio targets checked") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// TestGateOldJSON: files from before Result.Ratio are judged by Detail,
// and gate's exit status reflects a regression.
func TestGateOldJSON(t *testing.T) {
	dir := t.TempDir()
	oldJSON := `{"stamp":"old","ratios":[
		{"what":"ratio","value":20,"op":">=","limit":10,"status":"met","detail":"200 / 10 ns/op"},
		{"what":"absolute","value":5,"op":"<=","limit":10,"status":"met","detail":"5 ns/op"}]}`
	newJSON := `{"stamp":"new","ratios":[
		{"what":"ratio","value":15,"op":">=","limit":10,"status":"met","detail":"150 / 10 ns/op","ratio":true},
		{"what":"absolute","value":9,"op":"<=","limit":10,"status":"met","detail":"9 ns/op","ratio":false}]}`
	oldPath, newPath := filepath.Join(dir, "old.json"), filepath.Join(dir, "new.json")
	os.WriteFile(oldPath, []byte(oldJSON), 0o644)
	os.WriteFile(newPath, []byte(newJSON), 0o644)
	var stdout, stderr bytes.Buffer
	if code := gateMain([]string{oldPath, newPath}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1:\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "REGRESSED") || strings.Contains(stdout.String(), "absolute") {
		t.Errorf("output:\n%s", stdout.String())
	}
	stdout.Reset()
	if code := gateMain([]string{"-threshold", "0.3", oldPath, newPath}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d with -threshold 0.3, want 0:\n%s", code, stdout.String())
	}
	if code := gateMain([]string{oldPath, newPath, "-threshold", "0.3"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d with -threshold after the files, want 0", code)
	}
	if code := gateMain([]string{oldPath}, &stdout, &stderr); code != 2 {
		t.Fatalf("exit %d with one file, want 2", code)
	}
}

// TestFlatUsesOwnSizes: a larger size of another benchmark (Retention's
// n=200k) does not make a flatness target "not run".
func TestFlatUsesOwnSizes(t *testing.T) {
	bs, _ := parse([]byte("BenchmarkPage/n=1k/impl=storh-2 \t 10 \t 1000 ns/op\nBenchmarkPage/n=2k/impl=storh-2 \t 10 \t 1200 ns/op\nBenchmarkRetention/n=200k/impl=storh-2 \t 1 \t 5 ns/op\n"))
	for _, r := range evaluate(bs) {
		if strings.HasPrefix(r.What, "decoded page of 100: largest n vs smallest n") {
			if r.Status != "met" || math.Abs(r.Value-1.2) > 1e-9 {
				t.Errorf("%+v", r)
			}
			return
		}
	}
	t.Fatal("no flatness result")
}

func TestSmokeFailsWhenGoTestFails(t *testing.T) {
	dir := t.TempDir()
	c := config{out: dir, dir: filepath.Join(dir, "no-such-module"), bench: ".", timeout: "1m", smoke: true, localCharts: true}
	if err := run(c); err == nil {
		t.Fatal("run succeeded although go test could not run")
	}
}

func TestChartsSubcommand(t *testing.T) {
	dir := t.TempDir()
	bs, _ := parse([]byte(chartSample))
	js, _ := json.Marshal(Report{Benchmarks: bs, Ratios: evaluate(bs)})
	in := filepath.Join(dir, "report.json")
	os.WriteFile(in, js, 0o644)
	var stderr bytes.Buffer
	if code := chartsMain([]string{in, filepath.Join(dir, "img")}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got, _ := filepath.Glob(filepath.Join(dir, "img", "*.svg"))
	if len(got) != 3 {
		t.Errorf("charts %v", got)
	}
}
