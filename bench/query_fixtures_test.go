package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/timshannon/bolthold"
	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The data of the query benchmarks (query_test.go): records of ten fields,
// about 200 bytes of msgpack, three of them indexed:
//
//   - status, for equality: ten values; "flagged" is exactly 1% of the
//     records (i%100 == 50), the nine others ~11% each;
//   - user, for equality: a thousand values, each n/1000 of the records;
//   - score, for ranges: an integer, distinct in every record (a
//     multiplicative permutation of i modulo a prime above 1M), so that a
//     range ordered by score has exactly one right answer.
//
// storh stores them as map records keyed by the fixture ids; bolthold as
// the struct qRecord under the same ids (16-byte []byte keys), with its
// three indexes declared by struct tags, gob encoding (its default) and the
// same bbolt options as the raw baseline.
const (
	qColl = "q"

	qFlagged   = "flagged"
	qPending   = "pending"     // one of the nine common statuses
	qUserProbe = "user-000123" // n/1000 records
	qLimit     = 100

	scorePrime = 1_000_003 // prime, above the largest fixture
	scoreMult  = 48_271
	// The range query: ~10% of the records at every size.
	scoreLo, scoreHi = 400_000, 499_999

	qNote = "lorem ipsum dolor sit amet, consectetur adipiscing el"
)

var qStatuses = [...]string{"running", qPending, "stopped", "waiting", "blocked", "expired", "created", "deleted", "invited"}

// qRecord is one record as bolthold stores it (and as both sides decode
// results). ID is bolthold's key field: left empty on insert (gob then
// omits it), filled from the key by Find.
type qRecord struct {
	ID      []byte    `msgpack:"-" boltholdKey:"ID"`
	Status  string    `msgpack:"status" boltholdIndex:"Status"`
	User    string    `msgpack:"user" boltholdIndex:"User"`
	Score   int64     `msgpack:"score" boltholdIndex:"Score"`
	Email   string    `msgpack:"email"`
	Country string    `msgpack:"country"`
	Age     int64     `msgpack:"age"`
	Visits  int64     `msgpack:"visits"`
	Active  bool      `msgpack:"active"`
	Created time.Time `msgpack:"created"`
	Note    string    `msgpack:"note"`
}

func qStatus(i int) string {
	if i%100 == 50 {
		return qFlagged
	}
	return qStatuses[i%len(qStatuses)]
}

func qUser(i int) string { return fmt.Sprintf("user-%06d", i*37%1000) }

func qScore(i int) int64 { return int64(i) * scoreMult % scorePrime }

// qrec returns record i as a struct.
func qrec(i int) qRecord {
	return qRecord{
		Status:  qStatus(i),
		User:    qUser(i),
		Score:   qScore(i),
		Email:   fmt.Sprintf("user%07d@example.com", i),
		Country: countries[i%len(countries)],
		Age:     int64(18 + i%60),
		Visits:  int64(1000 + i*37%9000),
		Active:  i%3 != 2,
		Created: time.UnixMilli(baseMs + int64(i/recordsPerMs)).UTC(),
		Note:    qNote,
	}
}

// qmap returns record i as the map storh is given: the same fields under
// the struct's msgpack names, so it is stored with the same bytes.
func qmap(i int) map[string]any {
	r := qrec(i)
	return map[string]any{
		"status":  r.Status,
		"user":    r.User,
		"score":   r.Score,
		"email":   r.Email,
		"country": r.Country,
		"age":     r.Age,
		"visits":  r.Visits,
		"active":  r.Active,
		"created": r.Created,
		"note":    r.Note,
	}
}

// The storh indexes, in the order the insert benchmark adds them.
var qIndexNames = [...]string{"status", "user", "score"}

func qIndexOptions(k int) []storh.CollectionOption {
	opts := make([]storh.CollectionOption, k)
	for j := range k {
		opts[j] = storh.WithIndex(storh.Index(qIndexNames[j]))
	}
	return opts
}

