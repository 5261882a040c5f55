package storh_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
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
// benchstat.
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
	for _, feed := range []string{"off", "on"} {
		d := handles(db, feed)
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
