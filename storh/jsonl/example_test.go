package jsonl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/jsonl"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

func ExampleDecodeRow() {
	row, err := jsonl.DecodeRow([]byte(`{"id":"0190a4f4-5c3b-7def-8123-456789abcdef","data":{"n":5,"f":5.0,"at":{"$date":"2024-05-01T12:00:00Z"}}}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(row.ID)
	for _, k := range []string{"n", "f", "at"} {
		fmt.Printf("%s: %T %v\n", k, row.Data[k], row.Data[k])
	}
	// Output:
	// 0190a4f4-5c3b-7def-8123-456789abcdef
	// n: int64 5
	// f: float64 5
	// at: time.Time 2024-05-01 12:00:00 +0000 UTC
}

func ExampleDecoder_DecodeMongo() {
	var d jsonl.Decoder
	row, err := d.DecodeMongo([]byte(`{"_id":{"$oid":"65a1b2c3d4e5f60718293a4b"},"price":{"$numberDecimal":"19.99"},"qty":{"$numberLong":"3"}}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(row.ID, row.ID.Time().UTC().Format(time.RFC3339))
	fmt.Println(row.Data["_oid"], row.Data["price"], row.Data["qty"])
	// Output:
	// 018cffa2-49b8-7d4e-97d8-1c60a4e92c00 2024-01-12T21:44:35Z
	// 65a1b2c3d4e5f60718293a4b 19.99 3
}

func ExampleAppendValue() {
	js, err := jsonl.AppendValue(nil, map[string]any{
		"int":   int64(1),
		"float": 1.0,
		"bytes": []byte("hi"),
		"when":  time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(js))
	// Output:
	// {"bytes":{"$binary":{"base64":"aGk=","subType":"00"}},"float":1.0,"int":1,"when":{"$date":"2024-05-01T12:00:00Z"}}
}

// exampleDB opens a fresh database in a temporary directory; the returned
// func closes it and removes the directory.
func exampleDB() (*storh.DB, func()) {
	dir, err := os.MkdirTemp("", "jsonl-example")
	if err != nil {
		panic(err)
	}
	db, err := storh.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	return db, func() {
		db.Close()
		os.RemoveAll(dir)
	}
}

func ExampleExport() {
	db, done := exampleDB()
	defer done()
	pages, _ := db.Docs("pages")
	pages.PutWithID(uuidv7.MustParse("0190a4f4-5c3b-7def-8123-456789abcdef"), storh.Map{
		"slug":    "home",
		"words":   1125,
		"ratio":   2.0,
		"updated": time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC),
	})

	var out bytes.Buffer
	rep, err := jsonl.Export(context.Background(), &out, pages, query.All())
	if err != nil {
		panic(err)
	}
	fmt.Print(out.String())
	fmt.Println(rep.Records, "record")

	// WithoutTime writes what `storh export` writes.
	out.Reset()
	jsonl.Export(context.Background(), &out, pages, query.All(), jsonl.WithoutTime())
	fmt.Print(out.String())
	// Output:
	// {"id":"0190a4f4-5c3b-7def-8123-456789abcdef","time":"2024-07-12T03:19:56.219Z","data":{"ratio":2.0,"slug":"home","updated":{"$date":"2024-05-01T12:00:00Z"},"words":1125}}
	// 1 record
	// {"id":"0190a4f4-5c3b-7def-8123-456789abcdef","data":{"ratio":2.0,"slug":"home","updated":{"$date":"2024-05-01T12:00:00Z"},"words":1125}}
}

func ExampleImport() {
	db, done := exampleDB()
	defer done()
	pages, _ := db.Docs("pages")

	in := strings.NewReader(`{"id":"0190a4f4-5c3b-7def-8123-456789abcdef","data":{"slug":"home"}}
{"slug":"about","at":{"$date":"2024-05-01T12:00:00Z"}}
{"slug":
{"id":"0190a4f4-5c3b-7def-8123-456789abcdef","data":{"slug":"home, again"}}
`)
	rep, err := jsonl.Import(context.Background(), in, pages,
		jsonl.SkipInvalid(),
		jsonl.OnDuplicate(jsonl.DuplicateLast),
		jsonl.OnSkip(func(line int, err error) { fmt.Printf("line %d skipped: %v\n", line, err) }))
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d written (%d new, %d replaced), %d skipped\n", rep.Imported, rep.Inserted, rep.Replaced, rep.Skipped)
	home, _ := pages.Get(uuidv7.MustParse("0190a4f4-5c3b-7def-8123-456789abcdef"))
	fmt.Println(home.Data()["slug"])
	// Output:
	// line 3 skipped: jsonl: invalid JSON at column 9: unexpected end of line, expected a value
	// 3 written (2 new, 1 replaced), 1 skipped
	// home, again
}

// A record's JSON is its line of Export: storh.Record implements
// json.Marshaler and json.Unmarshaler.
func Example_recordJSON() {
	db, done := exampleDB()
	defer done()
	events, _ := db.Log("events")
	rec, _ := events.PutWithID(uuidv7.MustParse("0190a4f4-5c3b-7def-8123-456789abcdef"),
		storh.Map{"kind": "login", "raw": []byte("hi"), "nan": math.NaN()})

	js, err := json.Marshal(rec)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(js))

	var back storh.Record
	if err := json.Unmarshal(js, &back); err != nil {
		panic(err)
	}
	fmt.Println(back.ID == rec.ID, bytes.Equal(back.Raw(), rec.Raw()))
	// Output:
	// {"id":"0190a4f4-5c3b-7def-8123-456789abcdef","time":"2024-07-12T03:19:56.219Z","data":{"kind":"login","nan":{"$numberDouble":"NaN"},"raw":{"$binary":{"base64":"aGk=","subType":"00"}}}}
	// true true
}

func ExampleWithProgress() {
	db, done := exampleDB()
	defer done()
	logs, _ := db.Log("logs")
	var in strings.Builder
	for i := range 250 {
		fmt.Fprintf(&in, "{\"n\":%d}\n", i)
	}
	// Every 100 records (the interval trigger is off), and once at the end.
	_, err := jsonl.Import(context.Background(), strings.NewReader(in.String()), logs,
		jsonl.WithProgress(100, 0, func(p jsonl.Progress) { fmt.Println("imported", p.Records) }))
	if err != nil {
		panic(err)
	}
	// Output:
	// imported 100
	// imported 200
	// imported 250
}

func ExampleWithLineFunc() {
	db, done := exampleDB()
	defer done()
	users, _ := db.Docs("users")
	in := strings.NewReader(`{"email":"ADA@EXAMPLE.COM"}
{"name":"no email"}
`)
	// Normalise a field on the way in, and refuse rows without it.
	rep, err := jsonl.Import(context.Background(), in, users, jsonl.SkipInvalid(),
		jsonl.OnSkip(func(line int, err error) { fmt.Printf("line %d: %v\n", line, err) }),
		jsonl.WithLineFunc(func(line int, text []byte, row jsonl.Row, err error) (jsonl.Row, error) {
			if err != nil {
				return row, err
			}
			email, ok := row.Data["email"].(string)
			if !ok {
				return row, fmt.Errorf("no email")
			}
			row.Data["email"] = strings.ToLower(email)
			return row, nil
		}))
	if err != nil {
		panic(err)
	}
	recs, _ := users.Find(query.All())
	fmt.Println(rep.Imported, recs[0].Data()["email"])
	// Output:
	// line 2: no email
	// 1 ada@example.com
}

func ExampleMongo() {
	db, done := exampleDB()
	defer done()
	users, _ := db.Docs("users")
	in := strings.NewReader(`{"_id":{"$oid":"5e0be232153bcf7c10df5e93"},"name":"Lena","boss":{"$oid":"5e0be232153bcf7c10df5e94"}}
`)
	if _, err := jsonl.Import(context.Background(), in, users, jsonl.Mongo()); err != nil {
		panic(err)
	}
	// The ObjectID _id became the record id (same creation second) and is
	// kept, typed, as _oid; other ObjectIDs stay typed too.
	rec, _ := users.First(query.All())
	fmt.Println(rec.ID, rec.Time().UTC())
	fmt.Printf("%v %T\n", rec.Data()["_oid"], rec.Data()["boss"])
	// Output:
	// 016f5e6b-9350-7153-af3d-f0437d7a4c00 2020-01-01 00:05:06 +0000 UTC
	// 5e0be232153bcf7c10df5e93 objectid.ObjectID
}

func ExampleOnDuplicate() {
	db, done := exampleDB()
	defer done()
	pages, _ := db.Docs("pages")
	in := `{"id":"0190a4f4-5c3b-7def-8123-456789abcdef","data":{"v":1}}
{"id":"0190a4f4-5c3b-7def-8123-456789abcdef","data":{"v":2}}
`
	// By default an id twice in one file stops the import before writing
	// its batch; DuplicateSkip keeps the first, DuplicateLast the last.
	_, err := jsonl.Import(context.Background(), strings.NewReader(in), pages)
	var de *jsonl.DuplicateError
	fmt.Println(errors.As(err, &de), de.First)
	rep, _ := jsonl.Import(context.Background(), strings.NewReader(in), pages, jsonl.OnDuplicate(jsonl.DuplicateSkip))
	rec, _ := pages.Get(uuidv7.MustParse("0190a4f4-5c3b-7def-8123-456789abcdef"))
	fmt.Println(rep.Duplicates, rec.Data()["v"])
	// Output:
	// true 1
	// 1 1
}

func ExampleInvalidUTF8AsBinary() {
	db, done := exampleDB()
	defer done()
	raw, _ := db.Docs("raw")
	in := strings.NewReader("{\"name\":\"caf\xe9\"}\n") // Latin-1, not UTF-8
	_, err := jsonl.Import(context.Background(), in, raw)
	fmt.Println(jsonl.InvalidUTF8(err))
	in = strings.NewReader("{\"name\":\"caf\xe9\"}\n")
	if _, err := jsonl.Import(context.Background(), in, raw, jsonl.InvalidUTF8AsBinary()); err != nil {
		panic(err)
	}
	rec, _ := raw.First(query.All())
	fmt.Printf("%q\n", rec.Data()["name"])
	// Output:
	// true
	// "caf\xe9"
}
