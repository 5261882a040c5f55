package storh_test

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
)

// BenchmarkExpirySweepPut measures what a background sweep costs writers:
// the latency of a durable single Put into a collection, first while
// nothing has expired (the sweeper runs and finds nothing), then while
// the sweeper deletes n expired records of the same collection, in the
// same run. It reports the p50, p99 and worst Put of each phase (ms), and
// the sweep's rate. n is 1,000,000 on a file and 100,000 on PostgreSQL
// (STORH_BENCH_EXPIRY_N overrides both):
//
//	go test ./storh -run '^$' -bench ExpirySweepPut -benchtime 1x
func BenchmarkExpirySweepPut(b *testing.B) {
	for _, backend := range []string{"file", "postgres"} {
		n := 1_000_000
		if backend == "postgres" {
			n = 100_000
		}
		if v := os.Getenv("STORH_BENCH_EXPIRY_N"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil {
				b.Fatal(err)
			}
		}
		b.Run("backend="+backend+"/n="+strconv.Itoa(n), func(b *testing.B) {
			path := ""
			if backend == "file" {
				path = b.TempDir() + "/sweep.db"
			} else {
				path = pgtest.URL(b)
			}
			for range b.N {
				benchSweepPut(b, path, n)
			}
		})
	}
}

func benchSweepPut(b *testing.B, path string, n int) {
	b.StopTimer()
	clk := newTestClock()
	ttl := []storh.CollectionOption{storh.WithTTL("exp"), storh.WithIndex(storh.Index("exp"))}

	// Load the records to expire, without fsync (the load is not measured).
	db, err := storh.Open(path, storh.WithoutSync(), storh.WithClock(clk.Now), storh.WithoutBackground())
	if err != nil {
		b.Fatal(err)
	}
	docs, err := db.Docs("sessions", ttl...)
	if err != nil {
		b.Fatal(err)
	}
	items := make([]any, 0, storh.StreamBatch)
	for done := 0; done < n; done += len(items) {
		items = items[:0]
		for i := range min(storh.StreamBatch, n-done) {
			items = append(items, storh.Map{"user": done + i, "exp": clk.Now().Add(time.Second), "note": "a session that will expire"})
		}
		if _, err := docs.PutMany(items); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}

	// Durable from here.
	db, err = storh.Open(path, storh.WithClock(clk.Now), storh.WithSweepEvery(10*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	rounds := make(chan map[string]int, 1)
	storh.SetSweepHook(db, func(swept map[string]int, _ []string, err error) {
		if err != nil {
			b.Errorf("sweep: %v", err)
		}
		if swept["sessions"] > 0 {
			rounds <- swept
		}
	})
	if docs, err = db.Docs("sessions", ttl...); err != nil {
		b.Fatal(err)
	}
	put := func() time.Duration {
		start := time.Now()
		if _, err := docs.Put(storh.Map{"user": -1, "exp": clk.Now().Add(time.Hour), "note": "a new session"}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var idle, during []time.Duration
	for range 1000 {
		idle = append(idle, put())
	}
	b.StartTimer()
	start := time.Now()
	clk.Advance(2 * time.Second)
	var swept map[string]int
	for swept == nil {
		during = append(during, put())
		select {
		case swept = <-rounds:
		default:
		}
	}
	took := time.Since(start)
	b.StopTimer()
	if swept["sessions"] != n {
		b.Fatalf("the sweep deleted %d records, want %d", swept["sessions"], n)
	}
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		ms := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))]) / 1e6 }
		b.ReportMetric(ms(0.5), name+"-p50-ms")
		b.ReportMetric(ms(0.99), name+"-p99-ms")
		b.ReportMetric(ms(1), name+"-max-ms")
	}
	report("idle", idle)
	report("sweep", during)
	b.ReportMetric(float64(len(during)), "puts-during-sweep")
	b.ReportMetric(float64(n)/took.Seconds(), "swept/s")
	b.ReportMetric(0, "ns/op")
}
