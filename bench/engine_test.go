package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// ---------------------------------------------------------------------------
// The raw baseline: bbolt + msgpack written the straightforward way, with the
// bbolt settings storh uses (docs/architecture.md), so that the comparison measures
// what storh adds, not a badly tuned bbolt. One bucket, 16-byte UUIDv7 keys,
// msgpack values with no header.

var rawBucket = []byte("records")

func rawOptions(noSync bool) *bolt.Options {
	return &bolt.Options{
		Timeout:         time.Second,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: 1 << 30,
		NoSync:          noSync,
		NoGrowSync:      noSync,
	}
}

func rawOpen(path string, noSync bool) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, rawOptions(noSync))
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(rawBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// rawPut is one durable write: one record, one transaction.
func rawPut(db *bolt.DB, id uuidv7.UUID, rec map[string]any) error {
	v, err := msgpack.Marshal(rec)
	if err != nil {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(rawBucket)
		b.FillPercent = 1.0
		return b.Put(id[:], v)
	})
}

// rawBatchPut is rawPut through db.Batch, which coalesces concurrent callers.
func rawBatchPut(db *bolt.DB, id uuidv7.UUID, rec map[string]any) error {
	v, err := msgpack.Marshal(rec)
	if err != nil {
		return err
	}
	return db.Batch(func(tx *bolt.Tx) error {
		b := tx.Bucket(rawBucket)
		b.FillPercent = 1.0
		return b.Put(id[:], v)
	})
}

// arenaWriter lets one reused msgpack.Encoder append every value of a
// transaction to one buffer.
type arenaWriter struct{ buf []byte }

func (w *arenaWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *arenaWriter) WriteByte(c byte) error {
	w.buf = append(w.buf, c)
	return nil
}

// rawTxRecords is the bulk-load transaction size: bbolt's throughput peaks
// around 10k records per transaction; past that it spends more on
// rebalancing and memory than the fewer commits save.
const rawTxRecords = 10_000

// rawBulkLoad writes records 0..n-1 under id(i), rawTxRecords per
// transaction, encoding with one reused encoder into a per-transaction arena.
func rawBulkLoad(db *bolt.DB, n int, id func(i int) uuidv7.UUID) error {
	return rawBulkLoadOf(db, n, id, func(i int) any { return record(i) })
}

