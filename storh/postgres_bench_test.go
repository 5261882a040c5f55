package storh_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The PostgreSQL benchmarks run storh against hand-written pgx code doing
// the same statements on the same server in the same run: the ratios are
// what docs/benchmarks.md reports. A user's code reads the records table
// storh made, with the statement they would write, and copies the values
// out; neither side decodes.

// pgStartMs is the creation time of a fixture's first record; records are
// one millisecond apart, so a window of n ms holds n records.
const pgStartMs = 1_750_000_000_000

// pgFixture is a store of n small records, ids one millisecond apart.
type pgFixture struct {
	url   string
	db    *storh.DB
	docs  *storh.Docs
	ids   []uuidv7.UUID
	table string // the records table, quoted
}

func newPGFixture(b *testing.B, n int) *pgFixture {
	b.Helper()
	f := &pgFixture{url: pgtest.URL(b)}
	db, err := storh.Open(f.url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	gen := uuidv7.NewDeterministic(1, pgStartMs, 1)
	docs, err := db.Docs("bench", storh.WithIDGenerator(gen.New))
	if err != nil {
		b.Fatal(err)
	}
	f.db, f.docs = db, docs
	items := make([]any, 0, 5000)
	for len(f.ids) < n {
		items = items[:0]
		for range min(5000, n-len(f.ids)) {
			items = append(items, storh.Map{"user": "u", "score": len(f.ids) + len(items), "note": "a small record of a few fields"})
		}
		recs, err := docs.PutMany(items)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			f.ids = append(f.ids, r.ID)
		}
	}
	conn := f.connect(b)
	rows, _ := conn.Query(context.Background(), "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'storh_b%'")
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range names {
		var k []byte
		if conn.QueryRow(context.Background(), "SELECT k FROM "+pgx.Identifier{name}.Sanitize()+" WHERE k = $1", f.ids[0][:]).Scan(&k) == nil {
			f.table = pgx.Identifier{name}.Sanitize()
		}
	}
	if f.table == "" {
		b.Fatal("no table holds the records")
	}
	return f
}

// connect opens a connection of the hand-written side, closed at the end.
func (f *pgFixture) connect(b *testing.B) *pgx.Conn {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), f.url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// rawRead runs stmt with args in a REPEATABLE READ READ ONLY transaction,
// as storh reads, copying each row out, and checks the row count.
func rawRead(b *testing.B, conn *pgx.Conn, want int, stmt string, args ...any) {
	ctx := context.Background()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		b.Fatal(err)
	}
	rows, _ := tx.Query(ctx, stmt, args...)
	got := 0
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			b.Fatal(err)
		}
		got++
	}
	if rows.Err() != nil || got != want {
		b.Fatalf("%d rows, %v", got, rows.Err())
	}
	tx.Rollback(ctx)
}

// pgSizes are the store sizes the read benchmarks compare: reads are
// range scans of a primary key, so their cost must not grow with the
// store. The large one takes a while to load; -short leaves it out.
func pgSizes() []int {
	if testing.Short() {
		return []int{10_000}
	}
	return []int{10_000, 1_000_000}
}

// BenchmarkPostgresPage: a cursor page of 100 records after an id.
func BenchmarkPostgresPage(b *testing.B) {
	for _, n := range pgSizes() {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			f := newPGFixture(b, n)
			after := f.ids[n/2]
			b.Run("impl=storh", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					page, err := f.docs.Find(query.All().After(after).Limit(100))
					if err != nil || len(page) != 100 {
						b.Fatalf("%d records, %v", len(page), err)
					}
				}
			})
			b.Run("impl=pgx", func(b *testing.B) {
				conn := f.connect(b)
				stmt := "SELECT k, v FROM " + f.table + " WHERE k > $1 ORDER BY k LIMIT 100"
				b.ReportAllocs()
				for b.Loop() {
					rawRead(b, conn, 100, stmt, after[:])
				}
			})
		})
	}
}

