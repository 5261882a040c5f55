package storh_test

import (
	"errors"
	"iter"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// fixture is a small database that every bad call must leave unchanged.
type fixture struct {
	db       *storh.DB
	docs     *storh.Docs
	log      *storh.Log
	existing uuidv7.UUID // stored in both
}

func newFixture(t *testing.T, path string) *fixture {
	t.Helper()
	db := openAt(t, path)
	f := &fixture{db: db}
	var err error
	if f.docs, err = db.Docs("docs"); err != nil {
		t.Fatal(err)
	}
	if f.log, err = db.Log("log"); err != nil {
		t.Fatal(err)
	}
	f.existing = idAt(t, 1_700_000_000_000)
	for _, put := range []func(uuidv7.UUID, any) (storh.Record, error){f.docs.PutWithID, f.log.PutWithID} {
		if _, err := put(f.existing, storh.Map{"name": "first", "n": 1}); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if _, err := put(idAt(t, 1_700_000_000_001+int64(i)), storh.Map{"n": i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

// firstErr runs a stream and returns its first error, failing if the stream
// yields records before it or yields no error at all.
func firstErr(seq iter.Seq2[storh.Record, error]) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
		return errors.New("test: stream yielded a record where an error was expected")
	}
	return errors.New("test: stream ended without an error")
}

func cyclicMap() storh.Map {
	m := storh.Map{"a": 1}
	m["self"] = m
	return m
}

func deepMap(levels int) storh.Map {
	m := storh.Map{"leaf": true}
	for range levels - 1 {
		m = storh.Map{"d": m}
	}
	return m
}

type badRow struct {
	name    string
	run     func(f *fixture) error
	want    error
	mention []string
}

func TestBadInput(t *testing.T) {
	v4 := v4ID
	tooLong := strings.Repeat("n", storh.MaxNameLength+1)
	rows := []badRow{
		// ids
		{"PutWithID zero id", func(f *fixture) error { _, err := f.docs.PutWithID(uuidv7.UUID{}, storh.Map{"a": 1}); return err },
			storh.ErrInvalidID, []string{`"docs"`, uuidv7.UUID{}.String()}},
		{"PutWithID v4 id", func(f *fixture) error { _, err := f.docs.PutWithID(v4, storh.Map{"a": 1}); return err },
			storh.ErrInvalidID, []string{`"docs"`, v4.String()}},
		{"PutWithID wrong variant", func(f *fixture) error {
			_, err := f.docs.PutWithID(badVariantID(t), storh.Map{"a": 1})
			return err
		}, storh.ErrInvalidID, []string{`"docs"`, "variant"}},
		{"log PutWithID v4 id", func(f *fixture) error { _, err := f.log.PutWithID(v4, storh.Map{"a": 1}); return err },
			storh.ErrInvalidID, []string{`"log"`, v4.String()}},
		{"Get zero id", func(f *fixture) error { _, err := f.docs.Get(uuidv7.UUID{}); return err },
			storh.ErrInvalidID, []string{`"docs"`}},
		{"Get wrong variant", func(f *fixture) error { _, err := f.log.Get(badVariantID(t)); return err },
			storh.ErrInvalidID, []string{`"log"`}},
		{"Delete v4 id", func(f *fixture) error { return f.docs.Delete(v4) },
			storh.ErrInvalidID, []string{`"docs"`, v4.String()}},
		{"PutMany entry with v4 id", func(f *fixture) error {
			_, err := f.docs.PutMany([]any{storh.Map{"a": 1}, storh.Entry{ID: v4, Data: storh.Map{"b": 2}}})
			return err
		}, storh.ErrInvalidID, []string{`"docs"`, "item 1"}},
		{"log PutWithID existing id", func(f *fixture) error {
			_, err := f.log.PutWithID(f.existing, storh.Map{"a": 1})
			return err
		}, storh.ErrExists, []string{`"log"`, "first-id"}},
		{"Get missing id", func(f *fixture) error { _, err := f.docs.Get(idAt(t, 9)); return err },
			storh.ErrNotFound, []string{`"docs"`}},

		// data
		{"data nil", func(f *fixture) error { _, err := f.docs.Put(nil); return err },
			storh.ErrInvalidData, []string{`"docs"`, "nil"}},
		{"data nil map", func(f *fixture) error { _, err := f.docs.Put(storh.Map(nil)); return err },
			storh.ErrInvalidData, []string{`"docs"`, "nil map"}},
		{"data nil *Map", func(f *fixture) error { _, err := f.docs.Put((*storh.Map)(nil)); return err },
			storh.ErrInvalidData, []string{`"docs"`}},
		{"data int", func(f *fixture) error { _, err := f.docs.Put(42); return err },
			storh.ErrInvalidData, []string{`"docs"`, "int"}},
		{"data string", func(f *fixture) error { _, err := f.log.Put("hello"); return err },
			storh.ErrInvalidData, []string{`"log"`, "string"}},
		{"data slice", func(f *fixture) error { _, err := f.docs.Put([]any{storh.Map{"a": 1}}); return err },
			storh.ErrInvalidData, []string{`"docs"`}},
		{"data chan", func(f *fixture) error { _, err := f.docs.Put(make(chan int)); return err },
			storh.ErrInvalidData, []string{`"docs"`}},
		{"data func", func(f *fixture) error { _, err := f.docs.Put(func() {}); return err },
			storh.ErrInvalidData, []string{`"docs"`}},
		{"data map[int]any", func(f *fixture) error { _, err := f.docs.Put(map[int]any{1: "a"}); return err },
			storh.ErrInvalidData, []string{`"docs"`, "string"}},
		{"data nested chan", func(f *fixture) error {
			_, err := f.docs.Put(storh.Map{"ok": 1, "inner": storh.Map{"c": make(chan int)}})
			return err
		}, storh.ErrInvalidData, []string{`"docs"`}},
		{"data nested func in struct", func(f *fixture) error {
			_, err := f.docs.Put(struct{ F func() }{F: func() {}})
			return err
		}, storh.ErrInvalidData, []string{`"docs"`}},
		{"data complex number", func(f *fixture) error { _, err := f.docs.Put(storh.Map{"z": 1i}); return err },
			storh.ErrInvalidData, []string{`"docs"`}},
		{"data nested non-string keys", func(f *fixture) error {
			_, err := f.docs.Put(storh.Map{"m": map[int]string{1: "x"}})
			return err
		}, storh.ErrInvalidData, []string{`"docs"`}},
		{"data cyclic struct", func(f *fixture) error {
			type node struct {
				Name string
				Next *node
			}
			n := &node{Name: "loop"}
			n.Next = n
			_, err := f.docs.Put(n)
			return err
		}, storh.ErrInvalidData, []string{`"docs"`}},
		{"data cyclic map", func(f *fixture) error { _, err := f.docs.Put(cyclicMap()); return err },
			storh.ErrInvalidData, []string{`"docs"`}},
		{"data too deep", func(f *fixture) error { _, err := f.docs.Put(deepMap(storh.MaxDepth + 1)); return err },
			storh.ErrInvalidData, []string{`"docs"`}},
		{"data too deep through a list", func(f *fixture) error {
			var v any = "leaf"
			for range storh.MaxDepth {
				v = []any{v}
			}
			_, err := f.docs.Put(storh.Map{"l": v})
			return err
		}, storh.ErrInvalidData, []string{`"docs"`}},
		{"data too big", func(f *fixture) error {
			_, err := f.log.Put(storh.Map{"b": make([]byte, storh.MaxRecordSize+1)})
			return err
		}, storh.ErrInvalidData, []string{`"log"`, "limit"}},
		{"data too big in PutMany", func(f *fixture) error {
			_, err := f.docs.PutMany([]any{storh.Map{"a": 1}, storh.Map{"b": strings.Repeat("x", storh.MaxRecordSize)}})
			return err
		}, storh.ErrInvalidData, []string{`"docs"`, "item 1"}},
		{"upsert with bad data keeps the old record", func(f *fixture) error {
			_, err := f.docs.PutWithID(f.existing, storh.Map{"c": make(chan int)})
			return err
		}, storh.ErrInvalidData, []string{`"docs"`, "first-id"}},

		// names
		{"name empty", func(f *fixture) error { _, err := f.db.Docs(""); return err },
			storh.ErrInvalidName, []string{"empty"}},
		{"name too long", func(f *fixture) error { _, err := f.db.Log(tooLong); return err },
			storh.ErrInvalidName, []string{"limit"}},
		{"name with NUL", func(f *fixture) error { _, err := f.db.Docs("a\x00b"); return err },
			storh.ErrInvalidName, []string{`"a\x00b"`}},
		{"name with newline", func(f *fixture) error { _, err := f.db.Docs("line\nbreak"); return err },
			storh.ErrInvalidName, []string{`"line\nbreak"`}},
		{"name invalid UTF-8", func(f *fixture) error { _, err := f.db.Log("bad\xffname"); return err },
			storh.ErrInvalidName, []string{"UTF-8"}},
		{"name invalid inside Update", func(f *fixture) error {
			return f.db.Update(func(tx *storh.Tx) error { _, err := tx.Docs("\x01"); return err })
		}, storh.ErrInvalidName, nil},

		// queries
		{"query Limit(0)", func(f *fixture) error { return firstErr(f.docs.Stream(query.All().Limit(0))) },
			storh.ErrInvalidQuery, []string{`"docs"`, "Limit(0)"}},
		{"query Limit(-1)", func(f *fixture) error { return firstErr(f.log.Stream(query.All().Limit(-1))) },
			storh.ErrInvalidQuery, []string{`"log"`, "Limit(-1)"}},
		{"query WhereEqual empty field", func(f *fixture) error {
			return firstErr(f.docs.Stream(query.All().WhereEqual("", 1)))
		}, storh.ErrInvalidQuery, []string{`"docs"`, "field"}},
		{"query WhereEqual chan value", func(f *fixture) error {
			return firstErr(f.docs.Stream(query.All().WhereEqual("f", make(chan int))))
		}, storh.ErrInvalidQuery, []string{`"docs"`, `"f"`, "chan int"}},
		{"query zero Query", func(f *fixture) error { return firstErr(f.log.Stream(query.Query{})) },
			storh.ErrInvalidQuery, []string{`"log"`, "query.All()"}},
		{"query invalid inside Update", func(f *fixture) error {
			return f.db.Update(func(tx *storh.Tx) error {
				d, err := tx.Docs("docs")
				if err != nil {
					return err
				}
				return firstErr(d.Stream(query.All().Limit(0)))
			})
		}, storh.ErrInvalidQuery, []string{`"docs"`}},

		// kinds
		{"Log on a Docs name", func(f *fixture) error { _, err := f.db.Log("docs"); return err },
			storh.ErrWrongKind, []string{`"docs"`, "db.Docs"}},
		{"Docs on a Log name", func(f *fixture) error { _, err := f.db.Docs("log"); return err },
			storh.ErrWrongKind, []string{`"log"`, "db.Log"}},
		{"Queue on a Docs name", func(f *fixture) error { _, err := f.db.Queue("docs"); return err },
			storh.ErrWrongKind, []string{`"docs"`}},
		{"tx.Log on a Docs name", func(f *fixture) error {
			return f.db.Update(func(tx *storh.Tx) error { _, err := tx.Log("docs"); return err })
		}, storh.ErrWrongKind, []string{`"docs"`}},

		// a handle bound to a transaction that has ended
		{"tx handle Put after Update", func(f *fixture) error {
			d := escapedDocs(f)
			_, err := d.Put(storh.Map{"late": true})
			return err
		}, storh.ErrClosed, []string{`"docs"`, "transaction"}},
		{"tx handle Get after Update", func(f *fixture) error {
			_, err := escapedDocs(f).Get(f.existing)
			return err
		}, storh.ErrClosed, []string{`"docs"`, "transaction"}},
		{"tx handle Delete after Update", func(f *fixture) error { return escapedDocs(f).Delete(f.existing) },
			storh.ErrClosed, []string{`"docs"`, "transaction"}},
		{"tx handle Stream after Update", func(f *fixture) error {
			return firstErr(escapedDocs(f).Stream(query.All()))
		}, storh.ErrClosed, []string{`"docs"`, "transaction"}},
		{"tx handle Count after Update", func(f *fixture) error { _, err := escapedDocs(f).Count(); return err },
			storh.ErrClosed, []string{`"docs"`, "transaction"}},
		{"tx.Docs after Update", func(f *fixture) error {
			var kept *storh.Tx
			if err := f.db.Update(func(tx *storh.Tx) error { kept = tx; return nil }); err != nil {
				return err
			}
			_, err := kept.Docs("docs")
			return err
		}, storh.ErrClosed, []string{`"docs"`, "transaction"}},
		{"tx handle Put after View", func(f *fixture) error {
			var kept *storh.Log
			if err := f.db.View(func(tx *storh.Tx) error { var err error; kept, err = tx.Log("log"); return err }); err != nil {
				return err
			}
			_, err := kept.Put(storh.Map{"late": true})
			return err
		}, storh.ErrClosed, []string{`"log"`, "transaction"}},

		// writes inside View
		{"Put inside View", func(f *fixture) error {
			return f.db.View(func(tx *storh.Tx) error {
				d, err := tx.Docs("docs")
				if err != nil {
					return err
				}
				_, err = d.Put(storh.Map{"a": 1})
				return err
			})
		}, storh.ErrReadOnly, []string{`"docs"`}},
		{"Delete inside View", func(f *fixture) error {
			return f.db.View(func(tx *storh.Tx) error {
				d, err := tx.Docs("docs")
				if err != nil {
					return err
				}
				return d.Delete(f.existing)
			})
		}, storh.ErrReadOnly, []string{`"docs"`}},
		{"PutMany inside View", func(f *fixture) error {
			return f.db.View(func(tx *storh.Tx) error {
				l, err := tx.Log("log")
				if err != nil {
					return err
				}
				_, err = l.PutMany([]any{storh.Map{"a": 1}})
				return err
			})
		}, storh.ErrReadOnly, []string{`"log"`}},

		// database calls inside a transaction callback
		{"db-level Put inside Update", func(f *fixture) error {
			return f.db.Update(func(*storh.Tx) error { _, err := f.docs.Put(storh.Map{"a": 1}); return err })
		}, storh.ErrNestedTx, []string{`"docs"`, "tx.Docs"}},
		{"db-level Get inside Update", func(f *fixture) error {
			return f.db.Update(func(*storh.Tx) error { _, err := f.docs.Get(f.existing); return err })
		}, storh.ErrNestedTx, []string{`"docs"`}},
		{"db-level Delete inside Update", func(f *fixture) error {
			return f.db.Update(func(*storh.Tx) error { return f.docs.Delete(f.existing) })
		}, storh.ErrNestedTx, []string{`"docs"`}},
		{"db-level PutMany inside Update", func(f *fixture) error {
			return f.db.Update(func(*storh.Tx) error { _, err := f.log.PutMany([]any{storh.Map{"a": 1}}); return err })
		}, storh.ErrNestedTx, []string{`"log"`}},
		{"db-level Stream inside Update", func(f *fixture) error {
			return f.db.Update(func(*storh.Tx) error { return firstErr(f.docs.Stream(query.All())) })
		}, storh.ErrNestedTx, []string{`"docs"`}},
		{"db-level Count inside View", func(f *fixture) error {
			return f.db.View(func(*storh.Tx) error { _, err := f.log.Count(); return err })
		}, storh.ErrNestedTx, []string{`"log"`}},
		{"db.Docs inside Update", func(f *fixture) error {
			return f.db.Update(func(*storh.Tx) error { _, err := f.db.Docs("other"); return err })
		}, storh.ErrNestedTx, []string{`"other"`}},
		{"db.Update inside Update", func(f *fixture) error {
			return f.db.Update(func(*storh.Tx) error { return f.db.Update(func(*storh.Tx) error { return nil }) })
		}, storh.ErrNestedTx, nil},
		{"db.View inside Update", func(f *fixture) error {
			return f.db.Update(func(*storh.Tx) error { return f.db.View(func(*storh.Tx) error { return nil }) })
		}, storh.ErrNestedTx, nil},
		{"db.Update inside View", func(f *fixture) error {
			return f.db.View(func(*storh.Tx) error { return f.db.Update(func(*storh.Tx) error { return nil }) })
		}, storh.ErrNestedTx, nil},
		{"db.Close inside Update", func(f *fixture) error {
			return f.db.Update(func(*storh.Tx) error { return f.db.Close() })
		}, storh.ErrNestedTx, nil},
	}
	if len(rows) < 25 {
		t.Fatalf("only %d rows", len(rows))
	}

	f := newFixture(t, newPath(t))
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			before := digest(t, f.db)
			err := row.run(f)
			mention := make([]string, len(row.mention))
			for i, m := range row.mention {
				mention[i] = strings.ReplaceAll(m, "first-id", f.existing.String())
			}
			checkErr(t, err, row.want, mention...)
			if after := digest(t, f.db); after != before {
				t.Error("the database changed")
			}
		})
	}
	// After all of that the database still works.
	if _, err := f.docs.Put(storh.Map{"fine": true}); err != nil {
		t.Fatalf("Put after the bad calls: %v", err)
	}
	if n := mustCount(t, f.log); n != 6 {
		t.Errorf("log Count = %d; want 6", n)
	}
}

