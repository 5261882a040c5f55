package storh_test

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// personSchema is the schema most tests give: a name and a non-negative
// integer age are required.
var personSchema = []byte(`{
	"type": "object",
	"required": ["name", "age"],
	"properties": {
		"name": {"type": "string", "minLength": 1},
		"age": {"type": "integer", "minimum": 0},
		"tags": {"type": "array", "items": {"type": "string"}}
	}
}`)

type person struct {
	Name string `msgpack:"name"`
	Age  int    `msgpack:"age"`
}

// Every write path refuses a record that fails the collection's schema
// with ErrSchema naming the failing value and its rule, and leaves the
// store exactly as it was; the same write of a valid record succeeds.
func TestSchemaRefusesEveryWritePath(t *testing.T) {
	bad := storh.Map{"name": "ann", "age": -3}
	for _, tc := range []struct {
		name    string
		index   int // the *Error's Index; -1 for a single write
		mention string
		write   func(db *storh.DB, d *storh.Docs, l *storh.Log, keep storh.Record) error
	}{
		{"Put", -1, "/age: minimum: got -3, want 0", func(_ *storh.DB, d *storh.Docs, _ *storh.Log, _ storh.Record) error {
			_, err := d.Put(bad)
			return err
		}},
		{"PutWithID", -1, "/age", func(_ *storh.DB, d *storh.Docs, _ *storh.Log, _ storh.Record) error {
			_, err := d.PutWithID(uuidv7.New(), bad)
			return err
		}},
		{"PutWithID replacing", -1, "/name: minLength", func(_ *storh.DB, d *storh.Docs, _ *storh.Log, keep storh.Record) error {
			_, err := d.PutWithID(keep.ID, storh.Map{"name": "", "age": 1})
			return err
		}},
		{"missing field", -1, `/: missing property 'age'`, func(_ *storh.DB, d *storh.Docs, _ *storh.Log, _ storh.Record) error {
			_, err := d.Put(storh.Map{"name": "bob"})
			return err
		}},
		{"PutMany", 2, "/age", func(_ *storh.DB, d *storh.Docs, _ *storh.Log, _ storh.Record) error {
			_, err := d.PutMany([]any{storh.Map{"name": "a", "age": 1}, storh.Map{"name": "b", "age": 2}, bad, storh.Map{"name": "c", "age": 3}})
			return err
		}},
		{"PutMany of 1000, validated across goroutines", 700, "/age", func(_ *storh.DB, d *storh.Docs, _ *storh.Log, _ storh.Record) error {
			items := make([]any, 1000)
			for i := range items {
				items[i] = storh.Map{"name": "n", "age": i}
			}
			items[700], items[950] = bad, bad
			_, err := d.PutMany(items)
			return err
		}},
		{"PutStream", 3, "/tags/1: got number, want string", func(_ *storh.DB, d *storh.Docs, _ *storh.Log, _ storh.Record) error {
			_, err := d.PutStream(slices.Values([]any{
				storh.Map{"name": "a", "age": 1}, storh.Map{"name": "b", "age": 2}, storh.Map{"name": "c", "age": 3},
				storh.Map{"name": "d", "age": 4, "tags": []any{"x", 5}},
			}))
			return err
		}},
		{"Patch", -1, "/age: minimum", func(_ *storh.DB, d *storh.Docs, _ *storh.Log, keep storh.Record) error {
			_, err := d.Patch(keep.ID, storh.Inc("age", -100))
			return err
		}},
		{"PatchMatching", -1, "/name: got number, want string", func(_ *storh.DB, d *storh.Docs, _ *storh.Log, _ storh.Record) error {
			_, err := d.PatchMatching(query.All(), storh.Set("name", 7))
			return err
		}},
		{"typed Put", -1, "/age: minimum", func(db *storh.DB, _ *storh.Docs, _ *storh.Log, _ storh.Record) error {
			td, err := storh.DocsOf[person](db, "people")
			if err != nil {
				return err
			}
			_, err = td.Put(person{Name: "x", Age: -1})
			return err
		}},
		{"typed Patch", -1, "/: missing property 'name'", func(db *storh.DB, _ *storh.Docs, _ *storh.Log, keep storh.Record) error {
			td, err := storh.DocsOf[person](db, "people")
			if err != nil {
				return err
			}
			_, err = td.Patch(keep.ID, storh.Unset("name"))
			return err
		}},
		{"Update", -1, "/age", func(db *storh.DB, _ *storh.Docs, _ *storh.Log, _ storh.Record) error {
			return db.Update(func(tx *storh.Tx) error {
				d, err := tx.Docs("people")
				if err != nil {
					return err
				}
				if _, err := d.Put(storh.Map{"name": "ok", "age": 1}); err != nil {
					return err
				}
				_, err = d.Put(bad)
				return err
			})
		}},
		{"Log Put", -1, "/age", func(_ *storh.DB, _ *storh.Docs, l *storh.Log, _ storh.Record) error {
			_, err := l.Put(bad)
			return err
		}},
		{"Log PutMany", 1, "/age", func(_ *storh.DB, _ *storh.Docs, l *storh.Log, _ storh.Record) error {
			_, err := l.PutMany([]any{storh.Map{"name": "a", "age": 1}, bad})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTemp(t)
			d, err := db.Docs("people", storh.WithSchema(personSchema))
			if err != nil {
				t.Fatal(err)
			}
			l, err := db.Log("events", storh.WithSchema(personSchema))
			if err != nil {
				t.Fatal(err)
			}
			keep, err := d.Put(storh.Map{"name": "kept", "age": 40})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Put(storh.Map{"name": "kept", "age": 40}); err != nil {
				t.Fatal(err)
			}
			before := digest(t, db)
			err = tc.write(db, d, l, keep)
			checkErr(t, err, storh.ErrSchema, tc.mention)
			var se *storh.Error
			if !errors.As(err, &se) {
				t.Fatalf("%T is not a *storh.Error", err)
			}
			if se.Index != tc.index {
				t.Errorf("Index = %d, want %d", se.Index, tc.index)
			}
			if se.Hint == "" {
				t.Error("no hint")
			}
			if after := digest(t, db); after != before {
				t.Error("the failed write changed the store")
			}
		})
	}
}

