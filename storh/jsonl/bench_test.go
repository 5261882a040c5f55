package jsonl

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/objectid"
)

// The decoder benchmarks compare the hand-written tokenizer with
// encoding/json on the same rows, in the same run. The package keeps its own
// tokenizer only while it is at least twice as fast as encoding/json giving
// the same values (encoding_json_typed below, which still leaves out the
// duplicate-key and UTF-8 checks a switch would need): below that, the
// standard library's maintenance and scrutiny are worth more.
//
//	go test ./storh/jsonl -run XXX -bench Decode/ -count 10 -cpu 1
//
// The rows are a mix of what import meets: log events as bare objects,
// export rows with ids and typed values, mongoexport documents with nested
// objects and Extended JSON wrappers, and text-heavy documents with escapes
// and non-ASCII text.

// benchRows returns n rows of the mix, each ending in a newline.
func benchRows(n int) [][]byte {
	r := rand.New(rand.NewPCG(7, 11))
	levels := []string{"info", "warn", "error", "debug"}
	words := []string{"storage", "naïve", "Zürich", "東京", "commit", "batch", "page", "line", "\"quoted\"", "tab\there", "emoji 😀", "déjà vu"}
	text := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.IntN(len(words))])
		}
		return b.String()
	}
	q := func(s string) string { v, _ := json.Marshal(s); return string(v) }
	rows := make([][]byte, 0, n)
	for i := range n {
		var line string
		switch i % 4 {
		case 0: // a log event, bare
			line = fmt.Sprintf(`{"level":%q,"service":"api","method":"GET","path":"/pages/%d","status":%d,"ms":%.3f,"user":"u%04d","ok":%t,"n":%d,"tags":["a","b"]}`,
				levels[r.IntN(4)], r.IntN(1000), 200+r.IntN(4), r.Float64()*100, r.IntN(10000), r.IntN(2) == 0, i)
		case 1: // an export row: id, typed values
			line = fmt.Sprintf(`{"id":"0190a4f4-5c3b-7def-8123-%012x","data":{"author":"dara","kind":"page","published":true,"slug":"post-%03d","tags":["ops","howto"],"title":%s,"updated":{"$date":"2024-05-%02dT10:%02d:00.123Z"},"words":%d,"score":%.2f}}`,
				i, i%1000, q(text(4)), 1+r.IntN(28), r.IntN(60), r.IntN(3000), r.Float64()*5)
		case 2: // a mongoexport document
			line = fmt.Sprintf(`{"_id":{"$oid":"5e0be232153bcf7c10%06x"},"name":%s,"email":"user%d@example.com","age":%d,"active":%t,"balance":{"$numberDecimal":"%d.%02d"},"visits":{"$numberLong":"%d"},"address":{"street":"Calle Mayor %d","city":"Lagos","geo":{"type":"Point","coordinates":[%.4f,%.4f]}},"createdAt":{"$date":"2020-01-01T00:05:06.180Z"},"avatar":{"$binary":{"base64":%q,"subType":"00"}},"friends":[],"prefs":{"theme":"light","notifications":{"email":true,"push":false}}}`,
				i, q(text(2)), i, 18+r.IntN(60), r.IntN(2) == 0, r.IntN(100000), r.IntN(100), r.Int64N(1e12), r.IntN(200),
				r.Float64()*180-90, r.Float64()*360-180, base64.StdEncoding.EncodeToString([]byte(text(1))))
		case 3: // a text-heavy document
			line = fmt.Sprintf(`{"title":%s,"body":%s,"lang":"en","comments":[{"by":"ana","text":%s},{"by":"bo","text":%s}],"rating":%d}`,
				q(text(6)), q(text(40)), q(text(8)), q(text(5)), r.IntN(6))
		}
		rows = append(rows, []byte(line+"\n"))
	}
	return rows
}

const benchRowCount = 1000