// bolthold's names: the bucket of the records is the type's name, each
// index a root bucket "_index:<type>:<index name>".
const bhType = "qRecord"

var bhIndexNames = [...]string{"Status", "User", "Score"}

func bhIndexBucket(name string) []byte { return []byte("_index:" + bhType + ":" + name) }

// keyList is bolthold's index value: the sorted gob-encoded keys of the
// records holding one value. The name matters: gob writes it.
type keyList [][]byte

func bhOptions(noSync bool) *bolthold.Options {
	return &bolthold.Options{Options: rawOptions(noSync)}
}

// ---------------------------------------------------------------------------
// Fixtures, built once per size per process, in the engine fixtures'
// temporary directory.

type qFixture struct {
	n   int
	ids []uuidv7.UUID
	dir string

	mu        sync.Mutex
	storhPath [4]string // by number of indexes; "" until built
	dbs       [4]*storh.DB
	docs      [4]*storh.Docs
	bhPath    [2]string // 0: records only, 1: with the three indexes
	bh        *bolthold.Store
	pos       map[uuidv7.UUID]int
	compacted map[string]int64 // path → size of its compacted copy
}

// positions maps each fixture id to its record number.
func (f *qFixture) positions() map[uuidv7.UUID]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pos == nil {
		f.pos = make(map[uuidv7.UUID]int, len(f.ids))
		for i, id := range f.ids {
			f.pos[id] = i
		}
	}
	return f.pos
}

var qCache struct {
	mu       sync.Mutex
	fixtures map[int]*qFixture
}

func getQFixture(tb testing.TB, n int) *qFixture {
	dir := tempDir(tb)
	qCache.mu.Lock()
	defer qCache.mu.Unlock()
	if f, ok := qCache.fixtures[n]; ok {
		return f
	}
	f := &qFixture{n: n, ids: fixtureIDs(n), dir: dir}
	if qCache.fixtures == nil {
		qCache.fixtures = map[int]*qFixture{}
	}
	qCache.fixtures[n] = f
	return f
}

// storhFile returns the path of the storh file with the first k indexes,
// building it the first time: PutStream of the n records, indexes declared
// before, without fsync.
func (f *qFixture) storhFile(tb testing.TB, k int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.storhPath[k] != "" {
		return f.storhPath[k]
	}
	path := filepath.Join(f.dir, fmt.Sprintf("q-storh-idx%d-%d.db", k, f.n))
	if err := buildQStorh(path, f.ids, k); err != nil {
		tb.Fatalf("building %s: %v", path, err)
	}
	f.storhPath[k] = path
	return path
}

