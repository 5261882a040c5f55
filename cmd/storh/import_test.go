package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh/jsonl"
)

// deepRow is a row the library rejects (nested deeper than storh.MaxDepth),
// so the rejection comes back from PutStream, not from the decoder.
var deepRow = `{"deep":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + "}"

// rowsWith makes n rows {"n":i}; lines listed in deep are deepRow, lines in
// broken are not JSON.
func rowsWith(n int, deep, broken []int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		switch {
		case slices.Contains(deep, i):
			b.WriteString(deepRow)
		case slices.Contains(broken, i):
			b.WriteString(`{"n":`)
		default:
			fmt.Fprintf(&b, `{"n":%d}`, i)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// importedNs exports a collection and returns the n values in id order.
func importedNs(t *testing.T, db, coll string) []int {
	t.Helper()
	out, stderr, code := runStorh(context.Background(), "", "--db", db, "export", coll)
	if strings.Contains(stderr, "does not exist") || strings.Contains(stderr, "no database at") {
		return nil // an import that wrote nothing removes the collection (or file) it made
	}
	if code != 0 {
		t.Fatalf("export: %s", stderr)
	}
	var ns []int
	for _, line := range strings.Fields(out) {
		row, err := jsonl.DecodeRow([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		ns = append(ns, int(row.Data["n"].(int64)))
	}
	return ns
}

func write(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestImportSkipInvalid puts rejected rows at batch edges: skipping one
// rolls its batch back and writes the batch again without it, so every
// other row lands exactly once and in order.
func TestImportSkipInvalid(t *testing.T) {
	deep := []int{1, 3, 4999, 5000, 5001, 9999, 10000, 12000}
	broken := []int{2, 7000}
	src := write(t, "rows.jsonl", rowsWith(12000, deep, broken))
	db := filepath.Join(t.TempDir(), "skip.db")
	_, stderr, code := runStorh(context.Background(), "", "--db", db, "import", "--skip-invalid", "rows", src)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "imported 11,990 records") || !strings.Contains(stderr, "skipped 10 invalid lines") {
		t.Errorf("summary: %s", stderr)
	}
	var want []int
	for i := 1; i <= 12000; i++ {
		if !slices.Contains(deep, i) && !slices.Contains(broken, i) {
			want = append(want, i)
		}
	}
	if got := importedNs(t, db, "rows"); !slices.Equal(got, want) {
		t.Errorf("imported %d rows, want %d; first difference near %v", len(got), len(want), firstDiff(got, want))
	}
	// The skipped lines are listed in input order.
	re := regexp.MustCompile(`line (\d+) skipped`)
	var listed []int
	for _, m := range re.FindAllStringSubmatch(stderr, -1) {
		n, _ := strconv.Atoi(m[1])
		listed = append(listed, n)
	}
	if want := []int{1, 2, 3, 4999, 5000, 5001, 7000, 9999, 10000, 12000}; !slices.Equal(listed, want) {
		t.Errorf("listed skipped lines %v, want %v", listed, want)
	}
}

func firstDiff(a, b []int) any {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return [2]int{a[i], b[i]}
		}
	}
	return "the end"
}

// TestImportStopsWholeBatches checks that a failed import commits whole
// batches only, and says which lines.
func TestImportStopsWholeBatches(t *testing.T) {
	tests := []struct {
		name          string
		deep, broken  []int
		committed     int
		committedLine string
	}{
		{"rejected in the first batch", []int{3}, nil, 0, "nothing was written"},
		{"rejected first of the second batch", []int{5001}, nil, 5000, "lines 1-5000 are committed"},
		{"rejected last of the second batch", []int{10000}, nil, 5000, "lines 1-5000 are committed"},
		{"broken in the third batch", nil, []int{10001}, 10000, "lines 1-10000 are committed"},
		{"broken last line", nil, []int{12000}, 10000, "lines 1-10000 are committed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := write(t, "rows.jsonl", rowsWith(12000, tt.deep, tt.broken))
			db := filepath.Join(t.TempDir(), "stop.db")
			_, stderr, code := runStorh(context.Background(), "", "--db", db, "import", "rows", src)
			if code != exitError {
				t.Fatalf("exit %d, want 1: %s", code, stderr)
			}
			bad := append(tt.deep, tt.broken...)[0]
			if !strings.Contains(stderr, fmt.Sprintf("line %d: ", bad)) || !strings.Contains(stderr, tt.committedLine) {
				t.Errorf("message does not name line %d and %q:\n%s", bad, tt.committedLine, stderr)
			}
			if got := len(importedNs(t, db, "rows")); got != tt.committed {
				t.Errorf("%d rows committed, want %d", got, tt.committed)
			}
		})
	}
}

// blockingReader serves data, then signals and blocks until closed, like a
// pipe whose writer has stopped.
type blockingReader struct {
	data    *bytes.Reader
	drained chan struct{}
	closed  chan struct{}
}

func (r *blockingReader) Read(p []byte) (int, error) {
	if r.data.Len() > 0 {
		return r.data.Read(p)
	}
	select {
	case r.drained <- struct{}{}:
	default:
	}
	<-r.closed
	return 0, io.EOF
}

// TestImportInterrupted cancels an import (Ctrl-C) while it waits for more
// input: what is committed is whole batches, and the message says how many.
func TestImportInterrupted(t *testing.T) {
	in := &blockingReader{data: bytes.NewReader(rowsWith(7000, nil, nil)), drained: make(chan struct{}, 1), closed: make(chan struct{})}
	db := filepath.Join(t.TempDir(), "int.db")
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"--db", db, "import", "rows", "-"}, in, io.Discard, &stderr, func(string) string { return "" })
	}()
	<-in.drained
	cancel()
	close(in.closed)
	if code := <-done; code != exitError {
		t.Fatalf("exit %d, want 1: %s", code, stderr.String())
	}
	msg := stderr.String()
	if !strings.Contains(msg, `import "rows" interrupted`) {
		t.Errorf("message: %s", msg)
	}
	n := len(importedNs(t, db, "rows"))
	switch {
	case n == 0 && strings.Contains(msg, "nothing was written"):
	case n == 5000 && strings.Contains(msg, "5,000 records from lines 1-5000 are committed"):
	default:
		t.Errorf("%d rows committed after an interrupt, message:\n%s", n, msg)
	}
}

// TestImportLongLine checks the line length limit without a huge file: a
// too-long line is one bad line, skippable like any other.
func TestImportLongLine(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 65 MiB file")
	}
	var b bytes.Buffer
	b.WriteString("{\"n\":1}\n{\"s\":\"")
	b.Write(bytes.Repeat([]byte("x"), jsonl.MaxLine))
	b.WriteString("\"}\n{\"n\":3}\n")
	src := write(t, "long.jsonl", b.Bytes())
	db := filepath.Join(t.TempDir(), "long.db")
	_, stderr, code := runStorh(context.Background(), "", "--db", db, "import", "--skip-invalid", "rows", src)
	if code != 0 || !strings.Contains(stderr, "line 2 skipped: the line is longer than 65.0 MiB") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := importedNs(t, db, "rows"); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("imported %v", got)
	}
}

// bigRows is rowsWith with rows of about 3 KB, so that the library ends its
// transactions on size (a few MiB) before 5,000 rows.
func bigRows(n int, deep []int) []byte {
	pad := strings.Repeat("p", 3000)
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		if slices.Contains(deep, i) {
			b.WriteString(deepRow)
		} else {
			fmt.Fprintf(&b, `{"n":%d,"pad":%q}`, i, pad)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// TestImportLargeRows rejects rows where a 5,000-row batch spans two of the
// library's transactions: the rows before the rejected one in the same
// batch may be committed already, and must be neither lost nor written or
// counted twice.
func TestImportLargeRows(t *testing.T) {
	deep := []int{4000, 4500, 9000}
	src := write(t, "big.jsonl", bigRows(10000, deep))
	db := filepath.Join(t.TempDir(), "big.db")
	stdout, stderr, code := runStorh(context.Background(), "", "--db", db, "--json", "import", "--skip-invalid", "rows", src)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var st importStats
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatal(err)
	}
	if st.Imported != 9997 || st.Inserted != 9997 || st.Replaced != 0 || st.Skipped != 3 || st.Invalid != 3 {
		t.Errorf("summary %+v", st)
	}
	var want []int
	for i := 1; i <= 10000; i++ {
		if !slices.Contains(deep, i) {
			want = append(want, i)
		}
	}
	if got := importedNs(t, db, "rows"); !slices.Equal(got, want) {
		t.Errorf("imported %d rows, want %d; first difference near %v", len(got), len(want), firstDiff(got, want))
	}

	// Without --skip-invalid the message names what is committed, exactly.
	db2 := filepath.Join(t.TempDir(), "stop.db")
	_, stderr, code = runStorh(context.Background(), "", "--db", db2, "import", "rows", src)
	if code != exitError {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got := importedNs(t, db2, "rows")
	m := regexp.MustCompile(`([0-9,]+) records? from lines 1-(\d+) (is|are) committed`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no committed lines in %s", stderr)
	}
	n, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
	last, _ := strconv.Atoi(m[2])
	if n != len(got) || last != len(got) || len(got) == 0 || len(got) >= 4000 {
		t.Errorf("message says %d records, lines 1-%d; %d are stored:\n%s", n, last, len(got), stderr)
	}
}

// TestImportCountsExact imports large rows (so the library splits batches),
// with ids that repeat, rows the library refuses and broken lines, under
// --on-duplicate=last --skip-invalid, and checks every count of the summary
// and the stored records against a model of what should be written.
func TestImportCountsExact(t *testing.T) {
	pad := strings.Repeat("p", 2500)
	var b bytes.Buffer
	written := map[int]int{} // id → the line whose data is stored
	var inserted, replaced, duplicates, invalid int
	for i := 1; i <= 9000; i++ {
		id := i
		if i%7 == 0 {
			id = i / 7 // repeats an earlier line's id
		}
		switch {
		case i%997 == 0:
			b.WriteString(`{"n":` + "\n")
			invalid++
			continue
		case i%1009 == 0:
			fmt.Fprintf(&b, `{"id":"0190a4f4-5c3b-7def-8123-%012d","data":%s}`+"\n", id, deepRow)
			invalid++
			continue
		}
		fmt.Fprintf(&b, `{"id":"0190a4f4-5c3b-7def-8123-%012d","data":{"n":%d,"pad":%q}}`+"\n", id, i, pad)
		if _, ok := written[id]; ok {
			replaced++
			duplicates++
		} else {
			inserted++
		}
		written[id] = i
	}
	src := write(t, "rows.jsonl", b.Bytes())
	db := filepath.Join(t.TempDir(), "counts.db")
	stdout, stderr, code := runStorh(context.Background(), "", "--db", db, "--json", "import", "--skip-invalid", "--on-duplicate=last", "rows", src)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var st importStats
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatal(err)
	}
	want := importStats{Imported: int64(inserted + replaced), Inserted: int64(inserted), Replaced: int64(replaced),
		Skipped: int64(invalid), Invalid: int64(invalid), Duplicates: int64(duplicates)}
	if st.Imported != want.Imported || st.Inserted != want.Inserted || st.Replaced != want.Replaced ||
		st.Skipped != want.Skipped || st.Invalid != want.Invalid || st.Duplicates != want.Duplicates {
		t.Errorf("summary\n  got  %+v\n  want %+v", st, want)
	}
	var stored []int
	for _, line := range written {
		stored = append(stored, line)
	}
	slices.Sort(stored)
	got := importedNs(t, db, "rows")
	slices.Sort(got)
	if !slices.Equal(got, stored) {
		t.Errorf("%d records stored, want %d; first difference near %v", len(got), len(stored), firstDiff(got, stored))
	}
}
