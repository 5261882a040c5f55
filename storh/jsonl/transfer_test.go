package jsonl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/objectid"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// countdown is a context that reports done after its Err has been asked n
// times: cancellation at a chosen check, the same in every run.
type countdown struct {
	context.Context
	left atomic.Int64
	done chan struct{}
	once sync.Once
}

func newCountdown(n int) *countdown {
	c := &countdown{Context: context.Background(), done: make(chan struct{})}
	c.left.Store(int64(n))
	return c
}

func (c *countdown) Err() error {
	if c.left.Add(-1) < 0 {
		c.once.Do(func() { close(c.done) })
		return context.Canceled
	}
	return nil
}

func (c *countdown) Done() <-chan struct{} { return c.done }

// testID is the i-th of a run of fixed ids.
func nthID(i int) uuidv7.UUID {
	return uuidv7.MustParse(fmt.Sprintf("0190a4f4-5c3b-7def-8123-%012x", i))
}

// fill writes n records {"n":i} with ids nthID(1..n).
func fill(t testing.TB, c storh.Collection, n int) {
	t.Helper()
	items := make([]any, n)
	for i := range items {
		items[i] = storh.Entry{ID: nthID(i + 1), Data: storh.Map{"n": i + 1, "s": strings.Repeat("x", i%7)}}
	}
	if _, err := c.PutMany(items); err != nil {
		t.Fatal(err)
	}
}

// lines splits output into its lines, each with its newline.
func lines(b []byte) []string {
	l := strings.SplitAfter(string(b), "\n")
	return l[:len(l)-1]
}

func TestExportForms(t *testing.T) {
	db := openDB(t)
	c := docs(t, db, "e")
	fill(t, c, 3)
	var full, compact bytes.Buffer
	rep, err := Export(context.Background(), &full, c, query.All())
	if err != nil || rep.Records != 3 || rep.Bytes != int64(full.Len()) {
		t.Fatalf("Export: %+v, %v (%d bytes written)", rep, err, full.Len())
	}
	if _, err := Export(context.Background(), &compact, c, query.All(), WithoutTime()); err != nil {
		t.Fatal(err)
	}
	recs, _ := c.Find(query.All())
	for i, rec := range recs {
		withTime, _ := AppendRecord(nil, rec.ID, rec.Raw())
		row, _ := AppendRow(nil, rec.ID, rec.Raw())
		if got := lines(full.Bytes())[i]; got != string(withTime) {
			t.Errorf("line %d: %s, want %s", i+1, got, withTime)
		}
		if got := lines(compact.Bytes())[i]; got != string(row) {
			t.Errorf("WithoutTime line %d: %s, want %s", i+1, got, row)
		}
	}
	if want := `{"id":"0190a4f4-5c3b-7def-8123-000000000001","data":{"n":1,"s":""}}` + "\n"; lines(compact.Bytes())[0] != want {
		t.Errorf("compact line %q, want %q", lines(compact.Bytes())[0], want)
	}
	// The query selects, in its order.
	var part bytes.Buffer
	rep, err = Export(context.Background(), &part, c, query.All().After(nthID(1)).Reverse(), WithoutTime())
	if err != nil || rep.Records != 2 || part.String() != lines(compact.Bytes())[2]+lines(compact.Bytes())[1] {
		t.Errorf("After(1).Reverse(): %+v, %v:\n%s", rep, err, part.String())
	}
	// A log exports the same way.
	lg, err := db.Log("l")
	if err != nil {
		t.Fatal(err)
	}
	fill(t, lg, 3)
	var fromLog bytes.Buffer
	if _, err := Export(context.Background(), &fromLog, lg, query.All()); err != nil || fromLog.String() != full.String() {
		t.Errorf("log export: %v\n%s", err, fromLog.String())
	}
}

