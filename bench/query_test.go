package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/timshannon/bolthold"
	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// Secondary indexes and queries: storh against bolthold, the query layer
// most used on bbolt, on the same records (query_fixtures_test.go) in the
// same run. Every benchmark checks its answer (the same ids, or the same
// count, as computed from the record definitions) outside the timed loop.

// ---------------------------------------------------------------------------
// The queries, each side written the way its documentation shows.

var (
	qEqStatus = query.All().Where(query.Field("status").Eq(qPending)).Limit(qLimit)
	qEqUser   = query.All().Where(query.Field("user").Eq(qUserProbe)).Limit(qLimit)
	qRange    = query.All().Where(query.Field("score").Between(int64(scoreLo), int64(scoreHi))).
			OrderBy("score", query.Asc).Limit(qLimit)
	qCountFlagged = query.All().Where(query.Field("status").Eq(qFlagged))
)

func bhEqStatus() *bolthold.Query {
	return bolthold.Where("Status").Eq(qPending).Index("Status").Limit(qLimit)
}

func bhEqUser() *bolthold.Query {
	return bolthold.Where("User").Eq(qUserProbe).Index("User").Limit(qLimit)
}

func bhRange() *bolthold.Query {
	return bolthold.Where("Score").Ge(int64(scoreLo)).And("Score").Le(int64(scoreHi)).
		Index("Score").SortBy("Score").Limit(qLimit)
}

// storhFind runs q and decodes every record into out, as bolthold's Find
// does.
func storhFind(docs *storh.Docs, q query.Query, out []qRecord) ([]qRecord, []uuidv7.UUID, error) {
	recs, err := docs.Find(q)
	if err != nil {
		return out, nil, err
	}
	out = out[:0]
	ids := make([]uuidv7.UUID, len(recs))
	for i, r := range recs {
		var x qRecord
		if err := r.Decode(&x); err != nil {
			return out, nil, err
		}
		out = append(out, x)
		ids[i] = r.ID
	}
	return out, ids, nil
}

func bhIDs(recs []qRecord) []uuidv7.UUID {
	ids := make([]uuidv7.UUID, len(recs))
	for i, r := range recs {
		copy(ids[i][:], r.ID)
	}
	return ids
}

