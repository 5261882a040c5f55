package storh_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// BenchmarkChangeFeed: what a change feed costs a durable write, on the
// backend STORH_TEST_BACKEND names (a file with fsync by default): a
// single Put and a PutMany of 1000, each into a collection without a feed
// and one with (feed=on keeps 10,000 changes, so that within a second's
// run the feed is full and trimming runs as it does in use), in the same
// run; on PostgreSQL also single Puts from four stores at once (four
// processes' worth of connections and group commits) into one collection.
// On Linux each op also reports wbytes/op, the bytes the process wrote
// (a file's pages, free of the disk's fsync noise; on PostgreSQL the
// server writes, not this process). Compare feed=off and feed=on with
// benchstat; feed=paired alternates the two op by op and reports their
// ratio (on/off), the steadier measure on a busy machine.
func BenchmarkChangeFeed(b *testing.B) {
	path := filepath.Join(b.TempDir(), "feed.db")
	if onPostgres {
		path = pgtest.SchemaURL(b)
	}
	open := func() *storh.DB {
		db, err := storh.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		return db
	}
	db := open()
	handles := func(db *storh.DB, feed string) *storh.Docs {
		var opts []storh.CollectionOption
		if feed == "on" {
			opts = append(opts, storh.WithChangeFeed(10_000))
		}
		d, err := db.Docs("feed_"+feed, opts...)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	items := make([]any, 1000)
	for i := range items {
		items[i] = writeBenchRecord(i)
	}
	offDocs, onDocs := handles(db, "off"), handles(db, "on")
	for _, feed := range []string{"off", "on"} {
		d := offDocs
		if feed == "on" {
			d = onDocs
		}
		b.Run("op=put/feed="+feed, func(b *testing.B) {
			b.ReportAllocs()
			w := startWritten(b)
			for b.Loop() {
				if _, err := d.Put(items[7]); err != nil {
					b.Fatal(err)
				}
			}
			w.report()
		})
		b.Run("op=putmany1000/feed="+feed, func(b *testing.B) {
			b.ReportAllocs()
			w := startWritten(b)
			for b.Loop() {
				if _, err := d.PutMany(items); err != nil {
					b.Fatal(err)
				}
			}
			w.report()
		})
	}
	// feed=paired: each op writes into both collections, one after the
	// other, and reports the time of each and their ratio. The runs above
	// measure one after the other, and a later one meets a larger
	// database and a busier server (on PostgreSQL that moved the ratio by
	// as much as the feed costs); here both share every moment's noise.
	paired := func(b *testing.B, write func(d *storh.Docs) error) {
		pair := [2]*storh.Docs{offDocs, onDocs}
		var took [2]time.Duration
		for i := 0; b.Loop(); i++ {
			for j := range pair {
				k := (i + j) % 2 // each goes first every other op
				start := time.Now()
				if err := write(pair[k]); err != nil {
					b.Fatal(err)
				}
				took[k] += time.Since(start)
			}
		}
		b.ReportMetric(float64(took[0].Nanoseconds())/float64(b.N), "off-ns/op")
		b.ReportMetric(float64(took[1].Nanoseconds())/float64(b.N), "on-ns/op")
		b.ReportMetric(float64(took[1])/float64(took[0]), "on/off")
	}
	b.Run("op=put/feed=paired", func(b *testing.B) {
		paired(b, func(d *storh.Docs) error { _, err := d.Put(items[7]); return err })
	})
	b.Run("op=putmany1000/feed=paired", func(b *testing.B) {
		paired(b, func(d *storh.Docs) error { _, err := d.PutMany(items); return err })
	})
	if !onPostgres {
		return
	}
	const stores = 4
	dbs := []*storh.DB{db}
	for len(dbs) < stores {
		dbs = append(dbs, open())
	}
	for _, feed := range []string{"off", "on"} {
		var ds []*storh.Docs
		for _, db := range dbs {
			ds = append(ds, handles(db, feed))
		}
		b.Run(fmt.Sprintf("op=put/stores=%d/feed=%s", stores, feed), func(b *testing.B) {
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, d := range ds {
				for range 4 {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							if _, err := d.Put(items[7]); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// written counts the bytes the process writes during a benchmark (wchar of
// /proc/self/io, Linux only: elsewhere nothing is reported).
type written struct {
	b     *testing.B
	start int64
	ok    bool
}

func startWritten(b *testing.B) written {
	n, ok := bytesWritten()
	return written{b: b, start: n, ok: ok}
}

func (w written) report() {
	if n, ok := bytesWritten(); ok && w.ok && w.b.N > 0 {
		w.b.ReportMetric(float64(n-w.start)/float64(w.b.N), "wbytes/op")
	}
}

func bytesWritten() (int64, bool) {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// BenchmarkChangesRead: what reading a feed costs, per change, on the
// backend STORH_TEST_BACKEND names: a reader of 10,000 changes from the
// start, made by PutMany batches of inserts (shape=inserts) and by the
// same inserts, each record then replaced once (shape=replaced: half the
// puts' records are the values later writes kept as they overwrote them).
func BenchmarkChangesRead(b *testing.B) {
	path := filepath.Join(b.TempDir(), "read.db")
	if onPostgres {
		path = pgtest.SchemaURL(b)
	}
	db, err := storh.Open(path, storh.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, shape := range []string{"inserts", "replaced"} {
		d, err := db.Docs("read_"+shape, storh.WithChangeFeed(20_000))
		if err != nil {
			b.Fatal(err)
		}
		items := make([]any, 1000)
		for i := range items {
			items[i] = writeBenchRecord(i)
		}
		n := 10_000
		if shape == "replaced" {
			n = 5_000
		}
		var ids []uuidv7.UUID
		for len(ids) < n {
			recs, err := d.PutMany(items)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range recs {
				ids = append(ids, r.ID)
			}
		}
		if shape == "replaced" {
			for i := 0; i < len(ids); i += 1000 {
				err := db.Update(func(tx *storh.Tx) error {
					td, err := tx.Docs("read_" + shape)
					if err != nil {
						return err
					}
					for j, id := range ids[i:min(i+1000, len(ids))] {
						if _, err := td.PutWithID(id, items[j]); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		last, err := d.LastSeq()
		if err != nil || last != 10_000 {
			b.Fatalf("LastSeq = %d, %v; want 10,000", last, err)
		}
		b.Run("shape="+shape, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				for ev, err := range d.Changes(ctx, 0) {
					if err != nil {
						b.Fatal(err)
					}
					if ev.Seq == last {
						break
					}
				}
				cancel()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(last), "ns/change")
		})
	}
}