// TestExportProgress checks the progress calls: every N records, then once
// at the end with the totals.
func TestExportProgress(t *testing.T) {
	db := openDB(t)
	c := docs(t, db, "p")
	fill(t, c, 2500)
	var calls []Progress
	var out bytes.Buffer
	rep, err := Export(context.Background(), &out, c, query.All(), WithProgress(1000, 0, func(p Progress) { calls = append(calls, p) }))
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 3 || calls[0].Records != 1000 || calls[1].Records != 2000 || calls[2] != (Progress{2500, int64(out.Len())}) {
		t.Errorf("progress calls %+v, report %+v", calls, rep)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i].Bytes <= calls[i-1].Bytes {
			t.Errorf("bytes do not grow: %+v", calls)
		}
	}
	// On time alone: called while it runs (checked every 64 records), and at the end.
	calls = nil
	if _, err := Export(context.Background(), io.Discard, c, query.All(), WithProgress(0, time.Nanosecond, func(p Progress) { calls = append(calls, p) })); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2500/64+1 || calls[0].Records != 64 || calls[len(calls)-1].Records != 2500 {
		t.Errorf("%d calls on time, first %+v, last %+v", len(calls), calls[0], calls[len(calls)-1])
	}
}

// TestExportCancel cancels exports at every few checks: the error wraps
// context.Canceled, and the writer holds exactly the records the report
// counts, as whole lines.
func TestExportCancel(t *testing.T) {
	db := openDB(t)
	c := docs(t, db, "c")
	fill(t, c, 3000)
	var all bytes.Buffer
	if _, err := Export(context.Background(), &all, c, query.All()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 2, 500, 2999} {
		var out bytes.Buffer
		var last Progress
		rep, err := Export(newCountdown(n), &out, c, query.All(), WithProgress(100, 0, func(p Progress) { last = p }))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("after %d checks: err = %v", n, err)
		}
		if rep.Records >= 3000 || !bytes.HasPrefix(all.Bytes(), out.Bytes()) || rep.Bytes != int64(out.Len()) ||
			len(strings.Split(out.String(), "\n"))-1 != rep.Records || (out.Len() > 0 && !strings.HasSuffix(out.String(), "\n")) {
			t.Errorf("after %d checks: report %+v, %d bytes written", n, rep, out.Len())
		}
		if last.Records != rep.Records || last.Bytes != rep.Bytes {
			t.Errorf("after %d checks: last progress %+v, report %+v", n, last, rep)
		}
	}
}

// failWriter fails after accepting limit bytes.
type failWriter struct {
	bytes.Buffer
	limit int
}

func (w *failWriter) Write(p []byte) (int, error) {
	if w.Len()+len(p) > w.limit {
		n := w.limit - w.Len()
		w.Buffer.Write(p[:n])
		return n, errors.New("disk full")
	}
	return w.Buffer.Write(p)
}

func TestExportWriteError(t *testing.T) {
	db := openDB(t)
	c := docs(t, db, "w")
	fill(t, c, 10000)
	w := &failWriter{limit: 300 << 10}
	rep, err := Export(context.Background(), w, c, query.All())
	if err == nil || err.Error() != "disk full" || rep.Bytes != int64(w.Len()) || rep.Records == 0 || rep.Records >= 10000 {
		t.Errorf("report %+v, %v; %d bytes written", rep, err, w.Len())
	}
	if n := strings.Count(w.String(), "\n"); n < rep.Records {
		t.Errorf("%d whole lines written, the report counts %d", n, rep.Records)
	}
}

// importAll imports in into a new docs collection of db.
func importInto(t *testing.T, c storh.Collection, in string, opts ...ImportOption) (ImportReport, error) {
	t.Helper()
	return Import(context.Background(), strings.NewReader(in), c, opts...)
}

func ns(t *testing.T, c storh.Collection) []int64 {
	t.Helper()
	var out []int64
	for rec, err := range c.Stream(query.All()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec.Data()["n"].(int64))
	}
	return out
}

func TestImportForms(t *testing.T) {
	db := openDB(t)
	c := docs(t, db, "f")
	in := "\xef\xbb\xbf" + `{"id":"` + nthID(1).String() + `","data":{"n":1}}` + "\r\n" +
		"\n" +
		`{"id":"` + nthID(2).String() + `","time":"2024-07-12T03:19:56.219Z","data":{"n":2}}` + "\n" +
		`{"data":{"n":3}}` + "\n" +
		`{"n":4,"at":{"$date":"2024-05-01T12:00:00Z"}}` + "\n" +
		"   \n"
	rep, err := importInto(t, c, in)
	want := ImportReport{Lines: 6, Imported: 4, Inserted: 4, CommittedLine: 5}
	if err != nil || rep != want {
		t.Fatalf("report %+v, %v; want %+v", rep, err, want)
	}
	if got := ns(t, c); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		t.Errorf("imported %v", got)
	}
	r1, _ := c.Get(nthID(1))
	if r1.Data()["n"] != int64(1) {
		t.Errorf("record 1 is %v", r1.Data())
	}
	// The same file again replaces the records with ids, and adds the others.
	rep, err = importInto(t, c, in)
	if want := (ImportReport{Lines: 6, Imported: 4, Inserted: 2, Replaced: 2, CommittedLine: 5}); err != nil || rep != want {
		t.Errorf("again: %+v, %v; want %+v", rep, err, want)
	}
}

