package jsonl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// marshalLine is json.Marshal of rec, without HTML escaping, and a newline.
func marshalLine(t tb, rec storh.Record) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rec); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Records as Go programs write them: structs whose fields are not in
// alphabetical order, nested structs, typed maps (the records of the
// command's TestRoundTripLibraryRecords).
type rtAddress struct {
	Street string    `msgpack:"street"`
	City   string    `msgpack:"city"`
	Geo    []float64 `msgpack:"geo"`
}

type rtUser struct {
	Name     string              `msgpack:"name"`
	Age      int                 `msgpack:"age"`
	Active   bool                `msgpack:"active"`
	Score    float32             `msgpack:"score"`
	Joined   time.Time           `msgpack:"joined"`
	Avatar   []byte              `msgpack:"avatar"`
	Address  rtAddress           `msgpack:"address"`
	Visits   map[string]int      `msgpack:"visits"`
	Tags     map[string][]string `msgpack:"tags"`
	Nickname *string             `msgpack:"nickname"`
	Zone     string              // no tag: the field name is the key
	Alpha    uint8               `msgpack:"alpha"`
}

// hasFloat32 reports data with float32 values: a struct or map of the
// test's records that holds one.
func hasFloat32(data any) bool {
	switch d := data.(type) {
	case rtUser, *rtUser, map[string]float32:
		return true
	case map[string]any:
		_, ok := d["f32"]
		return ok
	}
	return false
}

func libraryRecords() []any {
	cest := time.FixedZone("CEST", 2*3600)
	nick := "lena"
	return []any{
		storh.Map{"zeta": 1, "alpha": "a", "mid": storh.Map{"y": 2.5, "b": []any{int64(1), "s", nil, true}}, "when": time.Date(2024, 5, 1, 12, 0, 0, 123456789, cest), "raw": []byte{0, 1, 0xff}},
		map[string]any{"counts": map[string]int{"b": 2, "a": 1, "c": 3}, "lists": map[string][]string{"z": {"x"}, "a": {"b", "a"}}, "f32": float32(0.1)},
		rtUser{Name: "Lena", Age: 68, Active: true, Score: 1.5, Joined: time.Date(2020, 1, 1, 0, 5, 6, 180_000_000, cest),
			Avatar: []byte("avatar"), Address: rtAddress{Street: "Calle Mayor 100", City: "Lagos", Geo: []float64{50.416, -18.0605}},
			Visits: map[string]int{"web": 3, "api": 1}, Tags: map[string][]string{"roles": {"admin", "dev"}, "empty": {}}, Nickname: &nick, Zone: "UTC", Alpha: 7},
		rtUser{},
		&rtUser{Name: "Bo", Score: float32(1) / 3, Joined: time.Unix(0, 1).UTC()},
		map[string]int{"z": 26, "a": 1, "m": 13},
		map[string][]string{"b": {"2"}, "a": {"1", "one"}},
		map[string]float32{"pi": 3.14159, "e": 2.71828},
		storh.Map{"html": "<a href=\"x\">&amp;</a>", "nan": math.NaN(), "big": uint64(1<<64 - 1), "neg": int64(-1 << 63)},
	}
}

// TestRecordJSONIsTheExportLine checks that json.Marshal of a Record is
// the line Export writes for it and AppendRecord appends, and that
// UnmarshalJSON gives back a record with the same id and bytes.
func TestRecordJSONIsTheExportLine(t *testing.T) {
	db := openDB(t)
	c := docs(t, db, "rt")
	var want bytes.Buffer
	for i, data := range libraryRecords() {
		id := uuidv7.MustParse(fmt.Sprintf("0190a4f4-5c3b-7def-8123-%012x", i+1))
		rec, err := c.PutWithID(id, data)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		line := marshalLine(t, rec)
		appended, err := AppendRecord(nil, rec.ID, rec.Raw())
		if err != nil || !bytes.Equal(appended, line) {
			t.Errorf("record %d: AppendRecord = %s, %v\njson.Marshal = %s", i, appended, err, line)
		}
		// json.Marshal escapes <, > and &; the values are the same.
		std, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.ContainsAny(string(line), "<>&") && string(std)+"\n" != string(line) {
			t.Errorf("record %d: json.Marshal = %s, want %s", i, std, line)
		}
		// Read back, the record has the same id and data: the same bytes,
		// but where float32 values (which JSON carries as float64) widen.
		for _, js := range [][]byte{std, line} {
			var back storh.Record
			if err := json.Unmarshal(js, &back); err != nil {
				t.Fatalf("record %d: unmarshal %s: %v", i, js, err)
			}
			if again := marshalLine(t, back); back.ID != rec.ID || !bytes.Equal(again, line) {
				t.Errorf("record %d: unmarshalled %s, marshalled again %s", i, js, again)
			}
			if !hasFloat32(data) && !bytes.Equal(back.Raw(), rec.Raw()) {
				t.Errorf("record %d: unmarshalled %s as %x, want %x", i, js, back.Raw(), rec.Raw())
			}
		}
		want.Write(line)
	}
	var got bytes.Buffer
	if _, err := Export(context.Background(), &got, c, query.All()); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("Export:\n%s\njson.Marshal of each record:\n%s", got.String(), want.String())
	}

	// A record inside a struct, and a slice of them, as an API returns them.
	recs, err := c.Find(query.All().Limit(2))
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(struct {
		Items []storh.Record `json:"items"`
	}{recs})
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Items []storh.Record `json:"items"`
	}
	if err := json.Unmarshal(js, &page); err != nil || len(page.Items) != 2 || page.Items[1].ID != recs[1].ID || !bytes.Equal(page.Items[0].Raw(), recs[0].Raw()) {
		t.Errorf("a page of records: %s read back as %+v, %v", js, page, err)
	}
}

