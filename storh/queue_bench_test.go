package storh_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
)

// BenchmarkQueueClaimComplete is a worker's cost per job on a file: one
// Claim and one Complete, each its own commit (without fsync, so that the
// queue's own work shows), from a queue holding 10,000 pending jobs ahead
// of the ones claimed. Its first use was to weigh the pending index keyed
// by due time ‖ sequence against the sequence alone (docs/benchmarks.md).
func BenchmarkQueueClaimComplete(b *testing.B) {
	db, err := storh.Open(filepath.Join(b.TempDir(), "q.db"), storh.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	q, err := db.Queue("jobs")
	if err != nil {
		b.Fatal(err)
	}
	fill := func(n int) {
		items := make([]any, n)
		for i := range items {
			items[i] = storh.Map{"n": i, "to": "ann@example.com"}
		}
		if _, err := q.EnqueueMany(items); err != nil {
			b.Fatal(err)
		}
	}
	fill(10_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%5_000 == 0 && i > 0 {
			b.StopTimer()
			fill(5_000)
			b.StartTimer()
		}
		j, err := q.Claim(time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Complete(j.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueueClaimFail weighs what a Fail costs now that it reads the
// queue's stored options in its transaction (and, with a backoff, moves
// the job to a later due time): one Claim and one Fail per op, on a file
// without fsync, against its peer Claim and Release, which reads no
// options. Max attempts are high enough that no job dies.
func BenchmarkQueueClaimFail(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []storh.CollectionOption
		fail bool
	}{
		{"release", nil, false},
		{"fail", []storh.CollectionOption{storh.WithMaxAttempts(1 << 30)}, true},
		{"fail-backoff", []storh.CollectionOption{storh.WithMaxAttempts(1 << 30), storh.WithBackoff(time.Millisecond, time.Millisecond)}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var now atomic.Int64
			now.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
			db, err := storh.Open(filepath.Join(b.TempDir(), "q.db"), storh.WithoutSync(),
				storh.WithClock(func() time.Time { return time.UnixMilli(now.Load()) }))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			q, err := db.Queue("jobs", bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			items := make([]any, 1_000)
			for i := range items {
				items[i] = storh.Map{"n": i, "to": "ann@example.com"}
			}
			if _, err := q.EnqueueMany(items); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j, err := q.Claim(time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if bc.fail {
					err = q.FailClaim(j, "again")
				} else {
					err = q.Release(j.ID)
				}
				if err != nil {
					b.Fatal(err)
				}
				now.Add(2) // past any backoff of 1ms ±20%
			}
		})
	}
}