func TestImportDuplicates(t *testing.T) {
	row := func(id, n int) string { return fmt.Sprintf(`{"id":"%s","data":{"n":%d}}`+"\n", nthID(id), n) }
	in := row(1, 1) + row(2, 2) + row(3, 3) + row(1, 4) + row(4, 5) + row(1, 6)
	db := openDB(t)

	// fail: the later line stops the import, before its batch is written.
	c := docs(t, db, "fail")
	rep, err := importInto(t, c, in)
	var le *LineError
	var de *DuplicateError
	if !errors.As(err, &le) || !errors.As(err, &de) || le.Line != 4 || de.First != 1 || de.ID != nthID(1) || rep.Imported != 0 {
		t.Fatalf("fail: %+v, %v", rep, err)
	}
	if want := "line 4: id " + nthID(1).String() + " is also on line 1: an import writes each id once"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if n, _ := c.Count(); n != 0 {
		t.Errorf("%d records written", n)
	}

	// last: written in input order, the later replacing the earlier.
	c = docs(t, db, "last")
	rep, err = importInto(t, c, in, OnDuplicate(DuplicateLast))
	if want := (ImportReport{Lines: 6, Imported: 6, Inserted: 4, Replaced: 2, Duplicates: 2, CommittedLine: 6}); err != nil || rep != want {
		t.Errorf("last: %+v, %v; want %+v", rep, err, want)
	}
	if got := ns(t, c); !slices.Equal(got, []int64{6, 2, 3, 5}) {
		t.Errorf("last: stored %v", got)
	}

	// skip: the earlier stays, the later lines are reported.
	c = docs(t, db, "skip")
	var skipped []string
	rep, err = importInto(t, c, in, OnDuplicate(DuplicateSkip), OnSkip(func(line int, err error) {
		skipped = append(skipped, fmt.Sprintf("%d %v", line, err))
	}))
	if want := (ImportReport{Lines: 6, Imported: 4, Inserted: 4, Skipped: 2, Duplicates: 2, CommittedLine: 5}); err != nil || rep != want {
		t.Errorf("skip: %+v, %v; want %+v", rep, err, want)
	}
	if got := ns(t, c); !slices.Equal(got, []int64{1, 2, 3, 5}) {
		t.Errorf("skip: stored %v", got)
	}
	if want := []string{"4 id " + nthID(1).String() + " is also on line 1: an import writes each id once",
		"6 id " + nthID(1).String() + " is also on line 1: an import writes each id once"}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %q", skipped)
	}

	// A log cannot replace: DuplicateLast is refused before reading.
	lg, err := db.Log("log")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := importInto(t, lg, in, OnDuplicate(DuplicateLast)); err == nil || !strings.Contains(err.Error(), "is a log") {
		t.Errorf("DuplicateLast into a log: %v", err)
	}
	if _, err := importInto(t, lg, in, OnDuplicate(Duplicates(7))); err == nil {
		t.Error("Duplicates(7) accepted")
	}
}

