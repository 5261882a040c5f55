package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/storhdb/storh-go/storh/internal/errs"
	"github.com/storhdb/storh-go/storh/uuidv7"
)

// A batch validated before its transaction against the schema the DB had
// compiled, which SetSchema replaced before the batch committed, is judged
// by the schema at its commit: refused when only the new schema refuses
// it, stored when only the old one did. Enough records that the precheck
// runs across goroutines.
func TestPrecheckIsTrustedOnlyForTheSchemaAtCommit(t *testing.T) {
	loose := []byte(`{"type": "object"}`)
	strict := []byte(`{"type": "object", "required": ["name"]}`)
	for _, tc := range []struct {
		name       string
		from, to   []byte
		prechecked bool // whether the precheck passes the batch
		wantErr    error
	}{
		{"the new schema refuses", loose, strict, true, errs.ErrSchema},
		{"the old schema refused", strict, loose, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := Open(filepath.Join(t.TempDir(), "p.db"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			h := Handle{Name: "people", Kind: KindDocs}
			put := func(pre *Prechecked, values ...[]byte) error {
				return db.Update(func(tx *Tx) error {
					c, err := tx.Use(h, true)
					if err != nil {
						return err
					}
					for i, v := range values {
						if err := tx.PutPrechecked(c, uuidv7.New(), v, false, pre, i); err != nil {
							return fmt.Errorf("record %d: %w", i, err)
						}
					}
					return nil
				})
			}
			// The first write creates the collection with its schema, and
			// the second is validated by it, as writers' are.
			created := h
			created.Schema = tc.from
			if err := db.Update(func(tx *Tx) error {
				c, err := tx.Use(created, true)
				if err != nil {
					return err
				}
				return tx.Put(c, uuidv7.New(), recordValue(t, map[string]any{"name": "a"}), false)
			}); err != nil {
				t.Fatal(err)
			}
			if err := put(nil, recordValue(t, map[string]any{"name": "b"})); err != nil {
				t.Fatal(err)
			}

			values := make([][]byte, 4*precheckChunk)
			for i := range values {
				values[i] = recordValue(t, map[string]any{"age": i})
			}
			pre := db.Precheck(h.Name, values)
			if pre.schema == nil {
				t.Fatal("nothing was prechecked: the DB has no compiled schema for the collection")
			}
			if passed := pre.err == nil; passed != tc.prechecked {
				t.Fatalf("the precheck passed = %v (%v), want %v", passed, pre.err, tc.prechecked)
			}
			if err := db.SetSchema(h.Name, tc.to); err != nil {
				t.Fatal(err)
			}
			err = put(&pre, values...)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("the batch after SetSchema: %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// Precheck names the first record that fails, wherever the goroutine
// that found it started, and passes a batch that passes.
func TestPrecheckNamesTheFirstFailure(t *testing.T) {
	s, err := CompileSchema([]byte(`{"properties": {"n": {"minimum": 0}}}`))
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(filepath.Join(t.TempDir(), "p.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.colls.schemas.Store("c", s)
	for _, tc := range []struct {
		n    int
		bad  []int
		want int // the record named; n when none fails
	}{
		{1, nil, 1},
		{1, []int{0}, 0},
		{precheckChunk, []int{precheckChunk - 1}, precheckChunk - 1},
		{1000, nil, 1000},
		{1000, []int{999}, 999},
		{1000, []int{10, 600}, 10},
		{1000, []int{333, 334, 999}, 333},
		{1000, []int{700, 5}, 5},
	} {
		t.Run(fmt.Sprintf("n=%d/bad=%v", tc.n, tc.bad), func(t *testing.T) {
			values := make([][]byte, tc.n)
			for i := range values {
				values[i] = recordValue(t, map[string]any{"n": i})
			}
			for _, i := range tc.bad {
				values[i] = recordValue(t, map[string]any{"n": -i - 1})
			}
			pre := db.Precheck("c", values)
			if tc.n == 1 {
				pre = db.PrecheckValue("c", values[0])
			}
			if pre.schema != s || pre.failed != tc.want {
				t.Fatalf("failed = %d (schema %p), want %d (schema %p)", pre.failed, pre.schema, tc.want, s)
			}
			if (pre.err != nil) != (tc.want < tc.n) || pre.err != nil && !errors.Is(pre.err, errs.ErrSchema) {
				t.Fatalf("err = %v", pre.err)
			}
			for i := range tc.n {
				known, err := pre.verdict(s, i)
				if want := i <= tc.want; known != want {
					t.Fatalf("record %d: known = %v, want %v", i, known, want)
				}
				if (err != nil) != (i == tc.want) {
					t.Fatalf("record %d: err = %v", i, err)
				}
			}
			if other, _ := CompileSchema([]byte(`true`)); other != nil {
				if known, _ := pre.verdict(other, 0); known {
					t.Fatal("a precheck is trusted for another schema")
				}
			}
		})
	}
}

func recordValue(t testing.TB, data map[string]any) []byte {
	t.Helper()
	v, err := AppendValue(nil, data)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
