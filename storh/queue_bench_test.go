package storh_test

import (
	"path/filepath"
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
