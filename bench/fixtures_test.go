package bench

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// The data every engine benchmark uses: map records of ten fields that
// encode to 197 bytes of msgpack (with msgpack.Marshal), keyed by ascending
// UUIDv7s carrying recordsPerMs records per millisecond from baseMs on.
const (
	collName     = "bench"
	recordsPerMs = 10
	baseMs       = 1_700_000_000_000 // 2023-11-14: any fixed instant will do
	recordPool   = 1024              // distinct records, reused cyclically
	recordBytes  = 197

	// flagged is the rare value of "status" the unindexed WhereEqual looks
	// for: one record in a hundred of the pool has it.
	flagged = "flagged"
)

var countries = []string{"NO", "SE", "DK", "FI", "DE", "FR", "NL", "PL"}

// records is built once per process: generating and filling maps must not be
// part of any measurement.
var records = sync.OnceValue(func() []map[string]any {
	pool := make([]map[string]any, recordPool)
	for i := range pool {
		// Every status has seven letters, so every record has the same size.
		status := []string{"running", "pending", "stopped"}[i%3]
		if i%100 == 50 {
			status = flagged
		}
		pool[i] = map[string]any{
			"user":    fmt.Sprintf("user-%06d", i),
			"email":   fmt.Sprintf("user%06d@example.com", i),
			"age":     18 + i%60,
			"score":   float64(i%1000) / 8,
			"active":  i%3 != 2,
			"country": countries[i%len(countries)],
			"status":  status,
			"visits":  int64(1000 + i*37%9000),
			"tags":    []any{"alpha", countries[(i+3)%len(countries)]},
			// Padding brings the encoded record to recordBytes.
			"note": "lorem ipsum dolor sit amet, consectetur adipiscing elit ok",
		}
	}
	return pool
})

// record returns record i (shared: never modify it).
func record(i int) map[string]any { return records()[i%recordPool] }

// flaggedCount is how many of the first n records WhereEqual("status",
// flagged) matches.
func flaggedCount(n int) int {
	c := 0
	for i := range n {
		if record(i)["status"] == flagged {
			c++
		}
	}
	return c
}

// recordSeq yields the first n records, for PutStream.
func recordSeq(n int) iter.Seq[any] {
	return func(yield func(any) bool) {
		for i := range n {
			if !yield(record(i)) {
				return
			}
		}
	}
}

// sizes are the fixture sizes the engine benchmarks run at.
// With STORH_BENCH_SMOKE=1 (benchreport -smoke) they are tiny: the smoke
// pass only proves that every benchmark still runs.
func sizes() []int {
	if smoke() {
		return []int{1000, 2000}
	}
	s := []int{10_000, 100_000}
	if os.Getenv("STORH_BENCH_LARGE") == "1" {
		s = append(s, 1_000_000)
	}
	return s
}

// smoke reports a smoke pass: every benchmark once, at tiny sizes.
func smoke() bool { return os.Getenv("STORH_BENCH_SMOKE") == "1" }

func sizeName(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("n=%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("n=%dk", n/1000)
	}
	return fmt.Sprintf("n=%d", n)
}

// fixtureIDs returns n ascending ids, recordsPerMs per millisecond from
// baseMs, the same slice for every caller in the process.
func fixtureIDs(n int) []uuidv7.UUID {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	return cache.idsLocked(n)
}

// shuffledIDs returns the ids of fixtureIDs(n) in a fixed random order.
func shuffledIDs(n int) []uuidv7.UUID {
	ids := append([]uuidv7.UUID(nil), fixtureIDs(n)...)
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids
}

// windowMs is a 20 ms window in the middle of a fixture of n records:
// recordsPerMs*20 = 200 records.
func windowMs(n int) (from, until int64) {
	from = baseMs + int64(n/2/recordsPerMs)
	return from, from + 200/recordsPerMs - 1
}

// fixture is one size's pair of files, the same ids and records in each:
// a storh database and a raw bbolt file written by rawBulkLoad. Handles are
// opened on first use and kept for the process.
type fixture struct {
	n         int
	ids       []uuidv7.UUID
	storhPath string
	rawPath   string

	mu    sync.Mutex
	db    *storh.DB
	docs  *storh.Docs
	rawDB *bolt.DB
}

// fixtureCache holds what is built once per process.
type fixtureCache struct {
	mu       sync.Mutex
	dir      string
	ids      map[int][]uuidv7.UUID
	fixtures map[int]*fixture
}

var cache fixtureCache

func (c *fixtureCache) idsLocked(n int) []uuidv7.UUID {
	if ids, ok := c.ids[n]; ok {
		return ids
	}
	gen := uuidv7.NewGenerator()
	ids := make([]uuidv7.UUID, n)
	for i := range ids {
		id, err := gen.NewAt(baseMs + int64(i/recordsPerMs))
		if err != nil {
			panic(err)
		}
		ids[i] = id
	}
	if c.ids == nil {
		c.ids = map[int][]uuidv7.UUID{}
	}
	c.ids[n] = ids
	return ids
}