// rawBulkLoadOf is rawBulkLoad of the records rec(i).
func rawBulkLoadOf(db *bolt.DB, n int, id func(i int) uuidv7.UUID, rec func(i int) any) error {
	var w arenaWriter
	enc := msgpack.NewEncoder(&w)
	for start := 0; start < n; start += rawTxRecords {
		end := min(start+rawTxRecords, n)
		// The previous transaction has committed, so bbolt no longer
		// references its values: the arena can be reused. Within a
		// transaction append may move the arena; earlier values keep the
		// old array alive and unchanged.
		w.buf = w.buf[:0]
		err := db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(rawBucket)
			b.FillPercent = 1.0
			for i := start; i < end; i++ {
				off := len(w.buf)
				if err := enc.Encode(rec(i)); err != nil {
					return err
				}
				k := id(i)
				if err := b.Put(k[:], w.buf[off:len(w.buf):len(w.buf)]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// rawPage decodes the limit records after id into maps.
func rawPage(db *bolt.DB, after uuidv7.UUID, limit int, out []map[string]any) ([]map[string]any, error) {
	out = out[:0]
	err := db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(rawBucket).Cursor()
		k, v := c.Seek(after[:])
		if bytes.Equal(k, after[:]) {
			k, v = c.Next()
		}
		for ; k != nil && len(out) < limit; k, v = c.Next() {
			var m map[string]any
			if err := msgpack.Unmarshal(v, &m); err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// rawPageBytes walks the limit records after id without decoding them and
// returns their total size: the engine's share of rawPage.
func rawPageBytes(db *bolt.DB, after uuidv7.UUID, limit int) (records, size int, err error) {
	err = db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(rawBucket).Cursor()
		k, v := c.Seek(after[:])
		if bytes.Equal(k, after[:]) {
			k, v = c.Next()
		}
		for ; k != nil && records < limit; k, v = c.Next() {
			records++
			size += len(v)
		}
		return nil
	})
	return records, size, err
}

// rawWindow decodes the records created in [fromMs, untilMs].
func rawWindow(db *bolt.DB, fromMs, untilMs int64, out []map[string]any) ([]map[string]any, error) {
	out = out[:0]
	lo, hi := uuidv7.MinForTimestampMs(fromMs), uuidv7.MaxForTimestampMs(untilMs)
	err := db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(rawBucket).Cursor()
		for k, v := c.Seek(lo[:]); k != nil && bytes.Compare(k, hi[:]) <= 0; k, v = c.Next() {
			var m map[string]any
			if err := msgpack.Unmarshal(v, &m); err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// rawWhere decodes every record and counts those whose field equals value.
func rawWhere(db *bolt.DB, field string, value any) (int, error) {
	n := 0
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(rawBucket).ForEach(func(_, v []byte) error {
			var m map[string]any
			if err := msgpack.Unmarshal(v, &m); err != nil {
				return err
			}
			if m[field] == value {
				n++
			}
			return nil
		})
	})
	return n, err
}

// rawOpenGet opens the file, decodes one record and closes the file.
func rawOpenGet(path string, id uuidv7.UUID) (map[string]any, error) {
	db, err := bolt.Open(path, 0o600, rawOptions(false))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	err = db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(rawBucket).Get(id[:])
		if v == nil {
			return fmt.Errorf("bench: %s not found", id)
		}
		return msgpack.Unmarshal(v, &m)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return m, err
}

// ---------------------------------------------------------------------------
// The storh side of the same operations.

func storhPage(docs *storh.Docs, after uuidv7.UUID, limit int, out []storh.Map) ([]storh.Map, error) {
	out = out[:0]
	for r, err := range docs.Stream(query.All().After(after).Limit(limit)) {
		if err != nil {
			return out, err
		}
		out = append(out, r.Data())
	}
	return out, nil
}

func storhWindow(docs *storh.Docs, fromMs, untilMs int64, out []storh.Map) ([]storh.Map, error) {
	out = out[:0]
	for r, err := range docs.Stream(query.All().TimeRangeMs(fromMs, untilMs)) {
		if err != nil {
			return out, err
		}
		out = append(out, r.Data())
	}
	return out, nil
}

func storhWhere(docs *storh.Docs, field string, value any) (int, error) {
	n := 0
	for _, err := range docs.Stream(query.All().WhereEqual(field, value)) {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func storhOpenGet(path string, id uuidv7.UUID) (storh.Map, error) {
	db, err := storh.Open(path)
	if err != nil {
		return nil, err
	}
	var m storh.Map
	docs, err := db.Docs(collName)
	if err == nil {
		var r storh.Record
		if r, err = docs.Get(id); err == nil {
			m = r.Data()
		}
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return m, err
}

// openStorhTemp opens a fresh database in a temporary directory, closed
// when the benchmark ends.
func openStorhTemp(tb testing.TB, opts ...storh.Option) (*storh.DB, *storh.Docs) {
	db, err := storh.Open(filepath.Join(tb.TempDir(), "storh.db"), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	docs, err := db.Docs(collName)
	if err != nil {
		tb.Fatal(err)
	}
	return db, docs
}

func openRawTemp(tb testing.TB, noSync bool) *bolt.DB {
	db, err := rawOpen(filepath.Join(tb.TempDir(), "bolt.db"), noSync)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// reportRate adds records/s: records written or scanned per second of
// measured time.
func reportRate(b *testing.B, records int) {
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}

// commits counts the write transactions a benchmark commits and the time
// bbolt spends writing them (page writes plus both fdatasyncs), so that the
// durable benchmarks show how many records share a commit and what a commit
// costs on this disk. storh reports them in its Stats; the raw bbolt side
// reads them from bbolt.
type commits struct {
	read   func() commits
	txid   int64
	io     time.Duration
	writes int64
}

func countCommits(tb testing.TB, db *bolt.DB) commits {
	read := func() commits {
		st := db.Stats()
		c := commits{io: st.TxStats.GetWriteTime(), writes: st.TxStats.GetWrite()}
		if err := db.View(func(tx *bolt.Tx) error { c.txid = int64(tx.ID()); return nil }); err != nil {
			tb.Fatal(err)
		}
		return c
	}
	c := read()
	c.read = read
	return c
}

func countStorhCommits(tb testing.TB, db *storh.DB) commits {
	read := func() commits {
		st, err := db.Stats()
		if err != nil {
			tb.Fatal(err)
		}
		return commits{txid: st.Commits, io: st.CommitIOTime, writes: st.PageWrites}
	}
	c := read()
	c.read = read
	return c
}

// report adds records/commit, io-µs/commit and writes/commit (bbolt's
// write calls: one per dirty page, plus one for the meta page).
func (c commits) report(b *testing.B, records int) {
	end := c.read()
	n := end.txid - c.txid
	if n <= 0 {
		return
	}
	b.ReportMetric(float64(records)/float64(n), "records/commit")
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "commits/s")
	b.ReportMetric(float64((end.io-c.io).Microseconds())/float64(n), "io-µs/commit")
	b.ReportMetric(float64(end.writes-c.writes)/float64(n), "writes/commit")
}

// ---------------------------------------------------------------------------
// Durable writes (fsync on, both sides).

// BenchmarkPutDurable: one record per op, one goroutine, each Put durable
// when it returns.
func BenchmarkPutDurable(b *testing.B) {
	b.Run("impl=storh", func(b *testing.B) {
		db, docs := openStorhTemp(b)
		c := countStorhCommits(b, db)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := docs.Put(record(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
		reportRate(b, b.N)
		c.report(b, b.N)
	})
	b.Run("impl=bolt", func(b *testing.B) {
		db := openRawTemp(b, false)
		c := countCommits(b, db)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := rawPut(db, uuidv7.New(), record(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
		reportRate(b, b.N)
		c.report(b, b.N)
	})
	b.Run("impl=sqlite", func(b *testing.B) {
		db := openSQLiteTemp(b)
		ins := sqlitePrepare(b, db, sqliteInsert)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := sqlitePut(ins, uuidv7.New(), record(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
		reportRate(b, b.N)
	})
}

// concurrentWriters is the crowd of the group-commit benchmark.
const concurrentWriters = 64

// runWriters spreads b.N puts over g goroutines; ns/op is wall time per
// record.
func runWriters(b *testing.B, c commits, g int, put func(i int) error) {
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	b.ResetTimer()
	for range g {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := put(i); err != nil {
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
	reportRate(b, b.N)
	c.report(b, b.N)
}

// BenchmarkPutConcurrent: durable single-record writes from 64 goroutines
// (storh's group commit, bbolt's db.Batch) and from one.
func BenchmarkPutConcurrent(b *testing.B) {
	b.Run(fmt.Sprintf("impl=storh-%dg", concurrentWriters), func(b *testing.B) {
		db, docs := openStorhTemp(b)
		runWriters(b, countStorhCommits(b, db), concurrentWriters, func(i int) error {
			_, err := docs.Put(record(i))
			return err
		})
	})
	b.Run("impl=storh-4g", func(b *testing.B) {
		db, docs := openStorhTemp(b)
		runWriters(b, countStorhCommits(b, db), 4, func(i int) error {
			_, err := docs.Put(record(i))
			return err
		})
	})
	b.Run("impl=storh-1g", func(b *testing.B) {
		db, docs := openStorhTemp(b)
		runWriters(b, countStorhCommits(b, db), 1, func(i int) error {
			_, err := docs.Put(record(i))
			return err
		})
	})
	b.Run(fmt.Sprintf("impl=storh-putmany%d", concurrentWriters), func(b *testing.B) {
		// The other half of the group-commit ceiling: what commits of the
		// crowd's size cost when one goroutine hands them over whole. 64
		// writers cannot beat 64 records per commit at this rate.
		db, docs := openStorhTemp(b)
		c := countStorhCommits(b, db)
		b.ReportAllocs()
		items := make([]any, concurrentWriters)
		b.ResetTimer()
		for i := range b.N {
			for j := range items {
				items[j] = record(i*concurrentWriters + j)
			}
			if _, err := docs.PutMany(items); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportRate(b, b.N*concurrentWriters)
		c.report(b, b.N*concurrentWriters)
	})
	b.Run(fmt.Sprintf("impl=bolt-batch-%dg", concurrentWriters), func(b *testing.B) {
		db := openRawTemp(b, false)
		runWriters(b, countCommits(b, db), concurrentWriters, func(i int) error {
			return rawBatchPut(db, uuidv7.New(), record(i))
		})
	})
	b.Run(fmt.Sprintf("impl=sqlite-%dg", concurrentWriters), func(b *testing.B) {
		// The same *sql.DB from every goroutine, database/sql's default
		// pool (one connection per busy goroutine), each insert its own
		// autocommit transaction. SQLite admits one writer: the others
		// wait in the busy handler (busy_timeout) and retry. An autocommit
		// INSERT takes the write lock as it starts, with no read lock to
		// upgrade, so _txlock=immediate would change nothing. There is no
		// group commit: each record is one commit and one WAL fsync.
		db := openSQLiteTemp(b)
		ins := sqlitePrepare(b, db, sqliteInsert)
		runWriters(b, noCommits(), concurrentWriters, func(i int) error {
			return sqlitePut(ins, uuidv7.New(), record(i))
		})
	})
	b.Run(fmt.Sprintf("impl=sqlite-%dg-1conn", concurrentWriters), func(b *testing.B) {
		// The same with the pool capped at one connection: the writers
		// queue in database/sql, first come first served, instead of
		// sleeping in SQLite's busy handler (which backs off by up to
		// 100 ms and then misses the moment the lock is free).
		db := openSQLiteTemp(b)
		db.SetMaxOpenConns(1)
		ins := sqlitePrepare(b, db, sqliteInsert)
		runWriters(b, noCommits(), concurrentWriters, func(i int) error {
			return sqlitePut(ins, uuidv7.New(), record(i))
		})
	})
}

// ---------------------------------------------------------------------------
// Bulk loads (no fsync on either side: this is about CPU).

// bulkTarget is one contender of a bulk load: open and close are not
// measured, load is.
type bulkTarget struct {
	open  func(path string) error
	load  func() error
	close func() error
}

// runBulk loads n records into a fresh file per op. ns/op is the time to load
// all n; records/s and B/record (file size / n) are reported.
func runBulk(b *testing.B, n int, target func() bulkTarget) {
	b.ReportAllocs()
	dir := b.TempDir()
	var size int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		path := filepath.Join(dir, fmt.Sprintf("bulk-%d.db", i))
		t := target()
		if err := t.open(path); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := t.load(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := t.close(); err != nil {
			b.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		size = st.Size()
		os.Remove(path)
		b.StartTimer()
	}
	b.StopTimer()
	reportRate(b, n*b.N)
	b.ReportMetric(float64(size)/float64(n), "B/record")
}

// storhBulk opens a storh database without fsync for a bulk contender.
func storhBulk(load func(db *storh.DB, docs *storh.Docs) error) func() bulkTarget {
	return func() bulkTarget {
		var db *storh.DB
		var docs *storh.Docs
		return bulkTarget{
			open: func(path string) (err error) {
				if db, err = storh.Open(path, storh.WithoutSync()); err != nil {
					return err
				}
				docs, err = db.Docs(collName)
				return err
			},
			load:  func() error { return load(db, docs) },
			close: func() error { return db.Close() },
		}
	}
}

func rawBulk(n int, id func(i int) uuidv7.UUID) func() bulkTarget {
	return func() bulkTarget {
		var db *bolt.DB
		return bulkTarget{
			open: func(path string) (err error) {
				db, err = rawOpen(path, true)
				return err
			},
			load:  func() error { return rawBulkLoad(db, n, id) },
			close: func() error { return db.Close() },
		}
	}
}

// putManyBatch is the PutMany call size of the bulk benchmark.
const putManyBatch = 5000

// loadPutMany stores items with PutMany, putManyBatch per call.
func loadPutMany(items []any) func(*storh.DB, *storh.Docs) error {
	return func(_ *storh.DB, docs *storh.Docs) error {
		for start := 0; start < len(items); start += putManyBatch {
			if _, err := docs.PutMany(items[start:min(start+putManyBatch, len(items))]); err != nil {
				return err
			}
		}
		return nil
	}
}

// loadPutStream stores the first n records with one PutStream.
func loadPutStream(n int) func(*storh.DB, *storh.Docs) error {
	return func(_ *storh.DB, docs *storh.Docs) error {
		_, err := docs.PutStream(recordSeq(n))
		return err
	}
}

// loadPutWithIDs stores record i under ids[i] with PutWithID, putManyBatch
// records per Update.
func loadPutWithIDs(ids []uuidv7.UUID) func(*storh.DB, *storh.Docs) error {
	return func(db *storh.DB, _ *storh.Docs) error {
		for start := 0; start < len(ids); start += putManyBatch {
			err := db.Update(func(tx *storh.Tx) error {
				docs, err := tx.Docs(collName)
				if err != nil {
					return err
				}
				for i := start; i < min(start+putManyBatch, len(ids)); i++ {
					if _, err := docs.PutWithID(ids[i], record(i)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
}

func newUUID(int) uuidv7.UUID { return uuidv7.New() }

// BenchmarkBulk: load n records with PutMany (5000 per call), PutStream,
// and raw bbolt (10k per transaction, reused encoder, FillPercent 1.0).
func BenchmarkBulk(b *testing.B) {
	for _, n := range sizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			items := make([]any, n)
			for i := range items {
				items[i] = record(i)
			}
			b.Run("impl=storh-putmany", func(b *testing.B) { runBulk(b, n, storhBulk(loadPutMany(items))) })
			b.Run("impl=storh-putstream", func(b *testing.B) { runBulk(b, n, storhBulk(loadPutStream(n))) })
			b.Run("impl=bolt", func(b *testing.B) { runBulk(b, n, rawBulk(n, newUUID)) })
			// SQLite: one transaction and one prepared insert per 5000
			// records, synchronous=FULL (the setting of every SQLite row),
			// and synchronous=OFF, without fsync like the rows above.
			b.Run("impl=sqlite", func(b *testing.B) { runBulk(b, n, sqliteBulk(n, false)) })
			b.Run("impl=sqlite-nosync", func(b *testing.B) { runBulk(b, n, sqliteBulk(n, true)) })
		})
	}
}

// BenchmarkBackfill: PutWithID of n records, 5000 per transaction, with ids
// in ascending order and in random order (a back-fill of old data). The
// ratio is documentation: out-of-order keys split pages in the middle.
func BenchmarkBackfill(b *testing.B) {
	for _, n := range sizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			asc, random := fixtureIDs(n), shuffledIDs(n)
			b.Run("impl=storh-ascending", func(b *testing.B) { runBulk(b, n, storhBulk(loadPutWithIDs(asc))) })
			b.Run("impl=storh-random", func(b *testing.B) { runBulk(b, n, storhBulk(loadPutWithIDs(random))) })
			b.Run("impl=bolt-random", func(b *testing.B) {
				runBulk(b, n, rawBulk(n, func(i int) uuidv7.UUID { return random[i] }))
			})
		})
	}
}

// ---------------------------------------------------------------------------
// Reads from the fixtures (built once per size per process).

const pageSize = 100

// BenchmarkPage: 100 records after the middle id, each decoded to a map.
// ns/op is per page; it should not grow with n.
func BenchmarkPage(b *testing.B) {
	for _, n := range sizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			f := getFixture(b, n)
			mid := f.mid()
			b.Run("impl=storh", func(b *testing.B) {
				docs := f.storh(b)
				b.ReportAllocs()
				var out []storh.Map
				var err error
				for b.Loop() {
					if out, err = storhPage(docs, mid, pageSize, out); err != nil || len(out) != pageSize {
						b.Fatalf("page: %d records, %v", len(out), err)
					}
				}
			})
			b.Run("impl=storh-nodecode", func(b *testing.B) {
				// The same page without decoding: the engine's share.
				docs := f.storh(b)
				b.ReportAllocs()
				q := query.All().After(mid).Limit(pageSize)
				for b.Loop() {
					got := 0
					for r, err := range docs.Stream(q) {
						if err != nil {
							b.Fatal(err)
						}
						sinkBytes += len(r.Raw())
						got++
					}
					if got != pageSize {
						b.Fatalf("page: %d records", got)
					}
				}
			})
			b.Run("impl=storh-lend", func(b *testing.B) {
				// The same page with its bytes lent (ScanRaw), not copied
				// for the caller to keep.
				docs := f.storh(b)
				b.ReportAllocs()
				q := query.All().After(mid).Limit(pageSize)
				for b.Loop() {
					got := 0
					if err := docs.ScanRaw(q, func(_ uuidv7.UUID, raw []byte) error {
						sinkBytes += len(raw)
						got++
						return nil
					}); err != nil || got != pageSize {
						b.Fatalf("page: %d records, %v", got, err)
					}
				}
			})
			b.Run("impl=bolt", func(b *testing.B) {
				db := f.raw(b)
				b.ReportAllocs()
				var out []map[string]any
				var err error
				for b.Loop() {
					if out, err = rawPage(db, mid, pageSize, out); err != nil || len(out) != pageSize {
						b.Fatalf("page: %d records, %v", len(out), err)
					}
				}
			})
			b.Run("impl=sqlite", func(b *testing.B) {
				page := sqlitePrepare(b, sqliteEngine(b, f), sqlitePageSQL)
				b.ReportAllocs()
				var out []map[string]any
				var err error
				for b.Loop() {
					if out, err = sqlitePage(page, mid, pageSize, out); err != nil || len(out) != pageSize {
						b.Fatalf("page: %d records, %v", len(out), err)
					}
				}
			})
			b.Run("impl=bolt-copy", func(b *testing.B) {
				// Walk and copy each value out: what storh-nodecode's
				// records must cost at least, since they outlive the read.
				db := f.raw(b)
				b.ReportAllocs()
				var vals [][]byte
				var err error
				for b.Loop() {
					if vals, err = rawPageCopy(db, mid, pageSize, vals); err != nil || len(vals) != pageSize {
						b.Fatalf("page: %d records, %v", len(vals), err)
					}
					sinkBytes += len(vals[0])
				}
			})
			b.Run("impl=bolt-nodecode", func(b *testing.B) {
				db := f.raw(b)
				b.ReportAllocs()
				for b.Loop() {
					got, size, err := rawPageBytes(db, mid, pageSize)
					if err != nil || got != pageSize {
						b.Fatalf("page: %d records, %v", got, err)
					}
					sinkBytes += size
				}
			})
		})
	}
}

// BenchmarkTimeWindow: the ~200 records of a 20 ms window in the middle,
// decoded. ns/op is per window; it should not grow with n.
func BenchmarkTimeWindow(b *testing.B) {
	for _, n := range sizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			f := getFixture(b, n)
			from, until := windowMs(n)
			want := int(until-from+1) * recordsPerMs
			b.Run("impl=storh", func(b *testing.B) {
				docs := f.storh(b)
				b.ReportAllocs()
				var out []storh.Map
				var err error
				for b.Loop() {
					if out, err = storhWindow(docs, from, until, out); err != nil || len(out) != want {
						b.Fatalf("window: %d records, %v", len(out), err)
					}
				}
			})
			b.Run("impl=bolt", func(b *testing.B) {
				db := f.raw(b)
				b.ReportAllocs()
				var out []map[string]any
				var err error
				for b.Loop() {
					if out, err = rawWindow(db, from, until, out); err != nil || len(out) != want {
						b.Fatalf("window: %d records, %v", len(out), err)
					}
				}
			})
			b.Run("impl=sqlite", func(b *testing.B) {
				window := sqlitePrepare(b, sqliteEngine(b, f), sqliteWindowSQL)
				b.ReportAllocs()
				var out []map[string]any
				var err error
				for b.Loop() {
					if out, err = sqliteWindow(window, from, until, out); err != nil || len(out) != want {
						b.Fatalf("window: %d records, %v", len(out), err)
					}
				}
			})
		})
	}
}

// BenchmarkWhereEqual: an unindexed equality filter over every record (1%
// match). storh compares raw msgpack bytes; the baseline decodes each record
// into a map and compares. ns/op is per full scan.
func BenchmarkWhereEqual(b *testing.B) {
	for _, n := range sizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			f := getFixture(b, n)
			want := flaggedCount(n)
			b.Run("impl=storh", func(b *testing.B) {
				docs := f.storh(b)
				b.ReportAllocs()
				for b.Loop() {
					if got, err := storhWhere(docs, "status", flagged); err != nil || got != want {
						b.Fatalf("where: %d records, want %d, %v", got, want, err)
					}
				}
				reportRate(b, n*b.N)
			})
			b.Run("impl=bolt", func(b *testing.B) {
				db := f.raw(b)
				b.ReportAllocs()
				for b.Loop() {
					if got, err := rawWhere(db, "status", flagged); err != nil || got != want {
						b.Fatalf("where: %d records, want %d, %v", got, want, err)
					}
				}
				reportRate(b, n*b.N)
			})
			b.Run("impl=sqlite", func(b *testing.B) {
				// json_extract on the JSON copy of every record, no index.
				where := sqlitePrepare(b, sqliteEngine(b, f), sqliteWhereSQL)
				b.ReportAllocs()
				for b.Loop() {
					if got, err := sqliteWhere(where, "status", flagged); err != nil || got != want {
						b.Fatalf("where: %d records, want %d, %v", got, want, err)
					}
				}
				reportRate(b, n*b.N)
			})
		})
	}
}

// BenchmarkOpenGet: open the file, read and decode one record, close. The
// file is in the page cache (warm): this measures the work Open does, which
// must not grow with the file.
func BenchmarkOpenGet(b *testing.B) {
	for _, n := range sizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			f := getFixture(b, n)
			if err := f.release(); err != nil {
				b.Fatal(err)
			}
			mid := f.mid()
			b.Run("impl=storh", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if m, err := storhOpenGet(f.storhPath, mid); err != nil || m == nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("impl=bolt", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if m, err := rawOpenGet(f.rawPath, mid); err != nil || m == nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
