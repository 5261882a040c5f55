package bench

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Watch: what following a collection costs its writers, and how long a
// commit takes to reach a watcher.

// BenchmarkWatchPut is a durable single Put with nobody watching the
// collection, and with one watcher draining the feed: the feed must cost a
// write at most 5% of a durable Put.
func BenchmarkWatchPut(b *testing.B) {
	for _, watchers := range []int{0, 1} {
		name := "impl=storh-unwatched"
		if watchers == 1 {
			name = "impl=storh-watched"
		}
		b.Run(name, func(b *testing.B) {
			_, docs := openStorhTemp(b)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range watchers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, err := range docs.Watch(ctx, uuidv7.UUID{}) {
						if err != nil {
							return
						}
					}
				}()
			}
			time.Sleep(10 * time.Millisecond) // the watcher subscribes
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := docs.Put(record(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.StopTimer()
			cancel()
			wg.Wait()
		})
	}
}

// BenchmarkWatchLatency measures, for each durable Put, the time from the
// Put's return (the commit is durable) to the watcher receiving the record,
// and reports the median and 99th percentile.
func BenchmarkWatchLatency(b *testing.B) {
	b.Run("impl=storh", func(b *testing.B) {
		_, docs := openStorhTemp(b)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		received := make(chan time.Time, 1)
		go func() {
			for _, err := range docs.Watch(ctx, uuidv7.UUID{}) {
				if err != nil {
					return
				}
				received <- time.Now()
			}
		}()
		time.Sleep(10 * time.Millisecond)
		lat := make([]time.Duration, 0, b.N)
		i := 0
		for b.Loop() {
			if _, err := docs.Put(record(i)); err != nil {
				b.Fatal(err)
			}
			done := time.Now()
			got := <-received
			lat = append(lat, max(0, got.Sub(done)))
			i++
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	})
}

// BenchmarkRetention deletes the older half of a log of 200k records (2M
// with STORH_BENCH_LARGE=1: 1M deleted) with DeleteBefore, in its batches of a few
// thousand per durable transaction. ns/op is the whole deletion; run it
// with -benchtime 1x, since building the log takes longer than deleting.
func BenchmarkRetention(b *testing.B) {
	total := 200_000
	if os.Getenv("STORH_BENCH_LARGE") != "" {
		total = 2_000_000
	}
	b.Run(sizeName(total)+"/impl=storh", func(b *testing.B) {
		b.ReportAllocs()
		var deleted int
		var spent time.Duration
		for b.Loop() {
			b.StopTimer()
			path := b.TempDir() + "/ret.db"
			db, err := storh.Open(path, storh.WithoutSync())
			if err != nil {
				b.Fatal(err)
			}
			l, err := db.Log("events")
			if err != nil {
				b.Fatal(err)
			}
			base := time.Now().Add(-time.Duration(total) * time.Millisecond).UnixMilli()
			batch := make([]any, 0, 5000)
			for i := range total {
				id, err := uuidv7.NewAt(base + int64(i))
				if err != nil {
					b.Fatal(err)
				}
				batch = append(batch, storh.Entry{ID: id, Data: record(i)})
				if len(batch) == cap(batch) {
					if _, err := l.PutMany(batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			// Durable from here: the deletion commits with fsync.
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			if db, err = storh.Open(path); err != nil {
				b.Fatal(err)
			}
			if l, err = db.Log("events"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			n, err := l.DeleteBefore(time.UnixMilli(base + int64(total/2)))
			spent += time.Since(start)
			b.StopTimer()
			if err != nil || n != total/2 {
				b.Fatalf("DeleteBefore deleted %d, %v; want %d", n, err, total/2)
			}
			deleted += n
			db.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(deleted)/spent.Seconds(), "records/s")
	})
}