func TestRecordUnmarshalJSONErrors(t *testing.T) {
	const id = `"0190a4f4-5c3b-7def-8123-456789abcdef"`
	for _, tt := range []struct {
		js   string
		is   error
		want string
	}{
		{`{"id":` + id + `,"data":{"a":1}`, ErrSyntax, "unexpected end"},
		{`{"data":{"a":1}}`, ErrRow, "needs its id"},
		{`{"id":null,"data":{"a":1}}`, ErrRow, "got null"},
		{`{"id":` + id + `}`, ErrRow, "needs its data"},
		{`{"id":` + id + `,"data":[1]}`, ErrRow, "must be a JSON object"},
		{`{"id":` + id + `,"data":{},"extra":1}`, ErrRow, `only the keys`},
		{`{"id":"0190a4f4-5c3b-4def-8123-456789abcdef","data":{}}`, ErrRow, "version"},
		{`{"id":` + id + `,"data":{"a":1,"a":2}}`, ErrRow, "duplicate key"},
		{`{"id":` + id + `,"data":{"d":` + strings.Repeat("[", 80) + strings.Repeat("]", 80) + `}}`, storh.ErrInvalidData, "deep"},
	} {
		var rec storh.Record
		err := rec.UnmarshalJSON([]byte(tt.js))
		if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.60s: %v, want %v mentioning %q", tt.js, err, tt.is, tt.want)
		}
	}
	// null leaves the record alone, as for every json.Unmarshaler.
	rec := storh.Record{ID: uuidv7.MustParse("0190a4f4-5c3b-7def-8123-456789abcdef")}
	if err := json.Unmarshal([]byte("null"), &rec); err != nil || rec.ID.IsZero() {
		t.Errorf("null: %v, %v", rec.ID, err)
	}
	// The zero Record has no data to write.
	if _, err := json.Marshal(storh.Record{}); !errors.Is(err, ErrPayload) {
		t.Errorf("json.Marshal(Record{}) = %v, want ErrPayload", err)
	}
}

// TestRoundTripRecordJSONImportExport writes random records through the
// library, turns each into JSON with json.Marshal, imports those lines into
// a fresh collection and exports that: the export is the same bytes, and
// the imported records have the same ids and stored bytes.
func TestRoundTripRecordJSONImportExport(t *testing.T) {
	db := openDB(t)
	var n atomic.Int64
	rapid.Check(t, func(t *rapid.T) {
		k := n.Add(1)
		src := docs(t, db, fmt.Sprintf("src%d", k))
		dst := docs(t, db, fmt.Sprintf("dst%d", k))
		count := rapid.IntRange(1, 5).Draw(t, "records")
		var lines bytes.Buffer
		var recs []storh.Record
		for range count {
			rec, err := src.Put(genMap(3).Draw(t, "data"))
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, rec)
			lines.Write(marshalLine(t, rec))
		}
		rep, err := Import(context.Background(), bytes.NewReader(lines.Bytes()), dst)
		if err != nil || rep.Imported != count || rep.Inserted != count {
			t.Fatalf("import: %+v, %v", rep, err)
		}
		var out bytes.Buffer
		if _, err := Export(context.Background(), &out, dst, query.All()); err != nil {
			t.Fatal(err)
		}
		if out.String() != lines.String() {
			t.Fatalf("export after import:\n%s\nwant\n%s", out.String(), lines.String())
		}
		for _, rec := range recs {
			got, err := dst.Get(rec.ID)
			if err != nil || !bytes.Equal(got.Raw(), rec.Raw()) {
				t.Fatalf("record %v: %x, %v; want %x", rec.ID, got.Raw(), err, rec.Raw())
			}
		}
	})
}