// checkIDs fails unless got is want, in order.
func checkIDs(tb testing.TB, what string, got, want []uuidv7.UUID) {
	tb.Helper()
	if !slices.Equal(got, want) {
		tb.Fatalf("%s: %d ids, want %d (first differing at %d)", what, len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []uuidv7.UUID) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// checkRecords fails unless recs are records ids, decoded in full.
func checkRecords(tb testing.TB, f *qFixture, recs []qRecord, ids []uuidv7.UUID) {
	tb.Helper()
	pos := f.positions()
	for j, r := range recs {
		want := qrec(pos[ids[j]])
		r.ID = nil
		if !r.Created.Equal(want.Created) {
			tb.Fatalf("record %d: created %v, want %v", j, r.Created, want.Created)
		}
		r.Created = want.Created
		if !reflect.DeepEqual(r, want) {
			tb.Fatalf("record %d: %+v, want %+v", j, r, want)
		}
	}
}

// checkPlan fails unless storh answers q through index, without sorting
// in memory, and, through an index, reads no key that its record then fails
// (the index alone decides the condition); index "" wants a scan.
func checkPlan(tb testing.TB, docs *storh.Docs, q query.Query, index string) storh.Plan {
	tb.Helper()
	p, err := docs.Explain(q)
	if err != nil {
		tb.Fatal(err)
	}
	if (index == "" && len(p.Indexes) != 0) || (index != "" && !slices.Equal(p.Indexes, []string{index})) || p.Sorted {
		tb.Fatalf("%s: plan %s, want index %q and no sort", q, p, index)
	}
	if index != "" && (p.KeysRead != p.Returned || p.RecordsRead != p.Returned) {
		tb.Fatalf("%s: plan %s reads more than it returns", q, p)
	}
	return p
}

// ---------------------------------------------------------------------------
// Reads.

// runFind benchmarks one query on every side at every size: storh's Find
// plus a decode of each record into qRecord, bolthold's Find into
// []qRecord, and SQLite's SELECT (sq) with each JSON document decoded
// into qRecord. ns/op is per query.
func runFind(b *testing.B, q query.Query, bq func() *bolthold.Query, sq sqliteFind, index string,
	want func(f *qFixture) []uuidv7.UUID) {
	for _, n := range sizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			f := getQFixture(b, n)
			expect := want(f)
			b.Run("impl=storh", func(b *testing.B) {
				_, docs := f.storh(b, 3)
				checkPlan(b, docs, q, index)
				var out []qRecord
				var ids []uuidv7.UUID
				var err error
				b.ReportAllocs()
				for b.Loop() {
					if out, ids, err = storhFind(docs, q, out); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				checkIDs(b, q.String(), ids, expect)
				checkRecords(b, f, out, ids)
			})
			b.Run("impl=bolthold", func(b *testing.B) {
				s := f.bolthold(b)
				var out []qRecord
				b.ReportAllocs()
				for b.Loop() {
					out = out[:0]
					if err := s.Find(&out, bq()); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				ids := bhIDs(out)
				checkIDs(b, bq().String(), ids, expect)
				checkRecords(b, f, out, ids)
			})
			b.Run("impl=sqlite", func(b *testing.B) {
				db := sqliteQuery(b, f)
				checkSQLitePlan(b, db, sq)
				st := sqlitePrepare(b, db, sq.query)
				var out []qRecord
				var err error
				b.ReportAllocs()
				for b.Loop() {
					if out, err = sqliteFindRecords(st, sq.args, out); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				ids := bhIDs(out)
				checkIDs(b, sq.query, ids, expect)
				checkRecords(b, f, out, ids)
			})
		})
	}
}

// BenchmarkQueryEq: equality on an indexed field, limit 100, records
// decoded. field=status matches ~11% of the records (bolthold decodes the
// whole key list of the value, n/9 keys, before reading the first record);
// field=user matches n/1000 (10 records at 10k, so fewer than the limit).
func BenchmarkQueryEq(b *testing.B) {
	b.Run("field=status", func(b *testing.B) {
		runFind(b, qEqStatus, bhEqStatus, sqlEqStatus, "status", func(f *qFixture) []uuidv7.UUID {
			return qFirstIDs(f.ids, qLimit, func(i int) bool { return qStatus(i) == qPending })
		})
	})
	b.Run("field=user", func(b *testing.B) {
		runFind(b, qEqUser, bhEqUser, sqlEqUser, "user", func(f *qFixture) []uuidv7.UUID {
			return qFirstIDs(f.ids, qLimit, func(i int) bool { return qUser(i) == qUserProbe })
		})
	})
}

// BenchmarkQueryRange: a range on the indexed score (~10% of the records)
// ordered by score, limit 100, records decoded. storh walks the index in
// order and stops after 100; bolthold walks every index key, reads the
// matching records, sorts them all and keeps 100. storh's ns/op should
// not grow with n.
func BenchmarkQueryRange(b *testing.B) {
	runFind(b, qRange, bhRange, sqlRange, "score", func(f *qFixture) []uuidv7.UUID { return qRangeIDs(f.ids, qLimit) })
}

// BenchmarkQueryCount: how many records are flagged (1%), four ways:
// storh's CountMatching through the status index (it counts index keys and
// reads no record, which Explain confirms); the same call on a collection
// without indexes (a scan that compares raw bytes); bolthold's Count with
// its index (it reads and decodes each matching record) and without (it
// decodes every record). ns/op is per count; records/s is n per second.
func BenchmarkQueryCount(b *testing.B) {
	for _, n := range sizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			f := getQFixture(b, n)
			want := qFlaggedCount(n)
			storhCount := func(b *testing.B, k int, index string) {
				_, docs := f.storh(b, k)
				// Explain runs the query as Stream does, which reads the
				// records it returns; through the index it reads no other,
				// and CountMatching does not read those either
				// (TestCountMatchingReadsNoRecord).
				p := checkPlan(b, docs, qCountFlagged, index)
				if p.Returned != want || (index == "" && p.RecordsRead != n) {
					b.Fatalf("plan %s: want %d returned", p, want)
				}
				got := 0
				var err error
				b.ReportAllocs()
				for b.Loop() {
					if got, err = docs.CountMatching(qCountFlagged); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if got != want {
					b.Fatalf("CountMatching = %d, want %d", got, want)
				}
				reportRate(b, n*b.N)
			}
			bhCount := func(b *testing.B, q func() *bolthold.Query) {
				s := f.bolthold(b)
				got := 0
				var err error
				b.ReportAllocs()
				for b.Loop() {
					if got, err = s.Count(&qRecord{}, q()); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if got != want {
					b.Fatalf("Count = %d, want %d", got, want)
				}
				reportRate(b, n*b.N)
			}
			b.Run("impl=storh", func(b *testing.B) { storhCount(b, 3, "status") })
			b.Run("impl=storh-scan", func(b *testing.B) { storhCount(b, 0, "") })
			b.Run("impl=bolthold", func(b *testing.B) {
				bhCount(b, func() *bolthold.Query { return bolthold.Where("Status").Eq(qFlagged).Index("Status") })
			})
			b.Run("impl=bolthold-scan", func(b *testing.B) {
				bhCount(b, func() *bolthold.Query { return bolthold.Where("Status").Eq(qFlagged) })
			})
			b.Run("impl=sqlite", func(b *testing.B) {
				// count(*) through the expression index on status.
				db := sqliteQuery(b, f)
				checkSQLitePlan(b, db, sqlCountFlagged)
				st := sqlitePrepare(b, db, sqlCountFlagged.query)
				got := 0
				b.ReportAllocs()
				for b.Loop() {
					if err := st.QueryRow(sqlCountFlagged.args...).Scan(&got); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if got != want {
					b.Fatalf("count = %d, want %d", got, want)
				}
				reportRate(b, n*b.N)
			})
		})
	}
}

// BenchmarkIndexBytes reports the disk space of the indexes: the file with
// the three indexes minus the same records without them, per index entry
// (one per record per index; storh's count comes from Indexes()). B/entry
// compares the files as loaded (without fsync, so never grown past the
// pages written), free pages included: storh's were loaded with the
// indexes maintained on every write, bolthold's written once by the fixture
// writer. B/entry-compact compares the pages in use in compacted copies
// (live pages only, packed full by bbolt's Compact on both sides). The measured op is the
// statistics call (db.Stats and Indexes for storh, two stats of files for
// bolthold); the metrics are the point.
func BenchmarkIndexBytes(b *testing.B) {
	for _, n := range sizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			f := getQFixture(b, n)
			b.Run("impl=storh", func(b *testing.B) {
				compact := float64(f.compactedStorh(b, 3) - f.compactedStorh(b, 0))
				db3, docs3 := f.storh(b, 3)
				db0, _ := f.storh(b, 0)
				var with, without int64
				var entries int64
				for b.Loop() {
					s3, err := db3.Stats()
					if err != nil {
						b.Fatal(err)
					}
					s0, err := db0.Stats()
					if err != nil {
						b.Fatal(err)
					}
					ixs, err := docs3.Indexes()
					if err != nil {
						b.Fatal(err)
					}
					with, without, entries = s3.FileSize, s0.FileSize, 0
					for _, ix := range ixs {
						entries += int64(ix.Entries)
					}
				}
				b.StopTimer()
				if entries != int64(3*n) {
					b.Fatalf("%d index entries, want %d", entries, 3*n)
				}
				b.ReportMetric(float64(with-without)/float64(entries), "B/entry")
				b.ReportMetric(compact/float64(entries), "B/entry-compact")
				b.ReportMetric(float64(without)/float64(n), "B/record")
			})
			b.Run("impl=bolthold", func(b *testing.B) {
				compact := float64(f.compactedBolthold(b, true) - f.compactedBolthold(b, false))
				s := f.bolthold(b)
				plain := f.boltholdFile(b, false)
				entries := 0
				if err := s.Bolt().View(func(tx *bolt.Tx) error {
					for _, name := range bhIndexNames {
						var err error
						if entries, err = bhEntries(tx, name, entries); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				if entries != 3*n {
					b.Fatalf("%d index entries, want %d", entries, 3*n)
				}
				var with, without int64
				for b.Loop() {
					st, err := os.Stat(s.Bolt().Path())
					if err != nil {
						b.Fatal(err)
					}
					st0, err := os.Stat(plain)
					if err != nil {
						b.Fatal(err)
					}
					with, without = st.Size(), st0.Size()
				}
				b.StopTimer()
				b.ReportMetric(float64(with-without)/float64(entries), "B/entry")
				b.ReportMetric(compact/float64(entries), "B/entry-compact")
				b.ReportMetric(float64(without)/float64(n), "B/record")
			})
		})
	}
}

// bhEntries adds to sum the keys listed by every entry of one bolthold
// index.
func bhEntries(tx *bolt.Tx, name string, sum int) (int, error) {
	b := tx.Bucket(bhIndexBucket(name))
	if b == nil {
		return sum, fmt.Errorf("no bolthold index %s", name)
	}
	err := b.ForEach(func(_, v []byte) error {
		var keys keyList
		if err := bolthold.DefaultDecode(v, &keys); err != nil {
			return err
		}
		sum += len(keys)
		return nil
	})
	return sum, err
}

// ---------------------------------------------------------------------------
// Writes.

const (
	insertBase  = 100_000 // records in the collection before the inserts
	insertBatch = 1000    // records per op, one durable transaction
	// insertReset: every this many batches bolthold's file is restored to
	// its insertBase records (outside the timer), so that its collection
	// stays between 100k and 110k records however long the benchmark runs.
	insertReset = 10
	// insertPlain is how many batches one op of storh without indexes
	// writes: about as many as a fold cycle of the indexed rows.
	insertPlain = 100
)

// BenchmarkIndexedInsert: durable batches of 1000 new records into a
// collection of 100k and more: storh's PutMany with the three indexes, of
// map records (the fixture's form) and of the structs bolthold gets
// (stored with the same bytes), and of maps with 0, 1 and 2 indexes, to
// price each index; bolthold's transaction of 1000 TxInserts with its
// three. Compare ns/record (and ns/batch), not ns/op.
//
// A blocked index journals each commit's changes and folds them into its
// blocks once the journal holds as many changes as the blocks held
// entries (docs/indexes.md), so a storh op is one whole fold cycle: from
// the end of one fold to the end of the next, every fold's cost included.
// The file is the 100k fixture at the start of each op; the cycle's first
// fold comes within ~100 batches (untimed), the next after as many
// batches as the blocks then hold thousands of entries (timed). Without
// indexes an op is insertPlain batches.
func BenchmarkIndexedInsert(b *testing.B) {
	n := insertBase
	b.Run(sizeName(n), func(b *testing.B) {
		f := getQFixture(b, n)
		// insertReset batches of new records, used in turn. Their ids are
		// generated at insert time: later than the fixture's, so they
		// append, as new records do.
		maps := make([][]any, insertReset)
		structs := make([][]any, insertReset) // the qRecords bolthold gets
		for op := range insertReset {
			for j := range insertBatch {
				i := n + op*insertBatch + j
				maps[op] = append(maps[op], qmap(i))
				structs[op] = append(structs[op], qrec(i))
			}
		}
		storhInsert := func(k int, items [][]any) func(b *testing.B) {
			return func(b *testing.B) {
				base := f.storhFile(b, k)
				work := filepath.Join(b.TempDir(), "work.db")
				var io ioTotals
				batches, cycles := 0, 0
				b.ReportAllocs()
				b.ResetTimer()
				for op := 0; op < b.N; op++ {
					b.StopTimer()
					if err := copyFileSync(base, work); err != nil {
						b.Fatal(err)
					}
					db, err := storh.Open(work)
					if err != nil {
						b.Fatal(err)
					}
					docs, err := db.Docs(qColl, qIndexOptions(k)...)
					if err != nil {
						b.Fatal(err)
					}
					put := func() {
						if _, err := docs.PutMany(items[batches%insertReset]); err != nil {
							b.Fatal(err)
						}
					}
					count := n
					if k > 0 {
						// Up to the end of the first fold, untimed.
						for folds := journaled(b, docs); ; {
							put()
							count += insertBatch
							if now := journaled(b, docs); now < folds {
								break
							} else {
								folds = now
							}
						}
					}
					before, _ := db.Stats()
					b.StartTimer()
					if k == 0 {
						for range insertPlain {
							put()
							batches++
						}
						count += insertPlain * insertBatch
					} else {
						for last := journaled(b, docs); ; {
							put()
							batches++
							count += insertBatch
							now := journaled(b, docs)
							if now < last {
								break // the next fold has run
							}
							last = now
						}
						cycles++
					}
					b.StopTimer()
					after, _ := db.Stats()
					io.writes += after.PageWrites - before.PageWrites
					io.io += after.CommitIOTime - before.CommitIOTime
					checkInsert(b, docs, k, count)
					if err := db.Close(); err != nil {
						b.Fatal(err)
					}
				}
				records := batches * insertBatch
				reportRate(b, records)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/record")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(batches), "ns/batch")
				b.ReportMetric(float64(io.writes)/float64(batches), "writes/commit")
				b.ReportMetric(float64(io.io.Microseconds())/float64(batches), "io-µs/commit")
				if cycles > 0 {
					b.ReportMetric(float64(batches)/float64(cycles), "batches/cycle")
				}
			}
		}
		b.Run("impl=storh", storhInsert(3, maps))
		b.Run("impl=storh-struct", storhInsert(3, structs))
		for k := range 3 {
			b.Run(fmt.Sprintf("impl=storh-idx%d", k), storhInsert(k, maps))
		}
		b.Run("impl=bolthold", func(b *testing.B) {
			base := f.boltholdFile(b, true)
			work := filepath.Join(b.TempDir(), "work.db")
			var s *bolthold.Store
			var io ioTotals
			reset := func() {
				if s != nil {
					io.addBolt(s.Bolt())
					if err := s.Close(); err != nil {
						b.Fatal(err)
					}
				}
				if err := copyFileSync(base, work); err != nil {
					b.Fatal(err)
				}
				var err error
				if s, err = bolthold.Open(work, 0o600, bhOptions(false)); err != nil {
					b.Fatal(err)
				}
			}
			reset()
			defer func() { s.Close() }()
			b.ReportAllocs()
			b.ResetTimer()
			for op := 0; op < b.N; op++ {
				if op > 0 && op%insertReset == 0 {
					b.StopTimer()
					reset()
					b.StartTimer()
				}
				batch := structs[op%insertReset]
				err := s.Bolt().Update(func(tx *bolt.Tx) error {
					for j := range batch {
						id := uuidv7.New()
						if err := s.TxInsert(tx, id[:], batch[j]); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			io.addBolt(s.Bolt())
			reportInsert(b, io)
			want := n + ((b.N-1)%insertReset+1)*insertBatch
			if err := s.Bolt().View(func(tx *bolt.Tx) error {
				if got := tx.Bucket([]byte(bhType)).Stats().KeyN; got != want {
					return fmt.Errorf("%d records, want %d", got, want)
				}
				for _, name := range bhIndexNames {
					got, err := bhEntries(tx, name, 0)
					if err != nil {
						return err
					}
					if got != want {
						return fmt.Errorf("index %s lists %d keys, want %d", name, got, want)
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// ioTotals adds up the commit statistics of the handles a write benchmark
// opens one after another (each counts from its Open).
type ioTotals struct {
	writes int64
	io     time.Duration
}

func (t *ioTotals) addStorh(tb testing.TB, db *storh.DB) {
	st, err := db.Stats()
	if err != nil {
		tb.Fatal(err)
	}
	t.writes += st.PageWrites
	t.io += st.CommitIOTime
}

func (t *ioTotals) addBolt(db *bolt.DB) {
	ts := db.Stats().TxStats
	t.writes += ts.GetWrite()
	t.io += ts.GetWriteTime()
}

// reportInsert adds ns/record, ns/batch, records/s, and per op (one
// commit) the page writes and the time bbolt spent writing and syncing
// them.
func reportInsert(b *testing.B, t ioTotals) {
	records := b.N * insertBatch
	reportRate(b, records)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/record")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/batch")
	b.ReportMetric(float64(t.writes)/float64(b.N), "writes/commit")
	b.ReportMetric(float64(t.io.Microseconds())/float64(b.N), "io-µs/commit")
}

// journaled returns the changes the first index of docs has journaled and
// not folded: it drops when a fold has run (the indexes of the insert
// benchmarks hold an entry per record each, so they fold together).
func journaled(b *testing.B, docs *storh.Docs) int {
	ixs, err := docs.Indexes()
	if err != nil || len(ixs) == 0 {
		b.Fatalf("Indexes = %v, %v", ixs, err)
	}
	if ixs[0].Layout != "blocks" {
		b.Fatalf("index %s is in layout %q, want blocks", ixs[0].Name, ixs[0].Layout)
	}
	return ixs[0].Journaled
}

// checkInsert checks, outside the timer, that every batch landed with its
// entries.
func checkInsert(b *testing.B, docs *storh.Docs, k, want int) {
	if got, err := docs.Count(); err != nil || got != want {
		b.Fatalf("Count = %d, %v; want %d", got, err, want)
	}
	ixs, err := docs.Indexes()
	if err != nil || len(ixs) != k {
		b.Fatalf("%d indexes, %v; want %d", len(ixs), err, k)
	}
	for _, ix := range ixs {
		if ix.Entries != want {
			b.Fatalf("index %s has %d entries, want %d", ix.Name, ix.Entries, want)
		}
	}
}