// BenchmarkPostgresWindow: the records created in a window of 200 ms (200
// records), by id bounds.
func BenchmarkPostgresWindow(b *testing.B) {
	for _, n := range pgSizes() {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			f := newPGFixture(b, n)
			from := int64(pgStartMs + n/2)
			until := from + 199
			b.Run("impl=storh", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					page, err := f.docs.Find(query.All().TimeRangeMs(from, until))
					if err != nil || len(page) != 200 {
						b.Fatalf("%d records, %v", len(page), err)
					}
				}
			})
			b.Run("impl=pgx", func(b *testing.B) {
				conn := f.connect(b)
				stmt := "SELECT k, v FROM " + f.table + " WHERE k BETWEEN $1 AND $2 ORDER BY k"
				lo, hi := uuidv7.MinForTimestampMs(from), uuidv7.MaxForTimestampMs(until)
				b.ReportAllocs()
				for b.Loop() {
					rawRead(b, conn, 200, stmt, lo[:], hi[:])
				}
			})
		})
	}
}

// BenchmarkPostgresBulk: 1,000 records per durable transaction. The
// hand-written side inserts the bytes storh stored for the same records
// into a table of the same shape, with a multi-row INSERT and with COPY.
func BenchmarkPostgresBulk(b *testing.B) {
	const batch = 1000
	f := newPGFixture(b, batch)
	var values [][]byte
	if err := f.db.View(func(tx *storh.Tx) error {
		d, err := tx.Docs("bench")
		if err != nil {
			return err
		}
		for _, id := range f.ids {
			r, err := d.Get(id)
			if err != nil {
				return err
			}
			values = append(values, r.Raw())
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	items := make([]any, batch)
	for i := range items {
		items[i] = storh.Map{"user": "u", "score": i, "note": "a small record of a few fields"}
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
	}
	b.Run("impl=storh", func(b *testing.B) {
		d, err := f.db.Docs("bulk")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.PutMany(items); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	ctx := context.Background()
	conn := f.connect(b)
	if _, err := conn.Exec(ctx, "CREATE TABLE raw_bulk (k bytea PRIMARY KEY, v bytea)"); err != nil {
		b.Fatal(err)
	}
	gen := uuidv7.NewGenerator()
	keys := make([][]byte, batch)
	newKeys := func() {
		for i := range keys {
			id := gen.New()
			keys[i] = id[:]
		}
	}
	b.Run("impl=pgx-insert", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			newKeys()
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "INSERT INTO raw_bulk (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[])", keys, values)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("impl=pgx-copy", func(b *testing.B) {
		b.ReportAllocs()
		rows := make([][]any, batch)
		for b.Loop() {
			newKeys()
			for i := range rows {
				rows[i] = []any{keys[i], values[i]}
			}
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				_, err := tx.CopyFrom(ctx, pgx.Identifier{"raw_bulk"}, []string{"k", "v"}, pgx.CopyFromRows(rows))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
}

// BenchmarkPostgresWriters: durable single-record Puts from 1 and from 64
// goroutines of one process (group commit shares their commits), in
// records per second.
func BenchmarkPostgresWriters(b *testing.B) {
	f := newPGFixture(b, 1)
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			d, err := f.db.Docs(fmt.Sprintf("w%d", writers))
			if err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for range writers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if _, err := d.Put(storh.Map{"user": "u", "note": "a small record"}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkPostgresWorkers: workers claim and complete jobs of one queue,
// 8 per store, from one store or from four (four processes sharing the
// queue). One op is a claim and its completion.
func BenchmarkPostgresWorkers(b *testing.B) {
	for _, stores := range []int{1, 4} {
		b.Run(fmt.Sprintf("stores=%d", stores), func(b *testing.B) {
			url := pgtest.URL(b)
			dbs := make([]*storh.DB, stores)
			for i := range dbs {
				db, err := storh.Open(url)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { db.Close() })
				dbs[i] = db
			}
			q, err := dbs[0].Queue("work")
			if err != nil {
				b.Fatal(err)
			}
			for left := b.N; left > 0; left -= 1000 {
				payloads := make([]any, min(left, 1000))
				for i := range payloads {
					payloads[i] = storh.Map{"task": "resize", "n": i}
				}
				if _, err := q.EnqueueMany(payloads); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range stores * 8 {
				wg.Go(func() {
					q, err := dbs[w%stores].Queue("work")
					if err != nil {
						b.Error(err)
						return
					}
					for next.Add(1) <= int64(b.N) {
						j, err := q.Claim(time.Minute)
						if err == nil {
							err = q.Complete(j.ID)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