// escapedDocs returns a handle bound to an Update that has returned.
func escapedDocs(f *fixture) *storh.Docs {
	var kept *storh.Docs
	_ = f.db.Update(func(tx *storh.Tx) error {
		var err error
		kept, err = tx.Docs("docs")
		return err
	})
	return kept
}

func TestClosedDatabase(t *testing.T) {
	path := newPath(t)
	f := newFixture(t, path)
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	before := digestFile(t, path)
	if err := f.db.Close(); err != nil {
		t.Errorf("a second Close = %v; want nil, as bbolt and database/sql do", err)
	}
	rows := []badRow{
		{"Docs", func(f *fixture) error { _, err := f.db.Docs("docs"); return err }, storh.ErrClosed, []string{`"docs"`}},
		{"Log", func(f *fixture) error { _, err := f.db.Log("log"); return err }, storh.ErrClosed, []string{`"log"`}},
		{"Queue", func(f *fixture) error { _, err := f.db.Queue("q"); return err }, storh.ErrClosed, []string{`"q"`}},
		{"Put", func(f *fixture) error { _, err := f.docs.Put(storh.Map{"a": 1}); return err }, storh.ErrClosed, []string{`"docs"`}},
		{"log Put", func(f *fixture) error { _, err := f.log.Put(storh.Map{"a": 1}); return err }, storh.ErrClosed, []string{`"log"`}},
		{"PutWithID", func(f *fixture) error { _, err := f.docs.PutWithID(f.existing, storh.Map{"a": 1}); return err },
			storh.ErrClosed, []string{`"docs"`, "first-id"}},
		{"PutMany", func(f *fixture) error { _, err := f.docs.PutMany([]any{storh.Map{"a": 1}}); return err },
			storh.ErrClosed, []string{`"docs"`}},
		{"PutStream", func(f *fixture) error {
			_, err := f.log.PutStream(func(yield func(any) bool) { yield(storh.Map{"a": 1}) })
			return err
		}, storh.ErrClosed, []string{`"log"`}},
		{"Delete", func(f *fixture) error { return f.docs.Delete(f.existing) }, storh.ErrClosed, []string{`"docs"`}},
		{"Get", func(f *fixture) error { _, err := f.docs.Get(f.existing); return err }, storh.ErrClosed, []string{`"docs"`}},
		{"Stream", func(f *fixture) error { return firstErr(f.log.Stream(query.All())) }, storh.ErrClosed, []string{`"log"`}},
		{"Count", func(f *fixture) error { _, err := f.docs.Count(); return err }, storh.ErrClosed, []string{`"docs"`}},
		{"Stats", func(f *fixture) error { _, err := f.db.Stats(); return err }, storh.ErrClosed, nil},
		{"Update", func(f *fixture) error {
			return f.db.Update(func(*storh.Tx) error { panic("the callback must not run") })
		}, storh.ErrClosed, nil},
		{"View", func(f *fixture) error {
			return f.db.View(func(*storh.Tx) error { panic("the callback must not run") })
		}, storh.ErrClosed, nil},
		{"Drop", func(f *fixture) error { return f.db.Drop("docs") }, storh.ErrClosed, nil},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			err := row.run(f)
			mention := make([]string, len(row.mention))
			for i, m := range row.mention {
				mention[i] = strings.ReplaceAll(m, "first-id", f.existing.String())
			}
			checkErr(t, err, row.want, mention...)
		})
	}
	if digestFile(t, path) != before {
		t.Error("calls on a closed database changed the file")
	}
}

