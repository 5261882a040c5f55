package bench

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The durable job queue (storh.Queue): single operations from one
// goroutine and from many (which share group commits), and the bulk
// operations. Every measured operation is durable (fsync on) when it
// returns; only the backlog the claim benchmarks work through is enqueued
// without fsync, outside the timer. Payloads are the engine benchmarks'
// 197-byte map records. Each benchmark reports jobs/s; the single-operation
// ones also report commits/job and the time bbolt spends writing a commit.

const (
	queueName = "jobs"
	// queueLease is long enough that no claim of a benchmark expires.
	queueLease = 10 * time.Minute
	// Bulk call sizes.
	queueEnqueueBatch = 1000
	queueClaimBatch   = 100
)

// openQueueTemp opens a queue in a fresh durable database, closed when the
// benchmark ends.
func openQueueTemp(tb testing.TB) (*storh.DB, *storh.Queue) {
	db, err := storh.Open(filepath.Join(tb.TempDir(), "queue.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	q, err := db.Queue(queueName)
	if err != nil {
		tb.Fatal(err)
	}
	return db, q
}

// openQueueBacklog returns a durable queue holding n pending jobs. They are
// enqueued without fsync, the file is closed and reopened with fsync: only
// what the benchmark then does is durable, and all of it is.
func openQueueBacklog(tb testing.TB, n int) (*storh.DB, *storh.Queue) {
	path := filepath.Join(tb.TempDir(), "queue.db")
	fill, err := storh.Open(path, storh.WithoutSync())
	if err != nil {
		tb.Fatal(err)
	}
	q, err := fill.Queue(queueName)
	if err != nil {
		tb.Fatal(err)
	}
	const chunk = 5000
	items := make([]any, 0, chunk)
	for start := 0; start < n; start += chunk {
		items = items[:0]
		for i := start; i < min(start+chunk, n); i++ {
			items = append(items, record(i))
		}
		if _, err := q.EnqueueMany(items); err != nil {
			tb.Fatal(err)
		}
	}
	if err := fill.Close(); err != nil {
		tb.Fatal(err)
	}
	db, err := storh.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if q, err = db.Queue(queueName); err != nil {
		tb.Fatal(err)
	}
	if counts, err := q.Counts(); err != nil || counts.Pending != n {
		tb.Fatalf("backlog: %d pending, want %d (%v)", counts.Pending, n, err)
	}
	return db, q
}

// reportJobs adds jobs/s: jobs handled per second of measured time.
func reportJobs(b *testing.B, jobs int) {
	b.ReportMetric(float64(jobs)/b.Elapsed().Seconds(), "jobs/s")
}

// reportJobCommits adds commits/job (below 1 when jobs share commits, 2
// for a claim and a complete each in its own) and io-µs/commit.
func reportJobCommits(b *testing.B, c commits, jobs int) {
	end := c.read()
	n := end.txid - c.txid
	if n <= 0 || jobs == 0 {
		return
	}
	b.ReportMetric(float64(n)/float64(jobs), "commits/job")
	b.ReportMetric(float64((end.io-c.io).Microseconds())/float64(n), "io-µs/commit")
}

// BenchmarkQueueEnqueue: one durable Enqueue per op, one goroutine.
func BenchmarkQueueEnqueue(b *testing.B) {
	b.Run("impl=storh", func(b *testing.B) {
		db, q := openQueueTemp(b)
		c := countStorhCommits(b, db)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := q.Enqueue(record(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
		reportJobs(b, b.N)
		reportJobCommits(b, c, b.N)
	})
}

// claimComplete claims one job and completes it: the life of a job on a
// worker that does nothing with it.
func claimComplete(q *storh.Queue) error {
	j, err := q.Claim(queueLease)
	if err != nil {
		return err
	}
	return q.Complete(j.ID)
}

// BenchmarkQueueClaimComplete: Claim then Complete of one job per op, each
// durable, from one goroutine and from 64 (whose claims and completions
// share group commits). ns/op is wall time per job.
func BenchmarkQueueClaimComplete(b *testing.B) {
	for _, g := range []int{1, concurrentWriters} {
		b.Run(fmt.Sprintf("impl=storh-%dg", g), func(b *testing.B) {
			db, q := openQueueBacklog(b, b.N)
			c := countStorhCommits(b, db)
			b.ReportAllocs()
			var next atomic.Int64
			var failed atomic.Pointer[error]
			var wg sync.WaitGroup
			b.ResetTimer()
			for range g {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if err := claimComplete(q); err != nil {
							failed.CompareAndSwap(nil, &err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
			reportJobs(b, b.N)
			reportJobCommits(b, c, b.N)
			if n, err := q.Counts(); err != nil || n.Pending != 0 || n.Claimed != 0 || n.Done != b.N {
				b.Fatalf("after %d claims and completions: %+v (%v)", b.N, n, err)
			}
		})
	}
}

// BenchmarkQueueEnqueueMany: one durable EnqueueMany of 1000 jobs per op.
// Baselines in the same run: the same 1000 records stored by one durable
// Docs.PutMany (what the job state and its indexes add), and raw bbolt
// committing the same 1000 payloads per transaction, alone (the ceiling of
// any layout on bbolt) and with the two small writes a job needs beside its
// payload (its state and its place in the pending order). ns/op is per
// call of 1000.
func BenchmarkQueueEnqueueMany(b *testing.B) {
	items := make([]any, queueEnqueueBatch)
	for i := range items {
		items[i] = record(i)
	}
	for _, withState := range []bool{false, true} {
		name := "bolt-payloads"
		if withState {
			name = "bolt-payloads+state"
		}
		b.Run(fmt.Sprintf("impl=%s-batch%d", name, queueEnqueueBatch), func(b *testing.B) {
			db := openRawTemp(b, false)
			b.ReportAllocs()
			var seq uint64
			for b.Loop() {
				if err := rawEnqueue(db, items, &seq, withState); err != nil {
					b.Fatal(err)
				}
			}
			reportJobs(b, b.N*queueEnqueueBatch)
		})
	}
	b.Run(fmt.Sprintf("impl=storh-batch%d", queueEnqueueBatch), func(b *testing.B) {
		_, q := openQueueTemp(b)
		b.ReportAllocs()
		for b.Loop() {
			ids, err := q.EnqueueMany(items)
			if err != nil || len(ids) != len(items) {
				b.Fatalf("EnqueueMany: %d ids, %v", len(ids), err)
			}
		}
		reportJobs(b, b.N*queueEnqueueBatch)
	})
	b.Run(fmt.Sprintf("impl=docs-putmany-batch%d", queueEnqueueBatch), func(b *testing.B) {
		_, docs := openStorhTemp(b)
		b.ReportAllocs()
		for b.Loop() {
			recs, err := docs.PutMany(items)
			if err != nil || len(recs) != len(items) {
				b.Fatalf("PutMany: %d records, %v", len(recs), err)
			}
		}
		reportJobs(b, b.N*queueEnqueueBatch)
	})
}

// BenchmarkQueueClaimCompleteMany: one durable ClaimMany(100) and one
// durable CompleteMany of the 100 per op. ns/op is per 100 jobs.
func BenchmarkQueueClaimCompleteMany(b *testing.B) {
	b.Run(fmt.Sprintf("impl=storh-batch%d", queueClaimBatch), func(b *testing.B) {
		_, q := openQueueBacklog(b, b.N*queueClaimBatch)
		ids := make([]uuidv7.UUID, 0, queueClaimBatch)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			jobs, err := q.ClaimMany(queueClaimBatch, queueLease)
			if err != nil || len(jobs) != queueClaimBatch {
				b.Fatalf("ClaimMany: %d jobs, %v", len(jobs), err)
			}
			ids = ids[:0]
			for _, j := range jobs {
				ids = append(ids, j.ID)
			}
			if n, err := q.CompleteMany(ids); err != nil || n != len(ids) {
				b.Fatalf("CompleteMany: %d of %d, %v", n, len(ids), err)
			}
		}
		b.StopTimer()
		reportJobs(b, b.N*queueClaimBatch)
	})
}

// rawEnqueue commits one job per item in one bbolt transaction: a fresh
// UUIDv7 key and the msgpack payload, and with withState a 32-byte state
// value under the same key and the key under its sequence number, each
// bucket packed full as storh packs its arrival-ordered buckets.
func rawEnqueue(db *bolt.DB, items []any, seq *uint64, withState bool) error {
	var w arenaWriter
	enc := msgpack.NewEncoder(&w)
	var state [32]byte
	return db.Update(func(tx *bolt.Tx) error {
		recs := tx.Bucket(rawBucket)
		recs.FillPercent = 1.0
		var states, pending *bolt.Bucket
		if withState {
			var err error
			if states, err = tx.CreateBucketIfNotExists([]byte("state")); err != nil {
				return err
			}
			if pending, err = tx.CreateBucketIfNotExists([]byte("pending")); err != nil {
				return err
			}
			states.FillPercent, pending.FillPercent = 1.0, 1.0
		}
		keys := make([]byte, 0, 24*len(items))
		for _, item := range items {
			off := len(w.buf)
			if err := enc.Encode(item); err != nil {
				return err
			}
			id := uuidv7.New()
			keys = append(keys, id[:]...)
			k := keys[len(keys)-16:]
			if err := recs.Put(k, w.buf[off:len(w.buf):len(w.buf)]); err != nil {
				return err
			}
			if !withState {
				continue
			}
			*seq++
			keys = binary.BigEndian.AppendUint64(keys, *seq)
			if err := states.Put(k, state[:]); err != nil {
				return err
			}
			if err := pending.Put(keys[len(keys)-8:], k); err != nil {
				return err
			}
		}
		return nil
	})
}
