package web_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/web"
)

// benchQueueServer serves a file opened WithoutSync (so the HTTP cost
// shows beside the commits) and gives its queue "work" and a client.
func benchQueueServer(b *testing.B) (*storh.Queue, *web.Client) {
	b.Helper()
	db, err := storh.Open(filepath.Join(b.TempDir(), "db"), storh.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	q, err := db.Queue("work")
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(web.Handler(db, web.WithWrites()))
	b.Cleanup(srv.Close)
	c, err := web.NewClient(srv.URL, "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.CloseIdleConnections)
	return q, c
}

// BenchmarkQueueJobsList lists 10,000 pending jobs: through web.Client,
// a page of 1,000 (the default page size) a request, and, as the peer,
// through storh's Queue.Jobs in the serving process.
func BenchmarkQueueJobsList(b *testing.B) {
	const n = 10_000
	q, c := benchQueueServer(b)
	items := make([]any, n)
	for i := range items {
		items[i] = storh.Map{"n": int64(i), "to": "ann@example.com"}
	}
	if _, err := q.EnqueueMany(items); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	count := func(b *testing.B, got int) {
		if got != n {
			b.Fatalf("listed %d jobs, want %d", got, n)
		}
	}
	b.Run("http", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			got := 0
			for _, err := range c.Jobs(ctx, "work", storh.JobPending, false) {
				if err != nil {
					b.Fatal(err)
				}
				got++
			}
			count(b, got)
		}
	})
	b.Run("storh", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			got := 0
			for _, err := range q.Jobs(storh.JobPending) {
				if err != nil {
					b.Fatal(err)
				}
				got++
			}
			count(b, got)
		}
	})
}

// BenchmarkQueueCompleteMany completes 100 claimed jobs: in one batch
// request (one transaction), and, as the peer, the way the CLI did it
// over --url before batches: a request (a transaction) per job.
func BenchmarkQueueCompleteMany(b *testing.B) {
	const n = 100
	q, c := benchQueueServer(b)
	ctx := context.Background()
	claim := func(b *testing.B) []storh.Job {
		b.Helper()
		items := make([]any, n)
		for i := range items {
			items[i] = storh.Map{"n": int64(i)}
		}
		if _, err := q.EnqueueMany(items); err != nil {
			b.Fatal(err)
		}
		jobs, err := q.ClaimMany(n, time.Hour)
		if err != nil || len(jobs) != n {
			b.Fatal(len(jobs), err)
		}
		return jobs
	}
	b.Run("batch", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			b.StopTimer()
			jobs := claim(b)
			b.StartTimer()
			if _, err := c.Batch(ctx, "work", web.JobBatch{Action: "complete", Jobs: jobs}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("per-job", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			b.StopTimer()
			jobs := claim(b)
			b.StartTimer()
			for _, j := range jobs {
				if _, err := c.Complete(ctx, "work", j.ID); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