// A read-only database reads what is there and changes nothing: on a
// file, under its shared lock; on PostgreSQL, with no lock, no table made
// and no write.
func TestReadOnlyDatabase(t *testing.T) {
	path := newPath(t)
	f := newFixture(t, path)
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	before := digestFile(t, path)

	// A read-only open of a missing file fails instead of creating it.
	_, err := storh.Open(newPath(t), storh.WithReadOnly())
	checkErr(t, err, storh.ErrNotFound)

	db := openAt(t, path, storh.WithReadOnly())
	ro := &fixture{db: db, existing: f.existing}
	if ro.docs, err = db.Docs("docs"); err != nil {
		t.Fatal(err)
	}
	if ro.log, err = db.Log("log"); err != nil {
		t.Fatal(err)
	}
	// Reads work.
	if n := mustCount(t, ro.docs); n != 6 {
		t.Errorf("Count = %d; want 6", n)
	}
	if got := collect(t, ro.log.Stream(query.All())); len(got) != 6 {
		t.Errorf("Stream = %d records; want 6", len(got))
	}
	if _, err := ro.docs.Get(f.existing); err != nil {
		t.Error(err)
	}
	if err := db.View(func(tx *storh.Tx) error { _, err := tx.Docs("docs"); return err }); err != nil {
		t.Error(err)
	}

	rows := []badRow{
		{"Put", func(f *fixture) error { _, err := f.docs.Put(storh.Map{"a": 1}); return err }, storh.ErrReadOnly, []string{`"docs"`}},
		{"PutWithID", func(f *fixture) error { _, err := f.log.PutWithID(idAt(t, 77), storh.Map{"a": 1}); return err },
			storh.ErrReadOnly, []string{`"log"`}},
		{"PutMany", func(f *fixture) error { _, err := f.docs.PutMany([]any{storh.Map{"a": 1}}); return err },
			storh.ErrReadOnly, []string{`"docs"`}},
		{"PutStream", func(f *fixture) error {
			_, err := f.log.PutStream(func(yield func(any) bool) { yield(storh.Map{"a": 1}) })
			return err
		}, storh.ErrReadOnly, []string{`"log"`}},
		{"Delete", func(f *fixture) error { return f.docs.Delete(f.existing) }, storh.ErrReadOnly, []string{`"docs"`}},
		{"Update", func(f *fixture) error {
			return f.db.Update(func(*storh.Tx) error { panic("the callback must not run") })
		}, storh.ErrReadOnly, nil},
		{"Drop", func(f *fixture) error { return f.db.Drop("docs") }, storh.ErrReadOnly, nil},
		{"new collection", func(f *fixture) error { _, err := f.db.Docs("new"); return err }, storh.ErrNotFound, []string{`"new"`}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			checkErr(t, row.run(ro), row.want, row.mention...)
		})
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if digestFile(t, path) != before {
		t.Error("a read-only database changed the file")
	}
}