func buildQStorh(path string, ids []uuidv7.UUID, k int) error {
	db, err := storh.Open(path, storh.WithoutSync())
	if err != nil {
		return err
	}
	docs, err := db.Docs(qColl, qIndexOptions(k)...)
	if err == nil {
		_, err = docs.PutStream(func(yield func(any) bool) {
			for i, id := range ids {
				if !yield(storh.Entry{ID: id, Data: qmap(i)}) {
					return
				}
			}
		})
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// storh returns the collection of the storh file with k indexes, opened
// once (durable options: reads do not care).
func (f *qFixture) storh(tb testing.TB, k int) (*storh.DB, *storh.Docs) {
	path := f.storhFile(tb, k)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.docs[k] == nil {
		db, err := storh.Open(path)
		if err != nil {
			tb.Fatal(err)
		}
		docs, err := db.Docs(qColl)
		if err != nil {
			tb.Fatal(err)
		}
		f.dbs[k], f.docs[k] = db, docs
	}
	return f.dbs[k], f.docs[k]
}

// boltholdFile returns the path of the bolthold file, with its indexes or
// without, building it the first time.
//
// bolthold keeps one index entry per distinct value holding the sorted list
// of every key with that value, and Insert decodes, extends and re-encodes
// that list: loading n records costs O(n²) (100k records took 6 minutes
// here, 1M would take hours). So the fixture writes bolthold's format
// directly: the same buckets, keys and values, byte for byte, that Insert
// writes (TestBoltholdFixtureIsInsert checks it against real Inserts).
func (f *qFixture) boltholdFile(tb testing.TB, indexed bool) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := 0
	if indexed {
		j = 1
	}
	if f.bhPath[j] != "" {
		return f.bhPath[j]
	}
	path := filepath.Join(f.dir, fmt.Sprintf("q-bolthold-idx%d-%d.db", 3*j, f.n))
	if err := buildBolthold(path, f.ids, indexed); err != nil {
		tb.Fatalf("building %s: %v", path, err)
	}
	f.bhPath[j] = path
	return path
}

// buildBolthold writes records i under ids[i] as bolthold.Insert would:
// key and value gob-encoded by bolthold's own encoder, one index bucket per
// indexed field mapping each encoded value to the keyList of its records.
// Records go in transactions of rawTxRecords (bolthold sets no
// FillPercent, so neither does this), then the index entries.
func buildBolthold(path string, ids []uuidv7.UUID, indexed bool) error {
	db, err := bolt.Open(path, 0o600, rawOptions(true))
	if err != nil {
		return err
	}
	lists := make([]map[string]keyList, len(bhIndexNames))
	for j := range lists {
		lists[j] = map[string]keyList{}
	}
	for start := 0; start < len(ids) && err == nil; start += rawTxRecords {
		err = db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte(bhType))
			if err != nil {
				return err
			}
			for i := start; i < min(start+rawTxRecords, len(ids)); i++ {
				k, err := bolthold.DefaultEncode(ids[i][:])
				if err != nil {
					return err
				}
				r := qrec(i)
				v, err := bolthold.DefaultEncode(r)
				if err != nil {
					return err
				}
				if err := b.Put(k, v); err != nil {
					return err
				}
				if !indexed {
					continue
				}
				for j, fv := range []any{r.Status, r.User, r.Score} {
					ik, err := bolthold.DefaultEncode(fv)
					if err != nil {
						return err
					}
					lists[j][string(ik)] = append(lists[j][string(ik)], k)
				}
			}
			return nil
		})
	}
	for j, name := range bhIndexNames {
		if err != nil || !indexed {
			break
		}
		// In key order and in bounded transactions: bbolt splits nodes
		// only at commit, and inserting a million keys at random places
		// of one node moves the node's tail each time.
		values := make([]string, 0, len(lists[j]))
		for ik := range lists[j] {
			values = append(values, ik)
		}
		slices.Sort(values)
		for start := 0; start < len(values) && err == nil; start += rawTxRecords {
			err = db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucketIfNotExists(bhIndexBucket(name))
				if err != nil {
					return err
				}
				for _, ik := range values[start:min(start+rawTxRecords, len(values))] {
					keys := lists[j][ik]
					slices.SortFunc(keys, bytes.Compare)
					v, err := bolthold.DefaultEncode(keys)
					if err != nil {
						return err
					}
					if err := b.Put([]byte(ik), v); err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// bolthold returns the indexed bolthold store, opened once, durable.
func (f *qFixture) bolthold(tb testing.TB) *bolthold.Store {
	path := f.boltholdFile(tb, true)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bh == nil {
		s, err := bolthold.Open(path, 0o600, bhOptions(false))
		if err != nil {
			tb.Fatal(err)
		}
		f.bh = s
	}
	return f.bh
}

// compactedStorh closes the handles on the storh file with k indexes and
// returns the bytes in use in its compacted copy (storh.Compact: live pages
// only, packed full; the file itself grows in steps of up to 16 MiB, too
// coarse to compare), computed once.
func (f *qFixture) compactedStorh(tb testing.TB, k int) int64 {
	path := f.storhFile(tb, k)
	f.mu.Lock()
	defer f.mu.Unlock()
	if size, ok := f.compacted[path]; ok {
		return size
	}
	if f.dbs[k] != nil {
		if err := f.dbs[k].Close(); err != nil {
			tb.Fatal(err)
		}
		f.dbs[k], f.docs[k] = nil, nil
	}
	dst := path + ".compact"
	rep, err := storh.Compact(path, dst)
	if err != nil {
		tb.Fatal(err)
	}
	os.Remove(dst)
	f.setCompacted(path, rep.DstInUse)
	return rep.DstInUse
}

// compactedBolthold is compactedStorh for the bolthold files, with bbolt's
// Compact (which storh.Compact calls too).
func (f *qFixture) compactedBolthold(tb testing.TB, indexed bool) int64 {
	path := f.boltholdFile(tb, indexed)
	f.mu.Lock()
	defer f.mu.Unlock()
	if size, ok := f.compacted[path]; ok {
		return size
	}
	if indexed && f.bh != nil {
		if err := f.bh.Close(); err != nil {
			tb.Fatal(err)
		}
		f.bh = nil
	}
	dst := path + ".compact"
	size, err := boltCompact(path, dst)
	if err != nil {
		tb.Fatal(err)
	}
	os.Remove(dst)
	f.setCompacted(path, size)
	return size
}

func boltCompact(src, dst string) (int64, error) {
	in, err := bolt.Open(src, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := bolt.Open(dst, 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType})
	if err != nil {
		return 0, err
	}
	var size int64
	err = bolt.Compact(out, in, 64<<20)
	if err == nil {
		err = out.View(func(tx *bolt.Tx) error {
			st := out.Stats()
			size = tx.Size() - int64(st.FreePageN+st.PendingPageN)*int64(out.Info().PageSize)
			return nil
		})
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return size, err
}

func (f *qFixture) setCompacted(path string, size int64) {
	if f.compacted == nil {
		f.compacted = map[string]int64{}
	}
	f.compacted[path] = size
}

func (f *qFixture) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, db := range f.dbs {
		if db != nil {
			if err := db.Close(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			f.dbs[k], f.docs[k] = nil, nil
		}
	}
	if f.bh != nil {
		if err := f.bh.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		f.bh = nil
	}
}

// releaseQueryFixtures closes every query fixture's handles (TestMain).
func releaseQueryFixtures() {
	qCache.mu.Lock()
	defer qCache.mu.Unlock()
	for _, f := range qCache.fixtures {
		f.release()
	}
}

// copyFileSync copies src over dst and fsyncs dst, so that a durable
// benchmark's first commit does not pay for flushing the copy.
func copyFileSync(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// ---------------------------------------------------------------------------
// The right answers, computed from the record definitions.

// qFirstIDs returns the ids of the first limit records among the first n
// for which match holds, in id order.
func qFirstIDs(ids []uuidv7.UUID, limit int, match func(i int) bool) []uuidv7.UUID {
	var out []uuidv7.UUID
	for i := range ids {
		if match(i) {
			out = append(out, ids[i])
			if len(out) == limit {
				break
			}
		}
	}
	return out
}

// qRangeIDs returns the ids of the limit records with the lowest scores in
// [scoreLo, scoreHi], lowest first.
func qRangeIDs(ids []uuidv7.UUID, limit int) []uuidv7.UUID {
	var in []int
	for i := range ids {
		if s := qScore(i); s >= scoreLo && s <= scoreHi {
			in = append(in, i)
		}
	}
	slices.SortFunc(in, func(a, b int) int { return int(qScore(a) - qScore(b)) })
	out := make([]uuidv7.UUID, 0, limit)
	for _, i := range in[:min(limit, len(in))] {
		out = append(out, ids[i])
	}
	return out
}

// qFlaggedCount is how many of the first n records are flagged: n/100.
func qFlaggedCount(n int) int {
	c := 0
	for i := range n {
		if qStatus(i) == qFlagged {
			c++
		}
	}
	return c
}
