package bench

import (
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
)

// benchRecord is the fixture record as a struct: the shape a Go app stores.
type benchRecord struct {
	User    string   `msgpack:"user"`
	Email   string   `msgpack:"email"`
	Age     int      `msgpack:"age"`
	Score   float64  `msgpack:"score"`
	Active  bool     `msgpack:"active"`
	Country string   `msgpack:"country"`
	Status  string   `msgpack:"status"`
	Visits  int64    `msgpack:"visits"`
	Tags    []string `msgpack:"tags"`
	Note    string   `msgpack:"note"`
}

// BenchmarkTypedPage: the page of BenchmarkPage decoded into a struct, three
// ways in the same run: through a typed collection (DocsOf), through the
// untyped stream and Record.Decode, and through the untyped stream and the
// msgpack library's Unmarshal of the raw bytes (what Record.Decode did before
// storh had its own codec). ns/op is per page of 100.
func BenchmarkTypedPage(b *testing.B) {
	for _, n := range sizes() {
		b.Run(sizeName(n), func(b *testing.B) {
			f := getFixture(b, n)
			mid := f.mid()
			q := query.All().After(mid).Limit(pageSize)
			out := make([]benchRecord, 0, pageSize)
			check := func(b *testing.B, out []benchRecord) {
				if len(out) != pageSize || out[0].User == "" {
					b.Fatalf("page: %d records", len(out))
				}
			}
			b.Run("impl=typed", func(b *testing.B) {
				typed := typedFixture(b, f)
				b.ReportAllocs()
				for b.Loop() {
					out = out[:0]
					for it, err := range typed.Stream(q) {
						if err != nil {
							b.Fatal(err)
						}
						out = append(out, it.Value)
					}
					check(b, out)
				}
			})
			b.Run("impl=untyped-decode", func(b *testing.B) {
				docs := f.storh(b)
				b.ReportAllocs()
				for b.Loop() {
					out = out[:0]
					for r, err := range docs.Stream(q) {
						if err != nil {
							b.Fatal(err)
						}
						var v benchRecord
						if err := r.Decode(&v); err != nil {
							b.Fatal(err)
						}
						out = append(out, v)
					}
					check(b, out)
				}
			})
			b.Run("impl=untyped-msgpack", func(b *testing.B) {
				docs := f.storh(b)
				b.ReportAllocs()
				for b.Loop() {
					out = out[:0]
					for r, err := range docs.Stream(q) {
						if err != nil {
							b.Fatal(err)
						}
						var v benchRecord
						if err := msgpack.Unmarshal(r.Raw(), &v); err != nil {
							b.Fatal(err)
						}
						out = append(out, v)
					}
					check(b, out)
				}
			})
		})
	}
}

// BenchmarkTypedGet: one Get by id, decoded into the struct, typed and
// untyped.
func BenchmarkTypedGet(b *testing.B) {
	n := sizes()[0]
	f := getFixture(b, n)
	ids := f.ids
	b.Run("impl=typed", func(b *testing.B) {
		typed := typedFixture(b, f)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			it, err := typed.Get(ids[i%len(ids)])
			if err != nil || it.Value.User == "" {
				b.Fatal(err)
			}
			i += 7919
		}
	})
	b.Run("impl=untyped-decode", func(b *testing.B) {
		docs := f.storh(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			r, err := docs.Get(ids[i%len(ids)])
			if err != nil {
				b.Fatal(err)
			}
			var v benchRecord
			if err := r.Decode(&v); err != nil || v.User == "" {
				b.Fatal(err)
			}
			i += 7919
		}
	})
}

// BenchmarkTypedEncode: PutMany of 1000 structs into a transaction that is
// rolled back, typed ([]benchRecord) against untyped ([]any of the same
// structs), so that only encoding and the batch differ.
func BenchmarkTypedEncode(b *testing.B) {
	vals := make([]benchRecord, 1000)
	anys := make([]any, len(vals))
	for i := range vals {
		r := record(i)
		vals[i] = benchRecord{
			User: r["user"].(string), Email: r["email"].(string), Age: r["age"].(int),
			Score: r["score"].(float64), Active: r["active"].(bool), Country: r["country"].(string),
			Status: r["status"].(string), Visits: r["visits"].(int64),
			Tags: []string{r["tags"].([]any)[0].(string), r["tags"].([]any)[1].(string)}, Note: r["note"].(string),
		}
		anys[i] = vals[i]
	}
	db, err := storh.Open(b.TempDir()+"/enc.db", storh.WithoutSync())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	rollback := errors.New("roll back")
	run := func(b *testing.B, put func(tx *storh.Tx) error) {
		b.ReportAllocs()
		for b.Loop() {
			if err := db.Update(func(tx *storh.Tx) error {
				if err := put(tx); err != nil {
					return err
				}
				return rollback
			}); err != rollback {
				b.Fatal(err)
			}
		}
	}
	b.Run("impl=typed", func(b *testing.B) {
		run(b, func(tx *storh.Tx) error {
			t, err := storh.DocsOf[benchRecord](tx, "enc")
			if err == nil {
				_, err = t.PutMany(vals)
			}
			return err
		})
	})
	b.Run("impl=untyped", func(b *testing.B) {
		run(b, func(tx *storh.Tx) error {
			d, err := tx.Docs("enc")
			if err == nil {
				_, err = d.PutMany(anys)
			}
			return err
		})
	})
}

// typedFixture opens the fixture's collection as a typed collection.
func typedFixture(tb testing.TB, f *fixture) *storh.TypedDocs[benchRecord] {
	f.storh(tb)
	typed, err := storh.DocsOf[benchRecord](f.db, collName)
	if err != nil {
		tb.Fatal(err)
	}
	return typed
}
