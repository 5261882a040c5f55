package main

import (
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
	check("decoded page of 100 vs raw seek + Unmarshal, n=10k (time ratio)", "met", 200000.0/190000)
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
	md := markdown(Report{Stamp: "x", Benchmarks: bs, Ratios: evaluate(bs)})
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
BenchmarkIndexedInsert/n=100k/impl=storh-2          	 10	 30000000 ns/op
BenchmarkIndexedInsert/n=100k/impl=storh-idx0-2     	 10	 10000000 ns/op
BenchmarkIndexedInsert/n=100k/impl=storh-idx1-2     	 10	 12000000 ns/op
BenchmarkIndexedInsert/n=100k/impl=storh-idx2-2     	 10	 20000000 ns/op
BenchmarkIndexedInsert/n=100k/impl=bolthold-2       	 1	 3000000000 ns/op
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