func TestOptionValidation(t *testing.T) {
	for name, opt := range map[string]storh.Option{
		"WithLockTimeout(0)":      storh.WithLockTimeout(0),
		"WithInitialMmapSize(-1)": storh.WithInitialMmapSize(-1),
		"WithMaxSize(-1)":         storh.WithMaxSize(-1),
		"WithMaxBatch(0)":         storh.WithMaxBatch(0),
		"WithLockTimeout(-1)":     storh.WithLockTimeout(-1),
	} {
		path := newPath(t)
		db, err := storh.Open(path, opt)
		if err == nil {
			db.Close()
			t.Errorf("%s accepted", name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "storh: ") {
			t.Errorf("%s: message %q lacks the package prefix", name, err)
		}
	}
}

func TestLockedFile(t *testing.T) {
	fileOnly(t)
	path := newPath(t)
	openAt(t, path)
	_, err := storh.Open(path, storh.WithLockTimeout(50_000_000)) // 50ms
	checkErr(t, err, storh.ErrLocked, path)
}

// TestMaxSize fills a size-capped database: the write that does not fit
// fails with ErrTooLarge and stores nothing; everything acknowledged before
// stays readable, and small writes that fit in freed space still work.
func TestMaxSize(t *testing.T) {
	fileOnly(t)
	const limit = 1 << 20
	db := openTemp(t, storh.WithMaxSize(limit))
	log, _ := db.Log("l")
	pad := strings.Repeat("x", 8<<10)
	var acked []uuidv7.UUID
	var err error
	for range 10 * limit / len(pad) {
		var recs []storh.Record
		recs, err = log.PutMany([]any{storh.Map{"p": pad}, storh.Map{"p": pad}})
		if err != nil {
			break
		}
		acked = append(acked, ids(recs)...)
	}
	checkErr(t, err, storh.ErrTooLarge, `"l"`)
	before := digest(t, db)
	_, err = log.Put(storh.Map{"p": strings.Repeat("y", 64<<10)})
	checkErr(t, err, storh.ErrTooLarge, `"l"`)
	if digest(t, db) != before {
		t.Error("a write refused for size changed the database")
	}
	if n := mustCount(t, log); n != len(acked) {
		t.Errorf("Count = %d; acknowledged %d", n, len(acked))
	}
	for _, id := range acked {
		if _, err := log.Get(id); err != nil {
			t.Fatalf("acknowledged %v: %v", id, err)
		}
	}
	if size := fileSize(t, db); size > limit {
		t.Errorf("file is %d bytes; the limit is %d", size, limit)
	}
}
