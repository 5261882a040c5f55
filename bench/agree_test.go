package bench

import (
	"path/filepath"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// These tests keep the benchmarks honest: both sides of every comparison
// must do the same work on the same data and return the same answer.

func TestRecordsAre197Bytes(t *testing.T) {
	for i := range recordPool {
		v, err := msgpack.Marshal(record(i))
		if err != nil {
			t.Fatal(err)
		}
		if len(v) != recordBytes {
			t.Fatalf("record %d encodes to %d bytes, want %d", i, len(v), recordBytes)
		}
	}
	if got := flaggedCount(recordPool); got == 0 || got > recordPool/50 {
		t.Fatalf("%d of %d records are flagged, want about 1%%", got, recordPool)
	}
}

func TestFixtureIDsAscend(t *testing.T) {
	ids := fixtureIDs(5000)
	for i := 1; i < len(ids); i++ {
		if ids[i-1].Compare(ids[i]) >= 0 {
			t.Fatalf("id %d (%s) is not above id %d (%s)", i, ids[i], i-1, ids[i-1])
		}
		if want := baseMs + int64(i/recordsPerMs); ids[i].TimestampMs() != want {
			t.Fatalf("id %d has timestamp %d, want %d", i, ids[i].TimestampMs(), want)
		}
	}
	random := shuffledIDs(5000)
	seen := make(map[uuidv7.UUID]bool, len(random))
	for _, id := range random {
		seen[id] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("shuffled ids lack %s", id)
		}
	}
}

// userAt returns the "user" field every decoded record carries.
func userAt(i int) string { return record(i)["user"].(string) }

func TestBaselinesAgree(t *testing.T) {
	const n = 3000
	f := getFixture(t, n)
	docs, raw := f.storh(t), f.raw(t)

	if got, err := docs.Count(); err != nil || got != n {
		t.Fatalf("storh Count = %d, %v; want %d", got, err, n)
	}

	t.Run("page", func(t *testing.T) {
		s, err := storhPage(docs, f.mid(), pageSize, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := rawPage(raw, f.mid(), pageSize, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != pageSize || len(r) != pageSize {
			t.Fatalf("page sizes: storh %d, raw %d, want %d", len(s), len(r), pageSize)
		}
		if got, size, err := rawPageBytes(raw, f.mid(), pageSize); err != nil || got != pageSize || size != pageSize*recordBytes {
			t.Fatalf("raw undecoded page: %d records, %d bytes, %v", got, size, err)
		}
		for j := range pageSize {
			want := userAt(n/2 + 1 + j)
			if s[j]["user"] != want || r[j]["user"] != want {
				t.Fatalf("record %d of the page: storh %v, raw %v, want %s", j, s[j]["user"], r[j]["user"], want)
			}
		}
	})

	t.Run("window", func(t *testing.T) {
		from, until := windowMs(n)
		s, err := storhWindow(docs, from, until, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := rawWindow(raw, from, until, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(s) != 200 || len(r) != 200 {
			t.Fatalf("window sizes: storh %d, raw %d, want 200", len(s), len(r))
		}
		first := int(from-baseMs) * recordsPerMs
		for j := range s {
			if want := userAt(first + j); s[j]["user"] != want || r[j]["user"] != want {
				t.Fatalf("record %d of the window: storh %v, raw %v, want %s", j, s[j]["user"], r[j]["user"], want)
			}
		}
	})

	t.Run("where", func(t *testing.T) {
		want := flaggedCount(n)
		s, err := storhWhere(docs, "status", flagged)
		if err != nil {
			t.Fatal(err)
		}
		r, err := rawWhere(raw, "status", flagged)
		if err != nil {
			t.Fatal(err)
		}
		if s != want || r != want {
			t.Fatalf("matches: storh %d, raw %d, want %d", s, r, want)
		}
	})

	t.Run("open-get", func(t *testing.T) {
		if err := f.release(); err != nil {
			t.Fatal(err)
		}
		s, err := storhOpenGet(f.storhPath, f.mid())
		if err != nil {
			t.Fatal(err)
		}
		r, err := rawOpenGet(f.rawPath, f.mid())
		if err != nil {
			t.Fatal(err)
		}
		if want := userAt(n / 2); s["user"] != want || r["user"] != want {
			t.Fatalf("storh %v, raw %v, want %s", s["user"], r["user"], want)
		}
	})
}

// TestBulkLoadsAgree checks that every bulk contender stores all n records,
// under the ids it was given.
func TestBulkLoadsAgree(t *testing.T) {
	const n = 12_345 // not a multiple of any batch size
	asc, random := fixtureIDs(n), shuffledIDs(n)
	items := make([]any, n)
	for i := range items {
		items[i] = record(i)
	}
	cases := []struct {
		name   string
		target func() bulkTarget
		storh  bool
	}{
		{"storh-putmany", storhBulk(loadPutMany(items)), true},
		{"storh-putstream", storhBulk(loadPutStream(n)), true},
		{"storh-ascending", storhBulk(loadPutWithIDs(asc)), true},
		{"storh-random", storhBulk(loadPutWithIDs(random)), true},
		{"bolt", rawBulk(n, newUUID), false},
		{"bolt-random", rawBulk(n, func(i int) uuidv7.UUID { return random[i] }), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bulk.db")
			tg := c.target()
			if err := tg.open(path); err != nil {
				t.Fatal(err)
			}
			if err := tg.load(); err != nil {
				t.Fatal(err)
			}
			if err := tg.close(); err != nil {
				t.Fatal(err)
			}
			if c.storh {
				db, err := storh.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				docs, err := db.Docs(collName)
				if err != nil {
					t.Fatal(err)
				}
				if got, err := docs.Count(); err != nil || got != n {
					t.Fatalf("Count = %d, %v; want %d", got, err, n)
				}
				if _, err := docs.Get(random[n/3]); c.name == "storh-random" && err != nil {
					t.Fatalf("Get of a back-filled id: %v", err)
				}
				return
			}
			db, err := rawOpen(path, true)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.View(func(tx *bolt.Tx) error {
				if got := tx.Bucket(rawBucket).Stats().KeyN; got != n {
					t.Fatalf("%d keys, want %d", got, n)
				}
				return nil
			})
		})
	}
}
