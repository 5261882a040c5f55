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

// BenchmarkQueueClaimComplete claims a job and completes it by its token,
// one job at a time (b.N jobs): through web.Client over HTTP, and, as the
// peer, through storh's Queue in the process that serves it. The ratio is
// what the HTTP round trips (two per job) cost beside the two commits. The
// file is opened WithoutSync, so the commits cost what they cost without
// a disk flush and the HTTP overhead shows; with sync, the flushes weigh
// the same on both.
func BenchmarkQueueClaimComplete(b *testing.B) {
	db, err := storh.Open(filepath.Join(b.TempDir(), "db"), storh.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	q, err := db.Queue("work")
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(web.Handler(db, web.WithWrites()))
	defer srv.Close()
	c, err := web.NewClient(srv.URL, "")
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx := context.Background()
	fill := func(b *testing.B) {
		b.Helper()
		items := make([]any, b.N)
		for i := range items {
			items[i] = storh.Map{"n": int64(i), "to": "ann@example.com"}
		}
		if _, err := q.EnqueueMany(items); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("http", func(b *testing.B) {
		b.StopTimer()
		fill(b)
		b.ReportAllocs()
		b.StartTimer()
		for range b.N {
			jobs, err := c.Claim(ctx, "work", 1, time.Minute, 0)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.CompleteClaim(ctx, "work", jobs[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		b.StopTimer()
		fill(b)
		b.ReportAllocs()
		b.StartTimer()
		for range b.N {
			job, err := q.Claim(time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if err := q.CompleteClaim(job); err != nil {
				b.Fatal(err)
			}
		}
	})
}
