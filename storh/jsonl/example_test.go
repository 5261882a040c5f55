package jsonl_test

import (
	"fmt"
	"time"

	"github.com/storhdb/storh-go/storh/jsonl"
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