// A violating put in a group commit fails alone: the puts committed with
// it are stored.
func TestSchemaViolationFailsAloneInGroupCommit(t *testing.T) {
	db := openTemp(t)
	d, err := db.Docs("people", storh.WithSchema(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	const writers = 32
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			age := i
			if i%4 == 0 {
				age = -i - 1
			}
			_, errs[i] = d.Put(storh.Map{"name": "w", "age": age})
		})
	}
	wg.Wait()
	stored := 0
	for i, err := range errs {
		switch {
		case i%4 == 0 && !errors.Is(err, storh.ErrSchema):
			t.Errorf("writer %d (age %d): %v, want ErrSchema", i, -i-1, err)
		case i%4 != 0 && err != nil:
			t.Errorf("writer %d: %v", i, err)
		case err == nil:
			stored++
		}
	}
	if n := mustCount(t, d); n != stored {
		t.Errorf("Count = %d, want %d", n, stored)
	}
}

// SetSchema checks every record first: with records that fail, it lists
// the first 10 and how many more, and changes nothing; with none, it sets
// the schema, which later writes meet; nil removes it.
func TestSetSchemaChecksExistingRecords(t *testing.T) {
	db := openTemp(t)
	d, err := db.Docs("people")
	if err != nil {
		t.Fatal(err)
	}
	var badIDs []string
	for i := range 15 {
		r, err := d.Put(storh.Map{"name": "p", "age": -i - 1})
		if err != nil {
			t.Fatal(err)
		}
		badIDs = append(badIDs, r.ID.String())
	}
	good, err := d.Put(storh.Map{"name": "ok", "age": 3})
	if err != nil {
		t.Fatal(err)
	}
	before := digest(t, db)
	err = db.SetSchema("people", personSchema)
	checkErr(t, err, storh.ErrSchema, "15 of the records", badIDs[0], badIDs[9], "and 5 more", "/age: minimum: got -1, want 0")
	if strings.Contains(err.Error(), badIDs[10]) || strings.Contains(err.Error(), good.ID.String()) {
		t.Errorf("the error lists more than the first 10 failing records: %v", err)
	}
	if got, err := db.Schema("people"); err != nil || got != nil {
		t.Fatalf("Schema after a refused SetSchema = %s, %v; want none", got, err)
	}
	if digest(t, db) != before {
		t.Error("a refused SetSchema changed the store")
	}

	if _, err := d.DeleteMatching(query.All().Where(query.Field("age").Lt(0))); err != nil {
		t.Fatal(err)
	}
	if err := db.SetSchema("people", personSchema); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Schema("people"); err != nil || string(got) != string(personSchema) {
		t.Fatalf("Schema = %s, %v; want it as given", got, err)
	}
	if _, err := d.Put(storh.Map{"name": "x", "age": -1}); !errors.Is(err, storh.ErrSchema) {
		t.Fatalf("Put after SetSchema: %v, want ErrSchema", err)
	}
	if err := db.SetSchema("people", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Schema("people"); err != nil || got != nil {
		t.Fatalf("Schema after removing it = %s, %v", got, err)
	}
	if _, err := d.Put(storh.Map{"name": "x", "age": -1}); err != nil {
		t.Fatalf("Put after the schema was removed: %v", err)
	}
}

// The refusals of the schema calls and options themselves.
func TestSchemaBadArguments(t *testing.T) {
	db := openTemp(t)
	if _, err := db.Docs("people", storh.WithSchema(personSchema)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Docs("people", storh.WithSchema(personSchema)); err != nil {
		t.Fatalf("reopening a collection not created yet with its schema: %v", err)
	}
	d, _ := db.Docs("people", storh.WithSchema(personSchema))
	if _, err := d.Put(storh.Map{"name": "a", "age": 1}); err != nil {
		t.Fatal(err)
	}
	respaced := []byte(`{"required":["name","age"],"type":"object","properties":{"tags":{"items":{"type":"string"},"type":"array"},"age":{"minimum":0,"type":"integer"},"name":{"minLength":1,"type":"string"}}}`)
	if _, err := db.Docs("people", storh.WithSchema(respaced)); err != nil {
		t.Fatalf("reopening with the same schema spaced and ordered otherwise: %v", err)
	}
	q, err := db.Queue("jobs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(storh.Map{"a": 1}); err != nil {
		t.Fatal(err)
	}
	plain, err := db.Docs("plain")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Put(storh.Map{"a": 1}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		call    func() error
		want    error
		mention string
	}{
		{"another schema on an existing collection", func() error {
			_, err := db.Docs("people", storh.WithSchema([]byte(`{"type":"object"}`)))
			return err
		}, storh.ErrInvalidOption, `exists with the schema {`},
		{"a schema on an existing collection without", func() error {
			_, err := db.Docs("plain", storh.WithSchema(personSchema))
			return err
		}, storh.ErrInvalidOption, "exists with no schema"},
		{"another schema inside Update", func() error {
			return db.Update(func(tx *storh.Tx) error {
				_, err := tx.Docs("people", storh.WithSchema([]byte(`true`)))
				return err
			})
		}, storh.ErrInvalidOption, "SetSchema"},
		{"not JSON", func() error {
			_, err := db.Docs("x", storh.WithSchema([]byte(`{"type":`)))
			return err
		}, storh.ErrInvalidOption, "not JSON"},
		{"not a schema", func() error {
			_, err := db.Docs("x", storh.WithSchema([]byte(`{"type":"integr"}`)))
			return err
		}, storh.ErrInvalidOption, "does not compile"},
		{"a reference to another document", func() error {
			_, err := db.Docs("x", storh.WithSchema([]byte(`{"$ref":"https://example.com/s.json"}`)))
			return err
		}, storh.ErrInvalidOption, "does not compile"},
		{"SetSchema not a schema", func() error { return db.SetSchema("people", []byte(`[1]`)) }, storh.ErrInvalidOption, "a schema is a JSON object"},
		{"a queue", func() error {
			_, err := db.Queue("q", storh.WithSchema(personSchema))
			return err
		}, storh.ErrInvalidOption, "not a queue"},
		{"SetSchema of a queue", func() error { return db.SetSchema("jobs", personSchema) }, storh.ErrInvalidOption, "queue"},
		{"SetSchema of a missing collection", func() error { return db.SetSchema("nobody", personSchema) }, storh.ErrNotFound, "nobody"},
		{"Schema of a missing collection", func() error {
			_, err := db.Schema("nobody")
			return err
		}, storh.ErrNotFound, "nobody"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := digest(t, db)
			checkErr(t, tc.call(), tc.want, tc.mention)
			if digest(t, db) != before {
				t.Error("the refused call changed the store")
			}
		})
	}
}

// The schema is stored with the collection: a reopened database, and a
// handle opened without WithSchema, still enforce it.
func TestSchemaSurvivesReopen(t *testing.T) {
	path := newPath(t)
	db := openAt(t, path)
	d, err := db.Docs("people", storh.WithSchema(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(storh.Map{"name": "a", "age": 1}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openAt(t, path)
	if got, err := db.Schema("people"); err != nil || string(got) != string(personSchema) {
		t.Fatalf("Schema after reopen = %s, %v", got, err)
	}
	d, err = db.Docs("people")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(storh.Map{"name": "a", "age": -1}); !errors.Is(err, storh.ErrSchema) {
		t.Fatalf("Put after reopen: %v, want ErrSchema", err)
	}
}

// Storing a schema raises a file's format marker to 6, which a storh from
// before schemas (reading formats up to 5) refuses to open (see
// TestFormatMarker in the engine); a file without a schema keeps its
// format (5, where paths go through lists), readable by the builds since.
func TestSchemaRaisesFormat(t *testing.T) {
	fileOnly(t)
	path := newPath(t)
	db := openAt(t, path)
	d, err := db.Docs("people")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(storh.Map{"name": "a", "age": 1}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if m := formatMarker(t, path); m != 5 {
		t.Fatalf("a file without schemas: format %d, want 5", m)
	}
	db = openAt(t, path)
	if err := db.SetSchema("people", personSchema); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if m := formatMarker(t, path); m != 6 {
		t.Fatalf("after SetSchema: format %d, want 6", m)
	}

	created := filepath.Join(t.TempDir(), "created.db")
	db = openAt(t, created)
	d, err = db.Docs("people", storh.WithSchema(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(storh.Map{"name": "a", "age": 1}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if m := formatMarker(t, created); m != 6 {
		t.Fatalf("after a collection made with WithSchema: format %d, want 6", m)
	}
}

// Migrate copies the schema with the collection, and the copy enforces it.
func TestSchemaMigrates(t *testing.T) {
	src := newPath(t)
	db := openAt(t, src)
	d, err := db.Docs("people", storh.WithSchema(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(storh.Map{"name": "a", "age": 1}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	dst := filepath.Join(t.TempDir(), "copy.db")
	if _, err := storh.Migrate(t.Context(), src, dst); err != nil {
		t.Fatal(err)
	}
	copied := openAt(t, dst)
	if got, err := copied.Schema("people"); err != nil || string(got) != string(personSchema) {
		t.Fatalf("the copy's schema = %s, %v", got, err)
	}
	cd, err := copied.Docs("people")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cd.Put(storh.Map{"name": "a", "age": -5}); !errors.Is(err, storh.ErrSchema) {
		t.Fatalf("Put into the copy: %v, want ErrSchema", err)
	}
}

// How stored values reach the validator (docs/schemas.md): every row of
// the table, by a schema that holds only for the mapped form.
func TestSchemaValueMapping(t *testing.T) {
	db := openTemp(t)
	id := uuidv7.MustParse("0190f3c4-5a6b-7c8d-9e0f-a1b2c3d4e5f6")
	for _, tc := range []struct {
		name   string
		value  any
		schema string
	}{
		{"int", 42, `{"type":"integer","const":42}`},
		{"big uint64 kept exact", uint64(18446744073709551615), `{"type":"integer","minimum":18446744073709551615}`},
		{"int64 min exact", int64(-9223372036854775808), `{"type":"integer","maximum":-9223372036854775808}`},
		{"float", 1.5, `{"type":"number","multipleOf":0.5}`},
		{"integral float is an integer", 2.0, `{"type":"integer"}`},
		{"NaN", storh.Map{"f": math.NaN()}, `{"type":"object","required":["f"],"properties":{"f":{"const":"NaN"}}}`},
		{"bool", true, `{"type":"boolean"}`},
		{"nil", nil, `{"type":"null"}`},
		{"string", "héllo", `{"type":"string","maxLength":5}`},
		{"time", mustTime(t, "2024-05-06T07:08:09.123456789Z"), `{"type":"string","format":"date-time","const":"2024-05-06T07:08:09.123456789Z"}`},
		{"uuid", id, `{"type":"string","format":"uuid","const":"0190f3c4-5a6b-7c8d-9e0f-a1b2c3d4e5f6"}`},
		{"bytes", []byte{0, 1, 2, 250}, `{"type":"string","const":"AAEC+g=="}`},
		{"list", []any{1, "a"}, `{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}]}`},
		{"map", storh.Map{"k": 1}, `{"type":"object","additionalProperties":{"type":"integer"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := []byte(`{"type":"object","required":["v"],"properties":{"v":` + tc.schema + `}}`)
			name := strings.ReplaceAll(tc.name, " ", "-")
			d, err := db.Docs(name, storh.WithSchema(schema))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Put(storh.Map{"v": tc.value}); err != nil {
				t.Fatalf("a value the schema holds for: %v", err)
			}
			if _, err := d.Put(storh.Map{"v": storh.Map{"other": []any{}}}); !errors.Is(err, storh.ErrSchema) {
				t.Fatalf("a value it does not hold for: %v", err)
			}
		})
	}
}

func TestSchemaErrorNamesPointers(t *testing.T) {
	db := openTemp(t)
	d, err := db.Docs("people", storh.WithSchema([]byte(`{"properties":{"a/b":{"properties":{"c~d":{"type":"string"}}}}}`)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Put(storh.Map{"a/b": storh.Map{"c~d": 1}})
	checkErr(t, err, storh.ErrSchema, "/a~1b/c~0d: got number, want string")
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// A collection's schema is part of its layout: Verify finds nothing wrong
// with it, and Compact keeps it.
func TestSchemaVerifyAndCompact(t *testing.T) {
	path := newPath(t)
	db := openAt(t, path)
	d, err := db.Docs("people", storh.WithSchema(personSchema))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(storh.Map{"name": "a", "age": 1}); err != nil {
		t.Fatal(err)
	}
	verifyClean(t, db)
	if onPostgres {
		return
	}
	db.Close()
	dst := filepath.Join(t.TempDir(), "compact.db")
	if _, err := storh.Compact(path, dst); err != nil {
		t.Fatal(err)
	}
	compacted := openAt(t, dst)
	if got, err := compacted.Schema("people"); err != nil || string(got) != string(personSchema) {
		t.Fatalf("the compacted file's schema = %s, %v", got, err)
	}
	verifyClean(t, compacted)
}
