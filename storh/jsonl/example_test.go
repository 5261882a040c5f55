package jsonl_test

import (
	"bytes"
	"context"
	"encoding/json"
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