// TestImportSkipInvalid mixes lines the decoder refuses with rows the
// collection refuses, across batch edges: every good row is written once,
// in order, and the skipped lines come to OnSkip in line order.
func TestImportSkipInvalid(t *testing.T) {
	deep := `{"deep":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + "}"
	bad := map[int]string{1: deep, 2: `{"n":`, 3: deep, 4999: deep, 5000: deep, 5001: deep, 7000: `[1]`, 9999: deep, 10000: deep, 12000: `{"a":1,"a":2}`}
	var b strings.Builder
	var want []int64
	for i := 1; i <= 12000; i++ {
		if s, ok := bad[i]; ok {
			b.WriteString(s + "\n")
			continue
		}
		fmt.Fprintf(&b, `{"n":%d}`+"\n", i)
		want = append(want, int64(i))
	}
	db := openDB(t)

	c := docs(t, db, "skip")
	var skipped []int
	var reasons []error
	rep, err := importInto(t, c, b.String(), SkipInvalid(), OnSkip(func(line int, err error) {
		skipped = append(skipped, line)
		reasons = append(reasons, err)
	}))
	if want := (ImportReport{Lines: 12000, Imported: 11990, Inserted: 11990, Skipped: 10, Invalid: 10, CommittedLine: 11999}); err != nil || rep != want {
		t.Fatalf("report %+v, %v; want %+v", rep, err, want)
	}
	if got := ns(t, c); !slices.Equal(got, want) {
		t.Errorf("imported %d rows, want %d", len(got), len(want))
	}
	if want := []int{1, 2, 3, 4999, 5000, 5001, 7000, 9999, 10000, 12000}; !slices.Equal(skipped, want) {
		t.Errorf("skipped lines %v, want %v", skipped, want)
	}
	if !errors.Is(reasons[0], storh.ErrInvalidData) || !errors.Is(reasons[1], ErrSyntax) || !errors.Is(reasons[6], ErrRow) {
		t.Errorf("reasons %v", reasons)
	}

	// Without SkipInvalid the first bad line stops it, before its batch
	// (with the row before it) is written.
	c = docs(t, db, "stop")
	rep, err = importInto(t, c, b.String())
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, ErrSyntax) || rep.Imported != 0 || rep.CommittedLine != 0 {
		t.Errorf("stop: %+v, %v", rep, err)
	}
	// A row the collection refuses stops it too, naming the line.
	c = docs(t, db, "refused")
	rep, err = importInto(t, c, strings.Repeat(`{"n":0}`+"\n", 5000)+deep+"\n")
	if !errors.As(err, &le) || le.Line != 5001 || !errors.Is(err, storh.ErrInvalidData) || rep.Imported != 5000 || rep.CommittedLine != 5000 {
		t.Errorf("refused: %+v, %v", rep, err)
	}
}

func TestImportInvalidUTF8(t *testing.T) {
	db := openDB(t)
	in := "{\"n\":1,\"s\":\"caf\xe9\"}\n"
	_, err := importInto(t, docs(t, db, "strict"), in)
	if !InvalidUTF8(err) {
		t.Errorf("strict: %v", err)
	}
	c := docs(t, db, "binary")
	if _, err := importInto(t, c, in, InvalidUTF8AsBinary()); err != nil {
		t.Fatal(err)
	}
	recs, _ := c.Find(query.All())
	if len(recs) != 1 || !bytes.Equal(recs[0].Data()["s"].([]byte), []byte("caf\xe9")) {
		t.Errorf("stored %v", recs)
	}
}

func TestImportMongo(t *testing.T) {
	db := openDB(t)
	c := docs(t, db, "users")
	oid := objectid.MustParse("5e0be232153bcf7c10df5e93")
	in := `{"_id":{"$oid":"5e0be232153bcf7c10df5e93"},"name":"Lena","n":{"$numberLong":"7"}}` + "\n" +
		`{"_id":"custom","name":"Bo"}` + "\n"
	rep, err := importInto(t, c, in, Mongo())
	if want := (ImportReport{Lines: 2, Imported: 2, Inserted: 2, ForeignIDs: 1, CommittedLine: 2}); err != nil || rep != want {
		t.Fatalf("report %+v, %v; want %+v", rep, err, want)
	}
	rec, err := c.Get(uuidv7.UUID(oid.UUIDv7()))
	if err != nil || !reflect.DeepEqual(rec.Data(), storh.Map{"_oid": oid, "name": "Lena", "n": int64(7)}) {
		t.Errorf("record of the ObjectID: %v, %v", rec.Data(), err)
	}
	// Again: the ObjectID record is replaced, the other one copied.
	rep, err = importInto(t, c, in+`{"_id":{"$oid":"5e0be232153bcf7c10df5e93"}}`+"\n", Mongo())
	var de *DuplicateError
	if !errors.As(err, &de) || de.OID != oid.Hex() || !strings.Contains(err.Error(), "_id 5e0be232153bcf7c10df5e93 (record id ") {
		t.Errorf("a repeated _id: %v", err)
	}
	// Without Mongo, the same lines are bare objects.
	c2 := docs(t, db, "plain")
	if _, err := importInto(t, c2, in); err != nil {
		t.Fatal(err)
	}
	recs, _ := c2.Find(query.All())
	if len(recs) != 2 || recs[0].Data()["_id"] != oid {
		t.Errorf("plain: %v", recs[0].Data())
	}
}

// TestImportLineFunc changes rows, explains errors and rejects lines from
// the line function.
func TestImportLineFunc(t *testing.T) {
	db := openDB(t)
	c := docs(t, db, "lf")
	in := `{"n":1}` + "\n" + `{"n":` + "\n" + `{"n":3,"secret":true}` + "\n"
	var seen []string
	fn := func(line int, text []byte, r Row, err error) (Row, error) {
		seen = append(seen, fmt.Sprintf("%d %s", line, text))
		switch {
		case err != nil:
			return r, fmt.Errorf("%w (a hint)", err)
		case r.Data["secret"] == true:
			return r, errors.New("no secrets")
		}
		r.Data["line"] = line
		return r, nil
	}
	var skipped []string
	rep, err := importInto(t, c, in, WithLineFunc(fn), SkipInvalid(), OnSkip(func(line int, err error) {
		skipped = append(skipped, fmt.Sprintf("%d %v", line, err))
	}))
	if err != nil || rep.Imported != 1 || rep.Invalid != 2 {
		t.Fatalf("%+v, %v", rep, err)
	}
	if want := []string{`1 {"n":1}`, `2 {"n":`, `3 {"n":3,"secret":true}`}; !slices.Equal(seen, want) {
		t.Errorf("seen %q", seen)
	}
	if len(skipped) != 2 || !strings.HasSuffix(skipped[0], "(a hint)") || skipped[1] != "3 no secrets" {
		t.Errorf("skipped %q", skipped)
	}
	recs, _ := c.Find(query.All())
	if len(recs) != 1 || recs[0].Data()["line"] != int64(1) {
		t.Errorf("stored %v", recs)
	}
}

// TestImportCancel cancels imports at chosen checks: only whole batches
// are committed, and the report says how many records.
func TestImportCancel(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 12000; i++ {
		fmt.Fprintf(&b, `{"n":%d}`+"\n", i)
	}
	db := openDB(t)
	for _, n := range []int{0, 1, 3000, 5000, 10001, 10010, 15000, 22000} {
		c := docs(t, db, fmt.Sprint("c", n))
		var last Progress
		rep, err := Import(newCountdown(n), strings.NewReader(b.String()), c, WithProgress(1000, 0, func(p Progress) { last = p }))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("after %d checks: %+v, %v", n, rep, err)
		}
		stored, _ := c.Count()
		if rep.Imported%storh.StreamBatch != 0 || stored != rep.Imported || rep.CommittedLine != rep.Imported || rep.Imported >= 12000 {
			t.Errorf("after %d checks: report %+v, %d stored", n, rep, stored)
		}
		if got := ns(t, c); len(got) > 0 && got[len(got)-1] != int64(rep.Imported) {
			t.Errorf("after %d checks: the last record stored is %d", n, got[len(got)-1])
		}
		if last.Records < rep.Imported {
			t.Errorf("after %d checks: progress %+v, report %+v", n, last, rep)
		}
	}
}

// blockingReader serves data, then blocks until released, like a pipe
// whose writer has stopped.
type blockingReader struct {
	data    *strings.Reader
	drained chan struct{}
	release chan struct{}
	reads   atomic.Int64
}

func (r *blockingReader) Read(p []byte) (int, error) {
	r.reads.Add(1)
	if r.data.Len() > 0 {
		return r.data.Read(p)
	}
	select {
	case r.drained <- struct{}{}:
	default:
	}
	<-r.release
	return 0, io.EOF
}

// TestImportCancelWhileReading cancels an import that waits for input: it
// returns at once, with the whole batches committed, and reads no more.
func TestImportCancelWhileReading(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 7000; i++ {
		fmt.Fprintf(&b, `{"n":%d}`+"\n", i)
	}
	in := &blockingReader{data: strings.NewReader(b.String()), drained: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(in.release)
	db := openDB(t)
	c := docs(t, db, "r")
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		rep ImportReport
		err error
	}
	done := make(chan result)
	go func() {
		rep, err := Import(ctx, in, c)
		done <- result{rep, err}
	}()
	<-in.drained
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if n, _ := c.Count(); n == 5000 || time.Now().After(deadline) {
			break // the first batch is committed; the rest waits for more input
		}
	}
	cancel()
	select {
	case r := <-done:
		if !errors.Is(r.err, context.Canceled) || r.rep.Imported != 5000 || r.rep.CommittedLine != 5000 {
			t.Errorf("report %+v, %v", r.rep, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Import did not return after the cancel while its input blocked")
	}
	if n, _ := c.Count(); n != 5000 {
		t.Errorf("%d records stored", n)
	}
	reads := in.reads.Load()
	time.Sleep(10 * time.Millisecond)
	if in.reads.Load() != reads {
		t.Error("the input is read after Import returned")
	}
}

func TestImportProgress(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 12000; i++ {
		fmt.Fprintf(&b, `{"n":%d}`+"\n", i)
	}
	db := openDB(t)
	var calls []Progress
	rep, err := Import(context.Background(), strings.NewReader(b.String()), docs(t, db, "p"),
		WithProgress(5000, 0, func(p Progress) { calls = append(calls, p) }))
	if err != nil || rep.Imported != 12000 {
		t.Fatal(rep, err)
	}
	if len(calls) != 3 || calls[0].Records < 5000 || calls[1].Records < 10000 || calls[2] != (Progress{12000, int64(b.Len())}) {
		t.Errorf("progress calls %+v", calls)
	}
}

// TestImportReadError stops at an input that fails: the lines before it
// are imported whole batches at a time, and the error names the line.
func TestImportReadError(t *testing.T) {
	db := openDB(t)
	c := docs(t, db, "e")
	in := io.MultiReader(strings.NewReader(`{"n":1}`+"\n"+`{"n":2}`+"\n"), iotestErrReader{})
	rep, err := Import(context.Background(), in, c, SkipInvalid())
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 || !strings.Contains(err.Error(), "reading the input: broken pipe") || rep.Imported != 0 {
		t.Errorf("%+v, %v", rep, err)
	}
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestImportTooLong checks the line limit with a line just over it.
func TestImportTooLong(t *testing.T) {
	if testing.Short() {
		t.Skip("a 65 MiB line")
	}
	db := openDB(t)
	c := docs(t, db, "long")
	in := `{"n":1}` + "\n" + `{"s":"` + strings.Repeat("x", MaxLine) + `"}` + "\n" + `{"n":3}` + "\n"
	var reasons []error
	rep, err := importInto(t, c, in, SkipInvalid(), OnSkip(func(_ int, err error) { reasons = append(reasons, err) }))
	if err != nil || rep.Imported != 2 || len(reasons) != 1 || !errors.Is(reasons[0], ErrLineTooLong) {
		t.Errorf("%+v, %v, %v", rep, err, reasons)
	}
	if ErrLineTooLong.Error() != "jsonl: the line is longer than 65.0 MiB" {
		t.Errorf("ErrLineTooLong = %q", ErrLineTooLong)
	}
}

// A collection's JSON Schema holds for imported rows: a row it refuses
// stops the import, naming the line, before its batch is written; with
// SkipInvalid the row is skipped and every other row is written.
func TestImportMeetsSchema(t *testing.T) {
	db := openDB(t)
	schema := []byte(`{"required":["n"],"properties":{"n":{"type":"integer","minimum":0}}}`)
	in := "{\"n\":1}\n{\"n\":2}\n{\"n\":-3}\n{\"n\":4}\n"
	c, err := db.Docs("strict", storh.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := importInto(t, c, in)
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 || !errors.Is(err, storh.ErrSchema) || !strings.Contains(err.Error(), "/n: minimum") || rep.Imported != 0 {
		t.Fatalf("import of a row the schema refuses: %+v, %v", rep, err)
	}
	if n, _ := c.Count(); n != 0 {
		t.Fatalf("%d rows written", n)
	}
	var skipped []int
	rep, err = importInto(t, c, in, SkipInvalid(), OnSkip(func(line int, err error) {
		if !errors.Is(err, storh.ErrSchema) {
			t.Errorf("line %d skipped for %v, want ErrSchema", line, err)
		}
		skipped = append(skipped, line)
	}))
	if err != nil || rep.Imported != 3 || rep.Skipped != 1 || !slices.Equal(skipped, []int{3}) {
		t.Fatalf("SkipInvalid: %+v, %v, skipped %v", rep, err, skipped)
	}
	if got := ns(t, c); !slices.Equal(got, []int64{1, 2, 4}) {
		t.Errorf("imported %v", got)
	}
}