// tempDir is the process's scratch directory for fixtures, removed by
// TestMain.
func tempDir(tb testing.TB) string {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if cache.dir == "" {
		dir, err := os.MkdirTemp("", "storh-bench-")
		if err != nil {
			tb.Fatal(err)
		}
		cache.dir = dir
	}
	return cache.dir
}

// getFixture returns the fixture of n records, building both files the
// first time it is asked for in this process.
func getFixture(tb testing.TB, n int) *fixture {
	dir := tempDir(tb)
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if f, ok := cache.fixtures[n]; ok {
		return f
	}
	f := &fixture{
		n:         n,
		ids:       cache.idsLocked(n),
		storhPath: filepath.Join(dir, fmt.Sprintf("storh-%d.db", n)),
		rawPath:   filepath.Join(dir, fmt.Sprintf("bolt-%d.db", n)),
	}
	if err := buildStorh(f.storhPath, f.ids); err != nil {
		tb.Fatalf("building %s: %v", f.storhPath, err)
	}
	raw, err := rawOpen(f.rawPath, true)
	if err != nil {
		tb.Fatal(err)
	}
	if err := rawBulkLoad(raw, n, func(i int) uuidv7.UUID { return f.ids[i] }); err != nil {
		tb.Fatalf("building %s: %v", f.rawPath, err)
	}
	if err := raw.Close(); err != nil {
		tb.Fatal(err)
	}
	if cache.fixtures == nil {
		cache.fixtures = map[int]*fixture{}
	}
	cache.fixtures[n] = f
	return f
}

// buildStorh writes the records under ids with PutStream, without fsync.
func buildStorh(path string, ids []uuidv7.UUID) error {
	db, err := storh.Open(path, storh.WithoutSync())
	if err != nil {
		return err
	}
	docs, err := db.Docs(collName)
	if err != nil {
		db.Close()
		return err
	}
	_, err = docs.PutStream(func(yield func(any) bool) {
		for i, id := range ids {
			if !yield(storh.Entry{ID: id, Data: record(i)}) {
				return
			}
		}
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// storh returns the fixture's storh collection, opened once.
func (f *fixture) storh(tb testing.TB) *storh.Docs {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.docs == nil {
		db, err := storh.Open(f.storhPath)
		if err != nil {
			tb.Fatal(err)
		}
		docs, err := db.Docs(collName)
		if err != nil {
			tb.Fatal(err)
		}
		f.db, f.docs = db, docs
	}
	return f.docs
}

// raw returns the fixture's bbolt handle, opened once.
func (f *fixture) raw(tb testing.TB) *bolt.DB {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rawDB == nil {
		db, err := rawOpen(f.rawPath, false)
		if err != nil {
			tb.Fatal(err)
		}
		f.rawDB = db
	}
	return f.rawDB
}

// release closes the cached handles (the open benchmarks need the files to
// themselves: bbolt's lock is per open file, even within one process).
func (f *fixture) release() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []string
	if f.db != nil {
		if err := f.db.Close(); err != nil {
			errs = append(errs, err.Error())
		}
		f.db, f.docs = nil, nil
	}
	if f.rawDB != nil {
		if err := f.rawDB.Close(); err != nil {
			errs = append(errs, err.Error())
		}
		f.rawDB = nil
	}
	if errs != nil {
		return fmt.Errorf("bench: closing fixture n=%d: %s", f.n, strings.Join(errs, "; "))
	}
	return nil
}

// mid is the id the middle-of-the-collection page starts after.
func (f *fixture) mid() uuidv7.UUID { return f.ids[f.n/2] }

// ballast is the live heap every benchmark runs beside (see TestMain).
var ballast []byte

func TestMain(m *testing.M) {
	// An application holds a live heap, and how often the collector runs
	// (and so what an allocation costs) follows its size. Without a floor,
	// the heap would be whatever the fixtures built so far left behind:
	// the 10k benchmarks would run beside a few MiB, the 1M ones beside a
	// hundred, and the same code would show different ratios by size. A
	// fixed ballast gives every benchmark, and both sides of every ratio,
	// the same collector pace. STORH_BENCH_HEAP_MIB sets it (0: none).
	mib := 64
	if v := os.Getenv("STORH_BENCH_HEAP_MIB"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			mib = n
		}
	}
	ballast = make([]byte, mib<<20)
	code := m.Run()
	runtime.KeepAlive(ballast)
	releaseQueryFixtures()
	for _, done := range smallCleanup {
		done()
	}
	cache.mu.Lock()
	for _, f := range cache.fixtures {
		if err := f.release(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	if cache.dir != "" {
		os.RemoveAll(cache.dir)
	}
	cache.mu.Unlock()
	os.Exit(code)
}