// BenchmarkDecode compares the decoders on 1,000 rows per op, in five
// inputs: each kind of row alone (a file of one collection, the usual
// import: its rows share a shape) and the four kinds interleaved row by row
// (the worst case for the map-size hints of the hand-written decoder).
//
// Each op decodes the input three times, with each decoder in turn, timing
// each; the development machine is shared, and interleaving them makes
// noise fall on all alike. ns/op is all three together; the metrics are each
// one's time per row and how many times faster jsonl is than the other two:
//
//   - jsonl: the package's Decoder, line by line, as import calls it: typed
//     numbers, Extended JSON wrappers converted, duplicate keys and bad
//     UTF-8 rejected;
//   - encoding_json: a json.Decoder with UseNumber per line into any, the
//     way import would have to call it (one value per line, errors per
//     line). It does less than jsonl: numbers stay json.Number, wrappers stay
//     maps, nothing is checked;
//   - encoding_json_typed: the same, then converting the numbers and
//     wrappers to the values jsonl returns (stdTyped): the same output, what
//     import would run if it used encoding/json. Still no checks.
func BenchmarkDecode(b *testing.B) {
	rows := benchRows(4 * benchRowCount)
	inputs := []struct {
		name string
		rows [][]byte
	}{
		{"events", every(rows, 0)},
		{"export", every(rows, 1)},
		{"mongo", every(rows, 2)},
		{"text", every(rows, 3)},
		{"mixed", rows[:benchRowCount]},
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(2 * int64(len(bytes.Join(in.rows, nil))))
			b.ReportAllocs()
			var d Decoder
			var own, std, typed time.Duration
			for b.Loop() {
				t0 := time.Now()
				for _, line := range in.rows {
					if _, err := d.DecodeMongo(line[:len(line)-1]); err != nil {
						b.Fatal(err)
					}
				}
				t1 := time.Now()
				for _, line := range in.rows {
					if _, err := stdDecode(line); err != nil {
						b.Fatal(err)
					}
				}
				t2 := time.Now()
				for _, line := range in.rows {
					v, err := stdDecode(line)
					if err == nil {
						_, err = stdTyped(v)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				own, std, typed = own+t1.Sub(t0), std+t2.Sub(t1), typed+time.Since(t2)
			}
			n := float64(b.N * len(in.rows))
			b.ReportMetric(float64(own.Nanoseconds())/n, "jsonl-ns/row")
			b.ReportMetric(float64(std.Nanoseconds())/n, "encoding_json-ns/row")
			b.ReportMetric(float64(typed.Nanoseconds())/n, "encoding_json_typed-ns/row")
			b.ReportMetric(float64(std)/float64(own), "x-vs-encoding_json")
			b.ReportMetric(float64(typed)/float64(own), "x-vs-encoding_json_typed")
		})
	}
}

// every returns the rows of one kind: rows k, k+4, k+8, ...
func every(rows [][]byte, k int) [][]byte {
	var out [][]byte
	for i := k; i < len(rows); i += 4 {
		out = append(out, rows[i])
	}
	return out
}

func stdDecode(line []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// stdTyped converts encoding/json's UseNumber output to the values the
// package's decoder returns, for the wrappers the benchmark rows hold.
func stdTyped(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n, nil
			}
		}
		return strconv.ParseFloat(s, 64)
	case []any:
		for i, e := range x {
			var err error
			if x[i], err = stdTyped(e); err != nil {
				return nil, err
			}
		}
		return x, nil
	case map[string]any:
		if len(x) == 1 {
			for k, e := range x {
				switch k {
				case "$date":
					t, err := time.Parse(time.RFC3339Nano, e.(string))
					return t.UTC(), err
				case "$numberLong":
					return strconv.ParseInt(e.(string), 10, 64)
				case "$numberDecimal":
					return e, nil
				case "$oid":
					return objectid.Parse(e.(string))
				case "$binary":
					return base64.StdEncoding.DecodeString(e.(map[string]any)["base64"].(string))
				}
			}
		}
		for k, e := range x {
			var err error
			if x[k], err = stdTyped(e); err != nil {
				return nil, err
			}
		}
		return x, nil
	}
	return v, nil
}
